"""Surgical file tools: read_lines / replace_lines / grep, confined to the workspace and kept out
of its state folder (`private`: a state folder moved elsewhere in the workspace; see fsutil.confine).

replace_lines is refused when the file changed since the agent last read it:
the caller keeps `ReadLedger`, the content hash of each file as last seen.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import threading
from array import array
from collections import OrderedDict
from itertools import accumulate
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence, TypeVar

import re2

from ...errors import WorkstationError
from ...fsutil import NOT_REGULAR, confine, lstat_beneath, open_beneath, replace_beneath, sha256_bytes
from ...sandbox.protect import Protected

T = TypeVar("T")


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
    whole: str = field(default="", repr=False)  # the whole file, for measuring what a full read costs ("" if big)
    size: int = 0  # bytes of the whole file

    def numbered(self) -> str:
        lines = self.text.splitlines()
        width = len(str(self.end))
        return "\n".join(f"{n:>{width}}| {line}" for n, line in enumerate(lines, start=self.start))


READ_TIMEOUT_S = 10.0  # one file read (read_lines, replace_lines' read) before it is given up on
GREP_TIMEOUT_S = 20.0  # one whole grep
GREP_MAX_FILE_BYTES = 16 * 1024 * 1024  # larger files are skipped by grep (a one-line file would be one line)


def _bounded(what: str, timeout_s: float, work: Callable[[threading.Event], T]) -> T:
    """`work(stop)` in a thread, given up on after `timeout_s`: a read from a hung network filesystem
    cannot be interrupted, but the turn does not wait for it. `stop` is set then, for work that can end
    early (grep checks it per line); a read blocked in the kernel is left to finish in its daemon thread."""
    box: dict[str, Any] = {}
    stop = threading.Event()

    def run() -> None:
        try:
            box["value"] = work(stop)
        except BaseException as err:  # handed to the caller's thread, raised there
            box["error"] = err

    thread = threading.Thread(target=run, daemon=True, name=f"bounded {what}")
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        stop.set()
        raise WorkstationError(f"{what}: gave up after {timeout_s:g}s (a slow or hung filesystem?)")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _open_regular(real: Path, rel: str) -> int:
    """A file descriptor on the workspace file `rel` (`real`, as fsutil.confine returned them), refused unless
    it is a regular file with no other name: opening a FIFO waits for a writer forever, a device (`/dev/zero`,
    a tty) never ends or blocks, and a file with hard links may be a file outside the workspace under another
    name. Opened from the workspace root with no link followed at any part of the path (fsutil.open_beneath),
    so a folder swapped for a link after `confine` looked is refused, never read through."""
    if rel == ".":
        raise WorkstationError(f"{rel}: is a directory")
    try:
        fd = open_beneath(_root_of(real, rel), rel)
    except FileNotFoundError:
        raise WorkstationError(f"{rel}: no such file") from None
    except WorkstationError:
        raise
    except OSError as err:
        if err.strerror == NOT_REGULAR or err.errno == errno.ELOOP:
            try:
                kind = os.stat(real, follow_symlinks=False).st_mode
            except OSError:
                kind = 0
            if stat.S_ISDIR(kind):
                raise WorkstationError(f"{rel}: is a directory") from None
            raise WorkstationError(f"{rel}: not a regular file ({_kind(kind)}): refused") from None
        raise WorkstationError(f"{rel}: cannot read ({err.strerror})") from None
    try:
        refuse_hard_linked(os.fstat(fd), rel)
    except WorkstationError:
        os.close(fd)
        raise
    return fd


def refuse_hard_linked(st: os.stat_result, rel: str) -> None:
    """A file with more than one name (hard links) is neither read nor edited: its other name may be a file
    outside the workspace (`ln ~/.ssh/id_rsa notes.txt`), whose content would reach the model."""
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise WorkstationError(f"{rel}: has {st.st_nlink} hard links (another of its names may be outside the "
                               "workspace): never read or edited through one; give it a copy of its own")


def _root_of(real: Path, rel: str) -> Path:
    """The workspace root `real` = root / rel was confined to."""
    return real.parents[rel.count("/")]


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"


def read_bytes(real: Path, rel: str) -> bytes:
    """A regular file's bytes (never a FIFO or a device), given up on after READ_TIMEOUT_S."""
    def read(stop: threading.Event) -> bytes:
        with os.fdopen(_open_regular(real, rel), "rb") as fh:
            try:
                return fh.read()
            except OSError as err:
                raise WorkstationError(f"{rel}: cannot read ({err.strerror})") from None

    return _bounded(f"reading {rel}", READ_TIMEOUT_S, read)


def read_existing(real: Path, rel: str) -> bytes | None:
    """`read_bytes`, or None when nothing is at `real`."""
    if rel != "." and lstat_beneath(_root_of(real, rel), rel) is None:
        return None
    return read_bytes(real, rel)


def _read_text(real: Path, rel: str) -> tuple[bytes, str]:
    data = read_bytes(real, rel)
    try:
        return data, data.decode("utf-8")
    except UnicodeDecodeError:
        raise WorkstationError(f"{rel}: not a UTF-8 text file") from None


# Line ends as str.splitlines sees them, found in UTF-8 bytes (NEL, LS and PS are multi-byte there).
_LINE_END = re.compile(rb"\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e]|\xc2\x85|\xe2\x80[\xa8\xa9]")
_OTHER_LINE_ENDS = (b"\r", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\xc2\x85", b"\xe2\x80\xa8", b"\xe2\x80\xa9")
LINE_INDEX_MIN_BYTES = 8 << 20  # files this big keep a line index between reads


@dataclass(frozen=True)
class _LineIndex:
    signature: tuple  # (size, mtime_ns, ctime_ns, inode) of the content indexed
    sha256: str
    starts: "array[int]"  # byte offset where each line starts, and the file's size last


_line_indexes: "OrderedDict[Path, _LineIndex]" = OrderedDict()
_line_index_lock = threading.Lock()


def _signature(st: os.stat_result) -> tuple:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _line_index(real: Path, rel: str, data: bytes, st: os.stat_result) -> _LineIndex:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise WorkstationError(f"{rel}: not a UTF-8 text file") from None
    starts = array("q", [0])
    if not any(end in data for end in _OTHER_LINE_ENDS):  # only \n ends lines (nearly every file): split in C
        starts.extend(accumulate(len(line) + 1 for line in data.split(b"\n")[:-1]))
    else:
        starts.extend(m.end() for m in _LINE_END.finditer(data))
    if starts[-1] != len(data):
        starts.append(len(data))  # the last line has no line end
    index = _LineIndex(_signature(st), sha256_bytes(data), starts)
    with _line_index_lock:
        _line_indexes[real] = index
        while len(_line_indexes) > 4:
            _line_indexes.popitem(last=False)
    return index


def _read_big(real: Path, rel: str, start: int, end: int | None) -> Lines | None:
    """A range of a big file from its line index: after the first read, the cost of a read is the
    range's, not the file's (a 100 MB file: one pass to index it, then a pread per range). None for a
    small file, which is read whole."""
    def read(stop: threading.Event) -> Lines | None:
        fd = _open_regular(real, rel)
        try:
            st = os.fstat(fd)
            if st.st_size < LINE_INDEX_MIN_BYTES:
                return None
            with _line_index_lock:
                index = _line_indexes.get(real)
            if index is None or index.signature != _signature(st):
                chunks, size = [], 0
                while chunk := os.read(fd, 1 << 22):
                    chunks.append(chunk)
                    size += len(chunk)
                index = _line_index(real, rel, b"".join(chunks), os.fstat(fd))
            total = len(index.starts) - 1
            last = total if end is None else end
            if start < 1 or last < start or start > total:
                raise WorkstationError(f"{rel}: lines {start}-{last} out of range (file has {total} lines)")
            last = min(last, total)
            begin, stop_at = index.starts[start - 1], index.starts[last]
            text = os.pread(fd, stop_at - begin, begin).decode("utf-8")
            return Lines(rel, start, last, total, text, index.sha256, "", index.starts[-1])
        finally:
            os.close(fd)

    return _bounded(f"reading {rel}", READ_TIMEOUT_S, read)


def file_sha(real: Path, rel: str) -> tuple[str, int]:
    """(sha256, size) of a file's content: a big file's from its line index while its stat is unchanged,
    any other file read (bounded, regular files only) and hashed."""
    try:
        st = os.stat(real)
    except OSError as err:
        raise WorkstationError(f"{rel}: cannot read ({err.strerror})") from None
    with _line_index_lock:
        index = _line_indexes.get(real)
    if index is not None and index.signature == _signature(st):
        return index.sha256, st.st_size
    data = read_bytes(real, rel)
    return sha256_bytes(data), len(data)


def read_lines(root: Path, path: str, start: int, end: int | None = None,
               ledger: ReadLedger | None = None, private: Sequence[Path] = ()) -> Lines:
    """Lines start..end (1-indexed, inclusive) of a workspace file."""
    real, rel = confine(root, path, private)
    big = _read_big(real, rel, start, end)
    if big is not None:
        if ledger is not None:
            ledger.saw(rel, big.sha256)
        return big
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
    return Lines(rel, start, end, total, "".join(lines[start - 1:end]), digest, text, len(data))


@dataclass
class Replaced:
    path: str
    first: int  # first and last line of the new text
    last: int
    before: bytes = field(repr=False)
    after: bytes = field(repr=False)


def replace_lines(root: Path, path: str, start: int, end: int, content: str,
                  ledger: ReadLedger, private: Sequence[Path] = (), staging: Path | None = None
                  ) -> tuple[str, int, int]:
    """Replace lines start..end (inclusive) with `content`; end = start - 1 inserts.

    Returns (repo path, first line, last line) of the new content.
    """
    protected = Protected(root, tuple(private))
    done = replace_range(protected.confine_write(path), start, end, content, ledger, protected.root, staging)
    return done.path, done.first, done.last


def replace_range(target: tuple[Path, str], start: int, end: int, content: str, ledger: ReadLedger, root: Path,
                  staging: Path | None = None, intend: Callable[[str, str | None], None] | None = None) -> Replaced:
    """replace_lines, returning the file's bytes before and after too. `target`: (real, rel) as
    `Protected.confine_write` gave them (never a state folder, a `.git` folder), `root` its root; the file is
    opened from `root` by `rel` with no link followed. The temporary file of the atomic write goes in
    `staging`; `intend` is told the new content's hash just before the write (Services.intend)."""
    real, rel = target
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
    after = sha256_bytes(updated)
    if intend is not None:
        intend(rel, after)
    replace_beneath(root, rel, updated, staging=staging)  # no link followed; a hard link is replaced
    ledger.saw(rel, after)
    return Replaced(rel, start, start + len(new) - 1, data, updated)


@dataclass
class GrepHit:
    path: str
    line: int
    text: str


def compile_pattern(pattern: str, ignore_case: bool = False) -> Any:  # re2._Regexp (re2 ships no types)
    """`pattern` compiled by RE2, which matches in time linear in the text: no pattern can backtrack
    catastrophically (`(a+)+$`). What RE2 does not do (backreferences, lookaround) is refused in one line."""
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.log_errors = False  # RE2 logs to stderr by default; the error is raised and reported instead
    try:
        return re2.compile(pattern, options)
    except re2.error as err:
        said = err.args[0].decode(errors="replace") if err.args and isinstance(err.args[0], bytes) else str(err)
        raise WorkstationError(f"invalid pattern {pattern[:200]!r}: {said[:200]} (grep uses RE2: no "
                               "backreferences or lookaround)") from None


def grep(root: Path, pattern: str, files: Iterable[str], *, max_hits: int = 200,
         ignore_case: bool = False, private: Sequence[Path] = (),
         timeout_s: float | None = None) -> tuple[list[GrepHit], bool, list[tuple[str, str]]]:
    """Regex (RE2) search over the given repo paths, streamed line by line; returns (hits, truncated,
    not_searched). `not_searched` names each file grep did not look at in full, with why: gone, not a
    regular file, unreadable, over GREP_MAX_FILE_BYTES, or not UTF-8 (binary) from some line on (its
    earlier lines were searched). The whole search gives up with one line after `timeout_s`."""
    regex = compile_pattern(pattern, ignore_case)
    files = list(files)

    def search(stop: threading.Event) -> tuple[list[GrepHit], bool, list[tuple[str, str]]]:
        hits: list[GrepHit] = []
        skipped: list[tuple[str, str]] = []
        for rel in files:
            if stop.is_set():
                break
            try:
                real, rel = confine(root, rel, private)
                fd = _open_regular(real, rel)
            except WorkstationError as err:  # outside, in the state folder, gone since indexing, not regular
                skipped.append((rel, str(err).removeprefix(f"{rel}: ")))
                continue
            number = 0
            try:
                with open(fd, "rb") as fh:  # decoded line by line: lines before a bad byte are searched
                    size = os.fstat(fh.fileno()).st_size
                    if size > GREP_MAX_FILE_BYTES:
                        skipped.append((rel, f"too large ({size} bytes, grep's limit {GREP_MAX_FILE_BYTES})"))
                        continue
                    for number, raw in enumerate(fh, start=1):
                        if stop.is_set():
                            break
                        line = raw.decode("utf-8")
                        if line.endswith("\r\n"):
                            line = line[:-2] + "\n"
                        if regex.search(line):
                            hits.append(GrepHit(rel, number, line.rstrip("\n")[:300]))
                            if len(hits) >= max_hits:
                                return hits, True, skipped
            except UnicodeDecodeError:
                skipped.append((rel, "binary or not UTF-8" + (f" after line {number - 1}" if number > 1 else "")))
            except OSError as err:
                skipped.append((rel, f"unreadable ({err.strerror or err})"))
        return hits, False, skipped

    return _bounded("grep", GREP_TIMEOUT_S if timeout_s is None else timeout_s, search)


def workspace_files(root: Path) -> list[str]:
    """Every regular file under root, for when no index is at hand (skips dot-dirs)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            out.append(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
    return sorted(out)
