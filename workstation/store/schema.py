"""The schema, in one place: numbered migrations per database file.

Two DuckDB files live in the state folder:
- memory.duckdb (source data: LTM, episodic events, decisions) is attached as `main`;
- index.duckdb (the knowledge map, derived from the files, rebuildable) is attached as `kmap`.
Each records the migrations it has applied in its own `schema_migrations` table.
Append a function to a list to change the schema; never edit an applied one.
"""

from __future__ import annotations

import re
import time
from typing import Callable

Migration = Callable[[object, str], None]  # (connection, schema name)


def _index_001(con, s: str) -> None:
    con.execute(f"""
        CREATE TABLE {s}.files (
            path VARCHAR PRIMARY KEY,      -- repo-relative, '/' separated
            language VARCHAR,
            kind VARCHAR NOT NULL,          -- code | test | config | doc | other
            size BIGINT NOT NULL,
            mtime_ns BIGINT NOT NULL,
            ctime_ns BIGINT NOT NULL,
            inode BIGINT NOT NULL,
            sha256 VARCHAR NOT NULL,
            line_count INTEGER NOT NULL,
            purpose VARCHAR NOT NULL DEFAULT '',
            purpose_source VARCHAR NOT NULL DEFAULT 'source',  -- source | model
            has_errors BOOLEAN NOT NULL DEFAULT false,
            indexed_at_ns BIGINT NOT NULL
        )""")
    con.execute(f"""
        CREATE TABLE {s}.symbols (
            path VARCHAR NOT NULL,
            name VARCHAR NOT NULL,
            qualname VARCHAR NOT NULL,
            kind VARCHAR NOT NULL,
            parent VARCHAR,
            signature VARCHAR NOT NULL,
            start_line INTEGER NOT NULL,
            end_line INTEGER NOT NULL
        )""")
    con.execute(f"""
        CREATE TABLE {s}.refs (
            path VARCHAR NOT NULL,
            name VARCHAR NOT NULL,
            line INTEGER NOT NULL,
            enclosing VARCHAR,
            kind VARCHAR NOT NULL            -- call | ref
        )""")
    con.execute(f"""
        CREATE TABLE {s}.deps (
            path VARCHAR NOT NULL,
            module VARCHAR NOT NULL,         -- as written in the source
            names VARCHAR[] NOT NULL,
            line INTEGER NOT NULL,
            target VARCHAR                    -- resolved repo path, or NULL
        )""")
    con.execute(f"""
        CREATE TABLE {s}.skipped (
            path VARCHAR PRIMARY KEY,
            reason VARCHAR NOT NULL,
            detail VARCHAR NOT NULL DEFAULT ''
        )""")
    for table, col in (("symbols", "name"), ("symbols", "path"), ("refs", "name"),
                       ("refs", "path"), ("deps", "path"), ("deps", "target")):
        con.execute(f"CREATE INDEX idx_{table}_{col} ON {s}.{table}({col})")


def _memory_001(con, s: str) -> None:
    # Times are TIMESTAMP in UTC (TIMESTAMPTZ would need pytz to reach Python).
    con.execute(f"""
        CREATE TABLE {s}.ltm (
            namespace VARCHAR NOT NULL,
            key VARCHAR NOT NULL,
            value JSON,                       -- NULL when deleted
            deleted BOOLEAN NOT NULL DEFAULT false,  -- a tombstone, so a late retried write cannot resurrect it
            stamp BIGINT NOT NULL,            -- writer's clock (ns): the newest write wins, whatever order batches land in
            updated_at TIMESTAMP NOT NULL,
            updated_by VARCHAR NOT NULL DEFAULT '',
            PRIMARY KEY (namespace, key)
        )""")
    con.execute(f"""
        CREATE TABLE {s}.events (
            id VARCHAR NOT NULL,              -- client-made, unique
            ts TIMESTAMP NOT NULL,
            session VARCHAR NOT NULL DEFAULT '',
            flow VARCHAR NOT NULL DEFAULT '',
            step INTEGER,
            parent VARCHAR,                   -- id of the enclosing operation's op_start event
            type VARCHAR NOT NULL,
            name VARCHAR NOT NULL DEFAULT '', -- the subject: tool, model, path, key, decision id
            duration_ms DOUBLE,
            tokens_in INTEGER,
            tokens_out INTEGER,
            cost_usd DOUBLE,
            ok BOOLEAN,
            data JSON
        )""")
    con.execute(f"CREATE INDEX idx_events_ts ON {s}.events(ts)")
    con.execute(f"CREATE INDEX idx_events_session ON {s}.events(session, flow)")
    # Appends arrive in batches with client-made ids; a batch retried after an
    # owner crash is recognised here and skipped (cheaper than a key per event).
    con.execute(f"""
        CREATE TABLE {s}.event_batches (
            id VARCHAR PRIMARY KEY,
            events INTEGER NOT NULL,
            applied_at TIMESTAMP NOT NULL
        )""")
    con.execute(f"""
        CREATE TABLE {s}.decisions (
            id VARCHAR PRIMARY KEY,
            ts TIMESTAMP NOT NULL,
            session VARCHAR NOT NULL DEFAULT '',
            flow VARCHAR NOT NULL DEFAULT '',
            step INTEGER,
            decision VARCHAR NOT NULL,
            reasoning VARCHAR NOT NULL DEFAULT '',
            related_files VARCHAR[] NOT NULL
        )""")
    con.execute(f"CREATE INDEX idx_decisions_step ON {s}.decisions(step)")


# Reflection views over the episodic log (documented in the README; workstation
# reflect and any DuckDB client read them). Unqualified table names, so they
# still resolve when memory.duckdb is opened or attached under another name.
_REFLECTION_VIEWS_001 = {
    "ltm_entries": """
        SELECT namespace, key, value, updated_at, updated_by FROM ltm WHERE NOT deleted""",
    "operations": """
        SELECT s.id, s.ts AS started, s.session, s.flow, s.step, s.parent, s.data->>'op' AS op, s.name,
               e.ts AS ended, e.duration_ms, e.ok, e.data->>'error' AS error
        FROM events s LEFT JOIN events e ON e.id = s.id || '-end'
        WHERE s.type = 'op_start'""",
    "tool_calls": """
        SELECT id, ts, session, flow, step, coalesce(nullif(name, ''), data->>'tool') AS tool,
               data->'args' AS args, TRY_CAST(data->>'result_chars' AS BIGINT) AS result_chars,
               coalesce(data->>'outcome', CASE WHEN ok THEN 'ok' WHEN NOT ok THEN 'error' END) AS outcome,
               ok, duration_ms, data->>'error' AS error
        FROM events WHERE type = 'tool_call'""",
    "model_calls": """
        SELECT id, ts, session, flow, step, coalesce(nullif(name, ''), data->>'model') AS model,
               tokens_in, tokens_out, TRY_CAST(data->>'context_tokens' AS BIGINT) AS context_tokens,
               cost_usd, duration_ms, ok
        FROM events WHERE type = 'model_call'""",
    "file_reads": """
        SELECT id, ts, session, flow, step, coalesce(nullif(name, ''), data->>'path') AS path,
               TRY_CAST(data->'lines'->>0 AS INTEGER) AS line_start, TRY_CAST(data->'lines'->>1 AS INTEGER) AS line_end,
               TRY_CAST(data->>'chars' AS BIGINT) AS chars, coalesce(data->>'served_from', 'disk') AS served_from
        FROM events WHERE type = 'file_read'""",
    "file_edits": """
        SELECT id, ts, session, flow, step, coalesce(nullif(name, ''), data->>'path') AS path,
               TRY_CAST(data->'lines'->>0 AS INTEGER) AS line_start, TRY_CAST(data->'lines'->>1 AS INTEGER) AS line_end,
               TRY_CAST(data->>'lines_changed' AS INTEGER) AS lines_changed
        FROM events WHERE type = 'file_edit'""",
    "reads_avoided": """
        SELECT id, ts, session, flow, step, coalesce(nullif(name, ''), data->>'path') AS path,
               data->>'reason' AS reason, TRY_CAST(data->>'chars_saved' AS BIGINT) AS chars_saved
        FROM events WHERE type = 'read_avoided'""",
    "memory_lookups": """
        SELECT id, ts, session, flow, step, data->>'tier' AS tier, data->>'namespace' AS namespace,
               name AS key, type = 'memory_hit' AS hit
        FROM events WHERE type IN ('memory_hit', 'memory_miss')""",
    "compactions": """
        SELECT id, ts, session, flow, step, name AS slug, TRY_CAST(data->>'first_turn' AS INTEGER) AS first_turn,
               TRY_CAST(data->>'last_turn' AS INTEGER) AS last_turn, data->>'model' AS model,
               data->>'reason' AS reason, TRY_CAST(data->>'context_tokens_before' AS BIGINT) AS context_tokens_before,
               TRY_CAST(data->>'context_tokens_after' AS BIGINT) AS context_tokens_after,
               tokens_in, tokens_out, duration_ms, ok
        FROM events WHERE type = 'compaction'""",
    "decision_log": """
        SELECT d.id, d.ts, d.session, d.flow, d.step, d.decision, d.reasoning, d.related_files,
               count(e.id) AS reuse_count, max(e.ts) AS last_reused
        FROM decisions d LEFT JOIN events e ON e.type = 'decision_reused' AND e.name = d.id
        GROUP BY ALL""",
    "failures": """
        SELECT id, ts, session, flow, step, type, name, coalesce(data->>'error', data->>'outcome') AS error
        FROM events WHERE ok = false OR type = 'error'""",
}


def _memory_002(con, s: str) -> None:
    for name, sql in _REFLECTION_VIEWS_001.items():
        con.execute(f"CREATE VIEW {s}.{name} AS {sql}")


def _index_002(con, s: str) -> None:
    # No query looks refs up by path (deletes by path scan the table in a few ms either
    # way), and keeping this index current was the costliest part of writing refs.
    con.execute(f"DROP INDEX IF EXISTS {s}.idx_refs_path")


def _memory_003(con, s: str) -> None:
    # What was imported from other agents' logs, per source file: an unchanged file (same size,
    # mtime, inode and first 4 KB) is skipped unread. Losing it costs only a re-read: the session
    # logs' provenance decides what is new.
    con.execute(f"""
        CREATE TABLE {s}.import_sources (
            path VARCHAR PRIMARY KEY,         -- the source file's real path
            format VARCHAR NOT NULL,          -- claude-code | codex | swe-agent | aider | openhands
            size BIGINT NOT NULL,
            mtime_ns BIGINT NOT NULL,
            inode BIGINT NOT NULL,
            head_sha VARCHAR NOT NULL,        -- sha1 of the first 4 KB
            consumed BIGINT NOT NULL,         -- bytes read as complete lines (a torn last line waits)
            sessions VARCHAR[] NOT NULL,      -- slugs it was imported into
            imported_at TIMESTAMP NOT NULL
        )""")
    # The session search index: derived from the session logs (live and archived), rebuilt from
    # them when missing or out of step, kept current by reading only what was appended since.
    con.execute(f"""
        CREATE TABLE {s}.search_sessions (
            slug VARCHAR PRIMARY KEY,
            state VARCHAR NOT NULL,           -- live | archived
            identity VARCHAR NOT NULL,        -- which file was read: dev:inode of a live log, size:mtime of a .gz
            size BIGINT NOT NULL,             -- bytes of the log read (complete lines)
            lines BIGINT NOT NULL,            -- lines read
            turns INTEGER NOT NULL,           -- turn records read (since _memory_005: user turns)
            records BIGINT NOT NULL,
            first_id VARCHAR,                 -- id of the first record (a log replaced by another is re-read)
            problems INTEGER NOT NULL,        -- unreadable lines
            first_problem VARCHAR
        )""")
    con.execute(f"""
        CREATE TABLE {s}.search_records (
            slug VARCHAR NOT NULL,
            seq BIGINT NOT NULL,              -- position of the record in its log
            record_id VARCHAR NOT NULL,
            type VARCHAR NOT NULL,
            turn INTEGER,                     -- turn number (NULL for compact and redaction records)
            ts VARCHAR,
            text VARCHAR NOT NULL,            -- the record's text (snippets are cut from it)
            folded VARCHAR NOT NULL           -- the same, lowercased: what search scans (a column apart,
                                              -- so a search reads only this one)
        )""")


def _memory_004(con, s: str) -> None:
    # The search index's texts move out of DuckDB into the search heap (sessions/textindex.py): a cold
    # process scanning 634 MB of strings through DuckDB's buffers spent most of a second faulting pages
    # in; the heap is read through a memory map. The index is derived from the logs, so the old rows
    # are dropped, not converted: the next search reads every log once.
    con.execute(f"DROP TABLE {s}.search_records")
    con.execute(f"DELETE FROM {s}.search_sessions")
    con.execute(f"""
        CREATE TABLE {s}.search_records (
            slug VARCHAR NOT NULL,
            seq BIGINT NOT NULL,              -- position of the record in its log
            record_id VARCHAR NOT NULL,
            type VARCHAR NOT NULL,
            turn INTEGER,                     -- turn number (NULL for compact and redaction records)
            ts VARCHAR,
            folded_at BIGINT NOT NULL,        -- heap offset of the record's case-folded text (what search scans)
            text_at BIGINT NOT NULL,          -- heap offset of its text (snippets are cut from it)
            text_len BIGINT NOT NULL          -- bytes of its text
        )""")
    con.execute(f"""
        CREATE TABLE {s}.search_pieces (     -- heap ranges, each the records of one session stored at once
            slug VARCHAR NOT NULL,
            first_seq BIGINT NOT NULL,
            start BIGINT NOT NULL,            -- case-folded texts, each ended by a NUL, from start to split;
            split BIGINT NOT NULL,            -- then the texts themselves, to stop
            stop BIGINT NOT NULL
        )""")
    con.execute(f"""
        CREATE TABLE {s}.search_heap (       -- one row: which heap file holds the ranges, and how much of it
            gen INTEGER NOT NULL,             -- the file is search-<gen>.heap in the state folder
            size BIGINT NOT NULL              -- bytes committed; anything after is a write that never committed
        )""")
    con.execute(f"INSERT INTO {s}.search_heap VALUES (1, 0)")


def _memory_005(con, s: str) -> None:
    # A search hit's turn is now the user turn the record belongs to (sessions/turns.py), where it was the
    # count of user, assistant, tool and system records. The index is derived from the logs: it is
    # forgotten, as textindex.index_reset does (the next append removes the old heap file), and the
    # next search reads every log once.
    con.execute(f"DELETE FROM {s}.search_records")
    con.execute(f"DELETE FROM {s}.search_pieces")
    con.execute(f"DELETE FROM {s}.search_sessions")
    con.execute(f"UPDATE {s}.search_heap SET gen = gen + 1, size = 0")


def _index_003(con, s: str) -> None:
    # The parser version each file was parsed with (parse.PARSER_VERSIONS): an upgrade that
    # changes what the parser extracts re-parses the files it concerns. Rows from before this
    # column get 0, older than any version: every file is parsed again once.
    con.execute(f"ALTER TABLE {s}.files ADD COLUMN parser_version INTEGER NOT NULL DEFAULT 0")


def _index_004(con, s: str) -> None:
    # Keeping an index over a million reference names current was a quarter of a cold index's
    # write time; `impact` looks a name up by scanning the column (a few ms at that size).
    con.execute(f"DROP INDEX IF EXISTS {s}.idx_refs_name")


def _index_005(con, s: str) -> None:
    # Model-written purposes, by the content they describe: a file whose content did not change is never
    # described twice, one whose content changed is described afresh. Purposes written before were stored
    # unchecked (a failed reply could become a file's purpose for good): they are dropped, not carried over.
    con.execute(f"""
        CREATE TABLE {s}.purpose_cache (
            sha256 VARCHAR PRIMARY KEY,     -- the content described
            purpose VARCHAR NOT NULL,
            model VARCHAR NOT NULL DEFAULT '',
            described_at_ns BIGINT NOT NULL
        )""")
    con.execute(f"UPDATE {s}.files SET purpose = '', purpose_source = 'source' WHERE purpose_source = 'model'")


def _memory_006(con, s: str) -> None:
    # The team replica (workstation.team): teammates' rows pulled from the team server, beside what this
    # workspace pushed and pulled. Derived from the server (a re-pull rebuilds it), so it never mixes
    # with the user's own tables: `team.events` and the team's reflection views read both.
    con.execute("CREATE SCHEMA team")
    con.execute("CREATE TABLE team.me (origin VARCHAR NOT NULL, project VARCHAR NOT NULL, author VARCHAR NOT NULL)")
    con.execute("""CREATE TABLE team.pushed (kind VARCHAR PRIMARY KEY, mark BIGINT NOT NULL, -- rowid, or LTM stamp
                   counted BIGINT NOT NULL, rows BIGINT NOT NULL, pushed_at TIMESTAMP)""")  # counted: rows at or below mark
    con.execute("""CREATE TABLE team.pulled (kind VARCHAR NOT NULL, origin VARCHAR NOT NULL,
                   seq BIGINT NOT NULL, PRIMARY KEY (kind, origin))""")  # the server's seq of the last row pulled
    con.execute("CREATE TABLE team.state (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)")
    con.execute(f"""CREATE TABLE team.remote_events AS SELECT *, ''::VARCHAR AS origin, ''::VARCHAR AS author
                    FROM {s}.events LIMIT 0""")
    con.execute("ALTER TABLE team.remote_events ADD PRIMARY KEY (origin, id)")
    con.execute(f"""CREATE TABLE team.remote_decisions AS SELECT *, ''::VARCHAR AS origin, ''::VARCHAR AS author
                    FROM {s}.decisions LIMIT 0""")
    con.execute("ALTER TABLE team.remote_decisions ADD PRIMARY KEY (origin, id)")
    con.execute(f"""CREATE TABLE team.remote_ltm AS SELECT *, ''::VARCHAR AS origin, ''::VARCHAR AS author,
                    0::BIGINT AS seen_at FROM {s}.ltm LIMIT 0""")  # seen_at: when pulled (ns), for the clock rule
    con.execute("ALTER TABLE team.remote_ltm ADD PRIMARY KEY (origin, namespace, key, stamp)")
    con.execute("""CREATE TABLE team.session_lines (origin VARCHAR NOT NULL, author VARCHAR NOT NULL,
                   slug VARCHAR NOT NULL, line BIGINT NOT NULL, text VARCHAR NOT NULL, PRIMARY KEY (origin, slug, line))""")
    con.execute("""CREATE TABLE team.accepted (kind VARCHAR NOT NULL, origin VARCHAR NOT NULL, id VARCHAR NOT NULL,
                   accepted_at TIMESTAMP NOT NULL, PRIMARY KEY (kind, origin, id))""")  # decisions and LTM keys let in
    me = "(SELECT origin FROM team.me) AS origin, (SELECT author FROM team.me) AS author"
    con.execute(f"CREATE VIEW team.events AS SELECT *, {me} FROM {s}.events UNION ALL SELECT * FROM team.remote_events")
    con.execute(f"""CREATE VIEW team.decisions AS SELECT *, {me} FROM {s}.decisions
                    UNION ALL SELECT * FROM team.remote_decisions""")
    con.execute(f"""CREATE VIEW team.ltm AS SELECT * EXCLUDE (seen_at) FROM (
                        SELECT *, {me}, 0 AS seen_at FROM {s}.ltm UNION ALL SELECT * FROM team.remote_ltm)
                    QUALIFY row_number() OVER (PARTITION BY namespace, key ORDER BY stamp DESC, origin DESC) = 1""")
    mirror_views(con, "team")



def _memory_007(con, s: str) -> None:
    # Team memory keyed by whose it is. An accepted teammate's item is the item of one author at one origin:
    # a write of the same key under that origin by anyone else is another item, never accepted with it (the
    # server refuses such writes too; this holds for rows from before it did). Existing accepts keep the
    # author who first wrote the item at that origin. And a teammate's session is its origin's: in the team
    # views its name carries author and origin, so two engineers' sessions of the same (date-based) slug
    # stay two, and "this session" is never a teammate's.
    con.execute("""CREATE TABLE team.accepted_items (kind VARCHAR NOT NULL, origin VARCHAR NOT NULL,
                   author VARCHAR NOT NULL, id VARCHAR NOT NULL, accepted_at TIMESTAMP NOT NULL,
                   PRIMARY KEY (kind, origin, author, id))""")
    con.execute("""INSERT INTO team.accepted_items
                   SELECT a.kind, a.origin, r.author, a.id, a.accepted_at FROM team.accepted a
                   JOIN (SELECT 'decision' AS kind, origin, id, author FROM team.remote_decisions
                         UNION ALL
                         SELECT 'ltm', origin, namespace || chr(0) || key, arg_min(author, stamp)
                         FROM team.remote_ltm GROUP BY ALL) r USING (kind, origin, id)""")
    con.execute("DROP TABLE team.accepted")
    me = "(SELECT origin FROM team.me) AS origin, (SELECT author FROM team.me) AS author"
    theirs = "* REPLACE (session || ' · ' || author || ' ' || origin AS session)"
    con.execute(f"""CREATE OR REPLACE VIEW team.events AS SELECT *, {me} FROM {s}.events
                    UNION ALL SELECT {theirs} FROM team.remote_events""")
    con.execute(f"""CREATE OR REPLACE VIEW team.decisions AS SELECT *, {me} FROM {s}.decisions
                    UNION ALL SELECT {theirs} FROM team.remote_decisions""")


_VIEW_HEAD = re.compile(r'^\s*CREATE\s+VIEW\s+(?:"?main"?\.)?("?)(\w+)\1\s+AS\s+', re.IGNORECASE)
_TEAM_OWN = frozenset({"events", "decisions", "ltm"})  # the team schema's own views: everyone's rows


def mirror_views(con, schema: str) -> int:
    """Give `schema` every view of main, with main's own text; returns how many it (re)made.

    A view binds its unqualified names in its own schema, so each runs unchanged over that schema's
    tables (the team's `events` is everyone's). Run after migrations change main's views, as the team
    sync does at each pull."""
    have = dict(con.execute("SELECT view_name, sql FROM duckdb_views() WHERE schema_name = ? "
                            "AND database_name = current_database()", [schema]).fetchall())
    changed = 0
    for name, sql in con.execute("SELECT view_name, sql FROM duckdb_views() WHERE schema_name = 'main' "
                                 "AND database_name = current_database() AND NOT internal").fetchall():
        match = _VIEW_HEAD.match(sql)
        if match is None or name in _TEAM_OWN:
            continue
        body = sql[match.end():].rstrip().rstrip(";")
        if have.get(name) != f"CREATE VIEW {schema}.{name} AS {body};":
            con.execute(f"CREATE OR REPLACE VIEW {schema}.{name} AS {body}")
            changed += 1
    return changed


INDEX_MIGRATIONS: list[Migration] = [_index_001, _index_002, _index_003, _index_004, _index_005]
MEMORY_MIGRATIONS: list[Migration] = [_memory_001, _memory_002, _memory_003, _memory_004, _memory_005,
                                     _memory_006, _memory_007]


RETRY_RECORDS_KEPT_S = 24 * 3600


def prune_retry_records(con, now_s: float | None = None) -> tuple[int, int]:
    """Drop what only made retries idempotent once no retry can come: applied episodic batch
    ids and LTM tombstones older than a day (retries arrive within seconds of their write).
    Returns (batch ids, tombstones) dropped."""
    cutoff_us = int(((now_s if now_s is not None else time.time()) - RETRY_RECORDS_KEPT_S) * 1_000_000)
    batches = con.execute("DELETE FROM main.event_batches WHERE applied_at < make_timestamp(?)",
                          [cutoff_us]).fetchone()[0]
    tombstones = con.execute("DELETE FROM main.ltm WHERE deleted AND stamp < ?",
                             [cutoff_us * 1000]).fetchone()[0]
    return batches, tombstones


def migrate(con, schema: str, migrations: list[Migration]) -> int:
    """Apply pending migrations to `schema`; returns how many ran."""
    con.execute(f"""
        CREATE TABLE IF NOT EXISTS {schema}.schema_migrations (
            id INTEGER PRIMARY KEY, name VARCHAR NOT NULL,
            applied_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp)""")
    done = {row[0] for row in con.execute(f"SELECT id FROM {schema}.schema_migrations").fetchall()}
    ran = 0
    for number, migration in enumerate(migrations, start=1):
        if number in done:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            migration(con, schema)
            con.execute(f"INSERT INTO {schema}.schema_migrations (id, name) VALUES (?, ?)",
                        [number, migration.__name__.lstrip("_")])
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
        ran += 1
    if ran and migrations is MEMORY_MIGRATIONS and len(done) >= 6:  # a later migration may change main's views
        mirror_views(con, "team")
    return ran
