"""Surgical file tools: read_lines / replace_lines / grep, confined to the workspace and kept out
of its state folder (`private`: a state folder moved elsewhere in the workspace; see fsutil.confine).

replace_lines is refused when the file changed since the agent last read it:
the caller keeps `ReadLedger`, the content hash of each file as last seen.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from ..errors import WorkstationError
from ..fsutil import atomic_write, confine, sha256_bytes


@dataclass
class ReadLedger:
    """What the agent has seen: repo path -> sha256 of the content it read."""

    seen: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def saw(self, rel: str, digest: str) -> None:
        with self._lock:
            self.seen[rel] = digest

    def last(self, rel: str) -> str | None:
        with self._lock:
            return self.seen.get(rel)


@dataclass
class Lines:
    path: str
    start: int
    end: int
    total: int
    text: str
    sha256: str
    whole: str = field(default="", repr=False)  # the whole file, for measuring what a full read costs

    def numbered(self) -> str:
        lines = self.text.splitlines()
        width = len(str(self.end))
        return "\n".join(f"{n:>{width}}| {line}" for n, line in enumerate(lines, start=self.start))


def _read_text(real: Path, rel: str) -> tuple[bytes, str]:
    try:
        data = real.read_bytes()
    except FileNotFoundError:
        raise WorkstationError(f"{rel}: no such file") from None
    except IsADirectoryError:
        raise WorkstationError(f"{rel}: is a directory") from None
    except OSError as err:
        raise WorkstationError(f"{rel}: cannot read ({err.strerror})") from None
    try:
        return data, data.decode("utf-8")
    except UnicodeDecodeError:
        raise WorkstationError(f"{rel}: not a UTF-8 text file") from None


def read_lines(root: Path, path: str, start: int, end: int | None = None,
               ledger: ReadLedger | None = None, private: Sequence[Path] = ()) -> Lines:
    """Lines start..end (1-indexed, inclusive) of a workspace file."""
    real, rel = confine(root, path, private)
    data, text = _read_text(real, rel)
    lines = text.splitlines(keepends=True)
    total = len(lines)
    end = total if end is None else end
    if start < 1 or end < start or (total and start > total) or (not total and start > 1):
        raise WorkstationError(f"{rel}: lines {start}-{end} out of range (file has {total} lines)")
    end = min(end, total)
    digest = sha256_bytes(data)
    if ledger is not None:
        ledger.saw(rel, digest)
    return Lines(rel, start, end, total, "".join(lines[start - 1:end]), digest, text)


def replace_lines(root: Path, path: str, start: int, end: int, content: str,
                  ledger: ReadLedger, private: Sequence[Path] = ()) -> tuple[str, int, int]:
    """Replace lines start..end (inclusive) with `content`; end = start - 1 inserts.

    Returns (repo path, first line, last line) of the new content.
    """
    real, rel = confine(root, path, private)
    data, text = _read_text(real, rel)
    digest = sha256_bytes(data)
    seen = ledger.last(rel)
    if seen is None:
        raise WorkstationError(f"{rel}: read it before replacing lines (read_lines or file_meta)")
    if seen != digest:
        raise WorkstationError(f"{rel} changed on disk since it was last read; read it again before editing")
    lines = text.splitlines(keepends=True)
    total = len(lines)
    if start < 1 or start > total + 1 or end < start - 1 or end > total:
        raise WorkstationError(f"{rel}: lines {start}-{end} out of range (file has {total} lines)")
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    new = content.splitlines(keepends=True) if content else []
    if new and not new[-1].endswith(("\n", "\r")) and (end < total or text.endswith("\n")):
        new[-1] += newline
    if start > 1 and not lines[start - 2].endswith(("\n", "\r")):
        lines[start - 2] += newline
    updated = "".join(lines[: start - 1] + new + lines[end:]).encode("utf-8")
    atomic_write(real, updated)
    ledger.saw(rel, sha256_bytes(updated))
    return rel, start, start + len(new) - 1


@dataclass
class GrepHit:
    path: str
    line: int
    text: str


def grep(root: Path, pattern: str, files: Iterable[str], *, max_hits: int = 200,
         ignore_case: bool = False, private: Sequence[Path] = ()) -> tuple[list[GrepHit], bool]:
    """Regex search over the given repo paths; returns (hits, truncated)."""
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as err:
        raise WorkstationError(f"invalid pattern {pattern!r}: {err}") from None
    hits: list[GrepHit] = []
    for rel in files:
        try:
            real, rel = confine(root, rel, private)
            with open(real, "r", encoding="utf-8", errors="strict") as fh:
                for number, line in enumerate(fh, start=1):
                    if regex.search(line):
                        hits.append(GrepHit(rel, number, line.rstrip("\n")[:300]))
                        if len(hits) >= max_hits:
                            return hits, True
        except (OSError, UnicodeDecodeError, WorkstationError):
            continue  # unreadable, binary, gone since indexing or in the state folder: not a match
    return hits, False


def workspace_files(root: Path) -> list[str]:
    """Every regular file under root, for when no index is at hand (skips dot-dirs)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            out.append(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
    return sorted(out)
