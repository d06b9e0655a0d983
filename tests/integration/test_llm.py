"""workstation.llm through the real litellm path against the scripted fake server (no patching)."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from support.conftest_llm import FAKE_API_KEY
from support.fakellm import Reply, ScriptedLLM
from workstation import llm
from workstation.llm import Completion, LLMCancelled, LLMError, ModelSpec, ToolCall

MSGS = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hi"}]
TOOLS = [
    {"type": "function", "function": {"name": "read_file", "description": "read a file",
                                      "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "run", "description": "run a command",
                                      "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}},
]


@pytest.fixture(autouse=True)
def _litellm_imported() -> None:
    llm.warm_import()  # import cost (~3 s once) outside the timed assertions


def test_plain_text_streaming(scripted_llm: ScriptedLLM, llm_spec) -> None:
    scripted_llm.push(Reply(text="Hello there, general Kenobi.", usage=(12, 7)))
    fragments: list[str] = []
    result = llm.complete(llm_spec(), MSGS, on_text=fragments.append)
    assert isinstance(result, Completion)
    assert result.text == "Hello there, general Kenobi."
    assert len(fragments) > 3 and "".join(fragments) == result.text
    assert result.tool_calls == []
    assert result.finish_reason == "stop"
    assert (result.tokens_in, result.tokens_out) == (12, 7)
    assert result.model == "openai/test-model"
    assert result.cost_usd is None  # unknown model: no price
    assert result.latency_s > 0 and result.attempts == 1
    body = scripted_llm.requests[0]
    assert body["stream"] is True and body["model"] == "test-model"
    assert body["messages"] == MSGS and "tools" not in body
    # the key from WS_TEST_KEY is what was sent
    assert scripted_llm.request_log[0].headers["Authorization"] == f"Bearer {FAKE_API_KEY}"


def test_non_streaming(scripted_llm: ScriptedLLM, llm_spec) -> None:
    scripted_llm.push(Reply(text="plain", tool_calls=[("run", {"cmd": "ls"})]))
    seen: list[str] = []
    result = llm.complete(llm_spec(), MSGS, TOOLS, stream=False, on_text=seen.append)
    assert result.text == "plain" and seen == ["plain"]
    assert [(c.name, c.parsed_arguments()) for c in result.tool_calls] == [("run", {"cmd": "ls"})]
    assert result.finish_reason == "tool_calls"
    assert scripted_llm.requests[0].get("stream") in (None, False)


def test_two_tool_calls_split_over_chunks(scripted_llm: ScriptedLLM, llm_spec) -> None:
    scripted_llm.push(Reply(
        text="Let me look.",
        tool_calls=[("read_file", {"path": "src/main.py"}), ("run", {"cmd": "pytest -q tests/ && echo ok"})],
        args_chunk_size=3))
    result = llm.complete(llm_spec(), MSGS, TOOLS)
    assert result.text == "Let me look."
    assert result.finish_reason == "tool_calls"
    assert [c.name for c in result.tool_calls] == ["read_file", "run"]
    assert result.tool_calls[0].parsed_arguments() == {"path": "src/main.py"}
    assert result.tool_calls[1].parsed_arguments() == {"cmd": "pytest -q tests/ && echo ok"}
    ids = [c.id for c in result.tool_calls]
    assert all(ids) and len(set(ids)) == 2
    assert [t["function"]["name"] for t in scripted_llm.requests[0]["tools"]] == ["read_file", "run"]


@pytest.mark.parametrize("style", ["whole", "repeat_final", "no_index"])
def test_tool_call_stream_styles(scripted_llm: ScriptedLLM, llm_spec, style: str) -> None:
    # provider variants: complete calls in one chunk, complete args re-sent at the end, no "index"
    # (litellm turns a missing index into 0 for every call)
    scripted_llm.push(Reply(tool_calls=[("read_file", {"path": "a.py"}), ("run", {"cmd": "make test"})],
                            tool_call_style=style))
    result = llm.complete(llm_spec(), MSGS, TOOLS)
    assert [(c.name, c.parsed_arguments()) for c in result.tool_calls] == [
        ("read_file", {"path": "a.py"}), ("run", {"cmd": "make test"})]
    assert len({c.id for c in result.tool_calls}) == 2


def test_malformed_tool_arguments(scripted_llm: ScriptedLLM, llm_spec) -> None:
    scripted_llm.push(Reply(tool_calls=[("read_file", '{"path": "a.py"'), ("run", "[1, 2]")]))
    result = llm.complete(llm_spec(), MSGS, TOOLS)
    bad, not_object = result.tool_calls
    assert bad.arguments == '{"path": "a.py"'  # raw text preserved
    with pytest.raises(LLMError, match="malformed tool-call arguments for read_file"):
        bad.parsed_arguments()
    with pytest.raises(LLMError, match="malformed tool-call arguments for run"):
        not_object.parsed_arguments()
    assert ToolCall("x", "noargs", "").parsed_arguments() == {}


def test_rate_limited_then_success(scripted_llm: ScriptedLLM, llm_spec) -> None:
    scripted_llm.push(Reply(status=429, error_message="slow down"), Reply(text="finally"))
    retries: list[str] = []
    result = llm.complete(llm_spec(max_retries=2), MSGS, on_retry=retries.append)
    assert result.text == "finally"
    assert result.attempts == 2 and len(scripted_llm.requests) == 2
    assert len(retries) == 1 and "rate limited (429)" in retries[0]


def test_rate_limit_exhausted_message(scripted_llm: ScriptedLLM, llm_spec) -> None:
    scripted_llm.push(Reply(status=429, error_message="slow down"), Reply(status=429, error_message="slow down"))
    with pytest.raises(LLMError) as info:
        llm.complete(llm_spec(max_retries=1), MSGS)
    assert str(info.value) == "rate limited (429) by openai/test-model: slow down"
    assert info.value.kind == "rate_limit" and info.value.status == 429
    assert len(scripted_llm.requests) == 2  # 1 + max_retries; no hidden SDK retries


def test_server_errors_exhausted_then_fallback(scripted_llm: ScriptedLLM, llm_spec) -> None:
    scripted_llm.push(Reply(status=500), Reply(status=500), Reply(text="from the fallback"))
    notes: list[str] = []
    result = llm.complete(llm_spec(max_retries=1, fallbacks=("openai/backup-model",)), MSGS, on_retry=notes.append)
    assert result.text == "from the fallback"
    assert result.model == "openai/backup-model"
    assert [r["model"] for r in scripted_llm.requests] == ["test-model", "test-model", "backup-model"]
    assert "falling back to openai/backup-model" in notes[-1]


def test_all_models_fail(scripted_llm: ScriptedLLM, llm_spec) -> None:
    scripted_llm.push(Reply(status=503), Reply(status=500))
    with pytest.raises(LLMError) as info:
        llm.complete(llm_spec(fallbacks=("openai/backup-model",)), MSGS)
    msg = str(info.value)
    assert msg.startswith("all models failed:") and "openai/backup-model" in msg and "\n" not in msg


def test_script_exhausted_is_a_clear_error(scripted_llm: ScriptedLLM, llm_spec) -> None:
    with pytest.raises(LLMError, match="script exhausted"):
        llm.complete(llm_spec(), MSGS)


def test_timeout(scripted_llm: ScriptedLLM, llm_spec) -> None:
    scripted_llm.push(Reply(text="too late", delay_s=3))
    started = time.monotonic()
    with pytest.raises(LLMError) as info:
        llm.complete(llm_spec(timeout_s=0.75), MSGS)
    elapsed = time.monotonic() - started
    assert str(info.value) == "model openai/test-model timed out after 0.75s"
    assert info.value.kind == "timeout" and info.value.retryable
    assert 0.7 <= elapsed < 1.5  # within ~2x the timeout


def test_timeout_between_chunks(scripted_llm: ScriptedLLM, llm_spec) -> None:
    # timeout_s is an inactivity timeout: a stream that stalls mid-way times out too
    scripted_llm.push(Reply(text="abcdefgh", text_chunk_size=2, chunk_delay_s=2))
    started = time.monotonic()
    with pytest.raises(LLMError, match="timed out after 0.5s"):
        llm.complete(llm_spec(timeout_s=0.5), MSGS)
    assert time.monotonic() - started < 1.5


def test_dropped_stream_raises(scripted_llm: ScriptedLLM, llm_spec) -> None:
    scripted_llm.push(Reply(text="this answer will be cut off", drop_stream_after=3))
    fragments: list[str] = []
    with pytest.raises(LLMError) as info:
        llm.complete(llm_spec(max_retries=0), MSGS, on_text=fragments.append)
    assert info.value.kind == "dropped" and "cut off" in str(info.value)
    assert fragments  # some text had streamed before the drop


def test_cleanly_truncated_stream_raises(scripted_llm: ScriptedLLM, llm_spec) -> None:
    # body ends "normally" but without finish chunk / [DONE]: litellm would report finish_reason='stop'
    scripted_llm.push(Reply(text="this answer will be cut off", drop_stream_after=3, clean_eof=True))
    with pytest.raises(LLMError) as info:
        llm.complete(llm_spec(max_retries=0), MSGS)
    assert info.value.kind == "dropped"


def test_dropped_stream_retried(scripted_llm: ScriptedLLM, llm_spec) -> None:
    scripted_llm.push(Reply(text="this answer will be cut off", drop_stream_after=3),
                      Reply(text="complete answer", tool_calls=[("run", {"cmd": "ls"})]))
    resets: list[str] = []
    result = llm.complete(llm_spec(max_retries=1), MSGS, TOOLS, on_retry=resets.append)
    assert result.text == "complete answer"
    assert [c.name for c in result.tool_calls] == ["run"]
    assert result.attempts == 2 and len(resets) == 1


def test_cancel_while_waiting(scripted_llm: ScriptedLLM, llm_spec) -> None:
    scripted_llm.push(Reply(text="slow", delay_s=2))
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(LLMCancelled):
        llm.complete(llm_spec(), MSGS, cancel=cancel)
    assert time.monotonic() - started < 1.5


def test_cancel_mid_stream(scripted_llm: ScriptedLLM, llm_spec) -> None:
    scripted_llm.push(Reply(text="one two three four five six", chunk_delay_s=0.05))
    cancel = threading.Event()
    fragments: list[str] = []

    def on_text(piece: str) -> None:
        fragments.append(piece)
        if len(fragments) == 2:
            cancel.set()

    with pytest.raises(LLMCancelled) as info:
        llm.complete(llm_spec(), MSGS, on_text=on_text, cancel=cancel)
    assert info.value.kind == "cancelled"
    assert info.value.partial_text == "".join(fragments) == "one two "


def test_missing_key_env(scripted_llm: ScriptedLLM, llm_spec, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WS_MISSING_KEY", raising=False)
    with pytest.raises(LLMError, match="WS_MISSING_KEY"):
        llm.complete(llm_spec(api_key_env="WS_MISSING_KEY"), MSGS)
    assert scripted_llm.requests == []


def test_api_key_never_leaks(scripted_llm: ScriptedLLM, llm_spec, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    logging.getLogger("LiteLLM").setLevel(logging.DEBUG)  # make litellm as chatty as it gets
    try:
        scripted_llm.push(
            Reply(status=401, error_message=f"Incorrect API key provided: {FAKE_API_KEY}"),
            Reply(status=429, error_message=f"key {FAKE_API_KEY} is over quota"),
            Reply(status=500, error_message=f"upstream rejected Bearer {FAKE_API_KEY}"),
            Reply(text="x" * 40, drop_stream_after=2),
            Reply(text="fine"),
        )
        errors: list[LLMError] = []
        for _ in range(4):
            with pytest.raises(LLMError) as info:
                llm.complete(llm_spec(), MSGS)
            errors.append(info.value)
        assert llm.complete(llm_spec(), MSGS).text == "fine"
    finally:
        logging.getLogger("LiteLLM").setLevel(logging.WARNING)
    assert [e.kind for e in errors] == ["auth", "rate_limit", "server", "dropped"]
    for e in errors:
        assert FAKE_API_KEY not in str(e) and FAKE_API_KEY[:12] not in str(e)
        assert FAKE_API_KEY not in repr(e)
    assert caplog.records  # litellm did log at DEBUG
    assert FAKE_API_KEY not in caplog.text
    assert FAKE_API_KEY[:12] not in caplog.text


def test_count_tokens_offline() -> None:
    n = llm.count_tokens("gpt-4o", messages=MSGS)
    assert 5 <= n <= 40
    assert llm.count_tokens("openai/test-model", text="hello world") in (2, 3)
    assert llm.count_tokens("ollama/llama-3-8b", text="hello world " * 10) > 10  # no HF download
    assert llm.count_tokens("gpt-4o") == 0
    both = llm.count_tokens("gpt-4o", messages=MSGS, text="more text")
    assert both > n


def test_context_window() -> None:
    assert llm.context_window("gpt-4o") == 128000
    assert llm.context_window("openai/test-model") == llm.DEFAULT_CONTEXT_WINDOW == 32768
    llm.set_context_window("openai/test-model", 8000)
    try:
        assert llm.context_window("openai/test-model") == 8000
    finally:
        llm.set_context_window("openai/test-model", None)
    assert llm.context_window("openai/test-model") == 32768


def test_a_models_figures_read_without_litellm_are_litellms() -> None:
    """context_window and output_limit read litellm's bundled map without importing litellm; where litellm
    itself has figures for a model, they are the same (models as users name them, and a sample of the map)."""
    from workstation.llm.usage import bundled_model_info

    from workstation.llm.client import load_litellm

    lit = load_litellm()
    named = ["gpt-4o", "openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5", "claude-haiku-4-5",
             "gemini/gemini-2.5-pro", "deepseek/deepseek-chat", "mistral/mistral-large-latest"]
    sample = list(lit.model_cost)[::40]
    compared = 0
    for model in named + sample + [f"openai/{m}" for m in sample if "/" not in m]:
        ours = bundled_model_info(model)
        if model in named:
            assert ours is not None, model
        try:
            theirs = lit.get_model_info(model)
        except Exception:  # litellm has no figures for it (a provider it cannot resolve from the name)
            continue
        if ours is None:
            continue  # not in the map as named: litellm decides, as before
        compared += 1
        # as context_window and output_limit read them
        assert (ours.get("max_input_tokens") or ours.get("max_tokens")) == \
            (theirs.get("max_input_tokens") or theirs.get("max_tokens")), model
        assert ours.get("max_output_tokens") == theirs.get("max_output_tokens"), model
    assert compared > 100
    assert bundled_model_info("openai/test-model") is None
    assert bundled_model_info("openai/claude-sonnet-4-5") is None  # in the map, but not as an OpenAI model


def test_fake_server_models_and_responder() -> None:
    import json
    import urllib.request

    seen: list[dict] = []

    def responder(body: dict) -> Reply:
        seen.append(body)
        return Reply(text=f"echo {body['messages'][-1]['content']}")

    with ScriptedLLM(responder) as server:
        with urllib.request.urlopen(server.url + "/models") as resp:
            assert json.load(resp)["data"][0]["id"] == "test-model"
        spec = ModelSpec("openai/test-model", api_base=server.url, timeout_s=5, max_retries=0)
        assert llm.complete(spec, MSGS).text == "echo hi"
        assert llm.complete(spec, MSGS, stream=False).text == "echo hi"
        assert len(seen) == 2 and server.requests == seen


def test_fallbacks_and_model_switches_keep_each_provider_to_its_own_endpoint_and_key(tmp_path) -> None:
    from workstation.runtime import Workspace

    primary = ModelSpec("openai/gpt-4o", api_base="http://127.0.0.1:9/v1", api_key_env="OPENAI_API_KEY",
                        fallbacks=("openai/gpt-4o-mini", "anthropic/claude-3-5-haiku"))
    same, other = llm.model_chain(primary)[1:]
    assert (same.api_base, same.api_key_env) == ("http://127.0.0.1:9/v1", "OPENAI_API_KEY")
    assert (other.model, other.api_base, other.api_key_env) == ("anthropic/claude-3-5-haiku", None, None)

    from workstation.paths import user_dir

    user_dir().mkdir(parents=True, exist_ok=True)  # the user's own config: a workspace never names endpoints
    (user_dir() / "config.toml").write_text(
        '[model]\nname = "openai/gpt-4o"\napi_base = "http://127.0.0.1:9/v1"\napi_key_env = "OPENAI_API_KEY"\n')
    with Workspace(tmp_path) as ws:
        assert ws.model_spec().api_base == "http://127.0.0.1:9/v1"
        assert ws.model_spec("openai/gpt-4o-mini").api_key_env == "OPENAI_API_KEY"
        switched = ws.model_spec("anthropic/claude-3-5-haiku")  # as /model does
        assert (switched.api_base, switched.api_key_env) == (None, None)
