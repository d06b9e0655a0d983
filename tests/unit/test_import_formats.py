"""Each importer on a small fixture of its own (tests/fixtures/import/): the quirks its docstring names."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from workstation.config import Config
from workstation.importers.engine import Importer
from workstation.replay import Episode
from workstation.sessions.modelview import assemble
from workstation.sessions.log import LogView, Session

FIX = Path(__file__).parents[1] / "fixtures" / "import"


def _import(paths, name: str, db=None) -> tuple[object, dict[str, list[dict]]]:
    result = Importer(paths, db).import_file(FIX / name)
    assert not result.error and not result.problems, (result.error, result.problems)
    return result, {s.slug: Session(paths, s.slug).read().records for s in result.sessions}


def _only(sessions: dict[str, list[dict]]) -> list[dict]:
    assert len(sessions) == 1
    return next(iter(sessions.values()))


def _by_source(records: list[dict]) -> dict[str, dict]:
    return {r["source"]["id"]: r for r in records}


# --------------------------------------------------------------------------- Claude Code
def test_claude_split_response_is_one_record_with_its_usage_counted_once(paths):
    records = _only(_import(paths, "claude_session.jsonl")[1])
    by = _by_source(records)
    answer = by["a1"]
    assert answer["source"]["merged"] == ["a2", "a3", "a4"]
    assert answer["reasoning"] == "Look at the file first." and answer["content"] == "Reading it."
    assert [(c["id"], c["name"], json.loads(c["arguments"])) for c in answer["tool_calls"]] == [
        ("toolu_A", "Read", {"file_path": "/work/demo/setup.py"}),
        ("toolu_B", "Bash", {"command": "pytest -q", "description": "run tests"})]
    # usage of the last streamed line, once; the first line's output count kept beside it
    assert (answer["tokens_in"], answer["tokens_out"], answer["tokens_out_first"]) == (1104, 57, 2)
    assert (answer["cache_read_tokens"], answer["cache_creation_tokens"]) == (1000, 100)
    assert answer["finish_reason"] == "tool_use" and answer["model"] == "claude-sonnet-4-5-20250929"
    assert sum(1 for r in records if r["type"] == "assistant") == 7  # msg_1..msg_6 and the subagent's


def test_claude_tool_results_keep_native_names_and_failures(paths):
    records = _only(_import(paths, "claude_session.jsonl")[1])
    tools = [r for r in records if r["type"] == "tool"]
    assert [(t["tool_call_id"], t["name"], t["ok"], t["content"]) for t in tools] == [
        ("toolu_A", "Read", True, "from setuptools import setup\nsetup()"),
        ("toolu_B", "Bash", False, "1 failed"),
        ("toolu_C", "Task", True, "The assertion compares strings.")]
    last = records[-1]  # Edit was called and its result never logged: a call without a result
    assert last["tool_calls"][0]["name"] == "Edit" and not any(t["tool_call_id"] == "toolu_D" for t in tools)


def test_claude_provenance_times_cwd_and_branch(paths):
    records = _only(_import(paths, "claude_session.jsonl")[1])
    for record in records:
        assert record["source"]["format"] == "claude-code"
        assert record["source"]["file"] == str((FIX / "claude_session.jsonl").resolve())
        assert record["source"]["id"]
    first = records[0]
    assert (first["ts"], first["cwd"], first["git_branch"]) == ("2025-10-21T03:00:00.000Z", "/work/demo", "main")
    assert all("cwd" not in r for r in records[1:])  # kept where it changes only


def test_claude_rewind_keeps_the_abandoned_branch_out_of_the_context(paths):
    records = _only(_import(paths, "claude_session.jsonl")[1])
    by = _by_source(records)
    assert by["u3"]["rewind_to"] == by["a5"]["id"]
    before_compaction = records[: records.index(next(r for r in records if r["type"] == "compact"))]
    texts = [m.get("content") or "" for m in assemble(LogView(before_compaction), Config()).messages]
    assert "Explain the failure instead" in texts and "One test fails." in texts
    assert "Fix it" not in texts and "First attempt at a fix." not in texts  # the abandoned branch
    assert "The assertion compares strings." in texts  # the Task result, not the subagent's own turns
    assert sum(t == "The assertion compares strings." for t in texts) == 1


def test_claude_sidechain_is_imported_marked_and_kept_out_of_the_context(paths):
    records = _only(_import(paths, "claude_session.jsonl")[1])
    side = [r for r in records if r.get("sidechain")]
    assert [(r["type"], r["sidechain"]) for r in side] == [("user", "agent-7"), ("assistant", "agent-7")]
    assert side[1]["tokens_out"] == 20  # billed, so counted
    texts = [m.get("content") for m in assemble(LogView(records[:-4]), Config()).messages]
    assert "Find why the test fails" not in texts


def test_claude_compaction_becomes_a_compact_record_covering_every_turn_before_it(paths):
    records = _only(_import(paths, "claude_session.jsonl")[1])
    compact = next(r for r in records if r["type"] == "compact")
    turns_before = [r for r in records[: records.index(compact)] if r["type"] in ("user", "assistant", "tool", "system")]
    assert compact["summary"].startswith("This session is being continued")
    assert compact["covers"]["last_id"] == turns_before[-1]["id"] == _by_source(records)["a8"]["id"]
    # covers names turns (sessions.turns): every user message before the compaction
    assert compact["covers"]["last_turn"] == sum(1 for r in turns_before if r["type"] == "user"
                                                  and not r.get("sidechain")) == 3
    assert compact["reason"] == "manual" and compact["source"]["pre_tokens"] == 48000
    assert not any(r["type"] == "user" and r["content"].startswith("This session is being") for r in records)
    context = assemble(LogView(records), Config())
    assert context.covered_turns == len(turns_before) and context.summary_id == compact["id"]
    assert [m["role"] for m in context.messages] == ["system", "user", "assistant"]
    assert context.messages[-1]["tool_calls"][0]["function"]["name"] == "Edit"  # a call without a result


def test_claude_episode_replays_with_native_tool_names(paths):
    result, sessions = _import(paths, "claude_session.jsonl")
    episode = Episode.load(paths, result.sessions[0].slug)
    labels = [episode.state_at(i).step.label() for i in range(len(episode))]
    assert any("Read(/work/demo/setup.py)" in label for label in labels)
    assert any("Bash(pytest -q)" in label for label in labels)
    assert episode.state_at(len(episode) - 1).compaction is not None


# --------------------------------------------------------------------------- Codex
def test_codex_040_counts_logged_before_their_call_and_wrapped_outputs(paths):
    records = _only(_import(paths, "codex_0.40.jsonl")[1])
    users = [r for r in records if r["type"] == "user"]
    assert [(u["content"][:20], u["source"].get("meta", False)) for u in users] == [
        ("<environment_context", True), ("List the files", False)]  # the event_msg copy is not imported
    calls = [r for r in records if r["type"] == "assistant"]
    assert [(c.get("tool_calls", [{}])[0].get("name"), c["tokens_in"], c["tokens_out"], c.get("cache_read_tokens"))
            for c in calls] == [("shell", 3000, 40, 2560), ("shell", 3100, 30, 3072), (None, 3200, 25, 3072)]
    assert calls[0]["reasoning"] == "**Listing**" and calls[2]["content"] == "Two files; one test fails."
    assert calls[0]["model"] == "gpt-5-codex"
    tools = [r for r in records if r["type"] == "tool"]
    assert [(t["content"], t["ok"], t["exit_code"]) for t in tools] == [("a.py\nb.py\n", True, 0), ("1 failed", False, 1)]
    assert tools[0]["duration_ms"] == 100.0
    assert (records[0]["cwd"], records[0]["git_branch"]) == ("/work/demo", "main")


def test_codex_counts_from_running_totals_alone_keep_reasoning_apart_from_cache_writes(paths, tmp_path):
    """A token_count without last_token_usage: each call's count is the growth of the totals, the reasoning
    tokens among it as reasoning (they once landed in the one-hour cache writes)."""
    lines, reasoning = [], {3000: 10, 6100: 15, 9300: 20}  # running totals, by the running input total
    for line in (FIX / "codex_0.40.jsonl").read_text().splitlines():
        event = json.loads(line)
        info = event.get("payload", {}).get("info") if event.get("type") == "event_msg" else None
        if info:
            info.pop("last_token_usage")
            total = info["total_token_usage"]
            total["reasoning_output_tokens"] = reasoning[total["input_tokens"]]
        lines.append(json.dumps(event))
    (tmp_path / "codex_totals.jsonl").write_text("\n".join(lines) + "\n")
    result = Importer(paths, None).import_file(tmp_path / "codex_totals.jsonl", "codex")
    assert not result.error and not result.problems, (result.error, result.problems)
    calls = [r for r in Session(paths, result.sessions[0].slug).read().records if r["type"] == "assistant"]
    assert [(c["tokens_in"], c["tokens_out"], c.get("cache_read_tokens"), c.get("reasoning_tokens"),
             c.get("cache_creation_1h_tokens")) for c in calls] == [
        (3000, 40, 2560, 10, None), (3100, 30, 3072, 5, None), (3200, 25, 3072, 5, None)]


def test_codex_077_counts_after_their_call_custom_tools_and_compaction(paths):
    records = _only(_import(paths, "codex_0.77.jsonl")[1])
    kinds = [r["type"] for r in records]
    assert kinds == ["user", "assistant", "tool", "assistant", "tool", "compact", "user", "assistant"]
    patch = records[1]["tool_calls"][0]
    assert patch["name"] == "apply_patch" and patch["freeform"] and patch["arguments"].startswith("*** Begin Patch")
    assert (records[1]["tokens_in"], records[1]["tokens_out"]) == (5000, 80)
    assert (records[3]["tokens_in"], records[3]["tokens_out"]) == (5200, 20)
    assert (records[7]["tokens_in"], records[7]["tokens_out"]) == (1200, 15)  # its call has no output yet
    assert records[2]["content"] == "Done!" and records[4]["ok"] is False
    compact = records[5]
    # the five records before it are turn 1 (one user message)
    assert compact["summary"] == "Summary: the patch did not fix test_x." and compact["covers"]["last_turn"] == 1
    assert assemble(LogView(records), Config()).covered_turns == 5  # records, as the model's context counts them


# --------------------------------------------------------------------------- SWE-agent
def test_swe_agent_text_actions_become_calls_and_run_totals_the_last_answer(paths):
    records = _only(_import(paths, "swe_text_actions.traj")[1])
    assert [r["type"] for r in records] == ["system", "user", "user", "assistant", "tool", "assistant", "tool",
                                            "assistant"]
    assert records[1]["source"]["meta"] is True  # the demonstration
    calls = [r["tool_calls"][0] for r in records if r["type"] == "assistant"]
    assert [c["name"] for c in calls] == ["find_file", "edit", "submit"]
    assert json.loads(calls[1]["arguments"]) == {"command": "edit 4:4\ndef division(a, b):\nend_of_edit\n"}
    assert [(t["tool_call_id"], t["name"]) for t in records if t["type"] == "tool"] == [
        (calls[0]["id"], "find_file"), (calls[1]["id"], "edit")]
    last = records[-1]
    assert (last["tokens_in"], last["tokens_out"], last["cost_usd"], last["usage_scope"], last["calls"]) == \
        (9000, 300, 0.12, "run", 3)
    mtime = datetime.fromtimestamp((FIX / "swe_text_actions.traj").stat().st_mtime, timezone.utc)
    assert {r["ts"][:19] for r in records} == {mtime.strftime("%Y-%m-%dT%H:%M:%S")}
    assert all(r["source"]["time"] == "file-mtime" for r in records)


def test_swe_agent_function_calls_written_as_python_reprs(paths):
    records = _only(_import(paths, "swe_function_calls.traj")[1])
    calls = [(c["id"], c["name"], c["arguments"]) for r in records if r["type"] == "assistant" for c in r["tool_calls"]]
    assert calls == [("call_o1", "open", '{"path":"division.py"}'), ("call_s1", "submit", "{}")]
    assert [(t["tool_call_id"], t["name"]) for t in records if t["type"] == "tool"] == [
        ("call_o1", "open"), ("call_s1", "submit")]
    assert {r.get("model") for r in records if r["type"] == "assistant"} == {"gpt-4o-2024-08-06"}


# --------------------------------------------------------------------------- OpenHands
def test_openhands_one_response_with_two_calls_is_one_record(paths):
    records = _only(_import(paths, "openhands_events.json")[1])
    assert [r["type"] for r in records] == ["user", "assistant", "tool", "tool", "assistant"]
    answer = records[1]
    assert [c["name"] for c in answer["tool_calls"]] == ["str_replace_editor", "execute_bash"]
    assert (answer["tokens_in"], answer["tokens_out"], answer["cache_creation_tokens"]) == (3000, 120, 2990)
    assert [(t["name"], t["ok"]) for t in records if t["type"] == "tool"] == [("str_replace_editor", True),
                                                                               ("execute_bash", False)]
    assert records[-1]["tool_calls"][0]["name"] == "finish"  # no observation: a call without a result


# --------------------------------------------------------------------------- aider
def _local(text: str) -> str:
    return datetime.fromisoformat(text).astimezone(timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def test_aider_runs_blocks_times_and_usage(paths):
    result, sessions = _import(paths, "demo.aider.chat.history.md")
    assert len(sessions) == 2
    first, second = sessions.values()
    assert [r["type"] for r in first] == ["tool", "user", "assistant", "tool", "user", "tool"]
    user = first[1]
    assert user["content"] == "add a greeting\nto hello.py" and user["ts"] == _local("2025-03-01 10:00:05.123456")
    answer = first[2]
    assert answer["model"] == "anthropic/claude-sonnet-4-5-20250929" and answer["content"].startswith("I'll add it.")
    assert (answer["tokens_in"], answer["tokens_out"], answer["cache_creation_tokens"], answer["cost_usd"]) == \
        (2400, 35, 1200, 0.01)
    assert first[4]["content"] == "/run python hello.py" and first[4]["ts"] == _local("2025-03-01 10:01:00")
    assert first[5]["content"].startswith("hello\nAdd command output") and first[5]["name"] == "aider"
    assert [r["type"] for r in second] == ["tool", "user", "assistant", "tool"]
    assert second[1]["ts"] == _local("2025-03-02 09:00:30.5")
    # aider's console output has no call: the model never saw it
    assert [m["role"] for m in assemble(LogView(first), Config()).messages] == ["user", "assistant", "user"]


# --------------------------------------------------------------------------- all formats
@pytest.mark.parametrize("name", sorted(p.name for p in FIX.iterdir() if not p.name.endswith("input.history")))
def test_every_fixture_imports_once_and_replays(paths, name):
    result, sessions = _import(paths, name)
    again = Importer(paths).import_file(FIX / name)
    assert again.added == 0 and not again.problems
    for slug, records in sessions.items():
        assert len({r["id"] for r in records}) == len(records)
        episode = Episode.load(paths, slug)
        assert episode.state_at(len(episode) - 1).step.number == len(records)


def test_imported_fields_of_the_wrong_shape_make_a_line_unreadable():
    from workstation.sessions.log import parse_line

    base = {"v": 1, "id": "197c56dd900-7fa1f8", "ts": "2025-07-01T10:00:00.000Z", "type": "user", "content": "x"}
    assert parse_line(json.dumps({**base, "source": {"format": "codex", "id": "line-3"}}).encode())[1] is None
    for bad, reason in (({"source": "codex"}, "'source' is a string, not an object"),
                        ({"source": {"id": "u1"}}, "source without 'format'"),
                        ({"source": {"format": "codex", "id": "u1", "merged": "u2"}},
                         "source 'merged' is a string, not a list"),
                        ({"rewind_to": 7}, "'rewind_to' is an integer, not a string"),
                        ({"tokens_estimated": "yes"}, "'tokens_estimated' is a string, not a boolean")):
        assert parse_line(json.dumps({**base, **bad}).encode()) == (None, f"bad field: {reason}")


def test_known_secrets_in_a_source_never_reach_the_log_or_the_events(paths, db, tmp_path, monkeypatch):
    from workstation.memory.reflect import run_sql

    key = "sk-ant-api03-Zq7xW2pL9mN4vB8cT1yR6"
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    text = (FIX / "claude_session.jsonl").read_text()
    text = text.replace('"command": "pytest -q"', f'"command": "ANTHROPIC_API_KEY={key} pytest -q", '
                                                  '"api_key": "hunter2-not-a-known-value"')
    text = text.replace("Read setup.py and run the tests", f"Read setup.py and run the tests with {key}")
    source = tmp_path / "leaky.jsonl"
    source.write_text(text)
    result = Importer(paths, db).import_file(source)
    assert not result.error and not result.problems
    (slug,) = [s.slug for s in result.sessions]
    log = (paths.sessions / f"{slug}.jsonl").read_text()
    assert key not in log and log.count("***") == 2
    records = Session(paths, slug).read().records
    assert records[0]["content"].endswith("run the tests with ***")
    rows = run_sql(db, f"SELECT name, CAST(data AS VARCHAR) FROM events WHERE session = '{slug}'").rows
    assert rows and not any(key in str(row) for row in rows)
    (bash,) = [data for name, data in rows if name == "Bash"]
    assert json.loads(bash)["args"] == {"command": "ANTHROPIC_API_KEY=*** pytest -q", "description": "run tests",
                                        "api_key": "[redacted]"}



def test_a_key_format_in_a_source_never_reaches_the_log(paths, db, tmp_path):
    token = "ghp_" + "Zq7xW2pL9mN4vB8cT1yR6" + "a" * 15  # a GitHub token in nobody's environment
    text = (FIX / "claude_session.jsonl").read_text()
    assert "Read setup.py and run the tests" in text
    source = tmp_path / "token.jsonl"
    source.write_text(text.replace("Read setup.py and run the tests", f"Read setup.py, the token is {token}"))
    result = Importer(paths, db).import_file(source)
    assert not result.error and not result.problems
    (slug,) = [s.slug for s in result.sessions]
    log = (paths.sessions / f"{slug}.jsonl").read_text()
    assert token not in log and "the token is ***" in log


def test_a_key_the_sources_json_escaping_hides_is_masked_in_what_is_written(paths, db, tmp_path):
    # in the source the quotes around the key are escaped (\"), so a scan of its bytes does not see the
    # quoted 40 characters the AWS detector asks for; the records' strings have the quotes as written
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    text = (FIX / "claude_session.jsonl").read_text()
    assert text.count("from setuptools import setup") == 1
    text = text.replace("from setuptools import setup", 'aws_secret_access_key = \\"' + secret + '\\"')
    source = tmp_path / "aws.jsonl"
    source.write_text(text)
    assert secret in source.read_text()
    result = Importer(paths, db).import_file(source)
    assert not result.error and not result.problems
    (slug,) = [s.slug for s in result.sessions]
    log = (paths.sessions / f"{slug}.jsonl").read_text()
    assert secret not in log and 'aws_secret_access_key = \\"***\\"' in log


@pytest.mark.parametrize("raw", [b'{"a": 1, "b": [1.5, "x\\u00e9", null, true]}', b'{"n": 18446744073709551616}',
                                 b'{"n": -9223372036854775809, "m": 123456789012345678901234567890}',
                                 b'{"a": NaN, "b": Infinity}', b'{"s": "\\ud800"}', b'\xef\xbb\xbf{"a": 1}',
                                 b'{"a": 1, "a": 2}', b'{"f": 1e400}'])
def test_source_json_is_read_as_the_json_module_reads_it(raw):
    from workstation.importers.base import loads

    value, reason = loads(raw)
    assert reason is None and repr(value) == repr(json.loads(raw))  # big integers stay integers, NaN stays NaN


@pytest.mark.parametrize("raw, reason", [(b'{"a": "\xff"}', "not valid JSON ('utf-8' codec can't decode byte 0xff in "
                                                             "position 7)"),
                                         (b'{"a": 1} x', "not valid JSON (Extra data)"),
                                         (b"[" * 2000 + b"]" * 2000, "nested too deeply to read"),
                                         (b"[" * 150 + b"]" * 150, "nested deeper than 100 levels")])
def test_source_json_the_json_module_refuses_is_refused_with_its_reason(raw, reason):
    from workstation.importers.base import loads

    assert loads(raw) == (None, reason)


def test_claude_one_hour_cache_writes_are_kept_and_priced_as_such(paths, tmp_path):
    from workstation.pricing import rates

    base = {"sessionId": "9f1c2d3e-0000-4000-8000-00000000beef", "cwd": "/work/demo", "isSidechain": False}
    usage = {"input_tokens": 10, "cache_creation_input_tokens": 1500, "cache_read_input_tokens": 8000,
             "output_tokens": 20, "cache_creation": {"ephemeral_5m_input_tokens": 500,
                                                     "ephemeral_1h_input_tokens": 1000}}
    lines = [{**base, "type": "user", "uuid": "u1", "parentUuid": None, "timestamp": "2025-10-21T03:00:00.000Z",
              "message": {"role": "user", "content": "hi"}},
             {**base, "type": "assistant", "uuid": "a1", "parentUuid": "u1", "timestamp": "2025-10-21T03:00:01.000Z",
              "requestId": "r1", "message": {"id": "m1", "type": "message", "role": "assistant",
                                             "model": "claude-sonnet-4-5-20250929", "stop_reason": "end_turn",
                                             "content": [{"type": "text", "text": "hello"}], "usage": usage}}]
    source = tmp_path / "one-hour.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = Importer(paths).import_file(source)
    assert not result.error and not result.problems
    (answer,) = [r for r in Session(paths, result.sessions[0].slug).read().records if r["type"] == "assistant"]
    assert (answer["tokens_in"], answer["cache_creation_tokens"], answer["cache_creation_1h_tokens"]) == (
        9510, 1500, 1000)
    sonnet = rates("claude-sonnet-4-5")
    assert answer["cost_usd"] == pytest.approx(10 * sonnet.input + 8000 * sonnet.cache_read + 500 * sonnet.cache_write
                                               + 1000 * sonnet.cache_write_1h + 20 * sonnet.output)
