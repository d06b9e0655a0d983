"""Memory tier benchmark: `python benchmarks/bench_memory.py` prints measured figures.

Measures, in the owner process and in a client process (which reaches the
store through the owner's socket): STM get/set, LTM get p50/p99, batched LTM
writes + fence, episodic appends + fence, and reflection queries over
1,000,000 episodic events. Nothing is asserted; targets are printed beside
the figures.

The tier figures are measured in `--rounds` rounds (default 3), each in a
fresh workspace, and printed as the median over the rounds with every round's
throughput: the machine may be shared, so the load average is printed with
every round. Because wall-clock throughput on a loaded machine says as much
about the load as about the code, the write figures also count the CPU time
spent on them by every process involved (this one and, for the client, the
owner), which the load barely changes. The reflection queries run once, in a
workspace of their own holding the synthesized events.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workstation.memory import Memory, reflect  # noqa: E402
from workstation.memory.episodic import TOOL_CALL, append_events  # noqa: E402
from workstation.paths import Paths  # noqa: E402
from workstation.store import Database  # noqa: E402
from workstation.store.broker import ping  # noqa: E402

import results  # noqa: E402  (benchmarks/results.py, beside this script)

LTM_KEYS = 10_000
LTM_GETS = 20_000
LTM_WRITES = 100_000
EVENTS = 200_000
REFLECT_EVENTS = 1_000_000


class CpuClock:
    """CPU seconds used by this process (all its threads) plus the owner's, when that is another process."""

    def __init__(self, db: Database) -> None:
        owner_pid = db.call(ping)
        self.owner_stat = None if owner_pid == os.getpid() else Path(f"/proc/{owner_pid}/stat")
        self.tick = os.sysconf("SC_CLK_TCK") if self.owner_stat else 1

    def __call__(self) -> float:
        seconds = time.process_time()
        if self.owner_stat is not None:  # utime and stime, fields 14 and 15, after the "(name)" field
            fields = self.owner_stat.read_text().rsplit(")", 1)[1].split()
            seconds += (int(fields[11]) + int(fields[12])) / self.tick
        return seconds


def _per_op_us(fn, n: int) -> float:
    started = time.perf_counter()
    fn(n)
    return (time.perf_counter() - started) / n * 1e6


def measure_stm(mem: Memory) -> dict:
    stm = mem.stm

    def sets(n):
        for i in range(n):
            stm.set("k", i)

    def gets(n):
        for _ in range(n):
            stm.get("k")

    def umems(n):
        for i in range(n):
            mem.umem("stm", "k", i)

    def qmems(n):
        for _ in range(n):
            mem.qmem("stm", "k")

    n = 200_000
    return {"stm_set_us": _per_op_us(sets, n), "stm_get_us": _per_op_us(gets, n),
            "stm_umem_us": _per_op_us(umems, n), "stm_qmem_us": _per_op_us(qmems, n)}


def measure_ltm(mem: Memory, tag: str, cpu: CpuClock) -> dict:
    for i in range(LTM_KEYS):
        mem.umem("ltm", f"{tag}-{i}", {"i": i, "text": "a fact worth keeping"}, namespace="bench")
    mem.fence("ltm")
    mem.qmem("ltm", f"{tag}-0", namespace="bench")  # first touch loads the owner cache
    keys = [f"{tag}-{random.randrange(LTM_KEYS)}" for _ in range(LTM_GETS)]
    timings = []
    for key in keys:
        started = time.perf_counter()
        mem.ltm.get(key, "bench")
        timings.append(time.perf_counter() - started)
    timings.sort()
    keys = [f"{tag}-w{i}" for i in range(LTM_WRITES)]
    cpu_started = cpu()
    started = time.perf_counter()
    for i, key in enumerate(keys):
        mem.umem("ltm", key, i, namespace="bench-writes")
    buffered = time.perf_counter()
    mem.fence("ltm")
    done = time.perf_counter()
    cpu_s = cpu() - cpu_started
    return {"ltm_get_p50_us": timings[len(timings) // 2] * 1e6, "ltm_get_p99_us": timings[int(len(timings) * .99)] * 1e6,
            "ltm_set_us": (buffered - started) / LTM_WRITES * 1e6,
            "ltm_writes_per_s": LTM_WRITES / (done - started), "ltm_fence_s": done - buffered,
            "ltm_write_cpu_us": cpu_s / LTM_WRITES * 1e6}


def measure_episodic(mem: Memory, cpu: CpuClock) -> dict:
    record = mem.episodic.record
    cpu_started = cpu()
    started = time.perf_counter()
    for i in range(EVENTS):
        record(TOOL_CALL, "read_lines", step=i % 50, duration_ms=1.5, ok=True,
               args={"path": "src/app.py", "start": 10, "end": 40}, result_chars=1200, outcome="ok")
    recorded = time.perf_counter()
    mem.fence("episodic")
    done = time.perf_counter()
    cpu_s = cpu() - cpu_started
    # The store's side alone: one prebuilt 50,000-event batch, as a flush sends it.
    lines = [json.dumps({"i": f"ingest-{mem.session}-{i}", "t": time.time_ns() // 1000, "y": TOOL_CALL,
                         "n": "grep", "d": 2.0, "o": True, "x": {"result_chars": i}}) for i in range(50_000)]
    blob = "\n".join(lines)
    ingest_started = time.perf_counter()
    mem.db.call(append_events, f"bench-batch-{mem.session}", mem.session, "main", blob, len(lines))
    ingest_s = time.perf_counter() - ingest_started
    return {"record_us": (recorded - started) / EVENTS * 1e6, "events_per_s": EVENTS / (done - started),
            "episodic_fence_s": done - recorded, "ingest_per_s": len(lines) / ingest_s,
            "event_cpu_us": cpu_s / EVENTS * 1e6}


def measure_reflection(db: Database) -> dict:
    out = {"events": reflect.run_sql(db, "SELECT count(*) FROM events").rows[0][0]}
    for name, _ in reflect.names():
        started = time.perf_counter()
        reflect.run(db, name)
        out[f"reflect {name} ms"] = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    reflect.run_sql(db, "SELECT tool, count(*), avg(duration_ms) FROM tool_calls GROUP BY tool")
    out["reflect --sql ms"] = (time.perf_counter() - started) * 1000
    return out


def synthesize_events(paths: Paths, n: int) -> float:
    """Load n realistic events straight into memory.duckdb (no owner running); returns seconds."""
    import duckdb

    with Database(paths) as db:  # create and migrate the files
        db.acquire_ownership()
    started = time.perf_counter()
    con = duckdb.connect(str(paths.memory_db))
    con.execute(f"""
        INSERT INTO events
        SELECT 'syn' || i, make_timestamp(1780000000000000 + i * 5000), 'session-' || (i % 20), 'main',
               (i // 20) % 300, NULL, kind,
               CASE kind WHEN 'tool_call' THEN ['grep', 'read_lines', 'file_meta', 'run_command'][1 + i % 4]
                         WHEN 'model_call' THEN ['model-a', 'model-b'][1 + i % 2]
                         WHEN 'memory_hit' THEN 'key-' || (i % 500) WHEN 'memory_miss' THEN 'key-' || (i % 500)
                         ELSE 'src/file_' || (i % 300) || '.py' END,
               CASE WHEN kind IN ('tool_call', 'model_call') THEN random() * 200 END,
               CASE WHEN kind = 'model_call' THEN (1000 + i % 5000)::INT END,
               CASE WHEN kind = 'model_call' THEN (50 + i % 400)::INT END,
               CASE WHEN kind = 'model_call' THEN 0.001 END,
               CASE WHEN kind IN ('tool_call', 'model_call') THEN random() > 0.05 END,
               CASE kind WHEN 'tool_call' THEN json_object('args', json_object('path', 'src/x.py'),
                                                           'result_chars', i % 9000, 'outcome',
                                                           CASE WHEN i % 23 = 0 THEN 'error' ELSE 'ok' END)
                         WHEN 'model_call' THEN json_object('context_tokens', 2000 + i % 60000)
                         WHEN 'file_read' THEN json_object('path', 'src/file_' || (i % 300) || '.py',
                                                           'lines', [1, 40], 'served_from',
                                                           CASE WHEN i % 3 = 0 THEN 'disk' ELSE 'memory' END)
                         WHEN 'read_avoided' THEN json_object('chars_saved', 4000)
                         WHEN 'file_edit' THEN json_object('lines_changed', i % 12)
                         WHEN 'memory_hit' THEN json_object('tier', 'ltm', 'namespace', 'default')
                         WHEN 'memory_miss' THEN json_object('tier', 'ltm', 'namespace', 'default')
                         ELSE json_object('op', 'tool_call') END
        FROM (SELECT i, ['tool_call', 'tool_call', 'tool_call', 'model_call', 'file_read', 'file_read',
                         'memory_hit', 'memory_hit', 'memory_miss', 'read_avoided', 'file_edit', 'op_start',
                         'compaction'][1 + (hash(i) % 13)::INT] AS kind FROM range({n}) t(i))""")
    con.close()
    return time.perf_counter() - started


def run_measurements(db: Database, tag: str, part: str) -> dict:
    if part == "reflect":
        return measure_reflection(db)
    mem = Memory(db, session=f"bench-{tag}", record_lookups=())
    figures = {}
    figures.update(measure_stm(mem))
    cpu = CpuClock(db)
    figures.update(measure_ltm(mem, tag, cpu))
    figures.update(measure_episodic(mem, cpu))
    mem.close()
    return figures


def client_main(root: str, part: str) -> None:
    db = Database(Paths.for_root(root))
    figures = run_measurements(db, "client", part)
    figures["was_owner"] = db.is_owner
    db.close()
    print(json.dumps(figures))


def measure_in_both(root: str, part: str) -> tuple[dict, dict]:
    """Figures measured by the owner process (this one), then by a client process."""
    db = Database(Paths.for_root(root))
    assert db.acquire_ownership()
    owner = run_measurements(db, "owner", part)
    proc = subprocess.run([sys.executable, __file__, "--client", root, "--part", part],
                          capture_output=True, text=True)
    db.close()
    if proc.returncode != 0:
        raise SystemExit(f"client run failed: {proc.stderr}")
    client = json.loads(proc.stdout.strip().splitlines()[-1])
    if client.pop("was_owner"):
        raise SystemExit("the client process became the owner: its figures would not be a client's")
    return owner, client


def _load() -> str:
    return "{:.1f} / {:.1f} / {:.1f}".format(*os.getloadavg())


TIER_ROWS = [  # label, key, unit, target (value, ">=" or "<=") or None
    ("STM get (STM.get)", "stm_get_us", "µs", (5, "<=")),
    ("STM set (STM.set)", "stm_set_us", "µs", (5, "<=")),
    ("STM get via qmem('stm')", "stm_qmem_us", "µs", (5, "<=")),
    ("STM set via umem('stm')", "stm_umem_us", "µs", (5, "<=")),
    ("LTM get p50", "ltm_get_p50_us", "µs", (1000, "<=")),
    ("LTM get p99", "ltm_get_p99_us", "µs", None),
    ("LTM umem('ltm') alone (buffered)", "ltm_set_us", "µs", None),
    (f"LTM {LTM_WRITES:,} writes + fence", "ltm_writes_per_s", "/s", (50_000, ">=")),
    ("  of which the fence", "ltm_fence_s", "s", None),
    ("  CPU per write, all processes", "ltm_write_cpu_us", "µs", None),
    ("episodic record() alone", "record_us", "µs", None),
    (f"episodic {EVENTS:,} appends + fence", "events_per_s", "/s", (50_000, ">=")),
    ("  of which the fence", "episodic_fence_s", "s", None),
    ("  CPU per event, all processes", "event_cpu_us", "µs", None),
    ("episodic store ingest of one 50,000-event batch", "ingest_per_s", "/s", None),
]


def _fmt(value: float, unit: str) -> str:
    if unit == "/s":
        return f"{value:,.0f} {unit}"
    return f"{value:,.1f} {unit}" if value >= 10 else f"{value:.2f} {unit}"


def _target(target: tuple | None, unit: str) -> str:
    if target is None:
        return ""
    limit, sense = target
    return f"{'≥' if sense == '>=' else '≤'} {limit:,}{unit if unit == '/s' else ' ' + unit}"


def _verdict(values: list[float], target: tuple | None) -> str:
    if target is None:
        return ""
    limit, sense = target
    met = [v >= limit if sense == ">=" else v <= limit for v in values]
    return "met" if all(met) else ("MISSED" if not any(met) else f"met in {sum(met)}/{len(met)}")


def print_table(rows: list, owner: dict[str, list[float]], client: dict[str, list[float]], title: str) -> None:
    print(f"\n{title}")
    print(f"{'measure':<50}{'owner process':>16}{'client process':>16}   target   (owner / client)")
    for label, key, unit, target in rows:
        results.add(f"{label.strip()}, owner", statistics.median(owner[key]), unit)
        results.add(f"{label.strip()}, client", statistics.median(client[key]), unit)
        print(f"{label:<50}{_fmt(statistics.median(owner[key]), unit):>16}"
              f"{_fmt(statistics.median(client[key]), unit):>16}   {_target(target, unit)}"
              + (f"   ({_verdict(owner[key], target)} / {_verdict(client[key], target)})" if target else ""))
    spread = [(label, key, unit) for label, key, unit, _ in rows if unit == "/s" or key.endswith("_cpu_us")]
    if len(next(iter(owner.values()))) > 1:
        print("\nevery round (owner | client):")
        for label, key, unit in spread:
            print(f"  {label.strip():<48}" + "  ".join(_fmt(v, unit) for v in owner[key]) + "  |  "
                  + "  ".join(_fmt(v, unit) for v in client[key]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", metavar="ROOT", help=argparse.SUPPRESS)
    parser.add_argument("--part", choices=("tiers", "reflect"), default="tiers", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=3, help="Rounds of the tier measurements (default 3).")
    parser.add_argument("--no-reflection", action="store_true", help="Skip the 1,000,000-event reflection queries.")
    parser.add_argument("--keep", action="store_true", help="Keep the temporary workspaces for inspection.")
    args = parser.parse_args()
    if args.client:
        client_main(args.client, args.part)
        return
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    import duckdb

    run = results.Run("bench_memory", {k: v for k, v in vars(args).items() if k not in ("client", "part", "keep")})
    print(f"python {sys.version.split()[0]}, duckdb {duckdb.__version__}, {os.cpu_count()} CPUs, "
          f"load average (1/5/15 min) {_load()} at start", flush=True)
    sample = {"args": {"path": "src/app.py", "start": 10, "end": 40}, "result_chars": 1200, "outcome": "ok"}
    print(f"machine reference: json.dumps of a small event {_per_op_us(lambda n: [json.dumps(sample) for _ in range(n)], 100_000):.2f} µs, "
          f"sum(range(1,000,000)) {_per_op_us(lambda n: [sum(range(1_000_000)) for _ in range(n)], 20) / 1000:.1f} ms",
          flush=True)

    owner: dict[str, list[float]] = {}
    client: dict[str, list[float]] = {}
    for round_no in range(1, args.rounds + 1):
        root = tempfile.mkdtemp(prefix="ws-bench-memory-")
        print(f"round {round_no}/{args.rounds}: load average {_load()}; measuring in the owner process, "
              f"then in a client process (calls travel over the owner's socket) ...", flush=True)
        round_owner, round_client = measure_in_both(root, "tiers")
        for figures, into in ((round_owner, owner), (round_client, client)):
            for key, value in figures.items():
                into.setdefault(key, []).append(value)
        print(f"  owner | client: LTM writes + fence {round_owner['ltm_writes_per_s']:,.0f} | "
              f"{round_client['ltm_writes_per_s']:,.0f} /s ({round_owner['ltm_write_cpu_us']:.1f} | "
              f"{round_client['ltm_write_cpu_us']:.1f} µs CPU each), episodic appends + fence "
              f"{round_owner['events_per_s']:,.0f} | {round_client['events_per_s']:,.0f} /s "
              f"({round_owner['event_cpu_us']:.1f} | {round_client['event_cpu_us']:.1f} µs CPU each)", flush=True)
        if not args.keep:
            shutil.rmtree(root)
    print_table(TIER_ROWS, owner, client, f"tiers: median of {args.rounds} round(s), each in a fresh workspace")

    if not args.no_reflection:
        root = tempfile.mkdtemp(prefix="ws-bench-reflect-")
        print(f"\nsynthesizing {REFLECT_EVENTS:,} episodic events for the reflection queries "
              f"(load average {_load()}) ...", flush=True)
        print(f"  loaded in {synthesize_events(Paths.for_root(root), REFLECT_EVENTS):.1f}s", flush=True)
        reflect_owner, reflect_client = measure_in_both(root, "reflect")
        keys = [k for k in reflect_owner if k.startswith("reflect")]
        print_table([(k.removesuffix(" ms"), k, "ms", (1000, "<=")) for k in keys],
                    {k: [v] for k, v in reflect_owner.items()}, {k: [v] for k, v in reflect_client.items()},
                    f"reflection over {reflect_owner['events']:,} events (one run)")
        if not args.keep:
            shutil.rmtree(root)
    print(f"\nload average (1/5/15 min) {_load()} at end")
    run.save()


if __name__ == "__main__":
    main()
