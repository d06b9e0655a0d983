"""benchmarks/bench_long.py's own accounting, on a short run (12 turns, the app's front end, the fake Anthropic
endpoint, a small window so that compaction is reached): it counts what the fake server saw and what the log
holds, pairs each agent request with its model call, and computes its probes from the log. The issue's
targets (no trimming, the cache share, the cost per turn, the probes all present) are the benchmark's to
print, not this test's to assert."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_long  # noqa: E402
from support import long_scenario as long  # noqa: E402

TURNS, WINDOW = 12, 10000


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    """One short run and its figures, shared by the checks below."""
    from workstation import llm

    llm.warm_import()
    with pytest.MonkeyPatch.context() as mp:  # prepare() points the process at the run's own config home
        base = tmp_path_factory.mktemp("bench-long")
        mp.setenv("WORKSTATION_HOME", str(base / "unused"))
        mp.setenv(bench_long.KEY_ENV, "unused")
        run = bench_long.Run("app", "anthropic", "nothing", TURNS, WINDOW)
        bench_long.execute(run, base, pause=0.05)
    return run, bench_long.figures(run)


def test_every_turn_ran_and_every_request_is_counted(short_run):
    run, f = short_run
    assert run.errors == []
    assert len(run.marks) == TURNS + 1 and run.marks == sorted(run.marks) and run.marks[-1] == len(run.exchanges)
    kinds = [long.kind_of(e["request"]) for e in run.exchanges]
    assert f["requests"] == len(run.exchanges) == len(kinds)
    assert f["compaction_requests"] == kinds.count("compaction") >= 1  # the small window reached compaction
    assert f["agent_requests"] == kinds.count("step") == f["logged_model_calls"]  # each answered, each logged
    assert f["unanswered"] == sum(e["usage"] is None for e in run.exchanges)
    users = [r for r in run.records if r.get("type") == "user"]
    assert [r["content"] for r in users] == [t.text for t in run.script.turns]
    assert f["compactions"] == sum(r.get("type") == "compact" for r in run.records) >= 1
    assert f["trimmed_requests"] == sum(1 for r in run.records if r.get("type") == "assistant" and r.get("trimmed"))


def test_each_agent_request_is_paired_with_its_model_call(short_run):
    """The i-th agent request the server answered is the i-th model call in the log: the tokens the server
    billed are the ones litellm reported and the loop recorded. The probes rely on this pairing."""
    run, _ = short_run
    steps = [e for e in run.exchanges if long.kind_of(e["request"]) == "step" and e["usage"]]
    calls = [r for r in run.records if r.get("type") == "assistant"]
    assert len(steps) == len(calls)
    for exchange, call in zip(steps, calls):
        total, read, written, _, output = long.usage_tokens(exchange["usage"])
        assert (call["tokens_in"], call.get("cache_read_tokens") or 0, call.get("cache_creation_tokens") or 0) \
            == (total, read, written)


def test_the_cache_share_and_the_cost_are_the_servers_figures(short_run):
    run, f = short_run
    usages = [long.usage_tokens(e["usage"]) for e in run.exchanges if e["usage"]]
    after = usages[1:]
    assert f["cache_served"] == round(sum(u[1] for u in after) / sum(u[0] for u in after), 4)
    from workstation import pricing

    rates = pricing.rates(bench_long.PRICED_AS["anthropic"])
    billed = sum(rates.billed(total, out, read, written, long_w) for total, read, written, long_w, out in usages)
    assert f["cost_total_usd"] == pytest.approx(billed, abs=1e-4)
    assert f["cost_per_turn_by_segment"] == [pytest.approx(billed / TURNS, abs=1e-5)]  # one segment of 12


def test_the_probes_are_computed_from_the_log(short_run):
    run, f = short_run
    compacts = [r for r in run.records if r.get("type") == "compact"]
    seen, probed = f["probes"]["compactions seen in a request"]
    assert probed == len(compacts) and seen <= probed
    # what is in force before the fix (turn 11 of 12), from the log: the script's goal, plan, decision, files
    # and the failing test
    fix = [i for i, r in enumerate(run.records) if r.get("type") == "user"][10]
    assert run.records[fix]["content"].startswith("Fix the helper")
    facts = long.facts(run.records[:fix])
    assert list(facts.goal.values()) == [" ".join(long.GOAL.split())]
    assert list(facts.plan_step) == [long.HELPER]  # the plan the second task turn wrote
    assert list(facts.decisions.values()) == [long.DECISION_1]
    assert set(facts.files) == {"httpx/_ids.py (created)", "tests/test_ids.py (created)"}
    assert list(facts.failure) == [long.TEST] and "expected 16" in facts.failure[long.TEST]
    # a request that carries a fact counts it present, one that drops it counts it missing
    text = long._norm(" ".join([long.GOAL, long.HELPER, long.DECISION_1, "httpx/_ids.py", "tests/test_ids.py",
                                facts.failure[long.TEST]]))
    assert all(present for _, _, present in long.probe(facts, text))
    dropped = [name for kind, name, present in long.probe(facts, text.replace(long._norm(long.GOAL), "")) if not present]
    assert dropped == ["the first message"]
    # after the fix: the test passes, so no failure is open; the plan moved on
    end = long.facts(run.records)
    assert end.failure == {} and list(end.plan_step) == [long.HEADER]


def test_a_deadline_stops_the_run_and_the_figures_cover_the_turns_that_ran(tmp_path, monkeypatch):
    """--deadline: no turn starts past it; the figures are those of the turns that ran, and say how many of the
    turns asked for that was."""
    monkeypatch.setenv("WORKSTATION_HOME", str(tmp_path / "unused"))
    monkeypatch.setenv(bench_long.KEY_ENV, "unused")
    run = bench_long.Run("app", "anthropic", "nothing", TURNS, WINDOW)
    checks = iter(range(10 ** 6))
    monkeypatch.setattr(bench_long.Run, "past_deadline", lambda self: next(checks) >= 3)  # after the third turn
    bench_long.execute(run, tmp_path, pause=0.0)
    f = bench_long.figures(run)
    assert (run.turns, run.asked, f["turns"], f["turns_asked"]) == (3, TURNS, 3, TURNS)
    assert len(run.marks) == 4 and sum(r.get("type") == "user" for r in run.records) == 3
    assert len(f["cost_per_turn_by_segment"]) == 1 and f["cost_ratio_last_vs_after_first"] is None
