"""Headless runs (`workstation -p`, `workstation exec`): the real command in a process of its own, the model the
scripted server (Anthropic's Messages endpoint, with its prompt-cache accounting) through litellm; every
stream-json line checked against the types of Anthropic's `claude-agent-sdk` (its own message parser)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import types
import typing
from pathlib import Path

import pytest

from agent_support import config_overrides, module_server, workspace
from conftest_llm import CLAUDE_MODEL, FAKE_API_KEY, TEST_KEY_ENV
from fakellm import Reply

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
    proc = run(root, "-p", "where is fetch?", "--output-format", "stream-json")
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
