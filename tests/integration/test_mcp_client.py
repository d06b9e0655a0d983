"""The agent using MCP servers of its config, through the real litellm path against the scripted server: a
tiny server started by the test (tests/support/mcp_fixture_server.py), approvals, trust, failures, time limits,
stops, the environment a server gets, and no process left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path


from support.agent_support import agent, events, module_server, requests_since, tool_results, workspace
from support.conftest_llm import FAKE_API_KEY, TEST_KEY_ENV
from support.fakellm import Reply
from support.trust_support import trust
from workstation.commands import slash
from workstation.mcp.client import open_toolset

server_module, server = module_server()

FIXTURE = str(Path(__file__).parents[1] / "support" / "mcp_fixture_server.py")
WORKSTATION = str(Path(sys.executable).with_name("workstation"))


def fixture(tmp_path, name: str = "fx", *flags: str, env: dict | None = None, **options) -> dict:
    return {"command": sys.executable, "args": [FIXTURE, *flags],
            "env": {"PIDFILE": str(tmp_path / f"{name}.pid"), **(env or {})}, **options}


def alive(tmp_path, name: str) -> bool:
    pid = int((tmp_path / f"{name}.pid").read_text())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def gone_soon(tmp_path, name: str, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while alive(tmp_path, name):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def tool_events(ws, slug: str) -> list[dict]:
    return [e for e in events(ws, slug) if e["type"] == "tool_call"]


def test_a_call_asks_first_and_a_refusal_is_one_line(tmp_path, server):
    ws = workspace(tmp_path, server.url, mcp={"servers": {"fx": fixture(tmp_path)}})
    asked, answers = [], [False, True]
    notices: list[str] = []
    with open_toolset(ws, on_notice=notices.append) as toolset:
        assert notices == []
        a = agent(ws, toolset=toolset, approve=lambda request: asked.append(request) or answers.pop(0))
        try:
            server.push(Reply(tool_calls=[("fx__echo", {"text": "hello", "reverse": True})]), Reply(text="refused"),
                        Reply(tool_calls=[("fx__echo", {"text": "hello", "reverse": True})]), Reply(text="done"))
            a.run("echo hello backwards")
            a.run("again, I will allow it")
        finally:
            a.close()
        help_text = slash.run(a, "/help").text
    assert gone_soon(tmp_path, "fx")
    requests = requests_since(server)
    offered = {t["function"]["name"]: t["function"] for t in requests[0]["tools"]}
    assert "fx__echo" in offered and "file_meta" in offered
    assert set(offered["fx__echo"]["parameters"]["properties"]) == {"text", "reverse"}
    assert "(a tool of the MCP server fx)" in offered["fx__echo"]["description"]
    # asked each time, as a tool call in one line with its arguments
    assert [r.action for r in asked] == ["tool", "tool"]
    assert asked[0].subject.startswith("fx__echo ") and '"hello"' in asked[0].subject
    assert "not trusted" in asked[0].reason
    (_, _, refused), = tool_results(requests[1]["messages"])
    assert refused.startswith("error: you refused: 'fx__echo")
    (_, _, ran), = tool_results(requests[3]["messages"])
    assert ran == "olleh"
    calls = tool_events(ws, "s")
    assert [(e["name"], e["data"]["outcome"]) for e in calls] == [("fx__echo", "denied"), ("fx__echo", "ok")]
    assert "MCP fx (stdio): 5 tools" in help_text and "fx__echo" in help_text


def test_trusted_tools_run_without_asking_with_only_the_configured_environment(tmp_path, server, monkeypatch):
    monkeypatch.setenv("WS_FIXTURE_SOURCE_TOKEN", "fixture-token-0123456789")
    monkeypatch.setenv("WS_UNRELATED_SETTING", "not for the server")
    assert os.environ[TEST_KEY_ENV] == FAKE_API_KEY  # our model key, in our environment only
    ws = workspace(tmp_path, server.url, mcp={"servers": {"fx": fixture(
        tmp_path, env={"FIXTURE_TOKEN": "${WS_FIXTURE_SOURCE_TOKEN}"}, trusted_tools=["env_names", "leak"])}})
    asked = []
    with open_toolset(ws) as toolset:
        a = agent(ws, toolset=toolset, approve=lambda request: asked.append(request) or False)
        try:
            server.push(Reply(tool_calls=[("fx__env_names", {}), ("fx__leak", {})]), Reply(text="done"))
            a.run("what does the server see?")
        finally:
            a.close()
    assert asked == []
    (_, _, names), (_, _, leaked) = tool_results(requests_since(server)[1]["messages"])
    names = set(names.split())
    assert {"FIXTURE_TOKEN", "PIDFILE", "PATH", "HOME"} <= names
    assert TEST_KEY_ENV not in names and "WS_UNRELATED_SETTING" not in names and "WS_FIXTURE_SOURCE_TOKEN" not in names
    # the server read the token from the config's ${VAR}; what it sends back is masked before the model sees it
    assert leaked == "the token is ***"
    assert not any("fixture-token-0123456789" in json.dumps(e) for e in events(ws, "s"))


def test_a_server_that_fails_to_start_is_one_line_and_the_rest_works(tmp_path, server):
    ws = workspace(tmp_path, server.url, mcp={"servers": {
        "fx": fixture(tmp_path, trusted=True),
        "crashing": fixture(tmp_path, "crashing", "--crash"),
        "hanging": fixture(tmp_path, "hanging", "--hang", startup_timeout_s=3),
        "missing": {"command": str(tmp_path / "no-such-program")},
        "unset": fixture(tmp_path, "unset", env={"FIXTURE_TOKEN": "${WS_NEVER_SET_ANYWHERE}"}),
    }})
    notices: list[str] = []
    started = time.monotonic()
    with open_toolset(ws, on_notice=notices.append) as toolset:
        took = time.monotonic() - started
        assert all("\n" not in line for line in notices)
        assert sorted(line.split()[1] for line in notices) == ["crashing", "hanging", "missing", "unset"]
        by_name = {line.split()[1]: line for line in notices}
        assert "cannot open its database" in by_name["crashing"]  # the last line of its stderr
        assert "did not start within 3s" in by_name["hanging"]
        assert "no such program" in by_name["missing"]
        assert "${WS_NEVER_SET_ANYWHERE}, which is not set" in by_name["unset"]
        assert took < 15  # the servers start side by side; the slowest is the hanging one's 3 s
        assert sorted(t for t in toolset.tools if "__" in t) == sorted(
            f"fx__{n}" for n in ("echo", "env_names", "leak", "slow", "broken"))
        a = agent(ws, toolset=toolset)
        try:
            server.push(Reply(tool_calls=[("fx__echo", {"text": "still here"}), ("fx__broken", {})]),
                        Reply(text="done"))
            result = a.run("echo")
            assert result.error is None and result.text == "done"
            help_text = slash.run(a, "/help").text
        finally:
            a.close()
    (_, _, echoed), (_, _, broken) = tool_results(requests_since(server)[1]["messages"])
    assert echoed == "still here" and "Error executing tool broken" in broken
    assert "MCP crashing (stdio): failed" in help_text
    assert [s.state for s in toolset.servers()] == ["stopped", "failed", "failed", "failed", "failed"]
    for name in ("fx", "hanging"):  # the one that never answered was stopped as well
        assert gone_soon(tmp_path, name), name


def test_time_limit_and_the_turns_stop_end_a_call(tmp_path, server):
    ws = workspace(tmp_path, server.url, mcp={"servers": {"quick": fixture(tmp_path, "quick", trusted=True, timeout_s=1),
                                                          "patient": fixture(tmp_path, "patient", trusted=True)}})
    with open_toolset(ws) as toolset:
        a = agent(ws, toolset=toolset)
        try:
            server.push(Reply(tool_calls=[("quick__slow", {"seconds": 8})]), Reply(text="too slow"))
            started = time.monotonic()
            a.run("be slow")
            assert time.monotonic() - started < 6
            (_, _, timed_out), = tool_results(requests_since(server)[1]["messages"])
            assert "did not answer slow within 1s" in timed_out

            stop = threading.Event()
            threading.Timer(0.5, stop.set).start()
            server.push(Reply(tool_calls=[("patient__slow", {"seconds": 30})]))
            started = time.monotonic()
            result = a.run("be slower", cancel=stop)
            assert time.monotonic() - started < 10
            assert result.error == "cancelled"
        finally:
            a.close()
    outcomes = [e["data"]["outcome"] for e in tool_events(ws, "s")]
    assert outcomes == ["timeout", "cancelled"]
    assert gone_soon(tmp_path, "quick") and gone_soon(tmp_path, "patient")


def test_the_agent_uses_workstation_itself_over_http(tmp_path, server, monkeypatch):
    """Dogfood: another workspace's `workstation mcp --http` as a url server of this agent's config."""
    other = tmp_path / "other"
    (other / "lib").mkdir(parents=True)
    (other / "lib" / "geometry.py").write_text("def area(w, h):\n    return w * h\n")
    env = {**os.environ, "WORKSTATION_HOME": str(tmp_path / "home2"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.Popen([WORKSTATION, "-C", str(other), "mcp", "--http", "0", "--read-only"],
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stderr.readline()
        url = line.split(" on ")[-1].strip()
        assert url.startswith("http://127.0.0.1:"), line
        token = proc.stderr.readline().split("Authorization: Bearer ", 1)[1].split("`", 1)[0]
        monkeypatch.setenv("WS_HEADER_SOURCE", "header-value-42")
        monkeypatch.setenv("WS_OTHER_TOKEN", token)
        ws = workspace(tmp_path, server.url, mcp={"servers": {"other": {
            "url": url, "headers": {"X-Test": "${WS_HEADER_SOURCE}", "Authorization": "Bearer ${WS_OTHER_TOKEN}"},
            "trusted_tools": ["find"]}}})
        with open_toolset(ws) as toolset:
            assert [s.state for s in toolset.servers()] == ["ready"]
            assert "other__replace_lines" not in toolset.tools and "other__file_meta" in toolset.tools
            a = agent(ws, toolset=toolset)
            try:
                server.push(Reply(tool_calls=[("other__find", {"query": "area"})]), Reply(text="found"))
                a.run("where is area defined in the other repo?")
            finally:
                a.close()
        (_, _, found), = tool_results(requests_since(server)[1]["messages"])
        assert "lib/geometry.py" in found and "area" in found
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_check_lists_servers_and_their_tools(tmp_path):
    """The state each server had when it answered (not "stopped", as it is after --check closes it); exit 1
    only when one did not start."""
    root = tmp_path / "repo"
    (root / ".workstation").mkdir(parents=True)
    fx = fixture(tmp_path)
    fx_toml = ("[mcp.servers.fx]\n"
               f"command = {json.dumps(fx['command'])}\nargs = {json.dumps(fx['args'])}\n"
               f"env = {{ PIDFILE = {json.dumps(fx['env']['PIDFILE'])} }}\ntrusted_tools = [\"echo\"]\n")
    config = root / ".workstation" / "config.toml"
    config.write_text(fx_toml)
    trust(root, tmp_path / "home")
    env = {**os.environ, "WORKSTATION_HOME": str(tmp_path / "home")}

    def check(*flags: str) -> subprocess.CompletedProcess:
        return subprocess.run([WORKSTATION, "-C", str(root), "mcp", "--check", *flags], capture_output=True,
                              text=True, timeout=120, env=env)

    alone = check()
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert "│ fx " in alone.stdout and "ready" in alone.stdout and "stopped" not in alone.stdout
    assert gone_soon(tmp_path, "fx")

    config.write_text(fx_toml + "[mcp.servers.missing]\ncommand = \"/no/such/program\"\n")
    trust(root, tmp_path / "home")
    run = check("--json")
    assert run.returncode == 1, run.stderr
    servers = {s["name"]: s for s in json.loads(run.stdout)}
    assert servers["fx"]["state"] == "ready" and servers["missing"]["state"] == "failed"
    assert "no such program" in servers["missing"]["error"]
    tools = {t["name"]: t for t in servers["fx"]["tools"]}
    assert tools["fx__echo"]["asks"] is False and tools["fx__slow"]["asks"] is True
    assert gone_soon(tmp_path, "fx")
    table = check()
    assert table.returncode == 1 and "fx__echo" in table.stdout


def test_chat_starts_the_servers_and_stops_them_when_it_ends(tmp_path):
    root = tmp_path / "repo"
    (root / ".workstation").mkdir(parents=True)
    fx = fixture(tmp_path)
    (root / ".workstation" / "config.toml").write_text(
        "[mcp.servers.fx]\n"
        f"command = {json.dumps(fx['command'])}\nargs = {json.dumps(fx['args'])}\n"
        f"env = {{ PIDFILE = {json.dumps(fx['env']['PIDFILE'])} }}\n"
        "[mcp.servers.missing]\ncommand = \"/no/such/program\"\n")
    trust(root, tmp_path / "home")
    run = subprocess.run([WORKSTATION, "-C", str(root), "chat", "/help"], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "WORKSTATION_HOME": str(tmp_path / "home")})
    assert run.returncode == 0, run.stderr
    assert "fx__echo" in run.stdout and "MCP missing (stdio): failed" in run.stdout
    assert "[MCP missing (stdio): failed: cannot run '/no/such/program': no such program]" in run.stderr
    assert not alive(tmp_path, "fx")  # the chat process waited for it to stop before it ended


def test_a_terminated_chat_stops_its_servers_mid_call(tmp_path, server):
    """SIGTERM while a server's tool runs: chat ends as an exit, its `finally` stops the server."""
    import signal

    from support.agent_support import MODEL

    root = tmp_path / "repo"
    (root / ".workstation").mkdir(parents=True)
    fx = fixture(tmp_path)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text(  # endpoints come from the user's own config only
        f"[model]\nname = {json.dumps(MODEL)}\napi_base = {json.dumps(server.url)}\n"
        f"api_key_env = {json.dumps(TEST_KEY_ENV)}\nmax_retries = 0\n")
    (root / ".workstation" / "config.toml").write_text(
        "[mcp.servers.fx]\n"
        f"command = {json.dumps(fx['command'])}\nargs = {json.dumps(fx['args'])}\n"
        f"env = {{ PIDFILE = {json.dumps(fx['env']['PIDFILE'])} }}\ntrusted = true\n")
    trust(root, tmp_path / "home")
    server.push(Reply(tool_calls=[("fx__slow", {"seconds": 60})]))
    proc = subprocess.Popen([WORKSTATION, "-C", str(root), "chat", "be slow"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "WORKSTATION_HOME": str(tmp_path / "home")})
    try:
        deadline = time.monotonic() + 60
        while not requests_since(server) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert requests_since(server), proc.communicate(timeout=30)
        time.sleep(1.0)  # the model asked for fx__slow: the call is running now
        assert alive(tmp_path, "fx")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err, err
    assert gone_soon(tmp_path, "fx", within=2.0)  # stopped before chat ended, not orphaned


def test_results_other_than_text_are_named_not_dumped():
    import mcp.types as types

    from workstation.mcp.client import result_text

    result = types.CallToolResult(content=[
        types.TextContent(type="text", text="first"),
        types.ImageContent(type="image", data="aGVsbG8gd29ybGQh", mime_type="image/png"),
        types.EmbeddedResource(type="resource", resource=types.TextResourceContents(uri="file:///a.txt", text="inside")),
        types.ResourceLink(type="resource_link", uri="file:///b.txt", name="b")])
    assert result_text(result) == "first\n[image image/png, 12 bytes: not shown]\ninside\n[resource file:///b.txt]"
    structured = types.CallToolResult(content=[], structured_content={"n": 1})
    assert result_text(structured) == '{"n": 1}'
    assert result_text(types.CallToolResult(content=[])) == "(no output)"
