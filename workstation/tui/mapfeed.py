"""Feeds the map pane from the knowledge map, and keeps it true to the index as files change.

The first index runs with a progress bar; then every refresh that changes the
map (the watcher's, after an edit on disk; the agent's, after its own edits)
reaches `changed` as a `MapChange`. That listener runs under the map's lock, so
it only notes the paths; a thread of its own then reads the new facts (line
counts, purposes, symbols) and sends them to the pane, which shows … on a file
whose symbols are on their way and ✓ once the row holds what the index holds.

Runs on the backend's threads; the pane is touched only through
`app.call_from_thread`. Nothing here imports textual.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, Callable

from ..errors import WorkstationError
from ..index.watcher import Watcher
from .viewdata import MapEntry, SymbolEntry, human_count

if TYPE_CHECKING:
    from ..index.describe import DescribeReport
    from ..index.map import FileInfo, KnowledgeMap, MapChange
    from .panes.map import MapPane

log = logging.getLogger(__name__)

DESCRIBE_PER_START = 100  # a bound on what one start spends; purposes persist, so later starts go on
DESCRIBE_SHOW_S = 1.0  # new purposes reach the pane at most this often while the model describes


class MapFeed:
    def __init__(self, kmap: KnowledgeMap, pane: MapPane, ui: Callable[..., Any], warn: Callable[[str], None],
                 closing: threading.Event, job: Callable[[str], None] | None = None,
                 paths: Callable[[list[str]], None] | None = None):
        self.kmap = kmap
        self.pane = pane
        self._ui = ui  # app.call_from_thread
        self._warn = warn  # one line for the user, from any thread
        self._closing = closing
        self._job = job  # one status line of the describing run (progress, then its cost), from any thread
        self._paths = paths  # every indexed path, sorted, whenever the set changes (the prompt's @file completion)
        self._sent_paths: list[str] | None = None
        self.described: DescribeReport | None = None  # the last describing run's report, for tests
        self.watcher = None
        self.state = "fresh"  # what a file's badge says once its row holds the index's facts
        self._cond = threading.Condition()
        self._indexed: set[str] = set()
        self._removed: set[str] = set()
        self._thread: threading.Thread | None = None
        self.applied = 0  # changes sent to the pane, for tests

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Index (with progress), show the top level, then follow every change (blocks while indexing)."""
        def progress(done: int, total: int, *_: Any) -> None:
            self._ui(self.pane.set_progress, done, total, "indexing")

        self._ui(self.pane.set_progress, 0, None, "scanning")
        self.kmap.index_all(progress=progress)
        self._ui(self.pane.set_progress, None)
        self.kmap.add_listener(self.changed)
        self._thread = threading.Thread(target=self._follow, name="map-feed", daemon=True)
        self._thread.start()
        try:
            self.watcher = Watcher(self.kmap).start()  # its refreshes reach `changed` as the map's own do
        except WorkstationError as err:
            self.state = "unknown"  # edits made outside the app will not show: no row may claim ✓
            self._warn(f"the map will not follow edits made outside the app: {err}")
        files = self.kmap.files()
        self._ui(self.pane.set_root, self.children("", files))
        self._send_paths(files)

    def stop(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
        self.kmap.remove_listener(self.changed)
        with self._cond:
            self._cond.notify_all()  # the closing event is set: the follower returns
        if self._thread is not None:
            self._thread.join(timeout=5)

    # ------------------------------------------------------------------ rows
    def entry(self, info: FileInfo) -> MapEntry:
        return MapEntry(info.path, "file", info.purpose, info.line_count, info.language or "", self.state)

    def children(self, folder: str, files: list[FileInfo] | None = None) -> list[MapEntry]:
        prefix = f"{folder}/" if folder else ""
        dirs: dict[str, int] = {}
        found: list[MapEntry] = []
        for info in self.kmap.files() if files is None else files:
            if not info.path.startswith(prefix):
                continue
            rest = info.path[len(prefix):]
            if "/" in rest:
                name = rest.split("/", 1)[0]
                dirs[name] = dirs.get(name, 0) + 1
            else:
                found.append(self.entry(info))
        out = [MapEntry(prefix + name, "dir", f"{count} files") for name, count in sorted(dirs.items())]
        return out + sorted(found, key=lambda e: e.path)

    def symbols(self, path: str) -> list[SymbolEntry]:
        return [SymbolEntry(s.name, s.kind, s.start_line, s.end_line, s.parent or "", s.signature)
                for s in self.kmap.symbols(path)]

    def show(self, info: FileInfo) -> None:
        """New facts about a file on screen; its symbols follow when they are shown."""
        if self._ui(self.pane.update_entry, self.entry(info)):
            self._ui(self.pane.set_symbols, info.path, self.symbols(info.path))

    # ------------------------------------------------------------------ following changes
    def changed(self, change: MapChange) -> None:
        """A map listener (any thread, under the map's lock): note what changed for the follower."""
        with self._cond:
            self._indexed.update(change.indexed)
            self._indexed.difference_update(change.removed)
            self._removed.update(change.removed)
            self._removed.difference_update(change.indexed)
            self._cond.notify()

    def _follow(self) -> None:
        while True:
            with self._cond:
                while not (self._indexed or self._removed) and not self._closing.is_set():
                    self._cond.wait()
                if self._closing.is_set():
                    return
                indexed, self._indexed = sorted(self._indexed), set()
                removed, self._removed = sorted(self._removed), set()
            try:
                self._apply(indexed, removed)
            except Exception as err:  # the follower must outlive one failed update; the next change retries
                if self._closing.is_set():
                    return  # the app closed under it
                log.warning("map pane update failed: %s", err)
                self._warn(f"the map pane could not show a change: {err}")

    def _apply(self, indexed: list[str], removed: list[str]) -> None:
        pane = self.pane
        for path in removed:
            self._ui(pane.update_freshness, path, "deleted")
        if not indexed:
            self._send_paths(self.kmap.files())
            self.applied += 1
            return
        files = self.kmap.files()
        self._send_paths(files)
        by_path = {info.path: info for info in files}
        folders: set[str] = set()
        for path in indexed:
            info = by_path.get(path)
            if info is None:
                continue  # gone again since
            if self._ui(pane.node_for, path) is None:
                parent = str(PurePosixPath(path).parent)
                folders.add("" if parent == "." else parent)
            else:
                self.show(info)
        for folder in sorted(folders):
            if folder == "" or self._ui(pane.node_for, folder) is not None:
                self._ui(pane.set_children, folder, self.children(folder, files))
        self.applied += 1

    def _send_paths(self, files: list[FileInfo]) -> None:
        paths = sorted(info.path for info in files)
        if self._paths is not None and paths != self._sent_paths:
            self._sent_paths = paths
            self._ui(self._paths, paths)

    # ------------------------------------------------------------------ purposes
    def describe(self) -> None:
        """Model-written purposes for files whose source gives none, when index.describe_with_model is on:
        after everything else has loaded, with its progress and then its cost on one status line, each
        purpose shown as it lands; the app's closing cancels it."""
        if not self.kmap.config.index.describe_with_model:
            return  # opt-in: not a request, not a line
        before = {f.path for f in self.kmap.files() if not f.purpose}
        shown_at = [time.monotonic()]

        def progress(report: DescribeReport) -> None:
            if self._closing.is_set():
                return
            self._tell(describe_line(report, running=True))
            if report.described and time.monotonic() - shown_at[0] >= DESCRIBE_SHOW_S:
                shown_at[0] = time.monotonic()
                self._show_described(before)

        report = self.kmap.describe_files(DESCRIBE_PER_START, cancel=self._closing, progress=progress)
        self.described = report
        if self._closing.is_set():
            return  # cancelled by the app's stop: nobody to tell
        if report.described:
            self._show_described(before)
        if report.total or report.stopped:
            self._tell(describe_line(report))
        if report.stopped and report.stopped.startswith("the model"):
            self._warn(f"file purposes not written: {report.stopped}")

    def _show_described(self, before: set[str]) -> None:
        for info in self.kmap.files():
            if info.path in before and info.purpose:
                before.discard(info.path)
                self.show(info)

    def _tell(self, line: str) -> None:
        if self._job is not None:
            self._job(line)


def describe_line(report: DescribeReport, running: bool = False) -> str:
    """The describing run on one line: 'describing files 3/20 · 1.2k tokens · $0.0012' while it runs,
    'purposes: 18 of 20 files described (2 failed) · 4.1k tokens · $0.0042' when it is over."""
    cost = f"${report.cost_usd:.4f}" + (f" (+{report.unpriced} unpriced)" if report.unpriced else "")
    tokens = f"{human_count(report.tokens_in + report.tokens_out)} tokens"
    if running:
        return f"describing files {report.done}/{report.total} · {tokens} · {cost}"
    if not report.total:
        return f"purposes: none described ({report.stopped})" if report.stopped else "purposes: none missing"
    failed = f" ({report.failed} failed)" if report.failed else ""
    stopped = f" · stopped: {report.stopped}" if report.stopped else ""
    return f"purposes: {report.described} of {report.total} files described{failed} · {tokens} · {cost}{stopped}"
