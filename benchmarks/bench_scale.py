"""Scale benchmark: the same measures on a history of 1,000 and of 13,000 sessions, each figure at both
sizes and their ratio; prints what it measured, asserts nothing.

    .venv/bin/python benchmarks/bench_scale.py [--quick] [--sizes 1000 13000] [--dir /tmp/ws-bench-scale]

For each size N:
1. Writes N source logs under DIR/N/src by cycling the Claude Code and Codex transcripts of
   ../shared/transcripts and tests/fixtures/import (each copy with a fresh session id: a session of its
   own; ~45 KB a session, ~580 MB at 13,000), then imports them all into a fresh workspace DIR/N/ws as
   `workstation import FOLDER` does (importers/bulk.py). Prints MB/s of source logs (target: >= 30 MB/s,
   and at 13,000 within 10% of the figure at 1,000: linear), then the MB/s of 200 more sessions imported
   into that history (what one more import costs once the history is large).
2. `session search` as a user runs it (a fresh process, median of --runs) beside `rg -i -F WORD` over the
   same session logs in the same run: a common word (the default 200 hits), every hit of a rare word
   (--limit 1000000) and a word that is nowhere. rg prints every matching line to a pipe.
   Targets: common <= 2x rg, rare (all hits) <= 3x rg, nowhere <= 1.5x rg.
3. `session list --json` (a fresh process; target <= 100 ms; the first run after the import, which builds
   the list's summary, is printed apart, as is the first search, which writes the search manifest) and
   one sidecar pass over every session (in this process, as `workstation sidecar --once` makes it; no model is configured, so nothing is
   compacted: the pass is the looking).
4. `reflect usage --json` (median of --runs fresh processes) beside ccusage's `session --offline --json` over the
   same source logs (CLAUDE_CONFIG_DIR whose projects/ is the source folder; ccusage reads the Claude Code
   ones), run once: target <= ccusage. ccusage 17.2.1 is the one tests/integration/test_import_usage.py
   installs into .venv/ccusage-17.2.1 (or: npm install --prefix .venv/ccusage-17.2.1 ccusage@17.2.1).
Before the sizes: `workstation --version` beside `python -c pass` (target <= 2x).
Then the ratio of each figure at the largest size to the smallest. --quick: 200 and 2,000 sessions.
DIR is removed afterwards unless --keep. The figures are kept by results.py (benchmarks/results/bench_scale/).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

import results  # noqa: E402  (benchmarks/results.py, beside this script)
from bench_commands import _env, run_once, timed_command  # noqa: E402

SAMPLES = [*sorted((REPO.parent / "shared" / "transcripts").glob("claude-code/*.jsonl")),
           *sorted((REPO.parent / "shared" / "transcripts").glob("codex/*.jsonl")),
           REPO / "tests" / "fixtures" / "import" / "claude_session.jsonl",
           REPO / "tests" / "fixtures" / "import" / "codex_0.40.jsonl"]
COMMON, RARE, NOWHERE = "the", "swagger", "zqxjkvbw nowhere"  # RARE: in one sample of eight
IMPORT_TARGET_MBS = 30.0
LINEAR_TOLERANCE = 0.10
LIST_TARGET_S = 0.1
VERSION_TARGET = 2.0  # x python -c pass
CCUSAGE = REPO / ".venv" / "ccusage-17.2.1" / "node_modules" / "ccusage" / "dist" / "index.js"
RG_TARGETS = {"common": 2.0, "rare": 3.0, "nowhere": 1.5}
MORE = 200  # sessions imported on top of the history
_SESSION_ID = re.compile(r'("sessionId":\s*")([^"]+)(")')


def _templates() -> list[tuple[str, str, str]]:
    """(file name, text, old id) of every sample; the old id is replaced by a fresh one per copy."""
    out = []
    for path in SAMPLES:
        if not path.is_file():
            sys.exit(f"a sample is missing: {path}")
        text = path.read_text(encoding="utf-8")
        if '"sessionId"' in text:
            old = _SESSION_ID.search(text).group(2)
        else:
            old = json.loads(text.split("\n", 1)[0])["payload"]["id"]
        out.append((path.name, text, old))
    return out


def generate(out: Path, first: int, count: int) -> tuple[list[Path], int]:
    """Source logs number first..first+count-1 under `out` (1,000 a folder); returns (files, bytes)."""
    templates = _templates()
    files, total = [], 0
    for i in range(first, first + count):
        name, text, old = templates[i % len(templates)]
        fresh = f"{i:08x}-5ca1-4000-8000-{i % len(templates):012x}"
        folder = out / f"s{i // 1000:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{i:06d}-{name.replace(old, fresh)}"
        data = text.replace(old, fresh).encode("utf-8")
        path.write_bytes(data)
        files.append(path)
        total += len(data)
    return files, total


def cpu_seconds() -> float:
    """CPU (user + system) of this process, its threads, and its finished children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def imported(paths, db, files: list[Path], total: int) -> tuple[float, float, int]:
    """Import `files` (bulk, one worker per core up to 4); returns (MB/s, MB per CPU second, files with
    problems). Other work on the machine lowers the first; the second shows the work itself."""
    from workstation.importers.bulk import import_many
    from workstation.importers.engine import Importer

    started, cpu = time.perf_counter(), cpu_seconds()
    done = import_many(Importer(paths, db), [(p, None) for p in files])
    seconds, cpu = time.perf_counter() - started, cpu_seconds() - cpu
    return total / 1e6 / seconds, total / 1e6 / cpu, sum(bool(r.error or r.problems) for r in done)


def rg_seconds(word: str, folder: Path, runs: int) -> tuple[float, float, int]:
    """Median wall and CPU seconds of `rg -i -F WORD FOLDER` (output read from a pipe), its matching lines."""
    samples, lines = [], 0
    for attempt in range(runs + 1):
        started, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(["rg", "-i", "-F", "--no-messages", word, str(folder)], capture_output=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if attempt:
            samples.append((time.perf_counter() - started,
                            after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime))
        lines = done.stdout.count(b"\n")
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples), lines


def process_seconds(argv: list[str], runs: int, env: dict[str, str] | None = None) -> tuple[float, float]:
    """Median wall and CPU seconds of a process (after one untimed run), its output read from a pipe."""
    samples = []
    for attempt in range(runs + 1):
        started, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(argv, capture_output=True, env=env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode:
            sys.exit(f"`{' '.join(argv)}` failed: {done.stderr.decode(errors='replace').strip()[-300:]}")
        if attempt:
            samples.append((time.perf_counter() - started,
                            after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime))
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def version_figures(runs: int) -> dict[str, tuple[float, str]]:
    """`workstation --version` beside `python -c pass`, fresh processes."""
    env = _env()
    bare, bare_cpu = process_seconds([sys.executable, "-c", "pass"], runs, env)
    wall, cpu = process_seconds([sys.executable, "-P", "-m", "workstation", "--version"], runs, env)
    ratio = wall / bare
    print(f"   workstation --version {wall * 1000:5.0f} ms (CPU {cpu * 1000:4.0f})   python -c pass {bare * 1000:4.0f} ms "
          f"(CPU {bare_cpu * 1000:4.0f})   {ratio:.1f}x (CPU {cpu / bare_cpu if bare_cpu else float('nan'):.1f}x)   "
          f"target <= {VERSION_TARGET:g}x   {'meets' if ratio <= VERSION_TARGET else 'MISSES'}")
    return {"--version": (wall, "s"), "--version, CPU": (cpu, "s"), "python -c pass": (bare, "s"),
            "--version / python -c pass": (ratio, "x")}


def hits_of(workspace: Path, args: list[str]) -> int:
    done = subprocess.run([sys.executable, "-P", "-m", "workstation", "-C", str(workspace), *args, "--json"],
                          env=_env(), capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"`workstation {' '.join(args)}` failed: {done.stderr.strip()[-300:]}")
    data = json.loads(done.stdout)
    return len(data if isinstance(data, list) else data.get("hits") or data.get("sessions") or [])


def measure(base: Path, n: int, runs: int, rg: bool) -> dict[str, tuple[float, str]]:
    """Every figure at one history size: {label: (value, unit)}."""
    from workstation.config import Config
    from workstation.paths import Paths
    from workstation.sidecar import Sidecar
    from workstation.store import Database

    figures: dict[str, tuple[float, str]] = {}
    src, ws = base / "src", base / "ws"
    ws.mkdir(parents=True)
    started = time.perf_counter()
    files, total = generate(src, 0, n)
    print(f"\n== {n:,} sessions: {total / 1e6:,.0f} MB of source logs written in {time.perf_counter() - started:.0f} s "
          f"(load average {os.getloadavg()[0]:.1f})")
    figures["history size"] = (total / 1e6, "MB")
    paths = Paths.for_root(ws)
    db = Database(paths)
    try:
        rate, per_cpu, bad = imported(paths, db, files, total)
        figures["import throughput"] = (rate, "MB/s")
        figures["import, MB per CPU second"] = (per_cpu, "MB/s")
        print(f"   import of all {n:,}: {rate:6.1f} MB/s ({per_cpu:.1f} MB per CPU second; {bad} files with "
              f"problems)   target >= {IMPORT_TARGET_MBS:.0f} MB/s   "
              f"{'meets' if rate >= IMPORT_TARGET_MBS else 'MISSES'}")
        more, more_total = generate(base / "more", n, MORE)
        rate, per_cpu, bad = imported(paths, db, more, more_total)
        figures[f"import of {MORE} more into the history"] = (rate, "MB/s")
        figures[f"import of {MORE} more, MB per CPU second"] = (per_cpu, "MB/s")
        print(f"   import of {MORE} more into that history: {rate:6.1f} MB/s ({per_cpu:.1f} MB per CPU second; "
              f"{bad} files with problems)")
        sessions = len(list(paths.sessions.glob("*.jsonl")))
        logs = sum(p.stat().st_size for p in paths.sessions.glob("*.jsonl"))
        print(f"   {sessions:,} sessions, {logs / 1e6:,.0f} MB of session logs")

        t, cpu = time.perf_counter(), time.process_time()
        results_ = Sidecar(paths, Config(), window_tokens=0).run_once()
        figures["sidecar pass"] = (time.perf_counter() - t, "s")
        figures["sidecar pass, CPU"] = (time.process_time() - cpu, "s")
        print(f"   sidecar pass over every session: {figures['sidecar pass'][0]:.2f} s ({len(results_)} compactions "
              f"tried)")
    finally:
        db.close()

    env = _env()
    # the first list and search after the import build the sessions summary and the search manifest
    # (sessions.catalog, sessions.textindex): what a user waits for once; the timed runs below are the next
    for label, command in (("first session list --json after the import", ["session", "list", "--json"]),
                           ("first session search after the import", ["session", "search", NOWHERE, "--json"])):
        wall, cpu, done = run_once(["-C", str(ws), *command], env)
        if done.returncode:
            sys.exit(f"`workstation {' '.join(command)}` failed: {done.stderr.strip()[-300:]}")
        figures[label] = (wall, "s")
        print(f"   {label}: {wall * 1000:6.0f} ms (CPU {cpu * 1000:5.0f})")
    for kind, word, extra in (("common", COMMON, []), ("rare", RARE, ["--limit", "1000000"]),
                              ("nowhere", NOWHERE, [])):
        command = ["-C", str(ws), "session", "search", word, *extra, "--json"]
        wall, cpu = timed_command(command, env, runs)
        hits = hits_of(ws, ["session", "search", word, *extra])
        figures[f"session search, {kind} word"] = (wall, "s")
        figures[f"session search, {kind} word, CPU"] = (cpu, "s")
        line = f"   session search {word!r:<20} {wall * 1000:6.0f} ms (CPU {cpu * 1000:5.0f}) {hits:>6,} hits"
        if rg:
            rg_wall, rg_cpu, lines = rg_seconds(word, paths.sessions, runs)
            ratio = wall / rg_wall
            figures[f"rg, {kind} word"] = (rg_wall, "s")
            figures[f"rg, {kind} word, CPU"] = (rg_cpu, "s")
            figures[f"session search / rg, {kind} word"] = (ratio, "x")
            figures[f"session search / rg, {kind} word, CPU"] = (cpu / rg_cpu if rg_cpu else float("nan"), "x")
            target = RG_TARGETS[kind]
            line += (f"   rg {rg_wall * 1000:5.0f} ms (CPU {rg_cpu * 1000:4.0f}; {lines:,} lines)   {ratio:5.1f}x rg "
                     f"(CPU {figures[f'session search / rg, {kind} word, CPU'][0]:.1f}x)   target <= {target:g}x   "
                     f"{'meets' if ratio <= target else 'MISSES'}")
        print(line)
    wall, cpu = timed_command(["-C", str(ws), "session", "list", "--json"], env, runs)
    figures["session list --json"] = (wall, "s")
    figures["session list --json, CPU"] = (cpu, "s")
    print(f"   session list --json {wall * 1000:7.0f} ms (CPU {cpu * 1000:5.0f}; {hits_of(ws, ['session', 'list']):,} "
          f"sessions)   target <= {LIST_TARGET_S * 1000:.0f} ms   {'meets' if wall <= LIST_TARGET_S else 'MISSES'}")
    figures.update(usage_figures(base, src, ws, runs))
    return figures


def usage_figures(base: Path, src: Path, ws: Path, runs: int) -> dict[str, tuple[float, str]]:
    """`reflect usage --json` (median of `runs`) beside one run of ccusage over the same source logs."""
    wall, cpu = timed_command(["-C", str(ws), "reflect", "usage", "--json"], _env(), runs)
    figures = {"reflect usage --json": (wall, "s"), "reflect usage --json, CPU": (cpu, "s")}
    line = f"   reflect usage --json {wall * 1000:6.0f} ms (CPU {cpu * 1000:5.0f})"
    if CCUSAGE.is_file() and shutil.which("node"):
        home = base / "claude"
        home.mkdir(exist_ok=True)
        (home / "projects").symlink_to(src, target_is_directory=True)  # a folder of logs a project: ccusage's layout
        env = {**os.environ, "CLAUDE_CONFIG_DIR": str(home)}
        theirs, theirs_cpu = _once(["node", str(CCUSAGE), "session", "--offline", "--json"], env)  # ~80 s at 13,000
        figures.update({"ccusage session --json": (theirs, "s"), "ccusage session --json, CPU": (theirs_cpu, "s"),
                        "reflect usage / ccusage": (wall / theirs, "x")})
        line += (f"   ccusage session --json {theirs:6.2f} s (CPU {theirs_cpu:5.2f}, one run)   {wall / theirs:.2f}x   "
                 f"target <= 1x   {'meets' if wall <= theirs else 'MISSES'}")
    else:
        line += f"   (ccusage not installed at {CCUSAGE}: no side-by-side figure)"
    print(line)
    return figures


def _once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of a process."""
    started, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, capture_output=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        sys.exit(f"`{' '.join(argv)}` failed: {done.stderr.decode(errors='replace').strip()[-300:]}")
    return time.perf_counter() - started, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="200 and 2,000 sessions (for development)")
    parser.add_argument("--sizes", type=int, nargs=2, metavar=("SMALL", "LARGE"), default=None,
                        help="the two history sizes (default 1000 13000)")
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per command timed (median)")
    parser.add_argument("--dir", type=Path, default=None, help="work folder (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder afterwards")
    args = parser.parse_args()
    small, large = args.sizes or ((200, 2000) if args.quick else (1000, 13000))
    if not 0 < small < large:
        parser.error("--sizes: SMALL must be at least 1 and less than LARGE")
    run = results.Run("bench_scale", {"sizes": [small, large], "runs": args.runs})
    rg = shutil.which("rg") is not None
    print(f"scale benchmark: {small:,} and {large:,} sessions; {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f} at start")
    if not rg:
        print("rg (ripgrep) is NOT installed: no side-by-side figures (install it: apt-get install ripgrep)")
    base = args.dir or Path(tempfile.mkdtemp(prefix="ws-bench-scale-"))
    home = base / "home"
    home.mkdir(parents=True, exist_ok=True)
    os.environ["WORKSTATION_HOME"] = str(home)  # no user configuration steers the figures
    for label, (value, unit) in version_figures(args.runs).items():
        run.add(label, value, unit)
    try:
        at = {}
        for n in (small, large):
            if (base / str(n)).exists():
                shutil.rmtree(base / str(n))
            at[n] = measure(base / str(n), n, args.runs, rg)
            for label, (value, unit) in at[n].items():
                run.add(f"{n:,} sessions: {label}", value, unit)
            if not args.keep:
                shutil.rmtree(base / str(n))
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)

    print(f"\n{'figure':<48} {f'{small:,} sessions':>16} {f'{large:,} sessions':>16}   {large:,} / {small:,}")
    for label, (value, unit) in at[small].items():
        other = at[large][label][0]
        ratio = other / value if value else float("nan")
        print(f"{label:<48} {value:>12.3g} {unit:<4}{other:>12.3g} {unit:<4}   {ratio:6.2f}x")
        if label != "history size":
            run.add(f"{large:,} / {small:,}: {label}", ratio, "x",
                    better="higher" if results.higher_is_better(unit) else "lower")
    small_rate, large_rate = at[small]["import throughput"][0], at[large]["import throughput"][0]
    linear = large_rate >= (1 - LINEAR_TOLERANCE) * small_rate
    print(f"import MB/s at {large:,} is {large_rate / small_rate:.0%} of the figure at {small:,}: target within "
          f"{LINEAR_TOLERANCE:.0%} (linear)   {'meets' if linear else 'MISSES'}")
    small_cpu, large_cpu = at[small]["import, MB per CPU second"][0], at[large]["import, MB per CPU second"][0]
    print(f"   by CPU time (the work, whatever else runs): {large_cpu / small_cpu:.0%}   "
          f"{'meets' if large_cpu >= (1 - LINEAR_TOLERANCE) * small_cpu else 'MISSES'}; "
          f"load average {os.getloadavg()[0]:.1f} at the end")
    run.save()


if __name__ == "__main__":
    main()
