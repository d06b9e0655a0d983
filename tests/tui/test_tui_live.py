"""The real app over the live backend: a workspace, the scripted model, real litellm."""

from __future__ import annotations

import asyncio
import time

from support.fakellm import Reply, ScriptedLLM
from support.trust_support import trust
from tui_support import started
from workstation.paths import user_dir
from workstation.tui.app import WorkstationApp
from workstation.tui.backend import LiveBackend


def make_repo(root):
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text('"""A tiny package."""\n')
    (root / "pkg" / "core.py").write_text(
        '"""Core maths."""\n\n\ndef add(a, b):\n    return a + b\n\n\ndef twice(x):\n    return add(x, x)\n')
    (root / ".workstation").mkdir()


def write_config(root, url):
    """The scripted model in the user's own config (a workspace's never names an endpoint), and an empty
    workspace config that a test may add to (and then trust)."""
    user_dir().mkdir(parents=True, exist_ok=True)
    (user_dir() / "config.toml").write_text(
        f'[model]\nname = "openai/test-model"\napi_base = "{url}"\ntimeout_s = 10\nmax_retries = 0\n')
    (root / ".workstation" / "config.toml").write_text("")


async def wait_for(pilot, predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.1)
        if predicate():
            return
    turns = [(t.role, t.text[:200], t.result[:100]) for t in pilot.app.chat.transcript.turns]
    raise AssertionError(f"condition not met in time; transcript: {turns}")


async def test_live_app_indexes_answers_slash_commands_and_chats(tmp_path):
    make_repo(tmp_path)
    with ScriptedLLM([Reply(tool_calls=[("file_meta", {"path": "pkg/core.py"})]),
                      Reply(text="`twice` calls **add** twice.")]) as llm:
        write_config(tmp_path, llm.url)
        trust(tmp_path)  # the test's own workspace config
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app) as pilot:
            await wait_for(pilot, lambda: backend._ready.is_set() and app.map.node_for("pkg") is not None)
            # a slash command works with the model idle
            app.chat.prompt.value = "/impact add"
            await pilot.press("enter")
            await wait_for(pilot, lambda: any(t.role == "command" and "pkg/core.py:9" in t.text
                                              for t in app.chat.transcript.turns))
            # a real agent turn: tool call, then a streamed reply
            app.chat.prompt.value = "what does twice do?"
            await pilot.press("enter")
            await wait_for(pilot, lambda: any(t.role == "assistant" and "calls **add**" in t.text
                                              for t in app.chat.transcript.turns))
            roles = [t.role for t in app.chat.transcript.turns]
            assert roles == ["user", "command", "user", "assistant", "tool", "assistant"]
            # every turn of the agent's carries the id of the record it is (the timeline moves the chat there)
            records = {r["id"]: r for r in backend.agent.session.read().records}
            live = app.chat.transcript.turns[2:]
            assert [records[t.id]["type"] for t in live] == ["user", "assistant", "tool", "assistant"]
            assert live[1].text == "*calls file_meta*"
            tool_turn = next(t for t in app.chat.transcript.turns if t.role == "tool")
            # the chat shows what the model was sent: core.py's symbols are in the map excerpt of its system
            # message, so file_meta points there instead of repeating them (tools/files.py: _in_head_map)
            assert tool_turn.tool == "file_meta" and tool_turn.result.startswith("pkg/core.py (python, 9 lines)")
            assert "symbols: as in the repository map in your context (2 lines, unchanged)" in tool_turn.result
            await wait_for(pilot, lambda: any(e.type == "tool_call" for e in app.timeline.shown))
            # the file changes on disk: the map's freshness follows
            (tmp_path / "pkg" / "extra.py").write_text("def more():\n    pass\n")
            await wait_for(pilot, lambda: app.map.node_for("pkg/extra.py") is not None)
        # the request really went through litellm to the scripted server, tools included
        assert llm.requests and "tools" in llm.requests[0]
    await asyncio.sleep(0)


async def test_the_app_says_at_start_which_sandbox_commands_run_in(tmp_path):
    from workstation import sandbox

    make_repo(tmp_path)
    (tmp_path / ".workstation" / "config.toml").write_text('[agent]\nsandbox = "off"\n')
    trust(tmp_path)  # the test's own workspace config
    backend = LiveBackend(str(tmp_path), sidecar=False)
    app = WorkstationApp(backend)
    async with started(app) as pilot:
        said = lambda: [n for n in app._notifications if n.title == "sandbox"]  # noqa: E731
        await wait_for(pilot, lambda: said())
        [note] = said()
        assert note.message == sandbox.describe(backend.ws.paths, backend.ws.config) == (
            'no sandbox: agent.sandbox = "off"; every command asks')
        assert note.severity == "warning"  # every command will ask: worth more than a passing mention


async def test_live_app_without_a_model_says_how_to_set_one(tmp_path):
    make_repo(tmp_path)
    trust(tmp_path)  # the test's own workspace config
    backend = LiveBackend(str(tmp_path), sidecar=False)
    app = WorkstationApp(backend)
    async with started(app) as pilot:
        await wait_for(pilot, lambda: backend._ready.is_set())
        app.chat.prompt.value = "hello"
        await pilot.press("enter")
        await wait_for(pilot, lambda: any(t.role == "error" for t in app.chat.transcript.turns))
        error = next(t for t in app.chat.transcript.turns if t.role == "error")
        assert "no model configured" in error.text and "\n" not in error.text


async def test_live_app_resumes_another_session_from_the_sessions_screen(tmp_path):
    from workstation.paths import Paths
    from workstation.sessions.log import Session
    from workstation.tui.screens.sessions import SessionsScreen

    make_repo(tmp_path)
    old = Session.create(Paths.for_root(tmp_path), "earlier-work")
    old.user("remember the parser change")
    old.assistant("noted: the parser change")
    trust(tmp_path)  # the test's own workspace config
    backend = LiveBackend(str(tmp_path), sidecar=False)
    app = WorkstationApp(backend)
    async with started(app) as pilot:
        await wait_for(pilot, lambda: backend._ready.is_set())
        app.post_message(SessionsScreen.ResumeRequested("earlier-work"))
        await wait_for(pilot, lambda: backend.agent.session.slug == "earlier-work"
                       and any("parser change" in t.text for t in app.chat.transcript.turns))


async def test_an_unused_session_leaves_nothing_behind(tmp_path):
    make_repo(tmp_path)
    trust(tmp_path)  # the test's own workspace config
    backend = LiveBackend(str(tmp_path), sidecar=False)
    app = WorkstationApp(backend)
    async with started(app) as pilot:
        await wait_for(pilot, lambda: backend._ready.is_set())
        assert backend.agent.session.path.exists()
    assert not backend.agent.session.path.exists()


async def test_files_without_a_stated_purpose_get_one_from_the_model_in_the_background(tmp_path):
    make_repo(tmp_path)
    (tmp_path / "pkg" / "widgets.py").write_text("def parse(spec):\n    return spec.split(',')\n")
    with ScriptedLLM([Reply(text="Parses comma-separated widget specs.\n")]) as llm:
        write_config(tmp_path, llm.url)
        with open(tmp_path / ".workstation" / "config.toml", "a") as fh:
            fh.write("\n[index]\ndescribe_with_model = true\n")  # opt-in (issue 12)
        trust(tmp_path)  # the test's own workspace config
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app) as pilot:
            await wait_for(pilot, lambda: app.map.node_for("pkg") is not None)
            app.map.knowledge_tree.select_node(app.map.node_for("pkg"))
            app.map.node_for("pkg").expand()  # the pane asks for the folder's files
            await wait_for(pilot, lambda: (node := app.map.node_for("pkg/widgets.py")) is not None
                           and node.data.entry.purpose == "Parses comma-separated widget specs.")
        (request,) = llm.requests  # one file lacked a purpose: one question, about that file
        assert "pkg/widgets.py" in request["messages"][-1]["content"]
    await asyncio.sleep(0)


async def test_live_app_undo_and_fork(tmp_path):
    make_repo(tmp_path)
    with ScriptedLLM([Reply(tool_calls=[("write_file", {"path": "pkg/new.py", "content": "X = 1\n"})]),
                      Reply(text="created pkg/new.py")]) as llm:
        write_config(tmp_path, llm.url)
        trust(tmp_path)  # the test's own workspace config
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app) as pilot:
            await wait_for(pilot, lambda: backend._ready.is_set())
            app.chat.prompt.value = "make a module"
            await pilot.press("enter")
            await wait_for(pilot, lambda: (tmp_path / "pkg/new.py").exists()
                           and any(t.role == "assistant" and "created" in t.text for t in app.chat.transcript.turns))
            first = backend.agent.session.slug
            app.chat.prompt.value = "/undo"
            await pilot.press("enter")
            await wait_for(pilot, lambda: any(t.role == "command" and t.text.startswith("undid user turn 1")
                                              for t in app.chat.transcript.turns))
            assert not (tmp_path / "pkg/new.py").exists()
            app.chat.prompt.value = "/fork"
            await pilot.press("enter")
            await wait_for(pilot, lambda: backend.agent.session.slug == f"{first}-fork"
                           and any("make a module" in t.text for t in app.chat.transcript.turns))
