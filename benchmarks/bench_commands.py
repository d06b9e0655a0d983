"""Commands as a user runs them: a fresh process each time (interpreter start, imports, config, store
opening, the query, printing, exit), median of --runs, with the CPU time (user + sys) beside the
wall time, since other engineers share the machine. Prints what it measured beside the target.

    python benchmarks/bench_commands.py --index PATH            # warm `workstation index` (issue 9)
    python benchmarks/bench_commands.py --history WORKSPACE     # usage and search (issue 13)

--index copies PATH to a temporary folder (its .git and .workstation left behind), indexes it once,
then times `workstation index` with nothing changed (target < 0.4 s on sympy's tree).
--history times `reflect usage --json`, `session search WORD --json` and a search that finds nothing
over a workspace that already holds imported history (`benchmarks/bench_import.py --keep` leaves one
in DIR/ws; target < 1 s each): each command alone (it opens the store: DuckDB reads start cold),
then while this process holds the store open, as the app or the sidecar does (the command is a
client; its CPU figure adds the owner's share).
The processes run with bytecode caching on (PYTHONDONTWRITEBYTECODE dropped), as an installed
package runs: without its cache every run compiles workstation's modules again (~0.1 s).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import results  # benchmarks/results.py, beside this script

REPO = Path(__file__).resolve().parents[1]
INDEX_TARGET_S = 0.4
QUERY_TARGET_S = 1.0


def _env(home: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(REPO)
    if home is not None:
        env["WORKSTATION_HOME"] = str(home)
    return env


def run_once(args: list[str], env: dict[str, str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall s, CPU s of the process, the finished process) of `python -m workstation ARGS`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    # -P: the package comes from PYTHONPATH (this repository), never from a `workstation` folder in the
    # current directory (run from another worktree, `-m` alone would time that worktree's code)
    done = subprocess.run([sys.executable, "-P", "-m", "workstation", *args], env=env, capture_output=True,
                          text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done


def timed_command(args: list[str], env: dict[str, str], runs: int, check=None) -> tuple[float, float]:
    """Median wall and CPU seconds over `runs` fresh processes, after one untimed run (bytecode
    cache, page cache); `check(done)` returns a complaint, or None when the output is right."""
    samples = []
    for attempt in range(runs + 1):
        wall, cpu, done = run_once(args, env)
        problem = f"exit {done.returncode}" if done.returncode else (check(done) if check else None)
        if problem:
            raise SystemExit(f"`workstation {' '.join(args)}` went wrong ({problem}):\n{done.stdout[-500:]}"
                             f"{done.stderr[-500:]}")
        if attempt:
            samples.append((wall, cpu))
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def line(label: str, wall: float, cpu: float, target: float) -> str:
    verdict = "meets" if wall < target else "MISSES"
    return (f"   {label:<52} wall {wall * 1000:6.0f} ms  cpu {cpu * 1000:6.0f} ms   target < {target:g} s   "
            f"{verdict}   (load {os.getloadavg()[0]:.1f})")


def bench_index(path: Path, runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="ws-bench-commands-") as tmp:
        root, home = Path(tmp) / "tree", Path(tmp) / "home"
        shutil.copytree(path, root, symlinks=True, ignore=shutil.ignore_patterns(".git", ".workstation"))
        home.mkdir()
        (home / "config.toml").write_text(f'[workspace]\nstate_dir = "{Path(tmp) / "state"}"\n')
        env = _env(home)
        run_once(["-C", str(root), "index"], env)  # the cold index, untimed
        wall, cpu = timed_command(["-C", str(root), "index"], env, runs,
                                  lambda done: None if "(0 parsed" in done.stdout else "it parsed files")
        print(line("workstation index (nothing changed)", wall, cpu, INDEX_TARGET_S))
        results.add("workstation index (nothing changed)", wall, "s")


HISTORY_COMMANDS = (["reflect", "usage", "--json"], ["session", "search", "mozgoslav", "--json"],
                    ["session", "search", "no such words anywhere"])


def bench_history(workspace: Path, runs: int, with_owner: bool = True) -> None:
    """Each command alone (it opens the store itself: DuckDB's reads start cold), then, with
    `with_owner`, while this process holds the store open as the app or the sidecar would (the
    command is a client: no DuckDB of its own, the owner's caches warm)."""
    env = _env()
    for args in HISTORY_COMMANDS:
        wall, cpu = timed_command(["-C", str(workspace), *args], env, runs)
        print(line(f"workstation {' '.join(args)}", wall, cpu, QUERY_TARGET_S))
        results.add(f"workstation {' '.join(args)}", wall, "s")
    if not with_owner:
        return
    sys.path.insert(0, str(REPO))
    from workstation.paths import Paths
    from workstation.store import Database
    from workstation.store.broker import ping

    db = Database(Paths.for_root(workspace))
    try:
        db.call(ping)  # this process owns the store now
        print("   ... with the store already open in another process (the app or the sidecar running):")
        for args in HISTORY_COMMANDS:
            owner_cpu = time.process_time()
            wall, cpu = timed_command(["-C", str(workspace), *args], env, runs)
            owner_cpu = (time.process_time() - owner_cpu) / (runs + 1)  # the owner's share, per run
            print(line(f"workstation {' '.join(args)}", wall, cpu + owner_cpu, QUERY_TARGET_S))
            results.add(f"workstation {' '.join(args)}, store open elsewhere", wall, "s")
    finally:
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, help="a source tree to time warm `workstation index` on")
    parser.add_argument("--history", type=Path, help="a workspace holding imported history")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per command (median printed)")
    args = parser.parse_args()
    if not args.index and not args.history:
        parser.error("give --index PATH, --history WORKSPACE or both")
    run = results.Run("bench_commands", vars(args))
    print(f"commands as fresh processes, median of {args.runs}; {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f} at start")
    if args.index:
        bench_index(args.index, args.runs)
    if args.history:
        bench_history(args.history, args.runs)
    run.save()


if __name__ == "__main__":
    main()
