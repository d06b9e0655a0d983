"""LTM: persistent JSON by namespace, batched writes, fences, newest-write-wins, the owner cache."""

from __future__ import annotations

import math
import time

import pytest

from workstation.memory import Memory, MemoryKeyError, MemoryValueError, ltm as ltm_mod
from workstation.memory.ltm import LTM, ltm_write, ltm_write_batch, next_stamp
from workstation.store import Database


@pytest.mark.parametrize("value", [{"a": [1, 2, {"b": None}]}, [1, "two"], "text", 42, 2.5, True, None, "ünï"])
def test_json_values_round_trip_before_and_after_fence(db, value):
    ltm = LTM(db)
    ltm.set("k", value)
    assert ltm.get("k") == value  # from this process's buffer
    ltm.fence()
    assert ltm.pending == 0
    assert LTM(db).get("k") == value  # from the store


def test_writes_are_invisible_to_other_handles_until_fenced(db):
    writer, reader = LTM(db, "w"), LTM(db, "r")
    with writer._flush_lock:  # the background flusher (every ~100 ms) skips a writer it finds flushing: on a
        writer.set("fact", 1)  # loaded machine it would otherwise send the write before the reader looks
        assert reader.get("fact", default="absent") == "absent"
    writer.fence()
    assert reader.get("fact") == 1


def test_namespaces_keep_keys_apart_and_list_filters(db):
    ltm = LTM(db)
    ltm.set("k", "in default")
    ltm.set("k", "in prefs", namespace="prefs")
    ltm.set("kk", 2, namespace="prefs")
    ltm.set("other", 3, namespace="prefs")
    assert ltm.get("k") == "in default" and ltm.get("k", "prefs") == "in prefs"
    assert [(r["namespace"], r["key"]) for r in ltm.list()] == [
        ("default", "k"), ("prefs", "k"), ("prefs", "kk"), ("prefs", "other")]
    assert [r["key"] for r in ltm.list("prefs", prefix="k")] == ["k", "kk"]
    assert [r["key"] for r in ltm.list("prefs", limit=1)] == ["k"]
    assert ltm.namespaces() == {"default": 1, "prefs": 3}


def test_bad_input_is_refused_with_one_line_and_nothing_buffered(db):
    ltm = LTM(db)
    for bad in (object(), {"x": {1, 2}}, math.nan, b"bytes"):
        with pytest.raises(MemoryValueError) as err:
            ltm.set("k", bad)
        assert "not JSON" in str(err.value) and "\n" not in str(err.value)
    for key in ("", None, 3):
        with pytest.raises(MemoryKeyError, match="non-empty string"):
            ltm.set(key, 1)
    assert ltm.pending == 0
    with pytest.raises(MemoryKeyError, match="no ltm key 'missing' in namespace 'default'"):
        ltm.get("missing")


def test_delete_leaves_a_tombstone_that_a_late_retry_cannot_undo(db):
    ltm = LTM(db, "me")
    ltm.set("k", "v")
    ltm.fence()
    old_stamp = next_stamp()
    assert ltm.delete("k") is True
    ltm.fence()
    assert ltm.delete("k") is False
    # A batch stamped before the delete, arriving late (as a retry after an owner crash would):
    db.call(ltm_write, [("default", "k", old_stamp, "me", '"resurrected?"')])
    assert ltm.get("k", default="gone") == "gone"
    assert LTM(db).get("k", default="gone") == "gone"


def test_newest_write_wins_whatever_order_batches_land_in(db):
    newer = next_stamp()
    older = newer - 1000
    db.call(ltm_write, [("default", "k", newer, "b", '"new"')])
    db.call(ltm_write, [("default", "k", older, "a", '"old"')])
    assert LTM(db).get("k") == "new"
    db.call(ltm_write, [("default", "k", newer, "b", '"new"')])  # the same batch again: harmless
    assert LTM(db).get("k") == "new"


def test_a_batch_of_new_and_existing_keys_lands_whole_and_a_retry_is_harmless(db):
    ltm = LTM(db, "w")
    for i in range(100):
        ltm.set(f"k{i}", i)
    ltm.fence()
    for i in range(50, 150):  # half update keys the table holds, half are new
        ltm.set(f"k{i}", -i)
    ltm.delete("k0")
    ltm.fence()
    expected = {f"k{i}": (i if i < 50 else -i) for i in range(1, 150)}
    assert {r["key"]: r["value"] for r in LTM(db).list()} == expected
    stale = {("default", "k1"): (1, '"stale"'), ("default", "k0"): (2, '"resurrected?"'),
             ("default", "fresh"): (next_stamp(), '"new"')}
    db.call(ltm_write_batch, "w", stale)  # older than what the table holds, except one new key
    db.call(ltm_write_batch, "w", stale)  # the same batch again, as a retry after an owner crash sends it
    assert {r["key"]: r["value"] for r in LTM(db).list()} == {**expected, "fresh": "new"}
    assert LTM(db).get("k0", default="gone") == "gone"


def test_a_cache_that_missed_a_row_is_reloaded_not_trusted(db, caplog):
    assert db.acquire_ownership()
    ltm = LTM(db, "w")
    ltm.set("seen", 1)
    ltm.fence()  # the owner cache now mirrors the table
    db._owner.con.execute("""INSERT INTO ltm (namespace, key, value, stamp, updated_at, updated_by)
                             VALUES ('default', 'behind', '"its back"', 1, now(), 'x')""")  # a row it never saw
    ltm.set("behind", "new")
    ltm.set("other", 2)
    ltm.fence()
    assert "LTM cache disagreed with the table" in caplog.text
    assert (LTM(db).get("behind"), LTM(db).get("other"), LTM(db).get("seen")) == ("new", 2, 1)


def test_cache_stays_coherent_when_it_cannot_mirror_the_whole_table(db, monkeypatch):
    monkeypatch.setattr(ltm_mod, "COMPLETE_LIMIT", 0)  # force the read-through mode
    ltm = LTM(db)
    assert ltm.get("k", default=None) is None  # caches the miss
    ltm.set("k", 1)
    ltm.fence()
    assert LTM(db).get("k") == 1  # the write invalidated the cached miss
    ltm.set("k", 2)
    ltm.fence()
    assert LTM(db).get("k") == 2


def test_values_survive_closing_and_reopening(paths):
    with Database(paths) as db:
        ltm = LTM(db)
        ltm.set("persist", {"n": 1})
        ltm.close()
    with Database(paths) as db:
        assert LTM(db).get("persist") == {"n": 1}


def test_a_large_batch_lands_completely(db):
    ltm = LTM(db)
    for i in range(30_000):  # past FLUSH_AT: the background flush joins in
        ltm.set(f"k{i}", i, namespace="bulk")
    ltm.fence()
    assert ltm.namespaces()["bulk"] == 30_000
    assert LTM(db).get("k29999", "bulk") == 29_999


def test_background_flush_makes_writes_visible_without_a_fence(db):
    writer, reader = LTM(db, "w"), LTM(db, "r")
    writer.set("soon", "there")
    deadline = time.monotonic() + 5
    while reader.get("soon", default=None) is None:
        assert time.monotonic() < deadline, "background flush never happened"
        time.sleep(0.02)
    assert writer.pending == 0


def test_router_ltm_records_hits_and_misses(db):
    mem = Memory(db, session="s")
    mem.umem("ltm", "k", "v", namespace="ns")
    assert mem.qmem("ltm", "k", namespace="ns") == "v"
    assert mem.qmem("ltm", "nope", default=0) == 0
    with pytest.raises(MemoryKeyError):
        mem.qmem("ltm", "nope")
    kinds = [(e["type"], e["name"], e["data"]) for e in mem.list("episodic")]
    assert kinds == [("memory_miss", "nope", {"tier": "ltm", "namespace": "default"}),
                     ("memory_miss", "nope", {"tier": "ltm", "namespace": "default"}),
                     ("memory_hit", "k", {"tier": "ltm", "namespace": "ns"})]


def test_text_duckdb_cannot_store_is_refused_up_front(db):
    ltm = LTM(db)
    with pytest.raises(MemoryValueError, match="not valid Unicode"):
        ltm.set("k", "lone \ud800")
    with pytest.raises(MemoryKeyError, match="not valid Unicode"):
        ltm.set("k\udfff", 1)
    ltm.set("k", "emoji 😀 and nul \x00")
    ltm.fence()
    assert LTM(db).get("k") == "emoji 😀 and nul \x00"
