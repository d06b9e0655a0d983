"""The first hour of a daily user (issue 12), on the real app over the live backend and the scripted model.

Resume shows the whole conversation; the map follows edits on disk; escape stops the agent at
any moment; small terminals keep the chat usable; a maximized map fills the screen; the timeline
moves the chat; /archive and /new move to a new session.
"""

from __future__ import annotations

import asyncio
import time

from support.fakellm import Reply, ScriptedLLM
from test_tui_live import make_repo, wait_for
from tui_support import settle, started
from workstation.paths import Paths, user_dir
from workstation.sessions.log import Session
from workstation.tui.app import WorkstationApp
from workstation.tui.layout import MIN_CHAT, column_widths
from workstation.tui.backend import LiveBackend
from workstation.tui.screens.confirm import ConfirmScreen


def write_config(root, url: str = "", *, extra: str = "") -> None:
    """The user's config: the scripted model (if any), no model-written purposes (they would eat replies)."""
    model = (f'[model]\nname = "openai/test-model"\napi_base = "{url}"\ntimeout_s = 60\nmax_retries = 0\n'
             if url else "")
    user_dir().mkdir(parents=True, exist_ok=True)  # the user's own: a workspace's never names an endpoint
    (user_dir() / "config.toml").write_text(f"{model}[index]\ndescribe_with_model = false\n{extra}")


def long_session(root, slug: str = "long-work", turns: int = 30) -> Session:
    """`turns` records: user/assistant pairs, with a compaction after the first ten."""
    session = Session.create(Paths.for_root(root), slug)
    for n in range(turns // 2):
        session.user(f"question {n}: what about part {n}?")
        session.assistant(f"answer {n}: part {n} is fine.")
        if n == 4:
            session.append("compact", summary="## Task & instructions\nparts", model="openai/compact",
                           reason="manual", covers={"first_turn": 1, "last_turn": 10, "new_first_turn": 11})
    return session


def texts(app) -> list[str]:
    return [t.text for t in app.chat.transcript.turns]


# --------------------------------------------------------------------------- 1. resume
async def test_a_resumed_session_shows_its_whole_conversation_scrolled_to_the_end(tmp_path):
    make_repo(tmp_path)
    write_config(tmp_path)
    long_session(tmp_path)
    backend = LiveBackend(str(tmp_path), session="long-work", sidecar=False)
    app = WorkstationApp(backend)
    async with started(app, size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: len(app.chat.transcript) >= 31)
        turns = app.chat.transcript.turns
        assert turns[0].text == "question 0: what about part 0?" and turns[-1].text == "answer 14: part 14 is fine."
        assert [t.role for t in turns].count("compaction") == 1 and len(turns) == 31
        assert all(t.id for t in turns)  # every turn is a record: the timeline can move the chat to it
        await pilot.pause()
        transcript = app.chat.transcript
        assert transcript.max_scroll_y > 0 and transcript.scroll_y == transcript.max_scroll_y  # at the end
        transcript.focus()
        await pilot.press("home")
        await pilot.pause()
        assert transcript.cursor == 0 and transcript.scroll_y == 0  # the first message is there to read


async def test_resuming_from_the_sessions_screen_shows_the_whole_conversation_too(tmp_path):
    from workstation.tui.screens.sessions import SessionsScreen

    make_repo(tmp_path)
    write_config(tmp_path)
    long_session(tmp_path)
    backend = LiveBackend(str(tmp_path), sidecar=False)
    app = WorkstationApp(backend)
    async with started(app) as pilot:
        await wait_for(pilot, lambda: backend.workspace is not None)
        await pilot.press("f6")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen) and "long-work" in app.screen.sessions)
        screen = app.screen
        screen.table.move_cursor(row=screen.table.get_row_index("long-work"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(app.chat.transcript) == 31)
        assert texts(app)[0] == "question 0: what about part 0?" and backend.session_slug == "long-work"
        assert "session long-work" in app.chat.status_bar.text


# --------------------------------------------------------------------------- 2. the map follows the disk
async def test_the_map_shows_new_line_counts_and_symbols_within_a_second_of_an_edit_on_disk(tmp_path):
    make_repo(tmp_path)
    write_config(tmp_path)
    backend = LiveBackend(str(tmp_path), sidecar=False)
    app = WorkstationApp(backend)
    async with started(app) as pilot:
        pane = app.map
        await wait_for(pilot, lambda: pane.node_for("pkg") is not None)
        pane.node_for("pkg").expand()
        await wait_for(pilot, lambda: pane.node_for("pkg/core.py") is not None)
        pane.node_for("pkg/core.py").expand()
        await wait_for(pilot, lambda: pane.node_for("pkg/core.py").data.loaded)
        node = pane.node_for("pkg/core.py")
        assert node.data.entry.lines == 9 and pane.freshness("pkg/core.py") == "fresh"
        assert [(c.data.entry.name, c.data.entry.start) for c in node.children] == [("add", 4), ("twice", 8)]
        # another terminal edits the file: three lines on top, one function more
        (tmp_path / "pkg" / "core.py").write_text(
            '"""Core maths."""\n\nimport math\n\n\ndef add(a, b):\n    return a + b\n\n\ndef twice(x):\n'
            '    return add(x, x)\n\n\ndef root(x):\n    return math.sqrt(x)\n')
        edited = time.monotonic()

        def shown() -> bool:
            entry = pane.node_for("pkg/core.py").data.entry
            names = [(c.data.entry.name, c.data.entry.start) for c in pane.node_for("pkg/core.py").children
                     if c.data is not None and c.data.kind == "symbol"]
            return entry.lines == 15 and names == [("add", 6), ("twice", 10), ("root", 14)]

        await wait_for(pilot, shown, timeout=10)
        took = time.monotonic() - edited
        assert pane.freshness("pkg/core.py") == "fresh"
        assert took < 3.0, f"the map took {took:.2f} s to show the edit"  # the pty script holds it to 1 s
        # a file that appears in an open folder shows up, with its line count
        (tmp_path / "pkg" / "extra.py").write_text("def more():\n    pass\n")
        await wait_for(pilot, lambda: (n := pane.node_for("pkg/extra.py")) is not None and n.data.entry.lines == 2)


async def test_a_row_whose_symbols_are_on_their_way_never_shows_a_tick():
    from workstation.tui.viewdata import MapEntry, SymbolEntry

    app = WorkstationApp()
    async with started(app) as pilot:
        pane = app.map
        pane.set_root([MapEntry("a.py", "file", lines=9)])
        pane.set_symbols("a.py", [SymbolEntry("f", "function", 1, 9)])
        await pilot.pause()
        assert pane.freshness("a.py") == "fresh"
        assert pane.update_entry(MapEntry("a.py", "file", lines=20)) is True  # its symbols are shown: send them
        assert pane.freshness("a.py") == "indexing"  # new line count, old symbols: no ✓
        pane.set_symbols("a.py", [SymbolEntry("f", "function", 1, 20)])
        assert pane.freshness("a.py") == "fresh"
        pane.set_root([MapEntry("b.py", "file", lines=3)])
        assert pane.update_entry(MapEntry("b.py", "file", lines=4)) is False  # symbols never shown
        assert pane.freshness("b.py") == "fresh"


# --------------------------------------------------------------------------- 3. escape at any moment
async def test_escape_stops_a_hung_model_call_at_once_and_the_chat_says_what_the_agent_did(tmp_path):
    make_repo(tmp_path)
    with ScriptedLLM([Reply(text="too late", delay_s=30)]) as llm:
        write_config(tmp_path, llm.url)
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app) as pilot:
            await wait_for(pilot, lambda: backend.workspace is not None)
            await pilot.press(*"hello", "enter")
            await wait_for(pilot, lambda: app.chat.activity == ("model", "openai/test-model"))
            assert "waiting for openai/test-model" in app.chat.status_bar.text
            await pilot.press("f2")  # the focus may be anywhere
            pressed = time.monotonic()
            await pilot.press("escape")
            await wait_for(pilot, lambda: not app.chat.busy, timeout=10)
            took = time.monotonic() - pressed
            assert took < 2.0, f"control came back after {took:.2f} s"  # the pty script holds it to 0.5 s
            assert texts(app)[-1] == "[cancelled]" and app.chat.transcript.turns[-1].id
            assert app.chat.status_bar.left.plain.startswith("✎ edits · session ")
    await asyncio.sleep(0)


async def test_escape_kills_a_running_command_and_approval_asks_in_a_dialog(tmp_path):
    make_repo(tmp_path)
    with ScriptedLLM([Reply(tool_calls=[("run_command", {"cmd": "sleep 30"})]),
                      Reply(tool_calls=[("run_command", {"cmd": "echo refused"})]),
                      Reply(text="I will not run it.")]) as llm:
        write_config(tmp_path, llm.url, extra='[agent]\ncommand_allow = ["sleep"]\n')
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app) as pilot:
            await wait_for(pilot, lambda: backend.workspace is not None)
            await pilot.press(*"wait a while", "enter")
            await wait_for(pilot, lambda: app.chat.activity == ("tool", "run_command: sleep 30"))
            await pilot.pause(0.3)  # the process is up
            pressed = time.monotonic()
            await pilot.press("escape")
            await wait_for(pilot, lambda: not app.chat.busy, timeout=10)
            assert time.monotonic() - pressed < 2.0
            tool = next(t for t in app.chat.transcript.turns if t.role == "tool")
            assert not tool.ok and "stopped by the user" in tool.result
            # a command off the allow-list: the dialog asks; the chat says the agent waits for the answer
            await pilot.press(*"try echo", "enter")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            assert "echo refused" in app.screen.question and "not on agent.command_allow" in app.screen.question
            assert app.chat.activity == ("approval", "echo refused")
            await pilot.press("n")
            await wait_for(pilot, lambda: not app.chat.busy and texts(app)[-1] == "I will not run it.")
            refused = [t for t in app.chat.transcript.turns if t.role == "tool"][-1]
            assert not refused.ok and "you refused" in refused.result
    await asyncio.sleep(0)


# --------------------------------------------------------------------------- 4. small terminals
def test_column_widths_are_shares_with_minimums_and_the_chat_comes_first():
    assert column_widths(200, 0.2, 0.3) == (40, 100, 60)
    assert column_widths(100, 0.2, 0.3) == (20, 50, 30)
    map_w, chat, side = column_widths(80, 0.2, 0.3)
    assert chat == MIN_CHAT and map_w >= 12 and side >= 12 and map_w + chat + side == 80
    assert column_widths(50, 0.2, 0.3) == (0, 50, 0)  # too narrow for side columns: the chat alone
    for total in range(80, 260, 7):
        for shares in ((0.2, 0.3), (0.45, 0.45), (0.05, 0.05)):
            widths = column_widths(total, *shares)
            assert sum(widths) == total and widths[1] >= MIN_CHAT, (total, shares, widths)


async def test_the_chat_is_usable_at_80x24_100x30_200x50_and_after_a_resize():
    import tui_sample

    app = WorkstationApp()
    async with started(app, size=(200, 50)) as pilot:
        tui_sample.load(app)
        for width, height in ((200, 50), (100, 30), (80, 24), (200, 50), (100, 30)):
            await pilot.resize_terminal(width, height)
            await pilot.pause()
            chat = app.chat.region
            assert chat.width == column_widths(width, 0.2, 0.3)[1] >= MIN_CHAT, (width, chat)
            assert app.chat.prompt.region.width >= MIN_CHAT - 4 and app.chat.transcript.region.height >= 8
            assert app.map.region.width > 0 and app.memory.region.width > 0  # every pane still there
            assert app.map.region.right <= chat.x and app.memory.region.x >= chat.right
        await pilot.press(*"still typing")
        assert app.chat.prompt.value == "still typing"


# --------------------------------------------------------------------------- 5. maximize the map
async def test_maximizing_the_map_fills_the_screen_with_the_map():
    import tui_sample

    app = WorkstationApp()
    async with started(app, size=(100, 30)) as pilot:
        tui_sample.load(app)
        for key in ("f11", "ctrl+g"):
            await pilot.press("f2", key)
            await pilot.pause()
            assert app.screen.maximized is app.map
            assert app.map.region.width == 100 and app.map.region.height >= 28
            tree = app.map.knowledge_tree
            assert tree.region.width >= 96 and tree.region.height > 5
            assert "README.md" in "".join(tree.render_line(y).text for y in range(tree.region.height))
            await pilot.press(key)
            await pilot.pause()
            assert app.screen.maximized is None and app.map.region.width == 20


# --------------------------------------------------------------------------- 6. the timeline moves the chat
async def test_selecting_a_live_event_in_the_timeline_moves_the_chat_to_its_turn(tmp_path):
    make_repo(tmp_path)
    with ScriptedLLM([Reply(tool_calls=[("read_lines", {"path": "pkg/missing.py", "start": 1, "end": 3})]),
                      Reply(tool_calls=[("file_meta", {"path": "pkg/core.py"})]),
                      Reply(text="Done.")]) as llm:
        write_config(tmp_path, llm.url)
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app) as pilot:
            await wait_for(pilot, lambda: backend.workspace is not None)
            app.chat.add_turns([{"role": "notice", "text": f"filler {n}"} for n in range(60)])
            await pilot.press(*"look around", "enter")
            await wait_for(pilot, lambda: not app.chat.busy and texts(app)[-1] == "Done.")
            timeline = app.timeline
            await wait_for(pilot, lambda: sum(e.type == "tool_call" for e in timeline.shown) == 2)
            calls = [e for e in timeline.shown if e.type == "tool_call"]
            assert [c.name for c in calls] == ["read_lines", "file_meta"]
            assert calls[0].details["ok"] is False and calls[1].details["ok"] is True
            cells = [timeline.table.get_row_at(timeline.shown.index(c))[2].plain for c in calls]
            assert cells == ["✗ read_lines", "file_meta"]  # the failed call is marked
            transcript = app.chat.transcript
            for event in calls + [e for e in timeline.shown if e.type == "model_call"]:
                timeline.table.focus()
                timeline.table.move_cursor(row=timeline.shown.index(event))
                await pilot.press("enter")
                await pilot.pause()
                turn = transcript.turns[transcript.cursor]
                top = round(transcript.scroll_y)
                assert turn.id == event.turn_id, event
                assert top <= transcript.line_of(transcript.cursor) < top + transcript.size.height  # in view
            assert transcript.turns[transcript.index_of(calls[0].turn_id)].tool == "read_lines"
    await asyncio.sleep(0)


# --------------------------------------------------------------------------- 7. /archive, /new, New session
async def test_archive_then_new_then_chat_again_each_in_a_new_session(tmp_path):
    make_repo(tmp_path)
    from support.sessions_support import SUMMARY

    summary = Reply(text=SUMMARY.format(task="Answer one.", files="(none)"))  # /archive summarizes first
    with ScriptedLLM([Reply(text="first answer"), summary, Reply(text="second answer"),
                      Reply(text="third answer")]) as llm:
        write_config(tmp_path, llm.url)
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app) as pilot:
            await wait_for(pilot, lambda: backend.workspace is not None)
            assert {"/new", "/clear", "/archive"} <= {c.name for c in app.chat._commands}
            first = backend.session_slug
            await pilot.press(*"one", "enter")
            await wait_for(pilot, lambda: texts(app)[-1:] == ["first answer"])
            await pilot.press(*"/archive", "enter")
            await wait_for(pilot, lambda: backend.session_slug != first)
            # the new session's chat opens with the command that made it, as it will when resumed
            await wait_for(pilot, lambda: texts(app) == ["/archive", f"archived {first}"])
            second = backend.session_slug
            assert f"session {second}" in app.chat.status_bar.text
            await pilot.press(*"two", "enter")  # the chat works in the new session
            await wait_for(pilot, lambda: texts(app)[-1:] == ["second answer"])
            await pilot.press(*"/new", "enter")
            await wait_for(pilot, lambda: backend.session_slug not in (first, second))
            third = backend.session_slug
            await pilot.press(*"three", "enter")
            await wait_for(pilot, lambda: texts(app)[-1:] == ["third answer"])
            assert [t.text for t in app.chat.transcript.turns if t.role == "user"] == ["/new", "three"]
            # the palette's New session leaves this one as it is
            next(c for c in app.get_system_commands(app.screen) if c.title == "New session").callback()
            await wait_for(pilot, lambda: backend.session_slug not in (first, second, third))
            await settle(pilot)
        paths = Paths.for_root(tmp_path)
        assert (paths.sessions / f"{second}.jsonl").exists() and (paths.sessions / f"{third}.jsonl").exists()
        assert not (paths.sessions / f"{first}.jsonl").exists()  # archived
        assert [r["content"] for r in Session.open(paths, third).read().turns] == ["three", "third answer"]
    await asyncio.sleep(0)


async def test_a_message_sent_while_the_session_changes_waits_and_lands_in_the_new_one(tmp_path):
    make_repo(tmp_path)
    with ScriptedLLM([Reply(text="an answer")]) as llm:
        write_config(tmp_path, llm.url)
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app) as pilot:
            await wait_for(pilot, lambda: backend.workspace is not None)
            assert backend._take_the_chat()  # a session change under way (as /new or a resume does)
            await pilot.press(*"hello", "enter")
            await pilot.pause(0.5)
            assert "an answer" not in texts(app) and not llm.requests  # it waits...
            backend._give_back()
            await wait_for(pilot, lambda: texts(app)[-1:] == ["an answer"])  # ...and is not refused
            assert not any(t.role == "notice" for t in app.chat.transcript.turns)
    await asyncio.sleep(0)


async def test_session_changes_wait_for_no_running_turn_they_are_refused(tmp_path):
    make_repo(tmp_path)
    with ScriptedLLM([Reply(text="slow", delay_s=30)]) as llm:
        write_config(tmp_path, llm.url)
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app) as pilot:
            await wait_for(pilot, lambda: backend.workspace is not None)
            first = backend.session_slug
            await pilot.press(*"hello", "enter")
            await wait_for(pilot, lambda: app.chat.activity is not None and app.chat.activity[0] == "model")
            await pilot.press(*"/new", "enter")
            await wait_for(pilot, lambda: texts(app)[-1] == "the agent is working: escape stops it, then /new again")
            app.action_new_session()  # the palette's New session is /new: refused alike
            refused = "the agent is working: escape stops it, then /new again"
            await wait_for(pilot, lambda: texts(app)[-2:] == [refused, refused])
            assert backend.session_slug == first
            await pilot.press("escape")
            await wait_for(pilot, lambda: not app.chat.busy, timeout=10)
    await asyncio.sleep(0)
