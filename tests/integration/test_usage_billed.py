"""`reflect usage` prices the agent's own calls as billed and shows the cache hit share."""

from __future__ import annotations

import pytest

from workstation.pricing import rates
from workstation.memory.episodic import COMPACTION, MODEL_CALL, Episodic
from workstation.costs.usage import usage


def test_cache_prices_and_the_hit_column(db):
    episodic = Episodic(db, session="s1", flow="main")
    model = "anthropic/claude-sonnet-4-5"
    # litellm's cost for the second call priced its 1-hour writes at the 5-minute price
    with episodic.operation(MODEL_CALL, model, model=model) as op:
        op.set(tokens_in=10_000, tokens_out=100, cost_usd=0.0315, cache_creation_tokens=10_000)
    with episodic.operation(MODEL_CALL, model, model=model) as op:
        op.set(tokens_in=12_000, tokens_out=200, cost_usd=0.001, cache_read_tokens=10_000,
               cache_creation_tokens=1_500, cache_creation_1h_tokens=1_000)
    episodic.record(COMPACTION, "s1", tokens_in=3_000, tokens_out=300, cost_usd=0.0135, model=model, ok=True)
    with episodic.operation(MODEL_CALL, "openai/test-model", model="openai/test-model") as op:
        op.set(tokens_in=50, tokens_out=5)  # a model with no price: unpriced
    episodic.close()
    sonnet = rates(model)
    (row,) = usage(db, "session").records()
    assert (row["calls"], row["input"], row["cache_creation"], row["cache_read"]) == (4, 500 + 3_050, 11_500, 10_000)
    assert row["cache_hit"] == round(10_000 / 25_050, 4)
    want = (10_000 * sonnet.cache_write + 100 * sonnet.output
            + 500 * sonnet.input + 10_000 * sonnet.cache_read + 500 * sonnet.cache_write
            + 1_000 * sonnet.cache_write_1h + 200 * sonnet.output
            + 3_000 * sonnet.input + 300 * sonnet.output)
    assert row["cost_usd"] == pytest.approx(want, abs=1e-6) and row["unpriced"] == 1
    assert want == pytest.approx(0.0375 + 0.0015 + 0.0015 + 0.003 + 0.001875 + 0.006 + 0.003 + 0.009 + 0.0045)
    totals = usage(db, "model").meta["totals"]
    assert totals["cache_hit"] == row["cache_hit"] and totals["cost_usd"] == pytest.approx(want, abs=1e-6)


def test_session_show_says_what_the_session_cost_as_billed(tmp_path):
    import json

    from click.testing import CliRunner

    from workstation import config as config_mod
    from workstation.cli import main
    from workstation.sessions import Session

    _, paths = config_mod.load(tmp_path)
    s = Session.create(paths, "billed")
    s.user("hi")
    model = "claude-sonnet-4-5"
    s.assistant("a", model=model, tokens_in=10_000, tokens_out=210, cache_read_tokens=8_000,
                cache_creation_tokens=1_500, cache_creation_1h_tokens=500)
    s.append("compact", summary="so far", sections={}, files=[], covers={}, model=model, tokens_in=4_000,
             tokens_out=100, calls=1)
    s.assistant("b", model=model, tokens_in=5_000, tokens_out=100, cache_read_tokens=4_000, cache_break="compaction")
    sonnet = rates(model)
    want = (500 * sonnet.input + 8_000 * sonnet.cache_read + 1_000 * sonnet.cache_write + 500 * sonnet.cache_write_1h
            + 210 * sonnet.output + 4_000 * sonnet.input + 100 * sonnet.output
            + 1_000 * sonnet.input + 4_000 * sonnet.cache_read + 100 * sonnet.output)
    shown = CliRunner().invoke(main, ["-C", str(tmp_path), "session", "show", "billed"])
    assert shown.exit_code == 0, shown.output
    # 12,000 of 19,000 prompt tokens read from the cache; the steps 12,000 of 15,000
    assert want == pytest.approx(0.0138 + 0.0135 + 0.0057)  # at Sonnet 4.5's $3 / $15 per million
    assert f"# 3 model calls billed ${want:.4f}, cache hit 63.2% (steps 80.0%, 1 compaction calls 0.0%)" in shown.output
    data = json.loads(CliRunner().invoke(main, ["-C", str(tmp_path), "session", "show", "billed", "--json"]).stdout)
    assert data["billed"]["total"]["cost_usd"] == pytest.approx(want)
    assert (data["billed"]["last_hit"], data["billed"]["last_break"]) == (0.8, "compaction")
