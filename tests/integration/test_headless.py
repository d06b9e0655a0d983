"""Headless runs (`workstation -p`, `workstation exec`): the real command in a process of its own, the model the
scripted server (Anthropic's Messages endpoint, with its prompt-cache accounting) through litellm; every
stream-json line checked against the types of Anthropic's `claude-agent-sdk` (its own message parser)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
import types
import typing
from pathlib import Path

import pytest

from support.agent_support import config_overrides, module_server, workspace
from support.conftest_llm import CLAUDE_MODEL, FAKE_API_KEY, TEST_KEY_ENV
from support.fakellm import Reply

server_module, server = module_server()


def _setup(tmp_path: Path, url: str, **agent) -> Path:
    """A workspace whose user config (the only one read) points the Claude model at the scripted server."""
    ws = workspace(tmp_path, None)
    ws.close()
    model = {**config_overrides(url)["model"], "name": CLAUDE_MODEL}
    lines = ["[model]"] + [f"{k} = {json.dumps(v)}" for k, v in model.items()]
    lines += ["[lsp]", "enabled = false"]
    if agent:
        lines += ["[agent]"] + [f"{k} = {json.dumps(v)}" for k, v in agent.items()]
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text("\n".join(lines) + "\n")
    return ws.root


def run(root: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, TEST_KEY_ENV: FAKE_API_KEY, "WORKSTATION_HOME": str(root.parent / "home")}
    env.pop("WORKSTATION_MODEL", None)
    return subprocess.run([sys.executable, "-m", "workstation", "-C", str(root), *args], env=env,
                          input=stdin, capture_output=True, text=True, timeout=120,
                          stdin=None if stdin is not None else subprocess.DEVNULL)


def lines(proc: subprocess.CompletedProcess) -> list[dict]:
    return [json.loads(line) for line in proc.stdout.splitlines()]


def conforms(value, hint, where: str = "$") -> None:
    """`value` is of the type `hint` as the SDK declares it: dataclasses and TypedDicts field by field (a
    TypedDict's required keys present), Literal, unions, list and dict items; an int passes for a float."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is typing.Any:
        return
    if origin is typing.Literal:
        assert value in args, f"{where}: {value!r} not one of {args}"
    elif origin in (typing.Union, types.UnionType):
        problems = []
        for option in args:
            try:
                return conforms(value, option, where)
            except AssertionError as err:
                problems.append(str(err))
        raise AssertionError(f"{where}: {value!r} matches none of {args}: {problems}")
    elif origin in (typing.NotRequired, typing.Required):
        conforms(value, args[0], where)
    elif origin is list:
        assert isinstance(value, list), f"{where}: not a list"
        for i, item in enumerate(value):
            conforms(item, args[0], f"{where}[{i}]")
    elif origin is dict:
        assert isinstance(value, dict), f"{where}: not an object"
        for key, item in value.items():
            conforms(key, args[0], f"{where}.{key}")
            conforms(item, args[1], f"{where}.{key}")
    elif typing.is_typeddict(hint):
        assert isinstance(value, dict), f"{where}: not an object"
        missing = hint.__required_keys__ - set(value)
        assert not missing, f"{where}: missing {sorted(missing)}"
        for key, field_hint in typing.get_type_hints(hint).items():
            if key in value:
                conforms(value[key], field_hint, f"{where}.{key}")
    elif dataclasses.is_dataclass(hint):
        assert isinstance(value, hint), f"{where}: not a {hint.__name__}"
        hints = typing.get_type_hints(hint)
        for f in dataclasses.fields(hint):
            conforms(getattr(value, f.name), hints[f.name], f"{where}.{f.name}")
    elif hint is type(None):
        assert value is None, f"{where}: {value!r} is not null"
    elif hint is float:
        assert isinstance(value, (int, float)) and not isinstance(value, bool), f"{where}: {value!r} not a number"
    else:
        assert isinstance(value, hint) and not (hint is int and isinstance(value, bool)), \
            f"{where}: {value!r} is not {hint}"


def test_stream_json_is_claude_codes_shape(tmp_path, server):
    root = _setup(tmp_path, server.url)
    server.push(Reply(text="Looking.", tool_calls=[("grep", {"pattern": "def fetch"})]),
                Reply(text="fetch is in pkg/core.py."))
    # as a script written for Claude Code says it (`--verbose`: stream-json needs it there)
    proc = run(root, "-p", "where is fetch?", "--output-format", "stream-json", "--verbose")
    assert proc.returncode == 0, proc.stderr
    out = lines(proc)
    assert [m["type"] for m in out] == ["system", "assistant", "user", "assistant", "result"]
    init, call, result, answer, end = out
    assert init["subtype"] == "init" and init["model"] == CLAUDE_MODEL and init["cwd"] == str(root)
    assert "grep" in init["tools"] and init["permissionMode"] == "acceptEdits"
    assert call["message"]["content"][1]["type"] == "tool_use"
    assert call["message"]["content"][1]["input"] == {"pattern": "def fetch"}
    block = result["message"]["content"][0]
    assert block["type"] == "tool_result" and block["tool_use_id"] == call["message"]["content"][1]["id"]
    assert "pkg/core.py" in block["content"] and block["is_error"] is False
    assert answer["message"]["content"] == [{"type": "text", "text": "fetch is in pkg/core.py."}]
    assert end["subtype"] == "success" and end["result"] == "fetch is in pkg/core.py." and end["num_turns"] == 2
    assert {m["session_id"] for m in out} == {init["session_id"]}
    # the usage is what the server billed: its cache accounting, summed over both requests
    billed = server.usages[-2:]
    assert end["usage"]["cache_read_input_tokens"] == sum(u.get("cache_read_input_tokens", 0) for u in billed)
    assert end["usage"]["cache_creation_input_tokens"] == sum(u.get("cache_creation_input_tokens", 0)
                                                              for u in billed)
    assert end["usage"]["input_tokens"] == sum(u["input_tokens"] for u in billed)
    assert end["usage"]["output_tokens"] == sum(u["output_tokens"] for u in billed)
    assert end["total_cost_usd"] > 0


def test_every_message_parses_with_the_claude_agent_sdk(tmp_path, server):
    """Each kind we emit, through the SDK's own parser and, field by field, its types (pydantic, strict)."""
    sdk = pytest.importorskip("claude_agent_sdk")
    from claude_agent_sdk._internal.message_parser import parse_message
    from claude_agent_sdk.types import SystemInitData

    root = _setup(tmp_path, server.url)
    server.push(Reply(text="", tool_calls=[("grep", {"pattern": "def fetch"}), ("nope", {})]),
                Reply(text="done"))
    proc = run(root, "-p", "find fetch", "--output-format", "stream-json")
    assert proc.returncode == 0, proc.stderr
    kinds = set()
    for data in lines(proc):
        message = parse_message(data)
        assert message is not None, data
        conforms(message, type(message))
        kinds.add(type(message).__name__)
        if isinstance(message, sdk.SystemMessage) and message.subtype == "init":
            conforms(message.data, SystemInitData)
        if isinstance(message, sdk.AssistantMessage):
            assert all(isinstance(b, (sdk.TextBlock, sdk.ToolUseBlock)) for b in message.content)
        if isinstance(message, sdk.UserMessage):
            assert all(isinstance(b, sdk.ToolResultBlock) for b in message.content)
        if isinstance(message, sdk.ResultMessage):
            assert message.subtype == "success" and not message.is_error and message.num_turns == 2
    assert kinds == {"SystemMessage", "AssistantMessage", "UserMessage", "ResultMessage"}


def unmarked(value):
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


def test_resume_continues_the_session_with_the_cache_warm(tmp_path, server):
    root = _setup(tmp_path, server.url)
    server.push(Reply(text="", tool_calls=[("grep", {"pattern": "def fetch"})]), Reply(text="In pkg/core.py."))
    first = run(root, "-p", "where is fetch?", "--output-format", "json")
    assert first.returncode == 0, first.stderr
    slug = json.loads(first.stdout)["session_id"]
    last_sent, last_usage = server.anthropic_requests[-1], server.usages[-1]
    server.push(Reply(text="It takes a url."))
    again = run(root, "--resume", slug, "-p", "and its arguments?", "--output-format", "json")
    assert again.returncode == 0, again.stderr
    out = json.loads(again.stdout)
    assert out["session_id"] == slug and out["result"] == "It takes a url." and out["num_turns"] == 1
    resumed, usage = server.anthropic_requests[-1], server.usages[-1]
    # the new process sent the previous request again, with the new message after it (the cache markers
    # move to the new end: a marker is where a prefix ends, not part of it)
    resumed, last_sent = unmarked(resumed), unmarked(last_sent)
    assert resumed["tools"] == last_sent["tools"] and resumed["system"] == last_sent["system"]
    assert resumed["messages"][:len(last_sent["messages"])] == last_sent["messages"]
    # and the provider's cache served all of it that the previous request had cached or written
    warm = last_usage.get("cache_read_input_tokens", 0) + last_usage.get("cache_creation_input_tokens", 0)
    assert warm > 1024 and usage["cache_read_input_tokens"] >= warm
    assert out["usage"]["cache_read_input_tokens"] == usage["cache_read_input_tokens"]
    # --continue: the workspace's latest session
    server.push(Reply(text="Yes."))
    cont = run(root, "-p", "--continue", "sure?", "--output-format", "json")
    assert cont.returncode == 0, cont.stderr and json.loads(cont.stdout)["session_id"] == slug


def test_input_from_stdin_and_the_text_format(tmp_path, server):
    root = _setup(tmp_path, server.url)
    server.push(Reply(text="Hello from stdin."))
    proc = run(root, "exec", stdin="say hello\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Hello from stdin.\n"
    assert server.requests[-1]["messages"][-1]["content"].strip().endswith("say hello")


def test_max_turns_stops_the_run(tmp_path, server):
    root = _setup(tmp_path, server.url)
    server.dispatch.fn = lambda body: Reply(text="", tool_calls=[("grep", {"pattern": "def"})])
    proc = run(root, "-p", "loop", "--max-turns", "2", "--output-format", "stream-json")
    assert proc.returncode == 3, proc.stderr
    end = lines(proc)[-1]
    assert end["subtype"] == "error_max_turns" and end["is_error"] and end["num_turns"] == 2
    assert len(server.requests) - server.mark == 2


def test_max_budget_usd_stops_the_run_before_it_passes(tmp_path, server):
    root = _setup(tmp_path, server.url)
    server.dispatch.fn = lambda body: Reply(text="", tool_calls=[("grep", {"pattern": "def"})])
    proc = run(root, "-p", "loop", "--max-budget-usd", "0.04", "--max-turns", "60", "--output-format", "stream-json")
    assert proc.returncode == 4, proc.stderr
    out = lines(proc)
    end = out[-1]
    assert end["subtype"] == "error_max_budget_usd" and end["is_error"]
    assert 1 < end["num_turns"] < 60 and len(server.requests) - server.mark == end["num_turns"]
    assert 0 < end["total_cost_usd"] <= 0.04 and "past --max-budget-usd $0.04" in end["errors"][0]
    # a budget no request fits: nothing is sent
    mark = len(server.requests)
    none = run(root, "-p", "loop", "--max-budget-usd", "0.000001", "--output-format", "json")
    assert none.returncode == 4 and json.loads(none.stdout)["num_turns"] == 0 and len(server.requests) == mark


def test_allowed_tools_are_the_only_ones_offered_and_run(tmp_path, server):
    root = _setup(tmp_path, server.url)
    server.push(Reply(text="", tool_calls=[("run_command", {"command": "touch pwned"}),
                                           ("grep", {"pattern": "def fetch"})]),
                Reply(text="done"))
    proc = run(root, "-p", "look", "--allowedTools", "Grep,Read", "--output-format", "stream-json")
    assert proc.returncode == 0, proc.stderr
    offered = {t["name"] for t in server.anthropic_requests[-1]["tools"]}
    assert offered == {"grep", "read_lines", "file_meta"}
    out = lines(proc)
    assert set(out[0]["tools"]) == offered
    refused, found = out[2]["message"]["content"][0], out[3]["message"]["content"][0]
    assert refused["is_error"] and "not allowed in this run" in refused["content"]
    assert not found["is_error"] and "pkg/core.py" in found["content"]
    assert not (root / "pwned").exists()
    assert out[-1]["permission_denials"] == [{"tool_name": "run_command", "tool_use_id": refused["tool_use_id"],
                                              "tool_input": {"command": "touch pwned"}}]
    server.push(Reply(text="ok"))
    proc = run(root, "-p", "look", "--disallowed-tools", "Bash", "--output-format", "json")
    assert proc.returncode == 0, proc.stderr
    offered = {t["name"] for t in server.anthropic_requests[-1]["tools"]}
    assert "run_command" not in offered and "grep" in offered and "replace_lines" in offered


@pytest.mark.parametrize("args, says", [
    (["-p", "hi", "--output-format", "yaml"], "'yaml' is not one of"),
    (["-p", "hi", "--resume", "../etc"], "--resume: invalid session name"),
    (["-p", "hi", "--resume", "no-such-session"], "--resume: no session named no-such-session"),
    (["-p", "hi", "--max-budget-usd", "lots"], "'lots' is not a valid float"),
    (["-p", "hi", "--max-budget-usd", "-1"], "a positive number of dollars"),
    (["-p", "hi", "--max-turns", "0"], "--max-turns"),
    (["-p", "hi", "--allowed-tools", "Bash(git log:*)"], "patterns are not supported"),
    (["-p", "hi", "--allowed-tools", "Teleport"], "unknown tool 'Teleport'"),
    (["-p", "--continue", "hi"], "--continue: this workspace has no session"),
    (["-p", "hi", "--permission-mode", "yolo"], "'yolo' is not one of"),
    (["exec"], "the prompt is empty"),  # standard input is no terminal here, and empty
    (["-p", "   "], "the prompt is empty"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, server, args, says):
    root = _setup(tmp_path, server.url)
    proc = run(root, *args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ") and says in proc.stderr, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    assert len(server.requests) == server.mark
    assert (root / ".workstation" / "sessions").is_dir()
    assert not list((root / ".workstation" / "sessions").glob("*.jsonl"))  # no session made for nothing


UTIL = "pkg/util.py"


def test_plan_mode_headless_writes_and_runs_nothing(tmp_path, server):
    root = _setup(tmp_path, server.url)
    before = (root / UTIL).read_text()
    server.push(Reply(tool_calls=[("replace_lines", {"path": UTIL, "start": 1, "end": 1, "content": "# gone\n"})]),
                Reply(tool_calls=[("write_file", {"path": "new.py", "content": "x = 1\n"})]),
                Reply(tool_calls=[("run_command", {"cmd": "touch ran"})]),
                Reply(text="Plan:\n1. Add a docstring to clean."))
    proc = run(root, "-p", "improve util", "--permission-mode", "plan", "--output-format", "stream-json")
    assert proc.returncode == 0, proc.stderr
    out = lines(proc)
    assert out[0]["permissionMode"] == "plan" and out[0]["permission_mode"] == "plan"
    results = [m["message"]["content"][0] for m in out if m["type"] == "user"]
    assert len(results) == 3 and all(r["is_error"] and "plan mode" in r["content"] for r in results)
    assert (root / UTIL).read_text() == before and not (root / "new.py").exists() and not (root / "ran").exists()
    assert out[-1]["result"].startswith("Plan:") and out[-1]["subtype"] == "success"


def test_default_mode_asks_so_a_headless_edit_is_refused_and_listed(tmp_path, server):
    root = _setup(tmp_path, server.url)
    before = (root / UTIL).read_text()
    server.push(Reply(tool_calls=[("replace_lines", {"path": UTIL, "start": 1, "end": 1, "content": "# gone\n"})]),
                Reply(text="could not"))
    proc = run(root, "-p", "edit", "--permission-mode", "default", "--output-format", "json")
    assert proc.returncode == 0, proc.stderr
    end = json.loads(proc.stdout)
    assert (root / UTIL).read_text() == before
    assert [d["tool_name"] for d in end["permission_denials"]] == ["replace_lines"]


def test_auto_mode_headless_never_asks_and_never_reaches_the_network(tmp_path, server):
    from workstation import sandbox
    from workstation.sandbox import Policy

    if not sandbox.status(Policy(".")).full:
        pytest.skip(sandbox.status(Policy(".")).line)
    root = _setup(tmp_path, server.url, command_network=True)  # auto keeps the network off all the same
    port = int(server.url.rsplit(":", 1)[1].split("/")[0])  # the scripted server: it answers on 127.0.0.1
    probe = (f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); "
             "print('CON' + 'NECTED')\"")
    server.push(Reply(tool_calls=[("run_command", {"cmd": "touch made-by-auto"})]),
                Reply(tool_calls=[("run_command", {"cmd": probe})]), Reply(text="done"))
    proc = run(root, "-p", "go", "--permission-mode", "bypassPermissions", "--output-format", "stream-json")
    assert proc.returncode == 0, proc.stderr
    out = lines(proc)
    assert out[0]["permissionMode"] == "bypassPermissions" and out[0]["permission_mode"] == "auto"
    assert (root / "made-by-auto").exists() and out[-1]["permission_denials"] == []
    probed = [m["message"]["content"][0]["content"] for m in out if m["type"] == "user"][-1]
    assert "CONNECTED" not in probed and "[exit 1" in probed


def test_the_mode_names_of_the_option_are_the_cores():
    from workstation.agent.modes import CLAUDE_NAMES, MODES
    from workstation.cli.headless_cmds import MODE_NAMES

    assert set(MODE_NAMES) == set(MODES) | set(CLAUDE_NAMES.values())


def test_ctrl_c_stops_the_run_and_the_result_is_still_written(tmp_path, server):
    import signal

    root = _setup(tmp_path, server.url)
    server.push(Reply(text="too late", delay_s=60))
    env = {**os.environ, TEST_KEY_ENV: FAKE_API_KEY, "WORKSTATION_HOME": str(root.parent / "home")}
    env.pop("WORKSTATION_MODEL", None)
    proc = subprocess.Popen([sys.executable, "-m", "workstation", "-C", str(root), "-p", "wait",
                             "--output-format", "stream-json"], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        init = json.loads(proc.stdout.readline())
        assert init["subtype"] == "init"
        while len(server.requests) == server.mark:  # the request is on its way: the model "thinks"
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    end = json.loads(rest.splitlines()[-1])
    assert end["type"] == "result" and end["subtype"] == "error_during_execution" and end["is_error"], end
    assert end["errors"] == ["cancelled"] and "Traceback" not in err
    server._queue.clear()  # the answer nobody waited for was taken already; nothing else is queued


def test_a_built_in_slash_command_runs_without_the_model(tmp_path, server):
    root = _setup(tmp_path, server.url)
    proc = run(root, "-p", "/grep def clean", "--output-format", "stream-json")
    assert proc.returncode == 0, proc.stderr
    init, end = lines(proc)
    assert init["subtype"] == "init" and end["subtype"] == "success" and end["num_turns"] == 0
    assert end["result"].strip() == "pkg/util.py:4: def clean(text: str) -> str:"
    assert len(server.requests) == server.mark  # no model call
    text = run(root, "-p", "/grep def clean")
    assert text.returncode == 0 and text.stdout.strip() == "pkg/util.py:4: def clean(text: str) -> str:"
    bad = run(root, "-p", "/no-such-command", "--output-format", "json")
    assert bad.returncode == 1 and json.loads(bad.stdout)["subtype"] == "error_during_execution"


def test_a_smaller_configured_budget_still_holds(tmp_path, server):
    root = _setup(tmp_path, server.url, max_budget_usd=0.000001)
    proc = run(root, "-p", "go", "--max-budget-usd", "5", "--output-format", "json")
    assert proc.returncode == 4, proc.stderr
    end = json.loads(proc.stdout)
    assert end["num_turns"] == 0 and "agent.max_budget_usd" in end["errors"][0]
    assert len(server.requests) == server.mark


def test_a_custom_commands_allowed_tools_run_where_nobody_is_asked(tmp_path, server):
    """Headless, nobody can be asked: a command the custom command lists runs, one outside its list is
    refused and listed in the result's permission denials (as Claude Code's -p with allowed tools)."""
    from workstation import sandbox
    from workstation.sandbox import Policy

    if not sandbox.status(Policy(".")).full:
        pytest.skip(sandbox.status(Policy(".")).line)
    root = _setup(tmp_path, server.url)
    commands = tmp_path / "home" / "commands"
    commands.mkdir()
    (commands / "mark.md").write_text("---\nallowed-tools: Bash(touch granted-*)\n---\nMark $ARGUMENTS.\n")
    server.push(Reply(tool_calls=[("run_command", {"cmd": "touch granted-1"}),
                                  ("run_command", {"cmd": "touch outside"})]), Reply(text="marked"))
    proc = run(root, "-p", "/mark it", "--output-format", "json")
    assert proc.returncode == 0, proc.stderr
    end = json.loads(proc.stdout)
    assert (root / "granted-1").exists() and not (root / "outside").exists()
    assert [d["tool_input"] for d in end["permission_denials"]] == [{"cmd": "touch outside"}]
    assert "Mark it." in [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"]


def test_sub_agents_messages_stream_with_their_task_calls_id(tmp_path, server):
    """Two task calls run at once; each sub-agent's own messages (its task, its tool call and result, its
    answer) are streamed with parent_tool_use_id naming its own task call, and parse with the SDK's types."""
    sdk = pytest.importorskip("claude_agent_sdk")
    from claude_agent_sdk._internal.message_parser import parse_message

    def respond(body: dict) -> Reply:
        text = json.dumps(body["messages"])
        last = body["messages"][-1]
        if "You are a sub-agent" not in text:  # the parent
            if last["role"] == "tool":
                return Reply(text="both found")
            return Reply(tool_calls=[("task", {"prompt": "Find alpha in pkg/"}),
                                     ("task", {"prompt": "Find beta in pkg/"})])
        which = "alpha" if "Find alpha" in text else "beta"
        if last["role"] == "tool":
            return Reply(text=f"no {which} in pkg/")
        return Reply(tool_calls=[("grep", {"pattern": which})])

    server.dispatch.fn = respond
    root = _setup(tmp_path, server.url)
    proc = run(root, "-p", "find alpha and beta", "--output-format", "stream-json")
    assert proc.returncode == 0, proc.stderr
    out = lines(proc)
    for data in out:
        message = parse_message(data)
        conforms(message, type(message))
    tasks = {b["input"]["prompt"].split()[1]: b["id"] for m in out if m["type"] == "assistant"
             and m["parent_tool_use_id"] is None for b in m["message"]["content"] if b["type"] == "tool_use"}
    assert set(tasks) == {"alpha", "beta"}
    for which, task_id in tasks.items():
        own = [m for m in out if m.get("parent_tool_use_id") == task_id]
        assert [m["type"] for m in own] == ["user", "assistant", "user", "assistant"], own
        assert own[0]["message"]["content"][0]["text"] == f"Find {which} in pkg/"
        assert own[1]["message"]["content"][0] == {"type": "tool_use", "id": own[1]["message"]["content"][0]["id"],
                                                   "name": "grep", "input": {"pattern": which}}
        assert own[2]["message"]["content"][0]["type"] == "tool_result"
        assert own[3]["message"]["content"] == [{"type": "text", "text": f"no {which} in pkg/"}]
        assert isinstance(parse_message(own[1]), sdk.AssistantMessage) and parse_message(own[1]).parent_tool_use_id == task_id
    assert out[-1]["num_turns"] == 2 and out[-1]["result"] == "both found"  # the session's own model calls


def test_include_partial_messages_streams_anthropics_events(tmp_path, server):
    """--include-partial-messages: stream_event lines, each parsed by the SDK as its StreamEvent, whose events
    are Anthropic's stream: message_start, the text as deltas that add up to the answer, each tool_use block
    with its input as JSON, message_delta with the stop reason, message_stop; then the assistant message."""
    sdk = pytest.importorskip("claude_agent_sdk")
    from claude_agent_sdk._internal.message_parser import parse_message

    root = _setup(tmp_path, server.url)
    server.push(Reply(text="Looking for it now.", tool_calls=[("grep", {"pattern": "def fetch"})]),
                Reply(text="fetch is in pkg/core.py."))
    proc = run(root, "-p", "where is fetch?", "--output-format", "stream-json", "--include-partial-messages")
    assert proc.returncode == 0, proc.stderr
    out = lines(proc)
    for data in out:
        message = parse_message(data)
        conforms(message, type(message))
    calls: list[list[dict]] = [[]]
    for m in out[1:]:
        if m["type"] == "stream_event":
            assert isinstance(parse_message(m), sdk.StreamEvent) and m["parent_tool_use_id"] is None
            calls[-1].append(m["event"])
        elif m["type"] == "assistant":
            events = calls[-1]
            assert [e["type"] for e in events][0] == "message_start" and events[-1]["type"] == "message_stop"
            assert m["message"]["id"] == events[0]["message"]["id"]
            text = "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta"
                           and e["delta"]["type"] == "text_delta")
            assert text == "".join(b["text"] for b in m["message"]["content"] if b["type"] == "text")
            uses = [e["content_block"] for e in events if e["type"] == "content_block_start"
                    and e["content_block"]["type"] == "tool_use"]
            inputs = [json.loads(e["delta"]["partial_json"]) for e in events if e["type"] == "content_block_delta"
                      and e["delta"]["type"] == "input_json_delta"]
            assert [(u["id"], u["name"], i) for u, i in zip(uses, inputs)] == \
                [(b["id"], b["name"], b["input"]) for b in m["message"]["content"] if b["type"] == "tool_use"]
            stop = next(e for e in events if e["type"] == "message_delta")
            assert stop["delta"]["stop_reason"] == m["message"]["stop_reason"]
            starts = [e["index"] for e in events if e["type"] == "content_block_start"]
            assert starts == list(range(len(starts))) == sorted(
                e["index"] for e in events if e["type"] == "content_block_stop")
            calls.append([])
    # the first answer's text came as it streamed, in several deltas, before its tool call's block
    assert [e["type"] for e in calls[0]] == ["message_start", "content_block_start", *["content_block_delta"] * (
        len(calls[0]) - 8), "content_block_stop", "content_block_start", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop"] and len(calls[0]) - 8 > 1
    assert len(calls) == 3 and calls[-1] == []  # two model calls, each streamed then its message
    assert sum(1 for m in out if m["type"] == "stream_event") >= 2 * 5
    refused = run(root, "-p", "hi", "--include-partial-messages")
    assert refused.returncode == 2 and "stream-json" in refused.stderr and refused.stdout == ""
