"""The scripted scenario policies read a request wherever the context puts things: the decision log in the system
message or a note appended later, a compaction as its own request or as the conversation with the prompt last."""

from __future__ import annotations

import pytest

from support.agent_scenario import RequestIdPolicy
from support.scenario_common import (PolicyError, context_text, decision, is_compaction, is_new_turn, latest_results,
                             summarize)
from workstation.sessions.compaction import PROMPT

DID = "d0123456789ab"
LOG = f"Decision log (follow these; cite [D:<id>] when you apply one):\n- [D:{DID}] use request_id (why: tracing)"
NOTE = f"[workstation] Decision logged: [D:{DID}] use request_id (why: tracing)"
MAP = "Repository map:\nshop/api.py: the facade\nshop/http.py: transport"


def call(cid: str, name: str, args: str = "{}") -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def conversation(system: str, *tail: dict) -> list[dict]:
    return [{"role": "system", "content": system}, {"role": "user", "content": "add request_id"},
            {"role": "assistant", "content": "", "tool_calls": [call("c1", "log_decision")]},
            {"role": "tool", "tool_call_id": "c1", "content": f"decision {DID} logged"}, *tail]


def test_a_decision_is_found_in_the_system_log_or_in_a_later_note():
    in_system = conversation("base\n\n" + LOG)
    in_note = conversation("base", {"role": "user", "content": NOTE})
    for messages in (in_system, in_note):
        assert decision(messages, "request_id") == (DID, "use request_id (why: tracing)")
    cited_only = conversation("base", {"role": "assistant", "content": f"applying [D:{DID}] use request_id"})
    with pytest.raises(PolicyError, match="no decision about request_id"):
        decision(cited_only, "request_id")  # the model's own citation is not the log


def test_a_note_after_tool_results_is_not_a_new_turn():
    messages = conversation("base", {"role": "user", "content": NOTE})
    assert not is_new_turn(messages)
    assert latest_results(messages) == [("log_decision", {}, f"decision {DID} logged")]
    assert is_new_turn(messages + [{"role": "user", "content": "now check it"}])


def test_the_map_is_read_from_the_system_message_or_a_note():
    for messages in ([{"role": "system", "content": "base\n\n" + MAP}, {"role": "user", "content": "go"}],
                     [{"role": "system", "content": "base"}, {"role": "user", "content": "[workstation] " + MAP},
                      {"role": "user", "content": "go"}]):
        assert "shop/http.py: transport" in context_text(messages)
        policy = RequestIdPolicy()
        reply = policy({"messages": messages})
        assert [args["path"] for _, args in reply.tool_calls] == ["shop/api.py", "shop/http.py"]


def test_both_forms_of_a_compaction_request_get_a_summary():
    own = [{"role": "system", "content": PROMPT},
           {"role": "user",
            "content": f"[turn 1] user: add request_id\n[turn 1] tool log_decision: decision {DID} logged"}]
    appended = conversation("base\n\n" + LOG, {"role": "user", "content": PROMPT})
    assert not is_compaction(conversation("base"))
    for messages in (own, appended):
        assert is_compaction(messages)
        text = RequestIdPolicy()({"messages": messages}).text
        assert text == summarize(messages)
        assert "## Task & instructions\n- add request_id\n## Decisions & conventions\n" \
               f"- decision {DID} logged\n## Files touched" in text


def test_the_httpx_policy_maps_the_named_files_and_asks_again_for_a_cut_map():
    from support.httpx_scenario import API, BIG_MAP, CLIENT, TASK, HttpxRequestIdPolicy

    policy = HttpxRequestIdPolicy()
    messages = [{"role": "system", "content": "base"}, {"role": "user", "content": TASK}]  # no map in the context
    first = policy({"messages": messages})
    assert first.tool_calls == [("file_meta", {"path": API}), ("file_meta", {"path": CLIENT})]
    messages += [{"role": "assistant", "content": "", "tool_calls": [
        call("m1", "file_meta", f'{{"path": "{API}"}}'), call("m2", "file_meta", f'{{"path": "{CLIENT}"}}')]},
        {"role": "tool", "tool_call_id": "m1", "content": f"{API} (python, 438 lines)\n39-120 def request("},
        {"role": "tool", "tool_call_id": "m2", "content": f"{CLIENT} (python, 2019 lines)\n(+83 more symbols)"},
        {"role": "user", "content": NOTE}]
    again = policy({"messages": messages})
    assert again.tool_calls == [("file_meta", {"path": CLIENT, "tokens": BIG_MAP})] and policy.phase == "mapped"
