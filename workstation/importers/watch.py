"""Importing while another agent writes: `workstation import --watch` and the sidecar's `[import] watch`.

Claude Code and Codex append to their logs as they go and delete them after a while (Claude Code
after 30 days by default). A watcher imports every file of the watched sources that belongs to
this workspace (discover.py), then re-imports a file whenever it changes: watchdog events,
debounced so a burst of appended lines is read once, and a rescan every few seconds for what
events missed (a folder created after the watch began, a filesystem without events). Each pass
adds only the new records (engine.py), so once a line is imported, deleting the source loses
nothing. A line still being written is left for the next pass.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

from watchdog.events import FileSystemEventHandler
from watchdog.observers import Observer

from . import discover
from .engine import FileResult, Importer

DEBOUNCE_S = 0.3  # let a burst of appended lines settle before reading the file
RESCAN_S = 5.0  # look for new files (and changes events missed) this often


class Watcher:
    """Keeps importing `sources` (claude-code, codex) and `files` into the workspace at `root`."""

    def __init__(self, importer: Importer, root: Path, *, sources: tuple[str, ...] = (), files: tuple[Path, ...] = (),
                 fmt: str | None = None, report: Callable[[FileResult], None] | None = None):
        self.importer = importer
        self.root = root
        self.sources = tuple(sources)
        self.files = tuple(Path(os.path.realpath(f)) for f in files)
        self.fmt = fmt
        self.report = report or (lambda result: None)
        self._belongs: dict[Path, tuple[str, bool]] = {}  # candidate -> (source, belongs to the workspace)

    def tracked(self) -> list[tuple[Path, str | None]]:
        """Every file to import now, with the format to read it as (None: detect)."""
        out: list[tuple[Path, str | None]] = [(f, self.fmt) for f in self.files]
        for source in self.sources:
            for found in discover.candidates(source, self.root):
                path = Path(os.path.realpath(found))
                known = self._belongs.get(path)
                if known is None:
                    cwd = discover.cwd_of(source, path)
                    if cwd is None:
                        continue  # nothing written yet to tell whose it is: ask again next pass
                    known = self._belongs[path] = (source, discover.belongs(cwd, self.root))
                if known[1]:
                    out.append((path, source))
        return out

    def pass_once(self, only: set[Path] | None = None) -> list[FileResult]:
        results = []
        for path, fmt in self.tracked():
            if only is not None and path not in only:
                continue
            results.append(self.importer.import_file(path, fmt, flush=False))
        self.importer.flush()
        for result in results:
            if not result.unchanged:
                self.report(result)
        return results

    def folders(self) -> list[Path]:
        found = {f.parent for f in self.files}
        for source in self.sources:
            found.update(discover.folders(source, self.root))
        return sorted(found)

    def run(self, stop: threading.Event) -> None:
        """Import, then keep importing until `stop` is set."""
        dirty: set[Path] = set()
        wake = threading.Condition()

        def note(path: Any) -> None:
            name = os.fsdecode(path)
            if name.endswith((".jsonl", ".json", ".traj", ".md")):
                with wake:
                    dirty.add(Path(os.path.realpath(name)))
                    wake.notify()

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                note(event.src_path)
                if getattr(event, "dest_path", ""):
                    note(event.dest_path)

        observer = Observer()
        watched: set[Path] = set()

        def schedule() -> None:
            for folder in self.folders():
                if folder not in watched and folder.is_dir():
                    observer.schedule(Handler(), str(folder), recursive=True)
                    watched.add(folder)

        schedule()
        observer.start()
        try:
            self.pass_once()
            next_scan = time.monotonic() + RESCAN_S
            while not stop.is_set():
                with wake:
                    wake.wait(timeout=0.5)
                    if dirty:
                        wake.wait(timeout=DEBOUNCE_S)
                    batch = set(dirty)
                    dirty.clear()
                if batch:
                    self.pass_once(batch)
                if time.monotonic() >= next_scan:
                    schedule()
                    self.pass_once()
                    next_scan = time.monotonic() + RESCAN_S
        finally:
            observer.stop()
            observer.join(timeout=5)
