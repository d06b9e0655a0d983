"""STM: per-execution scratch, thread-safe, cleared at the end, publishable to other processes."""

from __future__ import annotations

import os
import threading

import pytest

from workstation.memory import Memory, MemoryKeyError, published_stm
from workstation.memory.stm import STM, stm_publish
from workstation.paths import Paths
from workstation.store import Database


@pytest.fixture
def db(tmp_path):
    database = Database(Paths.for_root(tmp_path))
    yield database
    database.close()


def test_get_set_delete_keys():
    stm = STM()
    marker = object()
    stm.set("a", 1)
    stm.set("obj", marker)  # any Python object: STM never leaves the process
    assert stm.get("a") == 1 and stm.get("obj") is marker
    assert stm.get("nope", "dflt") == "dflt"
    assert stm.keys() == ["a", "obj"] and stm.keys("o") == ["obj"]
    assert stm.delete("a") is True and stm.delete("a") is False
    stm.clear()
    assert len(stm) == 0


def test_concurrent_writers_and_readers_never_see_a_torn_map():
    stm = STM()
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(n: int) -> None:
        for i in range(5000):
            stm.set(f"w{n}-{i}", i)

    def reader() -> None:
        try:
            while not stop.is_set():
                stm.keys()  # iterates the map: without the lock this races "changed size during iteration"
                stm.snapshot_json()
        except BaseException as err:
            errors.append(err)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    writers = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert errors == []
    assert len(stm) == 4 * 5000


def test_router_stm_is_scoped_to_one_execution_and_cleared_at_its_end(db):
    first = Memory(db, session="s1")
    first.umem("stm", "scratch", {"partial": [1, 2]})
    assert first.qmem("stm", "scratch") == {"partial": [1, 2]}
    second = Memory(db, session="s1")  # another execution of the same session
    with pytest.raises(MemoryKeyError, match="no stm key 'scratch'"):
        second.qmem("stm", "scratch")
    assert second.qmem("stm", "scratch", default=None) is None
    first.close()
    assert len(first.stm) == 0


def test_fence_publishes_a_json_view_and_close_withdraws_it(db):
    mem = Memory(db, session="live")
    mem.umem("stm", "count", 3)
    mem.umem("stm", "thing", object())
    assert published_stm(db) == []
    mem.fence("stm")
    (snap,) = published_stm(db, "live")
    assert snap["pid"] == os.getpid() and snap["values"]["count"] == "3"
    assert snap["values"]["thing"].startswith('{"$repr": "<object object')
    assert published_stm(db, "other-session") == []
    mem.close()
    assert published_stm(db) == []


def test_snapshots_of_dead_processes_are_dropped(db):
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    db.call(stm_publish, "exec-1", "gone", "", int(dead.stdout), {"k": "1"})
    db.call(stm_publish, "exec-2", "here", "", os.getpid(), {"k": "2"})
    assert [s["session"] for s in published_stm(db)] == ["here"]
