"""The schema, in one place: numbered migrations per database file.

Two DuckDB files live in the state folder:
- memory.duckdb (source data: LTM, episodic events, decisions) is attached as `main`;
- index.duckdb (the knowledge map, derived from the files, rebuildable) is attached as `kmap`.
Each records the migrations it has applied in its own `schema_migrations` table.
Append a function to a list to change the schema; never edit an applied one.
"""

from __future__ import annotations

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
    con.execute(f"""
        CREATE TABLE {s}.ltm (
            namespace VARCHAR NOT NULL,
            key VARCHAR NOT NULL,
            value JSON NOT NULL,
            updated_at TIMESTAMPTZ NOT NULL,
            updated_by VARCHAR NOT NULL DEFAULT '',
            PRIMARY KEY (namespace, key)
        )""")
    con.execute(f"""
        CREATE TABLE {s}.events (
            id VARCHAR PRIMARY KEY,           -- client-made, so retried appends are idempotent
            ts TIMESTAMPTZ NOT NULL,
            session VARCHAR NOT NULL DEFAULT '',
            flow VARCHAR NOT NULL DEFAULT '',
            step INTEGER,
            type VARCHAR NOT NULL,
            name VARCHAR NOT NULL DEFAULT '',
            duration_ms DOUBLE,
            tokens_in INTEGER,
            tokens_out INTEGER,
            cost_usd DOUBLE,
            ok BOOLEAN,
            data JSON
        )""")
    con.execute(f"CREATE INDEX idx_events_ts ON {s}.events(ts)")
    con.execute(f"CREATE INDEX idx_events_session ON {s}.events(session, flow)")
    con.execute(f"""
        CREATE TABLE {s}.decisions (
            id VARCHAR PRIMARY KEY,
            ts TIMESTAMPTZ NOT NULL,
            session VARCHAR NOT NULL DEFAULT '',
            step INTEGER,
            decision VARCHAR NOT NULL,
            reasoning VARCHAR NOT NULL DEFAULT '',
            related_files VARCHAR[] NOT NULL
        )""")
    con.execute(f"CREATE INDEX idx_decisions_step ON {s}.decisions(step)")


INDEX_MIGRATIONS: list[Migration] = [_index_001]
MEMORY_MIGRATIONS: list[Migration] = [_memory_001]


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
    return ran
