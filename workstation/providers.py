"""Which provider a model string belongs to, and the one rule for what crosses between providers.

A configured `api_base` and `api_key_env` belong to the provider of the configured model. Another
model (a fallback, a `/model` switch, a compaction or description model) gets them only when it is
the *same provider*; otherwise it uses its provider's own defaults (litellm reads that provider's
usual key variable), so one provider's key or private endpoint is never sent to another.

Same provider means: both provider names are known and equal. A litellm string names its provider as
a prefix (`anthropic/claude-...`); a bare name is recognised by its family (`gpt-4o` is openai,
`claude-3-5-sonnet` anthropic, ...). An unknown bare name has no known provider, so nothing crosses.
No litellm import here (it takes ~3 s): the families below are the ones litellm itself routes bare.

How a request asks a provider to cache its prompt is decided here too (`cache_style`, and where
Anthropic's breakpoints go: `with_cache_breakpoints`), so that callers pass the same cache settings
whatever the model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Union

if TYPE_CHECKING:
    from .config import ModelConfig

# Bare model names litellm routes to a provider without a prefix.
_BARE_FAMILIES = (
    (re.compile(r"^(?:gpt-|chatgpt-|o[1-9](?:-|$)|text-embedding-|davinci|babbage|ft:gpt)"), "openai"),
    (re.compile(r"^claude-"), "anthropic"),
    (re.compile(r"^(?:gemini-|gemma-)"), "gemini"),
    (re.compile(r"^command(?:-|$)"), "cohere"),
    (re.compile(r"^(?:mistral-|mixtral-|codestral-|open-mistral-|pixtral-)"), "mistral"),
    (re.compile(r"^grok-"), "xai"),
    (re.compile(r"^deepseek-"), "deepseek"),
)


@dataclass
class ModelSpec:
    """How to call one model (llm.complete takes it; `spec_for` makes it from a `[model]` config)."""

    model: str  # litellm model string, e.g. 'openai/gpt-4o', 'anthropic/claude-sonnet-4-5'
    api_base: Optional[str] = None
    api_key_env: Optional[str] = None  # NAME of the env var holding the key (never the key)
    timeout_s: float = 60  # inactivity timeout, see the llm module doc
    max_retries: int = 2  # retries after the first attempt, per model
    # Fallback models, tried in order after this one failed.  A plain string inherits timeouts and
    # extra_params from this spec, and api_base / api_key_env when it names the same provider;
    # a ModelSpec is used as is.
    fallbacks: tuple[Union[str, "ModelSpec"], ...] = ()
    backoff_s: float = 1.0  # first retry delay; doubles each retry (+-20 % jitter), capped at MAX_BACKOFF_S
    extra_params: dict[str, Any] = field(default_factory=dict)  # passed to litellm.completion (temperature, ...)
    cache_ttl: str = "5m"  # lifetime of the prompt-cache breakpoints (CACHE_TTLS; agent.cache_ttl)
    # the most tokens the model writes in one answer (model.max_output_tokens); 0: litellm's figure for it.
    # A stream of more chunks than this is not the model's answer and is left (llm.attempt).
    max_output_tokens: int = 0


def provider_of(model: str) -> str:
    """The provider of a litellm model string: its prefix ("openai/gpt-4o" -> "openai"), the family of
    a bare name ("claude-3-opus" -> "anthropic"), or "" when unknown."""
    model = (model or "").strip()
    if "/" in model:
        return model.split("/", 1)[0].lower()
    for pattern, provider in _BARE_FAMILIES:
        if pattern.match(model.lower()):
            return provider
    return ""


CACHE_TTLS = ("5m", "1h")  # the lifetimes of a prompt-cache entry a request may ask for


def cache_ttl_seconds(ttl: str) -> float:
    """How long a provider keeps a cached prefix unused, for a CACHE_TTLS value (agent.cache_ttl)."""
    return 3600.0 if ttl == "1h" else 300.0


def cache_style(model: str) -> str:
    """How a request to `model` asks for prompt caching: "anthropic" (`cache_control` breakpoints: Claude
    on Anthropic's API, on Bedrock or on Vertex AI), "openai" (`prompt_cache_key`: OpenAI and the
    OpenAI-compatible servers named openai/...), or "" (nothing to ask: the provider caches repeated
    prefixes on its own, or not at all)."""
    model = (model or "").strip().lower()
    provider = provider_of(model)
    if provider == "anthropic":
        return "anthropic"
    if provider in ("bedrock", "vertex_ai") and "claude" in model.split("/", 1)[1]:
        return "anthropic"
    if provider == "openai":
        return "openai"
    return ""


def same_provider(a: str, b: str) -> bool:
    """Whether one model's endpoint and key may be used for the other (see the module docstring)."""
    pa, pb = provider_of(a), provider_of(b)
    return bool(pa) and pa == pb


def shares_endpoint(configured: str, requested: str) -> bool:
    """Whether `requested` may use the endpoint and key configured for `configured`: it is that model,
    or the same provider, or the configuration names no model at all."""
    configured, requested = configured.strip(), requested.strip()
    return not configured or requested == configured or same_provider(requested, configured)


def spec_for(config: "ModelConfig", name: str | None = None, *, fallbacks: bool = True,
             cache_ttl: str = "5m") -> ModelSpec | None:
    """The ModelSpec to call `name` (default: the configured model) with this `[model]` config: its
    timeouts and retries always; its `api_base` and `api_key_env` only for the configured model itself
    or the same provider (a config that names no model lends its endpoint to whatever model is named);
    its fallbacks when `fallbacks` (llm.complete applies the same rule to each of them); `cache_ttl`
    (agent.cache_ttl) for the prompt-cache breakpoints. None when no model is named anywhere."""
    configured = config.name.strip()
    name = (name or configured).strip()
    if not name:
        return None
    shared = shares_endpoint(configured, name)
    return ModelSpec(name, api_base=(config.api_base or None) if shared else None,
                     api_key_env=(config.api_key_env or None) if shared else None,
                     timeout_s=config.timeout_s, max_retries=config.max_retries,
                     fallbacks=tuple(config.fallbacks) if fallbacks else (), cache_ttl=cache_ttl,
                     max_output_tokens=config.max_output_tokens if name == configured else 0)


def with_cache_breakpoints(messages: list[dict], tools: list[dict] | None, ttl: str = "5m"
                           ) -> tuple[list[dict], list[dict] | None]:
    """Copies of `messages` and `tools` with Anthropic ``cache_control`` breakpoints, at most 4, each
    ending a prefix worth caching (the order of the cached prefix is tools, system, messages):

    * the last tool schema (the tools alone: kept when the system changes),
    * the last message of the leading run of system messages (the stable head),
    * the last message (the whole request: what the next request starts with),
    * the last message before the newest assistant message (what the previous request ended with: an
      exact hit even when the step since added more blocks than the service looks back over, ~20).

    Every breakpoint has `ttl` ("5m" or "1h"), so no longer-lived one follows a shorter one. A marker
    changes nothing else in what litellm sends: a tool message is marked as a whole (litellm marks its
    tool_result block, the content stays a string), an assistant message with tool calls on its last
    call (its last block), any other message on its last content block, string content turned into one
    text block only there (litellm sends string content as one text block anyway).
    """
    marker: dict[str, str] = {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}
    if tools:
        tools = [*tools[:-1], {**tools[-1], "cache_control": dict(marker)}]
    out = list(messages)
    head = 0
    while head < len(out) and out[head].get("role") == "system":
        head += 1
    targets = {len(out) - 1} if out else set()
    if head:
        targets.add(head - 1)
    assistants = [i for i, m in enumerate(out) if m.get("role") == "assistant"]
    if assistants and assistants[-1] > 0:
        targets.add(assistants[-1] - 1)
    for i in targets:
        out[i] = _marked(out[i], marker)
    return out, tools


def _marked(message: dict, marker: dict) -> dict:
    message = dict(message)
    content = message.get("content")
    if message.get("role") == "tool":
        message["cache_control"] = dict(marker)
    elif message.get("role") == "assistant" and message.get("tool_calls"):
        calls = list(message["tool_calls"])
        calls[-1] = {**calls[-1], "cache_control": dict(marker)}
        message["tool_calls"] = calls
    elif isinstance(content, str) and content:
        message["content"] = [{"type": "text", "text": content, "cache_control": dict(marker)}]
    elif isinstance(content, list) and content and isinstance(content[-1], dict):
        message["content"] = [*content[:-1], {**content[-1], "cache_control": dict(marker)}]
    else:  # nothing to put a block marker on: litellm carries a message-level one where it can
        message["cache_control"] = dict(marker)
    return message
