"""The map's rows on their way to the database: a `Batch` holds what one transaction writes, and a
`BatchWriter` writes a refresh's batches on a thread of its own while the refresh parses on
(map.KnowledgeMap.refresh hands them over every map.FLUSH_BYTES of rows)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable


class Batch:
    """Rows waiting to be written in one transaction."""

    def __init__(self) -> None:
        self.files: list[tuple] = []
        self.tsv: dict[str, list[str]] = {"symbols": [], "refs": [], "deps": []}
        self.spooled: dict[str, list[str]] = {"symbols": [], "refs": [], "deps": []}  # files of rows
        self.skipped: list[tuple[str, str, str]] = []
        self.removed: list[str] = []
        self.bytes = 0

    def add_spooled(self, files: dict[str, str], size: int) -> None:
        for table, path in files.items():
            self.spooled[table].append(path)
        self.bytes += size

    def add_indexed(self, row: tuple, symbols: str, refs: str, deps: str) -> None:
        self.files.append(row)
        for table, text in (("symbols", symbols), ("refs", refs), ("deps", deps)):
            if text:
                self.tsv[table].append(text)
                self.bytes += len(text)

    @property
    def empty(self) -> bool:
        return not (self.files or self.skipped or self.removed)


class BatchWriter:
    """Writes a refresh's batches on a thread of its own while the refresh parses on.

    A cold index hands over a batch every map.FLUSH_BYTES of rows (not more often: each write
    costs ~0.08 CPU-s beyond its rows; 48 batches instead of 7 cost a cold index of sympy
    ~3.5 CPU-s more, most of it in commits). Written in the parsing thread,
    they kept the worker processes waiting for their next files meanwhile; the database call
    releases the GIL, so here they overlap the parse even in one process. The thread
    starts with the first batch handed over before the end (a small refresh writes its one
    batch in the caller's thread), at most one batch waits behind the one being written, and a
    failed write is raised in the caller at its next hand-over.
    """

    def __init__(self, flush: Callable[[Batch, list[str]], float], names: list[str]):
        self._flush = flush
        self._names = names
        self._queue: queue.Queue[Batch | None] = queue.Queue(maxsize=1)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.seconds = 0.0  # spent writing

    def put(self, batch: Batch) -> None:
        self._raise()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="ws-kmap-writer", daemon=True)
            self._thread.start()
        self._queue.put(batch)

    def finish(self, batch: Batch) -> float:
        """Write the last batch after the ones handed over; returns the seconds spent writing."""
        self.close()
        self._raise()
        self.seconds += self._flush(batch, self._names)
        return self.seconds

    def close(self) -> None:
        """Wait for the batches handed over (also when the refresh failed: they read its spool)."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _run(self) -> None:
        while (batch := self._queue.get()) is not None:
            if self._error is None:  # after a failure the rest is dropped: the refresh stops anyway
                try:
                    self.seconds += self._flush(batch, self._names)
                except BaseException as err:
                    self._error = err
