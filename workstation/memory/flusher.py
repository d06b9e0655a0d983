"""One background thread per process that flushes memory write buffers.

LTM writes and episodic appends are buffered in the writing process and sent
to the owner in batches: every ~100 ms here, at once when a buffer grows
large, and synchronously on fence/close. A background flush that fails keeps
its data buffered and the error is raised by the next fence, never dropped.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from typing import Protocol

log = logging.getLogger(__name__)

INTERVAL_S = 0.1


class Buffer(Protocol):
    def background_flush(self) -> None: ...


class BufferedWriter:
    """The lifecycle every buffered tier shares (LTM, episodic): registered with the process's flusher
    at birth; `fence()` sends everything buffered and returns once it is committed; the background
    flush never blocks a writer or raises (a failure keeps the data, the next fence retries and raises);
    `close()` fences, then leaves the flusher. Subclasses say what is pending and how to send it."""

    _tier = "memory"  # for the warning a failed background flush logs

    def __init__(self) -> None:
        self._flush_lock = threading.Lock()  # one flush at a time; never taken by a write
        flusher().register(self)

    def _has_pending(self) -> bool:  # an unlocked look: a stale answer only delays a flush by one round
        raise NotImplementedError

    def _flush_locked(self) -> None:  # called with _flush_lock held; raises on failure, keeping the data
        raise NotImplementedError

    def fence(self) -> None:
        """Return once every earlier write of this writer is committed and visible to every reader."""
        with self._flush_lock:
            self._flush_locked()

    def background_flush(self) -> None:
        if not self._has_pending() or not self._flush_lock.acquire(blocking=False):
            return
        try:
            self._flush_locked()
        except Exception as err:  # the data stays buffered; the next fence retries and raises
            log.warning("background %s flush failed, will retry: %s", self._tier, err)
        finally:
            self._flush_lock.release()

    def close(self) -> None:
        try:
            self.fence()
        finally:
            flusher().unregister(self)


class Flusher:
    def __init__(self) -> None:
        self._buffers: "weakref.WeakSet[Buffer]" = weakref.WeakSet()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def register(self, buffer: Buffer) -> None:
        with self._lock:
            self._buffers.add(buffer)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="ws-memory-flush", daemon=True)
                self._thread.start()

    def unregister(self, buffer: Buffer) -> None:
        with self._lock:
            self._buffers.discard(buffer)

    def wake(self) -> None:
        # Writers call this on every write past their threshold until the flush runs;
        # Event.set() takes a lock and notifies, is_set() is a plain read.
        if not self._wake.is_set():
            self._wake.set()

    def _loop(self) -> None:
        while True:
            self._wake.wait(INTERVAL_S)
            self._wake.clear()
            with self._lock:
                buffers = list(self._buffers)
            for buffer in buffers:
                buffer.background_flush()  # keeps its data and error on failure; never raises
            del buffers


_flusher: Flusher | None = None
_flusher_lock = threading.Lock()


def flusher() -> Flusher:
    global _flusher
    if _flusher is not None:  # the usual case, on every buffered write past its threshold: no lock
        return _flusher
    with _flusher_lock:
        if _flusher is None:
            _flusher = Flusher()
        return _flusher


def _forget_in_child() -> None:
    global _flusher, _flusher_lock
    _flusher, _flusher_lock = None, threading.Lock()  # the thread did not survive the fork


os.register_at_fork(after_in_child=_forget_in_child)
