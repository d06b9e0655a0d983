"""The session search index: every record of every session, live and archived, searchable at once.

Reading a gigabyte of logs per search cannot answer in under a second; scanning their texts, kept
apart and case-folded, can. The index is derived from the logs and never the source of anything.
It has two parts:
- in the store, `search_sessions` says how far each log was read, `search_records` holds each
  record's id, type, turn and time and where its texts lie in the heap, `search_pieces` the heap
  ranges in which a session's records were stored at once;
- the heap, `search-<gen>.heap` in the state folder: per piece, the records' case-folded texts,
  each ended by a NUL (what a search scans, through a memory map), then the texts themselves (what
  snippets are cut from). Through DuckDB, a process that had just started spent most of a second
  faulting 634 MB of strings into its buffers for one scan; a memory map reads the page cache in
  place, and the texts of the hits are read without a query.

Only the store's owner writes the heap: it appends a piece, syncs it, then commits the rows that
point into it, so bytes after the committed size are a write that never committed (cut off by the
next append). Dropped and re-read sessions leave ranges nothing points to; when they outweigh the
rest the owner copies the live ranges, in list order, into the next generation's file and commits
the new offsets before deleting the old file (a reader that mapped it keeps its map). A heap
shorter than the store says (deleted, or restored from an older copy) resets the index, which the
next sync rebuilds from the logs.

`sync` brings it up to date before every search (and after every import): a live log that grew
is read from where the last read stopped (complete lines only: a line being written waits); a
log that was replaced (a restore) is read again whole unless it starts with the same record
and is no shorter; an archived session keeps the rows of its live log when the archive holds as
many bytes, else it is read from the .gz; the rows of a session that no longer exists are
dropped. Two processes syncing at once cannot both add the same lines: each write names the
offset it read from and the owner refuses it if the index moved on. DuckDB's full-text extension
would have to be downloaded at run time, which nothing here may do, and SQLite's trigram index
builds at ~4 MB/s here: a substring scan of the case-folded texts is what search does.
"""

from __future__ import annotations

import mmap
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import stringzilla

from ..fsutil import atomic_write, copy_range, fsync_dir, open_state
from ..paths import Paths, PlantedLink
from ..store.broker import Database, readonly
from .archive import UnreadableArchive, gunzip, no_warning, archived_slugs, gz_path, read_meta
from .log import SUFFIX, LogView, SessionError, json_line, live_slugs, parse_lines, record_text, slug_of
from .records import Record
from .turns import hit_turn, starts_turn

# the shape of a search_records row as a piece gives it (offsets relative to the piece's start)
ROW_COLUMNS = "{'s':'VARCHAR','q':'BIGINT','i':'VARCHAR','y':'VARCHAR','u':'INTEGER','t':'VARCHAR','a':'BIGINT','b':'BIGINT','n':'BIGINT'}"
_PIECE_BYTES = 16 << 20  # log bytes indexed per call to the owner
COMPACT_MIN_BYTES = 64 << 20  # garbage in the heap worth a rewrite, when it also outweighs the live ranges
_END = b"\x00"  # ends each case-folded text: no match runs from one record into the next


def fold(text: str) -> bytes:
    """What search compares: the text case-folded (str.casefold's full Unicode folding), a NUL (the
    records' separator) read as a space, in UTF-8."""
    return fold_utf8(text.encode("utf-8", "surrogatepass"))


def fold_utf8(data: bytes) -> bytes:
    # StringZilla folds as str.casefold does (the same bytes for every text of the import benchmark),
    # 3x as fast as str.lower on text that is not all ASCII: 0.5 against 1.5 CPU-s per 230 M characters
    return stringzilla.utf8_uncased_fold(data).replace(_END, b" ")


@dataclass
class Piece:
    """Records of one session, ready for the index: their rows and the heap bytes they point into."""

    first_seq: int
    last_turn: int  # the turn (sessions.turns) reached after these records: user messages so far
    rows: list[dict] = field(default_factory=list)  # search_records rows (ROW_COLUMNS without "s")
    split: int = 0  # where the case-folded texts end and the texts begin in `data`
    data: bytes = b""

    def placed(self, slug: str, at: int) -> tuple[list[bytes], tuple[str, int, int, int, int]]:
        """Its rows as JSON lines and its (slug, first_seq, start, split, stop), for `data` stored at `at`
        in a file of pieces (what insert_rows reads)."""
        rows = [json_line({**row, "s": slug, "a": at + row["a"], "b": at + row["b"]}) for row in self.rows]
        return rows, (slug, self.first_seq, at, at + self.split, at + len(self.data))


def make_piece(records: list[Record], *, first_seq: int = 0, first_turn: int = 0) -> Piece:
    """The rows and heap bytes of `records`, the first being record `first_seq` of its log, after
    `first_turn` turns."""
    folded: list[bytes] = []
    texts: list[bytes] = []
    rows = []
    turn, at = first_turn, 0
    for seq, record in enumerate(records, start=first_seq):
        turn += starts_turn(record)
        texts.append(record_text(record).encode("utf-8", "surrogatepass"))
        folded.append(fold_utf8(texts[-1]))
        rows.append({"q": seq, "i": record.id, "y": record.kind, "u": hit_turn(record, turn),
                     "t": record.ts or None, "a": at, "n": len(texts[-1])})
        at += len(folded[-1]) + 1
    split = at
    for row, text in zip(rows, texts):
        row["b"] = at
        at += len(text)
    return Piece(first_seq, turn, rows, split, _END.join(folded) + _END + b"".join(texts) if folded else b"")


def sync(paths: Paths, db: Database, *, only: Iterable[str] | None = None,
         warn: Callable[[str], None] = no_warning) -> None:
    """Bring the index up to date with the logs (only the given slugs, when given)."""
    _check_heap(paths, db, warn)
    if only is not None:
        slugs = sorted(set(only))
        if not slugs:
            return
        states = {row[0]: row for row in db.call(index_states, slugs)}
        live = [s for s in slugs if (paths.sessions / f"{s}.jsonl").exists()]
        archived = [s for s in slugs if s not in live and gz_path(paths, s).exists()]
    else:
        states = {row[0]: row for row in db.call(index_identities)}  # the full row only of a log that grew
        live = live_slugs(paths)
        known = set(live)
        archived = [s for s in archived_slugs(paths) if s not in known]
    folder = str(paths.sessions)  # a str path per log, not a Path: thousands of logs are stat'ed per search
    writes = _Writes(db, str(paths.state))
    grown = []
    for slug in live:
        path = os.path.join(folder, f"{slug}.jsonl")
        if _to_read(states.get(slug), path):
            grown.append((slug, path))
    # the whole state of every log that grew, in one call: one call each cost ~7 ms, 20 s after a sidecar
    # pass had appended a redaction to 3,000 of 13,000 sessions
    short = [slug for slug, _ in grown if slug in states and len(states[slug]) < 10]
    if short:
        states.update((row[0], row) for row in db.call(index_states, short))
    for slug, path in grown:
        _sync_live(writes, slug, states.get(slug), path)
    for slug in archived:
        _sync_archived(paths, writes, slug, states.get(slug), warn)
    writes.flush()
    present = set(live) | set(archived)
    gone = [slug for slug in states if slug not in present]
    if gone:
        db.call(index_drop, writes.heap_dir, gone)


class _Writes:
    """Pieces to store, sent to the owner a few MB at a time: one heap append and one transaction
    for many sessions (one call per session cost ~14 ms of the owner's statements: 4 minutes to read
    the 17,700 sessions of 1 GB of logs into an empty index)."""

    def __init__(self, db: Database, heap_dir: str):
        self.db, self.heap_dir = db, heap_dir
        self._items: list[list] = []  # [slug, expected size, new state, first seq, start, split, stop]
        self._rows: list[bytes] = []
        self._data: list[bytes] = []
        self._size = 0

    def add(self, slug: str, expect: int | None, new_state: list, piece: Piece) -> None:
        rows, (_, first_seq, start, split, stop) = piece.placed(slug, self._size)
        self._items.append([slug, expect, new_state, first_seq, start, split, stop])
        self._rows += rows
        self._data.append(piece.data)
        self._size += len(piece.data)
        if self._size >= _PIECE_BYTES:
            self.flush()

    def flush(self) -> list[str]:
        """Send what is pending; returns the sessions the owner refused (another sync got there first)."""
        refused = []
        if self._items:
            rows = b"".join(self._rows)[:-1].decode()
            refused = self.db.call(index_append, self.heap_dir, self._items, rows, b"".join(self._data))
        self._items, self._rows, self._data, self._size = [], [], [], 0
        return refused


def _check_heap(paths: Paths, db: Database, warn: Callable[[str], None]) -> None:
    """Reset the index when its heap holds less than the store says (deleted, or an older copy restored)."""
    gen, size = db.call(heap_state)
    path = heap_path(str(paths.state), gen)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        have = 0
    else:
        have = st.st_size
        if not stat.S_ISREG(st.st_mode):  # a link or a FIFO planted there (a cloned repository's state folder)
            if stat.S_ISDIR(st.st_mode):
                raise SessionError(f"search index {path} is a folder; move it aside and search again")
            warn(f"search index {path} is not a regular file; it is removed and rebuilt from the session logs")
            os.unlink(path)  # the link itself, never what it points to
            have, size = 0, max(size, 1)
    if have < size:
        warn(f"search index {heap_path(str(paths.state), gen)} holds {have} of {size} bytes; "
             "it is rebuilt from the session logs")
        db.call(index_reset, str(paths.state))


def _to_read(row: tuple | None, path: str) -> bool:
    """Whether a live log must be read: not when the index has it whole (the same file, the same size, known
    without opening it), nor when it is gone."""
    if row is None or row[1] != "live":
        return True
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    return not (row[2] == f"{st.st_dev}:{st.st_ino}" and row[3] == st.st_size)


def _sync_live(writes: _Writes, slug: str, row: tuple | None, path: str) -> None:
    if not _to_read(row, path):
        return
    if row is not None and len(row) < 10:  # index_identities' row: the whole state is wanted now
        row = next(iter(writes.db.call(index_states, [slug])), None)
    try:
        with os.fdopen(open_state(path, os.O_RDONLY), "rb") as fh:
            st = os.fstat(fh.fileno())
            identity = f"{st.st_dev}:{st.st_ino}"
            if row is not None and row[1] == "live" and row[2] == identity and row[3] == st.st_size:
                return  # nothing appended
            start = None
            if row is not None and st.st_size >= row[3]:
                if row[2] == identity:
                    start = row
                elif row[7]:  # another file under the same name: the same log if it starts alike
                    first = parse_lines(fh.readline()).records
                    start = row if first and first[0].id == row[7] else None
            fh.seek(start[3] if start else 0)
            data = fh.read()
    except FileNotFoundError:
        return  # archived or removed meanwhile: the next sync sees it where it went
    end = data.rfind(b"\n") + 1
    if not end and start is not None and start[2] == identity:
        return  # only a line still being written
    _store(writes, slug, "live", identity, data[:end], start)


def _sync_archived(paths: Paths, writes: _Writes, slug: str, row: tuple | None, warn: Callable[[str], None]) -> None:
    gz = gz_path(paths, slug)
    try:
        st = gz.stat()
    except FileNotFoundError:
        return
    identity = f"gz:{st.st_size}:{st.st_mtime_ns}"
    if row is not None and row[2] == identity:
        return
    try:
        meta = read_meta(paths, slug)
    except (UnreadableArchive, SessionError):
        meta = None  # listing says so; the log itself may still be searchable
    if row is not None and row[1] == "live" and meta is not None and meta.get("size") == row[3]:
        writes.db.call(index_mark, slug, row[2], "archived", identity)  # the archive holds what was read
        return
    try:
        data = gunzip(gz)
    except UnreadableArchive as err:
        warn(f"not searched: {err}")
        return
    except FileNotFoundError:
        return  # restored meanwhile
    end = data.rfind(b"\n") + 1 or len(data)
    _store(writes, slug, "archived", identity, data[:end], None)


def _store(writes: _Writes, slug: str, state: str, identity: str, data: bytes, start: tuple | None) -> None:
    """Index the complete lines of `data`, read from where `start` (a state row) stopped, or from the top
    (replacing the session's rows), in pieces of whole lines, each with the state it leaves (the owner
    refuses a piece, and the rest of the session's, when the index moved on meanwhile)."""
    row = list(start) if start else None
    offset = 0
    while True:
        cut = len(data) if len(data) - offset <= _PIECE_BYTES else data.rfind(b"\n", offset, offset + _PIECE_BYTES) + 1
        if cut <= offset:
            cut = data.find(b"\n", offset + _PIECE_BYTES) + 1 or len(data)
        row = _store_piece(writes, slug, state, identity, data[offset:cut], row)
        offset = cut
        if offset >= len(data):
            return


def _store_piece(writes: _Writes, slug: str, state: str, identity: str, data: bytes, start: list | None) -> list:
    size0, lines0, turns0, records0 = (start[3], start[4], start[5], start[6]) if start else (0, 0, 0, 0)
    view: LogView = parse_lines(data, first_line=lines0 + 1)
    piece = make_piece(view.records, first_seq=records0, first_turn=turns0)
    problems = [str(p) for p in view.problems]
    first_problem = (start[9] if start and start[9] else None) or (problems[0] if problems else None)
    first_id = (start[7] if start else None) or (view.records[0].id if view.records else None)
    new_state = [state, identity, size0 + len(data), lines0 + data.count(b"\n"), piece.last_turn,
                 records0 + len(view.records), first_id, (start[8] if start else 0) + len(problems), first_problem]
    writes.add(slug, start[3] if start else None, new_state, piece)
    return [slug, *new_state]


def report_problems(db: Database, warn: Callable[[str], None]) -> None:
    """One line per indexed session with unreadable lines (as catalog.list_sessions says them)."""
    for slug, count, first in db.call(index_problems):
        more = f" and {count - 1} more (workstation session show {slug} lists them)" if count > 1 else ""
        warn(f"{slug}: unreadable {first}{more}")


# --------------------------------------------------------------------------- searching
@dataclass(frozen=True)
class Hit:
    slug: str
    state: str  # live | archived
    record_id: str
    type: str
    turn: int | None
    ts: str | None
    text: str  # the record's whole text


def search(paths: Paths, db: Database, text: str, limit: int) -> list[Hit]:
    """Records whose text holds `text` (case-insensitively), in list order (live sessions, then archived;
    each in log order), at most `limit`. Call `sync` first."""
    needle = fold(text)
    for attempt in (1, 2):
        gen, pieces = db.call(index_pieces)
        try:
            return _scan_heap(paths, db, gen, pieces, needle, limit)
        except FileNotFoundError:
            if attempt == 2:  # rewritten twice in a row, or removed: the next sync finds out which
                raise SessionError(f"search index {heap_path(str(paths.state), gen)} is gone; search again") from None
    return []


def _scan_heap(paths: Paths, db: Database, gen: int, pieces: list, needle: bytes, limit: int,
               strict: bool = False) -> list[Hit]:
    with os.fdopen(open_state(heap_path(str(paths.state), gen), os.O_RDONLY), "rb") as fh:
        if not pieces or os.fstat(fh.fileno()).st_size == 0:
            return []
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as heap:
            return _search_heap(db, heap, pieces, needle, limit, strict)


class _Stale(Exception):
    """A hit the store has no row for: the pieces scanned are not the store's (a manifest from before rows
    were dropped)."""


# --------------------------------------------------------------------------- the manifest
class Manifest(msgspec.Struct):
    """What a search needs of the index, as the store held it after a sync (search.manifest in the state
    folder): the heap's generation and size, each session's state, identity and size, the pieces to scan and
    the sessions with unreadable lines. While every log and archive still has the identity it names, a
    search needs neither a sync nor the store (the store's client, DuckDB, loads only to describe hits);
    any difference, or a manifest torn, foreign or missing, and the search syncs through the store and
    writes it again. A cache of the store's rows, never the source of anything."""

    version: int
    gen: int
    size: int
    sessions: dict[str, tuple[str, str, int]]  # slug -> (state, identity, size), as search_sessions has them
    pieces: list[tuple[str, str, int, int]]  # index_pieces' rows
    problems: list[tuple[str, int, str]]  # index_problems' rows


MANIFEST_VERSION = 1
_decode_manifest = msgspec.json.Decoder(Manifest).decode


def manifest_path(state_dir: str) -> str:
    return os.path.join(state_dir, "search.manifest")


def search_synced(paths: Paths, db: Database, text: str, limit: int,
                  warn: Callable[[str], None] = no_warning) -> list[Hit]:
    """`sync`, `report_problems` and `search` in one, skipping the first two through the store when no log
    changed since the manifest was written: an unchanged history of 13,000 sessions costs a stat per log
    and the scan, and DuckDB only when there are hits to describe."""
    needle = fold(text)
    manifest = _read_manifest(paths)
    for attempt in (1, 2):
        if manifest is None or not _unchanged(paths, manifest):
            sync(paths, db, warn=warn)
            manifest = _write_manifest(paths, db, manifest, warn)
        try:
            found = _scan_heap(paths, db, manifest.gen, manifest.pieces, needle, limit, strict=attempt == 1)
        except _Stale:  # the store lost rows the manifest still names (it is the truth): sync and look again
            manifest = None
            continue
        except FileNotFoundError:  # the heap was rewritten (compacted) since: sync and look again
            if attempt == 2:
                raise SessionError(f"search index {heap_path(str(paths.state), manifest.gen)} is gone; "
                                   "search again") from None
            manifest = None
            continue
        for slug, count, first in manifest.problems:
            more = f" and {count - 1} more (workstation session show {slug} lists them)" if count > 1 else ""
            warn(f"{slug}: unreadable {first}{more}")
        return found
    return []


def _read_manifest(paths: Paths) -> Manifest | None:
    try:
        with os.fdopen(open_state(manifest_path(str(paths.state)), os.O_RDONLY), "rb") as fh:
            found = _decode_manifest(fh.read())
    except (FileNotFoundError, PlantedLink, msgspec.DecodeError):  # rebuilt from the store (and replaced)
        return None
    return found if found.version == MANIFEST_VERSION else None


def _unchanged(paths: Paths, manifest: Manifest) -> bool:
    """Does every log and archive have the identity the manifest names (as `sync` tells them), and the heap
    at least the size it names? One listing of the logs and a stat each, no read: a log the manifest names
    is compared without the slug check (the manifest only names sessions), so 13,000 cost ~50 ms."""
    known = manifest.sessions
    live: set[str] = set()
    try:
        with os.scandir(paths.sessions) as entries:
            for entry in entries:
                name = entry.name
                if not name.endswith(SUFFIX) or name.startswith("."):
                    continue
                slug = name[: -len(SUFFIX)]
                row = known.get(slug)
                if row is None:
                    if slug_of(name) is None:
                        continue  # not a session's log: never read by sync either
                    return False  # a new session
                if row[0] != "live":
                    return False
                st = entry.stat(follow_symlinks=False)
                if row[1] != f"{st.st_dev}:{st.st_ino}" or row[2] != st.st_size:
                    return False
                live.add(slug)
    except FileNotFoundError:
        return False
    archived = [s for s in archived_slugs(paths) if s not in live]
    if len(live) + len(archived) != len(known):
        return False
    try:
        for slug in archived:
            row = known.get(slug)
            st = gz_path(paths, slug).stat()
            if row is None or row[1] != f"gz:{st.st_size}:{st.st_mtime_ns}":
                return False
        heap = os.lstat(heap_path(str(paths.state), manifest.gen))
    except FileNotFoundError:
        return False
    return stat.S_ISREG(heap.st_mode) and heap.st_size >= manifest.size


def _write_manifest(paths: Paths, db: Database, old: Manifest | None, warn: Callable[[str], None]) -> Manifest:
    gen, size, sessions, pieces, problems = db.call(index_snapshot)
    manifest = Manifest(MANIFEST_VERSION, gen, size, {slug: (state, identity, length)
                                                      for slug, state, identity, length in sessions},
                        [tuple(p) for p in pieces], [tuple(p) for p in problems])
    if manifest != old:
        try:
            data = msgspec.json.encode(manifest)
        except UnicodeEncodeError:  # a lone surrogate in a problem's text: no manifest, every search syncs
            return manifest
        try:
            atomic_write(Path(manifest_path(str(paths.state))), data, 0o600, staging=paths.staging, durable=False)
        except OSError as err:
            warn(f"the search manifest {manifest_path(str(paths.state))} could not be saved "
                 f"({err.strerror or err}): the next search syncs through the store again")
    return manifest


def _search_heap(db: Database, heap: mmap.mmap, pieces: list[tuple], needle: bytes, limit: int,
                 strict: bool = False) -> list[Hit]:
    view = memoryview(heap)
    try:
        found = _scan(stringzilla.Str(view), pieces, needle, limit)
    finally:
        view.release()  # the map cannot close while a view of it is out
    if not found:
        return []
    rows = {row[0]: row[1:] for row in db.call(index_hits, [at for _, _, at in found])}
    hits = []
    for slug, state, at in found:
        row = rows.get(at)
        if row is None:
            if strict:
                raise _Stale()
            continue  # the session was dropped or read again since the pieces were listed
        record_id, kind, turn, ts, text_at, text_len = row
        hits.append(Hit(slug, state, record_id, kind, turn, ts, _decode(heap[text_at:text_at + text_len])))
    return hits


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8", "surrogatepass")  # make_piece encodes a lone surrogate as it came
    except UnicodeDecodeError:  # a heap damaged or replaced by another file of the same size
        return data.decode("utf-8", "replace")


def _scan(hay: Any, pieces: list[tuple], needle: bytes, limit: int) -> list[tuple[str, str, int]]:
    """(slug, state, heap offset of the record's case-folded text) of the first `limit` records holding
    `needle`, piece by piece. StringZilla's SIMD search runs ~6x as fast as mmap.find (0.05 against
    0.3 s over 634 MB)."""
    found = []
    width = len(needle)
    for slug, state, start, split in pieces:
        at = hay.find(needle, start, split)
        while at >= 0:
            found.append((slug, state, hay.rfind(_END, start, at) + 1 or start))
            if len(found) >= limit:
                return found
            end = hay.find(_END, at + width, split)  # one hit per record: go on from the next one
            at = hay.find(needle, end + 1, split) if end >= 0 else -1
    return found


def heap_path(state_dir: str, gen: int) -> str:
    return os.path.join(state_dir, f"search-{gen}.heap")


# --------------------------------------------------------------------------- owner side
@readonly
def index_states(con, slugs: list[str] | None) -> list[tuple]:
    return con.execute("SELECT slug, state, identity, size, lines, turns, records, first_id, problems, "
                       "first_problem FROM search_sessions WHERE $slugs IS NULL OR slug IN (SELECT unnest($slugs))",
                       {"slugs": slugs}).fetchall()


def index_snapshot(con) -> tuple:
    """(generation, committed size, (slug, state, identity, size) of each session, index_pieces' rows,
    index_problems' rows), as of one moment: run under the owner's write lock (not readonly), so no sync
    lands between the statements."""
    gen, size = con.execute("SELECT gen, size FROM search_heap").fetchone()
    sessions = con.execute("SELECT slug, state, identity, size FROM search_sessions").fetchall()
    return gen, size, sessions, index_pieces(con)[1], index_problems(con)


@readonly
def index_identities(con) -> list[tuple]:
    """(slug, state, identity, size) of every indexed session: what tells a log that grew (the first
    four columns of index_states; 17,700 full rows took ~50 ms to fetch)."""
    return con.execute("SELECT slug, state, identity, size FROM search_sessions").fetchall()


@readonly
def index_problems(con) -> list[tuple]:
    return con.execute("SELECT slug, problems, first_problem FROM search_sessions WHERE problems > 0 "
                       "ORDER BY slug").fetchall()


@readonly
def heap_state(con) -> tuple[int, int]:
    """(generation, committed size) of the heap."""
    return con.execute("SELECT gen, size FROM search_heap").fetchone()


@readonly
def index_pieces(con) -> tuple[int, list[tuple]]:
    """The heap's generation and the ranges of case-folded texts to scan, in list order:
    (slug, state, start, split)."""
    gen = con.execute("SELECT gen FROM search_heap").fetchone()[0]
    return gen, con.execute("""
        SELECT p.slug, s.state, p.start, p.split FROM search_pieces p JOIN search_sessions s USING (slug)
        ORDER BY s.state = 'archived', p.slug, p.first_seq""").fetchall()


@readonly
def index_hits(con, offsets: list[int]) -> list[tuple]:
    """(folded_at, record_id, type, turn, ts, text_at, text_len) of the records whose case-folded texts start at `offsets`."""
    return con.execute("""SELECT folded_at, record_id, type, turn, ts, text_at, text_len FROM search_records
                          WHERE folded_at IN (SELECT unnest($offsets))""", {"offsets": offsets}).fetchall()


def heap_append(con, heap_dir: str, data: bytes | str) -> int:
    """Append `data` (bytes, or the path of a file holding them) to the heap and sync it; returns the
    offset it starts at. The caller commits rows pointing into it, and the new size, in its transaction
    (the owner's write lock keeps appends one at a time)."""
    gen, size = con.execute("SELECT gen, size FROM search_heap").fetchone()
    _remove_other_heaps(heap_dir, gen)
    fd = open_state(heap_path(heap_dir, gen), os.O_RDWR | os.O_CREAT)
    try:
        if os.fstat(fd).st_size < size:
            raise SessionError(f"search index {heap_path(heap_dir, gen)} is shorter than the store says; "
                               "search again to rebuild it")
        os.ftruncate(fd, size)  # a write that never committed
        if isinstance(data, str):
            with open(data, "rb") as src:
                copy_range(src.fileno(), fd, os.fstat(src.fileno()).st_size, 0, size)
        else:
            view = memoryview(data)
            while view:
                view = view[os.pwrite(fd, view, size + len(data) - len(view)):]
        os.fsync(fd)
    finally:
        os.close(fd)
    return size


def _remove_other_heaps(heap_dir: str, gen: int) -> None:
    """Heap files of other generations: a rewrite that crashed before it committed, or after."""
    mine = f"search-{gen}.heap"
    for name in os.listdir(heap_dir):
        if name.startswith("search-") and name.endswith(".heap") and name != mine:
            try:
                os.unlink(os.path.join(heap_dir, name))
            except FileNotFoundError:
                pass  # another cleanup got there first


def insert_rows(con, rows: str, params: dict, base: int, pieces: list[tuple[str, int, int, int, int]]) -> None:
    """Rows (`rows`: a SELECT yielding ROW_COLUMNS as `r`, with `params`) whose heap offsets are relative
    to `base`, and their `pieces` (slug, first_seq, start, split, stop, relative too); the committed size
    grows to the last piece's end. Inside the caller's transaction."""
    con.execute(f"""INSERT INTO search_records
        SELECT r.s, r.q, r.i, r.y, r.u, r.t, $base + r.a, $base + r.b, r.n FROM ({rows})""", {**params, "base": base})
    _insert_many(con, "INTO search_pieces",
                 [(slug, seq, base + start, base + split, base + stop) for slug, seq, start, split, stop in pieces])
    end = max((stop for *_, stop in pieces), default=0)
    con.execute("UPDATE search_heap SET size = greatest(size, ?)", [base + end])


def index_append(con, heap_dir: str, items: list[list], rows: str, data: bytes) -> list[str]:
    """Store pieces read from the logs: `items` ([slug, size the log was read from (None: from the top,
    replacing the session's rows), its new state, first seq, start, split, stop] in order; offsets into
    `data`), `rows` their search_records rows (offsets into `data` too). A piece read from where the index
    no longer stands is refused, with the session's later ones; returns the sessions refused. `data` is
    appended whole: a refused piece's bytes are left for the next rewrite of the heap."""
    slugs = sorted({item[0] for item in items})
    sizes = dict(con.execute("SELECT slug, size FROM search_sessions WHERE list_contains(?, slug)", [slugs]).fetchall())
    replaced, refused, cuts, accepted = set(), [], [], []
    for slug, expect, new_state, first_seq, *offsets in items:
        if slug in refused:
            continue
        if expect is None:
            replaced.add(slug)
        elif sizes.get(slug) != expect:
            refused.append(slug)
            cuts.append((slug, first_seq))
            continue
        sizes[slug] = new_state[2]
        accepted.append((slug, new_state, first_seq, *offsets))
    if not accepted:
        return refused
    base = heap_append(con, heap_dir, data) if data else 0
    con.execute("BEGIN TRANSACTION")
    try:
        if replaced:
            delete_sessions(con, sorted(replaced))
        source = f"""SELECT json_transform(unnest(string_split($rows, chr(10))), '{_struct()}') AS r"""
        if cuts:  # the rows of refused pieces: a session's, from the first one refused
            source = f"""SELECT r FROM ({source}) WHERE NOT EXISTS (
                SELECT 1 FROM (SELECT unnest($cut_slugs) AS s, unnest($cut_seqs) AS q) c WHERE c.s = r.s AND r.q >= c.q)"""
        if rows:  # none when the lines read held no record (unreadable ones only)
            insert_rows(con, source, {"rows": rows, "cut_slugs": [c[0] for c in cuts], "cut_seqs": [c[1] for c in cuts]}
                        if cuts else {"rows": rows}, base,
                        [(slug, first_seq, start, split, stop) for slug, _, first_seq, start, split, stop in accepted
                         if stop > start])
        con.execute("UPDATE search_heap SET size = ?", [base + len(data)])
        latest = {slug: new_state for slug, new_state, *_ in accepted}  # a session's last piece says where it stands
        _insert_many(con, "OR REPLACE INTO search_sessions", [[slug, *state] for slug, state in latest.items()])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    if replaced:
        compact_heap(con, heap_dir)
    return refused


def _insert_many(con, into: str, rows: list) -> None:
    """INSERT `into` (`INTO table`, `OR REPLACE INTO table`) the rows, in one statement: DuckDB's
    executemany runs one statement per row, ~3 ms each (20 s of the first search after a sidecar pass
    had appended a redaction to 3,000 of 13,000 sessions, and as much of every 13,000-file import)."""
    if rows:
        columns = [list(column) for column in zip(*rows)]
        con.execute(f"INSERT {into} SELECT {', '.join('unnest(?)' for _ in columns)}", columns)


def _struct() -> str:
    return ROW_COLUMNS.replace("'", '"')


def delete_sessions(con, slugs: list[str]) -> None:
    con.execute("DELETE FROM search_records WHERE list_contains(?, slug)", [slugs])
    con.execute("DELETE FROM search_pieces WHERE list_contains(?, slug)", [slugs])
    con.execute("DELETE FROM search_sessions WHERE list_contains(?, slug)", [slugs])


def index_mark(con, slug: str, identity: str, state: str, new_identity: str) -> None:
    con.execute("UPDATE search_sessions SET state = ?, identity = ? WHERE slug = ? AND identity = ?",
                [state, new_identity, slug, identity])


def index_drop(con, heap_dir: str, slugs: list[str]) -> None:
    con.execute("BEGIN TRANSACTION")
    try:
        delete_sessions(con, slugs)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    compact_heap(con, heap_dir)


def index_reset(con, heap_dir: str) -> None:
    """Forget the whole index (its heap is gone or short): the next sync reads every log again."""
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute("DELETE FROM search_records")
        con.execute("DELETE FROM search_pieces")
        con.execute("DELETE FROM search_sessions")
        con.execute("UPDATE search_heap SET gen = gen + 1, size = 0")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    gen = con.execute("SELECT gen FROM search_heap").fetchone()[0]
    _remove_other_heaps(heap_dir, gen)
    if os.path.lexists(heap_path(heap_dir, gen)):
        os.unlink(heap_path(heap_dir, gen))  # the new generation starts empty: whatever lies there is not ours


def compact_heap(con, heap_dir: str, *, min_garbage: int = COMPACT_MIN_BYTES) -> bool:
    """Rewrite the heap without the ranges nothing points to, when they are at least `min_garbage`
    bytes and outweigh the rest; True when it did. The live ranges go in list order, so a search
    reads the new file front to back."""
    gen, size = con.execute("SELECT gen, size FROM search_heap").fetchone()
    live = con.execute("SELECT coalesce(sum(stop - start), 0) FROM search_pieces").fetchone()[0]
    if size - live < max(min_garbage, live, 1):
        return False
    pieces = con.execute("""
        SELECT p.slug, p.first_seq, p.start, p.stop FROM search_pieces p JOIN search_sessions s USING (slug)
        ORDER BY s.state = 'archived', p.slug, p.first_seq""").fetchall()
    moves = []
    new = heap_path(heap_dir, gen + 1)
    if os.path.lexists(new):
        os.unlink(new)  # a rewrite that crashed, or something planted: never written through
    with os.fdopen(open_state(heap_path(heap_dir, gen), os.O_RDONLY), "rb") as src, \
            os.fdopen(open_state(new, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "wb") as dst:
        at = 0
        for slug, first_seq, start, stop in pieces:
            copy_range(src.fileno(), dst.fileno(), stop - start, start, at)
            moves.append((slug, first_seq, at - start))
            at += stop - start
        os.fsync(dst.fileno())
    fsync_dir(Path(heap_dir))
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute("CREATE TEMP TABLE heap_moves (slug VARCHAR, first_seq BIGINT, delta BIGINT)")
        _insert_many(con, "INTO heap_moves", moves)
        con.execute("""UPDATE search_records r SET folded_at = r.folded_at + m.delta, text_at = r.text_at + m.delta
            FROM search_pieces p JOIN heap_moves m USING (slug, first_seq)
            WHERE r.slug = p.slug AND r.folded_at >= p.start AND r.folded_at < p.split""")
        con.execute("""UPDATE search_pieces p SET start = p.start + m.delta, split = p.split + m.delta,
            stop = p.stop + m.delta FROM heap_moves m WHERE p.slug = m.slug AND p.first_seq = m.first_seq""")
        con.execute("UPDATE search_heap SET gen = gen + 1, size = ?", [at])
        con.execute("DROP TABLE heap_moves")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        os.unlink(new)
        raise
    _remove_other_heaps(heap_dir, gen + 1)
    return True
