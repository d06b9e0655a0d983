"""Sub-agents (the task tool, agent/subagent.py) through the real litellm path to the scripted server: the
parent's context grows by the summary only; the child's steps are a child flow in the log, the timeline,
replay, usage and the report; read-only, budget and depth hold against a model that tries."""

from __future__ import annotations

import json

from support.agent_support import agent, events, module_server, records, requests_since, workspace
from support.fakellm import Reply
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
    # the parent's second request extends its first: the provider's cache serves it whole
    assert [r.get("cache_break") for r in records(a.session, "assistant") if not r.get("sidechain")] == [
        "first request", None]
    a.close()
    ws.close()


def test_replay_usage_and_report_count_the_child(tmp_path, server):
    from workstation.agent import tools
    from workstation.agent.loop import base_tokens
    from workstation.costs import report
    from workstation.costs.usage import usage
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
    # search finds what only the sub-agent saw, in the parent's turn; --verify re-runs its grep
    from workstation.replay.verify import verify
    from workstation.sessions import textindex

    grep = next(s.record for s in nested if s.kind == "tool")
    textindex.sync(ws.paths, ws.db)
    hits = textindex.search(ws.paths, ws.db, "timeout: float", 10)
    assert [(h.slug, h.record_id, h.turn) for h in hits if h.record_id == grep["id"]] == [(slug, grep["id"], 1)]
    checked = verify(episode, ws)
    assert [(c.tool, c.status) for c in checked.checks] == [("grep", "same")]
    assert any("ran a sub-agent" in note for note in checked.notes)
    (row,) = usage(ws.db, "session", session=slug).records()
    assert row["calls"] == 4
    rep = report.build(ws.paths, slug, tools.meaning_of, base_tokens)
    assert rep.agent.model_calls == 4 and rep.billing.steps.requests == 4
    assert rep.subagents["tasks"] == 1 and rep.subagents["model_calls"] == 2
    assert rep.subagent_line().startswith("sub-agents: 1 task(s), 2 of the 4 model calls")
    # the naive baseline gives the sub-agent a history of its own: the parent's grows by the call and summary
    from workstation.sessions import Session
    from workstation.tokens import count

    view = Session.open(ws.paths, slug).read()
    naive: list[tuple] = []
    report.baseline_figures(view, ws.root, 999, count, tools.meaning_of, requests=naive)
    assert [len(r) for r in naive] == [3, 4, 4, 3] and naive[1][3] == naive[2][3] == flow
    call = next(r for r in view.records if r["type"] == "assistant" and not r.get("sidechain"))
    assert naive[3][0] == naive[0][0] + report._assistant_tokens(call, count) + count(SUMMARY) + 4
    ws.close()


def child_tools(session) -> list[dict]:
    return [r for r in records(session, "tool") if r.get("sidechain")]


def task_result(session) -> dict:
    return next(r for r in records(session, "tool") if r["name"] == "task" and not r.get("sidechain"))


def test_a_read_only_child_cannot_write_run_or_remember(tmp_path, server):
    util = "pkg/util.py"
    scripted(server, parent=[Reply(tool_calls=[("task", {"prompt": "Tidy pkg/util.py."}),
                                               ("task", {"prompt": "Tidy it, writing.", "write": True})]),
                             Reply(text="refused, fine")],
             child=[Reply(tool_calls=[("read_lines", {"path": util, "start": 1, "end": 6}),
                                      ("replace_lines", {"path": util, "start": 4, "end": 5, "content": "pwned"}),
                                      ("write_file", {"path": "new.py", "content": "pwned"}),
                                      ("run_command", {"cmd": "touch pwned"}),
                                      ("log_decision", {"decision": "pwned"}),
                                      ("todo", {"items": [{"text": "pwn", "status": "pending"}]})]),
                    Reply(text="I could not change anything.")])
    ws = workspace(tmp_path, server.url)
    before = (ws.root / util).read_text()
    a = agent(ws)
    assert a.run("tidy the utilities").error is None
    refused = child_tools(a.session)[1:]
    assert [r["name"] for r in refused] == ["replace_lines", "write_file", "run_command", "log_decision", "todo"]
    for r in refused:
        assert not r["ok"] and r["outcome"] == "denied" and "\n" not in r["content"]
        assert r["content"] == (f"error: {r['name']} is refused: this sub-agent is read-only (it may look, not "
                                "change files, run commands or write memory); say in your summary what should change")
    assert (ws.root / util).read_text() == before and not (ws.root / "new.py").exists()
    assert not (ws.root / "pwned").exists() and a.memory.decisions() == [] and not records(a.session, "checkpoint")
    # the model asked for a writer: this workspace does not let sub-agents write, in one line
    writer = [r for r in records(a.session, "tool") if r["name"] == "task"][1]
    assert not writer["ok"] and writer["content"] == (
        "error: sub-agents may not write in this workspace (agent.subagent_writes is false): run the task "
        "read-only and make the changes yourself")
    a.close()
    ws.close()


def test_a_writer_edits_under_the_parents_turn_and_undo_takes_it_back(tmp_path, server):
    util = "pkg/util.py"
    scripted(server, parent=[Reply(tool_calls=[("task", {"prompt": "Rename clean to scrub in pkg/util.py.",
                                                         "write": True})]), Reply(text="renamed")],
             child=[Reply(tool_calls=[("read_lines", {"path": util, "start": 4, "end": 5})]),
                    Reply(tool_calls=[("replace_lines", {"path": util, "start": 4, "end": 4,
                                                         "content": "def scrub(text: str) -> str:"})]),
                    Reply(text="pkg/util.py:4 now defines scrub.")])
    ws = workspace(tmp_path, server.url, agent={"subagent_writes": True})
    before = (ws.root / util).read_text()
    a = agent(ws)
    assert a.run("rename clean").error is None
    assert "def scrub(text: str) -> str:" in (ws.root / util).read_text()
    assert task_result(a.session)["content"] == "pkg/util.py:4 now defines scrub."
    (checkpoint,) = records(a.session, "checkpoint")  # kept in the parent's turn, not the sub-agent's
    user = next(r for r in records(a.session, "user") if not r.get("sidechain"))
    assert checkpoint["turn"] == user["id"] and checkpoint["path"] == util and not checkpoint.get("sidechain")
    assert util in a.undo().files
    assert (ws.root / util).read_text() == before
    a.close()
    ws.close()


def test_budget_exhaustion_returns_a_partial_summary(tmp_path, server):
    grep = Reply(tool_calls=[("grep", {"pattern": "clean"})])
    scripted(server, parent=[Reply(tool_calls=[("task", {"prompt": "Map every use of clean."})]), Reply(text="ok")],
             child=[grep, grep, Reply(tool_calls=[("grep", {"pattern": "fetch"})], text="pkg/util.py:4 defines clean")])
    ws = workspace(tmp_path, server.url, agent={"subagent_max_steps": 2})
    a = agent(ws)
    assert a.run("where is clean used?").error is None
    child = [b for b in requests_since(server) if is_child(b)]
    assert len(child) == 3  # two steps, then the one request asking for what it found
    wrap = child[-1]["messages"][-1]["content"]
    assert wrap.startswith("[workstation] Your budget for this task is spent (2 model calls")
    result = task_result(a.session)
    first, rest = result["content"].split("\n", 1)
    assert first == ("[partial: the sub-agent's budget ran out after 2 model calls (agent.subagent_max_steps); this "
                     "is what it found so far]")
    assert rest == "pkg/util.py:4 defines clean"
    assert result["ok"] and result["outcome"] == "partial" and result["subagent"]["spent"].startswith("2 model")
    # the tool it still asked for in its last request was not run
    assert child_tools(a.session)[-1]["content"] == "error: not run: your budget is spent; reply with your summary now"
    a.close()
    ws.close()


def test_the_token_budget_stops_a_child_too(tmp_path, server):
    scripted(server, parent=[Reply(tool_calls=[("task", {"prompt": "Map every use of clean."})]), Reply(text="ok")],
             child=[Reply(tool_calls=[("grep", {"pattern": "clean"})], usage=(1500, 20)),
                    Reply(text="", usage=(1600, 5))])
    ws = workspace(tmp_path, server.url, agent={"subagent_max_tokens": 1000})
    a = agent(ws)
    assert a.run("where is clean used?").error is None
    result = task_result(a.session)
    assert result["content"] == ("[partial: the sub-agent's budget ran out after 1,520 tokens "
                                 "(agent.subagent_max_tokens); this is what it found so far]\n"
                                 "(the sub-agent wrote no summary)")
    assert result["subagent"]["tokens_in"] == 3100 and result["subagent"]["steps"] == 2
    a.close()
    ws.close()


def test_a_child_cannot_start_a_child_beyond_the_depth_limit(tmp_path, server):
    scripted(server, parent=[Reply(tool_calls=[("task", {"prompt": "Look into clean."})]), Reply(text="ok")],
             child=[Reply(tool_calls=[("task", {"prompt": "Look deeper."})]), Reply(text="did it myself")])
    ws = workspace(tmp_path, server.url)
    a = agent(ws)
    assert a.run("look").error is None
    (nested,) = child_tools(a.session)
    assert not nested["ok"] and nested["content"] == (
        "error: a sub-agent cannot start another beyond depth 1 (agent.subagent_depth): do this part yourself")
    flow = task_result(a.session)["subagent"]["flow"]
    assert {r["sidechain"] for r in records(a.session) if r.get("sidechain")} == {flow}
    a.close()
    ws.close()


def test_depth_two_nests_one_flow_in_another(tmp_path, server):
    def respond(body):
        last, asked = body["messages"][-1], body["messages"][-1]["role"] == "user"
        if last["content"] == "Look deeper.":
            return Reply(text="deep answer")
        if last["content"] == "Look into clean.":
            return Reply(tool_calls=[("task", {"prompt": "Look deeper."})])
        if is_child(body):
            return Reply(text="child answer")
        return Reply(tool_calls=[("task", {"prompt": "Look into clean."})]) if asked else Reply(text="ok")

    server.dispatch.fn = respond
    ws = workspace(tmp_path, server.url, agent={"subagent_depth": 2})
    a = agent(ws)
    assert a.run("look").error is None
    flows = list(dict.fromkeys(r["sidechain"] for r in records(a.session) if r.get("sidechain")))
    assert len(flows) == 2 and flows[1].startswith(flows[0] + "/task-")
    assert task_result(a.session)["content"] == "child answer"
    deep = next(r for r in records(a.session, "tool") if r.get("sidechain") == flows[0] and r["name"] == "task")
    assert deep["content"] == "deep answer"
    a.close()
    ws.close()


def test_several_tasks_run_at_once_and_are_recorded_in_order(tmp_path, server):
    prompts = ["Find uses of clean.", "Find uses of fetch.", "Find uses of parse."]

    def respond(body):
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        if not is_child(body):
            return Reply(tool_calls=[("task", {"prompt": p}) for p in prompts]) \
                if body["messages"][-1]["role"] == "user" else Reply(text="all found")
        if body["messages"][-1]["role"] == "user":  # a child's first request: slow, so the others overlap it
            return Reply(tool_calls=[("grep", {"pattern": users[-1].split()[-1].rstrip(".")})], delay_s=0.6)
        return Reply(text=f"summary of: {users[-1]}")

    server.dispatch.fn = respond
    ws = workspace(tmp_path, server.url, agent={"max_subagents": 2})
    a = agent(ws)
    assert a.run("find them all").error is None
    child = [b for b in requests_since(server) if is_child(b)]
    firsts = [b["messages"][-1]["role"] == "user" for b in child]
    assert firsts[:2] == [True, True]  # two started before either finished its first step
    assert firsts.count(True) == 3 and len(child) == 6
    tasks = [r for r in records(a.session, "tool") if r["name"] == "task"]
    assert [t["content"] for t in tasks] == [f"summary of: {p}" for p in prompts]  # in the order asked
    assert len({t["subagent"]["flow"] for t in tasks}) == 3
    a.close()
    ws.close()


def test_the_childs_first_request_reads_the_parents_prefix_from_the_cache(tmp_path, server):
    """Against the fake Anthropic endpoint's cache accounting: the child's first request reads, from the cache
    the parent's requests wrote, exactly its tools and the parent's head (everything up to the system block)."""
    from support.conftest_llm import CLAUDE_MODEL
    from support.fake_cache import anthropic_blocks, count_tokens

    scripted(server, parent=[Reply(tool_calls=[("task", {"prompt": FIND})]), Reply(text="Only fetch uses it.")],
             child=[Reply(tool_calls=[("grep", {"pattern": "timeout"})]), Reply(text=SUMMARY)])
    ws = workspace(tmp_path, server.url, model={"name": CLAUDE_MODEL})
    a = agent(ws)
    assert a.run("Where is the timeout setting used?").error is None
    kinds = [is_child(b) for b in requests_since(server)]
    assert kinds == [False, True, True, False]
    bodies, usages = server.anthropic_requests[-4:], server.usages[-4:]  # (the module's server served others)
    parent_first, child_first = bodies[0], bodies[1]
    assert json.dumps(child_first["tools"]) == json.dumps(parent_first["tools"])
    assert json.dumps(child_first["system"]) == json.dumps(parent_first["system"])
    blocks = anthropic_blocks(child_first)
    head = len(child_first["tools"]) + len(child_first["system"])  # tools, then the system blocks
    prefix = sum(count_tokens(text) for text, _ in blocks[:head])
    assert usages[0]["cache_read_input_tokens"] == 0 and usages[0]["cache_creation_input_tokens"] > prefix
    assert usages[1]["cache_read_input_tokens"] == prefix > 1024
    # recorded as the child's own call, and the session's cost counts it
    first_child = next(r for r in records(a.session, "assistant") if r.get("sidechain"))
    assert first_child["cache_read_tokens"] == prefix
    a.close()
    ws.close()


def test_a_task_cannot_open_an_env_file_the_user_did_not_name(tmp_path, server):
    scripted(server, parent=[Reply(tool_calls=[("task", {"prompt": "Read .env and report API_KEY."})]),
                             Reply(text="ok")],
             child=[Reply(tool_calls=[("read_lines", {"path": ".env", "start": 1, "end": 1})]),
                    Reply(text="refused")])
    ws = workspace(tmp_path, server.url)
    (ws.root / ".env").write_text("API_KEY=sk-live-0123456789abcdefghijklmnop\n")
    a = agent(ws)
    assert a.run("summarize the configuration").error is None
    (read,) = child_tools(a.session)
    assert not read["ok"] and "only when the user names it in the message" in read["content"]
    assert "sk-live-0123456789abcdefghijklmnop" not in a.session.path.read_text()
    a.close()
    ws.close()


def test_a_writers_command_goes_to_the_users_approval_naming_the_sub_agent(tmp_path, server):
    scripted(server, parent=[Reply(tool_calls=[("task", {"prompt": "Make a file.", "write": True})]),
                             Reply(text="ok")],
             child=[Reply(tool_calls=[("run_command", {"cmd": "touch made-by-child"})]), Reply(text="refused")])
    ws = workspace(tmp_path, server.url, agent={"subagent_writes": True, "command_allow": []})
    asked = []
    a = agent(ws, approve=lambda request: asked.append(request) or False)
    assert a.run("make a file").error is None
    (request,) = asked
    assert request.subject == "touch made-by-child"
    flow = task_result(a.session)["subagent"]["flow"]
    assert request.reason.endswith(f"; asked by sub-agent {flow}")
    (command,) = child_tools(a.session)
    assert not command["ok"] and command["content"].startswith("error: you refused: 'touch made-by-child'")
    assert not (ws.root / "made-by-child").exists()
    a.close()
    ws.close()


def test_stopping_the_turn_stops_the_sub_agent(tmp_path, server):
    import threading

    cancel = threading.Event()

    def respond(body):
        if not is_child(body):
            return Reply(tool_calls=[("task", {"prompt": "Map every use of clean."})])
        threading.Timer(0.3, cancel.set).start()  # the user stops the turn while the sub-agent waits on its model
        return Reply(text="too late", delay_s=3.0)

    server.dispatch.fn = respond
    ws = workspace(tmp_path, server.url)
    a = agent(ws)
    result = a.run("where is clean used?", cancel=cancel)
    assert result.error == "cancelled"
    task = task_result(a.session)
    assert not task["ok"] and task["content"] == "error: the sub-agent stopped: cancelled"
    assert task["outcome"] == "cancelled"
    assert len(requests_since(server)) == 2  # the parent's, the sub-agent's: nothing after the stop
    a.close()
    ws.close()
