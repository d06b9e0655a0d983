"""A daily user's first hour, timed on the installed app in a pseudo-terminal (issue 12).

    .venv/bin/python benchmarks/bench_daily.py [--runs 3] [--size 100x30]

Each run starts the real console script `workstation PATH --session SLUG` on a
fresh workspace (a tiny repository, a 30-turn session with a compaction, the
scripted model of tests/support/fakellm.py as `openai/test-model`) and, as a person would:

1. resume: the last message is on screen; shift+tab and Home show the first one;
2. edit `core.py` on disk from outside: the map pane shows its new line count;
3. ask something the model never answers (a 300 s delay): the status line says
   it waits for the model; escape gives control back (the chat says [cancelled]
   and the status line names the session again);
4. /archive, then /new, then chat again: each lands in a new session.

Times are from the key press (or the write to disk, or the spawn for the first)
until the terminal has received the text that shows it. Escape includes the
terminal's escape-key delay: Textual reports a lone ESC byte after ESCDELAY
(100 ms) at its next 0.1 s input poll, so 100-200 ms of it before the app sees it.
Prints each figure beside its target; asserts nothing, but exits 1 when a step
never showed at all.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from support.fakellm import Reply, ScriptedLLM  # noqa: E402
from support.pty_support import Terminal  # noqa: E402
from support.sessions_support import SUMMARY  # noqa: E402
from support.trust_support import user_config  # noqa: E402
import results  # noqa: E402, I001  (benchmarks/results.py, beside this script)

SLUG = "thirty-turns"
TARGETS = {"resume: last message drawn": None, "resume: first message after Home": None,
           "map: new line count after the edit": 1.0, "escape during a hung model call": 0.5,
           "/archive to a new session": None, "/new to a new session": None, "chat again: the answer": None}
CORE = '"""Core maths."""\n\n\ndef add(a, b):\n    return a + b\n\n\ndef twice(x):\n    return add(x, x)\n'
SHIFT_TAB, HOME, ESCAPE, ENTER, F3 = b"\x1b[Z", b"\x1b[H", b"\x1b", b"\r", b"\x1bOR"


def respond(body: dict) -> Reply:
    """The scripted model: summaries for /archive; never answers 'hang'; echoes anything else."""
    last = body["messages"][-1]
    text = str(last.get("content") or "")
    if str(body["messages"][0].get("content") or "").startswith("You compact"):  # its transcript says hang
        return Reply(text=SUMMARY.format(task="Answer the questions about the parts.", files="core.py"))
    if last.get("role") == "user" and "hang" in text:
        return Reply(text="too late", delay_s=300)
    return Reply(text=f"You said: {text[:60]}")


def workspace(root: Path, url: str) -> None:
    from workstation.paths import Paths
    from workstation.sessions.log import Session

    (root / "core.py").write_text(CORE)
    (root / "README.md").write_text("# tiny\n")
    (root / ".workstation").mkdir()
    # the endpoint in a user config home of the benchmark's own (a workspace's config never names one)
    user_config(f'[model]\nname = "openai/test-model"\napi_base = "{url}"\napi_key_env = "BENCH_DAILY_KEY"\n'
                'timeout_s = 600\nmax_retries = 0\n[index]\ndescribe_with_model = false\n', root.with_name(root.name + "-user-home"))
    session = Session.create(Paths.for_root(root), SLUG)
    for n in range(15):
        session.user(f"question {n}: what about part {n}?")
        session.assistant(f"answer {n}: part {n} is fine.")
        if n == 4:
            session.append("compact", summary="## Task & instructions\nparts", model="openai/compact",
                           reason="manual", covers={"first_turn": 1, "last_turn": 10, "new_first_turn": 11})


def one_run(size: tuple[int, int]) -> dict[str, float]:
    script = Path(sys.executable).with_name("workstation")
    seen: dict[str, float] = {}
    # ignore_cleanup_errors: after a failed step the app's sidecar may still be writing for a moment
    with ScriptedLLM(respond) as llm, tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        workspace(root, llm.url)
        env = dict(os.environ, BENCH_DAILY_KEY="not-a-secret")
        with Terminal([str(script), str(root), "--session", SLUG], root, size=size, env=env) as term:
            start = time.perf_counter()

            def timed(name: str, *needles: bytes, since: int, t0: float, timeout: float = 60.0) -> None:
                term.wait_for(*needles, since=since, timeout=timeout)
                seen[name] = time.perf_counter() - t0

            # 1. resume: the end of the conversation, then its first message
            timed("resume: last message drawn", b"answer 14: part 14 is fine.", since=0, t0=start)
            term.wait_for(b"core.py", b"session thirty-turns", timeout=60)  # the map and the status line
            mark, t0 = term.mark(), time.perf_counter()
            term.send(SHIFT_TAB)
            time.sleep(0.2)  # the focus moves to the transcript before Home
            term.send(HOME)
            timed("resume: first message after Home", b"question 0: what about part 0?", since=mark, t0=t0)
            # 2. the map follows an edit made outside the app
            time.sleep(0.5)  # the watcher is up once the map has drawn
            mark, t0 = term.mark(), time.perf_counter()
            (root / "core.py").write_text("import math\n\n\n" + CORE + "\n\ndef root(x):\n    return math.sqrt(x)\n")
            timed("map: new line count after the edit", b"core.py 16L", since=mark, t0=t0)
            # 3. escape while the model never answers
            term.send(F3)  # back to the prompt
            time.sleep(0.2)
            term.send(b"please hang" + ENTER)
            term.wait_for(b"waiting for openai/test-model", timeout=60)
            time.sleep(0.5)
            mark, t0 = term.mark(), time.perf_counter()
            term.send(ESCAPE)
            timed("escape during a hung model call", b"[cancelled]", b"session thirty-turns", since=mark, t0=t0)
            # 4. /archive, /new, chat again
            mark, t0 = term.mark(), time.perf_counter()
            term.send(b"/archive" + ENTER)
            timed("/archive to a new session", b"a new session:", since=mark, t0=t0)
            mark, t0 = term.mark(), time.perf_counter()
            term.send(b"/new" + ENTER)
            timed("/new to a new session", b"a new session:", since=mark, t0=t0)
            mark, t0 = term.mark(), time.perf_counter()
            term.send(b"hello again" + ENTER)
            timed("chat again: the answer", b"You said: hello again", since=mark, t0=t0)
            term.send(b"\x11")  # ctrl+q
            term.wait_exit(30)
        from workstation.paths import Paths

        archived = list(Paths.for_root(root).archive.glob(f"{SLUG}*"))
        if not archived:
            raise RuntimeError(f"/archive left no archive of {SLUG}")
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--size", default="100x30", help="terminal COLUMNSxLINES (default 100x30)")
    args = parser.parse_args()
    size = tuple(int(n) for n in args.size.split("x"))
    timings: dict[str, list[float]] = {name: [] for name in TARGETS}
    load = os.getloadavg()[0]
    for _ in range(args.runs):
        try:
            for name, seconds in one_run(size).items():
                timings[name].append(seconds)
        except (TimeoutError, RuntimeError) as err:
            print(f"a step never showed: {err}")
            sys.exit(1)
    run = results.Run("bench_daily", vars(args))
    print(f"the installed app on a {size[0]}x{size[1]} pseudo-terminal, {args.runs} runs (median / worst):")
    for name, target in TARGETS.items():
        values = timings[name]
        median, worst = statistics.median(values) * 1000, max(values) * 1000
        verdict = "" if target is None else f"   target < {target * 1000:.0f} ms: " + (
            "met" if max(values) < target else "MISSED")
        print(f"  {name:<38} {median:6.0f} ms  {worst:6.0f} ms{verdict}")
        run.add(f"{name} median", median, "ms")
        run.add(f"{name} worst", worst, "ms")
    print(f"  load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, on {os.cpu_count()} cores")
    run.save()


if __name__ == "__main__":
    main()
