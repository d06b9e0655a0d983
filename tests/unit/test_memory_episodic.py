"""Episodic: append-only events, operations, batching, exactly-once batches, snapshots, redaction."""

from __future__ import annotations

import math
import threading
import time

import pytest

from workstation.memory import MemoryKeyError, MemoryValueError
from workstation.memory.episodic import (FILE_READ, MODEL_CALL, OP, OP_END, OP_START, TOOL_CALL, Episodic,
                                         append_events)
from workstation.memory.flusher import flusher
from workstation.memory.reflect import run_sql
from workstation.store import Database


def _count(db, where: str = "true") -> int:
    return run_sql(db, f"SELECT count(*) FROM events WHERE {where}").rows[0][0]


def test_record_stores_columns_and_data(db):
    ep = Episodic(db, session="s1", flow="main", step=3)
    before = time.time()
    event_id = ep.record(MODEL_CALL, "gpt-x", duration_ms=812.5, tokens_in=1200, tokens_out=80, cost_usd=0.0042,
                         ok=True, context_tokens=5400)
    event = ep.get(event_id)
    assert event["session"] == "s1" and event["flow"] == "main" and event["step"] == 3
    assert (event["type"], event["name"], event["duration_ms"], event["tokens_in"], event["tokens_out"],
            event["cost_usd"], event["ok"]) == (MODEL_CALL, "gpt-x", 812.5, 1200, 80, 0.0042, True)
    assert event["data"] == {"context_tokens": 5400}
    assert before - 1 <= event["ts"] <= time.time() + 1
    with pytest.raises(MemoryKeyError, match="no episodic event"):
        ep.get("nope")


def test_query_filters_and_orders_newest_first(db):
    a, b = Episodic(db, session="a"), Episodic(db, session="b")
    for i in range(3):
        a.record(TOOL_CALL, "grep", seq=i)
        b.record(FILE_READ, "x.py", seq=i)
    a.fence()
    assert [e["data"]["seq"] for e in a.query(session="a")] == [2, 1, 0]
    b.fence()
    assert [(e["session"], e["data"]["seq"]) for e in a.query(types=[FILE_READ])] == [("b", 2), ("b", 1), ("b", 0)]
    assert len(a.query(limit=2)) == 2
    assert a.query(since=time.time() + 60) == []


def test_operation_records_start_and_end_with_duration_parent_and_error(db):
    ep = Episodic(db, session="s")
    with ep.operation(TOOL_CALL, "read_lines", args={"path": "a.py"}) as op:
        inner = ep.record(FILE_READ, "a.py", served_from="disk")
        time.sleep(0.02)
        op.set(result_chars=120)
    with pytest.raises(ZeroDivisionError):
        with ep.operation(OP, "divide") as failing:
            1 / 0
    start, end = ep.get(op.id), ep.get(op.id + "-end")
    assert start["type"] == OP_START and start["data"] == {"op": TOOL_CALL, "args": {"path": "a.py"}}
    assert end["type"] == TOOL_CALL and end["parent"] == op.id and end["ok"] is True
    assert end["duration_ms"] >= 20 and end["data"] == {"args": {"path": "a.py"}, "result_chars": 120}
    assert ep.get(inner)["parent"] == op.id
    bad = ep.get(failing.id + "-end")
    assert bad["type"] == OP_END and bad["ok"] is False and bad["data"]["error"] == "ZeroDivisionError: division by zero"
    assert ep.record("after", "x") and ep.get(ep.record("after2"))["parent"] is None  # context restored


def test_secret_looking_keys_are_redacted_at_any_depth(db):
    ep = Episodic(db)
    event_id = ep.record(TOOL_CALL, "http", args={"url": "u", "headers": {"Authorization": "Bearer x"},
                                                  "api_key": "sk-123", "items": [{"password": "p"}]},
                         tokens_in=5, context_tokens=99)
    data = ep.get(event_id)["data"]
    assert data["args"] == {"url": "u", "headers": {"Authorization": "[redacted]"}, "api_key": "[redacted]",
                            "items": [{"password": "[redacted]"}]}
    assert data["context_tokens"] == 99 and ep.get(event_id)["tokens_in"] == 5


def test_secret_keys_are_redacted_however_spelled_and_only_those(db):
    ep = Episodic(db)
    secret = ["api_key", "APIKEY", "X-API-Key", "openai_api_key", "x-auth-token", "db-password", "private_key", "Secret",
              "refresh_token", "passwd", "api_key\n", "pa\u017fsword"]  # re's IGNORECASE folds long s to s
    harmless = ["tokens", "mytoken", "secretary", "keyboard", "passwords", "token_count", 'a"token', "x_token y"]
    for key in secret:  # one event each: a single secret anywhere sends the whole event through redaction
        event_id = ep.record(TOOL_CALL, "t", **{key: "s3cr3t"}, deep=[{"list": [{key: 1, "n": 2}]}])
        assert ep.get(event_id)["data"] == {key: "[redacted]", "deep": [{"list": [{key: "[redacted]", "n": 2}]}]}, key
    data = {"top": {k: "s3cr3t" for k in harmless}, "pair": ("tuple", {"Authorization": "Bearer x"}),
            "text": 'a value like {"password": "p", "x_token":1} is only text'}
    stored = ep.get(ep.record(TOOL_CALL, "t", **data))["data"]
    assert stored == {"top": data["top"], "pair": ["tuple", {"Authorization": "[redacted]"}], "text": data["text"]}
    assert data["pair"][1]["Authorization"] == "Bearer x"  # the caller's data is not changed
    plain = {"top": {k: "s3cr3t" for k in harmless}, "text": data["text"]}
    assert ep.get(ep.record(TOOL_CALL, "t", **plain))["data"] == plain


def test_numbers_a_column_cannot_hold_are_refused_not_stored_as_null(db):
    ep = Episodic(db)
    for field, bad, problem in (("step", 2**31, "out of range"), ("tokens_in", -2**31 - 1, "out of range"),
                                ("tokens_out", 10**20, "out of range"), ("duration_ms", math.inf, "finite"),
                                ("cost_usd", math.nan, "finite"), ("duration_ms", 10**400, "too large")):
        with pytest.raises(MemoryValueError, match=f"episodic {field} .*{problem}"):
            ep.record(MODEL_CALL, "m", **{field: bad})
    assert ep.pending == 0
    event_id = ep.record(MODEL_CALL, "m", step=2**31 - 1, tokens_in=-2**31, duration_ms=3, cost_usd=1e300)
    event = ep.get(event_id)
    assert (event["step"], event["tokens_in"], event["duration_ms"], event["cost_usd"]) == (2**31 - 1, -2**31, 3.0, 1e300)


def test_data_that_refers_to_itself_is_refused_in_one_line(db):
    ep = Episodic(db)
    loop: list = []
    loop.append(loop)
    with pytest.raises(MemoryValueError, match="refers to itself") as err:
        ep.record(TOOL_CALL, "t", args=loop)
    assert "\n" not in str(err.value) and ep.pending == 0


def test_events_recorded_by_many_threads_during_flushes_land_exactly_once(db):
    ep = Episodic(db, session="threads")
    stop = threading.Event()

    def write(n: int) -> None:
        for i in range(5_000):
            ep.record(TOOL_CALL, "t", writer=n, seq=i)

    def fence_repeatedly() -> None:
        while not stop.is_set():
            ep.fence()

    fencer = threading.Thread(target=fence_repeatedly)
    fencer.start()
    writers = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    stop.set()
    fencer.join()
    ep.fence()
    assert run_sql(db, """SELECT count(*), count(DISTINCT id), count(DISTINCT (data->>'writer', data->>'seq'))
                          FROM events WHERE session = 'threads'""").rows == [[20_000, 20_000, 20_000]]
    assert ep.pending == 0


def test_bad_events_fail_in_the_caller_and_append_nothing(db):
    ep = Episodic(db)
    for data in ({"x": object()}, {"x": math.inf}, {"x": {1, 2}}):
        with pytest.raises(MemoryValueError) as err:
            ep.record(TOOL_CALL, "t", **data)
        assert "\n" not in str(err.value)
    with pytest.raises(MemoryValueError, match="type must be a non-empty string"):
        ep.record("")
    assert ep.pending == 0


def test_a_retried_batch_is_applied_once(db):
    blob = '{"i":"e1","t":1,"y":"x"}\n{"i":"e2","t":2,"y":"x"}'
    assert db.call(append_events, "batch-1", "s", "", blob, 2) == 2
    assert db.call(append_events, "batch-1", "s", "", blob, 2) == 0
    assert _count(db, "session = 's'") == 2


def test_a_failed_flush_keeps_its_batch_id_and_lands_exactly_once(paths):
    first = Database(paths)
    ep = Episodic(first, session="s")
    flusher().unregister(ep)  # only fences flush: the test decides when
    for i in range(10):
        ep.record(TOOL_CALL, "t", seq=i)
    first.close()  # the store goes away under the buffer
    with pytest.raises(Exception):
        ep.fence()
    assert ep.pending == 10
    with Database(paths) as second:
        ep.db = second
        ep.fence()
        ep.fence()
        assert _count(second, "session = 's'") == 10 and ep.pending == 0


def test_background_flush_runs_without_a_fence(db):
    ep = Episodic(db, session="bg")
    ep.record(TOOL_CALL, "t")
    deadline = time.monotonic() + 5
    while _count(db, "session = 'bg'") == 0:
        assert time.monotonic() < deadline, "no background flush"
        time.sleep(0.02)


def test_readers_see_whole_batches_only(db):
    ep = Episodic(db, session="snap")
    flusher().unregister(ep)  # only fences flush, 500 events each
    stop = threading.Event()
    seen: list[int] = []

    def read() -> None:
        while not stop.is_set():
            seen.append(_count(db, "session = 'snap'"))

    reader = threading.Thread(target=read)
    reader.start()
    for _ in range(30):
        for i in range(500):
            ep.record(TOOL_CALL, "t", i=i)
        ep.fence()
    stop.set()
    reader.join()
    assert seen and all(n % 500 == 0 for n in seen)  # never half a batch
    assert _count(db, "session = 'snap'") == 15_000


def test_events_are_indexed_by_time_and_session(db):
    indexes = {r[0] for r in run_sql(db, "SELECT index_name FROM duckdb_indexes() WHERE table_name = 'events'").rows}
    assert {"idx_events_ts", "idx_events_session"} <= indexes


def test_text_duckdb_cannot_store_is_refused_up_front_so_no_batch_is_poisoned(db):
    ep = Episodic(db, session="u")
    with pytest.raises(MemoryValueError, match="not valid Unicode"):
        ep.record(TOOL_CALL, "t", text="half a pair \ud800")
    with pytest.raises(MemoryValueError, match="not valid Unicode"):
        ep.record(TOOL_CALL, "bad \udfff name")
    with pytest.raises(MemoryValueError, match="session must be"):
        Episodic(db, session="s\ud800")
    ep.record(TOOL_CALL, "t", text="emoji 😀 and nul \x00 are fine")
    ep.fence()
    assert [e["data"]["text"] for e in ep.query(session="u")] == ["emoji 😀 and nul \x00 are fine"]


def test_typed_columns_refuse_wrong_types_instead_of_storing_null(db):
    ep = Episodic(db)
    for field, bad in (("step", "3"), ("tokens_in", 1.5), ("tokens_out", True), ("duration_ms", "fast"),
                       ("cost_usd", "free")):
        with pytest.raises(MemoryValueError, match=f"episodic {field} must be a number"):
            ep.record(MODEL_CALL, "m", **{field: bad})
    ep.record(MODEL_CALL, "m", step=2, tokens_in=10, tokens_out=3, duration_ms=12, cost_usd=0.5)
    assert ep.pending == 1


def test_retry_records_are_pruned_after_a_day_and_only_then(paths):
    """Batch ids and LTM tombstones exist for retries, which come within seconds: the next owner
    drops those older than a day as it opens the database, and keeps the rest and every event."""
    import duckdb

    from workstation.memory.ltm import LTM
    from workstation.store.schema import RETRY_RECORDS_KEPT_S

    blob = '{"i":"e1","t":1,"y":"tool_call","n":"x"}'
    with Database(paths) as db:
        assert db.call(append_events, "batch-old", "s", "", blob, 1) == 1
        assert db.call(append_events, "batch-new", "s", "", blob.replace("e1", "e2"), 1) == 1
        ltm = LTM(db, "me")
        ltm.set("gone-long-ago", 1)
        ltm.set("gone-just-now", 1)
        ltm.set("kept", 1)
        ltm.fence()
        ltm.delete("gone-long-ago")
        ltm.delete("gone-just-now")
        ltm.fence()
    two_days_us = 2 * RETRY_RECORDS_KEPT_S * 1_000_000
    with duckdb.connect(str(paths.memory_db)) as con:  # no owner now: age two records by two days
        con.execute("UPDATE event_batches SET applied_at = applied_at - to_microseconds(?) WHERE id = 'batch-old'",
                    [two_days_us])
        con.execute("UPDATE ltm SET stamp = stamp - ? WHERE key IN ('gone-long-ago', 'kept')",
                    [two_days_us * 1000])
    with Database(paths) as db:
        assert db.acquire_ownership()  # opening prunes
    with duckdb.connect(str(paths.memory_db)) as con:
        assert [r[0] for r in con.execute("SELECT id FROM event_batches ORDER BY id").fetchall()] == ["batch-new"]
        assert [r[0] for r in con.execute("SELECT key FROM ltm ORDER BY key").fetchall()] == \
            ["gone-just-now", "kept"]  # an old live value stays: only old tombstones go
        assert con.execute("SELECT count(*) FROM events").fetchone()[0] == 2
