"""Offline prices of model calls, from the price map litellm ships in its wheel: the one place that
prices a call as the provider bills it.

litellm reads `model_prices_and_context_window_backup.json` from its own package when
LITELLM_LOCAL_MODEL_COST_MAP=True (what workstation.llm sets), instead of downloading it. That
file is read here directly, located with find_spec: the same prices, without the ~3 s import of
litellm, and nothing is ever fetched.

Token convention (every record and event we write, imported ones included): `tokens_in` is the
whole prompt, cache reads and writes included. That is litellm's `prompt_tokens`: for Anthropic it
adds `cache_read_input_tokens` and `cache_creation_input_tokens` to the API's `input_tokens` (which
counts only the uncached part); OpenAI's `prompt_tokens` already includes its
`prompt_tokens_details.cached_tokens`. `cache_read_tokens` and `cache_creation_tokens` are parts of
`tokens_in`, and `cache_creation_1h_tokens` the part of the writes made with a 1-hour TTL.

A call is billed as five parts (`billed`):

    uncached input   (tokens_in - cache reads - cache writes) x input price
    cache read       x cache_read_input_token_cost (the input price when the map has none)
    cache write 5m   x cache_creation_input_token_cost (the input price when the map has none)
    cache write 1h   x cache_creation_input_token_cost_above_1hr (2x the input price when the map
                     has none: Anthropic's rule)
    output           x output price

the whole call at the `_above_200k_tokens` prices when its prompt passes 200k tokens and the map
has them. Model names are looked up as given, then without a provider prefix, without a date
suffix (`claude-sonnet-4-5-20250929` -> `claude-sonnet-4-5`), then as the provider-prefixed names
the map keeps for retired models (`anthropic.claude-3-5-sonnet-20241022-v2:0`). A model found
nowhere has no price (None); `UNIT` prices such a model in units of its input price, with
Anthropic's multipliers.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

_MAP_FILE = "model_prices_and_context_window_backup.json"
_DATE = re.compile(r"-\d{8}$|@\d{8}$")
TIER_TOKENS = 200_000  # a prompt past this many tokens is priced at the map's `_above_200k_tokens` prices


@dataclass(frozen=True)
class Rates:
    """Prices per token of one model (one price tier), each part of a call as billed."""

    input: float
    output: float
    cache_read: float
    cache_write: float  # 5-minute TTL
    cache_write_1h: float
    model: str = ""  # the model they price; "" for UNIT

    def billed(self, tokens_in: int, tokens_out: int, cache_read: int = 0, cache_creation: int = 0,
               cache_creation_1h: int = 0) -> float:
        """What one call costs at these rates (tokens as the module docstring's convention)."""
        long_writes = min(max(0, cache_creation_1h), max(0, cache_creation))
        fresh = max(0, tokens_in - cache_read - cache_creation)
        return (fresh * self.input + cache_read * self.cache_read + (cache_creation - long_writes) * self.cache_write
                + long_writes * self.cache_write_1h + tokens_out * self.output)


# Anthropic's multipliers on a unit input price (input 1, cache write 1.25 for 5 minutes or 2 for an
# hour, cache read 0.1) and its output/input ratio of 5 (every Claude model since Claude 3: Haiku 4.5
# $1/$5, Sonnet $3/$15, Opus 4.1 $15/$75 per million tokens): for a model the map has no price for.
UNIT = Rates(input=1.0, output=5.0, cache_read=0.1, cache_write=1.25, cache_write_1h=2.0)


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


@lru_cache(maxsize=4096)
def _rates(model: str, above_200k: bool) -> Rates | None:
    entry = prices(model)
    if entry is None:
        return None

    # the whole call at the higher tier when the map has a higher input price (each price falls back to its base)
    tier = above_200k and isinstance(entry.get("input_cost_per_token_above_200k_tokens"), (int, float))

    def price(name: str) -> float | None:
        for key in ((f"{name}_above_200k_tokens", name) if tier else (name,)):
            if isinstance(entry.get(key), (int, float)):
                return float(entry[key])
        return None

    price_in = price("input_cost_per_token") or 0.0
    read, write = price("cache_read_input_token_cost"), price("cache_creation_input_token_cost")
    long = entry.get("cache_creation_input_token_cost_above_1hr_above_200k_tokens") if tier else None
    if not isinstance(long, (int, float)):
        long = entry.get("cache_creation_input_token_cost_above_1hr")
    return Rates(input=price_in, output=price("output_cost_per_token") or 0.0,
                 cache_read=price_in if read is None else read, cache_write=price_in if write is None else write,
                 cache_write_1h=float(long) if isinstance(long, (int, float)) else 2 * price_in, model=model)


def rates(model: str, tokens_in: int = 0) -> Rates | None:
    """The prices of a model for a call with a prompt of `tokens_in` tokens (None: the map has none)."""
    return _rates(model, tokens_in > TIER_TOKENS)


def cost(model: str, tokens_in: int, tokens_out: int, cache_read: int = 0, cache_creation: int = 0,
         cache_creation_1h: int = 0) -> float | None:
    """What one call cost in USD as billed, or None when the model has no price."""
    found = rates(model, tokens_in)
    return None if found is None else found.billed(tokens_in, tokens_out, cache_read, cache_creation,
                                                   cache_creation_1h)


def call_cost(model: str, tokens_in: int, tokens_out: int, cache_read: int = 0, cache_creation: int = 0,
              cache_creation_1h: int = 0, *, recorded: float | None = None, imported: bool = False) -> float | None:
    """A recorded call's cost as billed: the agent's own calls priced here (their recorded cost, litellm's,
    when the map has no price for the model); an imported call's cost as recorded (priced here at import,
    or stated by its source: SWE-agent's and aider's totals), priced here when it has none."""
    if imported and recorded is not None:
        return float(recorded)
    found = cost(model, tokens_in, tokens_out, cache_read, cache_creation, cache_creation_1h)
    return found if found is not None else None if recorded is None else float(recorded)


def output_price(model: str, tokens_in: int = 0) -> float | None:
    found = rates(model, tokens_in)
    return None if found is None else found.output


def hit_share(tokens_in: int | float | None, cache_read: int | float | None) -> float | None:
    """The cache hit share of a prompt: the part of it read from the provider's cache (None for no prompt)."""
    return min(1.0, (cache_read or 0) / tokens_in) if tokens_in else None
