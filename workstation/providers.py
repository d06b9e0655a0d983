"""Which provider a model string belongs to, and the one rule for what crosses between providers.

A configured `api_base` and `api_key_env` belong to the provider of the configured model. Another
model (a fallback, a `/model` switch, a compaction or description model) gets them only when it is
the *same provider*; otherwise it uses its provider's own defaults (litellm reads that provider's
usual key variable), so one provider's key or private endpoint is never sent to another.

Same provider means: both provider names are known and equal. A litellm string names its provider as
a prefix (`anthropic/claude-...`); a bare name is recognised by its family (`gpt-4o` is openai,
`claude-3-5-sonnet` anthropic, ...). An unknown bare name has no known provider, so nothing crosses.
No litellm import here (it takes ~3 s): the families below are the ones litellm itself routes bare.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import ModelConfig
    from .llm import ModelSpec

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


def same_provider(a: str, b: str) -> bool:
    """Whether one model's endpoint and key may be used for the other (see the module docstring)."""
    pa, pb = provider_of(a), provider_of(b)
    return bool(pa) and pa == pb


def shares_endpoint(configured: str, requested: str) -> bool:
    """Whether `requested` may use the endpoint and key configured for `configured`: it is that model,
    or the same provider, or the configuration names no model at all."""
    configured, requested = configured.strip(), requested.strip()
    return not configured or requested == configured or same_provider(requested, configured)


def spec_for(config: "ModelConfig", name: str | None = None, *, fallbacks: bool = True) -> "ModelSpec | None":
    """The ModelSpec to call `name` (default: the configured model) with this `[model]` config: its
    timeouts and retries always; its `api_base` and `api_key_env` only for the configured model itself
    or the same provider (a config that names no model lends its endpoint to whatever model is named);
    its fallbacks when `fallbacks` (llm.complete applies the same rule to each of them). None when no
    model is named anywhere."""
    from .llm import ModelSpec  # lazy: cycle, llm imports providers

    configured = config.name.strip()
    name = (name or configured).strip()
    if not name:
        return None
    shared = shares_endpoint(configured, name)
    return ModelSpec(name, api_base=(config.api_base or None) if shared else None,
                     api_key_env=(config.api_key_env or None) if shared else None,
                     timeout_s=config.timeout_s, max_retries=config.max_retries,
                     fallbacks=tuple(config.fallbacks) if fallbacks else ())
