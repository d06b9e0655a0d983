"""Session benchmarks: prints measured figures, asserts nothing.

    /tmp/wsvenv/bin/python benchmarks/bench_sessions.py [--turns 1000] [--replies 200]

1. The reply path: append one record + SessionContext.build on a session of
   1,000 records (--turns counts records here: user, assistant and tool alike), alone and while a compaction runs in the background (in another
   process, as the sidecar does it, and in a thread of the same process).
   The two should not differ: build only reads and takes no lock.
2. Compaction of a 1,000-record session against the scripted OpenAI-compatible
   server, through the real litellm path.
3. Raw log costs: append (write + fsync) and a cold full read.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # fakellm and the shared session helpers
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from support.fakellm import ScriptedLLM  # noqa: E402
from support.sessions_support import KEY, KEY_ENV, fill, make_config, summarizer  # noqa: E402

import results  # noqa: E402  (benchmarks/results.py, beside this script)
from workstation import llm  # noqa: E402
from workstation.sessions import Session, SessionContext, compact  # noqa: E402
from workstation.sessions.turns import count as count_turns  # noqa: E402


def percentiles(samples: list[float], label: str | None = None) -> str:
    ms = sorted(s * 1000 for s in samples)
    if label:
        results.add(f"{label} p50", ms[len(ms) // 2], "ms")
        results.add(f"{label} p99", ms[min(len(ms) - 1, int(0.99 * len(ms)))], "ms")
    p = lambda q: ms[min(len(ms) - 1, int(q * len(ms)))]  # noqa: E731
    return f"p50 {p(0.5):7.2f} ms   p90 {p(0.9):7.2f} ms   p99 {p(0.99):7.2f} ms   mean {statistics.mean(ms):7.2f} ms"


def reply_loop(session: Session, config, replies: int) -> list[float]:
    """What the agent does per reply: record the user turn, then build the model's context."""
    times = []
    for n in range(replies):
        session.user(f"reply {n}: what next?")
        started = time.perf_counter()
        view = SessionContext.build(session, config)
        times.append(time.perf_counter() - started)
        assert view.messages
        time.sleep(0.01)  # the rest of a reply happens elsewhere (the model call)
    return times


def background_compactor(root: str, url: str, slug: str, ready, stop, done) -> None:
    """Compacts the session over and over until told to stop (run in a process or a thread)."""
    os.environ[KEY_ENV] = KEY
    llm.warm_import()
    config, paths = make_config(root, url, compact_threshold=60, keep_recent=40)
    session = Session(paths, slug)
    ready.set()
    count = 0
    while not stop.is_set():
        if compact(session, config, force=True, keep=2) is not None:
            count += 1
        else:
            time.sleep(0.005)  # nothing new to fold in yet
    done.value = count


def bench_reply_path(root: Path, url: str, turns: int, replies: int) -> None:
    config, paths = make_config(root, url, compact_threshold=60, keep_recent=40)
    session = Session.create(paths, "reply-path")
    fill(session, turns, tools=True, big=3000)
    compact(session, config)  # a realistic state: a summary plus the live window
    SessionContext.build(session, config)  # warm the reader and the token counter
    print(f"\n1. reply path: append a record + SessionContext.build, {turns}-record session, {replies} replies")
    print(f"   idle                               {percentiles(reply_loop(session, config, replies), 'reply path, idle')}")

    ctx = multiprocessing.get_context("spawn")
    ready, stop, done = ctx.Event(), ctx.Event(), ctx.Value("i", 0)
    worker = ctx.Process(target=background_compactor, args=(str(root), url, "reply-path", ready, stop, done))
    worker.start()
    ready.wait(120)  # the worker has imported litellm
    busy = reply_loop(session, config, replies)
    stop.set()
    worker.join()
    print(f"   compaction in another process      {percentiles(busy, 'reply path, compaction in another process')}   ({done.value} compactions meanwhile)")

    ready_t, stop_t, done_t = threading.Event(), threading.Event(), multiprocessing.Value("i", 0)
    thread = threading.Thread(target=background_compactor,
                              args=(str(root), url, "reply-path", ready_t, stop_t, done_t))
    thread.start()
    ready_t.wait(120)
    busy_thread = reply_loop(session, config, replies)
    stop_t.set()
    thread.join()
    print(f"   compaction in a thread (same GIL)  {percentiles(busy_thread, 'reply path, compaction in a thread')}   ({done_t.value} compactions meanwhile)")


def bench_compaction(root: Path, server: ScriptedLLM, turns: int) -> None:
    config, paths = make_config(root, server.url, compact_threshold=60, keep_recent=40)
    session = Session.create(paths, "thousand")
    fill(session, turns, tools=True, big=3000)
    view = session.read()
    already = len(server.requests)
    started = time.perf_counter()
    result = compact(session, config)
    elapsed = time.perf_counter() - started
    sent = sum(len(m["content"]) for body in server.requests[already:] for m in body["messages"])
    results.add(f"compaction of a {turns}-record session", elapsed, "s")
    print(f"\n2. compaction of a {turns}-record session ({count_turns(view.records)} turns, {view.size / 1e6:.1f} MB log) "
          "against the scripted server")
    print(f"   {elapsed:.2f} s wall for turns {result.first_turn}–{result.last_turn}: {result.record['calls']} model "
          f"calls (prompt-sized chunks), {sent / 1e3:.0f} k chars of prompt sent")
    started = time.perf_counter()
    SessionContext.build(Session(paths, "thousand"), config)
    print(f"   after it, a cold context build takes {(time.perf_counter() - started) * 1000:.1f} ms")


def bench_log(root: Path, turns: int) -> None:
    config, paths = make_config(root)
    session = Session.create(paths, "raw")
    times = []
    for n in range(300):
        started = time.perf_counter()
        session.user(f"turn {n}: " + "x" * 400)
        times.append(time.perf_counter() - started)
    print("\n3. the log itself")
    print(f"   append (one write + fsync, locked)  {percentiles(times, 'log append')}")
    big = Session.create(paths, "cold")
    fill(big, turns, tools=True, big=3000)
    cold = []
    for _ in range(10):
        started = time.perf_counter()
        Session(paths, "cold").read()
        cold.append(time.perf_counter() - started)
    print(f"   cold read of {turns} records          {percentiles(cold, 'log cold read')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--replies", type=int, default=200)
    args = parser.parse_args()
    os.environ[KEY_ENV] = KEY
    llm.warm_import()
    with tempfile.TemporaryDirectory() as tmp, ScriptedLLM(summarizer()) as server:
        root = Path(tmp)
        run = results.Run("bench_sessions", vars(args))
        print(f"sessions benchmark ({os.cpu_count()} cores, Python {sys.version.split()[0]})")
        bench_reply_path(root, server.url, args.turns, args.replies)
        bench_compaction(root, server, args.turns)
        bench_log(root, args.turns)
    run.save()


if __name__ == "__main__":
    main()
