"""Checkpoints and taking changes back (agent/checkpoints.py): the model changes files over several turns
through the real litellm path against the scripted server, then /undo, /rewind, /fork and /diff (and the
CLI) must give back the exact bytes, refuse what would lose someone else's change, and keep every log line."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest
from click.testing import CliRunner

from support.agent_scenario import summarize
from support.agent_support import agent, is_compaction, is_update, module_server, records, workspace
from support.fakellm import Reply
from workstation.commands import slash
from workstation.agent.loop import Agent
from workstation.fsutil import sha256_bytes
from workstation.sessions import Session

server_module, server = module_server()


def tree(root) -> dict[str, bytes]:
    """Every file of the workspace (its state folder aside), byte for byte, with its mode."""
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mode & 0o777) for p in sorted(root.rglob("*"))
            if p.is_file() and ".workstation" not in p.relative_to(root).parts}


def lines_of(root, rel) -> int:
    return len((root / rel).read_bytes().splitlines())


def read(root, rel):
    return ("read_lines", {"path": rel, "start": 1, "end": lines_of(root, rel)})


MODULE = "def slug(text: str) -> str:\n    return '-'.join(text.lower().split())\n"
TEST = "from pkg.slug import slug\n\n\ndef test_slug():\n    assert slug('A b') == 'a-b'\n"


def three_turns(a, w, server) -> list[dict]:
    """Turn 1 creates a module and its test; turn 2 edits pkg/core.py twice (and the new module); turn 3
    deletes pkg/util.py and renames the module. Returns the tree before each turn and after the last."""
    os.chmod(w.root / "pkg/core.py", 0o755)  # a mode the restore must keep
    snaps = [tree(w.root)]
    server.push(Reply(tool_calls=[("write_file", {"path": "pkg/slug.py", "content": MODULE}),
                                  ("write_file", {"path": "tests/test_slug.py", "content": TEST})]),
                Reply(text="Created."))
    assert a.run("add a slug helper and its test").error is None
    snaps.append(tree(w.root))
    server.push(Reply(tool_calls=[read(w.root, "pkg/core.py"),
                                  ("edit_file", {"path": "pkg/core.py", "old": "timeout: float = 5.0",
                                                 "new": "timeout: float = 9.0"})]),
                Reply(tool_calls=[("edit_file", {"path": "pkg/core.py", "old": "return 1", "new": "return 2"}),
                                  ("edit_file", {"path": "pkg/slug.py", "old": "'-'.join", "new": "'_'.join"})]),
                Reply(text="Edited."))
    assert a.run("tune pkg/core.py").error is None
    snaps.append(tree(w.root))
    server.push(Reply(tool_calls=[("delete_file", {"path": "pkg/util.py"}),
                                  ("move_file", {"src": "pkg/slug.py", "dst": "pkg/text/slugs.py"})]),
                Reply(text="Tidied."))
    assert a.run("remove util, move slug").error is None
    snaps.append(tree(w.root))
    return snaps


@pytest.fixture
def setup(tmp_path, server):
    w = workspace(tmp_path, server.url)
    a = agent(w)
    yield w, a
    a.close()
    w.close()


def test_each_undo_gives_back_the_tree_before_its_turn_byte_for_byte(setup, server):
    w, a = setup
    snaps = three_turns(a, w, server)
    assert all(r["ok"] for r in records(a.session, "tool")), records(a.session, "tool")
    assert snaps[1] != snaps[0] and snaps[2] != snaps[1] and snaps[3] != snaps[2]
    checkpoints = records(a.session, "checkpoint")
    # one per file and turn, before its first change (pkg/core.py edited twice in turn 2: kept once)
    assert [(c["path"], c["existed"]) for c in checkpoints] == [
        ("pkg/slug.py", False), ("tests/test_slug.py", False), ("pkg/core.py", True), ("pkg/slug.py", True),
        ("pkg/util.py", True), ("pkg/slug.py", True), ("pkg/text/slugs.py", False)]
    for expected in reversed(snaps[:-1]):
        done = slash.run(a, "/undo")
        assert done.ok and done.action == "files", done.text
        assert tree(w.root) == expected
    nothing = slash.run(a, "/undo")
    assert not nothing.ok and nothing.text.startswith("error: nothing to undo")
    assert [r["how"] for r in records(a.session, "rewind")] == ["undo"] * 3
    # the map follows the restored files: util.py is back, the moved module gone
    assert "def clean" in slash.run(a, "/map pkg/util.py").text


def test_rewind_to_turn_one_and_diff_of_the_session(setup, server):
    w, a = setup
    snaps = three_turns(a, w, server)
    diff = slash.run(a, "/diff")
    assert diff.ok
    heads = [line for line in diff.text.splitlines() if line[:1] not in "+- @\\" and ": +" in line]
    assert [h.split(":")[0] for h in heads] == ["pkg/core.py", "pkg/text/slugs.py", "pkg/util.py",
                                                "tests/test_slug.py"]  # pkg/slug.py: created, then moved away
    assert "-    return 1\n+    return 2" in diff.text and "+    return '_'.join(text.lower().split())" in diff.text
    done = slash.run(a, "/rewind 2 files")
    assert done.ok and tree(w.root) == snaps[1] and done.text.startswith("rewound to before user turn 2")
    done = slash.run(a, "/rewind 1 files")
    assert done.ok and tree(w.root) == snaps[0]
    assert slash.run(a, "/diff").text.startswith("no net change")
    for bad in ("/rewind", "/rewind x", "/rewind 9", "/rewind 1 everything"):
        assert not slash.run(a, bad).ok


def test_undo_refused_when_someone_else_changed_a_file_since(setup, server):
    w, a = setup
    snaps = three_turns(a, w, server)
    (w.root / "tests/test_slug.py").write_text("# mine now\n")  # the user edits a file turn 1 created
    slash.run(a, "/undo")  # turn 3 does not touch it: fine
    assert tree(w.root)["pkg/core.py"] == snaps[2]["pkg/core.py"]
    mine = tree(w.root)
    slash.run(a, "/undo")  # turn 2 neither
    refused = slash.run(a, "/undo")  # turn 1 created it: undoing would lose the user's text
    assert not refused.ok and "\n" not in refused.text
    assert refused.text.startswith("error: undo refused: tests/test_slug.py was changed by someone else")
    assert "/diff tests/test_slug.py" in refused.text
    assert (w.root / "tests/test_slug.py").read_text() == "# mine now\n"
    assert (w.root / "pkg/slug.py").exists()  # nothing restored, not even the other file of the turn
    shown = slash.run(a, "/diff tests/test_slug.py")
    assert "changed outside the agent" in shown.text and "+# mine now" in shown.text
    assert mine["pkg/util.py"] == tree(w.root)["pkg/util.py"]


def test_a_change_between_turns_refuses_a_rewind_across_it(setup, server):
    w, a = setup
    three_turns(a, w, server)
    # the user changes pkg/core.py, then the agent edits it again in a fourth turn
    (w.root / "pkg/core.py").write_text((w.root / "pkg/core.py").read_text() + "# user line\n")
    server.push(Reply(tool_calls=[read(w.root, "pkg/core.py"),
                                  ("edit_file", {"path": "pkg/core.py", "old": "return 2", "new": "return 3"})]),
                Reply(text="ok"))
    assert a.run("again").error is None
    assert slash.run(a, "/undo").ok  # turn 4 alone: back to the user's version
    assert (w.root / "pkg/core.py").read_text().endswith("# user line\n")
    refused = slash.run(a, "/rewind 2 files")
    assert not refused.ok and "pkg/core.py was changed by someone else" in refused.text


def test_conversation_rewind_across_a_compaction(tmp_path, server):
    knobs = {"compact_threshold": 4, "keep_recent": 2, "compact_model": "openai/test-model"}  # in turns
    w = workspace(tmp_path, server.url, memory=knobs)
    a = agent(w, compaction="sync")

    def policy(body):
        messages = body["messages"]
        if is_compaction(body):
            return Reply(text=summarize(messages))
        if messages[-1]["role"] == "user":
            word = messages[-1]["content"].split()[-1]
            return Reply(tool_calls=[("write_file", {"path": f"notes/{word}.txt", "content": f"{word}\n"})])
        return Reply(text="noted")

    server.dispatch.fn = policy
    before = tree(w.root)
    for word in ("alpha", "bravo", "charlie", "delta", "echo"):
        assert a.run(f"note {word}").error is None
    view = a.session.read()
    assert view.compacts(), "the knobs must make a compaction happen"
    covered = view.last_compact()["covers"]["last_id"]
    users = [r for r in view.records if r["type"] == "user"]
    assert any(r["id"] == covered for r in view.records[view.records.index(users[1]):])  # covers turn 2 on
    done = slash.run(a, "/rewind 2")
    assert done.ok and done.action == "rewound"
    assert set(tree(w.root)) == set(before) | {"notes/alpha.txt"}
    assert (w.root / "notes/alpha.txt").read_bytes() == b"alpha\n" and not (w.root / "notes/bravo.txt").exists()
    mark = len(server.requests)
    assert a.run("note foxtrot").error is None
    sent = [b for b in server.requests[mark:] if not is_compaction(b)][0]["messages"]
    told = [m["content"] for m in sent if is_update(m)]  # what the rewind restored is said once, at the end
    assert "The user rewound the files to before user turn 2: notes/bravo.txt" in told[-1]
    text = json.dumps([m for m in sent if not is_update(m)])
    assert "note alpha" in text and "note foxtrot" in text
    for gone in ("bravo", "charlie", "delta", "echo"):
        assert gone not in text, gone  # neither the turns nor a summary of them
    # the log lost nothing: every turn is still on disk
    raw = [r["content"] for r in records(a.session, "user")]
    assert raw == [f"note {x}" for x in ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")]
    server.dispatch.fn = None
    a.close()
    w.close()


def test_fork_copies_the_conversation_and_leaves_the_files(setup, server):
    w, a = setup
    snaps = three_turns(a, w, server)
    done = slash.run(a, "/fork 2")
    assert done.ok and done.action == "fork" and done.slug == "s-fork"
    fork = Session.open(w.paths, done.slug)
    users = [r["content"] for r in records(fork, "user")]
    assert users == ["add a slug helper and its test"]
    assert tree(w.root) == snaps[-1]
    whole = slash.run(a, "/fork")
    assert whole.slug == "s-fork-2" and len(records(Session.open(w.paths, whole.slug), "user")) == 3
    assert len(records(a.session, "user")) == 3  # the original is untouched


def test_cli_undo_rewind_diff_fork(setup, server):
    from workstation.cli import main

    w, a = setup
    snaps = three_turns(a, w, server)
    a.close()
    run = CliRunner()

    def cli(*args, code=0):
        result = run.invoke(main, ["-C", str(w.root), "session", *args])
        assert result.exit_code == code, result.output
        return result.output

    shown = json.loads(cli("diff", "s", "--json"))
    assert {c["path"] for c in shown["files"]} == {"pkg/core.py", "pkg/text/slugs.py", "pkg/util.py",
                                                    "tests/test_slug.py"}
    assert "pkg/core.py: +" in cli("diff", "s")
    undone = json.loads(cli("undo", "s", "--json"))
    assert undone["files"] == ["pkg/slug.py", "pkg/text/slugs.py", "pkg/util.py"] and undone["turn"] == 3
    assert tree(w.root) == snaps[2]
    (w.root / "pkg/core.py").write_text("changed\n")
    refused = run.invoke(main, ["-C", str(w.root), "session", "rewind", "s", "1"])
    assert refused.exit_code != 0
    assert str(refused.exception).startswith("rewind refused: pkg/core.py was changed by someone else")
    (w.root / "pkg/core.py").write_bytes(snaps[2]["pkg/core.py"][0])
    cli("rewind", "s", "1", "--files")
    assert tree(w.root) == snaps[0]
    forked = json.loads(cli("fork", "s", "--before", "2", "--json"))
    assert forked["slug"] == "s-fork"


def test_an_undo_from_another_process_mid_turn_makes_the_next_change_checkpoint_again(setup, server):
    from workstation.agent.checkpoints import Checkpoints

    w, a = setup
    turn = a.session.user("by hand")["id"]
    a.checkpoints.take(turn, ["pkg/util.py"])
    original = (w.root / "pkg/util.py").read_bytes()
    (w.root / "pkg/util.py").write_bytes(original + b"# first\n")
    a.session.tool("c1", "write_file", "ok", edits=[{"path": "pkg/util.py", "after": sha256_bytes(original + b"# first\n")}])
    Checkpoints(w.paths, Session.open(w.paths, "s")).undo()  # `workstation session undo s`, elsewhere
    assert (w.root / "pkg/util.py").read_bytes() == original
    a.checkpoints.take(turn, ["pkg/util.py"])  # the same turn changes it again: a new checkpoint
    assert len(records(a.session, "checkpoint")) == 2


def test_undo_waits_for_a_running_turn(setup, server):
    w, a = setup
    server.push(Reply(text="slow answer", delay_s=1.5))
    turn = threading.Thread(target=a.run, args=("take your time",))
    turn.start()
    try:
        deadline = time.monotonic() + 10
        while not a.running and time.monotonic() < deadline:
            time.sleep(0.01)
        refused = slash.run(a, "/undo")
        assert not refused.ok and refused.text == "error: /undo waits for the turn to end: stop it first (Escape)"
    finally:
        turn.join()


class Killed(BaseException):
    """The process dies here: nothing catches it, nothing after it runs."""


@pytest.mark.parametrize("call", [
    ("edit_file", {"path": "pkg/core.py", "old": "return 1", "new": "return 2"}),
    ("write_file", {"path": "pkg/new.py", "content": "x = 1\n"}),
    ("delete_file", {"path": "pkg/util.py"}),
    ("move_file", {"src": "pkg/util.py", "dst": "pkg/helpers/util.py"}),
], ids=lambda c: c[0])
def test_a_kill_between_a_tool_s_write_and_its_record_can_still_be_undone(tmp_path, server, call):
    """The tool changed the file and the process died before the tool record: the file holds bytes only
    the intent record names, and a new agent's /undo takes them back (it used to refuse them as someone
    else's change). A user's change made after that is still refused."""
    w = workspace(tmp_path, server.url)
    a = agent(w)
    before = tree(w.root)
    server.push(Reply(tool_calls=[read(w.root, "pkg/core.py"), call]))

    def die(*args, **kwargs):
        if args[1] == call[0]:
            raise Killed()
        return real_tool(*args, **kwargs)

    real_tool = a.session.tool
    a.session.tool = die
    with pytest.raises(Killed):
        a.run("change it")
    assert tree(w.root) != before  # the change landed...
    assert call[0] not in [r["name"] for r in records(a.session, "tool")]  # ...and no record says so
    assert records(a.session, "intent")
    a.close()  # appends nothing: the next process opens the session as the kill left it
    a2 = Agent(w, Session.open(w.paths, a.session.slug), compaction="off")
    done = slash.run(a2, "/undo")
    assert done.ok, done.text
    assert tree(w.root) == before
    a2.close()
    w.close()


def test_an_intent_never_makes_someone_else_s_change_undoable(setup, server):
    """An intent names only what the agent was about to write: other bytes in the file are refused."""
    w, a = setup
    server.push(Reply(tool_calls=[read(w.root, "pkg/core.py"),
                                  ("edit_file", {"path": "pkg/core.py", "old": "return 1", "new": "return 2"})]),
                Reply(text="Edited."))
    assert a.run("edit").error is None
    [intent] = records(a.session, "intent")
    assert intent["path"] == "pkg/core.py" and intent["after"] == sha256_bytes((w.root / "pkg/core.py").read_bytes())
    (w.root / "pkg/core.py").write_text("# the user's\n")
    refused = slash.run(a, "/undo")
    assert not refused.ok and "pkg/core.py was changed by someone else" in refused.text
    assert (w.root / "pkg/core.py").read_text() == "# the user's\n"


def test_a_refused_write_leaves_no_intent(setup, server):
    """The model aims its writes outside the workspace, at .git and at the state folder: each is refused
    before anything is recorded, so no intent can make those paths look like the agent's."""
    w, a = setup
    outside = w.root.parent / "outside.py"
    calls = [("write_file", {"path": "../outside.py", "content": "x\n"}),
             ("write_file", {"path": str(outside), "content": "x\n"}),
             ("write_file", {"path": ".git/config", "content": "[core]\n"}),
             ("write_file", {"path": ".workstation/config.toml", "content": "x = 1\n"}),
             ("delete_file", {"path": "../outside.py"}),
             ("move_file", {"src": "pkg/util.py", "dst": ".git/hooks/pre-commit"})]
    server.push(Reply(tool_calls=calls), Reply(text="Tried."))
    assert a.run("write where you should not").error is None
    assert not any(r["ok"] for r in records(a.session, "tool"))
    assert records(a.session, "intent") == [] and not outside.exists()
    assert (w.root / "pkg/util.py").exists()
