"""Replay of recorded episodes (workstation.replay, `workstation replay`).

The episode under test is recorded once per module through the real Agent loop
and the real litellm path against the scripted server on 127.0.0.1, with
sync compaction and rolling redaction on small knobs so that both happen; the
sidecar's own function then persists a redaction record. The shipped demo in
the repository's sessions/ folder is replayed and verified from a copy of it,
as a fresh clone would have it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.agent_scenario import summarize
from support.agent_support import agent, is_compaction, is_update, module_server, tool_results, workspace
from support.conftest_llm import FAKE_API_KEY, TEST_KEY_ENV
from support.fakellm import Reply
from workstation.agent.tools import RECOMPUTE, TOOLS
from workstation.replay import Episode, Player, ReplayError
from workstation.replay.verify import verify
from workstation.sessions.log import LogView, Session, SessionError

server_module, server = module_server()

REPO_TOP = Path(__file__).resolve().parents[2]
DEMO_LOG = REPO_TOP / "sessions" / "demo-request-id.jsonl"
DEMO_REPO = REPO_TOP / "sessions" / "demo-repo"
TASK = "Look at fetch in pkg/core.py and how it cleans its input."
FOLLOW_UP = "Now look at pkg/util.py."
PIN = "Always cite the decision you follow."
MEMORY_KNOBS = {"compact_threshold": 2, "keep_recent": 1, "compact_model": "openai/test-model",
                "redact_every": 2, "redact_min_chars": 100}


class ReadingPolicy:
    """A read-only episode: map, read a range, read it again (answered from memory), grep + find + impact,
    log a decision and write STM, answer; next turn map and read another file. Answers compaction too."""

    def __call__(self, body: dict) -> Reply:
        messages = body["messages"]
        if is_compaction(body):
            return Reply(text=summarize(messages))
        last = [m for m in messages if not is_update(m)][-1]
        if last["role"] == "user":
            path = "pkg/core.py" if "fetch" in last["content"] else "pkg/util.py"
            return Reply(text="The map first.", tool_calls=[("file_meta", {"path": path})])
        results = tool_results(messages)
        names = [n for n, _, _ in results]
        _, args, content = results[0]
        if names == ["file_meta"] and args["path"] == "pkg/core.py":
            start, end = re.search(r"^(\d+)-(\d+) def fetch", content, re.M).groups()
            return Reply(tool_calls=[("read_lines", {"path": "pkg/core.py", "start": int(start), "end": int(end)})])
        if names == ["read_lines"] and args["path"] == "pkg/core.py" and "not sent again" not in content:
            return Reply(text="Once more, to be sure.", tool_calls=[("read_lines", args)])
        if names == ["read_lines"] and args["path"] == "pkg/core.py":
            return Reply(tool_calls=[("grep", {"pattern": r"clean\("}), ("find", {"query": "clean"}),
                                     ("impact", {"symbol": "clean"})])
        if names == ["grep", "find", "impact"]:
            return Reply(tool_calls=[
                ("log_decision", {"decision": "input is cleaned by pkg.util.clean only", "files": ["pkg/util.py"],
                                  "reasoning": "one place to change"}),
                ("umem", {"tier": "stm", "key": "focus", "value": "pkg/core.py:fetch"})])
        if names == ["log_decision", "umem"]:
            decision = re.search(r"decision (d[0-9a-f]+) logged", content).group(1)
            return Reply(text=f"fetch calls parse, which calls clean [D:{decision}].")
        if names == ["file_meta"] and args["path"] == "pkg/util.py":
            return Reply(tool_calls=[("read_lines", {"path": "pkg/util.py", "start": 1, "end": 5})])
        if names == ["read_lines"] and args["path"] == "pkg/util.py":
            return Reply(text="clean strips whitespace.")
        raise AssertionError(f"unexpected step: {names} {args}")


@dataclass
class Recorded:
    ws: object
    session: Session
    chat_requests: list[dict]  # bodies of the agent's model calls, in order (compaction requests left out)
    root: Path


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, server_module):
    from workstation.sidecar import persist_redactions

    tmp = tmp_path_factory.mktemp("replay")
    mark = len(server_module.requests)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(TEST_KEY_ENV, FAKE_API_KEY)
        server_module.dispatch.fn = ReadingPolicy()
        ws = workspace(tmp, server_module.url, memory=MEMORY_KNOBS)
        a = agent(ws, "episode", compaction="sync")
        try:
            for text in (TASK, FOLLOW_UP):
                result = a.run(text)
                assert result.error is None, result.error
                if text == TASK:
                    a.pin(PIN)
        finally:
            a.close()
            server_module.dispatch.fn = None
        session = Session.open(ws.paths, "episode")
        assert persist_redactions(session, ws.config) is not None  # the sidecar's record of rolling redaction
        chat = [b for b in server_module.requests[mark:] if not is_compaction(b)]
        yield Recorded(ws, session, chat, ws.root)
    ws.close()


@pytest.fixture(scope="module")
def episode(recorded) -> Episode:
    return Episode.load(recorded.ws.paths, "episode", config=recorded.ws.config)


def _tool_steps(ep: Episode, name: str) -> list:
    return [s for s in ep.steps if s.kind == "tool" and s.record["name"] == name]


# --------------------------------------------------------------------------- stepping and state
def test_one_step_per_record_in_log_order(recorded, episode):
    records = recorded.session.read().records
    assert [s.id for s in episode.steps] == [r["id"] for r in records]
    assert not episode.problems
    kinds = [s.kind for s in episode.steps]
    assert {"user", "assistant", "tool", "system", "compact", "redaction"} <= set(kinds)
    # each step knows its turn (sessions.turns): the user message that started it, numbered from 1
    turns = [s.turn for s in episode.steps if s.turn is not None]
    assert turns == sorted(turns) and set(turns) == {1, 2}
    users = [s for s in episode.steps if s.kind == "user"]
    assert [s.turn for s in users] == [1, 2] and users[1].label().startswith("user (turn 2): Now look")
    for step in _tool_steps(episode, "read_lines"):  # every result knows the call that asked for it
        assert step.call["id"] == step.record["tool_call_id"]
        assert step.args["path"] in ("pkg/core.py", "pkg/util.py")
    offsets = [s.offset_s for s in episode.steps]
    assert offsets == sorted(offsets) and offsets[0] == 0


def test_request_of_each_model_call_is_what_the_model_was_sent(recorded, episode):
    """The conversation part of every request the scripted model received, summary and redaction markers
    included, is what state_at rebuilds from the log prefix before that reply."""

    def shape(messages):
        return [(m["role"], m.get("content") or "", m.get("tool_call_id"),
                 [c["id"] for c in m.get("tool_calls") or ()]) for m in messages]

    replies = [s for s in episode.steps if s.kind == "assistant"]
    assert len(replies) == len(recorded.chat_requests)
    saw_summary = saw_marker = False
    for step, body in zip(replies, recorded.chat_requests, strict=True):
        state = episode.state_at(step.index)
        sent = body["messages"][1:]  # after the system prompt (base prompt, pins, decision log, map excerpt)
        assert shape(state.request.messages) == shape(sent), f"step {step.number}"
        saw_summary |= state.request.summary_id is not None
        saw_marker |= any("[REDACTED: Output of" in (m.get("content") or "") for m in sent)
    assert saw_summary and saw_marker  # the knobs made both happen: the comparison covered them


def test_compaction_marker_and_context_after_a_compaction(episode):
    first = next(s for s in episode.steps if s.kind == "compact")
    before = episode.state_at(first.index - 1)
    after = episode.state_at(first.index)
    assert before.compaction is None and before.context.summary_id is None
    assert after.compaction["id"] == first.id
    assert after.context.summary_id == first.id
    assert after.covered.last_turn == first.record["covers"]["last_turn"] == 1 and after.turns == 2
    assert after.context.messages[0]["role"] == "system"
    assert first.record["summary"] in after.context.messages[0]["content"]
    marker = after.transcript[-1]
    assert marker["role"] == "compaction" and marker["id"] == first.id
    assert first.record["summary"] in marker["result"]
    # the raw turns stay in the transcript: replay shows what happened, the context what the model saw
    assert len(after.transcript) > len(after.context.messages)
    assert [e for e in after.timeline if e["type"] == "compaction"][-1]["turn_id"] == first.id


def test_redaction_record_shows_its_marker_and_the_original(episode):
    step = next(s for s in episode.steps if s.kind == "redaction")
    state = episode.state_at(step.index)
    markers = [t for t in state.transcript if t["role"] == "redaction"]
    targets = step.record["targets"]
    assert len(markers) == len(targets) >= 1
    for turn, target in zip(markers, targets, strict=True):
        original = next(s.record for s in episode.steps if s.id == target["id"])
        assert turn["text"].startswith(f"[REDACTED: Output of {original['name']}")
        assert target["id"] in turn["text"]
        assert turn["result"] == original["content"]
    assert {r.record_id for r in state.redactions} >= {t["id"] for t in targets}


def test_memory_view_grows_with_the_steps(episode):
    decided = _tool_steps(episode, "log_decision")[0]
    decision_id = re.search(r"decision (d[0-9a-f]+) logged", decided.record["content"]).group(1)
    assert episode.state_at(decided.index - 1).memory.decisions == []
    memory = episode.state_at(decided.index).memory
    assert [d["id"] for d in memory.decisions] == [decision_id]
    assert memory.decisions[0]["decision"] == "input is cleaned by pkg.util.clean only"
    assert memory.decisions[0]["reused"] == 0
    assert memory.files_read["pkg/core.py"][0] == "map"
    assert "pkg/util.py" not in memory.files_read
    last = episode.state_at(len(episode) - 1).memory
    assert last.decisions[0]["reused"] == 1  # the answer cited it
    assert last.pins == [PIN]
    assert [e["key"] for e in last.stm] == ["focus"] and last.stm[0]["value"] == "pkg/core.py:fetch"
    assert last.files_read["pkg/util.py"] == ["map", [1, 5]]
    assert last.files_edited == {}


def test_timeline_carries_durations_and_tokens_from_the_records(episode):
    state = episode.state_at(len(episode) - 1)
    calls = [e for e in state.timeline if e["type"] == "model_call"]
    replies = [s.record for s in episode.steps if s.kind == "assistant"]
    assert [e["duration_ms"] for e in calls] == [r["latency_ms"] for r in replies]
    assert [e["tokens"] for e in calls] == [r["tokens_in"] + r["tokens_out"] for r in replies]
    tools = [e for e in state.timeline if e["type"] == "tool_call"]
    assert [e["duration_ms"] for e in tools] == [s.record.get("duration_ms") for s in episode.steps if s.kind == "tool"]
    types = {e["type"] for e in state.timeline}
    assert {"turn", "file_read", "read_avoided", "memory_hit", "decision_logged", "decision_reused",
            "compaction", "redaction"} <= types
    ts = [e["ts"] for e in state.timeline]
    assert ts == sorted(ts)
    assert len({e["id"] for e in state.timeline}) == len(state.timeline)
    # every event jumps to a step of the episode
    assert all(episode.steps[episode.index_of(e["turn_id"])].id == e["turn_id"] for e in state.timeline)


def test_state_of_a_step_that_does_not_exist(episode):
    with pytest.raises(ReplayError, match=f"steps 1–{len(episode)}"):
        episode.state_at(len(episode))
    with pytest.raises(ReplayError, match="integer"):
        episode.state_at("3")


# --------------------------------------------------------------------------- verification
def test_verify_all_same_on_the_unchanged_tree(recorded, episode):
    report = verify(episode, recorded.ws)
    assert report.mode == "tree"  # the episode edits nothing: checked in place
    assert report.ok and report.first_difference is None
    verifiable = {name for name, tool in TOOLS.items() if tool.verify == RECOMPUTE}
    assert verifiable == {"file_meta", "read_lines", "find", "impact", "grep"}
    expected = [s for s in episode.steps if s.kind == "tool" and s.record["name"] in verifiable]
    assert [c.index for c in report.checks] == [s.index for s in expected]
    repeat = [s for s in expected if s.record["name"] == "read_lines" and s.record.get("served_from") == "memory"]
    assert len(repeat) == 1  # the second read of the same range was answered by the loop, not the tool
    assert report.status_of(repeat[0].index) == "skipped"
    assert (report.checked, report.same, report.differ, report.skipped) == (len(expected) - 1, len(expected) - 1, 0, 1)


def test_verify_marks_the_first_step_that_differs_after_an_edit(tmp_path, episode):
    ws = workspace(tmp_path, None)  # today's tree: the same repository, then one edit
    try:
        before = verify(episode, ws)
        assert before.ok, before.render()
        util = ws.root / "pkg" / "util.py"
        util.write_text(util.read_text().replace("def clean(text: str) -> str:",
                                                 "def clean(text: str, request_id: str = '') -> str:"))
        report = verify(episode, ws)
    finally:
        ws.close()
    first = report.first_difference
    assert first is not None and not report.ok
    grep_step = _tool_steps(episode, "grep")[0]
    assert first.index == grep_step.index  # grep saw util.py's definition line first
    assert all(c.status in ("same", "skipped") for c in report.checks if c.index < first.index)
    assert "+pkg/util.py:4: def clean(text: str, request_id: str = '') -> str:" in first.diff
    assert "-pkg/util.py:4: def clean(text: str) -> str:" in first.diff
    assert report.differ >= 3  # the impact, file_meta and read_lines of util.py change too
    assert report.checked == report.same + report.differ == before.checked
    assert f"FIRST DIFFERENCE at step {first.number}" in report.render()


def _tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and ".workstation" not in p.parts}


def test_verify_replays_edits_in_a_scratch_copy_and_leaves_the_tree_alone(tmp_path):
    """The demo edits files and reads them again: checked in a scratch copy where its edits are re-applied."""
    from workstation.runtime import Workspace

    clone = tmp_path / "demo-repo"
    shutil.copytree(DEMO_REPO, clone)
    episode = Episode.load(DEMO_LOG)
    http = clone / "shop" / "http.py"
    http.write_text(http.read_text() + "\n\ndef added_later() -> None:\n    pass\n")
    digest = _tree_digest(clone)
    with Workspace(clone) as ws:
        report = verify(episode, ws)
    assert _tree_digest(clone) == digest  # nothing written to the tree itself
    assert report.mode == "scratch" and report.edits_replayed > 0
    first = report.first_difference
    maps = _tool_steps(episode, "file_meta")
    assert first.index == next(s.index for s in maps if s.args["path"] == "shop/http.py")
    assert report.status_of(next(s.index for s in maps if s.args["path"] == "shop/api.py")) == "same"
    assert "added_later" in first.diff


# --------------------------------------------------------------------------- the player
class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_player_steps_by_hand(episode):
    player = Player(episode, clock=FakeClock())
    assert player.position == 0 and player.state().step.index == 0
    assert player.step() and player.position == 1
    assert player.step(3) and player.position == 4
    assert player.back(2) and player.position == 2
    assert player.back(10) and player.position == 0
    assert not player.back()
    player.seek(len(episode) - 1)
    assert player.at_end and not player.step()
    assert player.state().index == len(episode) - 1
    with pytest.raises(ReplayError):
        player.seek(len(episode))


def test_player_plays_on_the_callers_clock():
    episode = Episode.load(DEMO_LOG)
    clock = FakeClock()
    player = Player(episode, clock=clock)
    offsets = [s.offset_s for s in episode.steps]
    started = clock.now
    player.play(speed=2.0)
    assert player.playing and not player.tick()  # no time has passed
    wait = player.due_in()
    assert wait == pytest.approx(offsets[1] / 2.0)
    clock.now += wait * 0.99
    assert not player.tick() and player.position == 0
    clock.now = started + wait
    assert player.tick() and player.position == 1
    # three quarters of the episode's replay time, at double speed, is 3/8 of it on the clock
    target = offsets[-1] * 0.75
    clock.now = started + target / 2.0
    player.tick()
    expected = max(i for i, o in enumerate(offsets) if o <= target)
    assert 1 < expected < len(offsets) - 1 and player.position == expected
    player.pause()
    clock.now += 1000
    assert not player.tick() and player.position == expected and player.due_in() is None
    player.play()
    clock.now += offsets[-1]  # plenty: it runs to the end and stops
    assert player.tick() and player.at_end and not player.playing
    player.play()  # from the end it starts over
    assert player.position == 0 and player.playing
    for bad in (0, -1, float("nan"), "fast"):
        with pytest.raises(ReplayError, match="speed"):
            player.play(bad)


def test_long_pauses_play_capped(tmp_path):
    log = tmp_path / "pause.jsonl"
    lines = [{"v": 1, "id": "a-1", "ts": "2025-01-01T10:00:00.000Z", "type": "user", "content": "hi", "tokens": 1},
             {"v": 1, "id": "a-2", "ts": "2025-01-01T10:00:01.500Z", "type": "assistant", "content": "yo",
              "tokens": 1},
             {"v": 1, "id": "a-3", "ts": "2025-01-02T09:00:00.000Z", "type": "user", "content": "next day",
              "tokens": 2}]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    episode = Episode.load(log)
    assert [s.offset_s for s in episode.steps] == pytest.approx([0.0, 1.5, 3.5])


# --------------------------------------------------------------------------- loading
def test_load_tolerates_bad_lines_and_refuses_nothing_to_replay(tmp_path, recorded):
    good = recorded.session.path.read_bytes().splitlines(keepends=True)
    log = tmp_path / "damaged.jsonl"
    log.write_bytes(good[0] + b"{not json\n" + b"".join(good[1:]) + b'{"v":1,"id":"x","ty')
    episode = Episode.load(log)
    assert len(episode) == len(good)
    assert [p.line for p in episode.problems] == [2, len(good) + 2]
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(ReplayError, match="no readable records"):
        Episode.load(empty)
    with pytest.raises(ReplayError, match="no session log file"):
        Episode.load(tmp_path / "missing.jsonl")
    with pytest.raises(SessionError, match="no session named nope"):
        Episode.load(recorded.ws.paths, "nope")


def test_context_at_is_assemble_over_the_prefix(episode):
    from workstation.sessions.modelview import assemble

    for index in (0, len(episode) // 2, len(episode) - 1):
        view = assemble(LogView(episode.records[: index + 1]), episode.config)
        mine = episode.state_at(index).context
        assert mine.covered_turns == view.covered_turns and mine.summary_id == view.summary_id
        pins = {r["content"] for r in episode.records[: index + 1] if r.get("pin")}
        assert [m for m in view.messages if m.get("content") not in pins] == mine.messages


# --------------------------------------------------------------------------- the shipped demo, from the CLI
def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "workstation", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_demo_replays_and_verifies_on_a_fresh_clone(tmp_path):
    """sessions/demo-*.jsonl with its fixture repository, as a clone has them: no model, no prior state."""
    shutil.copytree(DEMO_REPO, tmp_path / "demo-repo")
    shutil.copy(DEMO_LOG, tmp_path / DEMO_LOG.name)
    digest = _tree_digest(tmp_path / "demo-repo")
    done = _cli("-C", "demo-repo", "replay", DEMO_LOG.name, "--verify", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    report = json.loads(done.stdout)
    assert report["ok"] and report["differ"] == 0 and report["checked"] == report["same"] > 0
    assert report["mode"] == "scratch" and report["edits_replayed"] > 0 and report["edits_differ"] == 0
    assert _tree_digest(tmp_path / "demo-repo") == digest

    lines = DEMO_LOG.read_text().splitlines()
    done = _cli("replay", DEMO_LOG.name, "--print", "--step", str(len(lines)), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for number in range(1, len(lines) + 1):
        assert re.search(rf"^\s*{number}  \d\d:\d\d\.\d  ", out, re.M), f"step {number} missing"
    assert f"state at step {len(lines)} of {len(lines)}" in out
    assert "files edited: shop/api.py" in out

    done = _cli("replay", DEMO_LOG.name, "--print", "--step", "0", cwd=tmp_path)
    assert done.returncode == 1 and done.stderr.startswith("error: ") and "no step 0" in done.stderr


def test_cli_verify_exit_status_when_the_tree_changed(tmp_path):
    shutil.copytree(DEMO_REPO, tmp_path / "demo-repo")
    api = tmp_path / "demo-repo" / "shop" / "api.py"
    api.write_text(api.read_text().replace("def product_page(", "def product_page_v2("))
    done = _cli("-C", "demo-repo", "replay", str(DEMO_LOG), "--verify", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    first_map = next(s for s in Episode.load(DEMO_LOG).steps
                     if s.kind == "tool" and s.args.get("path") == "shop/api.py")
    assert f"FIRST DIFFERENCE at step {first_map.number}: file_meta(shop/api.py)" in done.stdout


def test_archived_session_replays_like_the_live_one(tmp_path):
    from workstation import config as config_mod
    from workstation.sessions.archive import archive

    root = tmp_path / "ws"
    root.mkdir()
    config, paths = config_mod.load(root)  # no model: archiving skips the summary and still moves the log
    paths.ensure()
    paths.sessions.mkdir(parents=True, exist_ok=True)
    shutil.copy(DEMO_LOG, paths.sessions / "demo-copy.jsonl")
    live = Episode.load(paths, "demo-copy", config=config)
    archive(paths, "demo-copy", config)
    assert not (paths.sessions / "demo-copy.jsonl").exists()
    archived = Episode.load(paths, "demo-copy", config=config)
    assert (live.source, archived.source) == ("live", "archived")
    assert [s.id for s in archived.steps] == [s.id for s in live.steps]
    last = len(live) - 1
    assert archived.state_at(last).to_dict() == live.state_at(last).to_dict()


def test_state_is_what_the_tui_panes_take(episode):
    """Transcript turns and timeline events are mappings the panes' data classes accept as they are."""
    from workstation.tui.viewdata import TimelineEvent, Turn, coerce_all

    state = episode.state_at(len(episode) - 1)
    turns = coerce_all(Turn, state.transcript)
    assert {t.role for t in turns} >= {"user", "assistant", "tool", "system", "compaction", "redaction"}
    events = coerce_all(TimelineEvent, state.timeline)
    assert all(e.turn_id for e in events)
    steps_turns = [t for i in range(len(episode)) for t in episode.transcript_of(i)]
    assert steps_turns == state.transcript  # the incremental view adds up to the whole


# --------------------------------------------------------------------------- imported episodes
SWE_FIXTURE = REPO_TOP / "tests" / "fixtures" / "import" / "swe_function_calls.traj"


def test_an_untimed_import_plays_one_step_a_second_and_verifies_nothing_checkable(tmp_path):
    """SWE-agent logs no times (every record has the file's mtime): replay paces it UNTIMED_STEP_S a step, so
    speed matters; its tools (open, submit) are not ours, and --verify says it checked nothing."""
    from workstation.replay.episode import UNTIMED_STEP_S

    root = tmp_path / "ws"
    root.mkdir()
    done = _cli("-C", str(root), "import", str(SWE_FIXTURE), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    slug = json.loads(done.stdout)[0]["sessions"][0]["slug"]
    from workstation.paths import Paths

    episode = Episode.load(Paths.for_root(root), slug)
    assert not episode.timed and len({s.ts for s in episode.steps}) == 1
    assert [s.offset_s for s in episode.steps] == pytest.approx([i * UNTIMED_STEP_S for i in range(len(episode))])
    assert episode.length_text() == f"times not recorded: {UNTIMED_STEP_S:g} s a step"
    clock = FakeClock()
    player = Player(episode, clock=clock)
    player.play(speed=4.0)
    assert player.due_in() == pytest.approx(UNTIMED_STEP_S / 4.0)
    clock.now += UNTIMED_STEP_S * 2 / 4.0
    assert player.tick() and player.position == 2

    done = _cli("-C", str(root), "replay", slug, "--verify", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "nothing checkable" in done.stdout and "still applies" not in done.stdout.replace(
        "nothing says whether it still applies", "")
    assert "step 4 called open, which this version does not know" in done.stdout
    assert "step 6 called submit, which this version does not know" in done.stdout
    done = _cli("-C", str(root), "replay", slug, "--verify", "--json", cwd=tmp_path)
    report = json.loads(done.stdout)
    assert report["checkable"] is False and report["checked"] == 0


def test_a_timed_episode_is_paced_by_its_records(tmp_path):
    log = tmp_path / "mixed.jsonl"
    lines = [{"v": 1, "id": "a-1", "ts": "2025-01-01T10:00:00.000Z", "type": "user", "content": "hi", "tokens": 1},
             {"v": 1, "id": "a-2", "ts": "2025-01-01T10:00:00.250Z", "type": "assistant", "content": "yo",
              "tokens": 1},
             {"v": 1, "id": "a-3", "ts": "garbled", "type": "user", "content": "no time", "tokens": 2}]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    episode = Episode.load(log)
    assert episode.timed and episode.length_text() == "0.2 s recorded"
    assert [s.offset_s for s in episode.steps] == pytest.approx([0.0, 0.25, 1.25])
