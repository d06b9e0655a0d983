"""The session log: one append-only JSONL file per session, format version 1.

Every line is one JSON record (see sessions/README.md at the repository top
level). Appends write one whole line with a single write() under an flock on
the file, then fsync, so concurrent appenders (the TUI, the sidecar) never
interleave and a kill -9 leaves at worst a torn last line. Nothing ever
rewrites a line: compaction and redaction are themselves appended records.

The reader never gives up on a bad line: it reports it (line number and
reason) and keeps every valid line after it.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import msgspec
import orjson

from .. import scrub
from ..errors import WorkstationError
from ..fsutil import fsync_dir, open_state
from ..paths import Paths
from ..tokens import count  # builds no encoding until a first count
from .logview import (FORMAT_VERSION, RECORD_TYPES, TURN_TYPES, LogProblem, LogView,  # noqa: F401 (the format's
                      fields_problem, parse_line, parse_lines)  # reader, re-exported: one import for both)
from .records import Assistant, Compact, Record, ToolCall, User, from_dict, reason, to_builtins

SUFFIX = ".jsonl"
_SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,99}$")  # no dots: file suffixes stay unambiguous

TokenCounter = Callable[[str], int]


class SessionError(WorkstationError):
    """A session that cannot be found, created or written."""


class SessionArchived(SessionError):
    """The session's live log was moved to the archive."""


# --------------------------------------------------------------------------- helpers
def default_counter() -> TokenCounter:
    """workstation.tokens.count: cl100k_base, the counts litellm.token_counter gives."""
    return count


def new_record_id() -> str:
    """Time-ordered and unique across processes: milliseconds in hex plus 24 random bits."""
    return f"{time.time_ns() // 1_000_000:011x}-{secrets.token_hex(3)}"


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def ts_seconds(ts: object) -> float | None:
    """A record's `ts` as seconds since the epoch; None when it is missing or not a time."""
    try:
        return datetime.fromisoformat(str(ts).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def check_slug(slug: str) -> str:
    if not isinstance(slug, str) or not _SLUG_RE.match(slug):
        raise SessionError(
            f"invalid session name {slug!r}: use lowercase letters, digits, '_' or '-' (at most 100)")
    return slug


def slugify(title: str, *, when: datetime | None = None) -> str:
    """`2025-01-31-fix-the-loader` from a title (the first words of a first message)."""
    words = re.findall(r"[a-z0-9]+", title.lower())[:6]
    stem = "-".join(words)[:48].strip("-") or "session"
    day = (when or datetime.now()).strftime("%Y-%m-%d")
    return f"{day}-{stem}"


def json_line(value: Any) -> bytes:
    """`value` as one compact JSON line in UTF-8, its newline included. orjson encodes records ~7x as fast
    as the json module (a bulk import writes every source byte about twice: log line and search row);
    what it refuses (an integer past 64 bits, a lone surrogate, a key that is not a string) goes through
    the json module as before, a lone surrogate (which UTF-8 cannot hold: a model's reply may carry one
    as an escape) written as the escape it came as. NaN and infinities, which json wrote as non-JSON,
    become null."""
    try:
        return orjson.dumps(value, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        try:
            return text.encode() + b"\n"
        except UnicodeEncodeError:
            return json.dumps(value, separators=(",", ":")).encode() + b"\n"


def record_text(record: Record) -> str:
    """The text a record contributes to a model context (for token counts and search)."""
    if isinstance(record, Compact):
        return record.summary
    text = str(getattr(record, "content", "") or "")
    if isinstance(record, Assistant):
        for call in record.tool_calls or ():
            text += f"\n{call.name}({call.arguments})"
    return text


def conversation_turns(turns: Sequence[Record]) -> list[Record]:
    """The turns that make up the conversation the model continues, in file order.

    Every turn, except a subagent's (`sidechain`) and those a later turn rewound past: a turn with
    `rewind_to` continues from that record instead of from the turn before it (an imported rewind),
    so the conversation is found by walking back from the newest turn, each turn to its
    `rewind_to` or else to the turn before it. A walk that reaches a record not among `turns`
    (a compact record, or a turn compacted away) stops there.
    """
    main: list[Record] = [t for t in turns if not t.sidechain]
    if not any(isinstance(t, User) and t.rewind_to is not None for t in main):
        return main
    parent: dict[str, str | None] = {}
    previous = None
    for turn in main:
        rewind_to = turn.rewind_to if isinstance(turn, User) else None
        parent[turn.id] = previous if rewind_to is None else rewind_to
        previous = turn.id
    keep: set[str] = set()
    node = previous
    while node is not None and node in parent and node not in keep:
        keep.add(node)
        node = parent[node]
    return [t for t in main if t.id in keep]


def tool_call_arguments(call: ToolCall | dict) -> dict:
    """Arguments of a stored tool call as a dict ({} when not a JSON object)."""
    raw = call.arguments if isinstance(call, ToolCall) else call.get("arguments")
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw or "{}")
    except (TypeError, ValueError, RecursionError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


# --------------------------------------------------------------------------- the session
class Session:
    """One session log. Reading takes no file lock and is incremental; appending is locked."""

    def __init__(self, paths: Paths, slug: str, *, counter: TokenCounter | None = None):
        self.paths = paths
        self.slug = check_slug(slug)
        self.path = paths.sessions / f"{slug}{SUFFIX}"
        self._counter = counter
        self._read_lock = threading.Lock()  # one Session may serve the UI thread and a worker
        self._reset_cache()

    def __repr__(self) -> str:
        return f"Session({self.slug!r})"

    # -- creation ---------------------------------------------------------------
    @classmethod
    def create(cls, paths: Paths, slug: str | None = None, *, title: str = "",
               counter: TokenCounter | None = None, sync: bool = True) -> "Session":
        """A new, empty session; with no slug one is made from the title (made unique).
        sync=False leaves fsyncing the folder to the caller (a bulk import syncs many at once)."""
        paths.ensure()
        if slug is not None:
            return cls._create_exact(paths, check_slug(slug), counter, sync)
        base = slugify(title)
        for n in range(1, 10_000):
            candidate = base if n == 1 else f"{base}-{n}"
            try:
                return cls._create_exact(paths, candidate, counter)
            except SessionError as err:
                if "already exists" not in str(err):
                    raise
        raise SessionError(f"no free session name left for {base}")

    @classmethod
    def _create_exact(cls, paths: Paths, slug: str, counter: TokenCounter | None, sync: bool = True) -> "Session":
        session = cls(paths, slug, counter=counter)
        archived = paths.archive / f"{slug}{SUFFIX}.gz"
        if archived.exists():
            raise SessionError(f"session {slug} already exists in the archive (restore it instead)")
        try:
            fd = os.open(session.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise SessionError(f"session {slug} already exists") from None
        os.close(fd)
        if sync:
            fsync_dir(session.path.parent)
        return session

    def remove_if_empty(self) -> bool:
        """Delete the file of a session in which nothing was said (a new chat left at once, a headless
        slash command, whose `command` records alone say nothing): an empty session is not worth a row in
        the sessions list. True if removed."""
        if self.path.exists() and all(r.kind == "command" for r in self.read().records):
            self.path.unlink(missing_ok=True)
            return True
        return False

    @classmethod
    def open(cls, paths: Paths, slug: str, *, counter: TokenCounter | None = None) -> "Session":
        """An existing live session; a clear error if it is missing or archived."""
        session = cls(paths, slug, counter=counter)
        if not session.path.exists():
            if (paths.archive / f"{slug}{SUFFIX}.gz").exists():
                raise SessionArchived(f"session {slug} is archived (workstation session restore {slug})")
            raise SessionError(f"no session named {slug}")
        return session

    @property
    def counter(self) -> TokenCounter:
        if self._counter is None:
            self._counter = default_counter()
        return self._counter

    # -- appending --------------------------------------------------------------
    def append(self, record: Record | str, *, sync: bool = True, **fields: Any) -> Record:
        """Append one record (a Record; or its type and fields, for the writers not yet converted);
        returns it as written (with id, ts, v and tokens). sync=False: no fsync of its own (the next
        synced append makes it durable; a killed process loses nothing either way)."""
        made = self._make(record, fields)
        self.append_records([made], sync=sync)
        return made

    def _make(self, record: Record | str, fields: dict) -> Record:
        """The record as it will be written: stamped (v, id, ts), scrubbed, counted, checked."""
        if isinstance(record, str):
            if record not in RECORD_TYPES:
                raise SessionError(f"unknown record type {record!r}")
            data: dict[str, Any] = to_builtins({"type": record, **fields})
            counted = fields.get("tokens") is not None
        else:
            data = record.as_dict()
            counted = record.tokens is not None
        data["v"], data["ts"] = FORMAT_VERSION, data.get("ts") or now_iso()
        data["id"] = data.get("id") or new_record_id()
        # the disk boundary: whatever a caller passes, no known secret or key format is written
        masked = {k: scrub.mask_data(v) for k, v in data.items() if v is not None}
        try:
            made = from_dict(masked)
        except msgspec.ValidationError as err:
            raise SessionError(f"cannot write a {data['type']} record: {reason(err)}") from None
        if not counted:
            made.tokens = self.counter(record_text(made))
        return made

    def append_if(self, check: Callable[[LogView], bool], record: Record | str, **fields: Any) -> Record | None:
        """Append only if check(view) holds, the view read under the append lock (None if not)."""
        made = self._make(record, fields)
        with self.locked() as fd:
            if not check(self.read()):
                return None
            _write_records(fd, [made])
        return made

    def append_from(self, make: Callable[[LogView], list[Record]], *, sync: bool = True
                    ) -> tuple[LogView, list[Record], int, int]:
        """Append what `make` derives from the log as read under the append lock, so two writers
        deriving from the same log (two importers of one source) cannot both add the same records.
        Returns (the view make saw, the records written, size before, size after)."""
        with self.locked() as fd:
            view = self.read()
            records = make(view)
            if not records:
                return view, [], view.size, view.size
            before, after = _write_records(fd, records, sync)
        return view, records, before, after

    def append_records(self, records: Iterable[Record | dict], *, sync: bool = True) -> tuple[int, int]:
        """Write complete records as one locked, fsynced write (sync=False: the caller fsyncs later).
        Returns the log's size before and after: the records' lines are what lies between. A dict
        (a writer not yet converted) is checked as a line is read."""
        with self.locked() as fd:
            return _write_records(fd, list(records), sync)  # type: ignore[arg-type]

    def user(self, content: str, **extra: Any) -> Record:
        return self.append("user", content=content, **extra)

    def system(self, content: str, **extra: Any) -> Record:
        return self.append("system", content=content, **extra)

    def assistant(self, content: str = "", tool_calls: Iterable[dict] = (), **extra: Any) -> Record:
        """tool_calls: dicts with id, name and arguments (a JSON string or a dict)."""
        calls = []
        for call in tool_calls:
            args = call.get("arguments", "{}")
            calls.append({"id": call.get("id") or f"call_{secrets.token_hex(4)}", "name": call["name"],
                          "arguments": args if isinstance(args, str) else json.dumps(args)})
        return self.append("assistant", content=content, tool_calls=calls or None, **extra)

    def tool(self, tool_call_id: str, name: str, content: str, *, ok: bool = True, **extra: Any) -> Record:
        return self.append("tool", tool_call_id=tool_call_id, name=name, content=content, ok=ok, **extra)

    def locked(self) -> "_AppendLock":
        """The append lock: an flock on the live file, re-checked against renames/unlinks."""
        return _AppendLock(self)

    # -- reading ----------------------------------------------------------------
    def _reset_cache(self) -> None:
        self._view = LogView()
        self._offset = 0
        self._lines = 0
        self._identity: tuple[int, int] | None = None

    def read(self) -> LogView:
        """The whole log, reading only what was appended since the last call."""
        with self._read_lock:
            return self._read()

    def _read(self) -> LogView:
        try:
            with os.fdopen(open_state(self.path, os.O_RDONLY), "rb") as fh:  # never a planted link or FIFO
                st = os.fstat(fh.fileno())
                if (st.st_dev, st.st_ino) != self._identity or st.st_size < self._offset:
                    self._reset_cache()  # replaced (a restore) or shrunk: start over
                    self._identity = (st.st_dev, st.st_ino)
                fh.seek(self._offset)
                data = fh.read(st.st_size - self._offset)
        except FileNotFoundError:
            if (self.paths.archive / f"{self.slug}{SUFFIX}.gz").exists():
                raise SessionArchived(f"session {self.slug} is archived") from None
            raise SessionError(f"no session named {self.slug}") from None
        end = data.rfind(b"\n") + 1  # complete lines only; a partial tail stays unread
        if end:
            chunk = parse_lines(data[:end], first_line=self._lines + 1)
            self._view.records.extend(chunk.records)
            self._view.problems.extend(chunk.problems)
            self._lines += data.count(b"\n", 0, end)
            self._offset += end
        view = LogView(list(self._view.records), list(self._view.problems), self._offset + len(data) - end)
        tail = data[end:]
        if tail:
            record, reason = parse_line(tail)
            if record is not None:  # whole JSON with its newline missing: still a valid record
                view.records.append(record)
            else:
                view.problems.append(LogProblem(
                    self._lines + 1, f"torn last line ({reason}; a write was cut off or is in progress)"))
        return view


class _AppendLock:
    """Context manager yielding an O_APPEND fd of the live log, flock-ed exclusively."""

    def __init__(self, session: Session):
        self.session = session
        self.fd: int | None = None

    def __enter__(self) -> int:
        path = self.session.path
        while True:
            try:
                fd = open_state(path, os.O_RDWR | os.O_APPEND)
            except FileNotFoundError:
                raise _gone(self.session) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                current = os.stat(path)
            except FileNotFoundError:  # archived while we waited for the lock
                os.close(fd)
                raise _gone(self.session) from None
            except BaseException:
                os.close(fd)
                raise
            mine = os.fstat(fd)
            if (mine.st_dev, mine.st_ino) == (current.st_dev, current.st_ino):
                self.fd = fd
                return fd
            os.close(fd)  # replaced by a restore while we waited: lock the new file

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing drops the flock
            self.fd = None


def _gone(session: Session) -> SessionError:
    if (session.paths.archive / f"{session.slug}{SUFFIX}.gz").exists():
        return SessionArchived(
            f"session {session.slug} was archived; restore it before adding to it")
    return SessionError(f"no session named {session.slug}")


_own: set[str] | None = None  # ids of the records this process appended, once track_own_writes() was called


def track_own_writes() -> None:
    """From now on remember the id of every record this process appends (to any session), so that
    `wrote_here` tells them from the records another process appended (the sidecar's compactions and
    redactions, a second app): the app shows those as they land. Off unless asked (a bulk import would
    keep millions of ids)."""
    global _own
    if _own is None:
        _own = set()


def wrote_here(record_id: str) -> bool:
    """Did this process append the record with this id since `track_own_writes`?"""
    return _own is not None and record_id in _own


def _write_records(fd: int, records: list[Record], sync: bool = True) -> tuple[int, int]:
    records = [r if isinstance(r, Record) else from_dict(r) for r in records]  # dicts: writers not yet converted
    if _own is not None:  # before the write: a reader in another thread may see the line at once
        _own.update(r.id for r in records)
    payload = b"".join([json_line(r.as_dict()) for r in records])
    size = os.fstat(fd).st_size
    # after a torn last line (a writer killed mid-write) start a fresh line, or this record is lost too
    if size and os.pread(fd, 1, size - 1) != b"\n":
        payload = b"\n" + payload
    _write_all(fd, payload)  # one write() per append: readers and kill -9 see whole lines or a torn tail
    if sync:
        os.fsync(fd)
    return size, size + len(payload)


CLAIM_WAIT_S = 30.0  # how long an operation a user asked for waits for a session's claim


class Claim:
    """An exclusive, per-session claim for long operations (compaction, archiving, restoring).

    An flock on sessions/.locks/<slug>.lock: the kernel drops it when its holder
    exits or is killed, so a crashed sidecar never wedges anyone. Appends don't
    take it; they only take the short append lock.
    """

    def __init__(self, paths: Paths, slug: str, *, wait: float = 0.0):
        self.path = paths.sessions / ".locks" / f"{check_slug(slug)}.lock"
        self.wait = wait
        self.fd: int | None = None

    def __enter__(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_state(self.path, os.O_RDWR | os.O_CREAT)
        deadline = time.monotonic() + self.wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return False
                time.sleep(0.02)
                continue
            self.fd = fd
            return True

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except InterruptedError:
            continue
        view = view[written:]


def fsync_paths(paths: Iterable[Path]) -> None:
    """fsync many files (and then their folders) at once: concurrent fsyncs share journal commits,
    so a bulk import pays for a few, not one per file. A file gone meanwhile is skipped."""
    def one(path: Path) -> None:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return  # archived or removed since it was written: whoever moved it synced it
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    files = list(dict.fromkeys(paths))
    if not files:
        return
    with ThreadPoolExecutor(max_workers=min(16, len(files))) as pool:
        list(pool.map(one, files))
    for folder in dict.fromkeys(p.parent for p in files):
        fsync_dir(folder)


def live_slugs(paths: Paths) -> list[str]:
    """Slugs of the live sessions, sorted."""
    try:
        names = os.listdir(paths.sessions)
    except FileNotFoundError:
        return []
    return sorted(slug for name in names if (slug := slug_of(name)) is not None)


def valid_slug(slug: str) -> bool:
    """Is `slug` a session's name (what check_slug accepts)?"""
    return _SLUG_RE.match(slug) is not None


def slug_of(name: str) -> str | None:
    """The slug of a live log's file name, None for any other entry of the sessions folder."""
    if name.endswith(SUFFIX) and not name.startswith("."):
        slug = name[: -len(SUFFIX)]
        if _SLUG_RE.match(slug):
            return slug
    return None
