"""Prompt caching through the real litellm path: what each provider's server receives (breakpoints,
prompt_cache_key), and what the fake providers' cache accounting reports back through llm.complete."""

from __future__ import annotations

import json

import pytest

from support.conftest_llm import CLAUDE_MODEL, FAKE_API_KEY, TEST_KEY_ENV
from support.fakellm import Reply, ScriptedLLM
from workstation import llm
from workstation.llm import LLMError, ModelSpec

CLAUDE = CLAUDE_MODEL
PRICE_IN, PRICE_OUT, PRICE_READ, PRICE_WRITE, PRICE_WRITE_1H = 3e-6, 15e-6, 3e-7, 3.75e-6, 6e-6
HEAD = "You are the workstation agent. " + " ".join(f"rule{i}" for i in range(1500))  # over 1,024 tokens
TOOLS = [
    {"type": "function", "function": {"name": "read_file", "description": "read a file",
                                      "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "run", "description": "run a command",
                                      "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}},
]


@pytest.fixture(autouse=True)
def _litellm_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TEST_KEY_ENV, FAKE_API_KEY)
    llm.warm_import()


def spec(server: ScriptedLLM, model: str = CLAUDE, **fields) -> ModelSpec:
    values = dict(api_base=server.url, api_key_env=TEST_KEY_ENV, timeout_s=10, max_retries=0, backoff_s=0.01)
    return ModelSpec(model, **{**values, **fields})


def conversation() -> list[dict]:
    return [
        {"role": "system", "content": HEAD},
        {"role": "user", "content": "rename the helper"},
        {"role": "assistant", "content": "Looking first.", "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}},
            {"id": "call_b", "type": "function", "function": {"name": "run", "arguments": '{"cmd": "ls"}'}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": "def helper():\n    return 1\n"},
        {"role": "tool", "tool_call_id": "call_b", "content": "a.py\nb.py\n"},
        {"role": "user", "content": "[workstation] a.py changed on disk"},
    ]


def markers(value) -> list[dict]:
    """Every cache_control in a JSON value, in document order."""
    found: list[dict] = []
    if isinstance(value, dict):
        if "cache_control" in value:
            found.append(value["cache_control"])
        for k, v in value.items():
            if k != "cache_control":
                found += markers(v)
    elif isinstance(value, list):
        for v in value:
            found += markers(v)
    return found


@pytest.mark.parametrize("ttl", ["5m", "1h"])
def test_anthropic_request_carries_four_breakpoints_where_they_belong(ttl: str) -> None:
    with ScriptedLLM([Reply(text="ok")]) as server:
        llm.complete(spec(server, cache_ttl=ttl), conversation(), TOOLS, cache_key="session-1")
        body = server.anthropic_requests[0]
    marker = {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}
    assert server.request_log[0].path.endswith("/messages")
    assert markers(body) == [marker] * 4
    assert [t.get("cache_control") for t in body["tools"]] == [None, marker]  # the last tool schema
    assert body["system"][-1]["cache_control"] == marker  # the stable head
    first, assistant, results = body["messages"]
    assert first["content"] == [{"type": "text", "text": "rename the helper", "cache_control": marker}]
    assert markers(assistant) == []
    # litellm merges the tool results and the note into one user message: the note is the last block
    assert [b["type"] for b in results["content"]] == ["tool_result", "tool_result", "text"]
    assert markers(results["content"][:2]) == [] and results["content"][2]["cache_control"] == marker
    assert "prompt_cache_key" not in body and "metadata" not in body


def test_anthropic_marks_a_tool_result_without_changing_its_content() -> None:
    with ScriptedLLM([Reply(text="ok")]) as server:
        llm.complete(spec(server), conversation()[:-1], TOOLS)  # ends with the tool results
        results = server.anthropic_requests[0]["messages"][-1]["content"]
    assert results[-1] == {"type": "tool_result", "tool_use_id": "call_b", "content": "a.py\nb.py\n",
                           "cache_control": {"type": "ephemeral"}}
    assert "cache_control" not in results[0]


def test_openai_gets_the_session_as_prompt_cache_key_and_no_markers() -> None:
    with ScriptedLLM([Reply(text="ok"), Reply(text="ok")]) as server:
        llm.complete(spec(server, "openai/test-model"), conversation(), TOOLS, cache_key="session-1")
        llm.complete(spec(server, "openai/test-model"), conversation(), TOOLS)
        keyed, plain = server.requests
    assert keyed["prompt_cache_key"] == "session-1"
    assert "prompt_cache_key" not in plain
    assert "cache_control" not in json.dumps(keyed) and keyed["messages"] == conversation()


def test_two_requests_to_anthropic_the_second_reads_the_first() -> None:
    with ScriptedLLM([Reply(text="Looking first.", tool_calls=[("read_file", {"path": "a.py"})]),
                      Reply(text="Done.")]) as server:
        first = llm.complete(spec(server), conversation()[:2], TOOLS, cache_key="s")
        messages = conversation()[:2] + [
            {"role": "assistant", "content": first.text, "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in first.tool_calls]},
            {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "def helper():\n    return 1\n"}]
        second = llm.complete(spec(server), messages, TOOLS, cache_key="s")
        sent = server.usages
    # the first request wrote its whole prompt (every breakpoint is past 1,024 tokens); the second read it
    assert (first.cache_read_tokens, first.cache_creation_tokens) == (0, first.tokens_in)
    assert second.cache_read_tokens == first.tokens_in
    assert second.cache_creation_tokens == second.tokens_in - first.tokens_in > 0
    assert second.cache_creation_1h_tokens == 0
    for completion, usage in zip((first, second), sent):
        assert completion.tokens_in == (usage["input_tokens"] + usage["cache_read_input_tokens"]
                                        + usage["cache_creation_input_tokens"])
        assert completion.cost_usd == pytest.approx(
            usage["input_tokens"] * PRICE_IN + usage["cache_read_input_tokens"] * PRICE_READ
            + usage["cache_creation_input_tokens"] * PRICE_WRITE + usage["output_tokens"] * PRICE_OUT)
    assert second.cost_usd < first.cost_usd


@pytest.mark.parametrize("stream", [True, False])
def test_one_hour_writes_are_reported_and_priced(stream: bool) -> None:
    with ScriptedLLM([Reply(text="ok"), Reply(text="ok")]) as server:
        first = llm.complete(spec(server, cache_ttl="1h"), conversation(), TOOLS, stream=stream)
        server.advance(1800)  # a 5-minute entry would be gone
        second = llm.complete(spec(server, cache_ttl="1h"), conversation(), TOOLS, stream=stream)
    assert first.cache_creation_tokens == first.cache_creation_1h_tokens == first.tokens_in
    assert first.cost_usd == pytest.approx(first.tokens_in * PRICE_WRITE_1H + first.tokens_out * PRICE_OUT)
    assert second.cache_read_tokens == second.tokens_in and second.cache_creation_tokens == 0


def test_idle_past_the_ttl_starts_uncached() -> None:
    with ScriptedLLM([Reply(text="ok")] * 3) as server:
        llm.complete(spec(server), conversation(), TOOLS)
        server.advance(299)
        assert llm.complete(spec(server), conversation(), TOOLS).cache_read_tokens > 0
        server.advance(301)
        late = llm.complete(spec(server), conversation(), TOOLS)
    assert late.cache_read_tokens == 0 and late.cache_creation_tokens == late.tokens_in


def test_openai_prefix_cache_through_litellm() -> None:
    with ScriptedLLM([Reply(text="ok")] * 4, cache=True) as server:
        model = spec(server, "openai/test-model")
        first = llm.complete(model, conversation(), TOOLS, cache_key="s1")
        second = llm.complete(model, conversation(), TOOLS, cache_key="s1")
        other = llm.complete(model, conversation(), TOOLS, cache_key="s2")
        grown = llm.complete(model, conversation() + [{"role": "user", "content": "go on"}], TOOLS, cache_key="s1")
    assert first.tokens_in > 1024 and first.cache_read_tokens == 0
    assert second.cache_read_tokens == first.tokens_in - first.tokens_in % 128
    assert other.cache_read_tokens == 0  # another key, another cache
    assert grown.cache_read_tokens == second.cache_read_tokens  # the old prompt is its prefix


# --------------------------------------------------------------------------- the Anthropic endpoint's scripting


@pytest.mark.parametrize("stream", [True, False])
def test_anthropic_endpoint_scripted_text_and_tool_calls(stream: bool) -> None:
    seen: list[dict] = []

    def responder(body: dict) -> Reply:
        seen.append(body)
        return Reply(text="Two calls.", tool_calls=[("read_file", {"path": "a.py"}), ("run", {"cmd": "make"})],
                     args_chunk_size=3)

    with ScriptedLLM(responder) as server:
        result = llm.complete(spec(server), conversation(), TOOLS, stream=stream)
        headers = server.request_log[0].headers
    assert result.text == "Two calls." and result.finish_reason == "tool_calls"
    assert [(c.name, c.parsed_arguments()) for c in result.tool_calls] == [
        ("read_file", {"path": "a.py"}), ("run", {"cmd": "make"})]
    assert headers.get("x-api-key") == FAKE_API_KEY
    # the responder read the request in OpenAI chat shape, as on the OpenAI endpoint
    body = seen[0]
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert body["messages"][0]["content"] == HEAD
    assert [c["id"] for c in body["messages"][2]["tool_calls"]] == ["call_a", "call_b"]
    assert json.loads(body["messages"][2]["tool_calls"][0]["function"]["arguments"]) == {"path": "a.py"}
    assert body["messages"][4] == {"role": "tool", "tool_call_id": "call_b", "content": "a.py\nb.py\n"}
    assert [t["function"]["name"] for t in body["tools"]] == ["read_file", "run"]
    assert server.requests == seen


def test_anthropic_endpoint_errors_and_drops() -> None:
    with ScriptedLLM([Reply(status=429, error_message="slow down"), Reply(text="fine"),
                      Reply(status=529, error_message="overloaded"),
                      Reply(text="this answer will be cut off", drop_stream_after=4)]) as server:
        retried = llm.complete(spec(server, max_retries=1), conversation(), TOOLS)
        assert retried.text == "fine" and retried.attempts == 2
        with pytest.raises(LLMError) as overloaded:
            llm.complete(spec(server), conversation(), TOOLS)
        with pytest.raises(LLMError) as dropped:
            llm.complete(spec(server), conversation(), TOOLS)
    assert overloaded.value.kind == "server" and str(overloaded.value).endswith(": overloaded")
    assert dropped.value.kind == "dropped"


def test_anthropic_endpoint_refuses_markers_the_api_refuses() -> None:
    marked = {"type": "ephemeral"}
    too_many = [{"role": "user", "content": [{"type": "text", "text": f"part {i}", "cache_control": marked}
                                             for i in range(5)]}]
    with ScriptedLLM([Reply(text="never")]) as server:
        import urllib.request

        request = urllib.request.Request(server.url + "/messages", method="POST", data=json.dumps(
            {"model": "claude", "max_tokens": 10, "messages": too_many}).encode())
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request)
    assert info.value.code == 400
    assert json.load(info.value)["error"]["message"].startswith("A maximum of 4 blocks with cache_control")


def test_bedrock_converse_gets_cache_points_in_the_same_places(monkeypatch: pytest.MonkeyPatch) -> None:
    # the fake has no Bedrock route: it records the request and answers 404, which is all this needs
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFAKEFAKEFAKE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-secret")
    monkeypatch.setenv("AWS_REGION_NAME", "us-east-1")
    with ScriptedLLM() as server:
        bedrock = ModelSpec("bedrock/converse/us.anthropic.claude-sonnet-4-20250514-v1:0", api_base=server.url,
                            timeout_s=10, max_retries=0)
        with pytest.raises(LLMError):
            llm.complete(bedrock, conversation(), TOOLS)
        body = server.request_log[0].body
    point = {"cachePoint": {"type": "default"}}
    assert server.request_log[0].path.endswith("/converse-stream")
    assert body["toolConfig"]["tools"][-1] == point and point not in body["toolConfig"]["tools"][:-1]
    assert body["system"][-1] == point
    first, _, results = body["messages"]
    assert first["content"][-1] == point and results["content"][-1] == point
    assert json.dumps(body).count("cachePoint") == 4
