"""Compaction planned in turns (sessions/turns.py): the threshold and keep_recent count user messages, the
cut falls at a user message, and the token guard cuts inside one long turn before one of its steps."""

from __future__ import annotations

import pytest

from support.fakellm import ScriptedLLM
from support.sessions_support import KEY, KEY_ENV, fill_turns, make_config, summarizer
from workstation import llm
from workstation.sessions import Session, SessionContext, compact
from workstation.sessions.compaction import plan_compaction
from workstation.sessions.turns import Coverage, cut_fitting, number, of_log, starts_step, starts_turn


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    llm.warm_import()


@pytest.fixture
def server():
    with ScriptedLLM(summarizer()) as srv:
        yield srv


def _calls_and_results_together(folded: list[dict], kept: list[dict]) -> None:
    """No tool call on one side of a cut with its result on the other."""
    calls = {c["id"] for r in folded if r["type"] == "assistant" for c in r.get("tool_calls") or ()}
    assert all(r["tool_call_id"] in calls for r in folded if r["type"] == "tool")
    assert not any(r["tool_call_id"] in calls for r in kept if r["type"] == "tool")


def test_numbering_the_preamble_subagents_and_steps(tmp_path):
    _, paths = make_config(tmp_path)
    session = Session.create(paths, "n")
    preamble = session.system("an imported system prompt")
    records = fill_turns(session, 2, steps=2)
    sub = session.append("user", content="a subagent's prompt", sidechain="agent-1")
    records += fill_turns(session, 1, start=2)
    turns = number(session.read().records)
    assert turns.count == 3 and turns.of(preamble) == 0 and turns.of(sub) == 2
    assert [turns.of(r) for r in records] == [1, 1, 1, 1, 2, 2, 2, 2, 3, 3]
    assert turns.user_id(3) == records[8]["id"] and turns.user_id(4) is None
    assert not starts_turn(sub) and starts_step(records[1]) and not starts_step(records[2])


def test_the_threshold_counts_user_messages_not_records(tmp_path):
    config, paths = make_config(tmp_path, compact_threshold=4, keep_recent=2)
    session = Session.create(paths, "t")
    records = fill_turns(session, 3, steps=10)  # 3 turns, 60 records, 27 tool results
    assert plan_compaction(session.read(), config) is None
    records += fill_turns(session, 1, start=3, steps=10)
    plan = plan_compaction(session.read(), config)
    assert (plan.first_turn, plan.last_turn, plan.partial, plan.reason) == (1, 2, False, "threshold")
    assert plan.turns == records[:40] and starts_turn(records[40])  # cut at the user message of turn 3
    assert plan.numbers == [1] * 20 + [2] * 20
    # keep counts turns too: /compact 1 folds all but the last one
    manual = plan_compaction(session.read(), config, force=True, keep=1)
    assert (manual.last_turn, len(manual.turns)) == (3, 60)
    assert plan_compaction(session.read(), config, force=True, keep=4) is None  # nothing older than 4 turns


def test_the_token_guard_compacts_steps_of_one_long_turn(tmp_path, server):
    config, paths = make_config(tmp_path, server.url, compact_threshold=10, keep_recent=5,
                                compact_token_ratio=0.5)
    session = Session.create(paths, "long")
    records = fill_turns(session, 1, steps=40, big=600)  # one turn: 40 steps, 39 tool results
    total = sum(r["tokens"] for r in records)
    window = total  # the context is past half of it
    plan = plan_compaction(session.read(), config, window_tokens=window)
    assert plan.reason == "tokens" and (plan.first_turn, plan.last_turn, plan.partial) == (1, 1, True)
    folded, kept = plan.turns, records[len(plan.turns):]
    assert folded == records[: len(folded)] and kept[0]["type"] == "assistant"  # cut before a step
    from workstation.sessions.frontier import frontier_budget
    from workstation.sessions.requestsize import budget

    half = 0.5 * window / 2 - 2 * frontier_budget(budget(window))  # half the limit, less the frontier's room
    assert sum(r["tokens"] for r in kept) <= half  # the newest steps fitting half the budget
    assert sum(r["tokens"] for r in records[len(folded) - 2:]) > half  # and no fewer
    _calls_and_results_together(folded, kept)

    result = compact(session, config, window_tokens=window)
    assert result.ok and result.partial and result.describe().startswith("compacted turn 1 (1 up to its newest steps)")
    assert result.record["covers"]["last_id"] == folded[-1]["id"] and result.record["covers"]["last_turn"] == 1
    view = SessionContext.build(session, config)
    # the turn's own user message still opens what is sent, the summary having stopped inside that turn
    assert view.messages[0]["role"] == "system" and view.messages[1]["role"] == "user"
    assert view.messages[1]["content"] == records[0]["content"] and records[0]["type"] == "user"
    assert [m.get("content") for m in view.messages[2:]] == [r["content"] for r in kept]
    assert of_log(session.read())[1] == Coverage(1, True) and Coverage(1, True).describe() == "part of 1"
    # the next step of the same turn goes on from there; a new turn makes the cut a user message again
    assert plan_compaction(session.read(), config, window_tokens=window) is None
    fill_turns(session, 10, start=1)
    again = plan_compaction(session.read(), config)
    assert (again.first_turn, again.last_turn, again.partial) == (1, 6, False)
    assert again.turns[0]["id"] == kept[0]["id"] and again.turns[-1]["content"] == "turn 6: done"


def test_a_step_too_long_for_the_budget_stays_whole(tmp_path):
    _, paths = make_config(tmp_path)
    session = Session.create(paths, "big")
    records = fill_turns(session, 1, steps=3, big=5000)
    cut = cut_fitting(records, budget=10)  # not even the newest step fits: it stays, whole
    assert records[cut]["content"] == "turn 1: done" and cut == len(records) - 1
    cut = cut_fitting(records[:-1], budget=10)  # the newest step is an assistant call and its result
    assert records[cut]["type"] == "assistant" and records[cut + 1]["type"] == "tool" and cut == len(records) - 3
