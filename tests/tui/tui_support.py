"""Helpers for the TUI tests: a backend that records requests, a settle step."""

from __future__ import annotations

import threading
from contextlib import asynccontextmanager

from workstation.tui.panes.deferred import all_built

SIZE = (160, 48)


class RecordingBackend:
    """A seam.Backend that records every request the app forwards to it (any `on_*` name)."""

    def __init__(self, workspace=None, session_slug: str | None = None) -> None:
        self.calls: list[tuple[str, object]] = []
        self.threads: set[str] = set()
        self._lock = threading.Lock()
        self.workspace = workspace
        self.session_slug = session_slug

    def start(self, app) -> None:
        pass

    def stop(self) -> None:
        pass

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


@asynccontextmanager
async def started(app, size=SIZE):
    """`app.run_test`, entered once the deferred panes have their widgets (a frame after the first)."""
    async with app.run_test(size=size) as pilot:
        await all_built(app.screen)
        yield pilot


async def settle(pilot) -> None:
    """Let the panes finish mounting, then messages, thread workers and the refresh after them."""
    await all_built(pilot.app.screen)
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
