"""Schema migrations, as simonw/llm tests them: a blank database migrated to the exact columns of every
table and documented view, and an old database migrated forward with its data intact."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest

from support.kmap_helpers import age, open_map, write
from workstation.store.schema import INDEX_MIGRATIONS, MEMORY_MIGRATIONS, migrate

README = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"  # its Reflection section

# The first columns of every view over `events` (README: "id, ts, session, flow, step are as in events").
_EVENT_HEAD = {"id": "VARCHAR", "ts": "TIMESTAMP", "session": "VARCHAR", "flow": "VARCHAR", "step": "INTEGER"}
_MIGRATIONS_TABLE = {"id": "INTEGER", "name": "VARCHAR", "applied_at": "TIMESTAMP WITH TIME ZONE"}

MEMORY_TABLES = {
    "ltm": {"namespace": "VARCHAR", "key": "VARCHAR", "value": "JSON", "deleted": "BOOLEAN", "stamp": "BIGINT",
            "updated_at": "TIMESTAMP", "updated_by": "VARCHAR"},
    "events": {**_EVENT_HEAD, "parent": "VARCHAR", "type": "VARCHAR", "name": "VARCHAR", "duration_ms": "DOUBLE",
               "tokens_in": "INTEGER", "tokens_out": "INTEGER", "cost_usd": "DOUBLE", "ok": "BOOLEAN", "data": "JSON"},
    "event_batches": {"id": "VARCHAR", "events": "INTEGER", "applied_at": "TIMESTAMP"},
    "decisions": {**_EVENT_HEAD, "decision": "VARCHAR", "reasoning": "VARCHAR", "related_files": "VARCHAR[]"},
    "schema_migrations": _MIGRATIONS_TABLE,
    "import_sources": {"path": "VARCHAR", "format": "VARCHAR", "size": "BIGINT", "mtime_ns": "BIGINT",
                       "inode": "BIGINT", "head_sha": "VARCHAR", "consumed": "BIGINT", "sessions": "VARCHAR[]",
                       "imported_at": "TIMESTAMP"},
    "search_sessions": {"slug": "VARCHAR", "state": "VARCHAR", "identity": "VARCHAR", "size": "BIGINT",
                        "lines": "BIGINT", "turns": "INTEGER", "records": "BIGINT", "first_id": "VARCHAR",
                        "problems": "INTEGER", "first_problem": "VARCHAR"},
    "search_records": {"slug": "VARCHAR", "seq": "BIGINT", "record_id": "VARCHAR", "type": "VARCHAR",
                       "turn": "INTEGER", "ts": "VARCHAR", "folded_at": "BIGINT", "text_at": "BIGINT", "text_len": "BIGINT"},
    "search_pieces": {"slug": "VARCHAR", "first_seq": "BIGINT", "start": "BIGINT", "split": "BIGINT", "stop": "BIGINT"},
    "search_heap": {"gen": "INTEGER", "size": "BIGINT"},
}
MEMORY_VIEWS = {
    "ltm_entries": {"namespace": "VARCHAR", "key": "VARCHAR", "value": "JSON", "updated_at": "TIMESTAMP",
                    "updated_by": "VARCHAR"},
    "operations": {"id": "VARCHAR", "started": "TIMESTAMP", "session": "VARCHAR", "flow": "VARCHAR", "step": "INTEGER",
                   "parent": "VARCHAR", "op": "VARCHAR", "name": "VARCHAR", "ended": "TIMESTAMP",
                   "duration_ms": "DOUBLE", "ok": "BOOLEAN", "error": "VARCHAR"},
    "tool_calls": {**_EVENT_HEAD, "tool": "VARCHAR", "args": "JSON", "result_chars": "BIGINT", "outcome": "VARCHAR",
                   "ok": "BOOLEAN", "duration_ms": "DOUBLE", "error": "VARCHAR"},
    "model_calls": {**_EVENT_HEAD, "model": "VARCHAR", "tokens_in": "INTEGER", "tokens_out": "INTEGER",
                    "context_tokens": "BIGINT", "cost_usd": "DOUBLE", "duration_ms": "DOUBLE", "ok": "BOOLEAN"},
    "file_reads": {**_EVENT_HEAD, "path": "VARCHAR", "line_start": "INTEGER", "line_end": "INTEGER",
                   "chars": "BIGINT", "served_from": "VARCHAR"},
    "file_edits": {**_EVENT_HEAD, "path": "VARCHAR", "line_start": "INTEGER", "line_end": "INTEGER",
                   "lines_changed": "INTEGER"},
    "reads_avoided": {**_EVENT_HEAD, "path": "VARCHAR", "reason": "VARCHAR", "chars_saved": "BIGINT"},
    "memory_lookups": {**_EVENT_HEAD, "tier": "VARCHAR", "namespace": "VARCHAR", "key": "VARCHAR", "hit": "BOOLEAN"},
    "compactions": {**_EVENT_HEAD, "slug": "VARCHAR", "first_turn": "INTEGER", "last_turn": "INTEGER",
                    "model": "VARCHAR", "reason": "VARCHAR", "context_tokens_before": "BIGINT",
                    "context_tokens_after": "BIGINT", "tokens_in": "INTEGER", "tokens_out": "INTEGER",
                    "duration_ms": "DOUBLE", "ok": "BOOLEAN"},
    "decision_log": {**_EVENT_HEAD, "decision": "VARCHAR", "reasoning": "VARCHAR", "related_files": "VARCHAR[]",
                     "reuse_count": "BIGINT", "last_reused": "TIMESTAMP"},
    "failures": {**_EVENT_HEAD, "type": "VARCHAR", "name": "VARCHAR", "error": "VARCHAR"},
}
INDEX_TABLES = {
    "files": {"path": "VARCHAR", "language": "VARCHAR", "kind": "VARCHAR", "size": "BIGINT", "mtime_ns": "BIGINT",
              "ctime_ns": "BIGINT", "inode": "BIGINT", "sha256": "VARCHAR", "line_count": "INTEGER",
              "purpose": "VARCHAR", "purpose_source": "VARCHAR", "has_errors": "BOOLEAN", "indexed_at_ns": "BIGINT",
              "parser_version": "INTEGER"},
    "symbols": {"path": "VARCHAR", "name": "VARCHAR", "qualname": "VARCHAR", "kind": "VARCHAR", "parent": "VARCHAR",
                "signature": "VARCHAR", "start_line": "INTEGER", "end_line": "INTEGER"},
    "refs": {"path": "VARCHAR", "name": "VARCHAR", "line": "INTEGER", "enclosing": "VARCHAR", "kind": "VARCHAR"},
    "deps": {"path": "VARCHAR", "module": "VARCHAR", "names": "VARCHAR[]", "line": "INTEGER", "target": "VARCHAR"},
    "skipped": {"path": "VARCHAR", "reason": "VARCHAR", "detail": "VARCHAR"},
    "purpose_cache": {"sha256": "VARCHAR", "purpose": "VARCHAR", "model": "VARCHAR", "described_at_ns": "BIGINT"},
    "schema_migrations": _MIGRATIONS_TABLE,
}
INDEX_INDEXES = {"idx_symbols_name", "idx_symbols_path", "idx_deps_path", "idx_deps_target"}
MEMORY_INDEXES = {"idx_events_ts", "idx_events_session", "idx_decisions_step"}


def _connect(tmp_path: Path):
    """memory.duckdb as `main` with index.duckdb attached as `kmap`, as the database owner opens them."""
    con = duckdb.connect(str(tmp_path / "memory.duckdb"))
    con.execute(f"ATTACH '{tmp_path / 'index.duckdb'}' AS kmap")
    return con


def _catalog(con, schema_name: str) -> tuple[dict, dict]:
    """(tables, views) of one attached database: name -> {column: type}, columns in their order."""
    catalog = "kmap" if schema_name == "kmap" else con.execute("SELECT current_database()").fetchone()[0]
    rows = con.execute(
        """SELECT t.table_name, t.table_type, c.column_name, c.data_type
           FROM information_schema.tables t JOIN information_schema.columns c
             USING (table_catalog, table_schema, table_name)
           WHERE t.table_catalog = ? AND t.table_schema = 'main'
           ORDER BY t.table_name, c.ordinal_position""", [catalog]).fetchall()
    tables: dict[str, dict] = {}
    views: dict[str, dict] = {}
    for table, kind, column, data_type in rows:
        (views if kind == "VIEW" else tables).setdefault(table, {})[column] = data_type
    return tables, views


def _indexes(con, catalog: str) -> set[str]:
    return {r[0] for r in con.execute("SELECT index_name FROM duckdb_indexes() WHERE database_name = ?",
                                      [catalog]).fetchall()}


def _ordered(columns: dict) -> list[tuple[str, str]]:
    return list(columns.items())


def test_migrate_blank(tmp_path: Path):
    con = _connect(tmp_path)
    assert migrate(con, "main", MEMORY_MIGRATIONS) == len(MEMORY_MIGRATIONS)
    assert migrate(con, "kmap", INDEX_MIGRATIONS) == len(INDEX_MIGRATIONS)
    tables, views = _catalog(con, "main")
    assert {name: _ordered(cols) for name, cols in tables.items()} == \
        {name: _ordered(cols) for name, cols in MEMORY_TABLES.items()}
    assert {name: _ordered(cols) for name, cols in views.items()} == \
        {name: _ordered(cols) for name, cols in MEMORY_VIEWS.items()}
    tables, views = _catalog(con, "kmap")
    assert {name: _ordered(cols) for name, cols in tables.items()} == \
        {name: _ordered(cols) for name, cols in INDEX_TABLES.items()}
    assert views == {}
    assert _indexes(con, "kmap") == INDEX_INDEXES
    assert _indexes(con, con.execute("SELECT current_database()").fetchone()[0]) == MEMORY_INDEXES
    # every migration is recorded under its number and name, and none runs twice
    for name, migrations in (("main", MEMORY_MIGRATIONS), ("kmap", INDEX_MIGRATIONS)):
        recorded = con.execute(f"SELECT id, name FROM {name}.schema_migrations ORDER BY id").fetchall()
        assert recorded == [(i, m.__name__.lstrip("_")) for i, m in enumerate(migrations, start=1)]
        assert migrate(con, name, migrations) == 0
    con.close()


def _readme_views() -> dict[str, dict[str, str]]:
    """The README's `events` table and views table (section Reflection), as name -> {column: type}."""
    text = README.read_text()
    section = text[text.index("### Reflection"):text.index("### Many processes")]
    events: dict[str, str] = {}
    block = section[section.index("`events` — one row per event"):section.index("Views (")]
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"[A-Z\[\]]+", cells[1]):
            for name in cells[0].split(","):
                events[name.strip()] = cells[1]
    views: dict[str, dict[str, str]] = {}
    for line in section[section.index("| view |"):].splitlines()[2:]:
        if not line.startswith("| `"):
            break
        name, _holds, columns = [c.strip() for c in line.strip().strip("|").split("|")]
        cols: dict[str, str] = {}
        for item in re.sub(r"\([^)]*\)", "", columns).split(","):
            words = item.split()
            cols[words[0]] = words[1] if len(words) > 1 else events[words[0]]
        views[name.strip("`")] = cols
    views["events"] = events
    return views


def test_the_readme_documents_every_view_as_it_is(tmp_path: Path):
    """README.md's Reflection section names every view with its columns and types, in order."""
    con = _connect(tmp_path)
    migrate(con, "main", MEMORY_MIGRATIONS)
    tables, views = _catalog(con, "main")
    documented = _readme_views()
    assert _ordered(documented.pop("events")) == _ordered(tables["events"])
    assert {name: _ordered(cols) for name, cols in documented.items()} == \
        {name: _ordered(cols) for name, cols in views.items()}
    con.close()


def _first(migrations: list, count: int) -> list:
    assert 0 < count < len(migrations), "an 'old' database applies some migrations, not all"
    return migrations[:count]


def _write_old_data(con) -> None:
    """Rows as the first migrations' schema holds them (no parser_version column yet)."""
    con.execute("""INSERT INTO main.ltm VALUES ('conventions', 'style', '{"quotes": "double"}', false, 1,
                   TIMESTAMP '2026-01-02 03:04:05', 'test')""")
    con.execute("""INSERT INTO main.events (id, ts, session, flow, step, type, name, duration_ms, ok, data)
                   VALUES ('e1', TIMESTAMP '2026-01-02 03:04:06', 's1', 'main', 1, 'tool_call', 'grep', 12.5, true,
                           '{"tool": "grep", "args": {"pattern": "x"}, "result_chars": 40}')""")
    con.execute("""INSERT INTO main.decisions VALUES ('d1', TIMESTAMP '2026-01-02 03:04:07', 's1', 'main', 1,
                   'use tabs', 'style guide', ['a.py'])""")
    con.execute("""INSERT INTO kmap.files (path, language, kind, size, mtime_ns, ctime_ns, inode, sha256, line_count,
                   purpose, purpose_source, has_errors, indexed_at_ns)
                   VALUES ('a.py', 'python', 'code', 20, 1, 1, 1, 'abc', 2, 'Old purpose', 'model', false, 5)""")
    con.execute("INSERT INTO kmap.symbols VALUES ('a.py', 'old', 'old', 'function', NULL, 'def old()', 1, 2)")
    con.execute("INSERT INTO kmap.refs VALUES ('a.py', 'x', 2, 'old', 'ref')")
    con.execute("INSERT INTO kmap.deps VALUES ('a.py', 'os', [], 1, NULL)")
    con.execute("INSERT INTO kmap.skipped VALUES ('big.bin', 'binary', 'NUL byte at offset 0')")


@pytest.mark.parametrize("memory_done, index_done", [(1, 1), (1, 2), (1, 4)])
def test_migrate_an_old_database_forward(tmp_path: Path, memory_done: int, index_done: int):
    con = _connect(tmp_path)
    migrate(con, "main", _first(MEMORY_MIGRATIONS, memory_done))
    migrate(con, "kmap", _first(INDEX_MIGRATIONS, index_done))
    _write_old_data(con)
    con.close()

    con = _connect(tmp_path)
    assert migrate(con, "main", MEMORY_MIGRATIONS) == len(MEMORY_MIGRATIONS) - memory_done
    assert migrate(con, "kmap", INDEX_MIGRATIONS) == len(INDEX_MIGRATIONS) - index_done
    tables, views = _catalog(con, "main")
    assert set(tables) == set(MEMORY_TABLES) and set(views) == set(MEMORY_VIEWS)
    tables, _ = _catalog(con, "kmap")
    assert {name: _ordered(cols) for name, cols in tables.items()} == \
        {name: _ordered(cols) for name, cols in INDEX_TABLES.items()}
    # the data survived, and the views added later read it
    assert con.execute("SELECT namespace, key, value FROM ltm_entries").fetchall() == \
        [("conventions", "style", '{"quotes": "double"}')]
    assert con.execute("SELECT id, tool, result_chars, outcome, ok FROM tool_calls").fetchall() == \
        [("e1", "grep", 40, "ok", True)]
    assert json.loads(con.execute("SELECT args FROM tool_calls").fetchone()[0]) == {"pattern": "x"}
    assert con.execute("SELECT id, decision, related_files, reuse_count FROM decision_log").fetchall() == \
        [("d1", "use tabs", ["a.py"], 0)]
    # parsed before versions were recorded (older than any); its unchecked model-written purpose is dropped
    assert con.execute("SELECT path, sha256, purpose, purpose_source, parser_version FROM kmap.files").fetchall() == \
        [("a.py", "abc", "", "source", 0)]
    assert con.execute("SELECT * FROM kmap.purpose_cache").fetchall() == []
    assert con.execute("SELECT qualname, start_line, end_line FROM kmap.symbols").fetchall() == [("old", 1, 2)]
    assert con.execute("SELECT * FROM kmap.refs").fetchall() == [("a.py", "x", 2, "old", "ref")]
    assert con.execute("SELECT * FROM kmap.deps").fetchall() == [("a.py", "os", [], 1, None)]
    assert con.execute("SELECT * FROM kmap.skipped").fetchall() == [("big.bin", "binary", "NUL byte at offset 0")]
    con.close()


def test_an_old_knowledge_map_is_parsed_again_after_the_upgrade(tmp_path: Path):
    """Files of a map written before parser versions were recorded are re-parsed once, content unchanged."""
    write(tmp_path, {"a.py": "def new():\n    return 1\n"})
    age(tmp_path / "a.py")
    with open_map(tmp_path) as km:
        km.index_all()
        state = km.paths.state
    # make it an old map: the symbols an older parser found, and no version recorded
    con = duckdb.connect(str(state / "index.duckdb"))
    con.execute("UPDATE files SET parser_version = 0")
    con.execute("UPDATE symbols SET name = 'from_old_parser', qualname = 'from_old_parser'")
    con.close()
    with open_map(tmp_path) as km:
        change = km.ensure_fresh()
        assert change.indexed == ["a.py"]
        assert [s.name for s in km.symbols("a.py")] == ["new"]


def test_applied_migrations_are_never_edited():
    """The names of applied migrations are recorded; renaming or reordering one breaks old databases."""
    assert [m.__name__ for m in INDEX_MIGRATIONS] == [f"_index_{i:03d}" for i in range(1, len(INDEX_MIGRATIONS) + 1)]
    assert [m.__name__ for m in MEMORY_MIGRATIONS] == \
        [f"_memory_{i:03d}" for i in range(1, len(MEMORY_MIGRATIONS) + 1)]
