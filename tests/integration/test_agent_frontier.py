"""The frontier carried through a compaction, /uncompact and a rewind across a compaction, as the scripted model
server receives the requests (the real litellm path)."""

from __future__ import annotations

import json

from support.agent_support import (agent, is_compaction, is_update, module_server, records, requests_since, tool_results,
                           workspace)
from support.fakellm import Reply
from workstation.commands import slash
from workstation.sessions import Session

server_module, server = module_server()

EMPTY = ("## Task & instructions\n(none)\n## Decisions & conventions\n(none)\n## Files touched\n(none)\n"
         "## Open to-dos\n(none)\n## Errors seen\n(none)")  # a summarizer that keeps nothing
GOAL = "Our goal: make pkg/core.py's answer configurable through ANSWER_BASE, and keep the old default of 1."
KNOBS = {"compact_threshold": 3, "keep_recent": 1}


def steps(server, script: dict[str, list[Reply]]):
    """Reply to each user message by its first word's script (then 'ok'); every compaction with EMPTY."""
    queue: list[Reply] = []

    def respond(body):
        messages = body["messages"]
        if is_compaction(body):
            return Reply(text=EMPTY)
        last = messages[-1]
        if last["role"] == "user" and not is_update(last):
            queue[:] = list(script.get(last["content"].split()[0].rstrip(":"), []))
        elif last["role"] == "user" and messages[-2]["role"] == "user" and not is_update(messages[-2]):
            queue[:] = list(script.get(messages[-2]["content"].split()[0].rstrip(":"), []))
        return queue.pop(0) if queue else Reply(text="ok")

    server.dispatch.fn = respond


def asked(server) -> list[dict]:
    """The chat requests (not compactions) sent since the test began."""
    return [b for b in requests_since(server) if not is_compaction(b)]


def test_after_a_compaction_the_head_carries_the_frontier_whatever_the_summary_kept(tmp_path, server):
    steps(server, {
        "Our": [Reply(tool_calls=[("todo", {"items": [{"text": "read core", "status": "done"},
                                                        {"text": "add ANSWER_BASE", "status": "in_progress"}]}),
                                  ("write_file", {"path": "pkg/config.py", "content": "ANSWER_BASE = 1\n"})])],
        "run": [Reply(tool_calls=[("run_command", {"cmd": "ls pkg/answer_base.py"})]),
                Reply(text="It fails: the file is not there yet. Should I keep the old default?")],
        "recall": [Reply(tool_calls=[("recall", {"turn": 1})]), Reply(text="recalled")],
    })
    ws = workspace(tmp_path, server.url, memory=KNOBS)
    a = agent(ws, compaction="sync")
    for text in (GOAL, "run the check", "yes, keep it", "and go on"):
        assert a.run(text).error is None
    compacts = records(a.session, "compact")
    assert compacts, "the knobs must make a compaction happen"
    epochs = records(a.session, "epoch")
    head = epochs[-1]["system"]
    assert epochs[-1]["summary"] == compacts[-1]["id"]
    # the summary kept nothing; the head still has the user's goal in their words, the plan, the file, the failure
    assert GOAL in head and "[>] add ANSWER_BASE" in head and "- created pkg/config.py" in head
    assert "Last failure" in head and "$ ls pkg/answer_base.py" in head and "No such file" in head
    sent = asked(server)
    after = [b for b in sent if b["messages"][0]["content"] == head]
    assert after, "a request after the compaction carries the epoch's head"
    assert len({json.dumps(b["messages"][:2]) for b in after}) == 1  # the head is fixed within the epoch
    # what the compaction replaced is listed on its record, and recall of a replaced turn returns it whole
    replaced = compacts[-1]["replaced"]
    assert replaced["turns"][0] == 1 and replaced["tool_calls"].get("write_file") == 1
    assert slash.run(a, "/frontier").text.count(GOAL) == 1
    # the model recalls the summarized turn 1 by its number: the whole turn, from the log
    assert a.run("recall what we did first").error is None
    (_name, _args, content), = [r for r in tool_results(asked(server)[-1]["messages"]) if r[0] == "recall"]
    assert content.startswith("[turn 1, from the session log]") and GOAL in content
    assert '"path": "pkg/config.py"' in content and "pkg/config.py: created" in content
    # and the user, with /recall (the frontier says how)
    assert "/recall N" in slash.run(a, "/frontier").text
    shown = slash.run(a, "/recall 1")
    assert shown.ok and shown.text.startswith("[turn 1, from the session log]") and GOAL in shown.text
    assert not slash.run(a, "/recall").ok and not slash.run(a, "/recall 99").ok
    a.close()
    ws.close()


def test_uncompact_makes_the_next_request_continue_the_one_before_the_compaction(tmp_path, server):
    steps(server, {})
    ws = workspace(tmp_path, server.url, memory=KNOBS)
    a = agent(ws, compaction="sync")
    assert a.run("first message").error is None
    assert a.run("second message").error is None
    before = asked(server)[-1]  # the last request before the compaction
    assert a.run("third message").error is None  # the third turn compacts turns 1-2 first
    (compact,) = records(a.session, "compact")
    assert asked(server)[-1]["messages"][1]["content"].startswith("Summary of the earlier conversation")
    done = slash.run(a, "/uncompact")
    assert done.ok and "waits until the request would no longer fit the window" in done.text, done.text
    (undone,) = records(a.session, "uncompact")
    assert undone["compact"] == compact["id"] and undone["epochs"] == [records(a.session, "epoch")[-1]["id"]]
    mark = len(server.requests)
    assert a.run("fourth message").error is None
    sent = server.requests[mark:]
    assert not any(is_compaction(b) for b in sent)  # held: the request fits, though the threshold is passed
    (next_request,) = sent
    old, new = before["messages"], next_request["messages"]
    assert json.dumps(new[: len(old)]) == json.dumps(old)  # byte for byte: a warm prompt cache serves it
    assert json.dumps(next_request["tools"]) == json.dumps(before["tools"])
    assert [m["content"] for m in new[len(old):] if m["role"] == "user" and not is_update(m)] == [
        "third message", "fourth message"]
    assert "Summary of the earlier conversation" not in json.dumps(new)
    # a compaction asked for still runs; nothing is lost from the log
    assert slash.run(a, "/compact 1").ok
    assert len(records(a.session, "compact")) == 2
    assert not slash.run(a, "/uncompact now").ok
    a.close()
    ws.close()


def test_rewind_across_a_compaction_restores_the_files_and_that_turns_conversation(tmp_path, server):
    steps(server, {
        "one": [Reply(tool_calls=[("write_file", {"path": "notes/a.txt", "content": "a1\n"})])],
        "two": [Reply(tool_calls=[("write_file", {"path": "notes/a.txt", "content": "a2\n"}),
                                  ("write_file", {"path": "notes/b.txt", "content": "b\n"})])],
    })
    ws = workspace(tmp_path, server.url, memory=KNOBS)
    a = agent(ws, compaction="sync")
    for text in ("one: write a", "two: change a, add b", "three: look", "four: look again"):
        assert a.run(text).error is None
    compact = a.session.read().last_compact()
    assert compact is not None and compact["covers"]["last_turn"] >= 2  # turns 1-2 are summarized
    done = slash.run(a, "/rewind 2")
    assert done.ok and done.action == "rewound", done.text
    assert (ws.root / "notes/a.txt").read_text() == "a1\n" and not (ws.root / "notes/b.txt").exists()
    mark = len(server.requests)
    assert a.run("five: and now?").error is None
    sent = [b for b in server.requests[mark:] if not is_compaction(b)][0]["messages"]
    said = [m["content"] for m in sent if m["role"] == "user" and not is_update(m)]
    assert said == ["one: write a", "five: and now?"]  # turn 1 verbatim again, no summary of what went
    assert not any(str(m.get("content") or "").startswith("Summary of the earlier") for m in sent)
    told = [m["content"] for m in sent if is_update(m)]
    assert any("rewound the files to before user turn 2" in t and "notes/b.txt" in t for t in told)
    # the frontier agrees: a.txt created (as turn 1 left it), b.txt never happened
    front = slash.run(a, "/frontier").text
    assert "- created notes/a.txt" in front and "notes/b.txt" not in front
    assert [r["content"] for r in records(Session.open(ws.paths, a.session.slug), "user")][:2] == [
        "one: write a", "two: change a, add b"]  # the log lost nothing
    a.close()
    ws.close()


def test_the_command_line_shows_the_frontier_and_undoes_a_compaction(tmp_path):
    from click.testing import CliRunner

    from workstation.cli import main
    from workstation.paths import Paths

    root = tmp_path / "repo"
    root.mkdir()
    session = Session.create(Paths.for_root(root), "cli")
    first = session.user(GOAL)
    session.assistant("Which module first: core or util?")
    compact = session.append("compact", summary="## Task & instructions\n(none)", sections={}, files=[],
                             covers={"last_id": first["id"], "first_turn": 1, "last_turn": 1}, model="m")
    run = CliRunner()

    def cli(*args, code=0):
        result = run.invoke(main, ["-C", str(root), "session", *args])
        assert result.exit_code == code, result.output
        return result.output if not code else str(result.exception)  # the entry point prints it in one line

    shown = json.loads(cli("frontier", "cli", "--json"))
    assert shown["messages"] == [{"turn": 1, "text": GOAL, "cut_tokens": 0}] and shown["turn"] == 1
    assert shown["questions"] == [{"turn": 1, "text": "Which module first: core or util?"}]
    assert GOAL in cli("frontier", "cli")
    undone = json.loads(cli("uncompact", "cli", "--json"))
    assert undone["compact"] == compact["id"] and "no longer fit the window" in undone["held"]
    assert "nothing to uncompact" in cli("uncompact", "cli", code=1)
    assert "no session named nope" in cli("frontier", "nope", code=1)
