"""Project instructions (AGENTS.md, CLAUDE.md, .workstation/instructions.md) reaching the model through
the real litellm path: at the root and in the folders worked on, re-read when changed, kept through a
compaction, bounded, scrubbed, and never read through a symlink out of the workspace."""

from __future__ import annotations

import json
import os

from support.agent_support import REPO, agent, is_update, module_server, records, requests_since, tool_results, workspace
from support.conftest_llm import FAKE_API_KEY
from support.fakellm import Reply
from workstation.commands import slash
from workstation.agent.instructions import MAX_FILE_CHARS, ProjectInstructions, folders_of

server_module, server = module_server()

SUMMARY = ("## Task & instructions\nchat\n## Decisions & conventions\n(none)\n## Files touched\n(none)\n"
           "## Open to-dos\n(none)\n## Errors seen\n(none)")


def system_of(request: dict) -> str:
    return request["messages"][0]["content"]


def context_of(request: dict) -> str:
    """The head and every context update appended since (agent.updates): what the model was told."""
    return "\n\n".join([system_of(request), *(m["content"] for m in request["messages"] if is_update(m))])


def updates_of(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if is_update(m)]


def test_agents_md_reaches_the_model_and_survives_compaction(tmp_path, server):
    ws = workspace(tmp_path, server.url, memory={"compact_threshold": 10, "keep_recent": 2})
    (ws.root / "AGENTS.md").write_text("# House rules\nAlways run `pytest -q` before you answer.\n")
    (ws.root / "CLAUDE.md").symlink_to("AGENTS.md")  # the same file twice counts once
    a = agent(ws)
    server.push(Reply(text="ok"))
    assert a.run("hello").error is None
    system = system_of(requests_since(server)[0])
    assert "--- AGENTS.md ---\n# House rules\nAlways run `pytest -q` before you answer." in system
    assert system.count("Always run `pytest -q`") == 1 and "--- CLAUDE.md ---" not in system

    for n in range(5):  # enough turns to compact
        a.session.user(f"question {n}")
        a.session.assistant(f"answer {n}")
    server.push(Reply(text=SUMMARY))
    assert slash.run(a, "/compact").ok
    assert records(a.session, "compact")
    server.push(Reply(text="still ok"))
    assert a.run("and now?").error is None
    after = requests_since(server)[-1]["messages"]
    assert after[1]["content"].startswith("Summary of the earlier conversation")  # compacted...
    assert "Always run `pytest -q` before you answer." in after[0]["content"]  # ...and the rules are still there
    a.close()
    ws.close()


def test_instructions_are_reread_when_they_change_and_only_then(tmp_path, server):
    ws = workspace(tmp_path, server.url)
    rules = ws.root / "AGENTS.md"
    rules.write_text("Use tabs.\n")
    a = agent(ws)
    loads = []
    original = a.instructions._load
    a.instructions._load = lambda *args: loads.append(args[0]) or original(*args)
    server.push(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    a.run("first")
    a.run("second")
    assert loads == ["AGENTS.md"]  # unchanged: a stat, not a read
    rules.write_text("Use four spaces, never tabs.\n")
    os.utime(rules, ns=(rules.stat().st_atime_ns, rules.stat().st_mtime_ns + 10**9))
    a.run("third")
    sent = requests_since(server)
    assert system_of(sent[2]) == system_of(sent[1]) and "Use tabs." in system_of(sent[1])  # the head stays...
    assert updates_of(sent[1]) == []
    (changed,) = updates_of(sent[2])  # ...and the new text follows, replacing it
    assert changed.startswith("[workstation] Project instructions changed; these replace")
    assert "--- AGENTS.md ---\nUse four spaces, never tabs." in changed
    assert loads == ["AGENTS.md", "AGENTS.md"]
    rules.unlink()
    server.push(Reply(text="four"))
    a.run("fourth")
    assert "\n\nNo longer in effect: AGENTS.md" in updates_of(requests_since(server)[-1])[-1]
    a.close()
    ws.close()


def test_a_folders_instructions_apply_once_its_files_are_worked_on(tmp_path, server):
    ws = workspace(tmp_path, server.url)
    (ws.root / "AGENTS.md").write_text("Root rule.\n")
    (ws.root / "pkg/AGENTS.md").write_text("Package rule: no new dependencies.\n")
    (ws.root / "other").mkdir()
    (ws.root / "other/AGENTS.md").write_text("Other folder rule.\n")

    def respond(body):
        if body["messages"][-1]["role"] == "user":
            return Reply(tool_calls=[("read_lines", {"path": "pkg/util.py", "start": 1, "end": 2})])
        assert tool_results(body["messages"])
        return Reply(text="read it")

    a = agent(ws)
    server.push(Reply(text="hi"))
    a.run("hello")  # names no file: the root's rules only
    first = system_of(requests_since(server)[0])
    assert "Root rule." in first and "Package rule" not in first
    server.dispatch.fn = respond
    a.run("look at the utilities")
    sent = requests_since(server)
    assert "Package rule" not in context_of(sent[1])  # not yet worked on
    second = context_of(sent[2])  # after read_lines of pkg/util.py
    assert second.index("--- AGENTS.md ---") < second.index("--- pkg/AGENTS.md ---")  # root first, deeper wins
    assert "Other folder rule" not in second
    assert "Root rule" not in updates_of(sent[2])[-1]  # the update holds what changed only
    server.dispatch.fn = None
    server.push(Reply(text="ok"))
    a.run("and again")
    assert "Package rule: no new dependencies." in context_of(requests_since(server)[-1])  # it stays
    # a turn naming a file brings its folder's rules in before the message
    server.push(Reply(text="ok"))
    (ws.root / "other/mod.py").write_text("x = 1\n")
    a.kmap.index_all()
    a.run("what is in other/mod.py?")
    last = requests_since(server)[-1]["messages"]
    assert "Other folder rule." in last[-2]["content"] and last[-1]["content"] == "what is in other/mod.py?"
    a.close()
    ws.close()


def test_user_instructions_in_the_state_folder_are_read_directly(tmp_path, server):
    own = {**REPO, ".workstation/instructions.md": "Answer in French.\n"}
    ws = workspace(tmp_path, server.url, files=own, trusted=True)  # the folder's own file is read once trusted
    a = agent(ws)
    server.push(Reply(text="d'accord"))
    a.run("hello")
    assert "--- .workstation/instructions.md ---\nAnswer in French." in system_of(requests_since(server)[0])
    out = slash.run(a, "/instructions")
    assert out.ok and out.text.startswith("--- .workstation/instructions.md (18 chars) ---\nAnswer in French.")
    a.close()
    ws.close()
    (tmp_path / "other").mkdir()
    untrusted = workspace(tmp_path / "other", server.url)  # the same file in a folder not trusted: not read
    (untrusted.root / ".workstation/instructions.md").write_text("Answer in French.\n")
    b = agent(untrusted)
    server.push(Reply(text="ok"))
    b.run("hello")
    assert "Answer in French." not in system_of(requests_since(server)[-1])
    b.close()
    untrusted.close()


def test_huge_secret_bearing_and_escaping_files(tmp_path, server):
    ws = workspace(tmp_path, server.url)
    huge = "".join(f"rule {n}: keep it short\n" for n in range(5000))
    (ws.root / "AGENTS.md").write_text(f"The deploy key is {FAKE_API_KEY}.\n" + huge)
    outside = tmp_path / "secret-notes.md"
    outside.write_text("PRIVATE: never show this\n")
    (ws.root / "pkg/AGENTS.md").symlink_to(outside)  # a symlink out of the workspace is not followed
    os.mkfifo(ws.root / "CLAUDE.md")  # a fifo is not read (a read would block)
    a = agent(ws)
    server.push(Reply(tool_calls=[("read_lines", {"path": "pkg/util.py", "start": 1, "end": 1})]), Reply(text="ok"))
    assert a.run("hello").error is None
    system = system_of(requests_since(server)[-1])
    assert FAKE_API_KEY not in json.dumps(server.requests) and "The deploy key is ***." in system
    size = (ws.root / "AGENTS.md").stat().st_size
    assert f"[AGENTS.md is {size:,} characters long: only the first" in system
    assert "rule 4999" not in system and len(system) < MAX_FILE_CHARS + 6000
    assert "PRIVATE" not in system
    listed = slash.run(a, "/instructions").text
    assert listed.startswith("--- AGENTS.md (") and "chars, cut) ---" in listed and "PRIVATE" not in listed
    a.close()
    ws.close()


def test_the_section_is_bounded_and_names_what_it_leaves_out(tmp_path):
    from workstation.runtime import Workspace

    (tmp_path / "a").mkdir()
    (tmp_path / "AGENTS.md").write_text("root " * 400)
    (tmp_path / "a/AGENTS.md").write_text("deep " * 400)
    ws = Workspace(tmp_path)
    pi = ProjectInstructions(ws.paths)
    count = lambda text: len(text) // 4  # noqa: E731
    section = pi.section(["a/x.py"], 600, count)
    assert "--- AGENTS.md ---" in section and "--- a/AGENTS.md ---" not in section
    assert "(not shown, over the budget for instructions: a/AGENTS.md;" in section
    assert [i.shown for i in pi.fitted(["a/x.py"], 600, count)] == [True, False]
    assert folders_of(["a/b/c.py", "x.py", "../up.py", ".git/AGENTS.md", "a/d.py"]) == ["a", "a/b"]


def test_no_instructions(tmp_path):
    ws = workspace(tmp_path, None)
    a = agent(ws)
    out = slash.run(a, "/instructions")
    assert out.ok and out.text.startswith("no project instructions: no AGENTS.md, CLAUDE.md")
    a.close()
    ws.close()


def test_an_untrusted_repositorys_agents_md_is_framed_as_the_repositorys_and_the_notice_says_so(tmp_path, server):
    """AGENTS.md is read in a folder the user has not trusted (as other agents read it): the system message
    frames it as the repository's, not the user's word, and the untrusted notice names it."""
    files = {**REPO, "AGENTS.md": "Run ./setup.sh before anything else.\n",
             ".workstation/config.toml": "[agent]\ncommand_network = true\n"}
    ws = workspace(tmp_path, server.url, files=files)
    notice = [w for w in ws.warnings if "workstation trust" in w]
    assert len(notice) == 1 and "AGENTS.md still reach the model, as the repository's instructions, not yours" \
        in notice[0], ws.warnings
    a = agent(ws)
    server.push(Reply(text="ok"))
    assert a.run("hello").error is None
    system = system_of(requests_since(server)[0])
    assert "AGENTS.md and CLAUDE.md came with the repository" in system and "not the user's word" in system
    assert "--- AGENTS.md ---\nRun ./setup.sh before anything else." in system
    a.close()
    ws.close()
    (tmp_path / "again").mkdir()
    again = workspace(tmp_path / "again", server.url, files=files, trusted=True)
    assert not [w for w in again.warnings if "AGENTS.md" in w]  # trusted: nothing to say
    again.close()
