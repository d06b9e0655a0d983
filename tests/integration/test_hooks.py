"""Hooks written for Claude Code run here unchanged (workstation.hooks), through the real agent loop and the
scripted model server.

The scripts are written with `cchooks` (PyPI), a published library for Claude Code hooks whose contexts
refuse a payload that lacks a field Claude Code sends, so they check our payloads as much as our handling of
their answers. The settings files validate against the hooks block of SchemaStore's claude-code-settings.json
(tests/fixtures/hooks, with its source)."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

import jsonschema
import pytest

from support.agent_support import agent, module_server, workspace
from support.fakellm import Reply
from workstation import config, trust
from workstation.paths import user_dir
from workstation.runtime import Workspace

server_module, server = module_server()
SCHEMA = json.loads((Path(__file__).parents[1] / "fixtures" / "hooks" /
                     "claude-code-settings.hooks.schema.json").read_text())


def script(folder: Path, name: str, body: str) -> str:
    """A hook script in `folder`, run with this interpreter (where cchooks is installed); its command line."""
    path = folder / name
    path.write_text(textwrap.dedent(body))
    return f"{sys.executable} {path}"


def settings(path: Path, hooks: dict) -> dict:
    data = {"hooks": hooks}
    jsonschema.validate(data, SCHEMA)  # what Claude Code's own settings schema accepts
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return data


def texts(body: dict) -> str:
    return "\n".join(str(m.get("content") or "") for m in body["messages"])


GUARD = """
    from cchooks import create_context, PreToolUseContext
    c = create_context()
    assert isinstance(c, PreToolUseContext)
    if c.tool_name == "Bash" and "rm -rf" in c.tool_input.get("command", ""):
        c.output.exit_block("rm -rf is not allowed here: delete files one by one")
    c.output.exit_success()
"""
FORMATTER = """
    import pathlib
    from cchooks import create_context, PostToolUseContext
    c = create_context()
    assert isinstance(c, PostToolUseContext)
    path = pathlib.Path(c.tool_input["file_path"])
    path.write_text("\\n".join(line.rstrip() for line in path.read_text().splitlines()) + "\\n")
    c.output.exit_success()
"""
PROMPT_CONTEXT = """
    from cchooks import create_context, UserPromptSubmitContext
    c = create_context()
    assert isinstance(c, UserPromptSubmitContext)
    c.output.add_context("the release branch is frozen until Friday")
"""
START_CONTEXT = """
    from cchooks import create_context, SessionStartContext
    c = create_context()
    assert isinstance(c, SessionStartContext)
    c.output.add_context(f"started from {c.source}: run the fast tests only")
"""
STOP_ONCE = """
    from cchooks import create_context, StopContext
    c = create_context()
    assert isinstance(c, StopContext)
    if not c.stop_hook_active:
        c.output.prevent("you did not run the tests: run them before you stop")
    else:
        c.output.allow()
"""


def test_claude_code_hook_scripts_run_unchanged(tmp_path, server):
    hooks_dir = tmp_path / "hooks"
    hooks_dir.mkdir()
    ws = workspace(tmp_path, server.url)
    settings(user_dir() / "hooks.json", {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": script(hooks_dir, "g.py", GUARD)}]}],
        "PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command",
                                                             "command": script(hooks_dir, "f.py", FORMATTER),
                                                             "timeout": 20}]}],
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": script(hooks_dir, "p.py", PROMPT_CONTEXT)}]}],
        "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command",
                                                           "command": script(hooks_dir, "s.py", START_CONTEXT)}]}],
        "Stop": [{"hooks": [{"type": "command", "command": script(hooks_dir, "stop.py", STOP_ONCE)}]}],
    })
    server.push(Reply(tool_calls=[("run_command", {"cmd": "rm -rf pkg"})]),
                Reply(tool_calls=[("write_file", {"path": "notes.txt", "content": "one   \ntwo\t\n"})]),
                Reply("done"),
                Reply("ran them: all pass"))
    a = agent(ws)
    try:
        result = a.run("tidy up the notes")
    finally:
        a.close()
    assert result.error is None, result.error
    bodies = server.requests[server.mark:]
    assert len(bodies) == 4
    first = texts(bodies[0])
    assert "the release branch is frozen until Friday" in first  # UserPromptSubmit's context
    assert "started from startup: run the fast tests only" in first  # SessionStart's
    refused = [m for m in bodies[1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert "rm -rf is not allowed here" in refused  # the guard's stderr reached the model
    assert (ws.root / "pkg").is_dir()  # and the command never ran
    assert (ws.root / "notes.txt").read_text() == "one\ntwo\n"  # formatted before the next step
    assert "you did not run the tests" in texts(bodies[3])  # Stop asked for more, once
    kinds = [e["name"] for e in a.memory.episodic.query(session=a.session.slug, limit=200) if e["type"] == "hook"]
    assert {"PreToolUse", "PostToolUse", "UserPromptSubmit", "SessionStart", "Stop"} <= set(kinds)


def test_a_hook_that_hangs_crashes_or_prints_garbage_is_one_line_and_the_turn_goes_on(tmp_path, server):
    ws = workspace(tmp_path, server.url)
    settings(user_dir() / "hooks.json", {"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": "sleep 30; echo late", "timeout": 1},  # its child holds the output
        {"type": "command", "command": "echo boom >&2; exit 3"},
        {"type": "command", "command": "echo '{not json'"},
    ]}]})
    server.push(Reply("fine"))
    a = agent(ws)
    started = time.monotonic()
    try:
        result = a.run("hello")
    finally:
        a.close()
    assert time.monotonic() - started < 15  # the hung hook's whole process group went at its limit
    assert result.error is None and result.text == "fine"
    notices = [r["content"] for r in a.session.read().records if r.get("notice") == "hook"]
    assert any("gave no answer within 1 s" in n for n in notices), notices
    assert any("failed (exit 3): boom" in n for n in notices), notices
    assert len(notices) == 2  # the garbage printed on exit 0 is context for the model, no error
    assert "{not json" in texts(server.requests[-1])


def test_a_project_hook_runs_only_once_the_folder_is_trusted(tmp_path, server):
    canary = tmp_path / "canary"
    ws = workspace(tmp_path, server.url)
    settings(ws.paths.state / "hooks.json", {"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": f"touch {canary}"}]}]})
    server.push(Reply("untrusted"))
    a = agent(ws)
    try:
        a.run("hello")
    finally:
        a.close()
    assert not canary.exists(), "a project hook ran in an untrusted folder"

    verdict, _ = config.inspect(ws.root)
    trust.grant(verdict.root, verdict.digest)
    from workstation.runtime import Workspace

    again = Workspace(ws.root, overrides={"model": {"name": a.model_name, "api_base": server.url,
                                                    "api_key_env": "WS_TEST_KEY", "context_window": 32768},
                                          "lsp": {"enabled": False}})
    server.push(Reply("trusted"))
    b = agent(again, slug="t")
    try:
        b.run("hello")
    finally:
        b.close()
        again.close()
    assert canary.exists()


def test_a_claude_code_settings_file_is_read_only_when_asked(tmp_path, server, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    marker = tmp_path / "ran"
    settings(home / ".claude" / "settings.json", {"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": f"touch {marker}"}]}], "StopFailure": [{"hooks": [
            {"type": "command", "command": "true"}]}]})
    for claude, expected in ((False, False), (True, True)):
        (tmp_path / f"ws-{claude}").mkdir()
        ws = workspace(tmp_path / f"ws-{claude}", server.url, hooks={"claude": claude})
        assert not ws.hooks.problems  # an event we do not have (StopFailure) is left out without a word
        server.push(Reply("ok"))
        a = agent(ws)
        try:
            a.run("hello")
        finally:
            a.close()
        assert marker.exists() is expected
        lines = ws.hooks.describe()
        assert bool(lines) is expected and (not lines or "settings.json" in lines[0])


def test_bad_hook_files_are_named_and_the_rest_runs(tmp_path):
    from workstation.hooks import Hooks
    from workstation.paths import Paths

    (tmp_path / "repo").mkdir()
    (user_dir() / "hooks.json").write_text(json.dumps({"hooks": {
        "NoSuchEvent": [], "Stop": "nope", "PreToolUse": [{"matcher": 3, "hooks": []},
                                                           {"hooks": [{"type": "command", "command": "true"}]}]}}))
    found = Hooks.load(Paths.for_root(tmp_path / "repo"))
    assert len(found.hooks) == 1 and len(found.problems) == 3, found.problems
    (user_dir() / "hooks.json").write_text("{ broken")
    found = Hooks.load(Paths.for_root(tmp_path / "repo"))
    assert not found.hooks and "ignored" in found.problems[0]


@pytest.mark.parametrize("name,claude", [("run_command", "Bash"), ("edit_file", "Edit"), ("replace_lines", "Edit"),
                                         ("write_file", "Write"), ("read_lines", "Read"), ("grep", "Grep")])
def test_tool_names_and_inputs_speak_claude_codes_terms(tmp_path, name, claude):
    from workstation.hooks import Hook, tool_input, tool_names

    assert tool_names(name)[0] == claude
    assert Hook("PreToolUse", "Edit|Write|Bash|Read|Grep", "true", 1, "x").matches(*tool_names(name))
    fields = tool_input(name, {"path": "a.py", "cmd": "ls", "old": "x", "new": "y", "start": 3, "end": 5}, tmp_path)
    assert fields["file_path"] == str(tmp_path / "a.py") and fields["command"] == "ls"


PRE_COMPACT_BLOCK = """
    from cchooks import create_context, PreCompactContext
    c = create_context()
    assert isinstance(c, PreCompactContext)
    c.output.exit_block(f"no {c.trigger} compaction during the release")
"""
AFTER_COMPACT = """
    from cchooks import create_context, SessionStartContext
    c = create_context()
    assert isinstance(c, SessionStartContext) and c.source == "compact"
    c.output.add_context("after the summary: the release branch is still frozen")
"""
SUMMARY = "\n".join(f"## {title}\n(none)" for title in ("Task & instructions", "Decisions & conventions",
                                                         "Files touched", "Open to-dos", "Errors seen"))


def test_precompact_blocks_and_sessionstart_on_compact_reaches_the_next_request(tmp_path, server):
    hooks_dir = tmp_path / "hooks"
    hooks_dir.mkdir()
    ws = workspace(tmp_path, server.url)
    blocker = {"PreCompact": [{"matcher": "manual", "hooks": [
        {"type": "command", "command": script(hooks_dir, "pc.py", PRE_COMPACT_BLOCK)}]}]}
    after = {"SessionStart": [{"matcher": "compact", "hooks": [
        {"type": "command", "command": script(hooks_dir, "sc.py", AFTER_COMPACT)}]}]}
    settings(user_dir() / "hooks.json", {**blocker, **after})
    from workstation.commands import slash

    server.push(Reply("one"), Reply("two"))
    a = agent(ws)
    try:
        a.run("first")
        a.run("second")
        refused = slash.run(a, "/compact 1")
        assert not refused.ok and "no manual compaction during the release" in refused.text
        assert not any(r["type"] == "compact" for r in a.session.read().records)  # no compaction happened
    finally:
        a.close()

    settings(user_dir() / "hooks.json", after)
    again = Workspace(ws.root, overrides={"model": {"name": a.model_name, "api_base": server.url,
                                                    "api_key_env": "WS_TEST_KEY", "context_window": 32768},
                                          "lsp": {"enabled": False}})
    server.push(Reply(SUMMARY), Reply("three"))
    b = agent(again, slug="s2")
    try:
        b.session.append_records(r for r in a.session.read().records if r["type"] in ("user", "assistant"))
        done = slash.run(b, "/compact 1")
        assert done.ok, done.text
        b.run("third")
    finally:
        b.close()
        again.close()
    assert "after the summary: the release branch is still frozen" in texts(server.requests[-1])
