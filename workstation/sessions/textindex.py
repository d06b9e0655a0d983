"""The session search index: the text of every record, live and archived, in the store.

Reading a gigabyte of logs per search cannot answer in under a second; scanning one column of
a DuckDB table can. The index is derived from the logs and never the source of anything:
`search_sessions` says how far each log was read, `search_records` holds each record's text
and its lowercased copy (the only column a search scans).

`sync` brings it up to date before every search (and after every import): a live log that grew
is read from where the last read stopped (complete lines only: a line being written waits); a
log that was replaced (a restore) is read again whole unless it starts with the same record
and is no shorter; an archived session keeps the rows of its live log when the archive holds as
many bytes, else it is read from the .gz; the rows of a session that no longer exists are
dropped. Two processes syncing at once cannot both add the same lines: each write names the
offset it read from and the owner refuses it if the index moved on. DuckDB's full-text extension
would have to be downloaded at run time, which nothing here may do; a substring scan of the
lowercased column is what the old search did, only faster.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from typing import Any

from ..paths import Paths
from ..store.broker import readonly
from .archive import UnreadableArchive, gunzip, no_warning, archived_slugs, gz_path, read_meta
from .log import TURN_TYPES, LogView, SessionError, live_slugs, parse_lines, record_text

_ROW_STRUCT = '{"q":"BIGINT","i":"VARCHAR","y":"VARCHAR","u":"INTEGER","t":"VARCHAR","x":"VARCHAR"}'
_PIECE_BYTES = 16 << 20  # log bytes indexed per call to the owner


def sync(paths: Paths, db: Any, *, only: Iterable[str] | None = None, warn: Callable[[str], None] = no_warning) -> None:
    """Bring the index up to date with the logs (only the given slugs, when given)."""
    if only is not None:
        slugs = sorted(set(only))
        if not slugs:
            return
        states = {row[0]: row for row in db.call(index_states, slugs)}
        live = [s for s in slugs if (paths.sessions / f"{s}.jsonl").exists()]
        archived = [s for s in slugs if s not in live and gz_path(paths, s).exists()]
    else:
        states = {row[0]: row for row in db.call(index_states, None)}
        live = live_slugs(paths)
        known = set(live)
        archived = [s for s in archived_slugs(paths) if s not in known]
    folder = str(paths.sessions)  # a str path per log, not a Path: thousands of logs are stat'ed per search
    for slug in live:
        _sync_live(db, slug, states.get(slug), os.path.join(folder, f"{slug}.jsonl"))
    for slug in archived:
        _sync_archived(paths, db, slug, states.get(slug), warn)
    present = set(live) | set(archived)
    gone = [slug for slug in states if slug not in present]
    if gone:
        db.call(index_drop, gone)


def _sync_live(db: Any, slug: str, row: tuple | None, path: str) -> None:
    if row is not None and row[1] == "live":
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return
        if row[2] == f"{st.st_dev}:{st.st_ino}" and row[3] == st.st_size:
            return  # nothing appended: known without opening the file
    try:
        with open(path, "rb") as fh:
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
                    start = row if first and first[0]["id"] == row[7] else None
            fh.seek(start[3] if start else 0)
            data = fh.read()
    except FileNotFoundError:
        return  # archived or removed meanwhile: the next sync sees it where it went
    end = data.rfind(b"\n") + 1
    if not end and start is not None and start[2] == identity:
        return  # only a line still being written
    _store(db, slug, "live", identity, data[:end], start)


def _sync_archived(paths: Paths, db: Any, slug: str, row: tuple | None, warn: Callable[[str], None]) -> None:
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
        db.call(index_mark, slug, row[2], "archived", identity)  # the archive holds what was read
        return
    try:
        data = gunzip(gz)
    except UnreadableArchive as err:
        warn(f"not searched: {err}")
        return
    except FileNotFoundError:
        return  # restored meanwhile
    end = data.rfind(b"\n") + 1 or len(data)
    _store(db, slug, "archived", identity, data[:end], None)


def _store(db: Any, slug: str, state: str, identity: str, data: bytes, start: tuple | None) -> None:
    """Index the complete lines of `data`, read from where `start` (a state row) stopped, or from the top
    (replacing the session's rows), in pieces of whole lines, each with the state it leaves."""
    row = list(start) if start else None
    offset = 0
    while True:
        cut = len(data) if len(data) - offset <= _PIECE_BYTES else data.rfind(b"\n", offset, offset + _PIECE_BYTES) + 1
        if cut <= offset:
            cut = data.find(b"\n", offset + _PIECE_BYTES) + 1 or len(data)
        row = _store_piece(db, slug, state, identity, data[offset:cut], row)
        if row is None:
            return  # another process indexed these lines first
        offset = cut
        if offset >= len(data):
            return


def _store_piece(db: Any, slug: str, state: str, identity: str, data: bytes, start: list | None) -> list | None:
    size0, lines0, turns0, records0 = (start[3], start[4], start[5], start[6]) if start else (0, 0, 0, 0)
    view: LogView = parse_lines(data, first_line=lines0 + 1)
    rows: list[str] = []
    turn = turns0
    for seq, record in enumerate(view.records, start=records0):
        is_turn = record["type"] in TURN_TYPES
        turn += is_turn
        rows.append(json.dumps({"q": seq, "i": record["id"], "y": record["type"], "u": turn if is_turn else None,
                                "t": record.get("ts"), "x": record_text(record)}, ensure_ascii=False))
    problems = [str(p) for p in view.problems]
    first_problem = (start[9] if start and start[9] else None) or (problems[0] if problems else None)
    first_id = (start[7] if start else None) or (view.records[0]["id"] if view.records else None)
    new_state = [state, identity, size0 + len(data), lines0 + data.count(b"\n"), turn,
                 records0 + len(view.records), first_id, (start[8] if start else 0) + len(problems), first_problem]
    if not db.call(index_append, slug, start[3] if start else None, new_state, "\n".join(rows)):
        return None
    return [slug, *new_state]


def report_problems(db: Any, warn: Callable[[str], None]) -> None:
    """One line per indexed session with unreadable lines (as catalog.list_sessions says them)."""
    for slug, count, first in db.call(index_problems):
        more = f" and {count - 1} more (workstation session show {slug} lists them)" if count > 1 else ""
        warn(f"{slug}: unreadable {first}{more}")


# --------------------------------------------------------------------------- owner side
@readonly
def index_states(con, slugs: list[str] | None) -> list[tuple]:
    return con.execute("SELECT slug, state, identity, size, lines, turns, records, first_id, problems, "
                       "first_problem FROM search_sessions WHERE $slugs IS NULL OR list_contains($slugs, slug)",
                       {"slugs": slugs}).fetchall()


@readonly
def index_problems(con) -> list[tuple]:
    return con.execute("SELECT slug, problems, first_problem FROM search_sessions WHERE problems > 0 "
                       "ORDER BY slug").fetchall()


def index_append(con, slug: str, expect: int | None, new_state: list, blob: str) -> bool:
    """Add rows for `slug` read from offset `expect` of its log (None: from the top, replacing the
    session's rows) and set its state row; False (nothing written) when the index moved on."""
    con.execute("BEGIN TRANSACTION")
    try:
        row = con.execute("SELECT size FROM search_sessions WHERE slug = ?", [slug]).fetchone()
        if expect is None:
            con.execute("DELETE FROM search_records WHERE slug = ?", [slug])
            con.execute("DELETE FROM search_sessions WHERE slug = ?", [slug])
        elif row is None or row[0] != expect:
            con.execute("ROLLBACK")
            return False
        if blob:
            con.execute(f"""INSERT INTO search_records
                SELECT $slug, r.q, r.i, r.y, r.u, r.t, r.x, lower(r.x)
                FROM (SELECT json_transform(unnest(string_split($blob, chr(10))), '{_ROW_STRUCT}') AS r)""",
                        {"slug": slug, "blob": blob})
        con.execute("INSERT OR REPLACE INTO search_sessions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [slug, *new_state])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return True


def index_mark(con, slug: str, identity: str, state: str, new_identity: str) -> None:
    con.execute("UPDATE search_sessions SET state = ?, identity = ? WHERE slug = ? AND identity = ?",
                [state, new_identity, slug, identity])


def index_drop(con, slugs: list[str]) -> None:
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute("DELETE FROM search_records WHERE list_contains(?, slug)", [slugs])
        con.execute("DELETE FROM search_sessions WHERE list_contains(?, slug)", [slugs])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


@readonly
def index_search(con, needle: str, limit: int, margin: int) -> list[tuple]:
    """Hits in list order (live sessions, then archived; each in log order), each with a window
    of the record's text around the first match: (slug, state, id, type, turn, ts, at, length, window)."""
    return con.execute("""
        WITH top AS (
            SELECT r.rowid AS row, s.state
            FROM search_records r JOIN search_sessions s USING (slug)
            WHERE contains(r.folded, lower($needle))
            ORDER BY s.state = 'archived', r.slug, r.seq LIMIT $limit),
        hits AS (  -- the texts of the hits shown only: carrying every match's text through the sort
                   -- read both columns whole (a third slower over 1 GB of logs)
            SELECT r.slug, t.state, r.seq, r.record_id, r.type, r.turn, r.ts, r.text,
                   instr(r.folded, lower($needle)) AS pos
            FROM search_records r JOIN top t ON r.rowid = t.row)
        SELECT slug, state, record_id, type, turn, ts, pos - 1 - least(pos - 1, $margin), length(text),
               substr(text, greatest(1, pos - $margin), pos - greatest(1, pos - $margin) + length($needle) + $margin)
        FROM hits ORDER BY state = 'archived', slug, seq""",
                       {"needle": needle, "limit": limit, "margin": margin}).fetchall()
