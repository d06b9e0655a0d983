"""The one memory API: tiers, refusals, per-tier locks, end of execution, decisions."""

from __future__ import annotations

import threading
import time

import pytest

from workstation.memory import Memory, MemoryKeyError, MemoryTierError, MemoryValueError
from workstation.memory.decisions import decision_insert
from workstation.memory.episodic import TOOL_CALL
from workstation.memory.ltm import LTM
from workstation.memory.reflect import run_sql
from workstation.store import Database


def test_unknown_tiers_are_one_line_errors(db):
    mem = Memory(db)
    for call in (lambda: mem.qmem("disk", "k"), lambda: mem.umem("STM", "k", 1), lambda: mem.fence("cache"),
                 lambda: mem.delete("", "k"), lambda: mem.list("l2")):
        with pytest.raises(MemoryTierError) as err:
            call()
        assert "unknown memory tier" in str(err.value) and "stm, ltm, episodic" in str(err.value)


def test_episodic_is_append_only_through_the_router(db):
    mem = Memory(db, session="s")
    with pytest.raises(MemoryTierError, match="append-only: umem"):
        mem.umem("episodic", "k", 1)
    with pytest.raises(MemoryTierError, match="append-only: delete"):
        mem.delete("episodic", "k")
    event_id = mem.record(TOOL_CALL, "grep", ok=True)
    assert mem.qmem("episodic", event_id)["name"] == "grep"
    with pytest.raises(MemoryKeyError, match="no episodic event"):
        mem.qmem("episodic", "missing")


def test_a_slow_ltm_write_never_blocks_stm(db):
    assert db.acquire_ownership()
    mem = Memory(db, session="s")
    store_lock = db._owner.write_lock  # the real lock a long write transaction holds
    store_lock.acquire()  # another writer is mid-transaction: every store write now waits
    try:
        mem.umem("ltm", "slow", "value")
        mem.record(TOOL_CALL, "t")
        ltm_fence = threading.Thread(target=mem.fence, args=("ltm",))
        episodic_fence = threading.Thread(target=mem.fence, args=("episodic",))
        ltm_fence.start()
        episodic_fence.start()
        deadline = time.monotonic() + 5
        while not mem.ltm._inflight:  # the batch is on its way into the store, and stuck there
            assert time.monotonic() < deadline
            time.sleep(0.001)
        worst = 0.0
        for i in range(20_000):
            started = time.perf_counter()
            mem.umem("stm", "k", i)
            assert mem.qmem("stm", "k") == i
            worst = max(worst, time.perf_counter() - started)
        assert ltm_fence.is_alive() and episodic_fence.is_alive()  # the writes are still blocked...
        assert worst < 0.5  # ...while 20,000 STM reads and writes went through (no deadlock, no waiting)
        assert mem.qmem("ltm", "slow") == "value"  # and LTM reads its own in-flight write without waiting
    finally:
        store_lock.release()
    ltm_fence.join(10)
    episodic_fence.join(10)
    assert not ltm_fence.is_alive() and not episodic_fence.is_alive()
    assert LTM(db).get("slow") == "value"


def test_close_ends_the_execution_durably(paths):
    db = Database(paths)
    mem = Memory(db, session="end")
    mem.umem("stm", "scratch", 1)
    mem.umem("ltm", "kept", 2)
    mem.record(TOOL_CALL, "t")
    db.close()  # closing the database closes its executions first (a close hook)
    assert len(mem.stm) == 0
    with Database(paths) as again:
        assert LTM(again).get("kept") == 2
        assert run_sql(again, "SELECT count(*) FROM events WHERE session = 'end'").rows == [[1]]


def test_fence_without_a_tier_fences_all(db):
    mem = Memory(db, session="all")
    mem.umem("ltm", "k", 1)
    mem.record(TOOL_CALL, "t")
    mem.fence()
    assert mem.ltm.pending == 0 and mem.episodic.pending == 0


def test_decisions_are_logged_listed_and_reused(db):
    mem = Memory(db, session="s")
    mem.step = 1
    first = mem.log_decision("name handlers on_<event>", "matches Textual", ["app.py", "pane.py"])
    mem.step = 2
    second = mem.log_decision("errors are one line", files=["errors.py"])
    mem.mark_decision_reused(first, step=3)
    mem.mark_decision_reused(first, step=4)
    listed = mem.decisions()
    assert [(d.id, d.step, d.reuse_count, d.files) for d in listed] == [
        (first, 1, 2, ["app.py", "pane.py"]), (second, 2, 0, ["errors.py"])]
    assert listed[0].reasoning == "matches Textual" and listed[0].last_reused is not None
    assert [d.id for d in mem.decisions(file="errors.py")] == [second]
    assert [d.id for d in mem.decisions(step=1)] == [first]
    types = [e["type"] for e in mem.list("episodic", types=["decision_logged", "decision_reused"])]
    assert sorted(types) == ["decision_logged", "decision_logged", "decision_reused", "decision_reused"]
    with pytest.raises(MemoryKeyError, match="no decision"):
        mem.mark_decision_reused("d-unknown")
    with pytest.raises(MemoryValueError, match="non-empty"):
        mem.log_decision("  ")


def test_a_retried_decision_write_is_stored_once(db):
    args = ("d1", 1_000_000, "s", "", 1, "decide", "why", ["a.py"])
    db.call(decision_insert, *args)
    db.call(decision_insert, *args)
    assert run_sql(db, "SELECT count(*) FROM decisions").rows == [[1]]


def test_importing_memory_and_its_cli_does_not_load_duckdb():
    import subprocess
    import sys

    code = ("import sys, workstation.memory, workstation.memory.reflect, workstation.cli.memory_cmds; "
            "print('duckdb' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
