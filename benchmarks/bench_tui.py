"""TUI benchmark: first paint, and append/scroll latency on a 10,000-turn transcript.

    /tmp/wsvenv/bin/python benchmarks/bench_tui.py [--runs 5] [--turns 10000] [--imports]

First paint: wall time from just before the interpreter is spawned to the end of
the app's first screen refresh (headless, 160x48), so interpreter start-up and
every import count. Target for the product: < 0.5 s. As in the real app, data
arrives after the first frame (the backend feeds panes from a worker): the
benchmark then loads the sample data into every pane and times that frame too.
CPU seconds of the process are printed beside wall time: on a shared machine
they say what the app costs, wall time says what a user waits.
Append: one more turn on a transcript that already holds --turns turns, timed
for the call alone and for the call plus rendering the visible lines.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "tui"))
sys.path.insert(0, str(ROOT))


def baseline_child() -> None:
    """The floor: a bare Textual app (one Static and a Footer) painting once."""
    from textual.app import App
    from textual.widgets import Footer, Static

    class Bare(App):
        def compose(self):
            yield Static("workstation")
            yield Footer()

        def on_mount(self) -> None:
            self.call_after_refresh(lambda: self.exit((time.time(), time.process_time())))

    print(json.dumps(Bare().run(headless=True, size=(160, 48))))


def child() -> None:
    """Runs in the spawned interpreter: start the app, report when it has painted."""
    from workstation.tui.app import WorkstationApp

    marks = {"imported": (time.time(), time.process_time())}
    import tui_sample as sample_data

    class PaintApp(WorkstationApp):
        def on_mount(self) -> None:
            marks["mounted"] = (time.time(), time.process_time())
            self.call_after_refresh(self.first_frame)

        def first_frame(self) -> None:
            marks["painted"] = (time.time(), time.process_time())
            sample_data.load(self)
            self.call_after_refresh(self.data_frame)

        def data_frame(self) -> None:
            marks["data"] = (time.time(), time.process_time())
            self.exit()

    PaintApp().run(headless=True, size=(160, 48))
    heavy = [m for m in ("duckdb", "litellm", "tree_sitter") if m in sys.modules]
    print(json.dumps({"marks": marks, "heavy": heavy}))


def live_child(workspace: str) -> None:
    """The real command's path: the console script's module, the theme peek, the live backend."""
    import workstation.launch  # noqa: F401  (what the console script imports first)
    from workstation.tui.app import WorkstationApp
    from workstation.tui.launch import configured_theme
    from workstation.tui.backend import LiveBackend

    marks = {}

    class PaintApp(WorkstationApp):
        def on_mount(self) -> None:
            super().on_mount()  # starts the backend worker, as the real app does
            self.call_after_refresh(self.first_frame)

        def first_frame(self) -> None:
            marks["painted"] = (time.time(), time.process_time())
            self.exit()

    backend = LiveBackend(workspace, sidecar=False)
    PaintApp(backend, theme=configured_theme(workspace)).run(headless=True, size=(160, 48))
    print(json.dumps({"marks": marks}))


def live_first_paint(runs: int) -> None:
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "repo"
        shutil.copytree(ROOT / "workstation", workspace / "workstation")
        walls, cpus = [], []
        for _ in range(runs):
            start = time.time()
            out = subprocess.run([sys.executable, __file__, "--live-child", str(workspace)], capture_output=True,
                                 text=True, cwd=ROOT, check=True).stdout
            at, cpu_at = json.loads(out.strip().splitlines()[-1])["marks"]["painted"]
            walls.append(at - start)
            cpus.append(cpu_at)
    print(f"first paint of `workstation PATH` (live backend on a copy of workstation/, {runs} runs): median {statistics.median(walls) * 1000:.0f} ms wall,"
          f" {statistics.median(cpus) * 1000:.0f} ms cpu, best {min(walls) * 1000:.0f} ms wall")


def first_paint(runs: int) -> None:
    env = dict(os.environ, TZ="UTC")
    phases = ("imported", "mounted", "painted", "data")
    wall: dict[str, list[float]] = {p: [] for p in phases}
    cpu: dict[str, list[float]] = {p: [] for p in phases}
    heavy: list[str] = []
    for _ in range(runs):
        start = time.time()
        out = subprocess.run([sys.executable, __file__, "--child"], capture_output=True, text=True,
                             env=env, cwd=ROOT, check=True).stdout
        data = json.loads(out.strip().splitlines()[-1])
        for phase in phases:
            at, cpu_at = data["marks"][phase]
            wall[phase].append(at - start)
            cpu[phase].append(cpu_at)  # process CPU since the interpreter started
        heavy = data["heavy"]
    print(f"first paint ({runs} runs, headless 160x48; median wall / median process CPU / best wall):")
    labels = {"imported": "imports done", "mounted": "screen mounted",
              "painted": "first paint", "data": "sample data painted"}
    for phase in phases:
        print(f"  {labels[phase]:<20} {statistics.median(wall[phase]) * 1000:6.0f} ms wall"
              f"  {statistics.median(cpu[phase]) * 1000:6.0f} ms cpu"
              f"  {min(wall[phase]) * 1000:6.0f} ms best")
    floor = []
    for _ in range(runs):
        start = time.time()
        out = subprocess.run([sys.executable, __file__, "--baseline-child"], capture_output=True,
                             text=True, env=env, cwd=ROOT, check=True).stdout
        at, cpu_at = json.loads(out.strip().splitlines()[-1])
        floor.append((at - start, cpu_at))
    print(f"  {'bare Textual app':<20} {statistics.median(f[0] for f in floor) * 1000:6.0f} ms wall"
          f"  {statistics.median(f[1] for f in floor) * 1000:6.0f} ms cpu"
          f"  {min(f[0] for f in floor) * 1000:6.0f} ms best   (the floor: one Static and a Footer)")
    load = os.getloadavg()[0]
    print(f"  target: first paint < 500 ms; load average now {load:.1f} on {os.cpu_count()} cores")
    print(f"  heavy modules loaded: {heavy or 'none'}")


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
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--baseline-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--live-child", metavar="WORKSPACE", help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--imports", action="store_true", help="also list the slowest imports")
    args = parser.parse_args()
    if args.child:
        child()
        return
    if args.baseline_child:
        baseline_child()
        return
    if args.live_child:
        live_child(args.live_child)
        return
    os.environ["TZ"] = "UTC"
    time.tzset()
    first_paint(args.runs)
    live_first_paint(args.runs)
    if args.imports:
        import_profile()
    asyncio.run(transcript_latency(args.turns))


if __name__ == "__main__":
    main()
