"""The confirm dialog, the sessions screen and the reflection screen, on real workspaces in tmp_path."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from textual.app import App
from textual.widgets import DataTable
from tui_support import SIZE, RecordingBackend, settle, started

from workstation.memory import reflect
from workstation.memory.episodic import MODEL_CALL, TOOL_CALL
from workstation.runtime import Workspace
from workstation.sessions.records import from_dict
from workstation.sessions import archive as archive_mod
from workstation.sessions import catalog
from workstation.sessions.log import Session
from workstation.tui.app import WorkstationApp
from workstation.tui.screens.replay import ReplayScreen
from workstation.tui.screens.compact import CompactScreen
from workstation.tui.screens.confirm import ConfirmScreen
from workstation.tui.screens.reflection import (
    ReflectionScreen,
    context_series,
    tool_usage,
)
from workstation.tui.screens.sessions import SessionsScreen


class WorkspaceBackend(RecordingBackend):
    """Records requests, and has the workspace the screens work on (as LiveBackend.workspace)."""

    def __init__(self, ws, session_slug: str | None = None) -> None:
        super().__init__(workspace=ws, session_slug=session_slug)


class ScreenApp(App):
    """A bare app showing one screen: the screens need nothing from the main layout."""

    def __init__(self, screen) -> None:
        super().__init__()
        self.first = screen

    def on_mount(self) -> None:
        self.push_screen(self.first)


@pytest.fixture
def ws(tmp_path):
    workspace = Workspace(tmp_path)
    yield workspace
    workspace.close()


def fill_sessions(ws) -> None:
    """alpha and beta live, gamma archived (no compact model: archived without a fresh summary)."""
    alpha = Session.create(ws.paths, "alpha")
    alpha.user("Fix the loader")
    alpha.assistant("Reading it first.", context_tokens=900)
    beta = Session.create(ws.paths, "beta")
    beta.user("Rename the config keys")
    gamma = Session.create(ws.paths, "gamma")
    gamma.user("An old question")
    gamma.assistant("An old answer")
    archive_mod.archive(ws.paths, "gamma", ws.config)


def cursor_to(screen: SessionsScreen, slug: str) -> None:
    screen.table.move_cursor(row=screen.table.get_row_index(slug), animate=False)


def states(ws) -> dict[str, str]:
    return {i.slug: i.state for i in catalog.list_sessions(ws.paths, archived=True)}


def notices(app) -> list[str]:
    return [n.message for n in app._notifications]


# --------------------------------------------------------------------------- confirm
@pytest.mark.parametrize("keys,answer", [(["y"], True), (["n"], False), (["escape"], False),
                                         (["enter"], False), (["tab", "enter"], True)])
async def test_confirm_answers_by_key_and_never_yes_by_default(keys, answer):
    answers: list[bool] = []
    app = App()
    async with started(app, size=(80, 24)) as pilot:
        app.push_screen(ConfirmScreen("Archive beta?"), answers.append)
        await pilot.pause()
        assert "Archive beta?" in str(app.screen.query_one("#confirm-question").render())
        await pilot.press(*keys)
        await pilot.pause()
        assert answers == [answer] and not isinstance(app.screen, ConfirmScreen)


async def test_confirm_buttons_answer():
    answers: list[bool] = []
    app = App()
    async with started(app, size=(80, 24)) as pilot:
        for button in ("#confirm-yes", "#confirm-no"):
            app.push_screen(ConfirmScreen("Go?"), answers.append)
            await pilot.pause()
            await pilot.click(button)
            await pilot.pause()
    assert answers == [True, False]


# --------------------------------------------------------------------------- sessions
async def test_f6_lists_live_and_archived_sessions_and_escape_returns(ws):
    fill_sessions(ws)
    app = WorkstationApp(WorkspaceBackend(ws))
    async with started(app) as pilot:
        app.map.set_progress(1, 10)  # textual's ProgressBar brings a `Bar { width: 32 }` rule along
        await pilot.press("f6")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        assert screen.status.region.width == SIZE[0]
        assert {slug: info.state for slug, info in screen.sessions.items()} == {
            "alpha": "live", "beta": "live", "gamma": "archived"}
        table = screen.table
        assert table.row_count == 3
        row = table.get_row("alpha")
        assert row[1:5] == ["alpha", "live", "1", ""] and row[7] == "Fix the loader"  # one user message: 1 turn
        assert "1 archived" in str(screen.query_one("#sessions-title").render())
        # the panes' keys leave the footer while the screen covers them; F6 again changes nothing
        assert not app.check_action("focus_pane", ("chat",))
        await pilot.press("f6")
        await pilot.pause()
        assert app.screen is screen
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.screen_stack[0] and app.check_action("focus_pane", ("chat",))


async def test_the_sessions_screen_shows_the_files_each_session_changed(ws):
    edit = {"path": "pkg/a.py", "op": "edit", "diff": "", "added": 1, "removed": 1}
    alpha = Session.create(ws.paths, "alpha")
    alpha.user("Fix the loader")
    alpha.append("tool", tool_call_id="c1", name="edit_file", content="done", ok=True, edits=[edit])
    alpha.append("tool", tool_call_id="c2", name="move_file", content="moved", ok=True,
                  edits=[{"path": "old.py", "op": "move", "to": "new.py"}, {"path": "new.py", "op": "move"}])
    alpha.append("tool", tool_call_id="c3", name="write_file", content="refused", ok=False,
                  edits=[{"path": "never.py", "op": "create"}])
    gamma = Session.create(ws.paths, "gamma")
    gamma.user("An old question")
    gamma.append("tool", tool_call_id="c1", name="write_file", content="created", ok=True,
                 edits=[{"path": "gone.py", "op": "create"}])
    archive_mod.archive(ws.paths, "gamma", ws.config)
    app = ScreenApp(SessionsScreen(ws))
    async with started(app) as pilot:
        await settle(pilot)
        screen = app.screen
        cursor_to(screen, "alpha")
        await pilot.pause()
        detail = str(screen.query_one("#sessions-detail").render())
        assert "changed 3 files: pkg/a.py, old.py, new.py" in detail and "never.py" not in detail
        cursor_to(screen, "gamma")  # an archived one, from its metadata
        await pilot.pause()
        assert "changed 1 file: gone.py" in str(screen.query_one("#sessions-detail").render())


async def test_palette_opens_sessions_and_reflection(ws):
    fill_sessions(ws)
    app = WorkstationApp(WorkspaceBackend(ws))
    async with started(app) as pilot:
        await pilot.pause()
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        commands["Reflection"].callback()
        await settle(pilot)
        assert isinstance(app.screen, ReflectionScreen)
        commands["Sessions"].callback()  # replaces the reflection screen, does not stack on it
        await settle(pilot)
        assert isinstance(app.screen, SessionsScreen) and len(app.screen_stack) == 2


async def test_export_writes_markdown_and_json_into_the_workspace(ws):
    fill_sessions(ws)
    app = ScreenApp(SessionsScreen(ws))
    async with started(app) as pilot:
        await settle(pilot)
        screen = app.screen
        for slug, key, fmt in (("alpha", "e", "md"), ("gamma", "j", "json")):
            cursor_to(screen, slug)
            await pilot.press(key)
            await settle(pilot)
            path = ws.paths.state / "exports" / f"{slug}.{fmt}"
            assert screen.last_export == str(path)
            assert path.read_text() == catalog.export(ws.paths, slug, fmt)
            assert str(path) in screen.status.text
        assert json.loads(path.read_text())["state"] == "archived"
        assert "Fix the loader" in (ws.paths.state / "exports" / "alpha.md").read_text()


async def test_archive_asks_first_and_restore_brings_it_back(ws):
    fill_sessions(ws)
    app = ScreenApp(SessionsScreen(ws))
    async with started(app) as pilot:
        await settle(pilot)
        screen = app.screen
        cursor_to(screen, "beta")
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen) and "Archive beta?" in app.screen.question
        await pilot.press("n")
        await settle(pilot)
        assert states(ws)["beta"] == "live"
        await pilot.press("a", "y")
        await settle(pilot)
        assert states(ws)["beta"] == "archived"
        assert screen.sessions["beta"].state == "archived"  # the list reloaded
        assert "archived beta without a fresh summary: no model to compact with: set model.name or memory.compact_model" in screen.status.text
        cursor_to(screen, "beta")
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await settle(pilot)
        assert states(ws)["beta"] == "live" and screen.sessions["beta"].state == "live"
        assert [r["content"] for r in Session.open(ws.paths, "beta").read().turns] == ["Rename the config keys"]


async def test_changes_that_make_no_sense_are_refused_without_asking(ws):
    fill_sessions(ws)
    app = ScreenApp(SessionsScreen(ws, current="alpha"))
    async with started(app) as pilot:
        await settle(pilot)
        screen = app.screen
        assert screen.table.get_row("alpha")[0] == "●"
        cursor_to(screen, "alpha")
        await pilot.press("a")  # the chat's own session
        cursor_to(screen, "beta")
        await pilot.press("r")  # live already
        cursor_to(screen, "gamma")
        await pilot.press("a", "c")  # archived already; archived sessions are not compacted
        await settle(pilot)
        assert app.screen is screen
        assert states(ws) == {"alpha": "live", "beta": "live", "gamma": "archived"}
        said = notices(app)
        assert any("alpha is open in the chat" in n for n in said)
        assert any("beta is live already" in n for n in said)
        assert any("gamma is archived already" in n for n in said)
        assert any("gamma is archived (summarized when it was archived)" in n for n in said)


async def test_compact_without_a_compact_model_says_why_and_keeps_the_log(ws):
    session = Session.create(ws.paths, "long")
    for n in range(50):
        session.user(f"question {n}")
        session.assistant(f"answer {n}")
    before = session.path.read_bytes()
    app = ScreenApp(SessionsScreen(ws))
    async with started(app) as pilot:
        await settle(pilot)
        await pilot.press("c")
        await settle(pilot)
        assert isinstance(app.screen, CompactScreen)
        await pilot.press("enter")
        await settle(pilot)
        assert "compaction of long skipped: no model to compact with: set model.name or memory.compact_model" \
            in app.screen.status.text
        assert session.path.read_bytes() == before
    memory = ws.memory()
    (event,) = memory.episodic.query(types=["compaction"])  # the failure is on the record for reflection
    memory.close()
    assert event["ok"] is False and event["data"]["reason"].startswith("no model to compact with")


async def test_compact_with_a_model_appends_a_summary(tmp_path, scripted_llm, monkeypatch):
    from support.fakellm import Reply
    from support.sessions_support import KEY, KEY_ENV, SUMMARY

    monkeypatch.setenv(KEY_ENV, KEY)
    ws = Workspace(tmp_path, overrides={
        "model": {"name": "openai/chat", "api_base": scripted_llm.url, "api_key_env": KEY_ENV,
                  "timeout_s": 5.0, "max_retries": 0, "context_window": 100_000},
        "memory": {"compact_model": "openai/compact", "compact_threshold": 20, "keep_recent": 4}})
    try:
        session = Session.create(ws.paths, "long")
        for n in range(6):
            session.user(f"question {n}")
            session.assistant(f"answer {n}")
        scripted_llm.push(Reply(text=SUMMARY.format(task="Answer the questions.", files="(none)")))
        app = ScreenApp(SessionsScreen(ws))
        async with started(app) as pilot:
            await settle(pilot)
            await pilot.press("c")
            await settle(pilot)
            await pilot.press("enter")  # the default keep count: memory.keep_recent
            await settle(pilot)
            screen = app.screen
            # 6 turns, keeping the newest 4
            assert "compacted turns 1–2 of long with openai/compact" in screen.status.text
            assert screen.sessions["long"].covered_turns == 2  # the list shows it
            assert screen.table.get_row("long")[4] == "1–2"
        (compact,) = session.read().compacts()
        assert "Answer the questions." in compact["summary"]
        memory = ws.memory()
        events = memory.episodic.query(types=["compaction"])
        memory.close()
        assert [e["data"]["last_turn"] for e in events] == [2]  # reflection sees it
    finally:
        ws.close()


async def test_resume_asks_the_backend_and_restores_an_archived_session_first(ws):
    fill_sessions(ws)
    backend = WorkspaceBackend(ws)
    app = WorkstationApp(backend)
    async with started(app) as pilot:
        await pilot.press("f6")
        await settle(pilot)
        cursor_to(app.screen, "beta")
        app.screen.table.focus()
        await pilot.press("enter")
        await settle(pilot)
        assert [m.slug for m in backend.named("on_sessions_screen_resume_requested")] == ["beta"]
        assert app.screen is app.screen_stack[0]
        await pilot.press("f6")
        await settle(pilot)
        cursor_to(app.screen, "gamma")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen) and "Restore it" in app.screen.question
        await pilot.press("y")
        await settle(pilot)
        assert [m.slug for m in backend.named("on_sessions_screen_resume_requested")] == ["beta", "gamma"]
        assert states(ws)["gamma"] == "live"
        assert backend.threads and threading_main() not in backend.threads


def threading_main() -> str:
    import threading

    return threading.main_thread().name


async def test_replay_opens_from_the_sessions_screen(ws):
    fill_sessions(ws)
    app = ScreenApp(SessionsScreen(ws))
    async with started(app) as pilot:
        await settle(pilot)
        cursor_to(app.screen, "gamma")  # archived sessions replay too
        await pilot.press("p")
        await settle(pilot)
        replay = app.screen
        assert isinstance(replay, ReplayScreen) and replay.episode.name == "gamma"
        assert [t.text for t in replay.chat.transcript.turns] == ["An old question"]
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, SessionsScreen)


async def test_a_failed_operation_is_reported_on_one_line(ws):
    fill_sessions(ws)
    app = ScreenApp(SessionsScreen(ws))
    async with started(app) as pilot:
        await settle(pilot)
        screen = app.screen
        cursor_to(screen, "beta")
        Session.open(ws.paths, "beta").path.unlink()  # gone behind the screen's back
        await pilot.press("e")
        await settle(pilot)
        assert screen.status.text.startswith("export failed: no session named beta")
        assert any(n.startswith("export failed: no session named beta") and "\n" not in n for n in notices(app))
        assert "beta" not in screen.sessions  # the list was reloaded
        assert not (ws.paths.state / "exports" / "beta.md").exists()


async def test_without_a_workspace_the_screens_say_so():
    app = WorkstationApp(RecordingBackend())  # its workspace is not open (yet)
    async with started(app) as pilot:
        for key in ("f6", "f7"):
            await pilot.press(key)
            await settle(pilot)
            assert app.screen is app.screen_stack[0]
        assert notices(app).count("the workspace is still opening: try again in a moment") == 2


# --------------------------------------------------------------------------- reflection
def record_history(ws) -> None:
    """Two sessions in the log and in the episodic store: model calls with context sizes, one compaction."""
    session = Session.create(ws.paths, "s1")
    session.user("first question")
    for n, tokens in enumerate((1000, 1400, 1800)):
        last = session.assistant(f"step {n}", context_tokens=tokens)
        session.user(f"more {n}")
    session.append("compact", summary="## Task & instructions\nx", model="openai/compact", reason="manual",
                   covers={"first_turn": 1, "last_turn": 3, "last_id": last["id"]})
    session.assistant("after", context_tokens=700)
    memory = ws.memory(session="s1")
    for name, calls, ok in (("read_lines", 4, True), ("read_lines", 1, False), ("grep", 2, True)):
        for _ in range(calls):
            memory.episodic.record(TOOL_CALL, name, ok=ok, outcome="ok" if ok else "error", duration_ms=3.0)
    memory.episodic.record(MODEL_CALL, "m1", tokens_in=10, tokens_out=2, context_tokens=1000, ok=True,
                           duration_ms=100.0)
    memory.close()
    other = ws.memory(session="s2")
    other.episodic.record(TOOL_CALL, "find", ok=True, outcome="ok", duration_ms=9.0)
    other.close()


def test_context_series_marks_compactions_at_their_turn():
    records = [from_dict({"v": 1, "id": f"r{i}", **r}) for i, r in enumerate([
        {"type": "user"}, {"type": "assistant", "context_tokens": 100}, {"type": "tool"},
        {"type": "assistant", "context_tokens": 300}, {"type": "redaction"},
        {"type": "compact", "covers": {"last_turn": 3}}, {"type": "assistant"},
        {"type": "assistant", "context_tokens": 120}])]
    series = context_series("x", records)
    # the model calls of turn 1 share its number; the compaction came in turn 1 (its last_id names no
    # record: the number it was written with)
    assert (series.turns, series.tokens, series.compactions) == ([1, 1, 1], [100, 300, 120], [(1, 3)])
    usage = tool_usage(["tool", "calls", "errors"], [["grep", 2, 0], ["read_lines", 5, 1], ["find", 2, 2]])
    assert (usage.tools, usage.ok, usage.failed) == (["read_lines", "find", "grep"], [4, 0, 2], [1, 2, 0])


async def test_reflection_shows_every_query_as_a_table_and_the_plots(ws):
    record_history(ws)
    app = ScreenApp(ReflectionScreen(ws, session="s1"))
    async with started(app) as pilot:
        await settle(pilot)
        screen = app.screen
        # the context plot: four model calls, one per turn, one compaction (in turn 4, of turns 1-3)
        assert (screen.context.turns, screen.context.tokens) == ([1, 2, 3, 4], [1000, 1400, 1800, 700])
        assert screen.context.compactions == [(4, 3)]
        plot = screen.query_one("#context-plot")
        assert "1 compaction" in str(plot.render()) and "compacted 1–3" in str(plot.render())
        assert (screen.tools.tools, screen.tools.ok, screen.tools.failed) == (["read_lines", "grep"], [4, 2], [1, 0])
        assert "6 ok · 1 failed" in str(screen.query_one("#tools-plot").render())
        # every built-in reflection, chosen in the list, fills the table with what reflect.run returns
        names = [name for name, _ in reflect.names()]
        for n, name in enumerate(names):
            if n:
                await pilot.press("down")
            await settle(pilot)
            expected = reflect.run(ws.db, name, session="s1")
            table = screen.query_one("#reflection-table", DataTable)
            assert screen.result.name == name
            assert [str(c.label) for c in table.columns.values()] == expected.columns
            assert table.row_count == len(expected.rows), name
        # all sessions: s2's tool calls join the tables and the tool plot
        await pilot.press("s")
        await settle(pilot)
        assert screen.scope is None and "find" in screen.tools.tools
        assert "every session" in str(screen.query_one("#reflection-title").render())


async def test_reflection_of_a_session_from_the_sessions_screen(ws):
    record_history(ws)
    app = ScreenApp(SessionsScreen(ws))
    async with started(app) as pilot:
        await settle(pilot)
        cursor_to(app.screen, "s1")
        await pilot.press("f")
        await settle(pilot)
        assert isinstance(app.screen, ReflectionScreen) and app.screen.context.session == "s1"
        assert app.screen.query_name == "sessions" and app.screen.result.records()[0]["session"] == "s1"


def test_an_unknown_reflection_is_refused_by_name():
    with pytest.raises(reflect.ReflectError, match="unknown reflection 'nope'"):
        ReflectionScreen(None, query="nope")


def test_screens_stay_out_of_the_first_paint():
    code = ("import sys, workstation.tui.app\n"
            "print([m for m in ('textual_plotext', 'plotext', 'workstation.tui.screens.sessions',"
            " 'workstation.tui.screens.reflection', 'workstation.tui.screens.replay', 'workstation.replay')"
            " if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


async def test_events_outside_any_session_are_named_so_in_the_tables(ws):
    record_history(ws)
    loose = ws.memory()  # no session: the index, the sidecar, the sessions screen record like this
    loose.episodic.record(TOOL_CALL, "find", ok=True, outcome="ok", duration_ms=1.0)
    loose.close()
    app = ScreenApp(ReflectionScreen(ws, session="s1", query="sessions"))
    async with started(app) as pilot:
        await settle(pilot)
        screen = app.screen
        await pilot.press("s")  # every session
        await settle(pilot)
        table = screen.table
        column = [str(c.label) for c in table.columns.values()].index("session")
        named = sorted(str(table.get_row_at(i)[column]) for i in range(table.row_count))
        assert named == ["(no session)", "s1", "s2"]


# --------------------------------------------------------------------------- compaction with a keep count
async def test_compact_offers_the_keep_count_and_shows_what_it_covers(ws):
    session = Session.create(ws.paths, "long")
    for n in range(15):
        session.user(f"question {n}")
        session.assistant(f"answer {n}")
    app = ScreenApp(SessionsScreen(ws))
    async with started(app) as pilot:
        await settle(pilot)
        await pilot.press("c")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, CompactScreen) and dialog.turns == 15  # 15 user messages
        keep = dialog.query_one("#compact-keep")
        assert keep.value == str(ws.config.memory.keep_recent)
        covers = dialog.query_one("#compact-covers")
        keep.value = "10"
        await pilot.pause()
        assert covers.render().plain == "turns 1–5 are summarized; the newest 10 (6–15) stay verbatim"
        keep.value = "15"
        await pilot.pause()
        assert "nothing is left to summarize: enter a smaller number" in covers.render().plain
        await pilot.press("enter")  # refused: nothing would happen
        await pilot.pause()
        assert app.screen is dialog
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, SessionsScreen)


async def test_a_session_with_nothing_to_compact_says_so_without_asking(ws):
    done = Session.create(ws.paths, "done")
    done.user("a question")
    done.assistant("an answer")
    done.append("compact", summary="## Task & instructions\nx", covers={"first_turn": 1, "last_turn": 1,
                "last_id": done.read().turns[-1]["id"]}, model="openai/compact", reason="manual")
    app = ScreenApp(SessionsScreen(ws))
    async with started(app) as pilot:
        await settle(pilot)
        await pilot.press("c")
        await settle(pilot)
        assert isinstance(app.screen, SessionsScreen)  # no question asked
        assert "nothing to compact in done: its turn is summarized already" in app.screen.status.text
