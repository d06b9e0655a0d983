"""A sub-agent in the real app (live backend, scripted model, real litellm): the chat shows the task call and
its summary only, the timeline the sub-agent's events nested under it."""

from __future__ import annotations

import asyncio

from support.fakellm import Reply, ScriptedLLM
from test_tui_live import make_repo, wait_for, write_config
from support.trust_support import trust
from tui_support import started
from workstation.tui.app import WorkstationApp
from workstation.tui.backend import LiveBackend
from workstation.tui.panes.timeline import details_text

SUMMARY = "add is called by twice in pkg/core.py:10."


def responder():
    parent = [Reply(tool_calls=[("task", {"prompt": "Find the callers of add and report path:line."})]),
              Reply(text="twice is the only caller.")]
    child = [Reply(tool_calls=[("impact", {"name": "add"})]), Reply(text=SUMMARY)]

    def respond(body):
        sub = any("You are a sub-agent" in str(m.get("content")) for m in body["messages"] if m["role"] == "user")
        return (child if sub else parent).pop(0)

    return respond


async def test_the_timeline_nests_a_sub_agents_events_under_its_task(tmp_path):
    make_repo(tmp_path)
    with ScriptedLLM(responder()) as llm:
        write_config(tmp_path, llm.url)
        trust(tmp_path)
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app) as pilot:
            await wait_for(pilot, lambda: backend._ready.is_set())
            app.chat.prompt.value = "who calls add?"
            await pilot.press("enter")
            await wait_for(pilot, lambda: any(t.role == "assistant" and "only caller" in t.text
                                              for t in app.chat.transcript.turns))
            turns = app.chat.transcript.turns
            assert [t.role for t in turns] == ["user", "assistant", "tool", "assistant"]
            assert turns[2].tool == "task" and turns[2].result == SUMMARY
            assert backend._bill.total.calls == 4  # the status line's bill counts the sub-agent's calls
            pane = app.timeline
            await wait_for(pilot, lambda: any(e.flow for e in pane.shown))
            shown = pane.shown
            task = next(i for i, e in enumerate(shown) if e.type == "tool_call" and e.name == "task")
            nested = [(i, e) for i, e in enumerate(shown) if e.flow]
            assert {e.flow for _, e in nested} == {nested[0][1].flow} and nested[0][1].flow.startswith("task-")
            assert {"model_call", "tool_call"} <= {e.type for _, e in nested}
            # the child's events come before the task call's end event, and their names are indented under it
            assert all(i < task for i, _ in nested)
            assert not shown[task].flow
            for i, event in nested:
                assert str(pane.table.get_row_at(i)[2]).startswith("↳ ")
                assert f"sub-agent {event.flow}" in details_text(event)
            assert not str(pane.table.get_row_at(task)[2]).startswith("↳")
            # the chat reloaded from the log shows the same turns: the sub-agent's records are no chat turns
            await asyncio.to_thread(backend._show_session)
            await pilot.pause(0.3)
            assert [t.role for t in app.chat.transcript.turns] == ["user", "assistant", "tool", "assistant"]
    await asyncio.sleep(0)
