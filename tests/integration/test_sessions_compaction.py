"""Compaction through the real litellm path against the scripted server: knobs, fallbacks, folding."""

from __future__ import annotations

import copy
import sys
import threading
import warnings

import pytest

from support.fakellm import Reply, ScriptedLLM
from support.sessions_support import (KEY, KEY_ENV, claim_held_elsewhere, compaction_events, fill_turns, make_config,
                              real_episodic, summarizer, turns_in_prompt, write_config_file)
from workstation import config as config_mod
from workstation.sessions.records import Covers
from workstation import llm
from workstation.cli import main
from workstation.cli.common import run_main
from workstation.sessions import log
from workstation.errors import ConfigError
from workstation.sessions import Session, SessionContext, compact, needs_compaction
from workstation.sessions.compaction import parse_sections, plan_compaction
from workstation.sessions.turns import Coverage, of_log


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    llm.warm_import()


@pytest.fixture
def server():
    with ScriptedLLM(summarizer()) as srv:
        yield srv


def setup(tmp_path, server, **memory):
    memory.setdefault("compact_threshold", 10)
    memory.setdefault("keep_recent", 4)
    config, paths = make_config(tmp_path, server.url, **memory)
    return config, Session.create(paths, "s")


def test_threshold_boundary(tmp_path, server):
    config, session = setup(tmp_path, server)
    turns = fill_turns(session, 9)
    assert not needs_compaction(session, config)
    assert compact(session, config) is None and server.requests == []
    turns += fill_turns(session, 1, start=9)
    assert needs_compaction(session, config)
    result = compact(session, config)
    assert result.ok and (result.first_turn, result.last_turn) == (1, 6) and result.reason == "threshold"
    assert turns_in_prompt(server.requests[0]) == [1, 2, 3, 4, 5, 6]
    record = result.record
    # turns 1-6 are records 0-11 (a user message and its answer each)
    assert record.covers == Covers(first_id=turns[0].id, last_id=turns[11].id, first_turn=1, last_turn=6,
                                   new_first_turn=1, new_first_id=turns[0].id)
    assert record["model"] == "openai/compact" and record["type"] == "compact"
    # the model sees the summary instead of turns 1-6, then exactly the newest keep_recent turns verbatim
    view = SessionContext.build(session, config)
    assert view.messages[0]["role"] == "system" and "## Task & instructions" in view.messages[0]["content"]
    assert [m["content"] for m in view.messages[1:]] == [t["content"] for t in turns[12:]]
    assert view.messages[1]["content"].startswith("turn 7: please keep going")
    numbered, covered = of_log(session.read())
    assert numbered.count == 10 and covered == Coverage(6, False)
    assert not needs_compaction(session, config)


def test_keep_recent_boundary_and_second_compaction(tmp_path, server):
    config, session = setup(tmp_path, server)
    fill_turns(session, 10)
    compact(session, config)
    fill_turns(session, 5, start=10)  # live: 4 kept + 5 = 9 turns, one short of the threshold
    assert not needs_compaction(session, config)
    fill_turns(session, 1, start=15)
    result = compact(session, config)
    assert (result.first_turn, result.last_turn) == (7, 12)  # only the not yet covered turns are sent
    assert turns_in_prompt(server.requests[1]) == [7, 8, 9, 10, 11, 12]
    view = SessionContext.build(session, config)
    assert [m["content"].split(":")[0] for m in view.messages[1:]] == [f"turn {n}" for n in range(13, 17) for _ in "ua"]


def test_the_cut_falls_at_a_user_message(tmp_path, server):
    config, session = setup(tmp_path, server)
    turns = fill_turns(session, 10, steps=3)  # each turn: user, (assistant calling, tool result) x2, assistant
    plan = plan_compaction(session.read(), config)
    assert (plan.first_turn, plan.last_turn, plan.partial) == (1, 6, False)
    assert plan.turns == turns[:36] and plan.turns[-1]["content"] == "turn 6: done"
    result = compact(session, config)
    assert result.last_turn == 6
    messages = SessionContext.build(session, config).messages
    assert messages[1]["role"] == "user" and messages[1]["content"].startswith("turn 7:")
    assert messages[2]["role"] == "assistant" and messages[3]["role"] == "tool"


def test_invalid_knobs_are_refused_with_one_line_each(tmp_path):
    with pytest.raises(ConfigError) as err:
        config_mod.validate({"memory": {"compact_threshold": 40, "keep_recent": 40}})
    assert "keep_recent (40) must be below compact_threshold (40)" in str(err.value)
    with pytest.raises(ConfigError, match="memory.compact_threshold"):
        config_mod.validate({"memory": {"compact_threshold": 1, "keep_recent": 0}})
    with pytest.raises(ConfigError, match="memory.compact_token_ratio"):
        config_mod.validate({"memory": {"compact_token_ratio": 1.5}})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config_mod.load(tmp_path, {"memory": {"compact_threshold": 60, "keep_recent": 57}})
    assert any("reclaims only 3 turns" in str(w.message) for w in caught)


@pytest.mark.parametrize("failure", [
    Reply(status=500),
    Reply(status=429, retry_after=0),
    Reply(delay_s=3.0),  # beyond the 2 s timeout of the test config
    Reply(text="## Task & instructions\nhalf an answ", drop_stream_after=3),
    Reply(text="I will not use your headings."),  # answers, but not a summary
], ids=["500", "429", "timeout", "dropped-stream", "no-sections"])
def test_fallback_model_takes_over(tmp_path, failure):
    answer = summarizer()

    def respond(body):
        return failure if body["model"] == "compact" else answer(body)

    with ScriptedLLM(respond) as server:
        config, session = setup(tmp_path, server)
        fill_turns(session, 10)
        with real_episodic(session.paths) as episodic:
            result = compact(session, config, episodic)
            [event] = compaction_events(episodic)
    assert result.ok and result.model == "openai/fallback"
    assert result.record["model"] == "openai/fallback"
    assert [r["model"] for r in server.requests] == ["compact", "fallback"]
    assert len(result.errors) == 1 and result.errors[0].startswith("openai/compact: ")
    assert event["ok"] is True and event["name"] == "s" and event["data"]["model"] == "openai/fallback"
    assert event["data"]["record_id"] == result.record["id"] and event["tokens_in"] == 100
    assert event["data"]["context_tokens_after"] == SessionContext.build(session, config).tokens


def test_both_models_failing_leaves_the_log_untouched(tmp_path):
    def respond(body):
        if body["model"] == "compact":
            return Reply(status=500, error_message="primary is down")
        return Reply(text="## Task", drop_stream_after=2)

    with ScriptedLLM(respond) as server:
        config, session = setup(tmp_path, server)
        turns = fill_turns(session, 12)
        before = session.path.read_bytes()
        with real_episodic(session.paths) as episodic:
            result = compact(session, config, episodic)
            [event] = compaction_events(episodic)
    assert result is not None and result.status == "failed" and not result.ok
    assert "openai/compact" in result.reason and "openai/fallback" in result.reason
    assert session.path.read_bytes() == before  # no record, raw turns intact
    assert event["type"] == "compaction" and event["name"] == "s" and event["ok"] is False
    assert "primary is down" in event["data"]["reason"] and "openai/fallback" in event["data"]["reason"]
    # the conversation goes on with every raw turn in context
    view = SessionContext.build(session, config)
    assert [m["content"] for m in view.messages] == [t["content"] for t in turns]


def test_unset_compact_model_falls_back_to_the_chat_model(tmp_path, server):
    config, session = setup(tmp_path, server, compact_model="", compact_fallback_model="")
    fill_turns(session, 12)
    result = compact(session, config)
    assert result.ok and result.record["model"] == "openai/chat"
    assert [r["model"] for r in server.requests] == ["chat"]


def test_unset_models_skip_without_calling_anything(tmp_path, server):
    config, session = setup(tmp_path, server, compact_model="", compact_fallback_model="")
    config.model.name = ""  # no chat model either
    fill_turns(session, 12)
    with real_episodic(session.paths) as episodic:
        result = compact(session, config, episodic)
        [event] = compaction_events(episodic)
    assert result.status == "failed" and "no model to compact with: set model.name or memory.compact_model" in result.reason
    assert server.requests == [] and event["ok"] is False and "no model to compact with" in event["data"]["reason"]
    assert session.read().compacts() == []


def test_recompaction_folds_the_previous_summary_in(tmp_path, server):
    config, session = setup(tmp_path, server)
    fill_turns(session, 10)
    first = compact(session, config).record
    fill_turns(session, 6, start=10)
    second = compact(session, config).record
    prompt = server.requests[1]["messages"][-1]["content"]
    assert "Previous summary (turns 1–6):" in prompt and "Summarized turns 1-6" in prompt
    assert "turn 3:" not in prompt  # covered turns are not sent again
    assert second["folds"] == first["id"] and second["covers"]["first_turn"] == 1
    assert second["covers"]["last_turn"] == 12 and second["covers"]["first_id"] == first["covers"]["first_id"]
    assert "Previous summary" not in second["summary"]  # never nested
    view = SessionContext.build(session, config)
    summaries = [m for m in view.messages if m["role"] == "system"]
    assert len(summaries) == 1 and "Summarized turns 7-12" in summaries[0]["content"]
    assert view.summary_id == second["id"]


def test_long_sessions_fold_in_chunks(tmp_path, server):
    config, session = setup(tmp_path, server, compact_threshold=60, keep_recent=20)
    fill_turns(session, 60, steps=3, big=1500)
    llm.set_context_window("openai/compact", 6000)
    try:
        result = compact(session, config)
    finally:
        llm.set_context_window("openai/compact", None)
    assert result.ok and result.record["calls"] == len(server.requests) > 2
    sent = [n for body in server.requests for n in turns_in_prompt(body)]
    # every turn, in order (a turn whose records straddle two chunks is in both)
    assert sorted(sent) == sent and list(dict.fromkeys(sent)) == list(range(1, result.last_turn + 1))
    assert result.last_turn == 40
    for body in server.requests[1:]:  # each chunk folds into the running summary
        assert "Previous summary" in body["messages"][-1]["content"]


def test_paths_and_errors_from_tool_calls_survive_the_summary(tmp_path):
    answer = summarizer(files="(none)")
    with ScriptedLLM(answer) as server:
        config, session = setup(tmp_path, server)
        fill_turns(session, 2, steps=2)
        call = {"id": "call_x", "name": "run", "arguments": {"command": "pytest", "path": "tests/test_x.py"}}
        session.assistant("running tests", [call])  # still turn 2
        session.tool("call_x", "run", "E   AssertionError: 3 != 4\nmore", ok=False)
        fill_turns(session, 8, start=2)
        record = compact(session, config).record
    assert "src/mod_2_1.py" in record["sections"]["files"] and "tests/test_x.py" in record["sections"]["files"]
    assert "run: E   AssertionError: 3 != 4" in record["sections"]["errors"]
    assert record["files"] == ["src/mod_1_1.py", "src/mod_2_1.py", "tests/test_x.py"]


def test_token_guard_compacts_before_the_turn_threshold(tmp_path, server):
    config, session = setup(tmp_path, server, compact_threshold=60, keep_recent=40, compact_token_ratio=0.5)
    fill_turns(session, 3, steps=3, big=4000)
    window = 3000  # the big outputs alone are far above half of it
    assert not needs_compaction(session, config, window_tokens=10**7)
    assert needs_compaction(session, config, window_tokens=window)
    result = compact(session, config, window_tokens=window)
    assert result.ok and result.reason == "tokens" and result.last_turn == 3 and result.partial
    view = SessionContext.build(session, config)
    assert view.tokens < 0.5 * window + 1500 and view.messages[-1]["content"] == "turn 3: done"


def test_two_workers_never_compact_the_same_range(tmp_path):
    answer = summarizer()

    def slow(body):
        reply = answer(body)
        reply.delay_s = 0.5
        return reply

    with ScriptedLLM(slow) as server:
        config, session = setup(tmp_path, server)
        fill_turns(session, 10)
        results = []
        workers = [threading.Thread(target=lambda: results.append(compact(Session(session.paths, "s"), config)))
                   for _ in range(3)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    assert sorted(r is None for r in results) == [False, True, True]
    assert len(session.read().compacts()) == 1 and len(server.requests) == 1


def test_manual_compaction_ignores_the_threshold(tmp_path, server):
    config, session = setup(tmp_path, server)
    fill_turns(session, 6)
    result = compact(session, config, force=True)
    assert result.ok and (result.first_turn, result.last_turn) == (1, 2) and result.reason == "manual"
    everything = compact(session, config, force=True, keep=0)
    assert (everything.first_turn, everything.last_turn) == (3, 6)
    assert compact(session, config, force=True, keep=0) is None  # nothing left to cover


def test_forced_compaction_says_so_when_another_process_is_compacting(tmp_path, server, monkeypatch, capsys):
    config, session = setup(tmp_path, server)
    fill_turns(session, 12)
    before = session.path.read_bytes()
    monkeypatch.setattr(log, "CLAIM_WAIT_S", 0.2)  # the CLI waits this long for the claim
    monkeypatch.setattr(sys, "argv", ["workstation", "-C", str(tmp_path), "session", "compact", "s"])
    with claim_held_elsewhere(session.paths, "s"):
        busy = compact(session, config, force=True, wait=0.1)
        assert compact(session, config) is None  # unforced: the holder does the work
        with pytest.raises(SystemExit) as exited:
            run_main(main)
    busy_line = "session s is being compacted by another process; try again when it finishes"
    assert (busy.status, busy.ok, busy.reason, busy.record) == ("busy", False, busy_line, None)
    assert exited.value.code == 1 and capsys.readouterr().err == f"error: {busy_line}\n"
    assert session.path.read_bytes() == before and server.requests == []
    assert compact(session, config, force=True).ok  # once the holder is gone


def test_section_parsing():
    text = "## Task & Instructions\nship it\n### Decisions\n- a\n**Files touched**\n- x.py\n## Errors seen\nnone"
    sections = parse_sections(text)
    assert sections == {"task": "ship it", "decisions": "- a", "files": "- x.py", "todos": "(none)",
                        "errors": "none"}
    with pytest.raises(Exception, match="none of the summary sections"):
        parse_sections("just prose")


def test_session_compact_focus_reaches_the_summarizer(tmp_path, server, monkeypatch, capsys):
    config, session = setup(tmp_path, server)
    write_config_file(tmp_path, server.url, compact_threshold=10, keep_recent=4)
    fill_turns(session, 8)
    monkeypatch.setattr(sys, "argv", ["workstation", "-C", str(tmp_path), "session", "compact", "s",
                                      "--focus", "the retry logic"])
    with pytest.raises(SystemExit) as exited:
        run_main(main)
    assert exited.value.code == 0, capsys.readouterr().err
    (request,) = server.requests
    prompt = request["messages"][1]["content"]
    assert prompt.startswith("The user asks this summary to focus on: the retry logic\n")
    assert session.read().compacts()[-1]["focus"] == "the retry logic"


def test_automatic_compaction_backs_off_from_a_failing_session_and_recovers(tmp_path, server):
    """The one policy the agent and the sidecar share: a failure is not retried on every turn or pass,
    the wait doubles up to its cap, and a success clears it."""
    from workstation.sessions.compaction import RETRY_MAX_S, RETRY_MIN_S, AutoCompactor

    config, session = setup(tmp_path, server)
    fill_turns(session, 12)
    now = [1000.0]
    down = copy.deepcopy(config)
    down.model.name = down.memory.compact_model = down.memory.compact_fallback_model = ""
    with real_episodic(session.paths) as episodic:
        auto = AutoCompactor(episodic, clock=lambda: now[0])
        waits = []
        for _ in range(7):
            assert auto.due(session, down)
            assert auto.run(session, down).status == "failed"
            waits.append(auto.waiting(session.slug))
            assert not auto.due(session, down) and auto.run(session, down) is None  # not asked again meanwhile
            now[0] += waits[-1]
        assert waits == [RETRY_MIN_S, 60.0, 120.0, 240.0, 480.0, RETRY_MAX_S, RETRY_MAX_S]
        assert len(compaction_events(episodic)) == 7  # one event per attempt, none while waiting
        result = auto.run(session, config)  # the model is back
        assert result.ok and auto.waiting(session.slug) == 0.0
        assert auto.run(session, config) is None  # nothing due any more
    assert len(session.read().compacts()) == 1


def test_compaction_asked_for_always_says_what_happened(tmp_path, server):
    from workstation.sessions.compaction import compact_now

    config, session = setup(tmp_path, server, keep_recent=2)
    fill_turns(session, 12)
    done = compact_now(session, config)
    assert done.ok and done.describe().startswith("compacted turns 1–10 of s with openai/compact")
    again = compact_now(session, config)
    assert again.status == "nothing" and not again.ok
    assert again.describe() == "nothing to compact in s: every turn but the newest 2 is summarized already"
    config.model.name = config.memory.compact_model = config.memory.compact_fallback_model = ""
    fill_turns(session, 4, start=12)
    failed = compact_now(session, config, keep=0)
    assert failed.describe().startswith("compaction of s skipped: no model to compact with")
