"""Reflection: named queries give the numbers the log implies; user SQL is read-only and confined."""

from __future__ import annotations

import pytest

from workstation.memory import Memory, ReflectError
from workstation.memory import reflect
from workstation.memory.episodic import (COMPACTION, FILE_EDIT, FILE_READ, MEMORY_HIT, MEMORY_MISS, MODEL_CALL,
                                         READ_AVOIDED, TOOL_CALL, TURN)


@pytest.fixture
def history(db):
    """A small, known history: two sessions, a few steps of each kind of event."""
    s1 = Memory(db, session="s1", record_lookups=())
    rec = s1.record
    s1.step = 1
    for _ in range(3):
        rec(MEMORY_HIT, "k", tier="ltm", namespace="default")
    rec(MEMORY_MISS, "k2", tier="ltm", namespace="default")
    rec(FILE_READ, "a.py", path="a.py", lines=[1, 40], served_from="memory")
    rec(FILE_READ, "a.py", path="a.py", lines=[41, 80], served_from="memory")
    rec(FILE_READ, "b.py", path="b.py", served_from="disk")
    rec(READ_AVOIDED, "c.py", path="c.py", reason="fresh in the knowledge map", chars_saved=500)
    for ms in (10, 20, 30):
        rec(TOOL_CALL, "grep", duration_ms=ms, ok=True, outcome="ok", result_chars=100)
    rec(TOOL_CALL, "read_lines", duration_ms=5, ok=True, outcome="ok")
    rec(TOOL_CALL, "read_lines", duration_ms=7, ok=False, outcome="error", error="no such file")
    rec(TOOL_CALL, "run_command", duration_ms=1, ok=False, outcome="denied")
    rec(MODEL_CALL, "m1", tokens_in=100, tokens_out=10, duration_ms=100, cost_usd=0.01, ok=True, context_tokens=1000)
    rec(FILE_EDIT, "a.py", path="a.py", lines=[3, 5], lines_changed=3)
    decision = s1.log_decision("use pathlib", "consistency", ["a.py"])
    s1.step = 2
    rec(MEMORY_MISS, "k3", tier="ltm", namespace="default")
    rec(FILE_READ, "a.py", path="a.py", served_from="disk")
    rec(MODEL_CALL, "m1", tokens_in=200, tokens_out=20, duration_ms=300, cost_usd=0.02, ok=True, context_tokens=3000)
    rec(COMPACTION, "slug", first_turn=0, last_turn=20, model="m1", reason="threshold", ok=True,
        context_tokens_after=500)
    rec(FILE_EDIT, "a.py", path="a.py", lines_changed=4)
    rec(FILE_EDIT, "b.py", path="b.py", lines_changed=1)
    s1.mark_decision_reused(decision, step=2)
    s1.mark_decision_reused(decision, step=3)
    s2 = Memory(db, session="s2", record_lookups=())
    s2.step = 1
    s2.record(MEMORY_HIT, "k", tier="ltm", namespace="default")
    s2.record(TOOL_CALL, "grep", duration_ms=50, ok=False, outcome="error", error="bad regex")
    s1.close()
    s2.close()
    return decision


def _rows(db, name, **params):
    return reflect.run(db, name, **params).records()


def test_memory_hit_rate_and_reads_avoided_per_session_and_step(db, history):
    assert _rows(db, "memory_by_session") == [
        {"session": "s1", "lookups": 5, "hits": 3, "hit_rate": 0.6, "reads_from_memory": 2, "reads_from_disk": 2,
         "reads_avoided": 1, "chars_saved": 500},
        {"session": "s2", "lookups": 1, "hits": 1, "hit_rate": 1.0, "reads_from_memory": 0, "reads_from_disk": 0,
         "reads_avoided": 0, "chars_saved": None}]
    assert [(r["session"], r["step"], r["lookups"], r["hits"], r["hit_rate"]) for r in _rows(db, "hit_rate")] == [
        ("s1", 1, 4, 3, 0.75), ("s1", 2, 1, 0, 0.0), ("s2", 1, 1, 1, 1.0)]
    assert _rows(db, "reads-avoided", session="s1") == [  # hyphens work as well as underscores
        {"session": "s1", "step": 1, "avoided": 1, "from_memory": 2, "from_disk": 1, "chars_saved": 500},
        {"session": "s1", "step": 2, "avoided": 0, "from_memory": 0, "from_disk": 1, "chars_saved": None}]


def test_most_read_and_most_edited_files(db, history):
    assert [(r["path"], r["reads"], r["from_memory"], r["from_disk"], r["avoided"])
            for r in _rows(db, "top_read_files")] == [("a.py", 3, 2, 1, 0), ("b.py", 1, 0, 1, 0), ("c.py", 0, 0, 0, 1)]
    assert [(r["path"], r["edits"], r["lines_changed"]) for r in _rows(db, "top_edited_files")] == [
        ("a.py", 2, 7), ("b.py", 1, 1)]


def test_tool_error_rates_and_latency(db, history):
    assert [(r["tool"], r["calls"], r["errors"], r["error_rate"]) for r in _rows(db, "tool_errors")] == [
        ("grep", 4, 1, 0.25), ("read_lines", 2, 1, 0.5), ("run_command", 1, 1, 1.0)]
    assert _rows(db, "tool_errors", session="s2")[0]["last_error"] == "bad regex"
    grep = next(r for r in _rows(db, "tool_latency", session="s1") if r["tool"] == "grep")
    assert (grep["calls"], grep["p50_ms"], grep["max_ms"]) == (3, 20.0, 30.0)
    (model,) = _rows(db, "model_latency")
    assert (model["model"], model["calls"], model["p50_ms"], model["tokens_in"], model["tokens_out"],
            model["cost_usd"]) == ("m1", 2, 200.0, 300, 30, 0.03)


def test_latency_halves_round_up_on_every_duckdb_version(db):
    """A p95 of exactly 12.85 ms reads 12.9, as it did on DuckDB 1.x: round() of a DOUBLE in 2.0 gives 12.8."""
    mem = Memory(db, session="h", record_lookups=())
    for tool, calls in (("four", 4), ("two", 2)):
        for n in range(calls):
            mem.record(TOOL_CALL, tool, duration_ms=10.0 + n, ok=True, outcome="ok")
    mem.close()
    assert {r["tool"]: (r["avg_ms"], r["p95_ms"]) for r in _rows(db, "tool_latency")} == {
        "four": (11.5, 12.9), "two": (10.5, 11.0)}


def test_tokens_per_turn_and_context_over_time_with_compactions(db, history):
    # the history records no user turns: everything falls in one turn, unnamed
    assert [(r["turn"], r["model_calls"], r["tokens_in"], r["tokens_out"], r["context_tokens"], r["compactions"])
            for r in _rows(db, "tokens_per_turn")] == [(None, 2, 300, 30, 3000, 1)]
    assert [(r["event"], r["context_tokens"]) for r in _rows(db, "context_timeline")] == [
        ("model_call", 1000), ("model_call", 3000), ("compaction", 500)]


def test_tokens_per_turn_sums_every_model_call_a_user_turn_caused(db):
    mem = Memory(db, session="t", record_lookups=())
    mem.step = 0
    for turn, calls in (("u1", [(100, 10, 900)]), ("u2", [(200, 20, 1500), (250, 5, 1800)])):
        mem.record(TURN, "user", chars=10, turn_id=turn)
        for tokens_in, tokens_out, context in calls:
            mem.step += 1  # a step is one model call: several per turn when tools run
            mem.record(MODEL_CALL, "m1", tokens_in=tokens_in, tokens_out=tokens_out, ok=True,
                       context_tokens=context)
        mem.record(TURN, "assistant", chars=20, turn_id=f"a-{turn}")
    mem.record(COMPACTION, "t", first_turn=0, last_turn=3, ok=True, context_tokens_after=400)
    mem.fence("episodic")
    assert [(r["turn"], r["model_calls"], r["tokens_in"], r["tokens_out"], r["context_tokens"], r["compactions"])
            for r in _rows(db, "tokens_per_turn", session="t")] == [
        ("u1", 1, 100, 10, 900, 0), ("u2", 2, 450, 25, 1800, 1)]


def test_decision_reuse_sessions_and_failures(db, history):
    (row,) = _rows(db, "decision_reuse")
    assert (row["id"], row["decision"], row["reuse_count"]) == (history, "use pathlib", 2)
    sessions = {r["session"]: r for r in _rows(db, "sessions")}
    assert sessions["s1"]["tool_calls"] == 6 and sessions["s1"]["model_calls"] == 2
    assert sessions["s1"]["tokens_in"] == 300 and sessions["s1"]["failures"] == 2 and sessions["s2"]["failures"] == 1
    assert {(r["name"], r["error"]) for r in _rows(db, "failures")} == {
        ("read_lines", "no such file"), ("run_command", "denied"), ("grep", "bad regex")}
    assert len(_rows(db, "failures", limit=1)) == 1


def test_unknown_reflection_names_the_known_ones(db):
    with pytest.raises(ReflectError, match="unknown reflection 'nope'; known: sessions"):
        reflect.run(db, "nope")


def test_view_columns_match_their_documentation(db):
    for view, (_, columns) in reflect.VIEW_DOCS.items():
        described = [r[0] for r in reflect.run_sql(db, f"DESCRIBE {view}").rows]
        assert described == list(columns), view


@pytest.mark.parametrize("sql", [
    "DELETE FROM ltm", "UPDATE ltm SET deleted = true", "INSERT INTO decisions VALUES (1)",
    "CREATE TABLE x (i INT)", "DROP VIEW tool_calls", "COPY events TO '/tmp/ws-leak.csv'",
    "ATTACH '/tmp/ws-other.duckdb' AS other", "EXPLAIN ANALYZE DELETE FROM ltm", "CHECKPOINT", "SET threads = 1",
    "SELECT 1; DELETE FROM ltm", "PRAGMA disable_checkpoint_on_shutdown",
])
def test_sql_that_writes_is_refused_and_changes_nothing(db, sql):
    mem = Memory(db)
    mem.umem("ltm", "k", 1)
    mem.fence("ltm")
    with pytest.raises(ReflectError) as err:
        reflect.run_sql(db, sql)
    assert "\n" not in str(err.value) and ("read-only" in str(err.value) or "one statement" in str(err.value))
    assert reflect.run_sql(db, "SELECT count(*) FROM ltm_entries").rows == [[1]]
    assert reflect.run_sql(db, "SELECT count(*) FROM tool_calls").rows == [[0]]


@pytest.mark.parametrize("sql, refused", [
    ("SELECT * FROM read_csv('/etc/passwd')", "table function read_csv()"),
    ("SELECT * FROM read_text('/etc/hostname')", "table function read_text()"),
    ("SELECT * FROM glob('/*')", "table function glob()"),
    ("SELECT * FROM '/etc/passwd'", "no table or view named '/etc/passwd'"),
    ("SELECT (SELECT count(*) FROM read_blob('/etc/hostname'))", "table function read_blob()"),
    # a CTE named like the file, in another subquery, does not make the file a CTE here
    ("SELECT (WITH \"/etc/hostname\" AS (SELECT 1) SELECT 1) a, (SELECT count(*) FROM \"/etc/hostname\") b",
     "no table or view named '/etc/hostname'"),
])
def test_sql_cannot_read_files_outside_the_store(db, sql, refused):
    with pytest.raises(ReflectError, match="reads only the workspace's tables and views"):
        try:
            reflect.run_sql(db, sql)
        except ReflectError as err:
            assert refused in str(err)
            raise


@pytest.mark.parametrize("sql", [
    "WITH t AS (SELECT tool FROM tool_calls) SELECT count(*) FROM t",
    "WITH a AS (SELECT 1 AS x), b AS (SELECT x FROM a) SELECT (SELECT count(*) FROM b) FROM a",
    "SELECT count(*) FROM main.events", "SELECT count(*) FROM kmap.files", "SELECT count(*) FROM range(10)",
    "DESCRIBE tool_calls", "SELECT * FROM (SELECT 1 AS one) sub",
])
def test_ordinary_reads_are_allowed(db, sql):
    assert reflect.run_sql(db, sql).rows


def test_failing_and_unparsable_sql_are_one_line_errors(db):
    with pytest.raises(ReflectError, match='SQL failed: Binder Error: Referenced column "nope"') as err:
        reflect.run_sql(db, "SELECT nope FROM events")
    assert "\n" not in str(err.value)
    with pytest.raises(ReflectError, match="SQL does not parse"):
        reflect.run_sql(db, "SELEC 1")
    with pytest.raises(ReflectError, match="needs a SELECT"):
        reflect.run_sql(db, "  ")


def test_long_queries_are_stopped_and_large_results_truncated(db):
    with pytest.raises(ReflectError, match="stopped after 0.2s"):
        reflect.run_sql(db, "SELECT count(*) FROM range(100000) a, range(100000) b", timeout_s=0.2)
    result = reflect.run_sql(db, "SELECT * FROM range(50)", limit=10)
    assert len(result.rows) == 10 and result.truncated
    assert reflect.run_sql(db, "SELECT 1").rows == [[1]]  # the owner's cursor still works afterwards


def test_any_duckdb_client_can_read_the_views(paths, history, db):
    import duckdb

    db.close()
    with duckdb.connect(str(paths.memory_db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM tool_calls WHERE outcome <> 'ok'").fetchone() == (3,)
    with duckdb.connect() as con:  # attached under another name, the views still resolve
        con.execute(f"ATTACH '{paths.memory_db}' AS mem (READ_ONLY)")
        assert con.execute("SELECT reuse_count FROM mem.decision_log").fetchone() == (2,)


def test_sql_runs_under_a_memory_limit_and_restores_the_owners(db):
    def owners_limit():
        return db._owner.con.execute("SELECT current_setting('memory_limit')").fetchone()[0]

    reflect.run_sql(db, "SELECT 1")  # this process owns the database now
    before = owners_limit()
    assert reflect.run_sql(db, "SELECT current_setting('memory_limit')", memory_limit="300MB").rows[0][0] in (
        "286.1 MiB", "300.0 MB")
    with pytest.raises(ReflectError, match="needed more than its 64MB memory limit"):
        reflect.run_sql(db, "SELECT list(i) FROM range(40000000) t(i)", memory_limit="64MB")
    assert owners_limit() == before != "64.0 MB"
    assert reflect.run_sql(db, "SELECT count(*) FROM range(10)").rows == [[10]]
