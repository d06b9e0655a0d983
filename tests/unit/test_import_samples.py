"""The real sessions in ../shared/transcripts (read in place, never copied into the repository):
each imports with no problem, with the counts of user, assistant and tool records this test
derives from the raw file itself, its compactions as compact records, and replays to the end;
importing again adds nothing; a file that grew adds only its new lines."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from workstation.config import Config
from workstation.importers.engine import Importer
from workstation.paths import Paths
from workstation.replay import Episode
from workstation.sessions.modelview import assemble
from workstation.sessions.log import Session

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "transcripts"
if not SHARED.is_dir():
    pytest.skip(f"the shared sample transcripts are not at {SHARED}", allow_module_level=True)

SAMPLES = sorted(p for p in SHARED.rglob("*") if p.is_file() and p.name != "SOURCES.md"
                 and not p.name.endswith(".aider.input.history"))
TURN_TYPES = ("user", "assistant", "tool", "system")


# --------------------------------------------------------------------------- counts from the raw files
def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def claude_counts(path: Path) -> dict[str, int]:
    users = tools = compacts = 0
    responses = set()
    for d in _jsonl(path):
        if d.get("type") == "user":
            content = d["message"]["content"]
            if d.get("isCompactSummary"):
                compacts += 1
            elif isinstance(content, str):
                users += bool(content.strip())
            else:
                tools += sum(b.get("type") == "tool_result" for b in content)
                users += any(b.get("type") != "tool_result" for b in content)
        elif d.get("type") == "assistant":
            message = d["message"]
            responses.add((message["id"], d.get("requestId")) if message.get("id") else d["uuid"])
    return {"user": users, "assistant": len(responses), "tool": tools, "compact": compacts}


def codex_counts(path: Path) -> dict[str, int]:
    users = tools = compacts = runs = 0
    in_run = False
    for d in _jsonl(path):
        p = d.get("payload") or {}
        if d.get("type") == "compacted":
            compacts += 1
            in_run = False
        if d.get("type") != "response_item":
            continue
        kind = p.get("type")
        said = kind == "message" and p.get("role") == "assistant" or kind in (
            "function_call", "custom_tool_call", "local_shell_call", "web_search_call") or (
            kind == "reasoning" and any(s.get("text") for s in p.get("summary") or []))
        if said:
            runs += not in_run
            in_run = True
        elif kind == "message" or kind.endswith("_output"):
            users += kind == "message" and p.get("role") == "user"
            tools += kind.endswith("_output")
            in_run = False
    return {"user": users, "assistant": runs, "tool": tools, "compact": compacts}


def swe_counts(path: Path) -> dict[str, int]:
    history = json.loads(path.read_text())["history"]
    counts = {"user": 0, "assistant": 0, "tool": 0, "compact": 0}
    previous = None
    for message in history:
        role = message["role"]
        if role == "user" and previous is not None and previous["role"] == "assistant" \
                and message.get("role") == "user" and not previous.get("tool_calls"):
            counts["tool"] += 1
        elif role in counts:
            counts[role] += 1
        previous = message
    return counts


def openhands_counts(path: Path) -> dict[str, int]:
    events = json.loads(path.read_text())
    responses = {e["tool_call_metadata"]["model_response"]["id"] for e in events
                 if "action" in e and e.get("tool_call_metadata")}
    return {"user": sum(e.get("source") == "user" and e.get("action") == "message" for e in events),
            "assistant": len(responses), "compact": 0,
            "tool": sum("observation" in e and bool(e.get("tool_call_metadata")) for e in events)}


def aider_counts(path: Path) -> dict[str, int]:
    """Runs of `#### ` lines are inputs (answers to aider's own y/n prompts aside), runs of `> `
    lines aider's output, other non-blank text between them the model's answers."""
    counts = {"user": 0, "assistant": 0, "tool": 0, "compact": 0}
    kind = None
    fenced = False
    for line in path.read_text().splitlines():
        if line.startswith("# aider chat started at"):
            kind = None
            continue
        if fenced or (kind == "assistant" and line.startswith("```")):
            fenced = fenced != line.startswith("```")
            continue
        if line.startswith("####"):
            now = "tool" if re.search(r"\(Y\)es/\(N\)o.*\]: ?\S*\s*$", line) else "user"
        elif line.startswith("> ") or line.rstrip() == ">":
            now = "tool"
        elif not line.strip():
            continue
        else:
            now = "assistant"
            fenced = line.startswith("```")
        if now != kind:
            counts[now] += 1
        kind = now
    return counts


def expected(path: Path) -> dict[str, int]:
    if path.parent.name == "claude-code":
        return claude_counts(path)
    if path.parent.name == "codex":
        return codex_counts(path)
    if path.suffix == ".traj":
        return swe_counts(path)
    if path.parent.name == "openhands":
        return openhands_counts(path)
    return aider_counts(path)


# --------------------------------------------------------------------------- the tests
@pytest.fixture
def importer(paths, db):
    return Importer(paths, db)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name[:60])
def test_sample_imports_with_the_counts_of_its_source_and_replays_to_the_end(paths, importer, sample):
    result = importer.import_file(sample)
    assert not result.error and result.problems == []
    records = [r for s in result.sessions for r in Session(paths, s.slug).read().records]
    got = {kind: sum(r["type"] == kind for r in records) for kind in ("user", "assistant", "tool", "compact")}
    assert got == expected(sample)
    assert all(r["source"]["format"] == result.format and r["source"]["file"] == str(sample.resolve())
               for r in records)
    for session in result.sessions:
        episode = Episode.load(paths, session.slug)
        last = episode.state_at(len(episode) - 1)
        assert last.step.number == len(episode.records) == len(Session(paths, session.slug).read().records)
        assert all(step.label() for step in episode.steps)
    again = importer.import_file(sample)
    assert again.unchanged and again.added == 0


def test_compactions_of_the_samples_stand_in_for_the_turns_before_them(paths, importer):
    for sample in (SHARED / "claude-code" / "daaain__claude-code-log__dag_compact_after_rewind.jsonl",
                   SHARED / "codex" / "kvsankar__agent-history__session_with_compaction.jsonl"):
        slug = importer.import_file(sample).sessions[0].slug
        view = Session(paths, slug).read()
        compact = view.last_compact()
        before = [r for r in view.records[: view.records.index(compact)] if r["type"] in TURN_TYPES]
        assert compact["covers"]["last_id"] == before[-1]["id"]
        context = assemble(view, Config())
        assert context.covered_turns == len(before) and context.summary_id == compact["id"]
        assert context.messages[0]["content"].endswith(compact["summary"])
        assert len(context.messages) == 1 + len(view.turns) - len(before)


def test_the_rewound_branch_of_the_dag_sample_is_kept_but_out_of_the_context(paths, importer):
    sample = SHARED / "claude-code" / "daaain__claude-code-log__dag_compact_after_rewind.jsonl"
    view = Session(paths, importer.import_file(sample).sessions[0].slug).read()
    first_attempt = next(r for r in view.records if r.get("content") == "First attempt")
    assert any(r.get("content") == "First answer" for r in view.records)  # still searchable, replayable
    second = next(r for r in view.records if r.get("content") == "Second attempt")
    assert second["rewind_to"] == next(r["id"] for r in view.records if r.get("content") == "Ready")
    upto = view.records.index(next(r for r in view.records if r.get("content") == "Kept going")) + 1
    from workstation.sessions.log import LogView

    texts = [m["content"] for m in assemble(LogView(view.records[:upto]), Config()).messages]
    assert texts == ["Start", "Ready", "Second attempt", "Second answer", "Keep going", "Kept going"]
    assert first_attempt["content"] not in texts


def test_reimport_without_the_import_state_adds_nothing_and_no_events_twice(paths, importer):
    import duckdb

    from workstation.memory.reflect import run_sql
    from workstation.store import Database

    for sample in SAMPLES:
        importer.import_file(sample)
    count = "SELECT count(*) AS n, count(DISTINCT id) AS ids FROM events"
    events = run_sql(importer.db, count).rows
    importer.db.close()
    with duckdb.connect(str(paths.memory_db)) as con:  # as if the state were lost
        con.execute("DELETE FROM import_sources")
    db = Database(paths)
    try:
        again = Importer(paths, db)
        assert sum(again.import_file(s).added for s in SAMPLES) == 0
        assert run_sql(db, count).rows == events and events[0][0] == events[0][1]
    finally:
        db.close()


@pytest.mark.parametrize("name", ["claude-code/jnarowski__agentcmd__full-session.jsonl",
                                  "codex/jnarowski__agentcmd__rollout-2025-09-25T15-12-14-"
                                  "019982b8-3422-79e0-8b3b-05abaf4f3c3e.jsonl"])
def test_a_file_that_grew_adds_only_its_new_lines(tmp_path, paths, importer, name):
    sample = SHARED / name
    lines = sample.read_bytes().splitlines(keepends=True)
    # cut where no response is split across the two parts: before a user line (Claude Code) or a
    # turn's context (Codex)
    cut = next(i for i in range(len(lines) // 2, len(lines)) if b'"type":"user"' in lines[i]
               or b'"type":"turn_context"' in lines[i])
    growing = tmp_path / "src" / sample.name
    growing.parent.mkdir()
    growing.write_bytes(b"".join(lines[:cut]) + lines[cut][:40])  # and a line still being written
    first = importer.import_file(growing)
    assert first.problems and "cut off" in first.problems[0] and first.added > 0
    with open(growing, "ab") as fh:
        fh.write(lines[cut][40:] + b"".join(lines[cut + 1:]))
    second = importer.import_file(growing)
    assert not second.problems
    whole = Importer(Paths.for_root(_fresh(tmp_path)))
    full = whole.import_file(growing)
    assert first.added + second.added == full.added
    slug = first.sessions[0].slug
    ids = [r["id"] for r in Session(paths, slug).read().records]
    assert ids == [r["id"] for r in Session(whole.paths, slug).read().records]


def test_a_response_logged_across_two_imports_is_continued_with_its_usage_counted_once(tmp_path, paths, importer):
    sample = SHARED / "claude-code" / "jnarowski__agentcmd__full-session.jsonl"
    lines = sample.read_bytes().splitlines(keepends=True)
    ids = [json.loads(line).get("message", {}).get("id") for line in lines]
    cut = next(i for i in range(1, len(lines)) if ids[i] and ids[i] == ids[i - 1] and ids[i] == ids[i + 1])
    growing = tmp_path / "src" / sample.name
    growing.parent.mkdir()
    growing.write_bytes(b"".join(lines[:cut]))
    slug = importer.import_file(growing).sessions[0].slug
    with open(growing, "ab") as fh:
        fh.write(b"".join(lines[cut:]))
    importer.import_file(growing)
    records = Session(paths, slug).read().records
    continued = [r for r in records if r.get("continues")]
    assert len(continued) == 1 and continued[0]["tool_calls"]
    whole = Importer(Paths.for_root(_fresh(tmp_path)))
    whole.import_file(growing)
    fresh = Session(whole.paths, slug).read().records
    for field in ("tokens_in", "tokens_out", "cache_read_tokens", "cache_creation_tokens"):
        assert sum(r.get(field, 0) for r in records) == sum(r.get(field, 0) for r in fresh)
    calls = lambda rs: sorted(c["id"] for r in rs for c in r.get("tool_calls", []))  # noqa: E731
    assert calls(records) == calls(fresh)


def _fresh(tmp_path: Path) -> Path:
    root = tmp_path / f"ws{len(list(tmp_path.iterdir()))}"
    root.mkdir()
    return root
