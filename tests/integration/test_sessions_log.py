"""The session log: records, versioning, torn and corrupt lines, concurrent appenders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from support.sessions_support import fill, make_config
from workstation.cli import main
from workstation.sessions import Session, SessionArchived, SessionError
from workstation.sessions.log import FORMAT_VERSION, live_slugs, parse_lines, slugify
from workstation.sessions.records import ToolCall

DEMO = Path(__file__).resolve().parents[2] / "sessions" / "demo-request-id.jsonl"


@pytest.fixture
def paths(tmp_path):
    return make_config(tmp_path)[1]


def test_records_carry_id_timestamp_tokens_and_version(paths):
    session = Session.create(paths, "demo")
    user = session.user("Fix src/loader.py, please")
    call = {"id": "call_1", "name": "read_file", "arguments": {"path": "src/loader.py"}}
    assistant = session.assistant("", [call], model="openai/chat", tokens_in=120, tokens_out=9)
    tool = session.tool("call_1", "read_file", "def load(): ...", ok=True)
    session.system("note")
    view = session.read()
    assert [r["type"] for r in view.records] == ["user", "assistant", "tool", "system"]
    assert view.problems == []
    for record in view.records:
        assert record["v"] == FORMAT_VERSION and record["id"] and record["ts"].endswith("Z")
        assert isinstance(record["tokens"], int)
    assert view.records[0] == user and user["tokens"] > 3
    assert view.records[1].tool_calls == [ToolCall(id="call_1", name="read_file",
                                                   arguments='{"path": "src/loader.py"}')]
    assert view.records[1]["tokens_in"] == 120 and assistant["model"] == "openai/chat"
    assert view.records[2]["tool_call_id"] == "call_1" and tool["ok"] is True
    assert len({r["id"] for r in view.records}) == 4
    # one JSON object per line, nothing else
    lines = session.path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and all(json.loads(line)["id"] for line in lines[:-1])


def test_incremental_reads_see_new_appends_and_a_replaced_file(paths):
    session = Session.create(paths, "inc")
    fill(session, 3)
    assert len(session.read().records) == 3
    other = Session.open(paths, "inc")  # a second process appending
    other.user("from elsewhere")
    assert [r["content"] for r in session.read().records][-1] == "from elsewhere"
    # a file replaced under the reader (what a restore does) is read from the start again
    data = session.path.read_bytes()
    tmp = session.path.with_name("replacement")
    tmp.write_bytes(data.split(b"\n", 1)[1])  # drop the first record
    os.replace(tmp, session.path)
    assert len(session.read().records) == 3


def test_torn_last_line_is_reported_and_the_next_append_survives(paths):
    session = Session.create(paths, "torn")
    fill(session, 4)
    with open(session.path, "ab") as fh:
        fh.write(b'{"v":1,"id":"half","ts":"2025-01-01T00:00:00Z","type":"us')  # a writer killed mid-line
    view = Session(paths, "torn").read()
    assert len(view.records) == 4
    assert len(view.problems) == 1 and view.problems[0].line == 5 and "torn last line" in view.problems[0].reason
    added = session.user("after the crash")
    view = Session(paths, "torn").read()
    assert [r["id"] for r in view.records][-1] == added["id"] and len(view.records) == 5
    assert [(p.line, p.reason.split(" (")[0]) for p in view.problems] == [(5, "not valid JSON")]


def test_corrupt_lines_anywhere_are_reported_and_everything_after_is_read(paths):
    session = Session.create(paths, "corrupt")
    good = fill(session, 2)
    bad_lines = [b"garbage{", b"[1, 2]", b'{"v": 99, "id": "x", "type": "user"}',
                 b'{"v": 1, "id": "y", "type": "telepathy"}', b'{"v": 1, "type": "user"}', b"\xff\xfe"]
    with open(session.path, "ab") as fh:
        fh.write(b"\n".join(bad_lines) + b"\n")
    good += fill(session, 3, start=2)
    view = Session(paths, "corrupt").read()
    assert [r["id"] for r in view.records] == [r["id"] for r in good]
    reasons = {p.line: p.reason for p in view.problems}
    assert sorted(reasons) == [3, 4, 5, 6, 7, 8]
    assert "not valid JSON" in reasons[3] and "not a JSON object" in reasons[4]
    assert "unsupported format version 99" in reasons[5] and "unknown record type" in reasons[6]
    assert "without an id" in reasons[7] and "not valid JSON" in reasons[8]


BAD_FIELDS = {  # valid JSON, known type, fields the readers cannot use
    "covers-not-object": (b'{"v":1,"id":"z1","type":"compact","covers":"oops"}',
                          "'covers' is a string, not an object"),
    "tool_calls-not-list": (b'{"v":1,"id":"z2","type":"assistant","content":"","tool_calls":"x"}',
                            "'tool_calls' is a string, not a list"),
    "targets-not-objects": (b'{"v":1,"id":"z3","type":"redaction","targets":[1,2]}',
                            "targets[0] is an integer, not an object"),
    "tool-call-without-id": (b'{"v":1,"id":"z4","type":"assistant","tool_calls":[{"name":"read_file"}]}',
                             "tool_calls[0] without 'id'"),
}


@pytest.mark.parametrize("line, reason", BAD_FIELDS.values(), ids=BAD_FIELDS)
def test_a_record_with_bad_fields_is_reported_and_the_commands_go_on(tmp_path, line, reason):
    paths = make_config(tmp_path)[1]
    session = Session.create(paths, "bad")
    good = fill(session, 6, tools=True, big=100)
    with open(session.path, "ab") as fh:
        fh.write(line + b"\n")
    good += fill(session, 2, start=6)
    view = Session(paths, "bad").read()
    assert [r["id"] for r in view.records] == [r["id"] for r in good]
    assert [(p.line, p.reason) for p in view.problems] == [(7, f"bad field: {reason}")]

    def run(*args):
        result = CliRunner().invoke(main, ["-C", str(tmp_path), "session", *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result

    unreadable = f"unreadable line 7: bad field: {reason}\n"
    listed = run("list", "--json")
    # 8 records, 3 of them user messages: 3 turns
    assert [(s["slug"], s["turns"], s["problems"]) for s in json.loads(listed.stdout)] == [("bad", 3, 1)]
    assert listed.stderr == f"warning: bad: {unreadable}"
    shown = run("show", "bad", "--json")
    assert json.loads(shown.stdout)["turns"] == 3 and shown.stderr == f"warning: {unreadable}"
    raw = run("show", "bad", "--raw")
    assert all(r["id"] in raw.stdout for r in good) and raw.stderr == f"warning: {unreadable}"
    searched = run("search", "turn 8", "--json")
    assert [h["record_id"] for h in json.loads(searched.stdout)] == [good[-1]["id"]]
    assert searched.stderr == f"warning: bad: {unreadable}"


def test_the_recorded_demo_episode_passes_the_field_checks():
    view = parse_lines(DEMO.read_bytes())
    assert view.problems == [] and {r["type"] for r in view.records} >= {"user", "assistant", "tool"}


def test_complete_record_without_its_newline_is_kept(paths):
    session = Session.create(paths, "nonl")
    fill(session, 2)
    record = dict(session.read().records[0].as_dict(), id="nonl-1")
    with open(session.path, "ab") as fh:
        fh.write(json.dumps(record).encode())  # killed between the JSON and the newline
    assert Session(paths, "nonl").read().records[-1]["id"] == "nonl-1"
    session.user("next")
    view = Session(paths, "nonl").read()
    assert [r["id"] for r in view.records][-2:][0] == "nonl-1" and view.problems == []


APPENDER = textwrap.dedent("""
    import sys
    from workstation.paths import Paths
    from workstation.sessions import Session
    paths = Paths.for_root(sys.argv[1])
    session = Session.open(paths, "shared", counter=len)
    tag = sys.argv[2]
    for i in range(int(sys.argv[3])):
        session.user(f"{tag}-{i} " + tag * 70_000)  # far above PIPE_BUF: only the lock keeps lines whole
""")


def test_concurrent_appenders_never_interleave(paths, tmp_path):
    Session.create(paths, "shared")
    script = tmp_path / "appender.py"
    script.write_text(APPENDER)
    procs = [subprocess.Popen([sys.executable, str(script), str(paths.root), tag, "40"]) for tag in "abcd"]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    view = Session(paths, "shared").read()
    assert view.problems == []
    assert len(view.records) == 160
    for tag in "abcd":  # each writer's records complete and in its own order
        mine = [r["content"].split(" ")[0] for r in view.records if r["content"].startswith(tag)]
        assert mine == [f"{tag}-{i}" for i in range(40)]


def test_slugs_creation_and_missing_sessions(paths):
    assert slugify("Fix the LOADER: now!").endswith("-fix-the-loader-now")
    first = Session.create(paths, title="Fix the loader")
    second = Session.create(paths, title="Fix the loader")
    assert second.slug == first.slug + "-2"
    assert live_slugs(paths) == sorted([first.slug, second.slug])
    with pytest.raises(SessionError, match="already exists"):
        Session.create(paths, first.slug)
    for bad in ("", "../etc", "A", "x.jsonl", "a/b", "-x", "x" * 101):
        with pytest.raises(SessionError, match="invalid session name"):
            Session(paths, bad)
    with pytest.raises(SessionError, match="no session named ghost"):
        Session.open(paths, "ghost")
    with pytest.raises(SessionError, match="no session named ghost"):
        Session(paths, "ghost").user("hello")
    assert not (paths.sessions / "ghost.jsonl").exists()  # appending never creates a log by accident


def test_appending_to_an_archived_session_is_refused(paths, tmp_path):
    from workstation.sessions.archive import archive

    config = make_config(tmp_path)[0]
    session = Session.create(paths, "old")
    fill(session, 3)
    archive(paths, "old", config)
    with pytest.raises(SessionArchived, match="restore it"):
        session.user("too late")
    with pytest.raises(SessionArchived):
        Session.open(paths, "old")
    assert not session.path.exists()
