"""Memory tier benchmark: `python benchmarks/bench_memory.py` prints measured figures.

Measures, in the owner process and in a client process (which reaches the
store through the owner's socket): STM get/set, LTM get p50/p99, batched LTM
writes + fence, episodic appends + fence, and reflection queries over
1,000,000 episodic events. Nothing is asserted; targets are printed beside
the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
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

LTM_KEYS = 10_000
LTM_GETS = 20_000
LTM_WRITES = 100_000
EVENTS = 200_000
REFLECT_EVENTS = 1_000_000


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


def measure_ltm(mem: Memory, tag: str) -> dict:
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
    started = time.perf_counter()
    for i, key in enumerate(keys):
        mem.umem("ltm", key, i, namespace="bench-writes")
    buffered = time.perf_counter()
    mem.fence("ltm")
    done = time.perf_counter()
    return {"ltm_get_p50_us": timings[len(timings) // 2] * 1e6, "ltm_get_p99_us": timings[int(len(timings) * .99)] * 1e6,
            "ltm_set_us": (buffered - started) / LTM_WRITES * 1e6,
            "ltm_writes_per_s": LTM_WRITES / (done - started), "ltm_fence_s": done - buffered}


def measure_episodic(mem: Memory) -> dict:
    record = mem.episodic.record
    started = time.perf_counter()
    for i in range(EVENTS):
        record(TOOL_CALL, "read_lines", step=i % 50, duration_ms=1.5, ok=True,
               args={"path": "src/app.py", "start": 10, "end": 40}, result_chars=1200, outcome="ok")
    recorded = time.perf_counter()
    mem.fence("episodic")
    done = time.perf_counter()
    # The store's side alone: one prebuilt 50,000-event batch, as a flush sends it.
    lines = [json.dumps({"i": f"ingest-{mem.session}-{i}", "t": time.time_ns() // 1000, "y": TOOL_CALL,
                         "n": "grep", "d": 2.0, "o": True, "x": {"result_chars": i}}) for i in range(50_000)]
    blob = "\n".join(lines)
    ingest_started = time.perf_counter()
    mem.db.call(append_events, f"bench-batch-{mem.session}", mem.session, "main", blob, len(lines))
    ingest_s = time.perf_counter() - ingest_started
    return {"record_us": (recorded - started) / EVENTS * 1e6, "events_per_s": EVENTS / (done - started),
            "episodic_fence_s": done - recorded, "ingest_per_s": len(lines) / ingest_s}


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


def run_measurements(db: Database, tag: str) -> dict:
    mem = Memory(db, session=f"bench-{tag}", record_lookups=())
    figures = {}
    figures.update(measure_stm(mem))
    figures.update(measure_ltm(mem, tag))
    figures.update(measure_episodic(mem))
    figures.update(measure_reflection(db))
    mem.close()
    return figures


def client_main(root: str) -> None:
    db = Database(Paths.for_root(root))
    figures = run_measurements(db, "client")
    figures["was_owner"] = db.is_owner
    db.close()
    print(json.dumps(figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", metavar="ROOT", help=argparse.SUPPRESS)
    parser.add_argument("--keep", action="store_true", help="Keep the temporary workspace for inspection.")
    args = parser.parse_args()
    if args.client:
        client_main(args.client)
        return
    import duckdb

    root = tempfile.mkdtemp(prefix="ws-bench-memory-")
    paths = Paths.for_root(root)
    print(f"python {sys.version.split()[0]}, duckdb {duckdb.__version__}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f} at start; workspace {root}", flush=True)
    sample = {"args": {"path": "src/app.py", "start": 10, "end": 40}, "result_chars": 1200, "outcome": "ok"}
    print(f"machine reference: json.dumps of a small event {_per_op_us(lambda n: [json.dumps(sample) for _ in range(n)], 100_000):.2f} µs, "
          f"sum(range(1,000,000)) {_per_op_us(lambda n: [sum(range(1_000_000)) for _ in range(n)], 20) / 1000:.1f} ms",
          flush=True)
    print(f"synthesizing {REFLECT_EVENTS:,} episodic events for the reflection queries ...", flush=True)
    synth_s = synthesize_events(paths, REFLECT_EVENTS)
    print(f"  loaded in {synth_s:.1f}s", flush=True)

    db = Database(paths)
    assert db.acquire_ownership()
    print("measuring in the owner process ...", flush=True)
    owner = run_measurements(db, "owner")
    print("measuring in a client process (calls travel over the owner's socket) ...", flush=True)
    proc = subprocess.run([sys.executable, __file__, "--client", root], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"client run failed: {proc.stderr}")
    client = json.loads(proc.stdout.strip().splitlines()[-1])
    db.close()

    rows = [
        ("STM get (STM.get)", "stm_get_us", "µs", "≤ 5 µs"),
        ("STM set (STM.set)", "stm_set_us", "µs", "≤ 5 µs"),
        ("STM get via qmem('stm')", "stm_qmem_us", "µs", "≤ 5 µs"),
        ("STM set via umem('stm')", "stm_umem_us", "µs", "≤ 5 µs"),
        ("LTM get p50", "ltm_get_p50_us", "µs", "≤ 1000 µs"),
        ("LTM get p99", "ltm_get_p99_us", "µs", ""),
        ("LTM umem('ltm') alone (buffered)", "ltm_set_us", "µs", ""),
        (f"LTM {LTM_WRITES:,} writes + fence", "ltm_writes_per_s", "/s", "≥ 50,000/s"),
        ("  of which the fence", "ltm_fence_s", "s", ""),
        ("episodic record() alone", "record_us", "µs", ""),
        (f"episodic {EVENTS:,} appends + fence", "events_per_s", "/s", "≥ 50,000/s"),
        ("  of which the fence", "episodic_fence_s", "s", ""),
        ("episodic store ingest of one 50,000-event batch", "ingest_per_s", "/s", ""),
    ] + [(k.removesuffix(" ms"), k, "ms", "≤ 1000 ms") for k in owner if k.startswith("reflect")]
    print()
    print(f"(reflections ran over {owner['events']:,} events in the owner, {client['events']:,} in the client)")
    print(f"{'measure':<52}{'owner process':>16}{'client process':>16}   target")
    for label, key, unit, target in rows:
        def fmt(v):
            return f"{v:,.0f} {unit}" if unit == "/s" else (f"{v:,.1f} {unit}" if v >= 10 else f"{v:.2f} {unit}")
        print(f"{label:<52}{fmt(owner[key]):>16}{fmt(client[key]):>16}   {target}")
    print(f"\n(client process was a client throughout: {not client['was_owner']}; "
          f"load average {os.getloadavg()[0]:.1f} at end)")
    if not args.keep:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
