"""Finding sessions, live and archived: listing, opening, search, export."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from .. import scrub
from ..fsutil import atomic_write, open_state
from ..paths import Paths, PlantedLink
from .archive import UnreadableArchive, no_warning, archived_slugs, gz_path, read_archived, read_meta, recover
from .log import (FORMAT_VERSION, SUFFIX, LogView, Session, SessionError, check_slug, live_slugs, record_text,
                  slug_of, valid_slug)
from .logview import changed_files
from .records import TURN_CLASSES, Assistant, Compact, Covers, Redaction, Rewind, Record, Tool, Uncompact, User
from .turns import (Coverage, Turns, hit_turn, number as number_turns, numbers_in_order, of_log, starts_turn,
                    taken_back)

if TYPE_CHECKING:
    from ..store.broker import Database


@dataclass(slots=True)
class SessionInfo:
    slug: str
    state: str  # live | archived
    turns: int  # user messages (sessions.turns)
    covered_turns: int  # turns 1..covered_turns are summarized by a compact record (the last maybe in part)
    size: int  # bytes of the raw log (uncompressed)
    last_activity: str | None
    title: str
    problems: int  # unreadable lines
    changed: tuple[str, ...] = ()  # files its tool calls changed (sessions.logview.changed_files)
    partial: bool = False  # the summary reaches into turn covered_turns, whose newest steps stay verbatim
    taken_back: int = 0  # turns a rewind took back (sessions.turns.taken_back); 0 for an archived one (not in its meta)

    @property
    def compacted(self) -> str:
        return Coverage(self.covered_turns, self.partial).describe()


def _title(view: LogView) -> str:
    """The first user message, skipping what an imported agent injected itself (`source.meta`)."""
    users = [t for t in view.turns if isinstance(t, User)]
    typed = [t for t in users if not (t.source and t.source.meta)] or users
    first = typed[0].content if typed else ""
    return " ".join(first.split())[:80]


def _report_problems(slug: str, problems: list[str], warn: Callable[[str], None]) -> None:
    """One line for a session's unreadable lines: the first of them and how many more."""
    if problems:
        _report_unreadable(slug, problems[0], len(problems), warn)


def _report_unreadable(slug: str, first: str, count: int, warn: Callable[[str], None]) -> None:
    more = f" and {count - 1} more (workstation session show {slug} lists them)" if count > 1 else ""
    warn(f"{slug}: unreadable {first}{more}")


def list_sessions(paths: Paths, *, archived: bool = False,
                  warn: Callable[[str], None] = no_warning) -> list[SessionInfo]:
    """Live sessions (and archived ones too when asked), newest activity first.

    `warn` gets a line for each session with unreadable lines and each archive that
    cannot be read (which is left out of the list, and left as it is).
    """
    recover(paths, warn=warn)
    infos = _live_infos(paths, warn)
    if archived:
        for slug in archived_slugs(paths):
            try:
                meta = read_meta(paths, slug)
            except UnreadableArchive as err:
                warn(f"skipped {slug}, left as it is: {err}")
                continue
            except SessionError:
                continue  # restored between listing the folder and reading it
            problems = [str(p) for p in meta.get("problems", [])]
            _report_problems(slug, problems, warn)
            infos.append(SessionInfo(slug, "archived", meta["turns"], meta["covered_turns"], meta["size"],
                                     meta.get("last_activity"), meta.get("title", ""), len(problems),
                                     tuple(str(p) for p in meta.get("changed") or ()), bool(meta.get("partial"))))
    return sorted(infos, key=lambda i: i.last_activity or "", reverse=True)


def live_info(slug: str, view: LogView) -> SessionInfo:
    """What the sessions list says of a live log."""
    turns, covered = of_log(view)
    marks = taken_back(view.records)
    rewound = sum(1 for r in view.records if starts_turn(r) and r.id in marks)
    return SessionInfo(slug, "live", turns.count, covered.last_turn, view.size, view.last_activity,
                       _title(view), len(view.problems), tuple(changed_files(view.records)),
                       covered.partial, rewound)


class _Summary(msgspec.Struct, array_like=True):
    """A live log's line in the summary file: its identity when read, then what the list says of it."""

    identity: tuple[int, int, int, int]  # inode, size, modification and change times (ns)
    turns: int
    covered_turns: int
    size: int
    last_activity: str | None
    title: str
    first_problem: str
    problems: int
    changed: tuple[str, ...]
    partial: bool
    taken_back: int


class _SummaryFile(msgspec.Struct):
    version: int
    sessions: dict[str, _Summary]


SUMMARY_VERSION = 1
_decode_summary = msgspec.json.Decoder(_SummaryFile).decode


def _live_infos(paths: Paths, warn: Callable[[str], None]) -> list[SessionInfo]:
    """Every live session's summary, sorted by slug. Each comes from the summary file
    (paths.sessions_summary) while its log's identity (inode, size, modification and change times) is the
    one summarized, else from the log, read again (an append changes the size, a restore the inode and
    the change time): listing 13,000 sessions reads the summary and the folder, and the logs changed since.

    The logs stay the truth: the summary is a cache, written whole and renamed over the last one when
    something changed, rebuilt from the logs when it is missing, unreadable or of another version. Two
    processes listing at once each write a complete file; either is right for the identities it names,
    and a log appended to while it was read is keyed by its identity from before, so it is read again."""
    cached = _read_summary(paths, warn)
    rows: dict[str, _Summary] = {}
    stale = False
    try:
        entries = os.scandir(paths.sessions)
    except FileNotFoundError:
        return []
    with entries:
        for entry in entries:  # one pass, no call per log that is not needed: 13,000 logs cost ~60 ms
            name = entry.name
            if not name.endswith(SUFFIX) or name.startswith("."):
                continue
            slug = name[: -len(SUFFIX)]
            row = cached.get(slug)  # the summary names sessions only: the slug check is for the others
            if row is None and slug_of(name) is None:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # archived since the listing
            identity = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            if row is None or row.identity != identity:
                try:
                    view = Session(paths, slug).read()
                except SessionError:
                    continue  # archived between listing the folder and reading it
                row = _summarize(slug, view, identity)
                stale = True
            rows[slug] = row
            if row.problems:
                _report_unreadable(slug, row.first_problem, row.problems, warn)
    if stale or len(rows) != len(cached):
        _write_summary(paths, rows, warn)
    return [SessionInfo(slug, "live", row.turns, row.covered_turns, row.size, row.last_activity, row.title,
                        row.problems, row.changed, row.partial, row.taken_back) for slug, row in sorted(rows.items())]


def _summarize(slug: str, view: LogView, identity: tuple[int, int, int, int]) -> _Summary:
    info = live_info(slug, view)
    return _Summary(identity, info.turns, info.covered_turns, info.size, info.last_activity, info.title,
                    str(view.problems[0]) if view.problems else "", info.problems, info.changed,
                    info.partial, info.taken_back)


def summary_of_new_log(slug: str, records: list[Record], st: os.stat_result) -> _Summary:
    """The summary line of a log that holds exactly `records` (written in one append to a new log, as an
    import writes the sessions it creates) and whose stat is `st`: a list after the import then reads no
    log. The records are typed and were checked as a reader checks them when they were appended."""
    return _summarize(slug, LogView(records, [], st.st_size), (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))


def add_to_summary(paths: Paths, rows: dict[str, _Summary], warn: Callable[[str], None] = no_warning) -> None:
    """Add lines to the summary file (a cache: a list running meanwhile may write its own without them, and
    then reads those logs once)."""
    if rows:
        _write_summary(paths, {**_read_summary(paths, warn), **rows}, warn)


def _encodable(row: _Summary) -> bool:
    try:
        msgspec.json.encode(row)
    except UnicodeEncodeError:
        return False
    return True


def _read_summary(paths: Paths, warn: Callable[[str], None]) -> dict[str, _Summary]:
    try:
        with os.fdopen(open_state(paths.sessions_summary, os.O_RDONLY), "rb") as fh:
            found = _decode_summary(fh.read())
    except (FileNotFoundError, msgspec.DecodeError):  # missing, torn or not ours: rebuilt from the logs
        return {}
    except PlantedLink as err:  # never read; the logs say it all (and the summary written replaces the entry)
        warn(str(err))
        return {}
    if found.version != SUMMARY_VERSION or not all(map(valid_slug, found.sessions)):
        return {}  # of another version, or naming a file that is no session's log: not ours
    return found.sessions


def _write_summary(paths: Paths, rows: dict[str, _Summary], warn: Callable[[str], None]) -> None:
    try:
        data = msgspec.json.encode(_SummaryFile(SUMMARY_VERSION, rows))
    except UnicodeEncodeError:  # a lone surrogate (legal in a log's JSON, not in UTF-8): that log is read each time
        data = msgspec.json.encode(_SummaryFile(SUMMARY_VERSION, {slug: row for slug, row in rows.items()
                                                                  if _encodable(row)}))
    try:
        atomic_write(paths.sessions_summary, data, 0o600, staging=paths.staging,
                     durable=False)
    except OSError as err:
        warn(f"the sessions summary {paths.sessions_summary} could not be saved ({err.strerror or err}): "
             "the next list reads the logs again")


LAST_CANDIDATES = 20  # newest live logs read to find the last session with a turn


def last_session(paths: Paths, *, exclude: str | None = None) -> SessionInfo | None:
    """The live session written to last that holds a turn (not `exclude`): what a launch offers to
    continue. Only the newest logs are read, newest first, until one has a turn."""
    def written(slug: str) -> float:
        try:
            return (paths.sessions / f"{slug}.jsonl").stat().st_mtime
        except OSError:
            return 0.0

    for slug in sorted((s for s in live_slugs(paths) if s != exclude), key=written, reverse=True)[:LAST_CANDIDATES]:
        try:
            view = Session(paths, slug).read()
        except SessionError:
            continue
        turns, covered = of_log(view)
        if turns.count:
            return SessionInfo(slug, "live", turns.count, covered.last_turn, view.size, view.last_activity,
                               _title(view), len(view.problems))
    return None


def load(paths: Paths, slug: str) -> tuple[LogView, str]:
    """Every readable record of a session wherever it is; returns (view, 'live' | 'archived')."""
    check_slug(slug)
    recover(paths, slug)
    live = paths.sessions / f"{slug}.jsonl"
    if live.exists():
        return Session(paths, slug).read(), "live"
    if not gz_path(paths, slug).exists():
        raise SessionError(f"no session named {slug}")
    return read_archived(paths, slug), "archived"


@dataclass
class SearchHit:
    slug: str
    state: str
    record_id: str
    type: str
    turn: int | None  # the turn the record belongs to (sessions.turns); None before the first user message
    # and for compact/redaction records
    ts: str
    snippet: str
    taken_back: str = ""  # what took the record back ("taken back by /rewind 3"; sessions.turns.taken_back)


def search(paths: Paths, text: str, *, limit: int = 200, warn: Callable[[str], None] = no_warning,
           db: Database | None = None) -> list[SearchHit]:
    """Case-insensitive substring search over every record of every session, archived ones included.

    With the workspace database (`db`), the search index (textindex) is brought up to date and
    scanned; without it every log is read. `warn` gets a line for each archive that could not be
    searched and each session with unreadable lines.
    """
    needle = text.casefold()  # as the index folds: full Unicode case folding (Straße finds STRASSE)
    if not needle.strip():
        raise SessionError("search text is empty")
    recover(paths, warn=warn)
    if db is not None:
        return _marked(paths, _indexed_search(paths, db, text, limit, warn))
    hits: list[SearchHit] = []
    sources = [(s, "live") for s in live_slugs(paths)] + [(s, "archived") for s in archived_slugs(paths)]
    for slug, state in sources:
        try:
            view = Session(paths, slug).read() if state == "live" else read_archived(paths, slug)
        except UnreadableArchive as err:
            warn(f"not searched: {err}")
            continue
        except SessionError:
            continue  # moved between listing and reading; it is found under its other state next time
        _report_problems(slug, [str(p) for p in view.problems], warn)
        marks = taken_back(view.records)
        for record, turn in zip(view.records, numbers_in_order(view.records)):
            body = record_text(record)
            at = body.casefold().find(needle)
            if at < 0:
                continue
            mark = marks.get(record.id)
            hits.append(SearchHit(slug, state, record.id, record.kind, hit_turn(record, turn),
                                  record.ts, _snippet(body, at, len(needle)),
                                  mark.describe() if mark is not None else ""))
            if len(hits) >= limit:
                return hits
    return hits


def _indexed_search(paths: Paths, db: Database, text: str, limit: int, warn: Callable[[str], None]) -> list[SearchHit]:
    from . import textindex  # lazy: the store (DuckDB's client), which listing and showing sessions never open

    needle = text.casefold()
    hits = []
    for hit in textindex.search_synced(paths, db, text, int(limit), warn):
        at = hit.text.casefold().find(needle)
        hits.append(SearchHit(hit.slug, hit.state, hit.record_id, hit.type, hit.turn, hit.ts or "",
                              _snippet(hit.text, max(at, 0), len(needle))))
    return hits


def _marked(paths: Paths, hits: list[SearchHit]) -> list[SearchHit]:
    """The hits with what took their records back: a rewind is known only from the records after it, so
    the logs of the sessions hit are read (those alone), and parsed only when they hold a rewind."""
    marks: dict[str, dict] = {}
    for hit in hits:
        if hit.slug not in marks:
            try:
                marks[hit.slug] = _rewind_marks(paths, hit.slug)
            except (SessionError, UnreadableArchive):
                marks[hit.slug] = {}  # gone since the index was read: its hits stand as found
        mark = marks[hit.slug].get(hit.record_id)
        if mark is not None:
            hit.taken_back = mark.describe()
    return hits


def _rewind_marks(paths: Paths, slug: str) -> dict:
    """sessions.turns.taken_back of a session, its log parsed only if its bytes name a rewind: a `rewind`
    record or an imported rewind's `rewind_to` (both hold `"rewind` as every JSON writer writes them;
    a log that spells the word with escapes hides its own marks, nothing else). Most sessions hold
    neither: 4,000 hits in 1,600 sessions cost a read each, not a parse (0.1 s against 2.4 s)."""
    try:
        with os.fdopen(open_state(paths.sessions / f"{slug}.jsonl", os.O_RDONLY), "rb") as fh:
            if b'"rewind' not in fh.read():
                return {}
    except FileNotFoundError:
        pass  # archived since the index was read: load finds it there
    return taken_back(load(paths, slug)[0].records)


_MARGIN = 60


def _snippet(body: str, at: int, length: int, margin: int = _MARGIN) -> str:
    start, end = max(0, at - margin), min(len(body), at + length + margin)
    text = " ".join(body[start:end].split())
    return ("…" if start else "") + text + ("…" if end < len(body) else "")


# --------------------------------------------------------------------------- export
def export_json(slug: str, view: LogView, state: str) -> str:
    return json.dumps({"format": "workstation-session", "version": FORMAT_VERSION, "slug": slug,
                       "state": state, "records": [r.as_dict() for r in view.records],
                       "problems": [{"line": p.line, "reason": p.reason} for p in view.problems]},
                      ensure_ascii=False, indent=1)


def export_markdown(slug: str, view: LogView, state: str) -> str:
    turns = number_turns(view.records)
    marks = taken_back(view.records)
    out = [f"# Session {slug}", "", f"{turns.count} turns · {state}", ""]
    for problem in view.problems:
        out.append(f"> unreadable {problem}")
    for record in view.records:
        kind = record.kind
        if isinstance(record, TURN_CLASSES):
            mark = marks.get(record.id)
            if starts_turn(record):
                out += [f"## Turn {turns.of(record)}" + (f" · ↶ {mark.describe()}" if mark else ""), ""]
            out += [f"### {kind}" + (f" · {record.name}" if isinstance(record, Tool) else "")
                    + f" · {record.ts} · `{record.id}`"
                    + (f" · ↶ {mark.describe()}" if mark and not starts_turn(record) else ""), ""]
            content = record.content
            if isinstance(record, Tool):
                out += [_fence(content), ""]
            elif content:
                out += [content, ""]
            for call in record.tool_calls or () if isinstance(record, Assistant) else ():
                out += [f"→ `{call.name}`", "", _fence(call.arguments, "json"), ""]
        elif isinstance(record, Compact):
            out += [f"### Summary of turns {summary_span(turns, record)} · {record.model or ''} · "
                    f"`{record.id}`", ""]
            out += ["> " + line if line else ">" for line in record.summary.splitlines()]
            out.append("")
        elif isinstance(record, Uncompact):
            span = "–".join(str(n) for n in (record.turns or ["?"])[:2])
            out += [f"*/uncompact: the summary `{record.compact}` of turns {span} undone; the model "
                    "sees those turns again*", ""]
        elif isinstance(record, Redaction):
            ids = ", ".join(f"`{t.id}`" for t in record.targets or ())
            out += [f"*Redacted from the model's context from here on: {ids}*", ""]
        elif isinstance(record, Rewind):
            out += [f"*{rewind_line(record)}*", ""]
    return "\n".join(out).rstrip() + "\n"


def rewind_line(record: Rewind) -> str:
    """A `rewind` record in one line: what /undo or /rewind N took back."""
    files = record.files or []
    what = [f"{len(files)} file{'s' if len(files) != 1 else ''} restored"] if record.files is not None else []
    if record.conversation:
        what.append("the conversation")
    turn = "?" if record.turn is None else record.turn
    command = "/undo" if record.how == "undo" else f"/rewind {turn}"
    return f"{command}: took back turn {turn} on ({', '.join(what) or 'nothing'})"


def summary_span(turns: Turns, compact: Compact) -> str:
    """`1–7` for a compact record: the turn of the last record it covers (found by id, as the model's
    context finds it), else the number it was written with."""
    covers = compact.covers or Covers()
    last = turns.numbers.get(covers.last_id or "")
    return f"1–{last if last is not None else ('?' if covers.last_turn is None else covers.last_turn)}"


def _fence(text: str, lang: str = "") -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text}\n{ticks}"


def export(paths: Paths, slug: str, fmt: str) -> str:
    """The session as JSON or Markdown, masked again on the way out (a log written by an older version,
    or a secret set in the environment since, is covered too)."""
    view, state = load(paths, slug)
    if fmt == "json":
        return scrub.mask(export_json(slug, view, state))
    if fmt == "md":
        return scrub.mask(export_markdown(slug, view, state))
    raise SessionError(f"unknown export format {fmt!r}: use md or json")


def info_dict(info: SessionInfo) -> dict[str, Any]:
    return {"slug": info.slug, "state": info.state, "turns": info.turns,
            "compacted": info.compacted if info.covered_turns else "",  # no Coverage made for most of 13,000
            "covered_turns": info.covered_turns, "size": info.size, "last_activity": info.last_activity,
            "title": info.title, "problems": info.problems, "changed": list(info.changed),
            "taken_back": info.taken_back}
