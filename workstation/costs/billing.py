"""What a session's model calls cost as billed, from its log alone: the status line's and
`session show`'s figures, and `workstation report`'s "as reported" column.

Every assistant record and every compact record with tokens is a billed call (records a rewind
took back included: they were billed all the same). Each is priced by pricing.py
(`call_cost`: cache reads and 5-minute and 1-hour writes at the model's own prices). The hit share
of a prompt is the part of its `tokens_in` read from the provider's cache; the newest assistant
record's share and its `cache_break` (why its prefix was not fully cached, written by the agent
loop) tell what the last request cost.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Iterable

from ..pricing import call_cost, hit_share
from ..sessions.records import Assistant, Compact, Record

KINDS = {"assistant": "step", "compact": "compaction"}  # request kind of each billed record type


@dataclass
class Tally:
    """The billed calls of one request kind."""

    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cache_read: int = 0
    cache_creation: int = 0
    cache_creation_1h: int = 0
    cost_usd: float = 0.0  # over the priced calls
    unpriced: int = 0  # of the calls, those with tokens and no price (a model the price map does not know)

    @property
    def hit(self) -> float | None:
        return hit_share(self.tokens_in, self.cache_read)

    def to_dict(self) -> dict:
        return {**asdict(self), "cost_usd": round(self.cost_usd, 8), "hit": self.hit}


@dataclass
class Bill:
    kinds: dict[str, Tally] = field(default_factory=lambda: {kind: Tally() for kind in KINDS.values()})
    last_hit: float | None = None  # the newest assistant record's hit share (None: no prompt tokens recorded)
    last_break: str | None = None  # and its cache_break, when it has one

    @property
    def total(self) -> Tally:
        out = Tally()
        for tally in self.kinds.values():
            for name in Tally.__dataclass_fields__:
                setattr(out, name, getattr(out, name) + getattr(tally, name))
        return out

    def to_dict(self) -> dict:
        return {"total": self.total.to_dict(), **{k: t.to_dict() for k, t in self.kinds.items()},
                "last_hit": self.last_hit, "last_break": self.last_break}

    def line(self) -> str:
        """'cache 97% · $0.042', 'cache 12% (compaction) · $0.051': the last request's hit share (and why it
        dropped), then the session's cost; '' before the first call with tokens."""
        total = self.total
        if not total.calls:
            return ""
        parts = []
        if self.last_hit is not None:
            parts.append(f"cache {self.last_hit:.0%}" + (f" ({self.last_break})" if self.last_break else ""))
        if total.cost_usd or not total.unpriced:
            parts.append(f"${total.cost_usd:.3f}" + ("+?" if total.unpriced else ""))
        return " · ".join(parts)


def _int(value: object) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def add(bill: Bill, record: Record) -> None:
    """Count one record into `bill` (a billed call when it is an assistant or compact record with tokens)."""
    if not isinstance(record, (Assistant, Compact)):
        return
    kind = KINDS[record.kind]
    tokens_in, tokens_out = _int(record.tokens_in), _int(record.tokens_out)
    recorded = record.cost_usd
    if not (tokens_in or tokens_out or recorded):
        return
    read, written = _int(record.cache_read_tokens), _int(record.cache_creation_tokens)
    long = _int(record.cache_creation_1h_tokens)
    tally = bill.kinds[kind]
    # a compaction's record sums its calls; an imported answer's later part is the same call as the first
    continues = isinstance(record, Assistant) and record.continues
    calls = (_int(record.calls) or 1) if kind == "compaction" else 0 if continues else 1
    tally.calls += calls
    tally.tokens_in += tokens_in
    tally.tokens_out += tokens_out
    tally.cache_read += read
    tally.cache_creation += written
    tally.cache_creation_1h += long
    price = call_cost(record.model or "", tokens_in, tokens_out, read, written, long,
                      recorded=recorded, imported=record.source is not None)
    if price is None:
        tally.unpriced += calls
    else:
        tally.cost_usd += price
    if isinstance(record, Assistant):
        bill.last_hit = hit_share(tokens_in, read)
        bill.last_break = record.cache_break or None


def bill(records: Iterable[Record]) -> Bill:
    """The bill of a session's records (LogView.records: every record, the ones a rewind took back too)."""
    out = Bill()
    for record in records:
        add(out, record)
    return out
