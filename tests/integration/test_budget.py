"""A session's budget as billed (agent.max_budget_usd): the turn stops before the request that would pass it,
with one line, sub-agents and compactions counted (from the log: costs.billing); a workspace may lower the
user's budget, never raise it or lift it."""

from __future__ import annotations

from support.agent_support import agent, module_server, workspace
from support.fakellm import Reply
from workstation.config import Config, _lowered

server_module, server = module_server()
PRICED = "openai/gpt-4o"  # the scripted server answers any model name; the price map prices this one


def test_a_turn_stops_before_the_request_that_would_pass_the_budget(tmp_path, server):
    # each answer reports 100,000 prompt tokens: at gpt-4o's $2.50/M, $0.25 a request; after three ($0.75) the
    # fourth (its ~2,600 tokens mostly read from the cache, and an answer of 1,024 tokens: ~$0.014) passes $0.76
    ws = workspace(tmp_path, server.url, model={"name": PRICED}, agent={"max_budget_usd": 0.76})
    for _ in range(3):
        server.push(Reply(tool_calls=[("grep", {"pattern": "parse"})], usage=(100_000, 10)))
    a = agent(ws)
    try:
        result = a.run("look around")
    finally:
        a.close()
    assert result.error is not None and "would pass this session's budget of $0.76" in result.error
    assert len(server.requests) - server.mark == 3  # the fourth request was never sent
    notices = [r["content"] for r in a.session.read().records if r.get("notice") == "budget"]
    assert len(notices) == 1 and "$0.75" in notices[0]


def test_a_workspace_may_lower_the_budget_never_raise_or_lift_it():
    user = Config()
    user.agent.max_budget_usd = 5.0
    lowered, held = _lowered({"agent": {"max_budget_usd": 2.0}}, user)
    assert lowered["agent"]["max_budget_usd"] == 2.0 and not held
    raised, held = _lowered({"agent": {"max_budget_usd": 50.0}}, user)
    assert raised["agent"]["max_budget_usd"] == 5.0 and held
    lifted, held = _lowered({"agent": {"max_budget_usd": 0}}, user)
    assert lifted["agent"]["max_budget_usd"] == 5.0 and held  # 0 is no budget: higher than any
    free = Config()  # the user has none: a workspace's budget only lowers that
    set_, held = _lowered({"agent": {"max_budget_usd": 1.0}}, free)
    assert set_["agent"]["max_budget_usd"] == 1.0 and not held
