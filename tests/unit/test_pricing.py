"""A call priced as billed (pricing.py) and a session's bill (costs/billing.py), worked out by hand."""

from __future__ import annotations

import pytest

from workstation.pricing import UNIT, Rates, call_cost, cost, hit_share, price_map, rates
from workstation.sessions.records import from_dict
from workstation.costs import billing

# per token: input, output, cache read, cache write 5 minutes, 1 hour (Claude Sonnet 4.5's list prices)
SONNET = Rates(input=3e-6, output=15e-6, cache_read=0.3e-6, cache_write=3.75e-6, cache_write_1h=6e-6)


def test_each_part_of_a_call_at_its_own_price():
    # 10,000 prompt tokens: 8,000 read, 1,500 written (500 of them for an hour), so 500 uncached; 200 out
    assert SONNET.billed(10_000, 200, 8_000, 1_500, 500) == pytest.approx(
        500 * 3e-6 + 8_000 * 0.3e-6 + 1_000 * 3.75e-6 + 500 * 6e-6 + 200 * 15e-6)
    assert SONNET.billed(10_000, 200, 8_000, 1_500, 500) == pytest.approx(0.01365)
    assert SONNET.billed(1_000, 0) == pytest.approx(0.003)  # nothing cached: all input
    # 1-hour writes are a part of the writes, never more than them
    assert SONNET.billed(1_000, 0, 0, 100, 900) == SONNET.billed(1_000, 0, 0, 100, 100)


def test_unit_prices_are_anthropics_multipliers():
    assert (UNIT.input, UNIT.cache_write, UNIT.cache_write_1h, UNIT.cache_read, UNIT.output) == (1, 1.25, 2, 0.1, 5)
    # a prompt of 1,000 read + 200 written + 100 fresh, 50 out: 100 + 250 + 100 + 250 units
    assert UNIT.billed(1_300, 50, 1_000, 200) == pytest.approx(700)


def test_the_map_prices_and_the_fallbacks():
    entry = price_map()["claude-sonnet-4-5"]
    found = rates("anthropic/claude-sonnet-4-5-20250929")  # a provider prefix and a date suffix
    assert (found.input, found.output, found.cache_read, found.cache_write, found.cache_write_1h) == (
        entry["input_cost_per_token"], entry["output_cost_per_token"], entry["cache_read_input_token_cost"],
        entry["cache_creation_input_token_cost"], entry["cache_creation_input_token_cost_above_1hr"])
    # gpt-4o has a cached-input price and no write prices: writes at the input price, 1-hour ones at twice it
    gpt = rates("openai/gpt-4o")
    entry = price_map()["gpt-4o"]
    assert gpt.cache_write == entry["input_cost_per_token"] and gpt.cache_write_1h == 2 * entry["input_cost_per_token"]
    assert gpt.cache_read == entry["cache_read_input_token_cost"]
    assert cost("openai/gpt-4o", 1_000, 10, 600, 100, 100) == pytest.approx(
        300 * gpt.input + 600 * gpt.cache_read + 100 * 2 * gpt.input + 10 * gpt.output)
    assert rates("openai/test-model") is None and cost("openai/test-model", 10, 10) is None


def test_a_prompt_past_200k_tokens_is_priced_at_the_higher_tier():
    model = "claude-sonnet-4-5-20250929-v1:0"
    entry = price_map()[model]
    low, high = rates(model, 200_000), rates(model, 200_001)
    assert low.input == entry["input_cost_per_token"] and high.input == entry["input_cost_per_token_above_200k_tokens"]
    assert high.cache_write_1h == entry["cache_creation_input_token_cost_above_1hr_above_200k_tokens"]
    assert high.cache_read == entry["cache_read_input_token_cost_above_200k_tokens"]
    # 300,000 in: 250,000 read, 40,000 written (10,000 for an hour), 10,000 fresh; 1,000 out
    want = (10_000 * high.input + 250_000 * high.cache_read + 30_000 * high.cache_write
            + 10_000 * high.cache_write_1h + 1_000 * high.output)
    assert cost(model, 300_000, 1_000, 250_000, 40_000, 10_000) == pytest.approx(want)


def test_a_recorded_call_priced_as_billed():
    # the agent's own call: priced by the map (its recorded cost, litellm's, left 1-hour writes at 5 minutes)
    assert call_cost("claude-sonnet-4-5", 10_000, 200, 8_000, 1_500, 500, recorded=0.0125) == pytest.approx(0.01365)
    assert call_cost("openai/test-model", 10, 10, recorded=0.5) == 0.5  # no price in the map: as recorded
    assert call_cost("openai/test-model", 10, 10) is None
    # an imported call keeps the cost it was imported with (a source's own total included)
    assert call_cost("claude-sonnet-4-5", 10_000, 200, recorded=0.25, imported=True) == 0.25
    assert call_cost("claude-sonnet-4-5", 1_000, 0, imported=True) == pytest.approx(0.003)


def test_hit_share():
    assert hit_share(1_000, 970) == 0.97 and hit_share(0, 0) is None and hit_share(100, None) == 0


def test_a_sessions_bill():
    records = [
        {"type": "user", "content": "hi"},
        {"type": "assistant", "model": "claude-sonnet-4-5", "tokens_in": 10_000, "tokens_out": 200,
         "cache_read_tokens": 8_000, "cache_creation_tokens": 1_500, "cache_creation_1h_tokens": 500,
         "cost_usd": 0.0125},
        {"type": "tool", "content": "x"},
        {"type": "compact", "model": "claude-haiku-4-5", "tokens_in": 4_000, "tokens_out": 500, "calls": 2},
        {"type": "assistant", "model": "claude-sonnet-4-5", "tokens_in": 2_000, "tokens_out": 0,
         "cache_read_tokens": 240, "cache_creation_tokens": 1_760, "cache_break": "compaction"},
        {"type": "assistant", "model": "openai/test-model", "tokens_in": 100, "tokens_out": 1},  # no price
    ]
    records = [from_dict({"v": 1, "id": f"r{i}", **r}) for i, r in enumerate(records)]
    bill = billing.bill(records)
    haiku = rates("claude-haiku-4-5")
    step, compaction = bill.kinds["step"], bill.kinds["compaction"]
    assert (step.calls, step.tokens_in, step.cache_read, step.cache_creation, step.unpriced) == (
        3, 12_100, 8_240, 3_260, 1)
    assert step.cost_usd == pytest.approx(0.01365 + 240 * 0.3e-6 + 1_760 * 3.75e-6)
    assert (compaction.calls, compaction.cost_usd) == (2, pytest.approx(4_000 * haiku.input + 500 * haiku.output))
    assert compaction.hit == 0 and bill.total.calls == 5
    # the newest step: no prompt recorded from the cache, and no cause
    assert (bill.last_hit, bill.last_break) == (0, None)
    assert bill.line() == f"cache 0% · ${bill.total.cost_usd:.3f}+?"
    bill = billing.bill(records[:-1])
    assert (bill.last_hit, bill.last_break) == (0.12, "compaction")
    assert bill.line() == f"cache 12% (compaction) · ${step.cost_usd + compaction.cost_usd:.3f}"
    assert billing.bill(records[:1]).line() == ""

