"""Turning a source file's drafts into session records: idempotent, incremental, with events.

For each conversation a source holds:

1. the target session is its slug (`claude-2025-10-21-cfa1e878`), created on first import;
2. the session's records are read and every source item they came from (`source.id`,
   `source.merged`) is known. A draft whose items are all known is skipped; one whose items are
   all new is written whole; one with some new items (an answer still being logged when it was
   last imported) is continued by a record holding only the new parts (`continues`: the record it
   extends; its usage: what grew since);
3. new records get `tokens`, compact records their `covers` (every turn before them), and all
   are appended in one locked write;
4. their episodic events (turn, model_call with tokens and cost, tool_call, file_read/file_edit,
   compaction, error), at the source timestamps, in a session named by the slug; the file's state
   (size, mtime, inode, a hash of its head: an unchanged file is skipped unread); the search
   index rows of new sessions and their lines in the sessions list's summary wait in a batch.

`flush` (after each file unless the caller defers it: a bulk import flushes every ~256 MB of
sources) first fsyncs every log written since, together (concurrent fsyncs share journal
commits), then writes the batch in one transaction of the owner. A process killed before that
leaves logs without events and files without state: the next import of such a file re-reads it
(no state), finds its records known and writes their events again; event ids are made from the
record ids and an event already stored is skipped, so nothing is written twice.

Re-reading a grown file from its start costs a parse of the whole file, never a duplicate: the
provenance in the log decides what is new, so a lost or stale state only costs time.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import msgspec

from .. import scrub
from ..fsutil import open_regular
from ..paths import Paths
from ..sessions import textindex
from ..sessions.catalog import add_to_summary, summary_of_new_log
from ..sessions.compaction import touched_paths
from ..sessions.modelview import covered_count
from ..sessions.turns import number as number_turns
from ..sessions.log import (FORMAT_VERSION, LogView, Session, SessionArchived, SessionError, fsync_paths,
                            new_record_id, record_text)
from ..sessions.records import TURN_CLASSES, Assistant, Compact, Covers, Record, from_dict, reason
from ..store.broker import Database, readonly
from . import FORMATS, ImportProblem, parse
from .base import Conversation, Draft, Usage, record_id
from .events import event_lines
from ..pricing import cost

HEAD_BYTES = 4096
# new sessions a flush adds to the sessions list's summary at least: rewriting a summary of 13,000 sessions
# (~20 ms) costs more than the list reading a few new logs (~1 ms each), so one file's import leaves it be
SUMMARY_MIN = 16


@dataclass
class SessionResult:
    slug: str
    added: dict[str, int] = field(default_factory=dict)  # record type -> records added
    created: bool = False
    skipped: str = ""  # why nothing could be added (an archived session)

    @property
    def count(self) -> int:
        return sum(self.added.values())


@dataclass
class FileResult:
    path: str
    format: str | None = None
    sessions: list[SessionResult] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    bytes: int = 0
    unchanged: bool = False  # the same file as last time: not read
    error: str = ""  # the file could not be imported at all

    @property
    def added(self) -> int:
        return sum(s.count for s in self.sessions)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "format": self.format, "bytes": self.bytes, "unchanged": self.unchanged,
                "error": self.error or None, "added": self.added, "problems": self.problems,
                "sessions": [{"slug": s.slug, "added": s.added, "created": s.created, "skipped": s.skipped or None}
                             for s in self.sessions]}


class Importer:
    """Imports source files into a workspace's sessions; keep one per process to reuse its readers.

    Without a database (`db=None`) only the logs are written (no events, state or index)."""

    # source bytes read before a deferred batch is flushed anyway (~0.9x that in memory): a flush's
    # commit makes the store checkpoint (0.3-1.2 CPU-s each, more as the store grows), and 256 MB
    # rather than 64 took a fifth off the owner's CPU importing 0.5 GB
    FLUSH_BYTES = 256 << 20

    def __init__(self, paths: Paths, db: Database | None = None, *, counter: Callable[[str], int] | None = None,
                 derived: bool = False):
        self.paths = paths
        self.db = db
        self.counter = counter
        self.derived = db is not None or derived  # make events, index rows and states (a worker hands them back)
        self._sessions: dict[str, Session] = {}
        self._states: dict[str, tuple] | None = None  # source path -> stored state, loaded on first use
        self._batch = _Batch()
        self._secrets: list[str] = []  # known secret values in the file being imported
        paths.ensure()

    def __enter__(self) -> "Importer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.flush()

    # ------------------------------------------------------------------ files
    def import_file(self, path: str | os.PathLike, fmt: str | None = None, *, flush: bool = True) -> FileResult:
        """Import one file; flush=False leaves the batch for a later flush() (bulk imports)."""
        result = self._import(path, fmt)
        if flush or self._batch.bytes >= self.FLUSH_BYTES:
            self.flush()
        return result

    def _import(self, path: str | os.PathLike, fmt: str | None, *, resend: bool | None = None) -> FileResult:
        """resend: whether the file had no stored state (None: look it up here, and skip the file
        when it is unchanged; a worker process is told by the process that owns the state)."""
        shown = str(path)
        try:
            real = Path(os.path.realpath(os.path.expanduser(shown)))
            if real.is_dir():
                return FileResult(shown, error=f"{shown}: is a folder; give the session files in it")
        except OSError as err:
            return FileResult(shown, error=f"{shown}: cannot read ({err.strerror})")
        if fmt is not None and fmt not in FORMATS:
            return FileResult(shown, error=f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
        try:
            with os.fdopen(open_regular(real), "rb") as fh:  # a FIFO would hang a plain open
                st = os.fstat(fh.fileno())
                head = fh.read(HEAD_BYTES)
                identity = (st.st_size, st.st_mtime_ns, st.st_ino, hashlib.sha1(head).hexdigest())
                if resend is None:
                    state = self._source_states().get(str(real))
                    if state is not None and tuple(state[1:5]) == identity and (fmt is None or fmt == state[0]):
                        return FileResult(shown, state[0], bytes=st.st_size, unchanged=True)
                    resend = state is None
                fh.seek(0)
                data = fh.read()  # whole, in one buffer (head + the rest would copy it once more)
        except FileNotFoundError:
            return FileResult(shown, error=f"{shown}: no such file")
        except OSError as err:
            return FileResult(shown, error=f"{shown}: cannot read ({err.strerror})")
        try:
            fmt, parsed = parse(data, real, fmt)
        except ImportProblem as err:
            return FileResult(shown, error=str(err).replace(str(real), shown, 1))
        result = FileResult(shown, fmt, bytes=len(data),
                            problems=[str(p).replace(str(real), shown, 1) for p in parsed.problems])
        # secrets never reach our files: the known values (this machine's keys) found in the source
        # are masked in its records, at the cost of one substring scan a file (key formats: _write)
        self._secrets = [s for s in scrub.known() if s.encode("utf-8", "surrogatepass") in data]
        for conversation in parsed.conversations:
            result.sessions.append(self._write(conversation, fmt, str(real), result.problems, resend=resend))
        self._batch.bytes += len(data)
        if self.derived:
            self._batch.sources.append((str(real), fmt, *identity, parsed.consumed, [s.slug for s in result.sessions]))
            if self._states is not None:
                self._states[str(real)] = (fmt, *identity)
        return result

    def unchanged(self, path: str | os.PathLike, fmt: str | None) -> tuple[FileResult | None, bool]:
        """(a result when the file is unchanged since its last import, whether it has no stored state),
        from its size, mtime, inode and first 4 KB: what a bulk import asks before handing a file out."""
        try:
            real = os.path.realpath(os.path.expanduser(str(path)))
            with os.fdopen(open_regular(real), "rb") as fh:
                st = os.fstat(fh.fileno())
                identity = (st.st_size, st.st_mtime_ns, st.st_ino, hashlib.sha1(fh.read(HEAD_BYTES)).hexdigest())
        except OSError:
            return None, True  # the import says what is wrong with it
        state = self._source_states().get(real)
        if state is not None and tuple(state[1:5]) == identity and (fmt is None or fmt == state[0]):
            return FileResult(str(path), state[0], bytes=st.st_size, unchanged=True), False
        return None, state is None

    def absorb(self, batch: "_Batch") -> None:
        """Take over what a worker process imported, to be flushed with the rest."""
        mine = self._batch
        mine.files += batch.files
        mine.events += batch.events
        mine.index.update(batch.index)
        mine.resync |= batch.resync
        mine.sources += batch.sources
        mine.bytes += batch.bytes
        mine.summaries.update(batch.summaries)
        if self._states is not None:
            for row in batch.sources:
                self._states[row[0]] = tuple(row[1:6])

    @property
    def pending_bytes(self) -> int:
        """Source bytes imported since the last flush."""
        return self._batch.bytes

    def take_batch(self) -> "_Batch":
        batch, self._batch = self._batch, _Batch()
        return batch

    def _source_states(self) -> dict[str, tuple]:
        if self._states is None:
            self._states = {r[0]: tuple(r[1:]) for r in self.db.call(source_states)} if self.db is not None else {}
        return self._states

    # ------------------------------------------------------------------ flushing
    def flush(self) -> None:
        """Make everything imported so far durable: logs fsynced, then events, index rows and
        source states in one transaction."""
        batch, self._batch = self._batch, _Batch()
        fsync_paths(batch.files)
        if len(batch.summaries) >= SUMMARY_MIN:
            add_to_summary(self.paths, batch.summaries)
        if self.db is None or batch.empty:
            return
        # the bulk goes through files DuckDB reads in parallel (4x faster than parsing one string)
        folder = self.paths.state / "tmp"
        folder.mkdir(exist_ok=True)
        stem = folder / f"import-{os.getpid()}-{new_record_id()}"
        events, rows, heap = (Path(f"{stem}-events.ndjson"), Path(f"{stem}-index.ndjson"),
                              Path(f"{stem}-index.heap"))
        try:
            with open(events, "wb") as fh:
                fh.writelines(batch.events)
            pieces = []  # (slug, first_seq, start, split, stop) in the heap part
            with open(rows, "wb") as rows_fh, open(heap, "wb") as heap_fh:
                at = 0
                for slug, (_, piece) in batch.index.items():
                    lines, placed = piece.placed(slug, at)
                    rows_fh.writelines(lines)
                    heap_fh.write(piece.data)
                    pieces.append(placed)
                    at += len(piece.data)
            states = [[slug, *state] for slug, (state, _) in batch.index.items()]
            self.db.call(import_flush, stem.name, str(events), str(rows), str(heap), json.dumps(pieces),
                         json.dumps(states), json.dumps(batch.sources), str(self.paths.state))
        finally:
            events.unlink(missing_ok=True)
            rows.unlink(missing_ok=True)
            heap.unlink(missing_ok=True)
        if batch.resync:
            textindex.sync(self.paths, self.db, only=sorted(batch.resync))

    # ------------------------------------------------------------------ one session
    def _session(self, slug: str) -> tuple[Session, bool]:
        known = self._sessions.get(slug)
        if known is not None and known.path.exists():
            return known, False
        created = False
        if not (self.paths.sessions / f"{slug}.jsonl").exists():
            try:
                session = Session.create(self.paths, slug, counter=self.counter, sync=False)
                created = True
            except SessionError as err:
                if "already exists" not in str(err) or "archive" in str(err):
                    raise
        if not created:
            session = Session.open(self.paths, slug, counter=self.counter)
        self._sessions[slug] = session
        return session, created

    def _write(self, conversation: Conversation, fmt: str, file: str, problems: list[str], *,
               resend: bool) -> SessionResult:
        slug = conversation.slug
        result = SessionResult(slug)

        def make(view: LogView) -> list[Record]:
            known: dict[str, Record] = {}
            for record in view.records:
                source = record.source
                if source is not None:
                    known[source.id] = record
                    for sid in source.merged or ():
                        if isinstance(sid, str):
                            known[sid] = record
            drafts = self._materialize(conversation, fmt, file, known)
            # new records in whose strings the linear-time prefilter sees a possible key format are
            # masked whole (scrub.mask_data); scanning what is written, not the source, skips what is
            # never imported (Codex's encrypted reasoning: base64 runs that slow RE2 down ~10x)
            if drafts and scrub.data_may_hold_key(drafts):
                drafts = [scrub.mask_data(data) for data in drafts]
            elif drafts and self._secrets:
                drafts = _masked(drafts, self._secrets)
            records = []
            for data in drafts:  # checked as a reader checks a line: what it would refuse is not written
                try:
                    records.append(from_dict(data))
                except msgspec.ValidationError as err:
                    problems.append(f"{file}: {data.get('type')} record {data.get('id')} not imported: "
                                    f"{reason(err)}")
            if records:
                self._finish(records, view)
            return records

        try:
            session, result.created = self._session(slug)
            # derived and written under the log's append lock: a second importer of the same
            # source (a --watch beside the sidecar's) sees these records and adds nothing
            view, records, before, after = session.append_from(make, sync=False)
        except SessionError as err:
            archived = isinstance(err, SessionArchived) or "archive" in str(err)
            result.skipped = (f"session {slug} is archived: restore it (workstation session restore {slug}) to "
                              "import what is new" if archived else str(err))
            problems.append(f"{file}: {result.skipped}")
            return result
        if records:
            self._batch.files.append(session.path)
            if before == 0 and not view.records:
                self._summarize(session, records, after)
            for record in records:
                result.added[record.kind] = result.added.get(record.kind, 0) + 1
            if self.derived:
                self._index(session, view, records, before, after)
        if self.derived:
            # a file with no stored state may have been imported by a process killed before its
            # flush: its records' events are sent again (the owner skips those it has)
            again = [r for r in view.records if r.source is not None and r.source.file == file] if resend else []
            if again or records:
                self._events(slug, fmt, view, again, records)
        return result

    def _summarize(self, session: Session, records: list[Record], after: int) -> None:
        """The sessions list's line of a log this import created, from the records it wrote (the first list
        after a bulk import would read every log for it otherwise)."""
        try:
            st = os.stat(session.path)
        except FileNotFoundError:
            return
        if st.st_size == after:  # nothing appended since: the log holds these records alone
            self._batch.summaries[session.slug] = summary_of_new_log(session.slug, records, st)

    def _index(self, session: Session, view: LogView, records: list[Record], before: int, after: int) -> None:
        """Index rows of a session this import created (made from the records, not re-read from
        the file); other sessions are brought up to date from their logs after the flush."""
        if before != 0 or view.records:
            self._batch.resync.add(session.slug)
            return
        try:
            st = os.stat(session.path)
        except FileNotFoundError:
            return
        piece = textindex.make_piece(records)
        state = ["live", f"{st.st_dev}:{st.st_ino}", after, len(records), piece.last_turn, len(records),
                 records[0].id, 0, None]
        self._batch.index[session.slug] = (state, piece)

    # ------------------------------------------------------------------ drafts -> records
    def _materialize(self, conversation: Conversation, fmt: str, file: str, known: dict[str, Record]
                     ) -> list[dict]:
        """The new records of a conversation as JSON objects (masked, checked and counted after)."""
        ids = {sid: record.id for sid, record in known.items()}
        records: list[dict] = []
        for draft in conversation.drafts:
            record = self._record(draft, fmt, conversation.key, file, known, ids)
            if record is None:
                continue
            records.append(record)
            for sid in draft.sids():
                ids.setdefault(sid, record["id"])
        return records

    def _record(self, draft: Draft, fmt: str, key: str, file: str, known: dict[str, Record],
                ids: dict[str, str]) -> dict | None:
        sids = draft.sids()
        new = [sid for sid in sids if sid not in known]
        if not new:
            return None
        parts, usage, ts, continues = draft.parts, draft.usage, draft.ts, None
        if len(new) < len(sids):  # some parts were imported before: continue that record
            earlier = known[next(sid for sid in sids if sid in known)]
            continues = earlier.id
            parts = [p for p in draft.parts or () if p.sid in new]
            if not parts:
                return None
            usage = _grown(draft.usage, earlier)
            ts = parts[0].ts or ts
        sid = new[0]
        record: dict[str, Any] = {"v": FORMAT_VERSION, "id": record_id(ts, fmt, key, sid), "ts": ts,
                                  "type": draft.type}
        fields = dict(draft.fields)
        if draft.type == "assistant":
            texts = [p.value for p in parts or () if p.kind == "text" and p.value]
            thoughts = [p.value for p in parts or () if p.kind == "reasoning" and p.value]
            calls = [dict(p.value) for p in parts or () if p.kind == "call"]
            record["content"] = "\n\n".join(texts)
            if calls:
                record["tool_calls"] = calls
            if thoughts:
                record["reasoning"] = "\n\n".join(thoughts)
        if "rewind_to" in fields:
            target = ids.get(fields.pop("rewind_to"))
            if target:
                fields["rewind_to"] = target
        if continues:
            for name in ("cwd", "git_branch"):
                fields.pop(name, None)
        record.update({k: v for k, v in fields.items() if v is not None})
        if continues:
            record["continues"] = continues
        if usage is not None:
            record.update(usage.fields())
            if continues:
                record.pop("tokens_out_first", None)
            price = usage.cost if usage.cost is not None else _price(record.get("model", ""), usage)
            if price is not None:
                record["cost_usd"] = round(price, 8)
        source: dict[str, Any] = {"format": fmt, "file": file, "id": sid}
        if len(new) > 1:
            source["merged"] = new[1:]
        source.update(draft.source)
        record["source"] = source
        return record

    def _finish(self, records: list[Record], view: LogView) -> None:
        """Compact records' `covers` (every turn before them) and every record's `tokens`."""
        turns = list(view.turns)
        numbered = number_turns([*view.records, *records])  # turns as sessions.turns counts them
        previous = view.last_compact()
        for record in records:
            if isinstance(record, TURN_CLASSES):
                turns.append(record)
            elif isinstance(record, Compact):
                done = covered_count(turns, previous)
                first_new = min(done, len(turns) - 1)
                record.covers = Covers(first_id=turns[0].id, last_id=turns[-1].id, first_turn=1,
                                       last_turn=numbered.of(turns[-1]),
                                       new_first_turn=max(1, numbered.of(turns[first_new])),
                                       new_first_id=turns[first_new].id) if turns else Covers()
                record.files = list(dict.fromkeys(((previous.files if previous else None) or [])
                                                  + touched_paths(turns[done:])))
                if previous is not None:
                    record.folds = previous.id
                previous = record
        counts = self._count([record_text(r) for r in records])
        for record, tokens in zip(records, counts):
            record.tokens = tokens
            if self.counter is None:
                record.tokens_estimated = True

    def _count(self, texts: list[str]) -> list[int]:
        if self.counter is not None:
            return [self.counter(t) for t in texts]
        return [estimate_tokens(t) for t in texts]

    # ------------------------------------------------------------------ events
    def _events(self, slug: str, fmt: str, view: LogView, again: list[Record], records: list[Record]) -> None:
        calls = {c.id: c for r in view.records + records if isinstance(r, Assistant) for c in r.tool_calls or ()}
        flow = f"import:{fmt}"
        for record in again + records:
            self._batch.events.extend(event_lines(record, slug, fmt, calls, flow))


@dataclass
class _Batch:
    """What waits for the next flush."""

    files: list[Path] = field(default_factory=list)  # logs written without fsync
    events: list[bytes] = field(default_factory=list)  # encoded event lines (import_flush's shape)
    index: dict[str, tuple[list, textindex.Piece]] = field(default_factory=dict)  # new session -> (state, piece)
    resync: set[str] = field(default_factory=set)  # sessions whose index is read from their logs
    sources: list[tuple] = field(default_factory=list)  # source file states
    summaries: dict[str, Any] = field(default_factory=dict)  # new session -> its line in the sessions summary
    bytes: int = 0

    @property
    def empty(self) -> bool:
        return not (self.events or self.index or self.resync or self.sources)


# --------------------------------------------------------------------------- helpers
def estimate_tokens(text: str) -> int:
    """An upper estimate of a text's cl100k tokens: its UTF-8 bytes / 3, rounded up.

    Imported records carry this (and `tokens_estimated`) instead of an exact count: cl100k runs at
    ~7 MB/s a core here, slower than everything else an import does together, and the logs of a
    year of another agent's sessions are gigabytes. cl100k averages ~4 bytes a token on English
    prose, ~3 on code and JSON, 5+ on Cyrillic, so budgets built on it err on the side of
    compacting early, never of overflowing a model's window.
    """
    return (len(text.encode("utf-8", "surrogatepass")) + 2) // 3 if text else 0


def _grown(usage: Usage | None, earlier: Record) -> Usage | None:
    """What a response's usage grew by since an earlier import recorded part of it."""
    if usage is None:
        return None
    if not isinstance(earlier, Assistant):
        earlier = Assistant()  # another record type holds no usage
    grown = Usage(tokens_in=max(0, usage.tokens_in - int(earlier.tokens_in or 0)),
                  tokens_out=max(0, usage.tokens_out - int(earlier.tokens_out or 0)),
                  cache_read=max(0, usage.cache_read - int(earlier.cache_read_tokens or 0)),
                  cache_creation=max(0, usage.cache_creation - int(earlier.cache_creation_tokens or 0)),
                  cache_creation_1h=max(0, usage.cache_creation_1h - int(earlier.cache_creation_1h_tokens or 0)))
    return grown if (grown.tokens_in or grown.tokens_out) else None


def _price(model: str, usage: Usage) -> float | None:
    return cost(model, usage.tokens_in, usage.tokens_out, usage.cache_read, usage.cache_creation,
                usage.cache_creation_1h)


def _masked(records: list[dict], secrets: list[str]) -> list[dict]:
    """Records with every known secret value in them (an API key of this machine that the other
    agent logged) replaced by scrub.MASK; only called for a source whose bytes hold one."""
    out = []
    for record in records:
        text = json.dumps(record, ensure_ascii=False)
        clean = text
        for secret in secrets:
            clean = clean.replace(json.dumps(secret, ensure_ascii=False)[1:-1], scrub.MASK)
        out.append(json.loads(clean) if clean != text else record)
    return out


# --------------------------------------------------------------------------- owner side
_EVENT = ("{'ss':'VARCHAR','fl':'VARCHAR','i':'VARCHAR','t':'BIGINT','y':'VARCHAR','n':'VARCHAR','d':'DOUBLE',"
          "'ti':'INTEGER','to':'INTEGER','c':'DOUBLE','o':'BOOLEAN','x':'JSON'}")


@readonly
def source_states(con) -> list[tuple]:
    return con.execute("SELECT path, format, size, mtime_ns, inode, head_sha FROM import_sources").fetchall()


def import_flush(con, batch_id: str, events: str, index_rows: str, index_heap: str, index_pieces: str,
                 index_states: str, sources: str, heap_dir: str) -> None:
    """One import batch in one transaction: events (read from the NDJSON file `events`; those already
    stored skipped, by session and id), search-index rows of new sessions (the file `index_rows`, their
    texts in the file `index_heap`, appended to the search heap first) and their states, source file
    states. A retry of a batch that landed is recognised by its id."""
    if con.execute("SELECT 1 FROM event_batches WHERE id = ?", [batch_id]).fetchone():
        return
    pieces = json.loads(index_pieces)
    base = textindex.heap_append(con, heap_dir, index_heap) if pieces else 0
    con.execute("BEGIN TRANSACTION")
    try:
        count = 0
        if os.path.getsize(events):
            count = con.execute(f"""
                INSERT INTO events (id, ts, session, flow, step, parent, type, name, duration_ms,
                                    tokens_in, tokens_out, cost_usd, ok, data)
                SELECT e.i, make_timestamp(e.t), e.ss, e.fl, NULL, NULL, e.y, coalesce(e.n, ''), e.d,
                       e.ti, e."to", e.c, e.o, e.x
                FROM read_ndjson($path, columns={_EVENT}) AS e
                WHERE NOT EXISTS (SELECT 1 FROM events x WHERE x.session = e.ss AND x.id = e.i)""",
                                {"path": events}).fetchone()[0]
        states = json.loads(index_states)
        if states:
            slugs = [row[0] for row in states]
            textindex.delete_sessions(con, slugs)
            con.execute("""INSERT INTO search_sessions
                SELECT r[1], r[2], r[3], r[4]::BIGINT, r[5]::BIGINT, r[6]::INTEGER, r[7]::BIGINT, r[8], r[9]::INTEGER,
                       r[10] FROM (SELECT unnest(from_json($rows, '["VARCHAR[]"]')) AS r)""", {"rows": index_states})
        if pieces:
            textindex.insert_rows(con, f"SELECT r FROM read_ndjson($path, columns={textindex.ROW_COLUMNS}) AS r",
                                  {"path": index_rows}, base, pieces)
        if sources != "[]":
            con.execute("""INSERT OR REPLACE INTO import_sources
                SELECT r->>0, r->>1, (r->>2)::BIGINT, (r->>3)::BIGINT, (r->>4)::BIGINT, r->>5, (r->>6)::BIGINT,
                       from_json(r->7, '["VARCHAR"]'), make_timestamp($now)
                FROM (SELECT unnest(from_json($rows, '["JSON"]')) AS r)""",
                        {"rows": sources, "now": time.time_ns() // 1000})
        con.execute("INSERT INTO event_batches VALUES (?, ?, make_timestamp(?))", [batch_id, count, time.time_ns() // 1000])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    if states:
        textindex.compact_heap(con, heap_dir)  # sessions imported again left their old ranges behind


@readonly
def list_sources(con) -> list[tuple]:
    return con.execute("SELECT path, format, size, consumed, sessions, epoch(imported_at) FROM import_sources "
                       "ORDER BY path").fetchall()
