"""Helpers for the TUI tests: a backend that records requests, a settle step."""

from __future__ import annotations

import threading

SIZE = (160, 48)


class RecordingBackend:
    """A duck-typed backend: records every request the app forwards to it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.threads: set[str] = set()
        self._lock = threading.Lock()

    def __getattr__(self, name: str):
        if not name.startswith("on_"):
            raise AttributeError(name)

        def record(message) -> None:
            with self._lock:
                self.calls.append((name, message))
                self.threads.add(threading.current_thread().name)

        return record

    def named(self, handler: str) -> list:
        with self._lock:
            return [message for name, message in self.calls if name == handler]


async def settle(pilot) -> None:
    """Let messages, thread workers and the refresh after them finish."""
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
