"""Import benchmark: prints measured figures beside their targets, asserts nothing.

    .venv/bin/python benchmarks/bench_import.py [--gb 1.0] [--dir /tmp/ws-bench-import] [--keep]

1. Makes ~GB of source logs by repeating the samples in ../shared/transcripts (every Claude Code
   and Codex repeat gets a fresh session id, so each repeat is a session of its own; the other
   formats are told apart by their paths) under DIR/src.
2. Imports them all into a fresh workspace DIR/ws as `workstation import FOLDER` does (bulk.py:
   worker processes, one per core up to 4; --workers 1 for one process), and prints the
   throughput in MB/s of source logs (target: at least 20 MB/s). First the same for a history
   --small-gb in size (default 1/13 of --gb: 1,000 against 13,000 sessions' worth) into a workspace
   of its own, and the ratio of the two throughputs (linear: within 10%; 0 skips it).
3. Times `reflect usage` (each grouping) and `session search` (a rare word, a common one, one
   that is nowhere) over that history, in this process and as the command line a user runs
   (bench_commands.py: fresh processes, median wall and CPU time; targets: under 1 s once imported).

On a 2-core machine it writes ~3 GB under DIR (sources, session logs, the store, the search heap) and takes
~5-10 minutes for 1 GB; DIR is removed afterwards unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared" / "transcripts"
IMPORT_TARGET_MBS = 20.0
QUERY_TARGET_S = 1.0
_SESSION_ID = re.compile(r'("sessionId":\s*")([^"]+)(")')


def generate(out: Path, target_bytes: int) -> tuple[int, int]:
    """Repeat the samples under `out` until they hold `target_bytes`; returns (files, bytes)."""
    samples = [p for p in sorted(SHARED.rglob("*")) if p.is_file() and p.name != "SOURCES.md"]
    if not samples:
        sys.exit(f"no samples in {SHARED}")
    texts = {p: p.read_text(encoding="utf-8") for p in samples}
    files = total = repeat = 0
    while total < target_bytes:
        folder = out / f"r{repeat:05d}"
        folder.mkdir(parents=True)
        for path, text in texts.items():
            if path.parent.name == "claude-code":
                fresh = str(uuid.uuid4())
                text = _SESSION_ID.sub(lambda m: m.group(1) + fresh + m.group(3), text)
            elif path.parent.name == "codex":
                old = json.loads(text.split("\n", 1)[0])["payload"]["id"]
                text = text.replace(old, str(uuid.uuid4()))
            data = text.encode("utf-8")
            (folder / path.name).write_bytes(data)
            if not path.name.endswith(".aider.input.history"):  # read beside the chat history, not imported
                files += 1
                total += len(data)
        repeat += 1
    return files, total


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    started = time.perf_counter()
    value = fn(*args, **kwargs)
    return time.perf_counter() - started, value


def cpu_seconds() -> tuple[float, float]:
    """User and system CPU of this process (the store's threads included) and of its finished children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def verdict(seconds: float, target: float) -> str:
    return "meets" if seconds < target else "MISSES"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gb", type=float, default=1.0, help="gigabytes of source logs to import")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/ws-bench-import"))
    parser.add_argument("--keep", action="store_true", help="keep DIR afterwards (to query it again)")
    parser.add_argument("--workers", type=int, default=None, help="import processes (default: one per core, up to 4)")
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per command line timed (median)")
    parser.add_argument("--small-gb", type=float, default=None,
                        help="the smaller history imported first (default --gb / 13; 0: none)")
    args = parser.parse_args()
    started = time.perf_counter()
    load = os.getloadavg()[0]
    print(f"import benchmark: {args.gb:g} GB of sources, {os.cpu_count()} cores, load average {load:.1f} at start")

    from workstation.importers.bulk import import_many
    from workstation.importers.engine import Importer
    from workstation.costs.usage import usage
    from workstation.paths import Paths
    from workstation.sessions.catalog import search
    from workstation.store import Database

    import results
    from bench_commands import bench_history  # beside this script

    run = results.Run("bench_import", {k: v for k, v in vars(args).items() if k not in ("dir", "keep")})

    if args.dir.exists():
        shutil.rmtree(args.dir)
    src, ws = args.dir / "src", args.dir / "ws"
    ws.mkdir(parents=True)
    seconds, (files, total) = timed(generate, src, int(args.gb * 1e9))
    print(f"\n1. sources: {files:,} files, {total / 1e6:,.0f} MB, written in {seconds:.0f} s")

    small_gb = args.gb / 13 if args.small_gb is None else args.small_gb
    small_rate = None
    if small_gb > 0:
        small_src, small_ws = args.dir / "src-small", args.dir / "ws-small"
        small_ws.mkdir()
        _, small_total = generate(small_src, int(small_gb * 1e9))
        small_paths = Paths.for_root(small_ws)
        small_db = Database(small_paths)
        try:
            t0 = time.perf_counter()
            import_many(Importer(small_paths, small_db), [(p, None) for p in sorted(small_src.rglob("*")) if
                        p.is_file() and not p.name.endswith(".aider.input.history")], workers=args.workers)
            small_rate = run.add("import throughput, smaller history", small_total / 1e6 / (time.perf_counter() - t0),
                                 "MB/s")
            small_sessions = len(list(small_paths.sessions.glob("*.jsonl")))
        finally:
            small_db.close()
        shutil.rmtree(small_src)
        shutil.rmtree(small_ws)
        print(f"   the smaller history first: {small_total / 1e6:,.0f} MB into {small_sessions:,} sessions at "
              f"{small_rate:.1f} MB/s")

    paths = Paths.for_root(ws)
    db = Database(paths)
    try:
        importer = Importer(paths, db)
        sources = sorted(p for p in src.rglob("*") if p.is_file() and not p.name.endswith(".aider.input.history"))
        t0, cpu0, load0 = time.perf_counter(), cpu_seconds(), os.getloadavg()[0]
        results = import_many(importer, [(p, None) for p in sources], workers=args.workers)
        seconds, cpu1 = time.perf_counter() - t0, cpu_seconds()
        own, workers = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
        cpu = own + workers
        records = sum(r.added for r in results)
        errors = sum(bool(r.error or r.problems) for r in results)
        rate = total / 1e6 / seconds
        sessions = len(list(paths.sessions.glob("*.jsonl")))
        print(f"\n2. import: {records:,} records into {sessions:,} sessions in {seconds:.1f} s "
              f"({errors} files with problems)")
        print(f"   throughput {rate:6.1f} MB/s of source logs    target >= {IMPORT_TARGET_MBS:.0f} MB/s   "
              f"{'meets' if rate >= IMPORT_TARGET_MBS else 'MISSES'}")
        run.add("import throughput", rate, "MB/s")
        if small_rate:
            ratio = run.add("import throughput, this history / the smaller", rate / small_rate, "x", "higher")
            print(f"   {ratio:.0%} of the smaller history's {small_rate:.1f} MB/s   target >= 90% (linear)   "
                  f"{'meets' if ratio >= 0.9 else 'MISSES'}")
        run.add("import CPU per MB of sources", cpu * 1000 / (total / 1e6), "ms/MB")
        logs = sum(p.stat().st_size for p in paths.sessions.glob("*.jsonl"))
        budget = 1000 * (os.cpu_count() or 1) / IMPORT_TARGET_MBS
        print(f"   CPU {cpu:.1f} s in all processes: {cpu * 1000 / (total / 1e6):.1f} CPU-ms per MB of sources "
              f"(the target allows at most {budget:.0f} on {os.cpu_count()} idle cores; workers {workers:.1f} s, "
              f"this process {own:.1f} s)")
        print(f"   load average {load0:.1f} before the import, {os.getloadavg()[0]:.1f} after (other engineers' "
              f"work shares these cores: MB/s falls with it, CPU-ms per MB rises less)")
        heap = sum(p.stat().st_size for p in paths.state.glob("search-*.heap"))
        print(f"   session logs {logs / 1e6:,.0f} MB, store {paths.memory_db.stat().st_size / 1e6:,.0f} MB, "
              f"search heap {heap / 1e6:,.0f} MB")

        print(f"\n3. queries over the imported history (target < {QUERY_TARGET_S:g} s each)")
        for by in ("session", "day", "month", "model"):
            seconds, result = timed(usage, db, by)
            run.add(f"reflect usage --by {by}", seconds * 1000, "ms")
            print(f"   reflect usage --by {by:<8} {seconds * 1000:7.0f} ms  {len(result.rows):>6,} rows   "
                  f"{verdict(seconds, QUERY_TARGET_S)}")
        for needle in ("mozgoslav", "the", "no such words anywhere"):
            first, hits = timed(search, paths, needle, db=db)
            again, _ = timed(search, paths, needle, db=db)
            run.add(f"session search {needle!r}, first", first * 1000, "ms")
            run.add(f"session search {needle!r}, again", again * 1000, "ms")
            print(f"   session search {needle!r:<26} {first * 1000:7.0f} ms (then {again * 1000:.0f} ms)  "
                  f"{len(hits):>4} hits   {verdict(max(first, again), QUERY_TARGET_S)}")
    finally:
        db.close()
    print(f"\n   the same from the command line (fresh processes: start-up, store opening, printing included; "
          f"median of {args.runs})")
    bench_history(ws, args.runs)
    if not args.keep:
        shutil.rmtree(args.dir)
    run.save()
    print(f"\nbenchmark took {time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
