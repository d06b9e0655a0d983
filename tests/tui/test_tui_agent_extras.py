"""The core features the app wires in beside the chat: MCP servers (the agent's tools, the palette), the
repository's branch and dirty count in the status line, the agent's plan as it writes it, and the model
describing files with its progress and cost. Live app, real litellm, the scripted model server."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from support.fakellm import Reply, ScriptedLLM
from test_tui_live import make_repo, wait_for, write_config
from support.trust_support import trust
from tui_support import started
from workstation.tui.app import WorkstationApp
from workstation.tui.backend import LiveBackend
from workstation.tui.messages import NewSessionRequested
from workstation.tui.panes.chat import plan_lines

FIXTURE = str(Path(__file__).resolve().parents[1] / "support" / "mcp_fixture_server.py")


def texts(app, role: str) -> list[str]:
    return [t.text for t in app.chat.transcript.turns if t.role == role]


def pid_alive(path: Path) -> bool:
    try:
        os.kill(int(path.read_text()), 0)
    except ProcessLookupError:
        return False
    return True


# --------------------------------------------------------------------------- MCP
def highlighted(app) -> str:
    """The palette's highlighted entry, as shown."""
    from textual.command import CommandList

    found = app.screen.query(CommandList)
    if not found or found.first().highlighted is None:
        return ""
    options = found.first()
    return str(options.get_option_at_index(options.highlighted).prompt)


async def test_the_agent_gets_the_mcp_servers_tools_and_the_palette_lists_them(tmp_path):
    make_repo(tmp_path)
    pidfile = tmp_path / "fx.pid"
    with ScriptedLLM([Reply(tool_calls=[("fx__echo", {"text": "hello", "reverse": True})]),
                      Reply(text="it said olleh")]) as llm:
        write_config(tmp_path, llm.url)
        with open(tmp_path / ".workstation" / "config.toml", "a") as fh:
            fh.write(f'\n[mcp.servers.fx]\ncommand = "{sys.executable}"\nargs = ["{FIXTURE}"]\ntrusted = true\n'
                     f'env = {{ PIDFILE = "{pidfile}" }}\n'
                     f'[mcp.servers.broken]\ncommand = "{sys.executable}"\nargs = ["{FIXTURE}", "--crash"]\n')
        trust(tmp_path)  # the test's own workspace config
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app) as pilot:
            await wait_for(pilot, lambda: backend._ready.is_set())
            assert backend.agent.toolset is backend.toolset
            # the server that failed is one line in the chat; the status line counts what runs
            await wait_for(pilot, lambda: any("MCP broken" in t and "failed" in t for t in texts(app, "notice")))
            await wait_for(pilot, lambda: "MCP 1 of 2 servers" in app.chat.status_bar.left.plain)
            # the palette lists the servers and their tools; a tool goes into the prompt
            app.action_command_palette()
            await pilot.pause(0.3)
            await pilot.press(*"fx__echo")
            await wait_for(pilot, lambda: "MCP tool fx__echo" in highlighted(app), timeout=10)
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.chat.prompt.value == "fx__echo")
            titles = [c.title for c in app.get_system_commands(app.screen)]
            assert "MCP server fx" in titles and "MCP server broken" in titles
            assert "MCP tool fx__env_names" in titles
            # the model calls the server's tool through the agent
            app.chat.prompt.value = "echo hello backwards"
            await pilot.press("enter")
            await wait_for(pilot, lambda: any("olleh" in t for t in texts(app, "assistant")) and not app.chat.busy)
            tool = next(t for t in app.chat.transcript.turns if t.role == "tool")
            assert tool.tool == "fx__echo" and tool.result == "olleh" and tool.ok
            # a new session's agent has the same servers
            app.post_message(NewSessionRequested())
            first = backend.agent
            await wait_for(pilot, lambda: backend.agent is not first)
            assert backend.agent.toolset is backend.toolset
            assert pid_alive(pidfile)
        offered = {t["function"]["name"] for t in llm.requests[0]["tools"]}
        assert "fx__echo" in offered and "file_meta" in offered
    # closed with the app: the server's process is gone
    deadline = time.monotonic() + 10
    while pid_alive(pidfile) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not pid_alive(pidfile)
    assert backend.toolset is None


async def test_servers_started_for_a_session_that_cannot_open_stop_at_once(tmp_path):
    make_repo(tmp_path)
    pidfile = tmp_path / "fx.pid"
    (tmp_path / ".workstation" / "config.toml").write_text(
        f'[mcp.servers.fx]\ncommand = "{sys.executable}"\nargs = ["{FIXTURE}"]\nenv = {{ PIDFILE = "{pidfile}" }}\n')
    trust(tmp_path)  # the test's own workspace config
    backend = LiveBackend(str(tmp_path), sidecar=False, session="no-such-session")
    app = WorkstationApp(backend)
    async with started(app) as pilot:
        await wait_for(pilot, lambda: any("no-such-session" in str(n.message) for n in app._notifications))
        assert pidfile.exists() and not pid_alive(pidfile)  # it ran, and was stopped before the error showed
        assert backend.toolset is None and backend.agent is None


# --------------------------------------------------------------------------- git
def git(root, *args):
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


async def test_the_status_line_shows_branch_and_dirty_count_read_off_the_ui_thread(tmp_path, monkeypatch):
    from workstation import git as git_mod

    make_repo(tmp_path)
    (tmp_path / ".workstation" / ".gitignore").write_text("*\n")
    git(tmp_path, "init", "-q", "-b", "trunk")
    git(tmp_path, "add", "pkg")
    git(tmp_path, "commit", "-q", "-m", "start")
    (tmp_path / "notes.txt").write_text("one\n")
    threads: list[str] = []
    real = git_mod.status

    def status(root):  # the real call, noting the thread it runs on
        threads.append(threading.current_thread().name)
        return real(root)

    monkeypatch.setattr(git_mod, "status", status)
    with ScriptedLLM([Reply(text="fine")]) as llm:
        write_config(tmp_path, llm.url)
        trust(tmp_path)  # the test's own workspace config
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app) as pilot:
            bar = app.chat.status_bar
            await wait_for(pilot, lambda: "⎇ trunk ±1 │ ctx" in bar.right.plain)
            (tmp_path / "more.txt").write_text("two\n")
            app.chat.prompt.value = "/decisions"  # a slash command reads the status again
            await pilot.press("enter")
            await wait_for(pilot, lambda: "trunk ±2" in bar.right.plain)
            (tmp_path / "pkg" / "core.py").write_text("changed\n")
            app.chat.prompt.value = "hello"  # and so does a turn
            await pilot.press("enter")
            await wait_for(pilot, lambda: "trunk ±3" in bar.right.plain)
            assert "fine" in texts(app, "assistant")
            assert bar.render_line(0).text.rstrip().endswith("%")  # the gauge keeps the right edge
    assert len(threads) >= 3 and threading.main_thread().name not in threads


async def test_outside_a_repository_the_status_line_has_no_branch(tmp_path):
    make_repo(tmp_path)
    trust(tmp_path)  # the test's own workspace config
    backend = LiveBackend(str(tmp_path), sidecar=False)
    app = WorkstationApp(backend)
    async with started(app) as pilot:
        await wait_for(pilot, lambda: backend._ready.is_set() and "session" in app.chat.status_bar.left.plain)
        await pilot.pause(0.5)
        assert "⎇" not in app.chat.status_bar.text and app.chat.status_bar.right.plain.startswith("ctx")


# --------------------------------------------------------------------------- the plan
PLAN_1 = [{"text": "read core.py", "status": "in_progress"}, {"text": "write the test", "status": "pending"}]
PLAN_2 = [{"text": "read core.py", "status": "done"}, {"text": "write the test", "status": "in_progress"}]
PLAN_3 = [{"text": "read core.py", "status": "done"}, {"text": "write the test", "status": "done"}]


def plan_box_text(app) -> str:
    return str(app.chat.query_one("#plan-box").render())


async def test_the_plan_shows_as_the_agent_writes_it_and_updates_in_place(tmp_path):
    make_repo(tmp_path)
    with ScriptedLLM([Reply(tool_calls=[("todo", {"items": PLAN_1})]),
                      Reply(tool_calls=[("todo", {"items": PLAN_2})], delay_s=1.5),
                      Reply(text="half way", delay_s=1.5)]) as llm:
        write_config(tmp_path, llm.url)
        trust(tmp_path)  # the test's own workspace config
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app) as pilot:
            await wait_for(pilot, lambda: backend._ready.is_set())
            chat = app.chat
            assert not chat.has_class("-plan")
            chat.prompt.value = "add a test"
            await pilot.press("enter")
            await wait_for(pilot, lambda: chat.plan == PLAN_1)  # while the model still thinks
            assert chat.has_class("-plan") and chat.query_one("#plan-box").region.height == 4
            assert plan_box_text(app) == "Plan · 0 of 2 done\n▸ read core.py\n○ write the test"
            await wait_for(pilot, lambda: chat.plan == PLAN_2)
            assert plan_box_text(app) == "Plan · 1 of 2 done\n✓ read core.py\n▸ write the test"
            assert len(app.query("#plan-box")) == 1  # one block, updated in place
            await wait_for(pilot, lambda: "half way" in texts(app, "assistant") and not chat.busy)
            # the plan is still open after the turn: it stays on screen, and comes back with the session
            assert chat.plan == PLAN_2
            slug = backend.session_slug
            app.post_message(NewSessionRequested())
            # the switch is over (the chat given back), or a resume now is refused as a turn in progress
            await wait_for(pilot, lambda: backend.session_slug != slug and not backend._changing.is_set())
            await pilot.pause()
            assert chat.plan == [] and not chat.has_class("-plan")
            from workstation.tui.screens.sessions import SessionsScreen

            app.post_message(SessionsScreen.ResumeRequested(slug))
            await wait_for(pilot, lambda: backend.session_slug == slug and chat.plan == PLAN_2)
    await asyncio.sleep(0)


async def test_a_plan_carried_out_leaves_the_screen_when_the_turn_ends(tmp_path):
    make_repo(tmp_path)
    with ScriptedLLM([Reply(tool_calls=[("todo", {"items": PLAN_1})]),
                      Reply(tool_calls=[("todo", {"items": PLAN_3})]),
                      Reply(text="all done")]) as llm:
        write_config(tmp_path, llm.url)
        trust(tmp_path)  # the test's own workspace config
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app) as pilot:
            # the start is over (the session shown, its empty plan set): only the turn's plans are seen
            await wait_for(pilot, lambda: backend._ready.is_set() and backend.map_feed is not None)
            seen: list = []
            app.chat.set_plan = lambda items, real=app.chat.set_plan: seen.append(list(items or ())) or real(items)
            app.chat.prompt.value = "add a test"
            await pilot.press("enter")
            # the plan leaves after the turn's end is shown (the chat is idle first): wait for that too
            await wait_for(pilot, lambda: "all done" in texts(app, "assistant") and not app.chat.busy
                           and seen[-1:] == [[]])
            assert seen == [PLAN_1, PLAN_3, []]
            assert not app.chat.has_class("-plan")
            assert [t.tool for t in app.chat.transcript.turns if t.role == "tool"] == ["todo", "todo"]


def test_a_long_plan_keeps_the_item_in_progress_in_view():
    items = [{"text": f"step {n}", "status": "done" if n < 6 else "in_progress" if n == 6 else "pending"}
             for n in range(1, 11)]
    header, lines, footer = plan_lines(items, limit=4)
    assert header == "Plan · 5 of 10 done"
    assert [line for _, line in lines] == ["✓ step 5", "▸ step 6", "○ step 7", "○ step 8"]
    assert footer == "… 4 done above, 2 more"
    assert plan_lines(items[:3], limit=4)[2] == ""


# --------------------------------------------------------------------------- describing files
async def test_describing_files_shows_its_progress_and_cost_in_the_status_line(tmp_path):
    make_repo(tmp_path)
    (tmp_path / "pkg" / "widgets.py").write_text("def parse(spec):\n    return spec.split(',')\n")
    (tmp_path / "pkg" / "gears.py").write_text("def turn(n):\n    return n + 1\n")
    with ScriptedLLM([Reply(text="Turns gears by one step.\n", usage=(120, 8)),
                      Reply(text="Parses comma-separated widget specs.\n", usage=(130, 9), delay_s=1.0)]) as llm:
        write_config(tmp_path, llm.url)
        with open(tmp_path / ".workstation" / "config.toml", "a") as fh:
            fh.write("\n[index]\ndescribe_with_model = true\n")
        trust(tmp_path)  # the test's own workspace config
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app) as pilot:
            status = lambda: app.chat.status_bar.left.plain  # noqa: E731
            await wait_for(pilot, lambda: "describing files 1/2 · 128 tokens · $" in status())
            await wait_for(pilot, lambda: "purposes: 2 of 2 files described · 267 tokens · $" in status())
            assert status().startswith("✎ edits · session ")  # after the session's line, on the same line
            report = backend.map_feed.described
            assert (report.described, report.requests, report.tokens_in, report.tokens_out) == (2, 2, 250, 17)
            app.map.node_for("pkg").expand()
            await wait_for(pilot, lambda: (node := app.map.node_for("pkg/widgets.py")) is not None
                           and node.data.entry.purpose == "Parses comma-separated widget specs.")
        assert len(llm.requests) == 2
    await asyncio.sleep(0)


async def test_describing_files_stops_when_the_app_closes(tmp_path):
    make_repo(tmp_path)
    (tmp_path / "pkg" / "widgets.py").write_text("def parse(spec):\n    return spec.split(',')\n")
    with ScriptedLLM([Reply(text="never read", delay_s=30)]) as llm:
        write_config(tmp_path, llm.url)
        with open(tmp_path / ".workstation" / "config.toml", "a") as fh:
            fh.write("\n[index]\ndescribe_with_model = true\n")
        trust(tmp_path)  # the test's own workspace config
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app) as pilot:
            await wait_for(pilot, lambda: len(llm.requests) == 1)
            closed = time.monotonic()
        await wait_for_thread(lambda: backend.map_feed.described is not None, 10)
        assert time.monotonic() - closed < 10
        assert backend.map_feed.described.stopped == "cancelled"
    await asyncio.sleep(0)


async def wait_for_thread(predicate, timeout):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "not in time"
        await asyncio.sleep(0.05)


async def test_the_plan_block_stays_small_in_a_small_terminal():
    items = [{"text": f"step {n}", "status": "done" if n < 3 else "in_progress" if n == 3 else "pending"}
             for n in range(1, 11)]
    for size, shown in (((80, 24), 3), ((160, 48), 6)):
        app = WorkstationApp()
        async with started(app, size=size) as pilot:
            app.chat.set_plan(items)
            await pilot.pause()
            text = plan_box_text(app).splitlines()
            assert text[0] == "Plan · 2 of 10 done" and "▸ step 3" in text
            assert len(text) == 1 + shown + 1 and text[-1].startswith("… 1 done above")
            assert app.chat.transcript.region.height >= size[1] // 3  # the conversation keeps its room
            app.chat.set_plan([])
            await pilot.pause()
            assert app.chat.query_one("#plan-box").region.height == 0


async def test_git_and_a_background_job_share_the_status_line_with_session_and_gauge():
    app = WorkstationApp()
    async with started(app) as pilot:  # a chat wide enough for the gauge while the agent works
        chat = app.chat
        chat.set_status("session s1 · model m")
        chat.set_git("main ±3")
        chat.set_job("describing files 3/20 · 1.2k tokens · $0.0012")
        await pilot.pause()
        assert chat.status_bar.left.plain == "session s1 · model m · describing files 3/20 · 1.2k tokens · $0.0012"
        assert chat.status_bar.right.plain.startswith("⎇ main ±3 │ ctx ")
        chat.set_activity("model", "m")  # the agent's activity covers the idle line, not the git label
        assert chat.status_bar.left.plain.startswith("⧗") and "main ±3" in chat.status_bar.right.plain
        chat.set_activity("idle")
        assert "describing files" in chat.status_bar.left.plain
        chat.set_git("")
        assert chat.status_bar.right.plain.startswith("ctx ")
