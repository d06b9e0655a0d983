"""TUI benchmark: first paint, and append/scroll latency on a 10,000-turn transcript.

    .venv/bin/python benchmarks/bench_tui.py [--runs 7] [--turns 10000] [--imports]

First paint is measured as a person sees it: the installed console script
`workstation PATH` (on a copy of workstation/) runs on a 160x48 pseudo-terminal,
and the clock runs from spawning the process until the terminal has received the
four pane titles and the prompt. Interpreter start-up, every import, the
terminal set-up and the first frame all count. Target for the product: < 0.5 s.
The same terminal also times the footer's keys, the workspace opening (the
status line names the session, after DuckDB and the index start) and, between
runs, a bare Textual app: the floor no Textual app goes under on this machine.
Each run quits with ctrl+q, as a person would.
Append: one more turn on a transcript that already holds --turns turns, timed
for the call alone and for the call plus rendering the visible lines.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "tui"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from support.pty_support import Terminal  # noqa: E402

import results  # noqa: E402  (benchmarks/results.py, beside this script)


# What the first frame must show: the four pane titles and the prompt.
FIRST_FRAME = tuple(f"─ {title} ─".encode() for title in ("Knowledge map", "Chat", "Memory", "Timeline")) \
    + (b"Ask, or / for commands",)
FOOTER = b"Reflection"  # the footer's keys fill in a frame later, as in any Textual app
OPENED = b"session "  # the status line names the session once the workspace is open
BARE_APP = """
from textual.app import App
from textual.widgets import Footer, Static

class Bare(App):
    def compose(self):
        yield Static("─ Knowledge map ─ ─ Chat ─ ─ Memory ─ ─ Timeline ─ Ask, or / for commands")
        yield Footer()

Bare().run()
"""
def _pty_run(argv: list[str], marks: dict[str, tuple[bytes, ...]], timeout: float = 20.0) -> dict[str, float]:
    """Run argv on a 160x48 pseudo-terminal; seconds from spawn until each mark's texts were all drawn.

    Then quit with ctrl+q as a person would (the app stops its sidecar) and wait for the exit.
    """
    with Terminal(argv, ROOT) as term:
        seen = {name: term.wait_for(*needles, timeout=timeout) for name, needles in marks.items()}
        term.send(b"\x11")  # ctrl+q
        term.wait_exit(15)
    return seen


def first_paint(runs: int) -> None:
    """The real console script on a terminal, against a bare Textual app on the same terminal."""
    import shutil
    import tempfile

    script = Path(sys.executable).with_name("workstation")
    modules = ROOT / "workstation"
    compiled = any(modules.glob("__pycache__/*.pyc"))
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "repo"
        shutil.copytree(modules, workspace / "workstation", ignore=shutil.ignore_patterns("__pycache__"))
        real: dict[str, list[float]] = {"first frame": [], "footer": [], "opened": []}
        bare: list[float] = []
        for _ in range(runs):  # interleaved, so a busy moment hits both alike
            seen = _pty_run([str(script), str(workspace)],
                            {"first frame": FIRST_FRAME, "footer": (FOOTER,), "opened": (OPENED,)})
            for name, at in seen.items():
                real[name].append(at)
            bare.append(_pty_run([sys.executable, "-c", BARE_APP], {"first frame": FIRST_FRAME})["first frame"])
    print(f"first paint on a 160x48 pseudo-terminal, {runs} runs (median / best), from spawning the process:")
    labels = {"first frame": "four panes and the prompt", "footer": "footer keys",
              "opened": "workspace open (status names the session)"}
    for name, label in labels.items():
        results.add(f"first paint: {label}, median", statistics.median(real[name]) * 1000, "ms")
        print(f"  `workstation PATH` {label:<42} {statistics.median(real[name]) * 1000:5.0f} ms"
              f"  {min(real[name]) * 1000:5.0f} ms")
    results.add("first paint: bare Textual app, median", statistics.median(bare) * 1000, "ms")
    results.add("first paint: first frame / bare Textual",
                statistics.median(real["first frame"]) / statistics.median(bare), "x")
    print(f"  bare Textual app (one Static, a Footer)                      {statistics.median(bare) * 1000:5.0f} ms"
          f"  {min(bare) * 1000:5.0f} ms   (the floor)")
    print(f"  target: first frame < 500 ms; load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores;"
          f" workstation/ bytecode {'compiled' if compiled else 'NOT compiled (run: python -m compileall workstation)'}")


def import_profile(top: int = 12) -> None:
    """The slowest imports of the app module, from python -X importtime."""
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", "import workstation.tui.app"],
                         capture_output=True, text=True, cwd=ROOT, check=True).stderr
    rows = []
    for line in err.splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _, cumulative, name = (part.strip() for part in line.removeprefix("import time:").split("|"))
            rows.append((int(cumulative), name))
    print("slowest imports (cumulative µs) of workstation.tui.app:")
    for cumulative, name in sorted(rows, reverse=True)[:top]:
        print(f"  {cumulative:>8}  {name}")


async def transcript_latency(turns: int) -> None:
    import tui_sample as sample_data
    from textual.geometry import Region
    from workstation.tui.app import WorkstationApp

    app = WorkstationApp()
    async with app.run_test(size=(160, 48)) as pilot:
        app.animation_level = "none"
        transcript = app.chat.transcript
        await pilot.pause()
        region = Region(0, 0, transcript.size.width, transcript.size.height)
        data = sample_data.synthetic_turns(turns)
        t = time.perf_counter()
        transcript.set_turns(data)
        load = time.perf_counter() - t
        t = time.perf_counter()
        transcript.render_lines(region)
        first_frame = time.perf_counter() - t
        await pilot.pause()
        await app.workers.wait_for_complete()  # markdown and lexers load after that frame
        await pilot.pause()

        calls, frames = [], []
        for n in range(50):
            turn = sample_data.synthetic_turns(1, start=turns + n)[0]
            t = time.perf_counter()
            transcript.append(turn)
            calls.append(time.perf_counter() - t)
            transcript.render_lines(region)
            frames.append(time.perf_counter() - t)
        await pilot.pause()

        pages = []
        transcript.focus()
        await pilot.press("home")
        await pilot.pause()
        for _ in range(40):  # page down through turns never rendered before
            t = time.perf_counter()
            transcript.action_page_down()
            transcript.render_lines(region)
            pages.append(time.perf_counter() - t)
        cached = len(transcript._strips)

    def ms(values, q):
        return statistics.quantiles(values, n=100)[q - 1] * 1000 if len(values) > 1 else values[0] * 1000

    for label, value in ((f"transcript: set_turns({turns:,})", load * 1000),
                         ("transcript: first frame of the view", first_frame * 1000),
                         ("transcript: append call p50", ms(calls, 50)),
                         ("transcript: append + render view p50", ms(frames, 50)),
                         ("transcript: append + render view p99", ms(frames, 99)),
                         ("transcript: page down + render p50", ms(pages, 50)),
                         ("transcript: page down + render p99", ms(pages, 99))):
        results.add(label, value, "ms")
    print(f"transcript with {turns:,} turns:")
    print(f"  set_turns({turns:,})             {load * 1000:7.1f} ms")
    print(f"  first frame of the view          {first_frame * 1000:7.1f} ms"
          "   (replies plain until markdown loads)")
    print(f"  append call            p50 {ms(calls, 50):6.3f} ms   p99 {ms(calls, 99):6.3f} ms")
    print(f"  append + render view   p50 {ms(frames, 50):6.3f} ms   p99 {ms(frames, 99):6.3f} ms")
    print(f"  page down + render     p50 {ms(pages, 50):6.3f} ms   p99 {ms(pages, 99):6.3f} ms")
    print(f"  turns rendered and cached after all that: {cached} of {turns + 50:,}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--imports", action="store_true", help="also list the slowest imports")
    args = parser.parse_args()
    os.environ["TZ"] = "UTC"
    time.tzset()
    run = results.Run("bench_tui", {k: v for k, v in vars(args).items() if k != "imports"})
    first_paint(args.runs)
    if args.imports:
        import_profile()
    asyncio.run(transcript_latency(args.turns))
    run.save()


if __name__ == "__main__":
    main()
