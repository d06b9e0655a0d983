"""A resumed session renders the transcript the live chat showed (issue 22): the same records become the
same chat turns (replay.transcript), slash commands and their answers included, taken-back turns marked.
After a rewind, /plan, the plan panel and a fork no longer hold the rewound turn's plan. In the real app
over the live backend and the scripted model (real litellm)."""

from __future__ import annotations

import asyncio

from fakellm import Reply, ScriptedLLM
from test_tui_history import by_text, send
from test_tui_live import make_repo, wait_for, write_config
from tui_support import started
from workstation.tui.app import WorkstationApp
from workstation.tui.backend import LiveBackend
from workstation.tui.screens.rewind import RewindScreen

SIZE = (200, 150)  # tall enough that the whole transcript is on screen, live and resumed alike
PLAN = [{"text": "write three", "status": "in_progress"}, {"text": "check it", "status": "pending"}]


def visible(app) -> list[str]:
    """The transcript's lines as drawn, scrolled to the top, trailing blank lines dropped."""
    transcript = app.chat.transcript
    transcript.scroll_home(animate=False)
    lines = [transcript.render_line(y).text.rstrip() for y in range(transcript.size.height)]
    while lines and not lines[-1]:
        lines.pop()
    return lines


async def test_a_resumed_session_shows_the_live_transcript_line_for_line(tmp_path):
    make_repo(tmp_path)
    script = [Reply(tool_calls=[("write_file", {"path": "one.txt", "content": "1\n"})]), Reply(text="One."),
              Reply(tool_calls=[("write_file", {"path": "two.txt", "content": "2\n2\n"})]), Reply(text="Two."),
              Reply(tool_calls=[("todo", {"items": PLAN})]), Reply(text="Three, planned.")]
    with ScriptedLLM(script) as llm:
        write_config(tmp_path, llm.url)
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app, size=SIZE) as pilot:
            await wait_for(pilot, backend._ready.is_set)
            await send(pilot, app, "write one", lambda: any(t.text == "One." for t in app.chat.transcript.turns))
            turns = app.chat.transcript.turns
            await send(pilot, app, "/diff", lambda: any(t.role == "command" and "one.txt" in t.text for t in turns))
            await send(pilot, app, "write two", lambda: any(t.text == "Two." for t in turns))
            await send(pilot, app, "/undo", lambda: any(t.role == "command" and "undid" in t.text for t in turns))
            await wait_for(pilot, lambda: by_text(app, "tool", "two.txt").taken_back == "undone by /undo")
            await send(pilot, app, "/diff two.txt", lambda: turns[-1].role == "error")  # nothing of it is left
            assert turns[-1].text == "error: two.txt: this session did not change it"
            await send(pilot, app, "plan three", lambda: any(t.text == "Three, planned." for t in turns))
            assert app.chat.plan == PLAN

            # the picker: turn 2's file is listed as undone, not as one it changed
            await send(pilot, app, "/rewind", lambda: isinstance(app.screen, RewindScreen))
            picker = app.screen
            assert picker.turns[1].files == () and picker.turns[1].undone == ("two.txt",)
            await pilot.press("enter")  # the newest turn, files and conversation
            await wait_for(pilot, lambda: by_text(app, "user", "plan three").taken_back == "taken back by /rewind 3")
            await wait_for(pilot, lambda: app.chat.plan == [])  # the rewound turn's plan is not the plan in force
            await send(pilot, app, "/plan", lambda: sum(t.role in ("command", "error") for t in turns) == 5)
            assert turns[-1].text == "no plan yet: the agent writes one with its todo tool"
            live = visible(app)
            slug = backend.agent.session.slug


        backend = LiveBackend(str(tmp_path), session=slug, sidecar=False)
        app = WorkstationApp(backend)
        async with started(app, size=SIZE) as pilot:
            await wait_for(pilot, lambda: backend._ready.is_set() and
                           any(t.text == "no plan yet: the agent writes one with its todo tool"
                               for t in app.chat.transcript.turns))
            await pilot.pause(0.3)
            resumed = visible(app)
            assert app.chat.plan == []

            # a fork of the rewound session does not inherit the plan either
            await send(pilot, app, "/fork", lambda: backend.agent.session.slug != slug)
            await wait_for(pilot, lambda: any(t.text.startswith("forked ") for t in app.chat.transcript.turns))
            assert app.chat.plan == []
            await send(pilot, app, "/plan", lambda: app.chat.transcript.turns[-1].role == "command"
                       and app.chat.transcript.turns[-1].text.startswith("no plan yet"))
    # the slash lines and their answers stand where they were typed; what was taken back says so
    for line in ("/diff", "/undo", "/diff two.txt", "/rewind 3", "/plan"):
        assert any(text.endswith(line) for text in resumed), line
    assert any("undone by /undo" in text for text in resumed)
    assert any("taken back by /rewind 3" in text for text in resumed)
    assert resumed == live
    await asyncio.sleep(0)
