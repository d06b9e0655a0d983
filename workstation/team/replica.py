"""The owner's half of team sync: what is pending, the replica of teammates' rows, the team views.

Every function here runs in the database's owner (Database.call), on schema `team` of memory.duckdb
(migration _memory_006). Rows cross between the owner and the syncing process as CSV files in the state
folder (DuckDB writes and reads them far faster than Python converts rows), in the column order of
server.COLUMNS.

Watermarks. Events and decisions are only ever appended, so DuckDB's rowid orders them: a push sends
rows past the last rowid sent. The count of rows at or below the mark is kept beside it; should it ever
differ (rowids renumbered by a rewrite of the table), the mark starts over at 0 and the server's
ON CONFLICT DO NOTHING drops what it already has: a re-send, never a loss. LTM is a table of current
values: a push sends the rows whose stamp is past the mark less LTM_LAG_NS, because a write stamped
before the mark may still land from a writer's buffer.

Clock skew (LTM). The newest write of a key wins, ordered by (stamp, origin). A stamp is the writer's
wall clock, so a machine whose clock runs ahead would win over later writes of others. Causality is
kept with a max-seen bump: a local write made after this workspace pulled a teammate's write of the same
key is pushed with a stamp past that one (its own stamp, or the seen one + 1, whichever is higher), so a
write that answers another always orders after it, however wrong either clock is. Writes that did not
see each other are concurrent: the higher (stamp, origin) wins, the same on every machine.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..store.broker import readonly
from ..store.schema import mirror_views
from .server import COLUMNS, bare

LTM_LAG_NS = 120 * 10**9  # how far back a push looks again for LTM writes that landed late (a flush is ms)
_CSV_IN = "auto_detect = false, header = false, allow_quoted_nulls = false, delim = ',', quote = '\"', escape = '\"'"  # "" is an empty string, an empty field NULL


def _q(path: Path | str) -> str:
    return str(path).replace("'", "''")


# ---------------------------------------------------------------- who we are

def set_me(con, origin: str, project: str, author: str | None) -> None:
    """Record this workspace's origin, project and (once the server said it) author."""
    row = con.execute("SELECT origin, project, author FROM team.me").fetchone()
    author = author if author is not None else (row[2] if row else "")
    if row != (origin, project, author):
        con.execute("DELETE FROM team.me")
        con.execute("INSERT INTO team.me VALUES (?, ?, ?)", [origin, project, author])


# ---------------------------------------------------------------- push side

def _mark(con, kind: str) -> tuple[int, int]:
    row = con.execute("SELECT mark, counted FROM team.pushed WHERE kind = ?", [kind]).fetchone()
    return (row[0], row[1]) if row else (_NONE, 0)


_NONE = -1  # the mark before the first push: rowids start at 0


def _text(*cols: str) -> str:
    """Text columns as PostgreSQL takes them: it refuses a NUL character, which DuckDB's VARCHAR may hold (one
    such row would stop every later push)."""
    return ", ".join(f"replace({c}, chr(0), '')" for c in cols)


_EXPORT = {  # server.COLUMNS, from the local tables
    "events": f"{_text('id')}, ts, {_text('session', 'flow')}, step, {_text('parent', 'type', 'name')}, duration_ms, "
              f"tokens_in, tokens_out, cost_usd, ok, {_text('data::VARCHAR')}",
    "decisions": f"{_text('id')}, ts, {_text('session', 'flow')}, step, {_text('decision', 'reasoning')}, "
                 "to_json(related_files)",
}


@readonly
def export_pending(con, kind: str, path: str, limit: int, private: list[str], after: int | None,
                   stamp: tuple[str, str]) -> tuple[int, int]:
    """Write up to `limit` rows not pushed yet (past `after`, else past the watermark) to `path` as CSV:
    `stamp` (project, origin), then server.COLUMNS. Returns (rows, the mark to record once the server has
    them). It never moves the watermark itself: a push that fails sends the same rows again."""
    if kind == "ltm":
        return _export_ltm(con, path, limit, private, after, stamp)
    if after is None:
        after, counted = _mark(con, kind)
        if con.execute(f"SELECT count(*) FROM main.{kind} WHERE rowid <= ?", [after]).fetchone()[0] != counted:
            after = _NONE  # rowids moved: send everything again, the server keeps one of each
    top = con.execute(f"SELECT max(rowid) FROM (SELECT rowid FROM main.{kind} WHERE rowid > ? "
                      f"ORDER BY rowid LIMIT ?)", [after, limit]).fetchone()[0]
    if top is None:
        return 0, after
    n = con.execute(f"COPY (SELECT $project, $origin, {_EXPORT[kind]} FROM main.{kind} WHERE rowid > {int(after)} "
                    f"AND rowid <= {int(top)}) TO '{_q(path)}' (FORMAT csv, HEADER false)",
                    {"project": stamp[0], "origin": stamp[1]}).fetchone()[0]
    return n, top


_LTM_PENDING = """
    SELECT $project, $origin, replace(l.namespace, chr(0), ''), replace(l.key, chr(0), ''),
           CASE WHEN l.deleted THEN NULL ELSE l.value::VARCHAR END AS value, l.deleted,
           greatest(l.stamp, coalesce((SELECT max(r.stamp) + 1 FROM team.remote_ltm r WHERE r.namespace = l.namespace
                                       AND r.key = l.key AND r.seen_at < l.stamp), 0)) AS stamp,
           l.updated_at, l.updated_by
    FROM main.ltm l
    WHERE l.stamp > $since AND l.stamp <= $top AND NOT list_contains($private, l.namespace)
"""


def _export_ltm(con, path: str, limit: int, private: list[str], after: int | None,
                stamp: tuple[str, str]) -> tuple[int, int]:
    if after is None:  # the writes of the last LTM_LAG_NS again: one stamped earlier may have landed since
        after = max(_NONE, _mark(con, "ltm")[0] - LTM_LAG_NS)
    params = {"since": after, "private": private}
    top = con.execute(f"SELECT max(s) FROM (SELECT stamp AS s FROM main.ltm WHERE stamp > $since AND NOT "
                      f"list_contains($private, namespace) ORDER BY s LIMIT {int(limit)})", params).fetchone()[0]
    if top is None:
        return 0, after
    params.update(top=top, project=stamp[0], origin=stamp[1])
    n = con.execute(f"COPY ({_LTM_PENDING} ORDER BY l.stamp) TO '{_q(path)}' (FORMAT csv, HEADER false)",
                    params).fetchone()[0]
    return n, top


def mark_pushed(con, kind: str, mark: int, rows: int) -> None:
    """The server has every row up to `mark`: record it (with the count below it, see the docstring)."""
    if kind == "ltm":
        mark = max(mark, _mark(con, "ltm")[0])  # a re-sent window never moves the mark back
    counted = 0 if kind not in _EXPORT else con.execute(
        f"SELECT count(*) FROM main.{kind} WHERE rowid <= ?", [mark]).fetchone()[0]
    con.execute("""INSERT INTO team.pushed VALUES (?, ?, ?, ?, now()::TIMESTAMP)
                   ON CONFLICT (kind) DO UPDATE SET mark = excluded.mark, counted = excluded.counted,
                   rows = team.pushed.rows + excluded.rows, pushed_at = excluded.pushed_at""", [kind, mark, counted, rows])


@readonly
def pending(con, private: list[str]) -> dict[str, int]:
    """Rows each kind would push now (LTM: keys written past its mark)."""
    out = {}
    for kind in ("events", "decisions"):
        mark, counted = _mark(con, kind)
        if con.execute(f"SELECT count(*) FROM main.{kind} WHERE rowid <= ?", [mark]).fetchone()[0] != counted:
            mark = _NONE
        out[kind] = con.execute(f"SELECT count(*) FROM main.{kind} WHERE rowid > ?", [mark]).fetchone()[0]
    mark, _ = _mark(con, "ltm")
    out["ltm"] = con.execute("SELECT count(*) FROM main.ltm WHERE stamp > ? AND NOT list_contains(?, namespace)",
                             [mark, private]).fetchone()[0]
    return out


# ---------------------------------------------------------------- pull side

@readonly
def pull_marks(con, kind: str) -> dict[str, int]:
    """Per origin, the server seq of the last row pulled."""
    return dict(con.execute("SELECT origin, seq FROM team.pulled WHERE kind = ?", [kind]).fetchall())


_SERVER_COLUMNS = [("seq", "bigint"), ("origin", "text"), ("author", "text")]


def _select_csv(kind: str, path: str) -> str:
    """The pulled CSV's rows, each column as the replica types it, and `unfit`: why the row cannot enter the
    replica (NULL: it can). Every field is read as text and cast here, so a value the server holds and DuckDB
    cannot (a time past the year 294247, or BC) leaves its row out instead of failing the whole read."""
    cols = [(name, _duck_type(sqltype)) for name, sqltype in [*_SERVER_COLUMNS, *COLUMNS[kind]]]
    raw = ", ".join(f"'{name}': 'VARCHAR'" for name, _ in cols)
    typed = ", ".join(name if duck == "VARCHAR" else f"TRY_CAST({name} AS {duck}) AS {name}" for name, duck in cols)
    wrong = [f"WHEN {name} IS NOT NULL AND (TRY_CAST({name} AS {duck}) IS NULL"
             f"{_BC.format(name=name) if duck == 'TIMESTAMP' else ''}) "
             f"THEN 'its {name} is not a {duck.lower()} this replica can hold'"
             for name, duck in cols if duck != "VARCHAR"]
    unfit = f"CASE {' '.join(wrong)} ELSE {_UNFIT.get(kind, 'NULL::VARCHAR')} END"
    return (f"SELECT {typed}, {unfit} AS unfit FROM read_csv('{_q(path)}', {_CSV_IN}, columns = {{{raw}}}) ")


_BC = " OR {name} LIKE '% BC'"  # PostgreSQL's years before the common era: DuckDB would read them as AD


def _duck_type(pg: str) -> str:
    base = bare(pg)
    return {"text": "VARCHAR", "timestamp": "TIMESTAMP", "integer": "INTEGER", "bigint": "BIGINT",
            "double precision": "DOUBLE", "boolean": "BOOLEAN"}[base]


_APPLY = {
    "events": """INSERT INTO team.remote_events SELECT id, ts, session, flow, step, parent, type, name, duration_ms,
                 tokens_in, tokens_out, cost_usd, ok, data::JSON, origin, author FROM src ON CONFLICT DO NOTHING""",
    "decisions": """INSERT INTO team.remote_decisions SELECT id, ts, session, flow, step, decision, reasoning,
                    from_json(related_files, '["VARCHAR"]'), origin, author FROM src ON CONFLICT DO NOTHING""",
    "ltm": """INSERT INTO team.remote_ltm SELECT namespace, key, value::JSON, deleted, stamp, updated_at, updated_by,
              origin, author, $now FROM src ON CONFLICT DO NOTHING""",
    "session_lines": """INSERT INTO team.session_lines SELECT origin, author, slug, line, text FROM src
                        ON CONFLICT DO NOTHING""",
}


# Why a pulled row cannot enter the replica (NULL: it can), past its columns' types: the server keeps these JSON
# texts as text, where a teammate's client (or anyone's psql) may put anything, and one row must not stop the pull.
_UNFIT = {
    "events": "CASE WHEN data IS NOT NULL AND try(json(data)) IS NULL THEN 'its data is not JSON' END",
    "decisions": """CASE WHEN try(json(related_files)) IS NULL THEN 'its related_files is not JSON'
                         WHEN json_type(related_files) <> 'ARRAY' THEN 'its related_files is not a list'
                         WHEN try(from_json(related_files, '["VARCHAR"]')) IS NULL
                         THEN 'its related_files is not a list of paths' END""",
    "ltm": "CASE WHEN value IS NOT NULL AND try(json(value)) IS NULL THEN 'its value is not JSON' END",
}
_NAMED = {"events": "id", "decisions": "id", "ltm": "namespace || '/' || key", "session_lines": "slug || ':' || line"}
_SINGULAR = {"events": "event", "decisions": "decision", "ltm": "LTM write", "session_lines": "session line"}


def apply_pulled(con, kind: str, path: str) -> tuple[int, int, list[str]]:
    """Add the pulled rows in `path` to the replica and move the pull marks past every row read, in one
    transaction. A row that does not parse stays out, and is named (once: the marks move past it).
    Returns (rows read, rows added, one line per row left out)."""
    if os.path.getsize(path) == 0:
        return 0, 0, []
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE pulled AS {_select_csv(kind, path)}")
        n = con.execute("SELECT count(*) FROM pulled").fetchone()[0]
        skipped = [f"skipped the {_SINGULAR[kind]} {name!r} of {author} at {origin} (server row {seq}): {why}"
                   for seq, origin, author, name, why in con.execute(
                       f"SELECT seq, origin, author, {_NAMED[kind]}, unfit FROM pulled WHERE unfit IS NOT NULL "
                       "ORDER BY seq").fetchall()]
        con.execute("CREATE OR REPLACE TEMP VIEW src AS SELECT * EXCLUDE (unfit) FROM pulled WHERE unfit IS NULL")
        if n:
            con.execute(_APPLY[kind], {"now": _now_ns()} if kind == "ltm" else None)
            con.execute("""INSERT INTO team.pulled SELECT ?, origin, max(seq) FROM pulled GROUP BY origin
                           ON CONFLICT (kind, origin) DO UPDATE SET seq = greatest(team.pulled.seq, excluded.seq)""",
                        [kind])
        con.execute("DROP VIEW src")
        con.execute("DROP TABLE pulled")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return n, n - len(skipped), skipped


def _now_ns() -> int:
    return time.time_ns()


# ---------------------------------------------------------------- status and the views

def note(con, what: str, value: str) -> None:
    """Remember a sync fact for `team status` (last_push, last_pull, last_error)."""
    con.execute("INSERT INTO team.state VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [what, value])


@readonly
def summary(con) -> dict:
    """What the replica holds and the sync facts noted, for `team status`."""
    state = dict(con.execute("SELECT key, value FROM team.state").fetchall())
    pushed = {k: {"rows": r, "at": str(a) if a else None} for k, r, a in
              con.execute("SELECT kind, rows, pushed_at FROM team.pushed").fetchall()}
    pulled = {}
    for kind, table in (("events", "remote_events"), ("decisions", "remote_decisions"), ("ltm", "remote_ltm"),
                        ("session_lines", "session_lines")):
        pulled[kind] = con.execute(f"SELECT count(*) FROM team.{table}").fetchone()[0]
    origins = con.execute("SELECT count(DISTINCT origin) FROM team.remote_events").fetchone()[0]
    me = con.execute("SELECT origin, project, author FROM team.me").fetchone()
    return {"state": state, "pushed": pushed, "pulled": pulled, "teammates": origins,
            "me": dict(zip(("origin", "project", "author"), me)) if me else None}


def path_for(state: Path, what: str) -> str:
    return str(state / f"team-{what}-{os.getpid()}-{os.urandom(4).hex()}.csv")


def refresh_views(con) -> int:
    """The team schema's reflection views brought in line with main's (store.schema.mirror_views)."""
    return mirror_views(con, "team")
