"""Which models get which prompt-cache request (providers.cache_style), where the Anthropic breakpoints go
(providers.with_cache_breakpoints) and the agent.cache_ttl setting. What litellm makes of it on the wire
is tested in tests/integration/test_llm_cache.py."""

from __future__ import annotations

import pytest

from workstation.config import AgentConfig, validate
from workstation.errors import ConfigError
from workstation.providers import cache_style, spec_for, with_cache_breakpoints

CC = {"type": "ephemeral"}


@pytest.mark.parametrize("model, style", [
    ("anthropic/claude-sonnet-4-5-20250929", "anthropic"),
    ("claude-3-5-haiku-20241022", "anthropic"),
    ("bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0", "anthropic"),
    ("bedrock/converse/us.anthropic.claude-sonnet-4-20250514-v1:0", "anthropic"),
    ("vertex_ai/claude-3-5-sonnet@20240620", "anthropic"),
    ("bedrock/amazon.nova-pro-v1:0", ""),
    ("vertex_ai/gemini-2.5-pro", ""),
    ("openai/gpt-4o", "openai"),
    ("gpt-4.1-mini", "openai"),
    ("openai/test-model", "openai"),  # an OpenAI-compatible server
    ("gemini/gemini-2.5-flash", ""),
    ("ollama/llama3", ""),
    ("", ""),
])
def test_cache_style(model: str, style: str) -> None:
    assert cache_style(model) == style


def conversation() -> list[dict]:
    return [
        {"role": "system", "content": "head"},
        {"role": "system", "content": "summary"},
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "looking", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "grep", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "tool", "tool_call_id": "c2", "content": "two"},
        {"role": "user", "content": "[workstation] a note"},
    ]


TOOLS = [{"type": "function", "function": {"name": "read"}}, {"type": "function", "function": {"name": "grep"}}]


def test_breakpoints_on_tools_head_and_the_moving_tail() -> None:
    messages = conversation()
    out, tools = with_cache_breakpoints(messages, TOOLS)
    assert tools == [TOOLS[0], {**TOOLS[1], "cache_control": CC}]
    assert out[1]["content"] == [{"type": "text", "text": "summary", "cache_control": CC}]  # end of the system run
    assert out[2]["content"] == [{"type": "text", "text": "task", "cache_control": CC}]  # before the newest assistant
    assert out[6]["content"] == [{"type": "text", "text": "[workstation] a note", "cache_control": CC}]  # last
    assert [out[i] for i in (0, 3, 4, 5)] == [messages[i] for i in (0, 3, 4, 5)]  # untouched
    assert messages == conversation() and TOOLS[1] == {"type": "function", "function": {"name": "grep"}}  # copies


def test_tool_and_assistant_messages_are_marked_on_their_last_block() -> None:
    messages = conversation()[:-1]  # ends with a tool result
    out, _ = with_cache_breakpoints(messages + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c3", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}], None, "1h")
    hour = {"type": "ephemeral", "ttl": "1h"}
    assert out[5] == {**messages[5], "cache_control": hour}  # content stays a string
    assert out[6]["tool_calls"][-1]["cache_control"] == hour and out[6]["content"] is None


def test_at_most_four_and_no_duplicates() -> None:
    out, tools = with_cache_breakpoints([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], TOOLS)
    marks = sum("cache_control" in str(m) for m in out) + sum("cache_control" in t for t in tools)
    assert marks == 3
    for n in range(1, 12):
        messages = conversation() * n
        out, tools = with_cache_breakpoints(messages, TOOLS)
        assert str(out).count("cache_control") + str(tools).count("cache_control") <= 4
    assert with_cache_breakpoints([], None) == ([], None)


def test_list_content_gets_the_marker_on_its_last_block() -> None:
    blocks = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    out, _ = with_cache_breakpoints([{"role": "user", "content": blocks}], None)
    assert out[0]["content"] == [blocks[0], {**blocks[1], "cache_control": CC}]


def test_cache_ttl_setting() -> None:
    assert AgentConfig().cache_ttl == "5m"
    assert validate({"agent": {"cache_ttl": "1h"}}).agent.cache_ttl == "1h"
    with pytest.raises(ConfigError) as info:
        validate({"agent": {"cache_ttl": "10m"}}, "config.toml")
    assert str(info.value).count("\n") == 0 and "config.toml: agent.cache_ttl" in str(info.value)
    assert "'5m' or '1h'" in str(info.value)


def test_spec_carries_the_ttl_to_every_model() -> None:
    from workstation.config import ModelConfig

    spec = spec_for(ModelConfig(name="anthropic/claude-sonnet-4-5", fallbacks=["openai/gpt-4o"]), cache_ttl="1h")
    assert spec.cache_ttl == "1h"
    from workstation.llm import model_chain

    assert [s.cache_ttl for s in model_chain(spec)] == ["1h", "1h"]
