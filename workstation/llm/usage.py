"""Tokens, context windows and cost: counting what a call sends, reading what the provider says it used
(cache reads and writes included), and pricing it from litellm's bundled price map."""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import os
import re
import threading
from typing import Any, Optional

from .client import load_litellm

log = logging.getLogger("workstation.llm")

DEFAULT_CONTEXT_WINDOW = 32768
# The output limit assumed for a model litellm does not know (local and custom ones; litellm's own figures
# run from 4,096 to 128,000): set model.max_output_tokens for a model that writes more in one answer.
DEFAULT_OUTPUT_LIMIT = 16_384


def _flatten_for_estimate(messages: Optional[list[dict]]) -> str:
    parts: list[str] = []
    for m in messages or []:
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif content is not None:
            parts.append(json.dumps(content, default=str))
        if m.get("tool_calls"):
            parts.append(json.dumps(m["tool_calls"], default=str))
        parts.append(str(m.get("role", "")))
    return "\n".join(parts)


def count_tokens(model: str, messages: Optional[list[dict]] = None, text: Optional[str] = None) -> int:
    """Tokens in ``messages`` plus ``text`` for ``model``, via ``litellm.token_counter`` (offline:
    tiktoken files bundled with litellm; HF tokenizer downloads are disabled, so e.g. llama models
    are counted with cl100k).  Only if the counter raises do we fall back to ``len(chars) // 4``."""
    if not messages and not text:
        return 0
    try:
        lit = load_litellm()
        total = 0
        if messages:
            total += int(lit.token_counter(model=model, messages=messages))
        if text:
            total += int(lit.token_counter(model=model, text=text))
        return total
    except Exception as e:  # documented fallback: rough chars/4 estimate
        log.debug("token_counter failed for %s (%s); using len//4 estimate", model, type(e).__name__)
        return (len(_flatten_for_estimate(messages)) + len(text or "")) // 4


@functools.lru_cache(maxsize=1)
def _bundled_map_text() -> str:
    spec = importlib.util.find_spec("litellm")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return ""
    path = os.path.join(list(spec.submodule_search_locations)[0], "model_prices_and_context_window_backup.json")
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError:
        return ""


def bundled_model_info(model: str, _hops: int = 3) -> dict[str, Any] | None:
    """The entry of `model` in litellm's bundled model map, read from its file without importing litellm (200 MB
    and seconds: a model's window must not cost that before its first call): the model's own key, else, for
    `provider/name`, the key `name` when the entry is that provider's. None when neither is there: then
    litellm's get_model_info decides (its aliases, provider rules and local servers)."""
    text = _bundled_map_text()
    names: list[tuple[str, str | None]] = [(model, None)]
    if "/" in model:
        prefix, bare = model.split("/", 1)
        names.append((bare, prefix))
    for name, provider in names:
        found = re.search(r"\n\s*" + re.escape(json.dumps(name)) + r":\s*\{", text)
        if found is None:
            continue
        try:
            entry, _end = json.JSONDecoder().raw_decode(text, found.end() - 1)
        except ValueError:
            return None
        if isinstance(entry, dict) and (provider is None or entry.get("litellm_provider") == provider):
            alias = entry.get("alias_of")  # the entry is another's name: that one's figures
            if alias is not None:
                return bundled_model_info(alias, _hops - 1) if isinstance(alias, str) and _hops > 0 else None
            return entry
    return None


_ctx_overrides: dict[str, int] = {}
_ctx_cache: dict[str, int] = {}
_ctx_lock = threading.Lock()


def set_context_window(model: str, tokens: Optional[int]) -> None:
    """Override the context window of ``model`` (e.g. from user config); ``None`` removes the override."""
    with _ctx_lock:
        if tokens is None:
            _ctx_overrides.pop(model, None)
        else:
            _ctx_overrides[model] = int(tokens)


def context_window(model: str) -> int:
    """Max input tokens of ``model``: override, else litellm's model info (``max_input_tokens``, then
    ``max_tokens``), else DEFAULT_CONTEXT_WINDOW (32768).  Cached per model."""
    with _ctx_lock:
        if model in _ctx_overrides:
            return _ctx_overrides[model]
        if model in _ctx_cache:
            return _ctx_cache[model]
    n: Optional[int] = None
    try:
        info = bundled_model_info(model) or load_litellm().get_model_info(model)
        n = info.get("max_input_tokens") or info.get("max_tokens")
    except Exception:
        n = None
    result = int(n) if n else DEFAULT_CONTEXT_WINDOW
    with _ctx_lock:
        _ctx_cache[model] = result
    return result


_out_cache: dict[str, int] = {}


def output_limit(model: str) -> int:
    """Max output tokens of ``model`` in one answer: litellm's model info (``max_output_tokens``), else
    DEFAULT_OUTPUT_LIMIT. Cached per model."""
    with _ctx_lock:
        if model in _out_cache:
            return _out_cache[model]
    try:
        n = (bundled_model_info(model) or load_litellm().get_model_info(model)).get("max_output_tokens")
    except Exception:  # a model litellm has no figures for
        n = None
    result = int(n) if n else DEFAULT_OUTPUT_LIMIT
    with _ctx_lock:
        _out_cache[model] = result
    return result


def usage_cost(model: str, tokens_in: int, tokens_out: int, cache_read: int = 0, cache_creation: int = 0,
          cache_creation_1h: int = 0) -> Optional[float]:
    """The call's cost from litellm's bundled price map (cached input priced as such, 1-hour writes at
    their own price); None when it has no price for the model."""
    try:
        lit = load_litellm()
        extra: dict[str, Any] = {}
        if cache_creation_1h:  # only a usage object carries the split of the writes by lifetime
            from litellm.types.utils import CacheCreationTokenDetails, PromptTokensDetailsWrapper  # lazy: litellm

            split = CacheCreationTokenDetails(ephemeral_5m_input_tokens=cache_creation - cache_creation_1h,
                                              ephemeral_1h_input_tokens=cache_creation_1h)
            extra["usage_object"] = lit.Usage(
                prompt_tokens=tokens_in, completion_tokens=tokens_out, total_tokens=tokens_in + tokens_out,
                cache_read_input_tokens=cache_read, cache_creation_input_tokens=cache_creation,
                prompt_tokens_details=PromptTokensDetailsWrapper(cached_tokens=cache_read,
                                                                 cache_creation_tokens=cache_creation,
                                                                 cache_creation_token_details=split))
        p, c = lit.cost_per_token(model=model, prompt_tokens=tokens_in, completion_tokens=tokens_out,
                                  cache_read_input_tokens=cache_read, cache_creation_input_tokens=cache_creation,
                                  **extra)
        return float(p) + float(c)
    except Exception:  # an unknown model, or a litellm without these arguments: no price rather than a guess
        return None


def usage_of(usage: Any) -> Optional[tuple[int, int, int, int, int]]:
    """(prompt, completion, cache read, cache creation, of it for 1 hour) tokens of a provider's usage, as
    litellm maps it: Anthropic's cache_read_input_tokens / cache_creation_input_tokens (the 1-hour share in
    prompt_tokens_details.cache_creation_token_details, from Anthropic's cache_creation split), OpenAI's
    prompt_tokens_details.cached_tokens. None when the usage names no token counts."""
    pt, ct = field_of(usage, "prompt_tokens"), field_of(usage, "completion_tokens")
    if pt is None and ct is None:
        return None
    details = field_of(usage, "prompt_tokens_details")
    read = field_of(usage, "cache_read_input_tokens")
    if not read:
        read = field_of(details, "cached_tokens")
    created = field_of(usage, "cache_creation_input_tokens")
    hour = field_of(field_of(details, "cache_creation_token_details"), "ephemeral_1h_input_tokens")
    if hour is None:
        hour = field_of(field_of(usage, "cache_creation"), "ephemeral_1h_input_tokens")
    created = int(created or 0)
    return int(pt or 0), int(ct or 0), int(read or 0), created, min(int(hour or 0), created)


def field_of(obj: Any, key: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)
