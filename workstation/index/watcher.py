"""Keep the knowledge map live: watchdog events, coalesced, re-indexed in the background.

Events are gathered until the tree has been quiet for `debounce_s` (50 ms),
or at most `max_delay_s` after the first one, then the touched paths go
through `KnowledgeMap.ensure_fresh(paths)` in one batch: an editor's save
(write temp, rename, chmod) or a `git checkout` costs one refresh, not many.
Events inside `.git` and the state folder are dropped at once, or every
database write would wake the watcher.

    with Watcher(km, on_change=print) as w:
        ...   # the map follows the disk; on_change(MapChange) after each refresh
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Callable

from ..errors import WorkstationError
from ..paths import STATE_DIRNAME
from .map import IGNORE_FILE, KnowledgeMap, MapChange

if TYPE_CHECKING:
    from watchdog.events import FileSystemEvent
    from watchdog.observers.api import BaseObserver

log = logging.getLogger(__name__)

_RELEVANT = frozenset({"created", "deleted", "modified", "moved", "closed"})


class Watcher:
    def __init__(self, km: KnowledgeMap, on_change: Callable[[MapChange], None] | None = None,
                 on_error: Callable[[Exception], None] | None = None,
                 debounce_s: float = 0.05, max_delay_s: float = 0.2):
        self.km = km
        self.on_change = on_change
        self.on_error = on_error
        self.debounce_s = debounce_s
        self.max_delay_s = max_delay_s
        self.root = str(km.root)
        self._prefix = self.root + os.sep
        dropped = {os.path.join(self.root, ".git"), os.path.join(self.root, STATE_DIRNAME),
                   os.path.realpath(km.paths.state)}
        self._ignore_file = os.path.join(self.root, IGNORE_FILE)  # the one file in there that matters
        self._drop_exact = frozenset(dropped)
        self._drop = tuple(p + os.sep for p in dropped)
        self._cond = threading.Condition()
        self._pending: set[str] = set()
        self._first_event = 0.0
        self._last_event = 0.0
        self._stop = False
        self._observer: BaseObserver | None = None
        self._thread: threading.Thread | None = None
        self.refreshes = 0  # batches processed, for tests and the TUI

    # -- events (watchdog's thread) --------------------------------------------------------
    def _rel(self, path: str | bytes) -> str | None:
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if path == self._ignore_file:
            return IGNORE_FILE
        if not path or path.startswith(self._drop) or path in self._drop_exact:
            return None
        if path == self.root:
            return ""
        if not path.startswith(self._prefix):
            return None
        return path[len(self._prefix):].replace(os.sep, "/")

    def dispatch(self, event: FileSystemEvent) -> None:
        """watchdog calls this for every event (through start's Handler)."""
        if event.event_type not in _RELEVANT:
            return
        if event.is_directory and event.event_type == "modified":
            return  # a folder's entries changed: the entries' own events follow
        paths = [event.src_path, event.dest_path] if event.event_type == "moved" else [event.src_path]
        rels = [r for r in map(self._rel, paths) if r is not None]
        if not rels:
            return
        now = time.monotonic()
        with self._cond:
            if not self._pending:
                self._first_event = now
            self._pending.update(rels)
            self._last_event = now
            self._cond.notify()

    # -- refreshes (our thread) ------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                while not self._stop:  # coalesce: wait for a quiet moment, but not forever
                    now = time.monotonic()
                    quiet_at = self._last_event + self.debounce_s
                    deadline = self._first_event + self.max_delay_s
                    if now >= quiet_at or now >= deadline:
                        break
                    self._cond.wait(min(quiet_at, deadline) - now)
                batch, self._pending = sorted(self._pending), set()
            self._refresh(batch)

    def _refresh(self, batch: list[str]) -> None:
        try:
            change = self.km.ensure_fresh(batch if "" not in batch else None)
        except Exception as err:  # the watcher must outlive a failed refresh; the gate retries
            log.warning("knowledge map refresh failed: %s", err)
            if self.on_error is not None:
                self.on_error(err)
            return
        self.refreshes += 1
        if self.on_change is not None and not change.empty:
            self.on_change(change)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> "Watcher":
        from watchdog.events import FileSystemEventHandler  # lazy: watchdog, +22 ms on map commands that do not watch
        from watchdog.observers import Observer  # lazy: as above

        watcher = self

        class Handler(FileSystemEventHandler):  # watchdog's handler type: every event to `dispatch`
            def dispatch(self, event: FileSystemEvent) -> None:
                watcher.dispatch(event)

        self._stop = False
        self._thread = threading.Thread(target=self._loop, name="ws-kmap-watch", daemon=True)
        self._thread.start()
        self._observer = observer = Observer()
        try:
            observer.schedule(Handler(), self.root, recursive=True)
            observer.start()
        except OSError as err:
            self.stop()
            if err.errno == errno.ENOSPC:
                raise WorkstationError(
                    f"cannot watch {self.root}: the inotify watch limit is reached "
                    "(raise fs.inotify.max_user_watches, or ignore big generated folders)") from None
            raise WorkstationError(f"cannot watch {self.root}: {err.strerror or err}") from None
        return self

    def stop(self) -> None:
        observer, self._observer = self._observer, None
        if observer is not None and observer.is_alive():
            observer.stop()
            observer.join(timeout=5)
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    @property
    def alive(self) -> bool:
        return bool(self._observer is not None and self._observer.is_alive()
                    and self._thread is not None and self._thread.is_alive())

    def __enter__(self) -> "Watcher":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
