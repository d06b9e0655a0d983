"""A resumed session renders the transcript the live chat showed (issue 22): the same records become the
same chat turns (sessions.transcript), slash commands and their answers included, taken-back turns marked.
After a rewind, /plan, the plan panel and a fork no longer hold the rewound turn's plan. In the real app
over the live backend and the scripted model (real litellm)."""

from __future__ import annotations

import asyncio

from support.fakellm import Reply, ScriptedLLM
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
              Reply(tool_calls=[("todo", {"items": PLAN})]), Reply(text="Three, planned."), Reply(text="Fresh.")]
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
            # the line typed, its answer, then the note it left the model (an undo's context update)
            undo = next(i for i, t in enumerate(turns) if t.role == "user" and t.text == "/undo")
            assert [t.role for t in turns[undo:undo + 3]] == ["user", "command", "notice"]
            assert turns[undo + 1].text.startswith("undid user turn 2")
            assert turns[undo + 2].text.startswith("context update for the model: The user undid")
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
            fork, fork_live = backend.agent.session.slug, visible(app)
            # /new: a chat whose first lines are the command that made it
            await send(pilot, app, "/new", lambda: backend.agent.session.slug != fork)
            await send(pilot, app, "start afresh", lambda: any(t.text == "Fresh." for t in app.chat.transcript.turns))
            new, new_live = backend.agent.session.slug, visible(app)
        reopened = {}
        for name in (fork, new):  # each comes back as it was shown live, from its first line on
            backend = LiveBackend(str(tmp_path), session=name, sidecar=False)
            app = WorkstationApp(backend)
            async with started(app, size=SIZE) as pilot:
                await wait_for(pilot, lambda: backend._ready.is_set() and len(app.chat.transcript.turns) > 2)
                await pilot.pause(0.3)
                reopened[name] = visible(app)
    first = [line.strip() for line in new_live if line.strip()]
    assert first[1] == "/new" and first[2].startswith("command") and first[3] == (
        f"session {fork} stays as it is; a new session starts"), new_live
    assert reopened[new] == new_live
    last = [line.strip() for line in fork_live if line.strip()]
    assert last[-9] == f"· [forked from {slug}]" and last[-7:-3:2] == ["/fork", f"forked {slug} into {fork}"]
    assert last[-3] == "/plan", fork_live
    assert reopened[fork][:len(fork_live)] == fork_live  # and then the /new that left it, as live
    assert [line.strip() for line in reopened[fork][len(fork_live):] if line.strip()][1::2] == ["/new", first[3]]
    # the slash lines and their answers stand where they were typed; what was taken back says so
    for line in ("/diff", "/undo", "/diff two.txt", "/rewind 3", "/plan"):
        assert any(text.endswith(line) for text in resumed), line
    assert any("undone by /undo" in text for text in resumed)
    assert any("taken back by /rewind 3" in text for text in resumed)
    assert resumed == live
    await asyncio.sleep(0)


def chat_lines(app) -> list[tuple[str, str]]:
    """What the chat holds, turn by turn: (role, first line), the clock left out (a line's time is the
    record's, resumed or live; a notice added live has none)."""
    return [(t.role, t.text.splitlines()[0] if t.text else "") for t in app.chat.transcript.turns]


async def test_the_loops_notices_and_an_automatic_compaction_come_back_on_resume(tmp_path):
    """A retried model call, an automatic compaction (run before the request, which would not fit the window
    otherwise: never a trim while a compaction can help), an auto-commit and a cache break: each line the
    live chat showed is a record, so the resumed chat shows the same, in place."""
    from support.agent_support import is_compaction
    from support.git_support import init_repo
    from support.sessions_support import SUMMARY
    from workstation.paths import Paths, user_dir
    from workstation.sessions.log import Session

    make_repo(tmp_path)
    init_repo(tmp_path)
    paths = Paths.for_root(str(tmp_path))
    long = Session.create(paths, "long")
    for n in range(12):  # ~3,000 tokens of older turns, with the head and tools over 5,000 less the reserve
        long.user(f"old question {n}: " + "lorem ipsum " * 60)
        long.assistant(f"old answer {n}: " + "dolor sit " * 60)
    # the first request would not fit: the compaction runs first, then the request (rate limited, retried)
    chat = iter([Reply(status=429, retry_after=0, delay_s=0.6),  # after the compaction's answer: tried again
                 Reply(tool_calls=[("write_file", {"path": "one.txt", "content": "1\n"})]), Reply(text="One."),
                 Reply(text="Hello from the other model.")])

    def respond(body: dict) -> Reply:
        first = str(body["messages"][0].get("content") or "")
        if first.startswith("You write git commit messages"):
            return Reply(text="Write one.txt")
        if is_compaction(body):
            return Reply(text=SUMMARY.format(task="Old questions.", files="(none)"), delay_s=0.2)
        return next(chat)

    with ScriptedLLM(respond) as llm:
        user_dir().mkdir(parents=True, exist_ok=True)
        (user_dir() / "config.toml").write_text(
            f'[model]\nname = "openai/test-model"\napi_base = "{llm.url}"\ntimeout_s = 10\nmax_retries = 1\n'
            'context_window = 5000\n[memory]\ncompact_threshold = 8\nkeep_recent = 2\n[agent]\nauto_commit = true\n')
        (tmp_path / ".workstation" / "config.toml").write_text("")
        backend = LiveBackend(str(tmp_path), session="long", sidecar=False)
        app = WorkstationApp(backend)
        async with started(app, size=SIZE) as pilot:
            await wait_for(pilot, lambda: backend._ready.is_set() and len(app.chat.transcript.turns) > 20)
            def said(text: str) -> bool:  # /model shows the session anew: the chat's list of turns is another
                return any(t.text.startswith(text) for t in app.chat.transcript.turns)

            await send(pilot, app, "write one", lambda: said("[auto-committed"))
            await send(pilot, app, "/model openai/other-model", lambda: said("model set to openai/other-model"))
            await send(pilot, app, "hello", lambda: said("Hello from the other model."))
            live = chat_lines(app)
            shown = visible(app)

        backend = LiveBackend(str(tmp_path), session="long", sidecar=False)
        app = WorkstationApp(backend)
        async with started(app, size=SIZE) as pilot:
            await wait_for(pilot, lambda: backend._ready.is_set()
                           and any(t.text == "Hello from the other model." for t in app.chat.transcript.turns))
            await pilot.pause(0.3)
            resumed = chat_lines(app)
            resumed_shown = visible(app)
    said = [text for role, text in live if role == "notice"]
    assert not [text for text in said if text.startswith("[context trimmed")], said
    for start in ("[retrying: ", "[auto-committed 1 file to main as ",
                  "[model switch: this request starts without the provider's prompt cache]"):
        assert sum(text.startswith(start) for text in said) == 1, (start, said)
    # the first folds what the cut-short conversation shows (cached), the next the rest, both before the request
    # (never a trim); as resumed shows them: the turns each summarized
    assert [role for role, _ in live].count("compaction") == 2
    assert resumed == live
    assert [line[9:] for line in resumed_shown] == [line[9:] for line in shown]  # the clock aside
    await asyncio.sleep(0)
