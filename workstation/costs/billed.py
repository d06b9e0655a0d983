"""`workstation report`'s billed costs: the agent and the naive baselines with an ideal prefix cache, and the
agent as its provider reported it.

An ideal prefix cache serves every token of a request that an earlier request sent in the same order
before it, and bills the rest as a cache write (Anthropic's breakpoint on the newest message writes it;
for a model the map gives no write price, as plain input). It never expires. Request by request:

  naive, naive*   their histories are append-only: each request reads the whole previous request
                  from the cache and writes what is new (the previous answer, the new results); the
                  first request is all cache write. A different `base_tokens` (system prompt and tool
                  schemas) from the request before reads nothing. A sub-agent's requests are a history
                  of their own, whose first reads the base when an earlier request sent the same.
  agent steps     from the log: each request reads the previous request (`context_tokens`) unless
                  its history was rewritten since: a compact, redaction, rewind or epoch record in between,
                  fewer tokens than the request before, or a `cache_break` of compaction or rewind
                  recorded on it: then only its base (`base_tokens`, the head every request starts
                  with) is read, or nothing when the base changed; a sub-agent's requests (`sidechain`)
                  follow each other the same way, its first reading the base. A `cache_break` of "system changed",
                  "model switch" or "tools changed" reads nothing. A log written before the loop
                  recorded `cache_break` cannot show a system message changed between two requests:
                  for it the agent's figure is a bound from below on what it would be billed.
  agent compactions  a compact record's requests (`calls` of them, `tokens_in` in all): the tokens its
                  provider reported read from the cache (`cache_read_tokens`) are read, the rest written.

Output tokens are the answers' `tokens_out` (counted when a record has none), the same in every column.
Every column is priced with the session's model's prices in litellm's map (pricing.py) or,
for a model the map does not know, with `pricing.UNIT`: Anthropic's multipliers on an input price of
1 (cache write 1.25, cache read 0.1, output 5), in units of that price. Compactions are priced with
their own model's prices when the map has them (and the session's are in USD too).

"As reported": the same prices over the tokens the provider reported on the records (tokens_in,
cache_read_tokens, cache_creation_tokens, cache_creation_1h_tokens), per request kind
(costs/billing.py), beside the session's cost as billed in USD.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable

from ..pricing import UNIT, Rates, hit_share, rates
from ..sessions.log import LogView
from . import billing
from ..sessions.records import Assistant, Compact

# records after which the history is not the same ("epoch": a head written anew, the layout's own record)
REWRITES = frozenset({"compact", "redaction", "rewind", "epoch", "uncompact"})
RESTARTS = frozenset({"compaction", "rewind"})  # cache_break causes that keep only the base
COLD = frozenset({"system changed", "model switch", "tools changed"})  # causes that keep nothing


@dataclass
class Billed:
    """Requests billed with a prefix cache: tokens and cost (USD, or units of the input price)."""

    requests: int = 0
    prompt_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output_tokens: int = 0
    cost: float = 0.0

    @property
    def served(self) -> float | None:
        """The share of the prompt tokens read from the cache."""
        return hit_share(self.prompt_tokens, self.cache_read)

    def add(self, rates_: Rates, prompt: int, output: int, read: int = 0, written: int | None = None,
            long_writes: int = 0, requests: int = 1) -> None:
        """One request (or `requests` of them, summed): `written` tokens of its prompt cache writes (all but
        the read ones when None), `long_writes` of them for an hour."""
        read = max(0, min(read, prompt))
        written = prompt - read if written is None else max(0, min(written, prompt - read))
        self.requests += requests
        self.prompt_tokens += prompt
        self.cache_read += read
        self.cache_write += written
        self.output_tokens += output
        self.cost += rates_.billed(prompt, output, read, written, long_writes)

    def plus(self, other: Billed) -> Billed:
        return Billed(**{name: getattr(self, name) + getattr(other, name) for name in Billed.__dataclass_fields__})

    def to_dict(self) -> dict:
        return {**asdict(self), "cost": round(self.cost, 8), "served": self.served}


@dataclass
class Billing:
    model: str  # the session's model (its first answer's)
    unit: str  # "USD", or "units" of the input price (UNIT) when the map has no price for the model
    priced_by: str  # one line: whose prices
    steps: Billed  # the agent's steps, ideal prefix cache
    compactions: Billed  # the agent's compaction requests
    naive: Billed
    naive_once: Billed
    reported: dict[str, Billed] = field(default_factory=dict)  # step / compaction, at the same prices
    reported_usd: float | None = None  # the session's cost as billed in USD (costs.billing), if priced
    reported_unpriced: int = 0  # its calls with no price

    @property
    def agent(self) -> Billed:
        return self.steps.plus(self.compactions)

    def ratio(self, baseline: Billed) -> float | None:
        return self.agent.cost / baseline.cost if baseline.cost else None

    def to_dict(self) -> dict:
        return {"model": self.model, "unit": self.unit, "priced_by": self.priced_by,
                "ideal_prefix_cache": {"agent": self.agent.to_dict(), "agent_steps": self.steps.to_dict(),
                                       "agent_compactions": self.compactions.to_dict(),
                                       "naive": self.naive.to_dict(), "naive_once": self.naive_once.to_dict(),
                                       "agent_vs_naive": self.ratio(self.naive),
                                       "agent_vs_naive_once": self.ratio(self.naive_once)},
                "as_reported": {**{kind: b.to_dict() for kind, b in self.reported.items()},
                                "cost_usd": self.reported_usd, "unpriced_calls": self.reported_unpriced}}

    def rows(self) -> list[dict]:
        money = (lambda v: f"${v:,.4f}") if self.unit == "USD" else (lambda v: f"{v:,.0f}")
        columns = {"agent": self.agent, "naive": self.naive, "naive*": self.naive_once}
        out = [{"billed": "requests", **{k: f"{b.requests:,}" for k, b in columns.items()}},
               {"billed": "input tokens", **{k: f"{b.prompt_tokens:,}" for k, b in columns.items()}},
               {"billed": "cache-served", **{k: _share(b.served) for k, b in columns.items()}},
               {"billed": "cost", **{k: money(b.cost) for k, b in columns.items()}},
               {"billed": "agent / column", "agent": "", "naive": _ratio(self.ratio(self.naive)),
                "naive*": _ratio(self.ratio(self.naive_once))}]
        return out

    def lines(self) -> list[str]:
        """Per request kind of the agent: the cache-served share, ideal and as reported."""
        money = (lambda v: f"${v:,.4f}") if self.unit == "USD" else (lambda v: f"{v:,.0f} units")
        out = []
        for kind, ideal in (("step", self.steps), ("compaction", self.compactions)):
            got = self.reported.get(kind, Billed())
            if not ideal.requests and not got.requests:
                out.append(f"agent {kind} requests: none")
                continue
            out.append(f"agent {kind} requests: {ideal.requests}; cache-served {_share(ideal.served)} ideal, "
                       f"{_share(got.served)} as reported ({got.prompt_tokens:,} tokens, {money(got.cost)})")
        total = self.reported.get("step", Billed()).plus(self.reported.get("compaction", Billed()))
        usd = "" if self.reported_usd is None else f"; ${self.reported_usd:,.4f} as billed" + (
            f" (+{self.reported_unpriced} calls with no price)" if self.reported_unpriced else "")
        out.append(f"agent as reported by the provider: {money(total.cost)}{usd}")
        return out


def _share(value: float | None) -> str:
    return "" if value is None else f"{value:.1%}"


def _ratio(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}x"


def _int(value) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def session_rates(view: LogView) -> tuple[str, Rates, str, str]:
    """(model, rates, unit, one line on whose prices) of a session: its first answer's model."""
    model = next((r.model for r in view.records if isinstance(r, Assistant) and r.model), "")
    found = rates(model) if model else None
    if found is not None:
        return model, found, "USD", f"USD at {model}'s prices in litellm's price map (5-minute cache writes)"
    return model, UNIT, "units", (
        f"{model or 'the model'} has no price in litellm's price map: units of its input price, with Anthropic's "
        "multipliers (cache write 1.25, cache read 0.1, output 5)")


def appended(requests: list[tuple], rates_: Rates) -> Billed:
    """Append-only requests [(prompt tokens, base tokens, output tokens[, a sub-agent's flow])] with an ideal
    prefix cache: each history (the agent's, each sub-agent's) reads its previous request."""
    out = Billed()
    last: dict[str, tuple[int, int]] = {}  # flow ("": the agent's) -> (prompt, base) of its previous request
    for prompt, base, output, *flow in requests:
        chain = flow[0] if flow else ""
        previous = last.get(chain)
        if previous is None:
            read = base if chain and any(b == base for _, b in last.values()) else 0
        else:
            read = previous[0] if previous[1] == base else 0
        out.add(rates_, prompt, output, read=read)
        last[chain] = (prompt, base)
    return out


def agent_steps(view: LogView, rates_: Rates, output_of: Callable[[Assistant], int]) -> Billed:
    """The agent's steps with an ideal prefix cache (the module docstring's rules)."""
    out = Billed()
    last: dict[str, dict] = {}  # flow ("": the agent's own steps) -> its previous request
    rewritten = False
    for record in view.records:
        if record.kind in REWRITES:
            rewritten = True
        if not isinstance(record, Assistant):
            continue
        prompt, base = _int(record.context_tokens), _int(record.base_tokens)
        cause = record.cache_break
        flow = record.sidechain or ""
        previous = last.get(flow)
        if flow and previous is None:  # a sub-agent's first request starts with its parent's head
            read = base if base and last.get("", {}).get("base") == base else 0
        elif previous is None or cause in COLD:
            read = 0
        elif (rewritten and not flow) or cause in RESTARTS or prompt < previous["prompt"] or \
                record.trimmed != previous["trimmed"]:
            read = base if base and base == previous["base"] else 0
        else:
            read = previous["prompt"]
        out.add(rates_, prompt, output_of(record), read=read)
        last[flow] = {"prompt": prompt, "base": base, "trimmed": record.trimmed}
        rewritten = rewritten and bool(flow)  # a rewrite of the agent's history waits for its next step
    return out


def agent_compactions(view: LogView, rates_: Rates, unit: str) -> Billed:
    out = Billed()
    for record in view.records:
        if not isinstance(record, Compact) or not (_int(record.tokens_in) or _int(record.tokens_out)):
            continue
        own = rates(record.model or "") if unit == "USD" else None
        out.add(own or rates_, _int(record.tokens_in), _int(record.tokens_out),
                read=_int(record.cache_read_tokens), requests=max(1, _int(record.calls)))
    return out


def reported(view: LogView, rates_: Rates) -> dict[str, Billed]:
    """The agent's requests at `rates_` over what its provider reported, per request kind."""
    out = {kind: Billed() for kind in billing.KINDS.values()}
    for record in view.records:
        if not isinstance(record, (Assistant, Compact)) or not (_int(record.tokens_in) or _int(record.tokens_out)):
            continue
        kind = billing.KINDS[record.kind]
        out[kind].add(rates_, _int(record.tokens_in), _int(record.tokens_out),
                      read=_int(record.cache_read_tokens), written=_int(record.cache_creation_tokens),
                      long_writes=_int(record.cache_creation_1h_tokens),
                      requests=max(1, _int(record.calls)) if kind == "compaction" else 1)
    return out


def build(view: LogView, naive: list[tuple[int, int, int]], naive_once: list[tuple[int, int, int]],
          output_of: Callable[[Assistant], int]) -> Billing:
    model, rates_, unit, priced_by = session_rates(view)
    bill = billing.bill(view.records)
    total = bill.total
    return Billing(model=model, unit=unit, priced_by=priced_by, steps=agent_steps(view, rates_, output_of),
                   compactions=agent_compactions(view, rates_, unit), naive=appended(naive, rates_),
                   naive_once=appended(naive_once, rates_), reported=reported(view, rates_),
                   reported_usd=round(total.cost_usd, 8) if total.calls > total.unpriced else None,
                   reported_unpriced=total.unpriced)
