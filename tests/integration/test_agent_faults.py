"""Faults of the model call leave the session intact, with one clear line (real litellm, scripted server)."""

from __future__ import annotations

import json
import threading

import pytest

from support.agent_support import agent, events, module_server, records, requests_since, tool_results, workspace
from support.fakellm import Reply
from workstation.agent.loop import AgentEvents

server_module, server = module_server()

FAULTS = {
    "timeout": (Reply(text="too late", delay_s=1.6), "timed out after 1s"),
    "rate limit": (Reply(status=429, error_message="slow down"), "rate limited (429)"),
    "server error": (Reply(status=500, error_message="upstream exploded"), "server error (500)"),
    "dropped stream": (Reply(text="a long answer that never finishes", drop_stream_after=3), "cut off"),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_a_failed_model_call_leaves_the_session_intact(tmp_path, server, fault):
    reply, phrase = FAULTS[fault]
    ws = workspace(tmp_path, server.url, model={"timeout_s": 1.0})
    a = agent(ws)
    server.push(Reply(text="first answer"))
    assert a.run("first question").error is None
    server.push(reply)
    streamed: list[str] = []
    result = a.run("second question", AgentEvents(on_text=streamed.append))
    assert result.error is not None and phrase in result.error, result.error
    assert "\n" not in result.error and len(result.error) < 300
    log = [r for r in records(a.session) if r["type"] != "epoch"]  # readable, no torn line, every turn kept
    assert [(r["type"], r.get("content")) for r in log[:4]] == [
        ("user", "first question"), ("assistant", "first answer"), ("user", "second question"),
        ("system", f"[{result.error}]")]
    assert log[3]["notice"] == "error" and len(log) == 4
    failed = [e for e in events(ws, a.session.slug) if e["type"] == "model_call"]
    assert [e["ok"] for e in failed] == [True, False] and phrase in failed[1]["data"]["error"]
    # the conversation goes on; the failure notice is for the user, not a turn for the model
    server.push(Reply(text="third answer"))
    assert a.run("third question").text == "third answer"
    sent = requests_since(server)[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user", "user"]
    assert result.error not in json.dumps(sent)
    a.close()
    ws.close()


def test_malformed_tool_call_json_is_answered_and_the_turn_goes_on(tmp_path, server):
    ws = workspace(tmp_path, server.url)
    a = agent(ws)
    server.push(Reply(tool_calls=[("read_lines", '{"path": "pkg/core.py", "start": 1,')]))

    def respond(body):
        (name, _args, content), = tool_results(body["messages"])
        respond.seen = (name, content, body["messages"][-2]["tool_calls"][0]["function"]["arguments"])
        return Reply(text="sorry, fixed")

    server.dispatch.fn = respond
    result = a.run("read the start of core")
    assert result.error is None and result.text == "sorry, fixed"
    name, content, args_sent_back = respond.seen
    assert name == "read_lines" and content.startswith("error: malformed tool-call arguments for read_lines")
    assert "send the call again with one valid JSON object" in content
    assert args_sent_back == "{}"  # providers reject invalid JSON in a request: sent back sanitized
    call = records(a.session, "assistant")[0]["tool_calls"][0]
    assert call["arguments"] == '{"path": "pkg/core.py", "start": 1,'  # the log keeps what the model sent
    tool = records(a.session, "tool")[0]
    assert tool["ok"] is False
    a.close()
    ws.close()


def test_a_ten_megabyte_tool_argument_is_refused_in_one_line_and_not_carried(tmp_path, server):
    from workstation.llm import MAX_TOOL_ARGS_CHARS

    ws = workspace(tmp_path, server.url, model={"timeout_s": 60})
    a = agent(ws)
    big = "x = 1  # filler\n" * (10_000_000 // 16)
    server.push(Reply(args_chunk_size=1 << 20, tool_calls=[("umem", {"tier": "ltm", "key": "k", "value": big})]))

    def respond(body):
        (name, _args, content), = tool_results(body["messages"])
        respond.seen = (content, len(json.dumps(body)))
        return Reply(text="I will write it in parts")

    server.dispatch.fn = respond
    result = a.run("store the big value")
    assert result.error is None and result.text == "I will write it in parts"
    content, request_size = respond.seen
    # the stream is left once past the limit (test_agent_big_arguments.py): the size is what was read
    assert content.startswith("error: tool-call arguments for umem are more than 1,") and \
        f"characters, over the limit of {MAX_TOOL_ARGS_CHARS:,}" in content, content
    assert request_size < 100_000  # the next request carries a note, not the 10 MB
    call = records(a.session, "assistant")[0]["tool_calls"][0]
    assert "over the 1,000,000-character limit" in json.loads(call["arguments"])["not_kept"]
    assert ws.paths.sessions.joinpath("s.jsonl").stat().st_size < 100_000
    a.close()
    ws.close()


def test_cancel_stops_the_turn_and_keeps_the_log(tmp_path, server):
    ws = workspace(tmp_path, server.url)
    a = agent(ws)
    cancel = threading.Event()
    server.push(Reply(text="a slow answer " * 20, chunk_delay_s=0.05))
    result = a.run("go slowly", AgentEvents(on_text=lambda _t: cancel.set()), cancel=cancel)
    assert result.error == "cancelled"
    assert [r["type"] for r in records(a.session)] == ["epoch", "user", "system"]
    server.push(Reply(text="fast"))
    assert a.run("again").text == "fast"
    a.close()
    ws.close()


def test_cancel_between_tool_calls_answers_every_call(tmp_path, server):
    ws = workspace(tmp_path, server.url)
    cancel = threading.Event()
    a = agent(ws)
    server.push(Reply(tool_calls=[("find", {"query": "fetch"}), ("find", {"query": "parse"})]))
    result = a.run("find things", AgentEvents(on_tool=lambda *_: cancel.set()), cancel=cancel)
    assert result.error == "cancelled"
    tools = records(a.session, "tool")
    assert [t["ok"] for t in tools] == [True, False]
    assert tools[1]["content"] == "[not run: the user cancelled]"
    server.push(Reply(text="resumed"))
    assert a.run("go on").text == "resumed"
    sent = requests_since(server)[-1]["messages"]
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "tool", "tool", "user"]
    a.close()
    ws.close()


def test_max_steps_stops_a_runaway_turn(tmp_path, server):
    ws = workspace(tmp_path, server.url, agent={"max_steps": 2})
    a = agent(ws)
    server.push(Reply(tool_calls=[("decisions", {})]), Reply(tool_calls=[("decisions", {})]))
    result = a.run("loop forever")
    assert result.error.startswith("stopped after 2 steps (agent.max_steps)")
    assert len(requests_since(server)) == 2
    a.close()
    ws.close()


def test_an_unreachable_model_says_so_with_how_to_fix_it(tmp_path, server):
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ws = workspace(tmp_path, f"http://127.0.0.1:{port}/v1")
    a = agent(ws)
    result = a.run("hello?")
    assert result.error.startswith(f"could not connect to openai/test-model at http://127.0.0.1:{port}/v1")
    assert result.error.endswith("(check [model] in ~/.config/workstation/config.toml, or /model NAME)")
    assert "\n" not in result.error
    assert [r["type"] for r in records(a.session)] == ["epoch", "user", "system"]
    a.close()
    ws.close()
