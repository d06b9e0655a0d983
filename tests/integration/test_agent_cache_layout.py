"""Requests a provider's prefix cache can serve: within an epoch each request is the one before it with
new messages at the end, whatever changes meanwhile (a decision, a pin, an edit, an undo, instructions
on disk); only a compaction writes a new head. Through the real litellm path to the scripted server."""

from __future__ import annotations

import json
import time

from support.agent_support import agent, module_server, records, requests_since, workspace
from support.fakellm import Reply
from workstation.agent.loop import AgentEvents

server_module, server = module_server()

SUMMARY = ("## Task & instructions\nadd request_id\n## Decisions & conventions\n(none)\n## Files touched\n"
           "(none)\n## Open to-dos\n(none)\n## Errors seen\n(none)")


def scripted(server, replies):
    queue = list(replies)

    def respond(body):
        if any(str(m.get("content") or "").startswith("You compact") for m in (body["messages"][0],
                                                                                 body["messages"][-1])):
            return Reply(text=SUMMARY)
        return queue.pop(0)

    server.dispatch.fn = respond
    return queue


def assert_grows_at_the_end(sent: list[dict]) -> None:
    """Every request is its predecessor's messages, byte for byte, then more."""
    for before, after in zip(sent, sent[1:]):
        old, new = before["messages"], after["messages"]
        assert len(new) > len(old)
        assert json.dumps(new[: len(old)]) == json.dumps(old)
        assert json.dumps(after.get("tools")) == json.dumps(before.get("tools"))


def updates_in(messages: list[dict]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "user" and m["content"].startswith("[workstation] ")]


def test_a_logged_decision_is_appended_and_the_earlier_bytes_stay(tmp_path, server):
    scripted(server, [
        Reply(tool_calls=[("log_decision", {"decision": "request_id: str | None = None, last",
                                            "reasoning": "backward compatible"})]),
        Reply(text="logged"),
        Reply(text="second turn"),
    ])
    ws = workspace(tmp_path, server.url)
    a = agent(ws)
    assert a.run("Decide the request_id convention for pkg/core.py").error is None
    assert a.run("and now?").error is None
    sent = requests_since(server)
    assert len(sent) == 3
    assert_grows_at_the_end(sent)
    # the decision is not in the head (logged after it was written) but in an update after the tool result
    assert "request_id: str | None = None, last" not in sent[1]["messages"][0]["content"]
    (update,) = updates_in(sent[1]["messages"])
    assert update.startswith("[workstation] Decisions logged since") and "[D:d" in update
    assert sent[1]["messages"][-1]["content"] == update
    assert len(records(a.session, "epoch")) == 1
    a.close()
    ws.close()


def test_a_pin_and_an_instruction_file_changed_on_disk_are_appended(tmp_path, server):
    scripted(server, [Reply(text="one"), Reply(text="two"), Reply(text="three")])
    ws = workspace(tmp_path, server.url)
    (ws.root / "AGENTS.md").write_text("Use tabs.\n")
    a = agent(ws)
    assert a.run("first").error is None
    assert "Use tabs." in requests_since(server)[0]["messages"][0]["content"]
    a.pin("always answer in French")
    assert a.run("second").error is None
    (ws.root / "AGENTS.md").write_text("Use four spaces, never tabs.\n")
    assert a.run("third").error is None
    sent = requests_since(server)
    assert_grows_at_the_end(sent)
    pin_update, agents_update = updates_in(sent[2]["messages"])
    assert "Pinned instructions added" in pin_update and "always answer in French" in pin_update
    assert "Project instructions changed" in agents_update and "Use four spaces, never tabs." in agents_update
    # each update is sent once, before the user message it came with
    assert sent[2]["messages"][-1] == {"role": "user", "content": "third"}
    assert sum("always answer in French" in str(m["content"]) for m in sent[2]["messages"]) == 1
    a.close()
    ws.close()


def test_an_edit_and_its_undo_reach_the_model_at_the_end(tmp_path, server):
    scripted(server, [
        Reply(tool_calls=[("read_lines", {"path": "pkg/core.py", "start": 1, "end": 20})]),
        Reply(tool_calls=[("edit_file", {"path": "pkg/core.py", "old": "def fetch(url: str, timeout: float = 5.0)",
                                         "new": "def fetch(url: str, timeout: float = 5.0, request_id=None)"})]),
        Reply(text="edited"),
        Reply(text="what I changed is gone"),
    ])
    ws = workspace(tmp_path, server.url)
    a = agent(ws)
    assert a.run("Add request_id to fetch in pkg/core.py").error is None
    assert "request_id" in (ws.root / "pkg/core.py").read_text()
    done = a.undo()
    assert done.files == ["pkg/core.py"] and "request_id" not in (ws.root / "pkg/core.py").read_text()
    assert a.run("What did you change?").error is None
    sent = requests_since(server)
    assert_grows_at_the_end(sent)
    told = updates_in(sent[3]["messages"][len(sent[2]["messages"]):])
    assert any("undid the file changes of user turn 1" in t and "pkg/core.py" in t for t in told)
    a.close()
    ws.close()


def test_a_compaction_reads_the_cached_history_and_starts_a_new_epoch(tmp_path, server):
    ws = workspace(tmp_path, server.url, memory={"compact_threshold": 3, "keep_recent": 1})
    scripted(server, [Reply(text=f"answer {i}") for i in range(4)])
    a = agent(ws, compaction="sync")
    for i in range(4):
        assert a.run(f"message {i}", AgentEvents()).error is None
    sent = requests_since(server)
    kinds = ["compaction" if sent_i["messages"][-1]["content"].startswith("You compact") else "step"
             for sent_i in sent]
    assert kinds.count("compaction") == 1  # turns 1-2 folded in at the third; the fourth has 2 live turns
    at = kinds.index("compaction")
    # the compaction request is the conversation as last sent, grown at the end, plus the instruction
    assert_grows_at_the_end([sent[at - 1], sent[at]])
    assert "«message 2»" in sent[at]["messages"][-1]["content"]  # the message it keeps verbatim, named
    # the next request has a new head: the summary in force
    assert sent[at + 1]["messages"][1]["content"].startswith("Summary of the earlier conversation")
    assert len(records(a.session, "epoch")) == 2
    breaks = [r.get("cache_break") for r in records(a.session, "assistant")]
    assert breaks == ["first request", None, "compaction", None]
    (compact,) = records(a.session, "compact")
    assert compact["cached_history"] is True
    a.close()
    ws.close()


def test_a_model_switch_is_named_as_the_cache_break(tmp_path, server):
    scripted(server, [Reply(text="one"), Reply(text="two")])
    ws = workspace(tmp_path, server.url)
    a = agent(ws)
    notices = []
    assert a.run("first").error is None
    a.set_model("openai/other-model")
    assert a.run("second", AgentEvents(on_notice=notices.append)).error is None
    assert [r.get("cache_break") for r in records(a.session, "assistant")] == ["first request", "model switch"]
    assert notices == ["model switch: this request starts without the provider's prompt cache"]
    a.close()
    ws.close()


def test_a_compaction_between_turns_is_named_on_the_next_answer(tmp_path, server):
    """The app compacts in the background: the summary lands between turns, and the next message's epoch
    begins before its first request; that request's answer still names the compaction."""
    from workstation.commands import slash

    ws = workspace(tmp_path, server.url, memory={"compact_threshold": 60, "keep_recent": 1})
    scripted(server, [Reply(text=f"answer {i}") for i in range(4)])
    a = agent(ws)
    for i in range(3):
        assert a.run(f"message {i}").error is None
    assert slash.run(a, "/compact 1").ok
    assert a.run("message 3").error is None
    assert [r.get("cache_break") for r in records(a.session, "assistant")] == [
        "first request", None, None, "compaction"]
    a.close()
    ws.close()


CLAUDE = "anthropic/claude-sonnet-4-5-20250929"  # answered by the scripted server's Messages endpoint


def test_the_sidecars_compaction_reads_the_agents_cached_history(tmp_path, server):
    """The sidecar rebuilds from the log what the agent last sent (the epoch's head and tools, the turns)
    and appends the summary instruction: the provider serves the history from its cache. Past the TTL the
    cache is gone, and the sidecar sends a transcript instead."""
    from workstation.sidecar import CACHE_MARGIN_S, Sidecar, logged_conversation

    ws = workspace(tmp_path, server.url, model={"name": CLAUDE}, memory={"compact_threshold": 3, "keep_recent": 1})
    scripted(server, [Reply(text=f"answer {i} " + "words " * 400) for i in range(3)])
    a = agent(ws)  # compaction off: the sidecar does it
    for i in range(3):
        assert a.run(f"message {i}").error is None
    last_sent = requests_since(server)[-1]
    assert logged_conversation(a.session, ws.config, now=time.time() + 300 - CACHE_MARGIN_S + 1) is None  # cold
    car = Sidecar(ws.paths, ws.config)
    result = car.process(a.session.slug)
    assert result is not None and result.ok and result.model == CLAUDE
    sent = requests_since(server)[-1]
    assert sent["messages"][-1]["content"].startswith("You compact")
    assert_grows_at_the_end([last_sent, sent])  # the agent's last request, byte for byte, then the instruction
    assert json.dumps(server.anthropic_requests[-1]["tools"]) == json.dumps(server.anthropic_requests[-2]["tools"])
    # every token of the agent's last request is read from the cache; only the answer to it and the
    # instruction are new
    before, usage = server.usages[-2:]
    assert usage["cache_read_input_tokens"] == sum(before[k] for k in (
        "input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")), (before, usage)
    assert usage["input_tokens"] == 0 and usage["cache_creation_input_tokens"] < usage["cache_read_input_tokens"] / 3
    (compact,) = records(a.session, "compact")
    assert compact["cached_history"] is True and compact["cache_read_tokens"] == usage["cache_read_input_tokens"]
    a.close()
    ws.close()
