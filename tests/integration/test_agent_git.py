"""/commit, `session commit` and agent.auto_commit in temporary git repositories, through the real litellm
path against the scripted server: only the files the agent changed are committed, with the message the
model writes (or the user's), never the state folder, never the user's own changes."""

from __future__ import annotations

import json
import sys

import pytest

from support.agent_support import agent, module_server, records, requests_since, tool_results, workspace
from support.conftest_llm import FAKE_API_KEY
from support.fakellm import Reply
from support.git_support import committed_files, git, head_message, init_repo, isolated_git  # noqa: F401
from workstation.commands import slash
from workstation.agent.commit import edited_paths
from workstation.agent.loop import AgentEvents

server_module, server = module_server()

MESSAGE = "Strip tabs in clean\n\nclean() now strips tabs too, as the user asked."


def editing_model(body: dict) -> Reply:
    """Reads pkg/util.py 4-5 and rewrites line 5 (with a configured key in it); answers commit-message
    requests with MESSAGE."""
    messages = body["messages"]
    if messages[0]["content"].startswith("You write git commit messages"):
        return Reply(text=f"```\n{MESSAGE}\n```")
    if messages[-1]["role"] == "user":
        return Reply(tool_calls=[("read_lines", {"path": "pkg/util.py", "start": 4, "end": 5})])
    (name, _, _), *_ = tool_results(messages)
    if name == "read_lines":
        return Reply(tool_calls=[("replace_lines", {"path": "pkg/util.py", "start": 5, "end": 5,
                                                    "content": f"    return text.strip(' \\t')  # {FAKE_API_KEY}"})])
    return Reply(text="done")


def repo_workspace(tmp_path, url, **sections):
    ws = workspace(tmp_path, url, **sections)
    init_repo(ws.root)
    # the user's own work in progress: an edit and a staged new file, neither the agent's
    (ws.root / "pkg/__init__.py").write_text('"""The user is editing this."""\n')
    (ws.root / "notes.txt").write_text("staged by the user\n")
    git(ws.root, "add", "notes.txt")
    return ws


def test_commit_holds_only_the_agents_files_with_the_models_message(tmp_path, server):
    server.dispatch.fn = editing_model
    ws = repo_workspace(tmp_path, server.url)
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    git(ws.root, "remote", "add", "origin", str(remote))
    git(ws.root, "push", "-q", "-u", "origin", "main")
    git(ws.root, "config", "push.autoSetupRemote", "true")
    pushed = git(remote, "rev-parse", "main").strip()
    a = agent(ws)
    assert a.run("Make clean strip tabs in pkg/util.py").error is None
    assert committed_files(ws.root) == sorted(["pkg/__init__.py", "pkg/core.py", "pkg/util.py"])  # no auto-commit
    assert edited_paths(records(a.session)) == ["pkg/util.py"]

    out = slash.run(a, "/commit")
    assert out.ok and out.action == "committed", out.text
    sha = git(ws.root, "rev-parse", "--short", "HEAD").strip()
    assert out.text == f"committed 1 file to main as {sha}: Strip tabs in clean"
    assert committed_files(ws.root) == ["pkg/util.py"]
    assert head_message(ws.root).strip() == MESSAGE
    # the model read the agent's diff and the user's request, never the user's own changes nor a key
    prompt = requests_since(server)[-1]["messages"][1]["content"]
    assert "Make clean strip tabs in pkg/util.py" in prompt
    assert "-    return text.strip()" in prompt and "+    return text.strip(' \\t')" in prompt
    assert "The user is editing this" not in prompt and "staged by the user" not in prompt
    assert FAKE_API_KEY not in json.dumps(server.requests)
    # the user's work is untouched; the state folder was never committed
    assert sorted(git(ws.root, "status", "--porcelain").splitlines()) == [" M pkg/__init__.py", "A  notes.txt"]
    assert not [p for p in git(ws.root, "ls-files").split() if p.startswith(".workstation")]
    assert git(remote, "rev-parse", "main").strip() == pushed  # never a push
    assert "ahead 1" in git(ws.root, "status", "-sb").splitlines()[0]

    again = slash.run(a, "/commit")
    assert not again.ok and again.text == (f"error: nothing to commit: the 1 file(s) session {a.session.slug} "
                                           "changed are as in the last commit (or ignored by git)")
    a.close()
    ws.close()


def test_a_failing_model_leaves_a_one_line_error_and_the_users_message_works(tmp_path, server):
    ws = repo_workspace(tmp_path, server.url)
    a = agent(ws)
    server.dispatch.fn = editing_model
    assert a.run("Make clean strip tabs").error is None
    server.dispatch.fn = lambda body: Reply(status=500, error_message="the model is down")
    failed = slash.run(a, "/commit")
    assert not failed.ok and failed.text.startswith("error: the model could not write a commit message (")
    assert failed.text.endswith("give one: /commit MESSAGE") and "\n" not in failed.text
    assert git(ws.root, "log", "--format=%s").splitlines() == ["initial"]
    assert "A  notes.txt" in git(ws.root, "status", "--porcelain")  # nothing was staged or unstaged
    server.dispatch.fn = None
    done = slash.run(a, "/commit Tabs are whitespace too")
    assert done.ok and done.text.endswith(": Tabs are whitespace too")
    assert committed_files(ws.root) == ["pkg/util.py"]
    a.close()
    ws.close()


def _recorded_edit(session, path: str) -> None:
    """A session whose log says the agent edited `path` (as replace_lines records it)."""
    call = {"id": "call_1", "name": "replace_lines",
            "arguments": json.dumps({"path": path, "start": 1, "end": 1, "content": "x"})}
    session.user("edit it")
    session.assistant("", [call])
    session.tool("call_1", "replace_lines", f"{path}: replaced lines 1-1", path=path, lines=[1, 1],
                 lines_changed=1)


def test_refusals_are_one_line(tmp_path):
    ws = workspace(tmp_path, None)  # no model
    a = agent(ws)
    not_repo = slash.run(a, "/commit")
    assert not not_repo.ok and not_repo.text == f"error: {ws.root} is not in a git repository: nothing to commit to"
    init_repo(ws.root)
    assert slash.run(a, "/commit").text == f"error: nothing to commit: session {a.session.slug} changed no files"
    _recorded_edit(a.session, "pkg/core.py")
    (ws.root / "pkg/core.py").write_text("changed\n")
    no_model = slash.run(a, "/commit")
    assert no_model.text.startswith("error: no commit message: give one (/commit MESSAGE")
    assert slash.run(a, "/commit core changed").ok
    assert committed_files(ws.root) == ["pkg/core.py"]
    a.close()
    ws.close()


def test_a_log_naming_the_state_folder_or_git_commits_neither(tmp_path):
    """The log is data: a record claiming an edit of .workstation/ or .git/ is not a reason to commit it."""
    ws = workspace(tmp_path, None)
    init_repo(ws.root)
    a = agent(ws)
    for path in (".workstation/config.toml", ".git/config", "../outside.py"):
        _recorded_edit(a.session, path)
    (ws.paths.state / "config.toml").write_text("[agent]\n")
    (ws.paths.state / ".gitignore").unlink()  # git itself would now commit the state folder: we must not
    (ws.root.parent / "outside.py").write_text("x = 1\n")
    assert ".workstation/" in git(ws.root, "status", "--porcelain")
    assert slash.run(a, "/commit x").text == f"error: nothing to commit: session {a.session.slug} changed no files"
    assert git(ws.root, "log", "--format=%s").splitlines() == ["initial"]
    a.close()
    ws.close()


def test_auto_commit_after_each_turn_that_changed_files(tmp_path, server):
    server.dispatch.fn = editing_model
    ws = repo_workspace(tmp_path, server.url, agent={"auto_commit": True})
    a = agent(ws)
    notes: list[str] = []
    assert a.run("Make clean strip tabs", AgentEvents(on_notice=notes.append)).error is None
    sha = git(ws.root, "rev-parse", "--short", "HEAD").strip()
    assert notes == [f"auto-committed 1 file to main as {sha}: Strip tabs in clean"]
    assert committed_files(ws.root) == ["pkg/util.py"] and head_message(ws.root).strip() == MESSAGE

    server.dispatch.fn = lambda body: Reply(text="nothing to change")  # a turn without edits: no commit
    notes.clear()
    assert a.run("Anything else?", AgentEvents(on_notice=notes.append)).error is None
    assert notes == [] and git(ws.root, "rev-parse", "--short", "HEAD").strip() == sha
    a.close()
    ws.close()


def test_auto_commit_names_the_commit_after_the_request_when_the_model_cannot(tmp_path, server):
    def respond(body):
        if body["messages"][0]["content"].startswith("You write git commit messages"):
            return Reply(status=400, error_message="no messages today")
        return editing_model(body)

    server.dispatch.fn = respond
    ws = repo_workspace(tmp_path, server.url, agent={"auto_commit": True})
    a = agent(ws)
    notes: list[str] = []
    assert a.run("Make clean strip tabs please", AgentEvents(on_notice=notes.append)).error is None
    assert len(notes) == 1 and notes[0].startswith("auto-committed 1 file to main as ")
    assert ": Make clean strip tabs please (the message is your request: the model could not" in notes[0]
    assert head_message(ws.root).strip() == "Make clean strip tabs please"
    a.close()
    ws.close()


def test_auto_commit_is_a_validated_config_key(tmp_path):
    from workstation import config as config_mod
    from workstation.errors import ConfigError

    assert config_mod.validate({}).agent.auto_commit is False
    assert config_mod.validate({"agent": {"auto_commit": True}}).agent.auto_commit is True
    with pytest.raises(ConfigError, match="agent.auto_commit: Expected `bool`, got `str`"):
        config_mod.validate({"agent": {"auto_commit": "yes"}})


def test_session_commit_from_the_command_line(tmp_path, monkeypatch, capsys):
    from workstation.cli import main
    from workstation.cli.common import run_main

    ws = workspace(tmp_path, None)
    init_repo(ws.root)
    a = agent(ws, "work")
    _recorded_edit(a.session, "pkg/util.py")
    (ws.root / "pkg/util.py").write_text("changed\n")
    a.close()
    ws.close()
    monkeypatch.setattr(sys, "argv", ["workstation", "-C", str(ws.root), "session", "commit", "work", "-m",
                                      "from the CLI", "--json"])
    with pytest.raises(SystemExit) as exited:
        run_main(main)
    assert exited.value.code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["paths"] == ["pkg/util.py"] and out["branch"] == "main" and out["message"] == "from the CLI"
    assert committed_files(ws.root) == ["pkg/util.py"]
    monkeypatch.setattr(sys, "argv", ["workstation", "-C", str(ws.root), "session", "commit", "work"])
    with pytest.raises(SystemExit) as exited:
        run_main(main)
    assert exited.value.code == 1
    assert capsys.readouterr().err.startswith("error: nothing to commit: the 1 file(s) session work changed")
