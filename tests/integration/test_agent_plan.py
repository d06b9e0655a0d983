"""The todo tool through the real litellm path: the plan reaches the UI as it is written, survives a
compaction as the summary's "Open to-dos", and replays; /compact passes the user's focus on."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from support.agent_support import (agent, config_overrides, is_compaction, module_server, records, requests_since, tool_results,
                           workspace)
from support.fakellm import Reply
from workstation.agent import tools
from workstation.commands import slash
from workstation.agent.loop import AgentEvents
from workstation.sessions.plan import current
from workstation.errors import WorkstationError

server_module, server = module_server()

PLAN = [{"text": "map pkg/core.py", "status": "done"},
        {"text": "add request_id to fetch", "status": "in_progress"},
        {"text": "update the tests", "status": "pending"}]
LATER = [{"text": "map pkg/core.py", "status": "done"},
         {"text": "add request_id to fetch", "status": "done"},
         {"text": "update the tests", "status": "in_progress"}]
SUMMARY = ("## Task & instructions\nadd request_id\n## Decisions & conventions\n(none)\n## Files touched\n"
           "(none)\n## Open to-dos\n(none)\n## Errors seen\n(none)")


def planning_model(plans: list[list[dict]]):
    """Writes each plan in turn with todo, then answers."""
    queue = list(plans)

    def respond(body):
        if is_compaction(body):
            return Reply(text=SUMMARY)
        if body["messages"][-1]["role"] == "tool" and not queue:
            return Reply(text="planned")
        return Reply(tool_calls=[("todo", {"items": queue.pop(0)})])

    return respond


def test_the_plan_reaches_the_ui_as_it_is_written(tmp_path, server):
    server.dispatch.fn = planning_model([PLAN, LATER])
    ws = workspace(tmp_path, server.url)
    a = agent(ws)
    seen: list[list[dict]] = []
    assert a.run("Add request_id to fetch", AgentEvents(on_plan=seen.append)).error is None
    assert seen == [PLAN, LATER]
    (_, _, first), = tool_results(requests_since(server)[1]["messages"])
    assert first == ("plan updated (1 of 3 done):\n[x] map pkg/core.py\n[>] add request_id to fetch\n"
                     "[ ] update the tests")
    assert current(records(a.session)) == LATER
    assert records(a.session, "tool")[0]["plan"] == PLAN  # each call records the whole plan
    assert slash.run(a, "/plan").text == ("plan (2 of 3 done):\n[x] map pkg/core.py\n[x] add request_id to fetch\n"
                                          "[>] update the tests")
    a.close()
    ws.close()


def test_workstation_chat_prints_the_plan_as_it_is_written(tmp_path, server, monkeypatch):
    from workstation.cli import main

    server.dispatch.fn = planning_model([PLAN])
    ws = workspace(tmp_path, None)
    ws.close()
    model = config_overrides(server.url)["model"]
    (tmp_path / "user-home").mkdir(exist_ok=True)  # the user's own config: a workspace never names endpoints
    (tmp_path / "user-home" / "config.toml").write_text(
        "[model]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in model.items()))
    monkeypatch.setenv("WORKSTATION_HOME", str(tmp_path / "user-home"))
    monkeypatch.delenv("WORKSTATION_MODEL", raising=False)
    out = CliRunner().invoke(main, ["-C", str(ws.root), "chat", "Add request_id to fetch"])
    assert out.exit_code == 0, out.output
    assert out.stdout.strip() == "planned"
    assert ("[plan (1 of 3 done):\n[x] map pkg/core.py\n[>] add request_id to fetch\n[ ] update the tests]"
            in out.stderr)


def test_a_bad_plan_is_refused_and_changes_nothing(tmp_path, server):
    server.push(Reply(tool_calls=[("todo", {"items": [{"text": "x", "status": "someday"}]})]), Reply(text="hm"))
    ws = workspace(tmp_path, server.url)
    a = agent(ws)
    seen = []
    a.run("plan it", AgentEvents(on_plan=seen.append))
    (tool,) = records(a.session, "tool")
    assert tool["ok"] is False and tool["content"] == ("error: item 1: status 'someday' is not one of pending, "
                                                       "in_progress, done")
    assert seen == [] and current(records(a.session)) is None
    assert slash.run(a, "/plan").text == "no plan yet: the agent writes one with its todo tool"
    a.close()
    ws.close()


def test_items_are_checked_and_lenient_where_models_differ():
    from workstation.agent.tools.plan import parse_items

    assert parse_items('[{"text": "a", "status": "Completed"}, "b", {"content": "c", "status": "in progress"}]') == [
        {"text": "a", "status": "done"}, {"text": "b", "status": "pending"}, {"text": "c", "status": "in_progress"}]
    assert parse_items([]) == []
    for bad, line in (({"text": "a"}, "items must be a list"), ([{"status": "done"}], "item 1 has no text"),
                      ([{"text": "x" * 400}], "keep items under 300"), ([[1]], "item 1 must be an object"),
                      ([{"text": str(n)} for n in range(51)], "at most 50 items")):
        with pytest.raises(WorkstationError, match=line):
            parse_items(bad)


def test_the_plan_survives_a_compaction_as_the_open_todos(tmp_path, server):
    server.dispatch.fn = planning_model([PLAN])
    ws = workspace(tmp_path, server.url, memory={"compact_threshold": 10, "keep_recent": 2})
    a = agent(ws)
    assert a.run("Add request_id to fetch").error is None
    for n in range(4):
        a.session.user(f"more {n}")
        a.session.assistant(f"ok {n}")
    out = slash.run(a, "/compact")
    assert out.ok, out.text
    summarizer = requests_since(server)[-1]["messages"][-1]["content"]  # the chat model's history, then this
    assert ("\"Open to-dos\" must list every item of it with its status, in this order:\n- [x] map pkg/core.py\n"
            "- [>] add request_id to fetch\n- [ ] update the tests") in summarizer
    compact = records(a.session, "compact")[0]
    # the summarizer wrote "(none)": the section holds the plan all the same
    assert compact["sections"]["todos"] == ("Plan (todo, as last written):\n- [x] map pkg/core.py\n"
                                            "- [>] add request_id to fetch\n- [ ] update the tests")
    server.dispatch.fn = None
    server.push(Reply(text="continuing"))
    assert a.run("go on").error is None
    sent = requests_since(server)[-1]["messages"]
    assert not any(m.get("tool_calls") for m in sent)  # the todo call itself is compacted away...
    assert "## Open to-dos\nPlan (todo, as last written):\n- [x] map pkg/core.py" in sent[1]["content"]  # ...not the plan
    a.close()
    ws.close()


def test_the_plan_replays_step_by_step(tmp_path, server):
    from workstation.replay import Episode
    from workstation.replay.render import render_state

    server.dispatch.fn = planning_model([PLAN, LATER])
    ws = workspace(tmp_path, server.url)
    a = agent(ws)
    a.run("Add request_id to fetch")
    a.close()
    episode = Episode.load(ws.paths, a.session.slug)
    tool_steps = [s for s in episode.steps if s.kind == "tool"]
    assert episode.state_at(tool_steps[0].index - 1).memory.plan is None
    assert episode.state_at(tool_steps[0].index).memory.plan == PLAN
    assert episode.state_at(len(episode) - 1).memory.plan == LATER
    assert "  plan: 2 of 3 done\n    [x] map pkg/core.py" in render_state(episode, episode.state_at(len(episode) - 1))
    assert tool_steps[0].label().startswith("  ↳ todo(1 of 3 done): ok")
    assert tools.get("todo").effect == tools.MEMORY
    ws.close()


def test_compact_passes_the_users_focus_to_the_summarizer(tmp_path, server):
    ws = workspace(tmp_path, server.url)
    a = agent(ws)
    for n in range(4):
        a.session.user(f"question {n}")
        a.session.assistant(f"answer {n}")
    server.push(Reply(text=SUMMARY))
    out = slash.run(a, "/compact 2 the retry logic")
    assert out.ok and out.text.startswith("compacted turns 1–2")
    prompt = requests_since(server)[-1]["messages"][1]["content"]
    assert prompt.startswith("The user asks this summary to focus on: the retry logic\n")
    assert "answer 1" in prompt and "question 2" not in prompt  # keep 2: turns 3-4 stay verbatim
    assert records(a.session, "compact")[0]["focus"] == "the retry logic"
    a.session.user("question 4")
    a.session.assistant("answer 4")
    server.push(Reply(text=SUMMARY))
    assert slash.run(a, "/compact error handling keep=1").ok
    prompt = requests_since(server)[-1]["messages"][1]["content"]
    assert prompt.startswith("The user asks this summary to focus on: error handling\n") and "answer 3" in prompt
    a.close()
    ws.close()


def test_compact_arguments():
    assert slash.parse_compact("", 40) == (40, "")
    assert slash.parse_compact("10", 40) == (10, "")
    assert slash.parse_compact("10 error handling", 40) == (10, "error handling")
    assert slash.parse_compact("error handling", 40) == (40, "error handling")
    assert slash.parse_compact("keep=3 the 2 bugs", 40) == (3, "the 2 bugs")
    with pytest.raises(WorkstationError, match="keep=x is not a number"):
        slash.parse_compact("keep=x", 40)
