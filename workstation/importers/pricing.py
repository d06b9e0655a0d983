"""Offline prices of model calls, from the price map litellm ships in its wheel.

litellm reads `model_prices_and_context_window_backup.json` from its own package when
LITELLM_LOCAL_MODEL_COST_MAP=True (what workstation.llm sets), instead of downloading it. That
file is read here directly, located with find_spec: the same prices, without the ~3 s import of
litellm, and nothing is ever fetched.

A call costs: uncached input x input price + cache writes x cache-creation price + cache reads x
cache-read price + output x output price, the whole call at the `_above_200k_tokens` prices when
its prompt passes 200k tokens and the map has them. Model names are looked up as given, then
without a provider prefix, without a date suffix (`claude-sonnet-4-5-20250929` ->
`claude-sonnet-4-5`), then as the provider-prefixed names the map keeps for retired models
(`anthropic.claude-3-5-sonnet-20241022-v2:0`). A model found nowhere has no price (None).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import threading
from functools import lru_cache
from typing import Any

_MAP_FILE = "model_prices_and_context_window_backup.json"
_lock = threading.Lock()
_DATE = re.compile(r"-\d{8}$|@\d{8}$")


@lru_cache(maxsize=1)
def price_map() -> dict[str, dict]:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = os.path.join(list(spec.submodule_search_locations)[0], _MAP_FILE)
    try:
        with open(path, "rb") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)}


@lru_cache(maxsize=4096)
def prices(model: str) -> dict[str, Any] | None:
    """The price entry of a model (None when the map has no price for it)."""
    if not model or model == "<synthetic>":
        return None
    table = price_map()
    bare = model.split("/", 1)[1] if "/" in model and model.split("/", 1)[0] in (
        "anthropic", "openai", "gemini", "xai", "deepseek", "mistral", "openrouter") else model
    candidates = [model, bare, _DATE.sub("", bare), f"anthropic.{bare}-v1:0", f"anthropic.{bare}-v2:0",
                  f"openai/{bare}", f"anthropic/{bare}"]
    for name in candidates:
        entry = table.get(name)
        if entry and isinstance(entry.get("input_cost_per_token"), (int, float)):
            return entry
    return None


def cost(model: str, tokens_in: int, tokens_out: int, cache_read: int = 0, cache_creation: int = 0) -> float | None:
    """What one call cost in USD by the map, or None when the model has no price."""
    entry = prices(model)
    if entry is None:
        return None
    tier = "_above_200k_tokens" if tokens_in > 200_000 and entry.get("input_cost_per_token_above_200k_tokens") \
        else ""
    price_in = float(entry.get(f"input_cost_per_token{tier}") or entry.get("input_cost_per_token") or 0.0)
    price_out = float(entry.get(f"output_cost_per_token{tier}") or entry.get("output_cost_per_token") or 0.0)
    price_read = entry.get(f"cache_read_input_token_cost{tier}") or entry.get("cache_read_input_token_cost")
    price_write = entry.get(f"cache_creation_input_token_cost{tier}") or entry.get("cache_creation_input_token_cost")
    fresh = max(0, tokens_in - cache_read - cache_creation)
    return (fresh * price_in + tokens_out * price_out
            + cache_read * float(price_read if price_read is not None else price_in)
            + cache_creation * float(price_write if price_write is not None else price_in))


def output_price(model: str, tokens_in: int = 0) -> float | None:
    entry = prices(model)
    if entry is None:
        return None
    tier = "_above_200k_tokens" if tokens_in > 200_000 and entry.get("output_cost_per_token_above_200k_tokens") \
        else ""
    return float(entry.get(f"output_cost_per_token{tier}") or entry.get("output_cost_per_token") or 0.0)
