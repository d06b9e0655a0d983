"""A session's budget as billed (agent.max_budget_usd): what it has cost so far, from its log alone
(costs.billing: every model call, sub-agents' and compactions' included), and whether the next request
would pass the budget.

The next request is priced before it is sent, as the provider will bill it: the prefix it shares with the
request before it (`cached` tokens) at the cache-read price, the rest at the cache-write price (what a
prompt-cached request pays for its new tokens), and an answer of `REPLY_TOKENS` at the output price. A model
the price map does not know is not counted (no budget can hold it: the turn says so once)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..pricing import rates
from ..costs.billing import bill
from ..sessions.records import Record

REPLY_TOKENS = 1024  # the answer a request is priced with before it is sent


@dataclass(frozen=True)
class Verdict:
    spent: float  # what the session cost so far, as billed
    next_cost: float  # what the next request would cost
    limit: float

    @property
    def over(self) -> bool:
        return self.spent + self.next_cost > self.limit

    @property
    def left(self) -> float:
        return max(0.0, self.limit - self.spent)

    def line(self) -> str:
        return (f"stopped: the next request (~${self.next_cost:.4f}) would pass this session's budget of "
                f"${self.limit:.2f} (${self.spent:.4f} spent); raise agent.max_budget_usd to go on")


def check(records: Iterable[Record], limit: float, model: str, tokens: int, cached: int) -> Verdict | None:
    """The verdict on the next request of `tokens` tokens (`cached` of them a prefix the provider has), or None
    without a budget (`limit` 0)."""
    if not limit:
        return None
    spent = bill(records).total.cost_usd
    price = rates(model, tokens)
    if price is None:
        return Verdict(spent, 0.0, limit)
    cached = max(0, min(cached, tokens))
    next_cost = cached * price.cache_read + (tokens - cached) * price.cache_write + REPLY_TOKENS * price.output
    return Verdict(spent, next_cost, limit)
