"""Permission modes (agent.modes) through the real agent loop and litellm path to the scripted server: plan mode
never writes or runs anything through any tool until the plan is approved; ask asks before an edit; auto never
asks and never reaches the network; a workspace config may lower the mode, never raise it."""

from __future__ import annotations

import json
import socket
import sys
import threading
import warnings
from pathlib import Path

import pytest

from support.agent_support import agent, module_server, records, requests_since, tool_results, workspace
from support.fakellm import Reply
from workstation import sandbox
from workstation.host import Host
from workstation.sandbox import Policy

server_module, server = module_server()

FIXTURE = str(Path(__file__).parents[1] / "support" / "mcp_fixture_server.py")
UTIL = "pkg/util.py"


def never(request):
    raise AssertionError(f"asked: {request}")


def full_sandbox() -> None:
    if not sandbox.status(Policy(".")).full:
        pytest.skip(sandbox.status(Policy(".")).line)


def test_plan_mode_refuses_every_writing_tool_then_an_approved_plan_is_carried_out(tmp_path, server):
    ws = workspace(tmp_path, server.url, agent={"permission_mode": "plan", "subagent_writes": True,
                                                "command_allow": ["touch"]},
                   mcp={"servers": {"fx": {"command": sys.executable, "args": [FIXTURE],
                                           "env": {"PIDFILE": str(tmp_path / "fx.pid")}, "trusted": True}}})
    before = {p: (ws.root / p).read_bytes() for p in ("pkg/util.py", "pkg/core.py")}
    attempts = [("replace_lines", {"path": UTIL, "start": 1, "end": 1, "content": "# pwned\n"}),
                ("write_file", {"path": "new.py", "content": "x = 1\n"}),
                ("run_command", {"cmd": "touch ran"}),
                ("fx__echo", {"text": "hi"}),
                ("task", {"prompt": "write a file", "write": True})]
    child = [Reply(tool_calls=[("write_file", {"path": "child.py", "content": "x = 2\n"})]), Reply(text="could not")]
    parent = [Reply(tool_calls=[("read_lines", {"path": UTIL, "start": 1, "end": 3})]),
              *[Reply(tool_calls=[call]) for call in attempts],
              Reply(text="Plan:\n1. In pkg/util.py, add a docstring to clean.")]
    queues = {True: child, False: parent}

    def is_child(body):
        return any(m["role"] == "user" and "You are a sub-agent" in str(m.get("content")) for m in body["messages"])

    def respond(body):
        return queues[is_child(body)].pop(0)

    server.dispatch.fn = respond
    host = Host.open(ws)
    hosted = host.session(agent(ws).session, approve=never)
    try:
        assert hosted.mode == "plan"
        result = hosted.run("Add a docstring to clean")
        sent = [body for body in requests_since(server) if not is_child(body)]
        # the model was told it is in plan mode, and read why each call was refused
        first = sent[0]["messages"]
        assert any("[permission mode: plan]" in str(m.get("content")) for m in first)
        refusals = [tool_results(body["messages"])[0] for body in sent[2:7]]
        assert [name for name, _, _ in refusals] == ["replace_lines", "write_file", "run_command", "fx__echo", "task"]
        for name, _, text in refusals[:4]:
            assert text.startswith(f"error: {name} is refused: plan mode"), text
        child_sent = [body for body in requests_since(server) if is_child(body)]
        (name, _, text), = tool_results(child_sent[1]["messages"])  # the sub-agent shares the mode
        assert name == "write_file" and text.startswith("error: write_file is refused: plan mode"), text
        assert result.plan == "Plan:\n1. In pkg/util.py, add a docstring to clean." and result.error is None
        assert {p: (ws.root / p).read_bytes() for p in before} == before
        assert not any((ws.root / p).exists() for p in ("new.py", "ran", "child.py"))
        assert not (tmp_path / "fx.pid").exists() or all(
            r.get("name") != "fx__echo" or r["ok"] is False for r in records(hosted.session, "tool"))
        # approved (as the user edited it): back to the mode before plan, and the edit applies without asking
        server.dispatch.fn = None
        server.push(Reply(tool_calls=[("replace_lines", {"path": UTIL, "start": 1, "end": 1,
                                                          "content": '"""Utilities, documented."""\n'})]),
                    Reply(text="done"))
        done = hosted.approve_plan("1. document pkg/util.py", edited=True)
        assert hosted.mode == "edits" and done.error is None and done.plan is None
        assert (ws.root / UTIL).read_text().startswith('"""Utilities, documented."""')
        last = requests_since(server)[-1]["messages"]
        assert any("approved this plan, as they edited it" in str(m.get("content")) for m in last)
        assert any("[permission mode: edits]" in str(m.get("content")) for m in last)
    finally:
        hosted.close()
        host.close()


def test_a_rejected_plan_keeps_plan_mode_and_the_model_hears_it(tmp_path, server):
    ws = workspace(tmp_path, server.url)
    host = Host(ws)
    hosted = host.session(agent(ws).session)
    assert hosted.set_mode("plan") == "plan"
    server.push(Reply(text="Plan: rewrite everything"), Reply(text="Plan: a smaller change"))
    assert hosted.run("improve it").plan == "Plan: rewrite everything"
    assert hosted.reject_plan() == "plan"
    assert hosted.run("smaller, please").plan == "Plan: a smaller change"
    assert any("rejected your plan" in str(m.get("content")) for m in requests_since(server)[-1]["messages"])
    hosted.close()


def test_ask_mode_asks_before_an_edit_and_a_refusal_changes_nothing(tmp_path, server):
    ws = workspace(tmp_path, server.url, agent={"permission_mode": "ask"})
    asked, answers = [], [False, True]
    a = agent(ws, approve=lambda request: asked.append(request) or answers.pop(0))
    edit = ("replace_lines", {"path": UTIL, "start": 1, "end": 1, "content": '"""Edited."""\n'})
    read = Reply(tool_calls=[("read_lines", {"path": UTIL, "start": 1, "end": 3})])
    server.push(read, Reply(tool_calls=[edit]), Reply(text="refused"), Reply(tool_calls=[edit]), Reply(text="done"))
    original = (ws.root / UTIL).read_text()
    a.run("edit it")
    assert (ws.root / UTIL).read_text() == original
    a.run("again, I will allow it")
    assert (ws.root / UTIL).read_text().startswith('"""Edited."""')
    assert [(r.action, r.tool) for r in asked] == [("edit", "replace_lines")] * 2
    assert asked[0].subject == "replace_lines: pkg/util.py 1-1" and "ask" in asked[0].reason
    assert "make this edit" in asked[0].question() and '| """Edited."""' in asked[0].question()
    (_, _, refused), = tool_results(requests_since(server)[2]["messages"])
    assert refused == "error: you refused: 'replace_lines: pkg/util.py 1-1' (permission mode ask: every edit asks)"
    a.close()


def test_auto_mode_never_asks_and_never_reaches_the_network(tmp_path, server):
    full_sandbox()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    connected = threading.Event()

    def accept():
        listener.settimeout(30)
        try:
            listener.accept()
            connected.set()
        except OSError:
            pass

    threading.Thread(target=accept, daemon=True).start()
    # the user's config lets commands reach the network; auto still keeps it off
    ws = workspace(tmp_path, server.url, agent={"permission_mode": "auto", "command_network": True})
    a = agent(ws, approve=never)
    probe = (f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); "
             "print('CON' + 'NECTED')\"")
    server.push(Reply(tool_calls=[("run_command", {"cmd": "touch made-by-auto"})]),
                Reply(tool_calls=[("write_file", {"path": "auto.py", "content": "x = 1\n"})]),
                Reply(tool_calls=[("run_command", {"cmd": probe})]),
                Reply(text="done"))
    result = a.run("go")
    assert result.error is None
    assert (ws.root / "made-by-auto").exists() and (ws.root / "auto.py").read_text() == "x = 1\n"
    (_, _, probed), = tool_results(requests_since(server)[3]["messages"])
    assert "CONNECTED" not in probed and "[exit 1" in probed and not connected.is_set()
    ran = [r for r in records(a.session, "tool") if r["name"] == "run_command"]
    assert len(ran) == 2
    a.close()
    # the control: the same probe, approved in edits mode with the user's command_network, does connect
    b = agent(ws, "control", approve=lambda request: True)
    b.set_mode("edits")
    server.push(Reply(tool_calls=[("run_command", {"cmd": probe})]), Reply(text="done"))
    b.run("go")
    (_, _, probed), = tool_results(requests_since(server)[-1]["messages"])
    assert "CONNECTED" in probed and connected.wait(10)
    b.close()
    listener.close()


def test_auto_mode_refuses_without_asking_what_the_sandbox_cannot_hold(tmp_path, server):
    ws = workspace(tmp_path, server.url, agent={"permission_mode": "auto", "sandbox": "off"},
                   mcp={"servers": {"fx": {"command": sys.executable, "args": [FIXTURE],
                                           "env": {"PIDFILE": str(tmp_path / "fx.pid")}}}})
    host = Host.open(ws)
    hosted = host.session(agent(ws).session, approve=never)
    server.push(Reply(tool_calls=[("run_command", {"cmd": "touch ran"})]),
                Reply(tool_calls=[("fx__echo", {"text": "hi"})]), Reply(text="done"))
    try:
        hosted.run("go")
    finally:
        hosted.close()
        host.close()
    sent = requests_since(server)
    (_, _, command), = tool_results(sent[1]["messages"])
    (_, _, mcp), = tool_results(sent[2]["messages"])
    assert command.startswith("error: not run: permission mode auto") and not (ws.root / "ran").exists()
    assert mcp.startswith("error: not run: permission mode auto") and "runs outside it" in mcp


def test_hooks_hear_the_mode_by_claude_codes_names(tmp_path, server):
    from workstation.paths import user_dir

    log = tmp_path / "payloads.jsonl"
    hook = f"{sys.executable} -c \"import sys; open({str(log)!r}, 'a').write(sys.stdin.read() + chr(10))\""
    user_dir().mkdir(parents=True, exist_ok=True)
    (user_dir() / "hooks.json").write_text(json.dumps({"hooks": {"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": hook}]}]}}))
    ws = workspace(tmp_path, server.url, agent={"permission_mode": "ask"})
    a = agent(ws)
    server.push(Reply(text="one"), Reply(text="two"), Reply(text="three"), Reply(text="four"))
    seen = []
    for mode in ("ask", "edits", "plan", "auto"):
        a.set_mode(mode)
        a.run("hello")
        seen.append(json.loads(log.read_text().splitlines()[-1])["permission_mode"])
    assert seen == ["default", "acceptEdits", "plan", "bypassPermissions"]
    a.set_mode("acceptEdits")
    assert a.mode == "edits"
    a.close()


# --------------------------------------------------------------------------- the configuration
def _load(tmp_path, user: str, own: str):
    from workstation import config

    home = tmp_path / "home"
    (home).mkdir(exist_ok=True)
    (home / "config.toml").write_text(user)
    root = tmp_path / "ws"
    (root / ".workstation").mkdir(parents=True, exist_ok=True)
    (root / ".workstation" / "config.toml").write_text(own)
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mp.setenv("WORKSTATION_HOME", str(home))
        cfg, _ = config.load(root)
    return cfg, [str(w.message) for w in caught]


def test_a_workspace_config_may_lower_the_mode_never_raise_it(tmp_path):
    cfg, said = _load(tmp_path, "", '[agent]\npermission_mode = "auto"\n')
    assert cfg.agent.permission_mode == "edits"
    assert len(said) == 1 and "agent.permission_mode = 'auto' (yours: 'edits')" in said[0]
    cfg, said = _load(tmp_path, '[agent]\npermission_mode = "ask"\n', '[agent]\npermission_mode = "edits"\n')
    assert cfg.agent.permission_mode == "ask" and "permission_mode" in said[0]
    cfg, said = _load(tmp_path, "", '[agent]\npermission_mode = "plan"\n')
    assert cfg.agent.permission_mode == "plan" and said == []
    cfg, said = _load(tmp_path, '[agent]\npermission_mode = "auto"\n', '[agent]\npermission_mode = "ask"\n')
    assert cfg.agent.permission_mode == "ask"


def test_an_unknown_mode_is_one_line(tmp_path):
    from workstation.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        _load(tmp_path, '[agent]\npermission_mode = "yolo"\n', "")
    assert len(err.value.lines) == 1 and "agent.permission_mode" in err.value.lines[0]


def test_the_mode_the_user_chose_goes_on_in_the_session_when_it_is_loaded_again(tmp_path, server):
    from workstation.agent.loop import Agent
    from workstation.sessions import Session

    ws = workspace(tmp_path, server.url)
    first = agent(ws)
    assert first.mode == "edits"
    first.set_mode("plan")
    first.close()
    again = Agent(ws, Session.open(ws.paths, "s"), compaction="off")
    assert again.mode == "plan"
    again.close()
