"""Permission modes in the app (agent.modes): shift+tab cycles them and the status line shows the mode; a plan
is approved, edited or rejected in its dialog and nothing is written before; the status line shows what is left
of the budget; a finished turn, a pending approval and a plan ring the terminal and fire the Notification hook;
the palette lists skills and custom commands. Live app, scripted model through litellm."""

from __future__ import annotations

import asyncio
import json
import sys

from support.fakellm import Reply, ScriptedLLM
from test_tui_daily import texts, write_config
from test_tui_live import make_repo, wait_for
from tui_support import started
from workstation.paths import user_dir
from workstation.tui.app import WorkstationApp
from workstation.tui.backend import LiveBackend
from workstation.tui.screens.confirm import ConfirmScreen
from workstation.tui.screens.plan import PlanScreen

EDIT = ("write_file", {"path": "pkg/new.py", "content": "x = 1\n"})
PLAN = "Plan:\n1. add pkg/new.py with x = 1"


def ringing(app) -> list[str]:
    """What the app rings the terminal with, recorded (the terminal itself is headless here)."""
    rung: list[str] = []
    app.ring = rung.append
    return rung


async def test_shift_tab_cycles_the_modes_and_the_status_line_shows_each(tmp_path):
    make_repo(tmp_path)
    write_config(tmp_path)
    backend = LiveBackend(str(tmp_path), sidecar=False)
    app = WorkstationApp(backend)
    async with started(app) as pilot:
        await wait_for(pilot, lambda: app.chat.mode == "edits")
        assert app.chat.status_bar.left.plain.startswith("✎ edits · ")
        seen = []
        for _ in range(4):
            before = app.chat.mode
            await pilot.press("shift+tab")
            await wait_for(pilot, lambda: app.chat.mode != before)
            seen.append((app.chat.mode, backend.hosted.mode, app.chat.status_bar.left.plain.split(" · ")[0]))
        assert seen == [("plan", "plan", "⏸ plan"), ("auto", "auto", "⏵⏵ auto"), ("ask", "ask", "? ask"),
                        ("edits", "edits", "✎ edits")]
        # a dialog over the chat keeps shift+tab for its own buttons
        app.push_screen(ConfirmScreen("sure?"))
        await pilot.pause(0.1)
        await pilot.press("shift+tab")
        await pilot.pause(0.3)
        assert app.chat.mode == "edits" and backend.hosted.mode == "edits"
    await asyncio.sleep(0)


async def test_a_plan_is_approved_as_edited_and_only_then_written(tmp_path):
    make_repo(tmp_path)
    with ScriptedLLM([Reply(tool_calls=[EDIT]), Reply(text=PLAN),  # plan mode: the write is refused
                      Reply(tool_calls=[("write_file", {"path": "pkg/new.py", "content": "x = 2\n"})]),
                      Reply(text="done")]) as llm:
        write_config(tmp_path, llm.url, extra='[agent]\npermission_mode = "plan"\n')
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        rung = ringing(app)
        async with started(app) as pilot:
            await wait_for(pilot, lambda: app.chat.mode == "plan")
            await pilot.press(*"add x", "enter")
            await wait_for(pilot, lambda: isinstance(app.screen, PlanScreen))
            assert not (tmp_path / "pkg" / "new.py").exists()
            refused = next(t for t in app.chat.transcript.turns if t.role == "tool")
            assert not refused.ok and "plan mode" in refused.result
            assert rung == ["workstation: a plan waits for your approval"]
            assert app.screen.plan == PLAN
            await pilot.press("e")
            app.screen.editor.text = "1. add pkg/new.py with x = 2"
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda: texts(app)[-1] == "done")
            assert (tmp_path / "pkg" / "new.py").read_text() == "x = 2\n"
            assert app.chat.mode == "edits" and backend.hosted.mode == "edits"
            last = [r for r in llm.requests if "messages" in r][-1]
            assert any("approved this plan, as they edited it" in str(m.get("content")) and
                       "1. add pkg/new.py with x = 2" in str(m.get("content")) for m in last["messages"])
            await wait_for(pilot, lambda: len(rung) == 2)
            assert rung[-1] == "workstation: the agent finished; it waits for your input"
    await asyncio.sleep(0)


async def test_a_rejected_plan_writes_nothing_and_keeps_plan_mode(tmp_path):
    make_repo(tmp_path)
    with ScriptedLLM([Reply(text=PLAN)]) as llm:
        write_config(tmp_path, llm.url)
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app) as pilot:
            await wait_for(pilot, lambda: app.chat.mode == "edits")
            await pilot.press("shift+tab")
            await wait_for(pilot, lambda: app.chat.mode == "plan")
            await pilot.press(*"add x", "enter")
            await wait_for(pilot, lambda: isinstance(app.screen, PlanScreen))
            await pilot.press("r")
            await wait_for(pilot, lambda: "plan rejected" in texts(app)[-1])
            assert app.chat.mode == "plan" and backend.hosted.mode == "plan"
            assert not (tmp_path / "pkg" / "new.py").exists()
    await asyncio.sleep(0)


async def test_the_budget_left_shows_and_an_approval_and_a_turn_ring_and_notify(tmp_path):
    make_repo(tmp_path)
    log = tmp_path / "notified.jsonl"
    hook = f"{sys.executable} -c \"import sys; open({str(log)!r}, 'a').write(sys.stdin.read() + chr(10))\""
    user_dir().mkdir(parents=True, exist_ok=True)
    (user_dir() / "hooks.json").write_text(json.dumps({"hooks": {"Notification": [{"hooks": [
        {"type": "command", "command": hook}]}]}}))
    with ScriptedLLM([Reply(tool_calls=[("run_command", {"cmd": "echo hi"})], usage=(1_000_000, 10)),
                      Reply(text="ran it", usage=(1_000_000, 10))]) as llm:
        write_config(tmp_path, llm.url, extra='[agent]\nmax_budget_usd = 5.0\n')
        user_config = user_dir() / "config.toml"
        user_config.write_text(user_config.read_text().replace("openai/test-model", "openai/gpt-4o-mini"))
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        rung = ringing(app)
        async with started(app) as pilot:
            await wait_for(pilot, lambda: app.chat.mode == "edits")
            await pilot.press(*"run echo", "enter")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            assert rung == ["workstation needs your approval: echo hi"]
            await pilot.press("y")
            await wait_for(pilot, lambda: texts(app)[-1] == "ran it" and not app.chat.busy)
            await wait_for(pilot, lambda: len(rung) == 2)
            assert rung[1] == "workstation: the agent finished; it waits for your input"
            await wait_for(pilot, lambda: "of $5.00 left" in app.chat.status_bar.left.plain)
            left = float(app.chat.status_bar.left.plain.split(" of $5.00 left")[0].rsplit("$", 1)[1])
            assert 4.6 < left < 4.8  # two calls of a million input tokens of gpt-4o-mini: ~$0.15 each
    kinds = [json.loads(line)["notification_type"] for line in log.read_text().splitlines()]
    assert kinds == ["permission_prompt", "idle_prompt"]
    await asyncio.sleep(0)


async def test_the_palette_lists_skills_and_custom_commands(tmp_path):
    make_repo(tmp_path)
    write_config(tmp_path)
    skill = user_dir() / "skills" / "release-notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: release-notes\ndescription: Write release notes from the git "
                                    "log\n---\nRead git log, group by kind.\n")
    commands = user_dir() / "commands"
    commands.mkdir(parents=True)
    (commands / "review.md").write_text("---\ndescription: Review a file\nargument-hint: FILE\n---\n"
                                        "Review $ARGUMENTS for bugs.\n")
    backend = LiveBackend(str(tmp_path), sidecar=False)
    app = WorkstationApp(backend)
    async with started(app) as pilot:
        await wait_for(pilot, lambda: backend.workspace is not None and app.chat.mode == "edits")
        titles = {c.title: c for c in app.get_system_commands(app.screen)}
        assert "Skill release-notes" in titles and "Command /review" in titles
        assert "Write release notes from the git log" in titles["Skill release-notes"].help
        assert "Review a file" in titles["Command /review"].help
        titles["Skill release-notes"].callback()
        assert app.chat.prompt.value == "Use the release-notes skill: "
        # through the palette itself, as a user types
        await pilot.press("ctrl+p")
        await pilot.pause(0.2)
        await pilot.press(*"release-notes")
        await pilot.pause(0.5)
        from textual.command import CommandList

        shown = app.screen.query_one(CommandList)
        assert any("release-notes" in str(shown.get_option_at_index(i).prompt)
                   for i in range(shown.option_count))
    await asyncio.sleep(0)
