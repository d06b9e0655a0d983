"""Short-term memory: an execution's scratch, in this process only.

A dict behind one lock of its own (no other tier ever takes it), so reads
and writes cost about a microsecond and never wait on LTM or episodic I/O.
Values may be any Python object. STM dies with the execution; `publish()`
copies a JSON view of it to the owner so `workstation memory get --tier stm`
in another process can look at a running execution (see router.py).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Iterator

from ..process import alive
from ..store.broker import owner_state, readonly

MISSING: Any = object()


class STM:
    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, key: str, default: Any = MISSING) -> Any:
        with self._lock:
            return self._data.get(key, default)

    def set(self, key: str, value: Any) -> None:
        with self._lock:
            self._data[key] = value

    def delete(self, key: str) -> bool:
        with self._lock:
            return self._data.pop(key, MISSING) is not MISSING

    def keys(self, prefix: str = "") -> list[str]:
        with self._lock:
            return sorted(k for k in self._data if k.startswith(prefix))

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def snapshot_json(self) -> dict[str, str]:
        """Each value as JSON text; values JSON cannot hold are shown by repr, marked as such."""
        with self._lock:
            items = list(self._data.items())
        out = {}
        for key, value in items:
            try:
                out[key] = json.dumps(value, ensure_ascii=False, allow_nan=False)
            except (TypeError, ValueError):
                out[key] = json.dumps({"$repr": repr(value)[:2000]})
        return out


# ---------------------------------------------------------------- owner side: published STM

class _Mirrors:
    """STM snapshots published by running executions, kept in the owner's memory only."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_execution: dict[str, dict] = {}


def _mirrors() -> _Mirrors:
    return owner_state("stm.mirrors", _Mirrors)


@readonly  # no database writes: no write lock needed
def stm_publish(con, execution: str, session: str, flow: str, pid: int, values: dict[str, str]) -> None:
    mirrors = _mirrors()
    with mirrors.lock:
        mirrors.by_execution[execution] = {"execution": execution, "session": session, "flow": flow,
                                           "pid": pid, "published_at": time.time(), "values": values}


@readonly
def stm_withdraw(con, execution: str) -> None:
    mirrors = _mirrors()
    with mirrors.lock:
        mirrors.by_execution.pop(execution, None)


@readonly
def stm_published(con, session: str | None) -> list[dict]:
    """Snapshots of live executions (those of dead processes are dropped here)."""
    mirrors = _mirrors()
    with mirrors.lock:
        for key in [k for k, m in mirrors.by_execution.items() if not alive(m["pid"])]:
            del mirrors.by_execution[key]
        return [m for m in mirrors.by_execution.values() if session is None or m["session"] == session]


