"""Many processes on one workspace: owner election, hand-off, crashes, the three-process run.

Run as a script (`python tests/test_multiprocess.py ROLE ...`) this file is the
worker the tests start as separate OS processes.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # when run as a worker script
    sys.path.insert(0, str(ROOT))

from workstation.errors import StoreError  # noqa: E402
from workstation.paths import Paths  # noqa: E402
from workstation.store import Database  # noqa: E402
from workstation.store.broker import RemoteError, _error_reply, _recv, ping  # noqa: E402

WORKSTATION = str(Path(sys.executable).with_name("workstation"))


# ---------------------------------------------------------------- workers

def worker(root: str, name: str, seconds: float, others: list[str], own: bool) -> None:
    """Write LTM keys and events, fence, and check the others' fenced writes; print a JSON summary."""
    from workstation.memory import Memory
    from workstation.memory.episodic import TOOL_CALL

    db = Database(Paths.for_root(root))
    if own:
        assert db.acquire_ownership(), "expected to become the owner"
        print("owner", flush=True)
    mem = Memory(db, session=name, flow="stress", record_lookups=())
    checks = written = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for _ in range(25):
            mem.umem("ltm", f"{name}/{written}", written, namespace="stress")
            mem.record(TOOL_CALL, "stress", ok=True, proc=name, seq=written)
            written += 1
        mem.fence("ltm")
        mem.fence("episodic")
        mem.umem("ltm", f"progress/{name}", written, namespace="stress")
        mem.fence("ltm")
        print(f"fenced {written}", flush=True)
        for other in others:  # every write another process fenced must be visible now
            seen = mem.qmem("ltm", f"progress/{other}", namespace="stress", default=0)
            if seen:
                assert mem.qmem("ltm", f"{other}/{seen - 1}", namespace="stress") == seen - 1
                checks += 1
    mem.umem("ltm", f"done/{name}", True, namespace="stress")
    mem.fence("ltm")
    is_owner = db.is_owner
    if own:  # keep owning until the others are done, so they finish as clients
        waited = time.monotonic() + 60
        while time.monotonic() < waited and not all(
                mem.qmem("ltm", f"done/{o}", namespace="stress", default=False) for o in others):
            time.sleep(0.05)
    mem.close()
    print(json.dumps({"name": name, "written": written, "checks": checks, "owner": is_owner}), flush=True)
    db.close()


def serve(root: str, seconds: float, grace: float | None = None) -> None:
    """Own the workspace and serve it for a while (the process tests kill or let exit)."""
    from workstation.store import broker

    if grace is not None:
        broker.CLOSE_GRACE_S = grace
    db = Database(Paths.for_root(root))
    assert db.acquire_ownership()
    print("owner", flush=True)
    time.sleep(seconds)
    db.close()


def quiet_exit(root: str) -> None:
    """Own, serve calls from threads, and exit WITHOUT close(): atexit must hand over quietly."""
    from workstation.memory import Memory

    db = Database(Paths.for_root(root))
    assert db.acquire_ownership()
    mem = Memory(db, session="quiet")
    mem.umem("ltm", "left-behind", "unfenced but flushed at exit")
    thread = threading.Thread(target=lambda: [db.call(ping) for _ in range(50)])
    thread.start()
    thread.join()
    print("owner", flush=True)
    time.sleep(0.5)


# ---------------------------------------------------------------- helpers

def _spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)


def _wait_line(proc: subprocess.Popen, expected: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.strip() == expected:
            return
        if not line and proc.poll() is not None:
            raise AssertionError(f"worker exited early: {proc.stderr.read()}")
    raise AssertionError(f"worker never printed {expected!r}")


def _workspace(tmp_path: Path) -> Paths:
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    return Paths.for_root(root)


def _verify(paths: Paths, expected: dict[str, int]) -> None:
    """Every process's LTM keys and events are there exactly once."""
    from workstation.memory import reflect

    with Database(paths) as db:
        for name, written in expected.items():
            counts = reflect.run_sql(db, f"""
                SELECT count(*), count(DISTINCT data->>'seq'), min((data->>'seq')::INT), max((data->>'seq')::INT)
                FROM events WHERE session = '{name}' AND type = 'tool_call'""").rows[0]
            assert counts == [written, written, 0, written - 1], (name, counts)
            keys = reflect.run_sql(db, f"""
                SELECT count(*), count(*) FILTER (value::INT = split_part(key, '/', 2)::INT)
                FROM ltm_entries WHERE namespace = 'stress' AND key LIKE '{name}/%'""").rows[0]
            assert keys == [written, written], (name, keys)


# ---------------------------------------------------------------- the scenarios

def test_three_processes_share_one_workspace(tmp_path):
    paths = _workspace(tmp_path)
    names = ["p0", "p1", "p2"]
    others = {n: ",".join(o for o in names if o != n) for n in names}
    procs = [_spawn("worker", str(paths.root), "p0", "3", others["p0"], "own")]
    _wait_line(procs[0], "owner")  # p0 holds ownership; the others are clients from their first call
    procs += [_spawn("worker", str(paths.root), n, "3", others[n], "") for n in names[1:]]
    cli_runs = []
    while any(p.poll() is None for p in procs[1:]):  # the real CLI joins in meanwhile
        for args in (["memory", "set", f"cli/{len(cli_runs)}", str(len(cli_runs))],
                     ["memory", "get", "progress/p1", "-n", "stress", "--json"],
                     ["reflect", "sessions", "--json"]):
            run = subprocess.run([WORKSTATION, "-C", str(paths.root), *args], capture_output=True, text=True)
            assert (run.returncode, run.stderr) == (0, "") or "error: no ltm key" in run.stderr, run.stderr
            cli_runs.append(run)
    summaries = {}
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and err == "", err  # no error, no warning, no lock message
        summary = json.loads(out.strip().splitlines()[-1])
        summaries[summary["name"]] = summary
    assert summaries["p0"]["owner"] and not summaries["p1"]["owner"] and not summaries["p2"]["owner"]
    assert all(s["checks"] > 0 for s in summaries.values()), summaries  # each saw the others' fences
    assert len(cli_runs) >= 3
    _verify(paths, {n: s["written"] for n, s in summaries.items()})
    from workstation.memory import Memory

    with Database(paths) as db:
        mem = Memory(db, record_lookups=())
        for i, run in enumerate(cli_runs[0::3]):
            assert run.returncode == 0 and mem.qmem("ltm", f"cli/{i * 3}") == i * 3


def test_kill_9_of_the_owner_loses_no_fenced_data_and_wedges_nobody(tmp_path):
    paths = _workspace(tmp_path)
    owner = _spawn("worker", str(paths.root), "victim", "30", "", "own")
    _wait_line(owner, "owner")
    clients = [_spawn("worker", str(paths.root), n, "4", "victim", "") for n in ("c1", "c2")]
    fenced = 0
    deadline = time.monotonic() + 30
    while fenced < 300 and time.monotonic() < deadline:  # let it work, then kill it mid-run
        line = owner.stdout.readline()
        if line.startswith("fenced "):
            fenced = int(line.split()[1])
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait()
    for line in owner.stdout.read().splitlines():  # fences reported before it died
        if line.startswith("fenced "):
            fenced = int(line.split()[1])
    assert fenced >= 300
    summaries = {}
    for proc in clients:
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 0 and err == "", err
        summaries[json.loads(out.strip().splitlines()[-1])["name"]] = json.loads(out.strip().splitlines()[-1])
    assert any(s["owner"] for s in summaries.values())  # one of them took over
    from workstation.memory import reflect

    with Database(paths) as db:
        (got,) = reflect.run_sql(db, """SELECT count(*) FROM ltm_entries WHERE namespace = 'stress'
                                        AND key LIKE 'victim/%' AND split_part(key, '/', 2)::INT < ?""".replace(
            "?", str(fenced))).rows[0]
        assert got == fenced  # every write the victim fenced survived the kill
        (events,) = reflect.run_sql(db, f"""SELECT count(DISTINCT data->>'seq') FROM events
                                            WHERE session = 'victim' AND (data->>'seq')::INT < {fenced}""").rows[0]
        assert events == fenced
    _verify(paths, {n: s["written"] for n, s in summaries.items()})


# ---------------------------------------------------------------- election and hand-off

def test_a_client_waits_while_the_owner_is_starting_up(tmp_path):
    paths = _workspace(tmp_path).ensure()
    fd = os.open(paths.owner_lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # "an owner mid-startup": lock held, no socket yet
    result: dict = {}

    def client() -> None:
        try:
            with Database(paths, connect_timeout_s=20) as db:
                result["pid"] = db.call(ping)
        except Exception as err:  # reported to the test below
            result["error"] = err

    thread = threading.Thread(target=client)
    started = time.monotonic()
    thread.start()
    time.sleep(0.6)
    assert thread.is_alive() and not result  # still waiting, no error shown
    os.close(fd)  # the "starting owner" gives up: the waiting client takes over
    thread.join(20)
    assert result == {"pid": os.getpid()}
    assert time.monotonic() - started >= 0.6


def test_no_owner_in_time_is_a_one_line_error(tmp_path):
    paths = _workspace(tmp_path).ensure()
    fd = os.open(paths.owner_lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with Database(paths, connect_timeout_s=0.3) as db:
            try:
                db.call(ping)
            except StoreError as err:
                message = str(err)
            else:
                raise AssertionError("expected a StoreError")
    finally:
        os.close(fd)
    assert "no process could open the workspace database" in message and "\n" not in message


def test_clean_owner_exit_hands_over_to_a_client(tmp_path):
    paths = _workspace(tmp_path)
    owner = _spawn("serve", str(paths.root), "1.5")
    _wait_line(owner, "owner")
    with Database(paths) as db:
        assert db.call(ping) == owner.pid and not db.is_owner
        owner.wait(20)
        assert owner.returncode == 0, owner.stderr.read()
        assert db.call(ping) == os.getpid() and db.is_owner  # the idle socket saw EOF; we took over


def test_a_call_in_flight_when_the_owner_is_killed_is_retried(tmp_path):
    from workstation.memory import reflect

    paths = _workspace(tmp_path)
    owner = _spawn("serve", str(paths.root), "60")
    _wait_line(owner, "owner")
    killer = threading.Timer(0.4, os.kill, (owner.pid, signal.SIGKILL))
    with Database(paths) as db:
        started = time.monotonic()
        killer.start()
        # long enough (seconds) that the kill at 0.4 s always lands while the owner is still summing
        result = reflect.run_sql(db, "SELECT sum(i) FROM range(3000000000) t(i)", timeout_s=120)
        assert result.rows == [[3000000000 * 2999999999 // 2]]
        assert db.is_owner and owner.wait(5) == -signal.SIGKILL
        assert time.monotonic() - started > 0.4


SLOW_SUM = "SELECT sum(i) FROM range(3000000000) t(i)"  # seconds even on an idle machine: still running when asked to
SLOW_SUM_RESULT = [[3000000000 * 2999999999 // 2]]


def test_a_closing_owner_lets_a_call_in_flight_finish_and_answer(tmp_path):
    from workstation.memory import reflect

    paths = _workspace(tmp_path)
    owner = _spawn("serve", str(paths.root), "0.3", "120")  # closes 0.3 s in, with a long grace
    _wait_line(owner, "owner")
    with Database(paths) as db:
        assert reflect.run_sql(db, SLOW_SUM, timeout_s=120).rows == SLOW_SUM_RESULT
        assert not db.is_owner  # answered by the closing owner itself
        owner.wait(60)
        assert db.call(ping) == os.getpid()  # then handed over


def test_a_call_outlasting_the_close_grace_is_retried_on_the_next_owner(tmp_path):
    from workstation.memory import reflect

    paths = _workspace(tmp_path)
    owner = _spawn("serve", str(paths.root), "0.3", "0.1")  # closes 0.3 s in, interrupts after 0.1 s
    _wait_line(owner, "owner")
    with Database(paths) as db:
        assert reflect.run_sql(db, SLOW_SUM, timeout_s=120).rows == SLOW_SUM_RESULT  # not an interrupt error
        assert db.is_owner  # the interrupted call ran again here
    assert owner.wait(60) == 0


def test_a_stopped_owner_fails_calls_with_how_to_resume_it(tmp_path):
    """An owner stopped by ctrl+z answers nothing: its clients say so instead of hanging; SIGCONT heals."""
    from workstation.store import broker

    paths = _workspace(tmp_path)
    owner = _spawn("serve", str(paths.root), "60")
    _wait_line(owner, "owner")
    try:
        with Database(paths) as db:
            assert db.call(ping) == owner.pid
            os.kill(owner.pid, signal.SIGSTOP)
            while not broker._is_stopped(owner.pid):  # the stop lands a moment after kill() returns
                time.sleep(0.01)
            started = time.monotonic()
            try:
                db.call(ping)
            except StoreError as err:
                message = str(err)
            else:
                raise AssertionError("a call to a stopped owner returned")
            waited = time.monotonic() - started
            assert f"is stopped (pid {owner.pid}" in message and f"kill -CONT {owner.pid}" in message
            assert broker.OWNER_STOPPED_S <= waited < broker.CONNECT_TIMEOUT_S  # neither eager nor hung
            os.kill(owner.pid, signal.SIGCONT)
            assert db.call(ping) == owner.pid  # the same owner, resumed
    finally:
        os.kill(owner.pid, signal.SIGCONT)
        owner.kill()
        owner.wait()


def test_exit_without_close_hands_over_quietly_and_keeps_buffered_writes(tmp_path):
    paths = _workspace(tmp_path)
    proc = _spawn("quiet_exit", str(paths.root))
    _wait_line(proc, "owner")
    with Database(paths) as db:
        assert db.call(ping) == proc.pid
        out, err = proc.communicate(timeout=20)
        assert proc.returncode == 0
        assert err == ""  # no tracebacks, no "nanobind: leaked" noise
        from workstation.memory import Memory

        assert Memory(db, record_lookups=()).qmem("ltm", "left-behind") == "unfenced but flushed at exit"


def test_the_socket_is_private_to_its_user(tmp_path):
    paths = _workspace(tmp_path)
    with Database(paths) as db:
        assert db.acquire_ownership()
        mode = paths.owner_socket.stat().st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
    assert not paths.owner_socket.exists()  # removed on close


def test_a_forked_child_becomes_a_client_not_a_second_owner(tmp_path):
    paths = _workspace(tmp_path)
    with Database(paths) as db:
        assert db.acquire_ownership()
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: must be served by the parent, never touch its DuckDB
            try:
                answer = json.dumps([db.is_owner, db.call(ping)])
            except BaseException as err:
                answer = json.dumps(["error", repr(err)])
            os.write(write_end, answer.encode())
            os._exit(0)
        os.close(write_end)
        _, status = os.waitpid(pid, 0)
        answer = json.loads(os.read(read_end, 4096))
        os.close(read_end)
        assert answer == [False, os.getpid()] and status == 0
        assert db.call(ping) == os.getpid()  # the parent still owns and serves


def test_errors_travel_back_and_unpicklable_ones_become_remote_errors():
    import socket as socketlib

    class Unpicklable(Exception):
        def __init__(self, a, b):  # pickle re-creates exceptions from .args: this one cannot be
            super().__init__(f"{a}/{b}")

    for err, expected_type, expected_text in ((Unpicklable(1, 2), RemoteError, "Unpicklable: 1/2"),
                                              (StoreError("plain"), StoreError, "plain")):
        left, right = socketlib.socketpair()
        left.sendall(_error_reply(err))
        status, value = _recv(right)
        left.close()
        right.close()
        assert status == "err" and type(value) is expected_type and str(value) == expected_text


def test_unpicklable_arguments_fail_before_reaching_the_owner(tmp_path):
    paths = _workspace(tmp_path)
    owner = _spawn("serve", str(paths.root), "10")
    _wait_line(owner, "owner")
    try:
        with Database(paths) as db:
            try:
                db.call(ping, lambda: None)
            except Exception as err:  # pickle's own error, raised in the caller
                assert "pickle" in type(err).__name__.lower() or "pickle" in str(err).lower()
            else:
                raise AssertionError("expected a pickling error")
            assert db.call(ping) == owner.pid  # the connection is still usable
    finally:
        owner.kill()
        owner.wait()


def test_non_workstation_functions_are_refused(tmp_path):
    with Database(_workspace(tmp_path)) as db:
        try:
            db.call(os.getpid)
        except ValueError as err:
            assert "module-level workstation function" in str(err)
        else:
            raise AssertionError("expected ValueError")


if __name__ == "__main__":
    role, *rest = sys.argv[1:]
    if role == "worker":
        root, name, seconds, others, own = rest
        worker(root, name, float(seconds), [o for o in others.split(",") if o], own == "own")
    elif role == "serve":
        serve(rest[0], float(rest[1]), float(rest[2]) if len(rest) > 2 else None)
    elif role == "quiet_exit":
        quiet_exit(rest[0])
    else:
        raise SystemExit(f"unknown role {role}")
