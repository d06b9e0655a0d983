"""One meaning for another agent's tool call (sessions.derive): the importer's events, `report`, replay and the
app read the same table, so `report` and `reflect` agree about an imported session (report said 0 file reads
where reflect said 1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.agent_support import agent, events, module_server, records, workspace
from support.fakellm import Reply
from workstation.agent import tools
from workstation.sessions.records import Assistant, Record, Tool, ToolCall, from_dict
from workstation.costs.report import agent_figures
from workstation.importers.engine import Importer
from workstation.importers.events import event_lines
from workstation.paths import Paths
from workstation.replay import Episode
from workstation.sessions.derive import FILE_EDIT, FILE_READ, foreign_files
from workstation.sessions.log import Session, tool_call_arguments

FIX = Path(__file__).parents[1] / "fixtures" / "import"
DERIVED = ("file_read", "file_edit", "read_avoided", "memory_hit", "memory_miss")

server_module, server = module_server()
PATCH = "*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n*** Add File: src/b.py\n+z\n*** End Patch\n"


def test_the_table_of_other_agents_tools():
    assert foreign_files("Read", {"file_path": "/w/a.py"}, None) == [(FILE_READ, "/w/a.py")]
    assert foreign_files("MultiEdit", {"file_path": "/w/a.py", "edits": []}, None) == [(FILE_EDIT, "/w/a.py")]
    assert foreign_files("str_replace_editor", {"command": "view", "path": "a.py"}, None) == [(FILE_READ, "a.py")]
    assert foreign_files("str_replace_editor", {"command": "create", "path": "b.py"}, None) == [(FILE_EDIT, "b.py")]
    raw = {"id": "c", "name": "apply_patch", "arguments": PATCH}  # Codex sends the patch itself, not JSON
    assert foreign_files("apply_patch", {}, raw) == [(FILE_EDIT, "src/a.py"), (FILE_EDIT, "src/b.py")]
    assert foreign_files("apply_patch", {"input": PATCH}, {"arguments": "{}"}) == [(FILE_EDIT, "src/a.py"),
                                                                                   (FILE_EDIT, "src/b.py")]
    assert foreign_files("Bash", {"command": "cat a.py"}, None) == []  # a command line does not say
    assert foreign_files("Read", {"file_path": 3}, None) == []


def _events_and_meanings(records: list[Record], slug: str) -> tuple[list, list]:
    calls: dict[str, ToolCall] = {}
    from_events, from_meanings = [], []
    for record in records:
        if isinstance(record, Assistant):
            calls.update({c.id: c for c in record.tool_calls or ()})
        if not isinstance(record, Tool):
            continue
        for line in event_lines(record, slug, "test", calls, "import:test"):
            event = json.loads(line)
            if event["y"] in (FILE_READ, FILE_EDIT):
                from_events.append((event["y"], event["n"]))
        call = calls.get(record.tool_call_id)
        meaning = tools.meaning_of(record.name, tool_call_arguments(call or {}), record, call)
        from_meanings += [(FILE_READ, r.path) for r in meaning.reads] + [(FILE_EDIT, e.path) for e in meaning.edits]
    return from_events, from_meanings


@pytest.mark.parametrize("name, expected", [
    ("claude_session.jsonl", [(FILE_READ, "/work/demo/setup.py")]),  # Read
    ("codex_0.40.jsonl", []),
    ("codex_0.77.jsonl", [(FILE_EDIT, "test_x.py")]),  # apply_patch
    ("openhands_events.json", [(FILE_EDIT, "/workspace/hi.py")]),  # str_replace_editor create
    ("swe_function_calls.traj", [(FILE_READ, "division.py")]),  # open
    ("swe_text_actions.traj", []),  # text actions: {"command": "open ..."}, no path argument
])
def test_events_report_and_replay_agree_on_what_an_import_read_and_edited(tmp_path, name, expected):
    paths = Paths.for_root(tmp_path)
    with Importer(paths) as importer:
        (slug,) = [s.slug for s in importer.import_file(FIX / name).sessions]
    view = Session(paths, slug).read()
    from_events, from_meanings = _events_and_meanings(view.records, slug)
    assert from_events == from_meanings == expected
    assert agent_figures(view, tools.meaning_of).file_reads == sum(kind == FILE_READ for kind, _ in expected)
    episode = Episode.load(paths, slug)
    last = episode.state_at(len(episode) - 1)
    assert set(last.memory.files_read) == {p for kind, p in expected if kind == FILE_READ}
    assert set(last.memory.files_edited) == {p for kind, p in expected if kind == FILE_EDIT}
    timeline = [(e["type"], e["name"]) for e in last.timeline if e["type"] in (FILE_READ, FILE_EDIT)]
    assert timeline == expected  # the replay's timeline shows what reflect counts


def test_an_imported_tool_named_like_ours_means_what_the_importer_counted():
    """Another agent's `write_file` (OpenHands-like agents name theirs so) is not ours: the importer's events
    and the meaning `report` reads come from one derivation (sessions.derive.events of foreign_meaning)."""
    call = {"id": "c1", "name": "write_file", "arguments": json.dumps({"path": "a.py", "content": "x = 1\n"})}
    read = {"id": "c2", "name": "read_file", "arguments": json.dumps({"path": "b.py"})}
    records = [from_dict(r) for r in [
        {"v": 1, "id": "r0", "ts": "2026-01-01T00:00:00Z", "type": "assistant", "content": "",
         "tool_calls": [call, read], "source": {"format": "test", "id": "s0"}},
        {"v": 1, "id": "r1", "ts": "2026-01-01T00:00:01Z", "type": "tool", "tool_call_id": "c1",
         "name": "write_file", "content": "wrote a.py", "ok": True, "source": {"format": "test", "id": "s1"}},
        {"v": 1, "id": "r2", "ts": "2026-01-01T00:00:02Z", "type": "tool", "tool_call_id": "c2",
         "name": "read_file", "content": "y = 2\n", "ok": True, "source": {"format": "test", "id": "s2"}}]]
    from_events, from_meanings = _events_and_meanings(records, "s")
    assert from_events == from_meanings == [(FILE_EDIT, "a.py"), (FILE_READ, "b.py")]
    chars = [json.loads(line)["x"].get("chars") for line in event_lines(records[2], "s", "test", {"c2": read}, "f")
             if json.loads(line)["y"] == FILE_READ]
    assert chars == [len("y = 2\n")]  # as a live read's event carries what entered the context


def test_report_and_reflect_count_the_same_file_reads_from_the_command_line(tmp_path):
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}

    def cli(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "workstation", "-C", str(tmp_path), *args], env=env,
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr
        return done.stdout

    imported = json.loads(cli("import", str(FIX / "claude_session.jsonl"), "--json"))
    slug = imported[0]["sessions"][0]["slug"]
    report = json.loads(cli("report", slug, "--json"))
    rows = json.loads(cli("reflect", "--sql", f"SELECT count(*) AS n FROM events WHERE session = '{slug}' "
                                              "AND type = 'file_read'", "--json"))
    assert report["agent"]["file_reads"] == rows[0]["n"] == 1


def test_a_live_sessions_events_are_what_its_log_derives(tmp_path, server):
    """The events a live call records are the ones replay and `report` derive from its session record (the
    meaning is read off the fields that record keeps: agent.tools.toolcall.recorded)."""
    ws = workspace(tmp_path, server.url)
    read = ("read_lines", {"path": "pkg/util.py", "start": 1, "end": 3})
    server.push(Reply(tool_calls=[("file_meta", {"path": "pkg/core.py"}), read]),
                Reply(tool_calls=[read, ("grep", {"pattern": "def "})]),
                Reply(tool_calls=[("replace_lines", {"path": "pkg/util.py", "start": 1, "end": 1, "content": "# one"}),
                                  ("find", {"query": "clean"})]),
                Reply(text="done"))
    a = agent(ws)
    try:
        assert a.run("go").text == "done"
        logged = records(a.session)
        live = [(e["type"], e["name"]) for e in events(ws, a.session.slug) if e["type"] in DERIVED]
    finally:
        a.close()
        ws.close()
    calls = {c["id"]: c for r in logged if r["type"] == "assistant" for c in r.get("tool_calls") or ()}
    derived = []
    for record in (r for r in logged if r["type"] == "tool"):
        call = calls[record["tool_call_id"]]
        meaning = tools.meaning_of(record["name"], tool_call_arguments(call), record, call)
        derived += [(kind, name) for kind, name, _ in tools.events(meaning, live=True) if kind in DERIVED]
    assert {kind for kind, _ in live} >= {"file_read", "file_edit", "read_avoided"}
    assert live == derived
