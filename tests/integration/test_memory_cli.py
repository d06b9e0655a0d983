"""`workstation memory ...` and `workstation reflect ...`, and the store's bad-input handling."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workstation.paths import Paths

WORKSTATION = str(Path(sys.executable).with_name("workstation"))


@pytest.fixture
def root(tmp_path):
    return tmp_path


def _one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_set_get_list_delete_fence_ltm(cli):
    assert cli("memory", "set", "style", '{"quotes": "double"}') == (0, "stored ltm default:style\n", "")
    assert cli("memory", "set", "note", "plain words", "--string", "-n", "notes")[0] == 0
    code, out, _ = cli("memory", "get", "style", "--json")
    assert code == 0 and json.loads(out) == {"tier": "ltm", "namespace": "default", "key": "style",
                                             "value": {"quotes": "double"}}
    code, out, _ = cli("memory", "get", "note", "-n", "notes")
    assert code == 0 and json.loads(out) == "plain words"
    code, out, _ = cli("memory", "list", "--json")
    assert [(r["namespace"], r["key"], r["value"], r["updated_by"]) for r in json.loads(out)] == [
        ("default", "style", {"quotes": "double"}, "cli"), ("notes", "note", "plain words", "cli")]
    assert cli("memory", "delete", "style") == (0, "deleted ltm default:style\n", "")
    assert "no ltm key 'style'" in _one_line_error(cli("memory", "get", "style")[2])
    assert cli("memory", "fence", "--tier", "ltm") == (0, "fenced ltm\n", "")


def test_bad_input_gives_one_line_errors(cli):
    for args, expected in (
            (("memory", "set", "k", "{not json"), "value is not JSON"),
            (("memory", "set", "k", "NaN"), "not JSON"),
            (("memory", "set", "k", "[" * 5000 + "]" * 5000), "value nests too deeply to parse as JSON"),
            (("memory", "set", "k", "9" * 5000), "an integer of more than 4300 digits"),
            (("memory", "set", "k", '{"a": ' + "9" * 5000 + "}"), "an integer of more than 4300 digits"),
            (("memory", "get", "missing"), "no ltm key 'missing' in namespace 'default'"),
            (("memory", "delete", "missing"), "no ltm key 'missing'"),
            (("memory", "set", "k", "1", "--tier", "episodic"), "episodic memory is append-only"),
            (("memory", "delete", "k", "--tier", "episodic"), "episodic memory is append-only"),
            (("memory", "set", "k", "1", "--tier", "stm"), "stm belongs to a running execution"),
            (("memory", "get", "k", "--tier", "stm"), "no STM published by any running execution"),
            (("memory", "get", "nope", "--tier", "episodic"), "no episodic event with id 'nope'"),
            (("reflect", "--sql", "DROP TABLE ltm"), "read-only: DROP statements are refused"),
            (("reflect", "--sql", "SELECT x FROM nowhere"), "no table or view named 'nowhere'"),
            (("reflect", "unknown-name"), "unknown reflection 'unknown-name'")):
        code, out, err = cli(*args)
        assert code == 1 and expected in _one_line_error(err), (args, err)
    code, _, err = cli("memory", "get", "k", "--tier", "l3")
    assert code == 2 and "'l3' is not one of 'stm', 'ltm', 'episodic'" in _one_line_error(err)
    assert "see `workstation memory get --help`" in err
    code, _, err = cli("reflect", "sessions", "--sql", "SELECT 1")
    assert code == 2 and "exactly one of NAME, --sql or --list" in _one_line_error(err)


def test_reflect_list_named_and_sql(cli):
    code, out, _ = cli("reflect", "--list", "--json")
    names = [r["name"] for r in json.loads(out)]
    assert code == 0 and {"memory_by_session", "tool_errors", "decision_reuse", "context_timeline"} <= set(names)
    cli("memory", "set", "a", "1")
    code, out, _ = cli("reflect", "--sql", "SELECT key, value FROM ltm_entries", "--json")
    assert code == 0 and json.loads(out) == [{"key": "a", "value": "1"}]
    code, out, _ = cli("reflect", "tool_errors")
    assert code == 0 and "tool_errors" in out and "error_rate" in out
    code, out, err = cli("reflect", "--sql", "SELECT * FROM range(5)", "--limit", "2", "--json")
    assert code == 0 and len(json.loads(out)) == 2 and "pass --limit" in err


def test_episodic_events_are_listed(cli, root):
    from workstation.memory.episodic import Episodic
    from workstation.store import Database

    with Database(Paths.for_root(root)) as db:
        ep = Episodic(db, session="cli-test", step=4)
        event_id = ep.record("tool_call", "grep", ok=True, args={"pattern": "x"})
        ep.close()
    code, out, _ = cli("memory", "list", "--tier", "episodic", "--session", "cli-test", "--json")
    (event,) = json.loads(out)
    assert code == 0 and event["id"] == event_id and event["step"] == 4 and event["ts"].endswith("Z")
    code, out, _ = cli("memory", "get", event_id, "--tier", "episodic", "--json")
    assert code == 0 and json.loads(out)["value"]["data"] == {"args": {"pattern": "x"}}


STM_PUBLISHER = """
import sys
from workstation.paths import Paths
from workstation.store import Database
from workstation.memory import Memory
db = Database(Paths.for_root(sys.argv[1]))
mem = Memory(db, session="agent-run")
mem.umem("stm", "plan", ["read", "edit"])
mem.fence("stm")
print("published", flush=True)
sys.stdin.readline()
mem.close()
db.close()
"""


def test_stm_of_a_running_execution_is_readable_once_published(cli, root):
    proc = subprocess.Popen([sys.executable, "-c", STM_PUBLISHER, str(root)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "published"
        code, out, err = cli("memory", "get", "plan", "--tier", "stm", "--json")
        assert code == 0, err
        got = json.loads(out)
        assert (got["value"], got["session"]) == (["read", "edit"], "agent-run")
        code, out, _ = cli("memory", "list", "--tier", "stm", "--json")
        assert [(r["session"], r["key"], r["pid"]) for r in json.loads(out)] == [("agent-run", "plan", proc.pid)]
        assert "no STM published by session 'other'" in _one_line_error(
            cli("memory", "get", "plan", "--tier", "stm", "--session", "other")[2])
    finally:
        proc.communicate("done\n", timeout=30)
    assert proc.returncode == 0
    assert "no STM published" in _one_line_error(cli("memory", "get", "plan", "--tier", "stm")[2])


# ---------------------------------------------------------------- damaged and locked files

def _run(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([WORKSTATION, "-C", str(root), *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("damage", ["garbage", "half", "empty"])
def test_a_damaged_memory_store_is_a_one_line_error_and_left_untouched(root, damage):
    assert _run(root, "memory", "set", "precious", "1").returncode == 0
    memory_db = Paths.for_root(root).memory_db
    data = memory_db.read_bytes()
    broken = {"garbage": b"\x00not a database" * 1000, "half": data[: len(data) // 2], "empty": b""}[damage]
    memory_db.write_bytes(broken)
    run = _run(root, "memory", "get", "precious")
    assert run.returncode == 1 and run.stdout == ""
    line = _one_line_error(run.stderr)
    assert "memory store" in line and "left untouched" in line
    assert memory_db.read_bytes() == broken  # never silently emptied or replaced


def _store_with_history(root: Path) -> Path:
    """A memory store of a few hundred KB of LTM and events, closed cleanly."""
    from workstation.memory import Memory
    from workstation.store import Database

    paths = Paths.for_root(root)
    with Database(paths) as db:
        mem = Memory(db, session="s")
        for i in range(400):
            mem.umem("ltm", f"key{i}", {"n": i, "text": "x" * 200})
            mem.record("tool_call", "grep", args={"pattern": f"p{i}" * 40})
        mem.close()
    return paths.memory_db


def test_damage_inside_the_store_is_found_before_anything_writes_to_it(root):
    """Bytes changed in any data block (a disk error, a bad copy): DuckDB opens such a file and fails only
    when it reads that block, maybe after writing; the store is read whole first, so no command writes."""
    memory_db = _store_with_history(root)
    data = bytearray(memory_db.read_bytes())
    block, header = 262144, 12288  # DuckDB's block size and file header
    noticed = 0
    for start in range(header, len(data) - 64, block):  # the first bytes of each block's data (past its checksum)
        broken = bytearray(data)
        broken[start + 16: start + 80] = b"\xa5" * 64
        memory_db.write_bytes(bytes(broken))
        memory_db.with_name("memory.duckdb.clean").unlink(missing_ok=True)  # as after a crash
        runs = [_run(root, *args) for args in (("memory", "set", "new", "1"), ("memory", "get", "key1"),
                                             ("reflect", "sessions"))]
        failed = [run for run in runs if run.returncode != 0]
        if not failed:
            continue  # a free block: nothing of ours lived there, and writing over it is right
        noticed += 1
        for run in failed:
            assert "damaged" in run.stderr or "cannot be read" in run.stderr
            _one_line_error(run.stderr)
        assert memory_db.read_bytes() == bytes(broken), f"a store damaged at {start} was written to"
    assert noticed >= 3, "the damage was seldom noticed: the test no longer damages what the store holds"


def test_a_cleanly_closed_store_is_marked_and_the_mark_goes_while_it_is_open(root):
    from workstation.store import Database

    memory_db = _store_with_history(root)
    mark = memory_db.with_name("memory.duckdb.clean")
    assert mark.exists()
    from workstation.store.broker import ping

    with Database(Paths.for_root(root)) as db:
        db.call(ping)
        assert not mark.exists()  # a crash from here on makes the next owner read the store whole
    assert mark.exists()


def test_a_damaged_knowledge_map_is_rebuilt_with_a_warning(root):
    assert _run(root, "memory", "set", "kept", '"yes"').returncode == 0
    paths = Paths.for_root(root)
    paths.index_db.write_bytes(b"garbage" * 500)
    run = _run(root, "memory", "get", "kept")
    assert run.returncode == 0 and json.loads(run.stdout) == "yes"  # LTM untouched
    assert "knowledge map" in run.stderr and "rebuilt from the files" in run.stderr
    assert list(paths.state.glob("index.duckdb.corrupt-*"))
    assert _run(root, "memory", "get", "kept").stderr == ""  # rebuilt once, quiet afterwards


def test_a_store_held_by_another_program_is_named_not_a_lock_trace(root):
    assert _run(root, "memory", "set", "k", "1").returncode == 0
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
                               "print('holding', flush=True); sys.stdin.readline()",
                               str(Paths.for_root(root).memory_db)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        started = time.monotonic()
        run = _run(root, "memory", "get", "k")
        assert run.returncode == 1 and time.monotonic() - started < 60
        assert "held by a program outside workstation" in _one_line_error(run.stderr)
    finally:
        holder.communicate("\n", timeout=30)
