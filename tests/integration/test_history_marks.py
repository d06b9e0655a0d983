"""What the app says of history (issue 22): a tool call's outcome in a few words, and the turns an undo or a
rewind took back, marked wherever records are shown (replay and resume, `session show`, search, the
sessions list, the /rewind picker). The turns run through the real litellm path against the scripted server."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from support.agent_support import agent, module_server, records, workspace
from support.fakellm import Reply
from workstation.agent import tools
from workstation.commands import slash
from workstation.replay import Episode
from workstation.sessions.catalog import list_sessions, search
from workstation.sessions.turns import summaries, taken_back

server_module, server = module_server()


@pytest.fixture
def setup(tmp_path, server):
    w = workspace(tmp_path, server.url, agent={"command_allow": ["ls", "echo"]})
    a = agent(w)
    yield w, a
    a.close()
    w.close()


def transcript(w, slug="s") -> list[dict]:
    episode = Episode.load(w.paths, slug, config=w.config)
    return [t for i in range(len(episode)) for t in episode.transcript_of(i)]


def test_each_tool_line_says_what_the_call_came_to(setup, server):
    w, a = setup
    server.push(Reply(tool_calls=[("write_file", {"path": "pkg/new.py", "content": "a = 1\nb = 2\nc = 3\n"}),
                                  ("read_lines", {"path": "pkg/core.py", "start": 1, "end": 3})]),
                Reply(tool_calls=[("edit_file", {"path": "pkg/new.py", "old": "b = 2\nc = 3", "new": "b = 20"}),
                                  ("run_command", {"cmd": "ls no-such-file"}),
                                  ("run_command", {"cmd": "echo hi"})]),
                Reply(text="Done."))
    assert a.run("make pkg/new.py, then check").error is None
    tool_records = records(a.session, "tool")
    outcomes = [tools.outcome_of(r["name"], {}, r) for r in tool_records]
    assert outcomes[0] == "new file +3"
    assert outcomes[1] == f"{tool_records[1]['content'].count(chr(10)) + 1} lines"  # a read: its size
    assert outcomes[2] == "+1 −2"
    assert outcomes[3].startswith("exit 2: ") and "no-such-file" in outcomes[3]
    assert outcomes[4] == "exit 0"
    assert tool_records[3]["exit_code"] == 2  # recorded with the call, not read back from its text
    # the resumed transcript says the same, beside the call as its tool labels it
    shown = [(t["text"], t["outcome"]) for t in transcript(w) if t["role"] == "tool"]
    assert shown[0] == ("write_file(pkg/new.py)", "new file +3")
    assert shown[2] == ("edit_file(pkg/new.py)", "+1 −2")
    assert shown[4] == ("run_command(echo hi)", "exit 0")


def test_an_old_command_record_gives_its_exit_status_from_its_last_line():
    record = {"type": "tool", "name": "run_command", "ok": False, "outcome": "error",
              "content": "$ make\nmake: *** No rule to make target 'x'.  Stop.\n[exit 2, 0.0s]"}
    assert tools.outcome_of("run_command", {"cmd": "make"}, record) == \
        "exit 2: make: *** No rule to make target 'x'. Stop."
    timed = {"type": "tool", "name": "run_command", "ok": False, "outcome": "timeout",
             "content": "$ sleep 9\n\n[timed out, 2.0s]"}
    assert tools.outcome_of("run_command", {}, timed) == "timed out"
    # an imported agent's shell call with the exit status its source logged
    assert tools.outcome_of("Bash", {}, {"ok": False, "exit_code": 1, "content": "x\nboom"}) == "exit 1: boom"


def three_turns(a, server) -> None:
    server.push(Reply(tool_calls=[("write_file", {"path": "one.txt", "content": "1\n"})]), Reply(text="One."))
    assert a.run("write one").error is None
    server.push(Reply(tool_calls=[("write_file", {"path": "two.txt", "content": "2\n"})]), Reply(text="Two."))
    assert a.run("write two").error is None
    server.push(Reply(tool_calls=[("write_file", {"path": "three.txt", "content": "3\n"})]), Reply(text="Three."))
    assert a.run("write three\nwith a second line").error is None


def test_undo_and_rewind_mark_what_they_took_back_everywhere(setup, server, monkeypatch):
    w, a = setup
    three_turns(a, server)
    assert slash.run(a, "/undo").ok
    view = a.session.read()
    by_id = {r["id"]: r for r in view.records}
    marks = taken_back(view.records)
    # the undo took back turn 3's edit; its conversation stands
    assert {by_id[i]["type"] for i in marks} == {"tool"}
    (undone,) = marks
    assert by_id[undone]["content"].startswith("three.txt: created") and marks[undone].describe() == "undone by /undo"
    assert slash.run(a, "/rewind 2").ok
    view = a.session.read()
    marks = taken_back(view.records)
    users = [r for r in view.records if r["type"] == "user"]
    assert users[0]["id"] not in marks
    assert {marks[u["id"]].describe() for u in users[1:]} == {"taken back by /rewind 2"}
    rewind = next(i for i, r in enumerate(view.records) if r["type"] == "rewind" and r.get("conversation"))
    between = [r for r in view.records[view.records.index(users[1]):rewind] if r["type"] in ("user", "assistant", "tool")]
    assert len(between) >= 6 and all(marks[r["id"]].conversation for r in between)  # the undone edit too
    assert all(r["id"] not in marks for r in view.records[:view.records.index(users[1])])

    # replay and resume: dimmed turns carry what took them back; user turns their numbers
    shown = transcript(w)
    users_shown = [t for t in shown if t["role"] == "user" and t.get("id")]
    assert [t.get("number") for t in users_shown] == [1, 2, 3]
    # the slash commands, kept in the log (`command` records), stand where they ran: no turn, no id
    assert [(t["text"], "number" in t) for t in shown if t["role"] == "user" and not t.get("id")] == [
        ("/undo", False), ("/rewind 2", False)]
    assert [t.get("taken_back", "") for t in users_shown] == ["", "taken back by /rewind 2", "taken back by /rewind 2"]
    episode = Episode.load(w.paths, "s", config=w.config)
    step = episode.steps[episode.index_of(users[2]["id"])]
    assert step.label().endswith("[taken back by /rewind 2]")
    assert step.to_dict()["taken_back"]["before_turn"] == 2
    assert any(e["details"].get("taken_back") for i in range(len(episode)) for e in episode.events_of(i))

    # the /rewind picker's list: number, first line, files, mark
    listed = summaries(view.records)
    assert [(t.number, t.prompt, t.files, t.undone) for t in listed] == [  # the rewind and the undo restored them
        (1, "write one", ("one.txt",), ()), (2, "write two", (), ("two.txt",)), (3, "write three", (), ("three.txt",))]
    assert [bool(t.taken_back) for t in listed] == [False, True, True]

    # search hits and the sessions list
    hits = {h.snippet: h for h in search(w.paths, "write", db=w.db) if h.type == "user"}
    assert hits["write one"].taken_back == ""
    assert hits["write two"].taken_back == "taken back by /rewind 2"
    unindexed = {h.snippet: h for h in search(w.paths, "write", db=None) if h.type == "user"}
    assert unindexed["write two"].taken_back == "taken back by /rewind 2"
    (info,) = list_sessions(w.paths)
    assert info.turns == 3 and info.taken_back == 2

    # session show, as text and JSON
    from workstation.cli import main

    monkeypatch.chdir(w.root)
    runner = CliRunner()
    out = runner.invoke(main, ["session", "show", "s", "--json"])
    assert out.exit_code == 0, out.output
    shown_json = json.loads(out.stdout)
    assert {(i["turn"], i["by"]) for i in shown_json["taken_back"]} == {(2, "taken back by /rewind 2"),
                                                                        (3, "taken back by /rewind 2")}
    out = runner.invoke(main, ["session", "show", "s"])
    assert out.exit_code == 0, out.output
    assert "# turns 2–3 taken back by /rewind 2 (not in the context below)" in out.stdout
    raw = runner.invoke(main, ["session", "show", "s", "--raw"]).stdout
    assert "## Turn 2 · ↶ taken back by /rewind 2" in raw and "*/undo: took back turn 3 on (1 file restored)*" in raw
    found = runner.invoke(main, ["session", "search", "write two"]).stdout
    assert "2 ↶" in found and "taken back by a rewind or undo" in found
