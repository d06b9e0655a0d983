"""History as the chat tells it (issue 22), in the real app over the live backend and the scripted model:
tool lines with their outcomes, turn numbers beside the user's messages, /undo and /rewind marking what
they took back in place, the /rewind picker, and a resumed session showing the same."""

from __future__ import annotations

import asyncio

from support.fakellm import Reply, ScriptedLLM
from test_tui_live import make_repo, wait_for, write_config
from tui_support import started
from workstation.tui.app import WorkstationApp
from workstation.tui.backend import LiveBackend
from workstation.tui.screens.rewind import RewindScreen


def shown(app) -> str:
    transcript = app.chat.transcript
    return "\n".join(transcript.render_line(y).text.rstrip() for y in range(transcript.size.height))


def by_text(app, role: str, text: str):
    return next(t for t in app.chat.transcript.turns if t.role == role and text in t.text)


async def send(pilot, app, text: str, done) -> None:
    """Send a line and wait until `done()` and the backend is free for the next one (the turn's end)."""
    app.chat.prompt.value = text
    await pilot.press("enter")
    await wait_for(pilot, lambda: done() and not app.backend._busy.locked())


async def test_undo_and_the_rewind_picker_mark_taken_back_turns_live_and_resumed(tmp_path):
    make_repo(tmp_path)
    script = [Reply(tool_calls=[("write_file", {"path": "one.txt", "content": "1\n"})]), Reply(text="One."),
              Reply(tool_calls=[("write_file", {"path": "two.txt", "content": "2\n2\n"})]), Reply(text="Two.")]
    with ScriptedLLM(script) as llm:
        write_config(tmp_path, llm.url)
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app, size=(200, 50)) as pilot:
            await wait_for(pilot, backend._ready.is_set)
            await send(pilot, app, "write one", lambda: any(t.text == "One." for t in app.chat.transcript.turns))
            turns = app.chat.transcript.turns  # the session is on screen: turns are added to this list now
            await send(pilot, app, "write two", lambda: any(t.text == "Two." for t in turns))
            assert [t.number for t in turns if t.role == "user"] == [1, 2]
            assert "you · turn 2" in shown(app)
            assert "▸ ✓ write_file(two.txt) → new file +2" in shown(app)

            # /undo: turn 2's edit is dimmed in place and says what undid it; the command's lines stay
            await send(pilot, app, "/undo", lambda: any(t.role == "command" and "undid" in t.text for t in turns))
            await wait_for(pilot, lambda: by_text(app, "tool", "two.txt").taken_back == "undone by /undo")
            assert not (tmp_path / "two.txt").exists()
            assert by_text(app, "tool", "one.txt").taken_back == ""
            assert by_text(app, "user", "write two").taken_back == ""  # the conversation stands
            assert "▸ ✓ write_file(two.txt) → new file +2  ↶ undone by /undo" in shown(app)
            assert shown(app).count("↶") == 1  # the mark once, before what took it back
            assert any(t.role == "user" and t.text == "/undo" for t in turns)

            # /rewind with no number opens the picker; escape leaves everything as it was
            await send(pilot, app, "/rewind", lambda: isinstance(app.screen, RewindScreen))
            picker = app.screen
            assert [t.number for t in picker.turns] == [1, 2]
            assert picker.turns[1].files == () and picker.turns[1].undone == ("two.txt",) and picker.highlighted == 2
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, RewindScreen))
            assert not any(r["type"] == "rewind" and r.get("conversation")
                           for r in backend.agent.session.read().records)

            # chosen from the picker: back to before turn 2, files and conversation
            await send(pilot, app, "/rewind", lambda: isinstance(app.screen, RewindScreen))
            await pilot.press("enter")
            await wait_for(pilot, lambda: by_text(app, "user", "write two").taken_back == "taken back by /rewind 2")
            assert by_text(app, "user", "write one").taken_back == ""
            assert by_text(app, "assistant", "Two.").taken_back == "taken back by /rewind 2"
            assert "you · turn 2" in shown(app) and "↶ taken back by /rewind 2" in shown(app)
            assert [t.text for t in turns if t.role == "user"][-1] == "/rewind 2"  # what the picker ran
            live = [(t.id, t.role, t.number, t.taken_back, t.outcome) for t in turns if t.id]
            slug = backend.agent.session.slug

        # resumed: the same turns, numbers and marks as the live chat showed
        backend = LiveBackend(str(tmp_path), session=slug, sidecar=False)
        app = WorkstationApp(backend)
        async with started(app, size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: backend._ready.is_set() and len(app.chat.transcript.turns) > 0)
            resumed = [(t.id, t.role, t.number, t.taken_back, t.outcome) for t in app.chat.transcript.turns
                       if t.id and t.role != "notice"]
            assert [item for item in live if item[1] != "notice"] == resumed
    await asyncio.sleep(0)


async def test_a_launch_offers_the_last_session_and_ctrl_r_continues_it(tmp_path):
    from workstation.paths import Paths
    from workstation.sessions.log import Session

    make_repo(tmp_path)
    with ScriptedLLM([]) as llm:
        write_config(tmp_path, llm.url)
        paths = Paths.for_root(str(tmp_path))
        paths.sessions.mkdir(parents=True, exist_ok=True)
        old = Session.create(paths, "older")
        old.user("an older question")
        last = Session.create(paths, "fix-loader")
        last.user("Fix the loader\nsecond line")
        last.assistant("Fixed.")
        Session.create(paths, "empty-one").system("a notice, no turn", notice="info")
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app, size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.resume_offer is not None)
            assert app.resume_offer == "fix-loader"
            offer = app.chat.transcript.turns[-1]
            assert offer.role == "notice" and "ctrl+r continues your last session, fix-loader" in offer.text
            assert "“Fix the loader second line”" in offer.text and "1 turn," in offer.text
            new = backend.agent.session.slug
            await pilot.press("ctrl+r")
            await wait_for(pilot, lambda: backend.agent.session.slug == "fix-loader"
                           and any(t.text == "Fixed." for t in app.chat.transcript.turns))
            assert app.resume_offer is None and not app.check_action("resume_last", ())
            assert not (paths.sessions / f"{new}.jsonl").exists()  # the new session, still empty, is gone
    await asyncio.sleep(0)


async def test_a_message_in_the_new_session_withdraws_the_offer(tmp_path):
    from workstation.paths import Paths
    from workstation.sessions.log import Session

    make_repo(tmp_path)
    with ScriptedLLM([Reply(text="Hello.")]) as llm:
        write_config(tmp_path, llm.url)
        paths = Paths.for_root(str(tmp_path))
        paths.sessions.mkdir(parents=True, exist_ok=True)
        Session.create(paths, "before").user("a question")
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app, size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.resume_offer == "before")
            await send(pilot, app, "hi", lambda: any(t.text == "Hello." for t in app.chat.transcript.turns))
            await wait_for(pilot, lambda: app.resume_offer is None)
            await pilot.press("ctrl+r")
            await pilot.pause(0.3)
            assert backend.agent.session.slug != "before"
    await asyncio.sleep(0)


async def test_the_sessions_screen_hides_empty_sessions_and_filters_by_slug_and_title(tmp_path):
    from test_tui_screens import WorkspaceBackend
    from tui_support import settle
    from workstation.runtime import Workspace
    from workstation.sessions.log import Session
    from workstation.tui.screens.sessions import SessionsScreen

    ws = Workspace(tmp_path)
    try:
        Session.create(ws.paths, "alpha").user("Fix the loader")
        Session.create(ws.paths, "beta").user("Rename the config keys")
        Session.create(ws.paths, "gamma").system("nothing said", notice="info")  # no turn
        Session.create(ws.paths, "open-now").system("the chat's own, empty so far", notice="info")
        app = WorkstationApp(WorkspaceBackend(ws, session_slug="open-now"))
        async with started(app, size=(80, 24)) as pilot:
            await pilot.press("f6")
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, SessionsScreen)
            assert set(screen.sessions) == {"alpha", "beta", "open-now"}  # the chat's own is listed, empty or not
            assert screen.hidden_empty == 1
            assert "1 empty not listed" in str(screen.query_one("#sessions-title").render())
            await pilot.press("slash")
            await pilot.press(*"config")  # the title's words: letters go to the filter, not the screen's keys
            await settle(pilot)
            assert set(screen.sessions) == {"beta"} and isinstance(app.screen, SessionsScreen)
            await pilot.press("escape")  # out of the filter, back to the list: the screen stays
            await pilot.pause()
            assert app.screen is screen and screen.table.has_focus
            await pilot.press("slash", *"nothing matches")
            await settle(pilot)
            assert screen.table.row_count == 0
            assert "no session's slug or title holds" in str(screen.query_one("#sessions-detail").render())
    finally:
        ws.close()


async def test_the_memory_and_timeline_panes_follow_a_turn_step_by_step(tmp_path):
    import threading

    make_repo(tmp_path)
    release = threading.Event()
    served: list[int] = []

    def respond(body):
        served.append(len(body["messages"]))
        if len(served) == 1:
            return Reply(tool_calls=[("umem", {"tier": "stm", "key": "progress", "value": "step one"})])
        release.wait(30)  # the model "thinks" until the test has looked at the panes mid-turn
        return Reply(text="All done.")

    with ScriptedLLM(respond) as llm:
        write_config(tmp_path, llm.url)
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app, size=(200, 50)) as pilot:
            await wait_for(pilot, backend._ready.is_set)
            app.chat.prompt.value = "note your progress"
            await pilot.press("enter")
            try:
                # mid-turn: the second model call waits (the turn cannot end), and both panes show the first step
                await wait_for(pilot, lambda: len(served) == 2)
                await wait_for(pilot, lambda: any(e.type == "tool_call" and e.name == "umem" for e in app.timeline.shown))
                await wait_for(pilot, lambda: any(e.key == "progress" for e in app.memory.entries("stm")))
                assert app.chat.busy and not release.is_set()
            finally:
                release.set()
            await wait_for(pilot, lambda: any(t.text == "All done." for t in app.chat.transcript.turns))
    await asyncio.sleep(0)


async def test_always_allow_in_a_trusted_workspace_keeps_the_command_allowed(tmp_path):
    from support.trust_support import trust
    from workstation import config as config_mod
    from workstation import sandbox
    from workstation import trust as trust_mod
    from workstation.tui.screens.confirm import ConfirmScreen

    make_repo(tmp_path)
    loaded, paths = config_mod.load(tmp_path)
    found = sandbox.status(sandbox.Policy.for_workspace(paths, loaded.agent))
    if not found.full:
        import pytest
        pytest.skip(f"no full sandbox here, so every command asks and the allow-list is not used: {found.line}")
    script = [Reply(tool_calls=[("run_command", {"cmd": "touch made.txt"})]), Reply(text="Made."),
              Reply(tool_calls=[("run_command", {"cmd": "touch made.txt"})]), Reply(text="Again.")]
    with ScriptedLLM(script) as llm:
        write_config(tmp_path, llm.url)
        trust(tmp_path)
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app, size=(100, 30)) as pilot:
            await wait_for(pilot, backend._ready.is_set)
            app.chat.prompt.value = "make it"
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            assert app.screen.query("#confirm-always")  # offered: a trusted folder, a plain command
            await pilot.press("a")
            await wait_for(pilot, lambda: any(t.text == "Made." for t in app.chat.transcript.turns)
                           and not backend._busy.locked())
            assert (tmp_path / "made.txt").exists()
            assert trust_mod.always_allowed(config_mod.inspect(tmp_path)[0].root) == ["touch made.txt"]
            # the same command again runs without asking
            app.chat.prompt.value = "again"
            await pilot.press("enter")
            await wait_for(pilot, lambda: any(t.text == "Again." for t in app.chat.transcript.turns))
            assert not isinstance(app.screen, ConfirmScreen)
    # a later start reads it into the allow-list while the folder stays trusted, and forgets it when revoked
    assert "touch made.txt" in config_mod.load(tmp_path)[0].agent.command_allow
    trust_mod.revoke(config_mod.inspect(tmp_path)[0].root)
    assert "touch made.txt" not in config_mod.load(tmp_path)[0].agent.command_allow
    await asyncio.sleep(0)


async def test_always_is_not_offered_in_an_untrusted_workspace(tmp_path):
    from workstation.agent.approval import ApprovalRequest

    make_repo(tmp_path)
    with ScriptedLLM([]) as llm:
        write_config(tmp_path, llm.url)
        backend = LiveBackend(str(tmp_path), sidecar=False)
        request = ApprovalRequest("command", "touch made.txt", "not on agent.command_allow")
        assert backend._always_pattern(request) is None
        from support.trust_support import trust
        trust(tmp_path)
        assert backend._always_pattern(request) == "touch made.txt"
        assert backend._always_pattern(ApprovalRequest("command", "ls | wc", "not on agent.command_allow")) is None
        assert backend._always_pattern(ApprovalRequest("command", "touch x", "no sandbox: ...")) is None
