"""Sub-agents (the task tool, agent/subagent.py) through the real litellm path to the scripted server: the
parent's context grows by the summary only; the child's steps are a child flow in the log, the timeline,
replay, usage and the report; read-only, budget and depth hold against a model that tries."""

from __future__ import annotations

import json

from agent_support import agent, events, module_server, records, requests_since, workspace
from fakellm import Reply
from workstation.agent.loop import AgentEvents

server_module, server = module_server()

FIND = "Find where the setting timeout is used under pkg/ and report each use as path:line."
SUMMARY = "timeout is a parameter of fetch in pkg/core.py:6; nothing else in pkg/ uses it."


def is_child(body: dict) -> bool:
    return any(m["role"] == "user" and "You are a sub-agent" in str(m.get("content")) for m in body["messages"])


def scripted(server, parent: list[Reply], child: list[Reply]) -> None:
    """Parent and child requests answered from their own queues (the child's carry the sub-agent's role)."""
    queues = {True: list(child), False: list(parent)}

    def respond(body: dict) -> Reply:
        queue = queues[is_child(body)]
        assert queue, f"no scripted reply left for the {'child' if is_child(body) else 'parent'}"
        return queue.pop(0)

    server.dispatch.fn = respond


def run_find(tmp_path, server, **config):
    scripted(server, parent=[Reply(tool_calls=[("task", {"prompt": FIND})]), Reply(text="Only fetch uses it.")],
             child=[Reply(tool_calls=[("grep", {"pattern": "timeout"})]), Reply(text=SUMMARY)])
    ws = workspace(tmp_path, server.url, **config)
    a = agent(ws)
    activity: list[tuple[str, str]] = []
    result = a.run("Where is the timeout setting used?", AgentEvents(on_activity=lambda k, w: activity.append((k, w))))
    return ws, a, result, activity


def test_a_read_only_task_round_trip(tmp_path, server):
    ws, a, result, activity = run_find(tmp_path, server)
    assert result.error is None and result.text == "Only fetch uses it."
    sent = requests_since(server)
    parent = [b for b in sent if not is_child(b)]
    child = [b for b in sent if is_child(b)]
    assert len(parent) == 2 and len(child) == 2
    # the parent's next request is its previous one plus the task call and the summary: nothing of the child's
    before, after = parent
    assert json.dumps(after["messages"][: len(before["messages"])]) == json.dumps(before["messages"])
    call, answer = after["messages"][len(before["messages"]):]
    assert call["role"] == "assistant" and call["tool_calls"][0]["function"]["name"] == "task"
    assert answer == {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "name": "task",
                      "content": SUMMARY}
    # the child starts with the parent's head and tools, byte for byte, then its role, then the task
    first = child[0]
    assert json.dumps(first["messages"][0]) == json.dumps(before["messages"][0])
    assert json.dumps(first["tools"]) == json.dumps(before["tools"])
    assert first["messages"][-1] == {"role": "user", "content": FIND}
    assert "grep" in json.dumps(child[1]["messages"][-1]) and "pkg/core.py" in child[1]["messages"][-1]["content"]
    # the log: the child's records are a sidechain of the parent's turn; the task's record names its flow
    task = next(r for r in records(a.session, "tool") if r["name"] == "task")
    flow = task["subagent"]["flow"]
    assert flow.startswith("task-") and task["subagent"]["steps"] == 2 and task["outcome"] == "ok"
    side = [r for r in records(a.session) if r.get("sidechain")]
    assert {r["sidechain"] for r in side} == {flow}
    assert [r["type"] for r in side] == ["system", "user", "assistant", "tool", "assistant"]
    assert sum(1 for r in records(a.session, "user") if not r.get("sidechain")) == 1
    assert ("tool", f"{flow.split('/')[-1]}: grep: timeout") in activity
    # the episodic log: the child's events are their own flow, under the task call's operation
    evs = events(ws, a.session.slug)
    task_op = next(e for e in evs if e["type"] == "op_start" and e["name"] == "task")
    mine = [e for e in evs if e["flow"] == flow]
    assert {e["type"] for e in mine} >= {"turn", "model_call", "tool_call"}
    ids = {e["id"] for e in mine}
    assert all(e["parent"] == task_op["id"] or e["parent"] in ids for e in mine)  # a tree under the task call
    assert all(e["parent"] == task_op["id"] for e in mine if e["type"] == "op_start")
    assert sum(1 for e in evs if e["type"] == "model_call") == 4
    a.close()
    ws.close()


def test_replay_usage_and_report_count_the_child(tmp_path, server):
    from workstation.agent import report
    from workstation.memory.usage import usage
    from workstation.replay import Episode

    ws, a, result, _ = run_find(tmp_path, server)
    assert result.error is None
    slug = a.session.slug
    flow = next(r for r in records(a.session, "tool") if r["name"] == "task")["subagent"]["flow"]
    a.close()
    episode = Episode.load(ws.paths, slug, config=ws.config)
    nested = [s for s in episode.steps if s.record.get("sidechain")]
    assert nested and all(s.label().startswith(f"[{flow}] ") for s in nested)
    timeline = episode.state_at(len(episode) - 1).timeline
    child_calls = [e for e in timeline if e.get("flow") == flow and e["type"] == "model_call"]
    assert len(child_calls) == 2
    assert [e["type"] for e in timeline if e["type"] == "model_call" and not e.get("flow")] == ["model_call"] * 2
    (row,) = usage(ws.db, "session", session=slug).records()
    assert row["calls"] == 4
    rep = report.build(ws.paths, slug)
    assert rep.agent.model_calls == 4 and rep.billing.steps.requests == 4
    ws.close()
