"""The one provider rule: which model may use the configured endpoint and key."""

from __future__ import annotations

import pytest

from workstation.config import ModelConfig
from workstation.llm import ModelSpec, model_chain
from workstation.providers import provider_of, same_provider, spec_for

BASE = "https://llm.internal.example/v1"


@pytest.mark.parametrize("model, provider", [
    ("openai/gpt-4o", "openai"), ("OpenAI/gpt-4o", "openai"), ("anthropic/claude-sonnet-4-5", "anthropic"),
    ("ollama/qwen2.5-coder", "ollama"), ("openrouter/anthropic/claude-3", "openrouter"),
    ("gpt-4o-mini", "openai"), ("o3-mini", "openai"), ("claude-3-5-haiku", "anthropic"),
    ("gemini-1.5-pro", "gemini"), ("grok-2", "xai"), ("my-local-model", ""), ("", ""),
])
def test_provider_of(model, provider):
    assert provider_of(model) == provider


# configured model, requested model, whether the configured api_base and key variable go with it
CASES = [
    ("openai/gpt-4o", "openai/gpt-4o", True),            # the configured model itself
    ("openai/gpt-4o", "openai/gpt-4o-mini", True),       # same provider, other model
    ("openai/gpt-4o", "gpt-4o-mini", True),              # a bare name of the same provider
    ("gpt-4o", "openai/gpt-4o-mini", True),
    ("openai/gpt-4o", "anthropic/claude-sonnet-4-5", False),  # never another provider's key or base
    ("openai/gpt-4o", "claude-3-5-haiku", False),
    ("anthropic/claude-sonnet-4-5", "openai/gpt-4o", False),
    ("openai/gpt-4o", "ollama/llama3", False),
    ("my-local-model", "my-local-model", True),          # unknown, but it is the configured one
    ("my-local-model", "other-local-model", False),      # unknown providers are never the same
    ("", "anthropic/claude-sonnet-4-5", True),           # a config naming no model lends its endpoint
]


@pytest.mark.parametrize("configured, requested, shared", CASES)
def test_the_configured_endpoint_goes_only_to_the_same_provider(configured, requested, shared):
    config = ModelConfig(name=configured, api_base=BASE, api_key_env="CORP_LLM_KEY", fallbacks=["openai/gpt-4o"],
                         timeout_s=7, max_retries=1)
    spec = spec_for(config, requested)
    assert spec.model == requested
    assert (spec.api_base, spec.api_key_env) == ((BASE, "CORP_LLM_KEY") if shared else (None, None))
    assert (spec.timeout_s, spec.max_retries) == (7, 1)  # timeouts are the user's, whatever the provider


@pytest.mark.parametrize("configured, requested, shared", [c for c in CASES if c[0]])
def test_fallbacks_follow_the_same_rule(configured, requested, shared):
    spec = ModelSpec(configured, api_base=BASE, api_key_env="CORP_LLM_KEY", fallbacks=(requested,))
    fallback = model_chain(spec)[1]
    assert (fallback.api_base, fallback.api_key_env) == ((BASE, "CORP_LLM_KEY") if shared else (None, None))


def test_same_provider_needs_a_known_provider():
    assert same_provider("openai/a", "gpt-4o") and not same_provider("my-model", "my-model")


def test_no_model_anywhere_is_none_and_fallbacks_can_be_left_out():
    assert spec_for(ModelConfig()) is None
    config = ModelConfig(name="openai/gpt-4o", fallbacks=["openai/gpt-4o-mini"])
    assert spec_for(config).fallbacks == ("openai/gpt-4o-mini",)
    assert spec_for(config, fallbacks=False).fallbacks == ()


def test_the_output_limit_describes_the_configured_model_only():
    """model.max_output_tokens bounds a streamed answer (llm.attempt.stream_budget): the configured model's,
    never another model's, which gets litellm's figure for itself."""
    from workstation.llm.attempt import STREAM_SLACK_CHUNKS, stream_budget

    config = ModelConfig(name="openai/gpt-4o", max_output_tokens=2_000)
    assert stream_budget(spec_for(config)) == (2_000, 2_000 + STREAM_SLACK_CHUNKS)
    assert spec_for(config, "anthropic/claude-sonnet-4-5-20250929").max_output_tokens == 0
    assert stream_budget(spec_for(config, "anthropic/claude-sonnet-4-5-20250929"))[0] == 64_000  # litellm's
    assert stream_budget(spec_for(ModelConfig(name="openai/unknown-model")))[0] == 16_384  # none known


def test_compaction_and_the_workspace_use_the_rule(tmp_path):
    from workstation.config import Config
    from workstation.runtime import Workspace
    from workstation.sessions.compaction import _spec

    config = Config(model=ModelConfig(name="openai/gpt-4o", api_base=BASE, api_key_env="CORP_LLM_KEY"))
    assert _spec(config, "anthropic/claude-3-5-haiku").api_base is None
    assert _spec(config, "openai/gpt-4o-mini").api_base == BASE
    ws = Workspace(tmp_path, overrides={"model": {"name": "openai/gpt-4o", "api_base": BASE}})
    assert ws.model_spec("anthropic/claude-3-5-haiku").api_base is None
    assert ws.model_spec().api_base == BASE
    ws.close()
