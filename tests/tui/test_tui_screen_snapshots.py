"""Snapshots of the sessions, confirm, reflection and replay screens over fixed data (logs with fixed times and ids)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from textual.app import App
from tui_support import SIZE, settle

from workstation.memory.episodic import TOOL_CALL
from workstation.replay import Episode
from workstation.runtime import Workspace
from workstation.sessions import archive as archive_mod
from workstation.sessions.log import Session
from workstation.tui.panes import turn_render
from workstation.tui.screens.replay import ReplayApp, register_themes
from workstation.tui.screens.reflection import ReflectionScreen
from workstation.tui.screens.sessions import SessionsScreen

THEMES = ["workstation-dark", "workstation-light", "workstation-high-contrast"]
DEMO = min((Path(__file__).resolve().parents[2] / "sessions").glob("demo-*.jsonl"))


class ScreenApp(App):
    """One screen of the workstation in a workstation theme; nothing blinks or moves."""

    CSS_PATH = Path(__file__).resolve().parents[2] / "workstation" / "tui" / "app.tcss"

    def __init__(self, screen, theme: str = "workstation-dark") -> None:
        super().__init__()
        self.animation_level = "none"
        register_themes(self, theme)
        self.first = screen

    def on_mount(self) -> None:
        for name in (turn_render.MARKDOWN, "python"):
            turn_render.warm(name)
        self.push_screen(self.first)


def fixed_log(path: Path, day: str = "2025-01-31", hour: str = "09:12") -> None:
    """Give every record of a log a fixed id and time (a second apart), keeping references between them."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    ids = {r["id"]: f"18d4c2a9{n:03x}-0a0b{n:02d}" for n, r in enumerate(records)}
    lines = []
    for n, record in enumerate(records):
        line = json.dumps({**record, "ts": f"{day}T{hour}:{n:02d}.000Z"}, ensure_ascii=False, separators=(",", ":"))
        for old, new in ids.items():
            line = line.replace(old, new)
        lines.append(line + "\n")
    path.write_text("".join(lines))


@pytest.fixture
def ws(tmp_path):
    """The demo episode as a live session, one archived session and one live one, all with fixed times."""
    workspace = Workspace(tmp_path)
    shutil.copy(DEMO, workspace.paths.sessions / DEMO.name)
    for slug, turns in (("2025-01-31-fix-the-loader", ["Fix the loader", "Done: it reads lazily now."]),
                        ("2025-01-30-rename-keys", ["Rename the config keys", "Renamed three keys."])):
        session = Session.create(workspace.paths, slug)
        session.user(turns[0])
        session.assistant(turns[1], context_tokens=512)
        fixed_log(session.path, *(("2025-01-31", "09:12") if "loader" in slug else ("2025-01-30", "17:40")))
    archive_mod.archive(workspace.paths, "2025-01-30-rename-keys", workspace.config)
    yield workspace
    workspace.close()


def test_sessions_screen(snap_compare, ws):
    assert snap_compare(ScreenApp(SessionsScreen(ws, current=DEMO.stem)), terminal_size=SIZE, run_before=settle)


@pytest.mark.parametrize("size", [(80, 24), (100, 30)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("theme", THEMES)
def test_sessions_screen_in_small_terminals(snap_compare, ws, theme, size):
    screen = SessionsScreen(ws, current=DEMO.stem)
    assert snap_compare(ScreenApp(screen, theme), terminal_size=size, run_before=settle)


def test_confirm_over_the_sessions_screen(snap_compare, ws):
    async def ask(pilot):
        await settle(pilot)
        screen = pilot.app.screen
        screen.table.move_cursor(row=screen.table.get_row_index("2025-01-31-fix-the-loader"), animate=False)
        await pilot.press("a")
        await settle(pilot)

    assert snap_compare(ScreenApp(SessionsScreen(ws, current=DEMO.stem)), terminal_size=SIZE, run_before=ask)


def test_reflection_screen(snap_compare, ws):
    memory = ws.memory(session=DEMO.stem)
    for name, calls, failed in (("replace_lines", 9, 0), ("file_meta", 4, 0), ("grep", 2, 0), ("read_lines", 2, 1)):
        for n in range(calls):
            ok = n >= failed
            memory.episodic.record(TOOL_CALL, name, ok=ok, outcome="ok" if ok else "error", duration_ms=10.0 + n,
                                   error=None if ok else "no such file")
    memory.close()
    screen = ReflectionScreen(ws, session=DEMO.stem, query="tool_latency")
    assert snap_compare(ScreenApp(screen), terminal_size=SIZE, run_before=settle)


@pytest.mark.parametrize("theme", THEMES)
def test_replay_of_the_demo(snap_compare, theme, warm_renderer):
    async def to_step_12(pilot):
        await settle(pilot)
        pilot.app.screen.seek(11)
        await settle(pilot)

    app = ReplayApp(Episode.load(str(DEMO)), theme=theme)
    app.animation_level = "none"
    assert snap_compare(app, terminal_size=SIZE, run_before=to_step_12)


def test_replay_of_the_demo_at_80x24(snap_compare, warm_renderer):
    """The chat keeps 40 of 80 columns beside memory, recall and timeline (it had 22 once)."""
    async def to_step_12(pilot):
        await settle(pilot)
        pilot.app.screen.seek(11)
        await settle(pilot)

    app = ReplayApp(Episode.load(str(DEMO)))
    app.animation_level = "none"
    assert snap_compare(app, terminal_size=(80, 24), run_before=to_step_12)


def test_replay_at_a_compaction(snap_compare, tmp_path, warm_renderer):
    """A compaction marker in the chat, the summary in effect in the status, the event in the timeline."""
    import test_tui_replay

    paths, session = test_tui_replay.compacted_log(tmp_path)
    fixed_log(session.path)
    episode = Episode.load(paths, "compacted")

    async def to_compaction(pilot):
        await settle(pilot)
        pilot.app.screen.seek([s.kind for s in episode.steps].index("compact"))
        await settle(pilot)

    app = ReplayApp(episode)
    app.animation_level = "none"
    assert snap_compare(app, terminal_size=SIZE, run_before=to_compaction)


def test_a_plan_to_approve_at_80x24(snap_compare):
    from workstation.tui.screens.plan import PlanScreen

    plan = ("Plan:\n\n1. In `pkg/util.py`, make `clean` lowercase its result.\n2. Add a test of it in "
            "`tests/test_util.py`.\n3. Run `pytest -q tests/test_util.py`.")
    assert snap_compare(ScreenApp(PlanScreen(plan)), terminal_size=(80, 24), run_before=settle)
