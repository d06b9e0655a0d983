"""Importing many files on several cores (`workstation import FOLDER`, `--from`, the benchmark).

Reading and mapping a source is Python work that holds the GIL; with a few hundred files or
more, worker processes do it side by side. The process that asked (which talks to the store)
decides which files are unchanged since their last import, hands the others out, and takes back
each worker's batch (the events, index rows and states of what it wrote) to flush them with its
own. Files of one Claude Code session (`<id>.jsonl` and `<id>/subagents/*.jsonl`) go to one worker
together; two workers landing in one session anyway are kept apart by the log's append lock,
under which an importer decides what is new (engine.py).

Workers are spawned, never forked: a fork of a process that holds the store's connection would
inherit it. They import nothing from the store and send nothing to it. They are told the secret
values the calling process knows, to mask them as it would.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from .. import scrub
from ..paths import Paths
from .engine import FileResult, Importer

MIN_FILES = 64  # below this, starting workers costs more than it saves
MAX_WORKERS = 4

_worker: Importer | None = None


def import_many(importer: Importer, items: Iterable[tuple[str | os.PathLike, str | None]], *,
                workers: int | None = None, report: Callable[[FileResult], None] | None = None) -> list[FileResult]:
    """Import (path, format or None) items; flushes at the end. Results come in the order given."""
    todo = [(str(p), f) for p, f in items]
    report = report or (lambda result: None)
    count = workers if workers is not None else min(MAX_WORKERS, os.cpu_count() or 1)
    results: list[FileResult] = []
    if count < 2 or len(todo) < MIN_FILES:
        for path, fmt in todo:
            results.append(importer.import_file(path, fmt, flush=False))
            report(results[-1])
        importer.flush()
        return results
    slots: list[FileResult | None] = [None] * len(todo)
    groups: dict[str, list[tuple[int, str, str | None, bool]]] = {}
    for index, (path, fmt) in enumerate(todo):
        done, resend = importer.unchanged(path, fmt)
        if done is not None:
            slots[index] = done
        else:
            groups.setdefault(_group(path), []).append((index, path, fmt, resend))
    context = multiprocessing.get_context("spawn")
    paths = importer.paths
    with ProcessPoolExecutor(max_workers=count, mp_context=context, initializer=_start,
                             initargs=(str(paths.root), str(paths.state), scrub.known())) as pool:
        for answers, batch in pool.map(_work, list(groups.values()), chunksize=8):
            importer.absorb(batch)
            for index, result in answers:
                slots[index] = result
            if importer.pending_bytes >= importer.FLUSH_BYTES:
                importer.flush()
    importer.flush()
    for slot in slots:
        assert slot is not None  # every item answered, one way or the other
        results.append(slot)
        report(slot)
    return results


def _group(path: str) -> str:
    """Files that may land in one session: a Claude Code session file and its subagents' logs."""
    real = Path(os.path.realpath(path))
    if real.parent.name == "subagents":
        return str(real.parent.parent)
    if real.suffix == ".jsonl":
        return str(real.with_suffix(""))
    return str(real)


def _start(root: str, state: str, secrets: list[str]) -> None:
    global _worker
    for secret in secrets:  # the keys this process registered are masked in the workers too
        scrub.register(secret)
    _worker = Importer(Paths.for_root(root, state), None, derived=True)


def _work(group: list[tuple[int, str, str | None, bool]]) -> tuple[list[tuple[int, FileResult]], Any]:
    assert _worker is not None
    answers = [(index, _worker._import(path, fmt, resend=resend)) for index, path, fmt, resend in group]
    return answers, _worker.take_batch()
