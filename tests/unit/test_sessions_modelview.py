"""The model's view: summary in place of covered turns, rolling redaction, fetching originals back."""

from __future__ import annotations

import json

import pytest

from support.sessions_support import fill, make_config
from workstation.sessions import Session, SessionContext, SessionError, fetch_original
from workstation.sessions.records import Target
from workstation.sessions.modelview import redaction_start
from workstation.sessions.log import new_record_id
from workstation.sidecar import persist_redactions


def setup(tmp_path, **memory):
    memory.setdefault("redact_every", 10)
    memory.setdefault("redact_min_chars", 2000)
    config, paths = make_config(tmp_path, **memory)
    return config, Session.create(paths, "ctx")


def tool_messages(view):
    return [m for m in view.messages if m["role"] == "tool"]


def test_redaction_steps_every_n_turns_and_spares_the_live_window(tmp_path):
    config, session = setup(tmp_path)
    turns = fill(session, 19, tools=True, big=5400)  # tool outputs at turns 3, 7, 11, 15
    big_tools = [i for i, t in enumerate(turns) if t["type"] == "tool"]
    assert big_tools[:3] == [2, 6, 10]
    assert SessionContext.build(session, config).redactions == []  # 19 turns: no step reached yet
    turns += fill(session, 1, start=19)
    view = SessionContext.build(session, config)  # step at 20: outputs older than turn 11 go
    assert redaction_start(20, 10) == 10
    assert [r.record_id for r in view.redactions] == [turns[2]["id"], turns[6]["id"]]
    contents = [m["content"] for m in tool_messages(view)]
    assert contents[0] == (f"[REDACTED: Output of read_file (5,400 chars). Key context: src/mod_2.py. "
                           f"Fetch with record id {turns[2]['id']}.]")
    assert contents[2] == turns[10]["content"]  # inside the live window: verbatim
    # on disk nothing changed, and the original comes back by id
    assert fetch_original(session, turns[2]["id"])["content"] == turns[2]["content"]
    assert json.dumps(turns[2]["content"])[1:-1].encode() in session.path.read_bytes()


def test_small_outputs_stay(tmp_path):
    config, session = setup(tmp_path, redact_min_chars=6000)
    fill(session, 30, tools=True, big=5400)
    view = SessionContext.build(session, config)
    assert view.redactions == [] and all("REDACTED" not in m["content"] for m in tool_messages(view))


def test_redaction_shrinks_the_token_count(tmp_path):
    config, session = setup(tmp_path)
    fill(session, 30, tools=True, big=8000)
    unredacted = SessionContext.build(session, make_config(tmp_path, redact_min_chars=10**6)[0])
    view = SessionContext.build(session, config)
    assert len(view.redactions) == 5
    assert view.tokens < unredacted.tokens - 5 * 1000


def test_persisted_redaction_records_are_idempotent_and_durable(tmp_path):
    config, session = setup(tmp_path)
    turns = fill(session, 20, tools=True, big=3000)
    record = persist_redactions(session, config)
    assert record["type"] == "redaction" and record["at_turn"] == 5  # 20 records, 5 of them user messages
    assert [t["id"] for t in record["targets"]] == [turns[2]["id"], turns[6]["id"]]
    assert record.targets[0] == Target(id=turns[2].id, name="read_file", chars=3000, key="src/mod_2.py")
    assert persist_redactions(session, config) is None  # nothing new
    # a later, more lenient setting does not bring a redacted output back
    lenient = make_config(tmp_path, redact_min_chars=10**6)[0]
    view = SessionContext.build(session, lenient)
    assert {r.record_id for r in view.redactions} == {turns[2]["id"], turns[6]["id"]}


def test_key_context_falls_back_to_the_output_itself(tmp_path):
    config, session = setup(tmp_path, redact_every=2, redact_min_chars=10)
    session.user("go")
    session.assistant("", [{"id": "c1", "name": "shell", "arguments": "not json"}])
    session.tool("c1", "shell", "\n\nBUILD FAILED in 3s\n" + "." * 50)
    fill(session, 3, start=3)
    marker = tool_messages(SessionContext.build(session, config))[0]["content"]
    assert marker.startswith("[REDACTED: Output of shell (") and "Key context: BUILD FAILED in 3s." in marker


def test_summary_replaces_exactly_the_covered_turns(tmp_path):
    config, session = setup(tmp_path)
    turns = fill(session, 8)
    session.append("compact", summary="## Task & instructions\nbuild it", model="openai/compact",
                   covers={"first_id": turns[0]["id"], "last_id": turns[4]["id"], "first_turn": 1, "last_turn": 5})
    view = SessionContext.build(session, config, system_prompt="You are terse.")
    # the summary stops inside a turn (after its user message): that message still opens the turns sent
    assert [m["role"] for m in view.messages] == ["system", "system", "user", "assistant", "user", "assistant"]
    assert view.messages[0]["content"] == "You are terse."
    assert view.messages[1]["content"].startswith("Summary of the earlier conversation (turns 1–5")
    assert "build it" in view.messages[1]["content"]
    assert [m["content"] for m in view.messages[2:]] == [t["content"] for t in turns[4:]]
    # a summary that ends with a whole turn repeats nothing
    session.append("compact", summary="## Task & instructions\nbuild it", model="openai/compact",
                   covers={"first_id": turns[0]["id"], "last_id": turns[5]["id"], "first_turn": 1, "last_turn": 6})
    view = SessionContext.build(session, config, system_prompt="You are terse.")
    assert [m["content"] for m in view.messages[2:]] == [t["content"] for t in turns[6:]]


def test_covered_range_found_by_number_when_its_last_line_is_lost(tmp_path):
    config, session = setup(tmp_path)
    turns = fill(session, 8)  # user/assistant alternating: 4 turns
    session.append("compact", summary="s", model="m",
                   covers={"first_id": turns[0]["id"], "last_id": "lost-line", "first_turn": 1, "last_turn": 3})
    view = SessionContext.build(session, config)
    # every record before turn 4's message is covered (a turn: a user message and what answered it)
    assert view.covered_turns == 6 and [m["content"] for m in view.messages[1:]] == [t["content"] for t in turns[6:]]


def test_tool_call_pairs_stay_valid_for_the_api(tmp_path):
    config, session = setup(tmp_path)
    session.user("a")
    session.assistant("", [{"id": "c1", "name": "read_file", "arguments": {"path": "x"}},
                           {"id": "c2", "name": "read_file", "arguments": {"path": "y"}}])
    session.tool("c1", "read_file", "X")  # c2 never got a result: the process died
    session.user("b")
    session.tool("c9", "read_file", "orphan")  # a result without its call
    session.assistant("", [{"id": "c3", "name": "run", "arguments": {}}])  # pending: about to run
    messages = SessionContext.build(session, config).messages
    assert [(m["role"], m.get("tool_call_id")) for m in messages] == [
        ("user", None), ("assistant", None), ("tool", "c1"), ("tool", "c2"), ("user", None), ("assistant", None)]
    assert messages[3]["content"] == "[no result recorded]"
    assert messages[1]["content"] is None and messages[1]["tool_calls"][1]["function"]["name"] == "read_file"


def test_fetching_an_unknown_record(tmp_path):
    _, session = setup(tmp_path)
    fill(session, 2)
    with pytest.raises(SessionError, match="has no record"):
        fetch_original(session, new_record_id())
