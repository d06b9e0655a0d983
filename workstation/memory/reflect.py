"""Reflection: named analytical queries and read-only SQL over the episodic log.

Both run inside the owner (through the broker), on the reflection views that
migration `_memory_002` defines in memory.duckdb (documented in the README and
in VIEW_DOCS below; a test checks that the two agree). User SQL must be one
SELECT; it runs in a READ ONLY transaction that is rolled back, may only read
the workspace's own tables and views (no table functions that open files, no
replacement scans of file paths), and is interrupted after a timeout.
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Iterator

from ..store.broker import readonly
from .errors import ReflectError

DEFAULT_LIMIT = 100
SQL_ROW_LIMIT = 10_000
SQL_TIMEOUT_S = 60.0
SQL_MEMORY_LIMIT = "1GB"  # DuckDB's own default is 80% of the machine's memory

# Table functions user SQL may call: generators and catalog listings, nothing that opens files.
_ALLOWED_TABLE_FUNCTIONS = frozenset({
    "range", "generate_series", "unnest", "json_each", "json_tree", "duckdb_tables", "duckdb_views",
    "duckdb_columns", "duckdb_indexes", "duckdb_schemas", "duckdb_constraints", "duckdb_types",
})


@dataclass
class Query:
    description: str
    sql: str  # may use $session (NULL for all) and $limit


_SESSION = "($session IS NULL OR session = $session)"


def _rounded(expr: str, digits: int) -> str:
    """SQL for `expr` rounded to `digits` decimals, half away from zero, the same number on every DuckDB version.

    round() of a DOUBLE changed in DuckDB 2.0: it rounds the binary value, so a p95 of exactly 12.85 (stored as
    12.8499...) became 12.8 where 1.x gave 12.9. round() of a DECIMAL rounds the decimal value on both."""
    return f"round(({expr})::DECIMAL(38, 9), {digits})::DOUBLE"

QUERIES: dict[str, Query] = {
    "sessions": Query("Per session: span, events, steps, tool and model calls, failures, tokens, cost.", f"""
        SELECT session, min(ts) AS started, max(ts) AS last_event, count(*) AS events,
               count(DISTINCT step) AS steps, count(*) FILTER (type = 'tool_call') AS tool_calls,
               count(*) FILTER (type = 'model_call') AS model_calls,
               count(*) FILTER (ok = false OR type = 'error') AS failures,
               sum(tokens_in) FILTER (type = 'model_call') AS tokens_in,
               sum(tokens_out) FILTER (type = 'model_call') AS tokens_out,
               {_rounded('sum(cost_usd)', 4)} AS cost_usd
        FROM events WHERE {_SESSION} GROUP BY session ORDER BY last_event DESC LIMIT $limit"""),
    "memory_by_session": Query("Per session: memory hit rate and file reads served from memory, disk, or avoided.", f"""
        WITH lookups AS (SELECT session, count(*) AS lookups, count(*) FILTER (hit) AS hits
                         FROM memory_lookups WHERE {_SESSION} GROUP BY ALL),
             reads AS (SELECT session, count(*) FILTER (served_from = 'memory') AS reads_from_memory,
                              count(*) FILTER (served_from <> 'memory') AS reads_from_disk
                       FROM file_reads WHERE {_SESSION} GROUP BY ALL),
             avoided AS (SELECT session, count(*) AS reads_avoided, sum(chars_saved) AS chars_saved
                         FROM reads_avoided WHERE {_SESSION} GROUP BY ALL)
        SELECT session, coalesce(lookups, 0) AS lookups, coalesce(hits, 0) AS hits,
               {_rounded('hits / nullif(lookups, 0)', 3)} AS hit_rate,
               coalesce(reads_from_memory, 0) AS reads_from_memory, coalesce(reads_from_disk, 0) AS reads_from_disk,
               coalesce(reads_avoided, 0) AS reads_avoided, chars_saved
        FROM lookups FULL JOIN reads USING (session) FULL JOIN avoided USING (session)
        ORDER BY session LIMIT $limit"""),
    "hit_rate": Query("Memory lookups and hit rate per session and step.", f"""
        SELECT session, step, count(*) AS lookups, count(*) FILTER (hit) AS hits,
               {_rounded('count(*) FILTER (hit) / count(*)', 3)} AS hit_rate,
               count(*) FILTER (tier = 'ltm') AS ltm_lookups
        FROM memory_lookups WHERE {_SESSION} GROUP BY ALL ORDER BY session, step LIMIT $limit"""),
    "reads_avoided": Query("Per session and step: reads avoided, reads served from memory, reads from disk.", f"""
        WITH r AS (SELECT session, step, count(*) FILTER (served_from = 'memory') AS from_memory,
                          count(*) FILTER (served_from <> 'memory') AS from_disk
                   FROM file_reads WHERE {_SESSION} GROUP BY ALL),
             a AS (SELECT session, step, count(*) AS avoided, sum(chars_saved) AS chars_saved
                   FROM reads_avoided WHERE {_SESSION} GROUP BY ALL)
        SELECT session, step, coalesce(avoided, 0) AS avoided, coalesce(from_memory, 0) AS from_memory,
               coalesce(from_disk, 0) AS from_disk, chars_saved
        FROM r FULL JOIN a USING (session, step) ORDER BY session, step LIMIT $limit"""),
    "top_read_files": Query("Most-read files, split by where the read was served from.", f"""
        WITH r AS (SELECT path, count(*) AS reads, count(*) FILTER (served_from = 'memory') AS from_memory,
                          count(*) FILTER (served_from <> 'memory') AS from_disk
                   FROM file_reads WHERE {_SESSION} GROUP BY path),
             a AS (SELECT path, count(*) AS avoided FROM reads_avoided WHERE {_SESSION} GROUP BY path)
        SELECT path, coalesce(reads, 0) AS reads, coalesce(from_memory, 0) AS from_memory,
               coalesce(from_disk, 0) AS from_disk, coalesce(avoided, 0) AS avoided
        FROM r FULL JOIN a USING (path) ORDER BY reads DESC, avoided DESC, path LIMIT $limit"""),
    "top_edited_files": Query("Most-edited files.", f"""
        SELECT path, count(*) AS edits, sum(lines_changed) AS lines_changed,
               count(DISTINCT session) AS sessions, max(ts) AS last_edit
        FROM file_edits WHERE {_SESSION} GROUP BY path ORDER BY edits DESC, path LIMIT $limit"""),
    "tool_errors": Query("Per tool: calls, failures and error rate.", f"""
        SELECT tool, count(*) AS calls, count(*) FILTER (outcome <> 'ok') AS errors,
               {_rounded("count(*) FILTER (outcome <> 'ok') / count(*)", 3)} AS error_rate,
               arg_max(error, ts) FILTER (outcome <> 'ok') AS last_error
        FROM tool_calls WHERE {_SESSION} GROUP BY tool ORDER BY errors DESC, calls DESC LIMIT $limit"""),
    "tool_latency": Query("Per tool: latency percentiles in milliseconds.", f"""
        SELECT tool, count(*) AS calls, {_rounded('avg(duration_ms)', 1)} AS avg_ms,
               {_rounded('quantile_cont(duration_ms, 0.5)', 1)} AS p50_ms,
               {_rounded('quantile_cont(duration_ms, 0.95)', 1)} AS p95_ms, {_rounded('max(duration_ms)', 1)} AS max_ms
        FROM tool_calls WHERE {_SESSION} AND duration_ms IS NOT NULL
        GROUP BY tool ORDER BY p95_ms DESC LIMIT $limit"""),
    "model_latency": Query("Per model: latency percentiles, tokens and cost.", f"""
        SELECT model, count(*) AS calls, {_rounded('quantile_cont(duration_ms, 0.5)', 1)} AS p50_ms,
               {_rounded('quantile_cont(duration_ms, 0.95)', 1)} AS p95_ms, sum(tokens_in) AS tokens_in,
               sum(tokens_out) AS tokens_out, {_rounded('sum(cost_usd)', 4)} AS cost_usd,
               count(*) FILTER (ok = false) AS failures
        FROM model_calls WHERE {_SESSION} GROUP BY model ORDER BY calls DESC LIMIT $limit"""),
    # A turn is what the user asked and everything it caused: each model call and compaction
    # belongs to the newest user turn before it in its session (none recorded: turn is NULL).
    "tokens_per_turn": Query("Per user turn: model calls, tokens, peak context size, compactions.", """
        WITH u AS (SELECT session, ts, data->>'turn_id' AS turn FROM events
                   WHERE type = 'turn' AND name = 'user' AND ($session IS NULL OR session = $session)),
             m AS (SELECT m.session, u.turn, count(*) AS model_calls, sum(m.tokens_in) AS tokens_in,
                          sum(m.tokens_out) AS tokens_out, max(m.context_tokens) AS context_tokens,
                          min(m.ts) AS first_ts
                   FROM model_calls m ASOF LEFT JOIN u ON m.session = u.session AND m.ts >= u.ts
                   WHERE $session IS NULL OR m.session = $session GROUP BY ALL),
             c AS (SELECT c.session, u.turn, count(*) AS compactions, min(c.ts) AS first_ts
                   FROM compactions c ASOF LEFT JOIN u ON c.session = u.session AND c.ts >= u.ts
                   WHERE $session IS NULL OR c.session = $session GROUP BY ALL)
        SELECT coalesce(m.session, c.session) AS session, coalesce(m.turn, c.turn) AS turn,
               least(m.first_ts, c.first_ts) AS ts, coalesce(model_calls, 0) AS model_calls,
               tokens_in, tokens_out, context_tokens, coalesce(compactions, 0) AS compactions
        FROM m FULL JOIN c ON m.session = c.session AND m.turn IS NOT DISTINCT FROM c.turn
        ORDER BY session, ts LIMIT $limit"""),
    "context_timeline": Query("Context size over time, with compaction points marked.", f"""
        SELECT ts, session, step, 'model_call' AS event, model AS detail, context_tokens, tokens_in, tokens_out
        FROM model_calls WHERE {_SESSION}
        UNION ALL
        SELECT ts, session, step, 'compaction', slug || ' turns ' || coalesce(first_turn::VARCHAR, '?') || '-'
               || coalesce(last_turn::VARCHAR, '?'), context_tokens_after, tokens_in, tokens_out
        FROM compactions WHERE {_SESSION}
        ORDER BY ts LIMIT $limit"""),
    "decision_reuse": Query("Decisions and how often later steps reused them.", f"""
        SELECT id, session, step, decision, reuse_count, last_reused
        FROM decision_log WHERE {_SESSION} ORDER BY reuse_count DESC, ts LIMIT $limit"""),
    "failures": Query("Most recent failed operations and errors.", f"""
        SELECT ts, session, step, type, name, error FROM failures WHERE {_SESSION}
        ORDER BY ts DESC LIMIT $limit"""),
}

VIEW_DOCS: dict[str, tuple[str, dict[str, str]]] = {  # view -> (what it holds, column -> meaning)
    "events": ("the episodic log, one row per event (a table)", {
        "id": "client-made event id", "ts": "UTC time", "session": "session id", "flow": "flow id",
        "step": "agent step", "parent": "op_start id of the enclosing operation", "type": "event type",
        "name": "subject: tool, model, path, key or decision id", "duration_ms": "duration",
        "tokens_in": "prompt tokens", "tokens_out": "completion tokens", "cost_usd": "cost if known",
        "ok": "success", "data": "JSON fields of the type (see event types)"}),
    "ltm_entries": ("live long-term memory entries", {
        "namespace": "namespace", "key": "key", "value": "JSON value", "updated_at": "UTC time of the last write",
        "updated_by": "writer label"}),
    "operations": ("operations paired with their end (started by operation())", {
        "id": "op_start id", "started": "UTC start", "session": "", "flow": "", "step": "", "parent": "enclosing op",
        "op": "operation type", "name": "operation name", "ended": "UTC end (NULL while running or if it crashed)",
        "duration_ms": "", "ok": "", "error": "error text on failure"}),
    "tool_calls": ("tool calls", {
        "id": "", "ts": "", "session": "", "flow": "", "step": "", "tool": "tool name", "args": "JSON arguments",
        "result_chars": "size of the result", "outcome": "ok | error | denied | timeout", "ok": "",
        "duration_ms": "", "error": "error text"}),
    "model_calls": ("model calls", {
        "id": "", "ts": "", "session": "", "flow": "", "step": "", "model": "model string", "tokens_in": "",
        "tokens_out": "", "context_tokens": "context size sent", "cost_usd": "", "duration_ms": "", "ok": ""}),
    "file_reads": ("file reads", {
        "id": "", "ts": "", "session": "", "flow": "", "step": "", "path": "workspace-relative path",
        "line_start": "first line read", "line_end": "last line read", "chars": "characters returned",
        "served_from": "memory | disk"}),
    "file_edits": ("file edits", {
        "id": "", "ts": "", "session": "", "flow": "", "step": "", "path": "", "line_start": "", "line_end": "",
        "lines_changed": ""}),
    "reads_avoided": ("reads the knowledge map made unnecessary", {
        "id": "", "ts": "", "session": "", "flow": "", "step": "", "path": "", "reason": "",
        "chars_saved": "characters not read"}),
    "memory_lookups": ("memory hits and misses", {
        "id": "", "ts": "", "session": "", "flow": "", "step": "", "tier": "stm | ltm | kmap",
        "namespace": "", "key": "", "hit": "true for a hit"}),
    "compactions": ("context compactions", {
        "id": "", "ts": "", "session": "", "flow": "", "step": "", "slug": "session slug",
        "first_turn": "first turn folded", "last_turn": "last turn folded", "model": "summarising model",
        "reason": "why it ran", "context_tokens_before": "", "context_tokens_after": "", "tokens_in": "",
        "tokens_out": "", "duration_ms": "", "ok": ""}),
    "decision_log": ("decisions with their reuse", {
        "id": "decision id", "ts": "", "session": "", "flow": "", "step": "", "decision": "", "reasoning": "",
        "related_files": "list of paths", "reuse_count": "decision_reused events", "last_reused": "UTC time"}),
    "failures": ("failed events and errors", {
        "id": "", "ts": "", "session": "", "flow": "", "step": "", "type": "", "name": "", "error": ""}),
}


@dataclass
class Result:
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool = False
    name: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row)) for row in self.rows]


def names() -> list[tuple[str, str]]:
    return [(name, q.description) for name, q in QUERIES.items()]


def canonical(name: str) -> str:
    key = name.strip().replace("-", "_")
    if key not in QUERIES:
        raise ReflectError(f"unknown reflection {name!r}; known: {', '.join(QUERIES)}")
    return key


def run(db, name: str, *, session: str | None = None, limit: int = DEFAULT_LIMIT, team: bool = False) -> Result:
    """Run a named reflection in the owner; see QUERIES. `team`: over the team's rows (workstation.team's
    replica beside this workspace's own), with the same SQL."""
    key = canonical(name)
    columns, rows = db.call(reflect_named, key, session, int(limit), schema=_schema(team))
    return Result(columns, rows, name=key)


def run_sql(db, sql: str, *, limit: int = SQL_ROW_LIMIT, timeout_s: float = SQL_TIMEOUT_S,
            memory_limit: str = SQL_MEMORY_LIMIT, team: bool = False) -> Result:
    """Run one read-only SELECT over the workspace's tables and views in the owner (`team`: its unqualified
    names read the team's tables and views first)."""
    if not isinstance(sql, str) or not sql.strip():
        raise ReflectError("reflect --sql needs a SELECT statement")
    columns, rows, truncated = db.call(reflect_sql, sql, int(limit), float(timeout_s), str(memory_limit),
                                       schema=_schema(team))
    return Result(columns, rows, truncated=truncated)


def _schema(team: bool) -> str:
    return "team" if team else "main"


@contextmanager
def in_schema(con, schema: str) -> Iterator[None]:
    """Unqualified names read `schema` first (then main) on this cursor, for the length of the block.

    The team schema (store.schema._memory_006) holds the same views as main over everyone's rows, so a
    reflection's SQL runs unchanged there."""
    if schema == "main":
        yield
        return
    if schema != "team":
        raise ReflectError(f"no reflection schema {schema!r}")
    (db,) = con.execute("SELECT current_database()").fetchone()
    con.execute("SET search_path = ?", [f"{db}.{schema},{db}.main"])
    try:
        yield
    finally:
        con.execute("RESET search_path")


# ---------------------------------------------------------------- owner side

def plain(value: Any) -> Any:
    """DuckDB values as JSON-friendly Python: times in ISO 8601 UTC, decimals as floats."""
    if isinstance(value, datetime):
        return value.isoformat(timespec="milliseconds") + ("" if value.tzinfo else "Z")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _fetch(cur, limit: int) -> tuple[list[str], list[list[Any]], bool]:
    columns = [d[0] for d in cur.description]
    rows = cur.fetchmany(limit + 1)
    truncated = len(rows) > limit
    return columns, [[plain(v) for v in row] for row in rows[:limit]], truncated


@readonly
def reflect_named(con, name: str, session: str | None, limit: int,
                  schema: str = "main") -> tuple[list[str], list[list[Any]]]:
    import duckdb  # lazy: duckdb, +90 ms; runs in the database's owner only, clients never load it

    with in_schema(con, schema):
        try:
            cur = con.execute(QUERIES[name].sql, {"session": session, "limit": limit})
            columns, rows, _ = _fetch(cur, limit)
        except duckdb.Error as err:
            raise ReflectError(f"reflection {name} failed: {' '.join(str(err).split())}") from None
    return columns, rows


def _check_read_only(con, sql: str) -> None:
    import duckdb  # lazy: duckdb, +90 ms; runs in the database's owner only, clients never load it

    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as err:
        raise ReflectError(f"SQL does not parse: {' '.join(str(err).split())}") from None
    if len(statements) != 1:
        raise ReflectError(f"reflect --sql runs exactly one statement, got {len(statements)}")
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise ReflectError(f"reflect --sql is read-only: {kind.name} statements are refused; "
                           "write a SELECT over the documented views")
    (tree,) = con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
    tree = json.loads(tree)
    if tree.get("error"):
        raise ReflectError(f"reflect --sql cannot check this statement: {tree.get('error_message', '')}")
    known = {(r[0].lower(), r[1].lower(), r[2].lower()) for r in con.execute(
        "SELECT database_name, schema_name, table_name FROM duckdb_tables() UNION ALL "
        "SELECT database_name, schema_name, view_name FROM duckdb_views()").fetchall()}
    _walk(tree, known, frozenset())


def _walk(node: Any, known: set[tuple[str, str, str]], ctes: frozenset[str]) -> None:
    """Refuse anything that is not a workspace table or view, or a CTE in scope where it is read
    (scoped: a CTE named like a file in one subquery must not let another subquery read that file)."""
    if isinstance(node, list):
        for item in node:
            _walk(item, known, ctes)
        return
    if not isinstance(node, dict):
        return
    defined = (node.get("cte_map") or {}).get("map", [])
    if defined:
        ctes = ctes | {str(entry.get("key", "")).lower() for entry in defined}
    kind = node.get("type")
    if kind == "TABLE_FUNCTION":
        fn = str((node.get("function") or {}).get("function_name", "")).lower()
        if fn not in _ALLOWED_TABLE_FUNCTIONS:
            raise ReflectError(f"reflect --sql reads only the workspace's tables and views: "
                               f"table function {fn}() is refused")
    elif kind == "BASE_TABLE":
        catalog, schema = str(node.get("catalog_name", "")).lower(), str(node.get("schema_name", "")).lower()
        table = str(node.get("table_name", "")).lower()
        if not (not catalog and not schema and table in ctes) and not any(
                t == table and (not schema or s == schema or (not catalog and d == schema)) and
                (not catalog or d == catalog) for d, s, t in known):
            raise ReflectError(f"reflect --sql reads only the workspace's tables and views: "
                               f"no table or view named {node.get('table_name')!r}")
    for value in node.values():
        if isinstance(value, (dict, list)):
            _walk(value, known, ctes)


@readonly
def reflect_sql(con, sql: str, limit: int, timeout_s: float, memory_limit: str = SQL_MEMORY_LIMIT,
                schema: str = "main") -> tuple[list[str], list[list[Any]], bool]:
    with in_schema(con, schema):
        return _reflect_sql(con, sql, limit, timeout_s, memory_limit)


def _reflect_sql(con, sql: str, limit: int, timeout_s: float,
                 memory_limit: str) -> tuple[list[str], list[list[Any]], bool]:
    import duckdb  # lazy: duckdb, +90 ms; runs in the database's owner only, clients never load it

    _check_read_only(con, sql)
    # memory_limit is the database's, not the query's: while user SQL runs the owner's other work
    # (small reads and batched writes) shares the lower bound, which it stays far under. The owner
    # otherwise runs with DuckDB's default, which RESET restores exactly.
    con.execute("SET memory_limit = ?", [memory_limit])
    timer = threading.Timer(timeout_s, con.interrupt)
    timer.daemon = True
    try:
        con.execute("BEGIN TRANSACTION READ ONLY")
        timer.start()
        try:
            cur = con.execute(sql)
            return _fetch(cur, limit)
        except duckdb.Error as err:
            if isinstance(err, duckdb.InterruptException):
                raise ReflectError(f"reflect --sql was stopped after {timeout_s:g}s") from None
            if isinstance(err, duckdb.OutOfMemoryException):
                raise ReflectError(f"reflect --sql needed more than its {memory_limit} memory limit") from None
            raise ReflectError(f"SQL failed: {' '.join(str(err).split())}") from None
        finally:
            timer.cancel()
            con.execute("ROLLBACK")
    finally:
        con.execute("RESET memory_limit")
