"""The request of one model call, assembled to fit the model's context window.

Order: the epoch's head (one system message: the system prompt, pinned instructions, the decision
log, project instructions and the map excerpt, as they stood when the epoch began: agent.updates),
the newest compact summary, then the live turns, with the context updates written since at their
place among them. Within an epoch a request only grows at its end, so a provider's prefix cache
serves all of the one before. Pins live in the head and in updates and failure notices are for the
user, so neither appears as a turn. If the whole is over the budget (the window less room for the
reply), whole turns leave the request, never the log: first the oldest turns before the latest user
message, then the map excerpt, then the oldest steps of the current turn; the latest user message
and the newest step always stay. The agent compacts before it comes to that (sessions.requestsize is
the one size rule); a trim happens when no compaction can help (one turn alone outgrows the window,
compaction off or failing, a sub-agent). Then it is a sticky cut (`Cut`): it leaves out enough at once
to bring the request down to half the budget, and every later request of the epoch leaves out the same
messages, so the prefix stays the same (and in the provider's cache) until the next compaction. If it
still does not fit, ContextOverflow says so in one line and nothing is sent.

Tokens are cl100k counts of each message's text and tool calls, plus MESSAGE_OVERHEAD per message,
plus the tool schemas sent with every request (sessions.requestsize.message_tokens).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .. import scrub
from ..errors import WorkstationError
from ..sessions.modelview import as_sent
from ..sessions.log import LogView
from ..sessions.records import Epoch, System, Tool
from ..sessions.requestsize import MESSAGE_OVERHEAD, budget as budget_of, message_tokens, reply_reserve

__all__ = ["MESSAGE_OVERHEAD", "ContextOverflow", "Cut", "Request", "build", "reply_reserve"]


class ContextOverflow(WorkstationError):
    """Even the smallest request would not fit the model's context window."""


@dataclass(frozen=True)
class Cut:
    """What a trim left out of the requests of one epoch (indices of `_units` of its body, and the map
    excerpt): every later request of the epoch leaves out at least as much (the module docstring)."""

    epoch: str
    units: frozenset[int] = frozenset()
    map: bool = False

    def record(self) -> dict:
        """As the reply's record keeps it (`left_out`), for the next process on the session."""
        spans: list[list[int]] = []
        for index in sorted(self.units):
            if spans and spans[-1][1] == index:
                spans[-1][1] = index + 1
            else:
                spans.append([index, index + 1])
        return {"epoch": self.epoch, "units": spans, "map": self.map}

    @classmethod
    def of(cls, data: object) -> "Cut | None":
        """The cut a reply's `left_out` holds (None: none, or not readable)."""
        if not isinstance(data, dict) or not isinstance(data.get("epoch"), str):
            return None
        units: set[int] = set()
        for span in data.get("units") or ():
            if isinstance(span, list) and len(span) == 2 and all(isinstance(i, int) for i in span):
                units.update(range(max(0, span[0]), min(span[1], span[0] + 1_000_000)))
        return cls(data["epoch"], frozenset(units), bool(data.get("map")))


@dataclass
class Request:
    messages: list[dict]
    tokens: int  # everything sent: messages and tool schemas
    base_tokens: int  # the base system prompt and the tool schemas: what any agent sends
    window: int
    trimmed: int  # messages left out to fit
    visible_calls: set[str] = field(default_factory=set)  # tool_call_ids whose full result was sent
    cut: Cut | None = None  # what is left out, for the requests after it (None: nothing)
    newly_trimmed: int = 0  # messages this request left out beyond the cut it was given


def pins_of(view: LogView) -> list[str]:
    return [r.content for r in view.records if isinstance(r, System) and r.pin]


def decision_lines(rows, budget: int, count: Callable[[str], int]) -> tuple[dict[str, str], int]:
    """The decision log's lines (id -> line) within `budget` tokens, the newest winning when it is short,
    and how many older decisions were left out."""
    lines: dict[str, str] = {}
    used = count(DECISION_HEAD)
    for d in reversed(rows):
        line = decision_line(d)
        size = count(line)
        if used + size > budget and lines:
            break
        lines[d.id] = line
        used += size
    return dict(reversed(lines.items())), len(rows) - len(lines)


DECISION_HEAD = "Decision log (follow these; cite [D:<id>] when you apply one):"


def decision_line(d) -> str:
    """One decision for the head; a teammate's (accepted: workstation.team) says whose it is."""
    by = f" (teammate {d.author}, {d.origin})" if getattr(d, "author", "") else ""
    return f"- [D:{d.id}]{by} {d.decision}" + (f" (why: {d.reasoning})" if d.reasoning else "")


def decision_section(lines: dict[str, str], omitted: int) -> str:
    """The decision log for the head (decision_lines)."""
    if not lines:
        return ""
    tail = [f"- ({omitted} older decisions not shown: call decisions)"] if omitted else []
    return "\n".join([DECISION_HEAD, *lines.values(), *tail])


def head_text(base: str, sections: list[str], excerpt: str) -> str:
    """The head's system message: the base prompt and its sections (masked: pins, decisions and instructions
    leave for the model, whichever store they came from), then the map excerpt, masked already."""
    return scrub.mask("\n\n".join([base, *[s for s in sections if s]])) + (f"\n\n{excerpt}" if excerpt else "")


def build(view: LogView, config, *, epoch: Epoch, base: str, window: int, model: str, tools_tokens: int,
          count: Callable[[str], int], counter: Callable[[str], int], cut: Cut | None = None,
          newest_out: bool = False) -> Request:
    """The request for one model call (see the module docstring): the head of `epoch` (an `epoch` record,
    agent.updates), then the turns, leaving out at least what `cut` (of the same epoch) left out. `count`
    counts message texts, `counter` is the session's record counter (sessions.modelview.assemble uses it).
    `newest_out`: what does not fit leaves from the end, newest first, down to the budget (the latest user
    message too): the conversation a compaction summarizes, whose prefix must stay the bytes the epoch's
    requests sent (the provider's cache holds them); what leaves is what the compaction keeps verbatim."""
    budget = budget_of(window)
    system = epoch.system
    excerpt = epoch.excerpt or ""
    system_without_map = system.removesuffix(f"\n\n{excerpt}") if excerpt else system
    ctxview, head, body = as_sent(view, config, epoch=epoch, counter=counter)

    units = _units(body)
    cost = [sum(message_tokens(m, count) for m in unit) for unit in units]
    total = tools_tokens + sum(message_tokens(m, count) for m in head) + sum(cost)
    keep = [True] * len(units)
    last_user = max((i for i, u in enumerate(units) if u[0]["role"] == "user"), default=0)
    epoch_id = epoch.id
    given = cut if cut is not None and cut.epoch == epoch_id else Cut(epoch_id)
    map_out = False

    def leave_out(victim: int | str) -> None:
        nonlocal total, map_out
        if isinstance(victim, str):  # "map"
            if system_without_map != system and not map_out:
                head[0] = {"role": "system", "content": system_without_map}
                total -= count(system) - count(system_without_map)
                map_out = True
        elif keep[victim]:
            keep[victim] = False
            total -= cost[victim]

    order: list[int | str] = [*range(last_user), "map", *range(last_user + 1, len(units) - 1)]
    for victim in order:  # the sticky part: what the epoch's earlier requests left out
        if victim == "map" and given.map or victim != "map" and victim in given.units:
            leave_out(victim)
    before = keep.count(False)
    if newest_out:
        for victim in range(len(units) - 1, -1, -1):
            if total <= budget:
                break
            leave_out(victim)
    if total > budget:  # in one block, down to half the budget, so that the cut holds for a while
        for victim in order:
            if total <= budget // 2:
                break
            leave_out(victim)
    if total > budget:
        raise ContextOverflow(
            f"the request cannot fit {model}'s context window of {window:,} tokens ({window - budget:,} kept for "
            f"the reply): the system prompt, tools, decisions and the latest message alone need {total:,}; "
            "shorten the message or pins, or /model one with a larger window")
    messages = head + [m for unit, kept in zip(units, keep) if kept for m in unit]
    out = frozenset(i for i, kept in enumerate(keep) if not kept)
    trimmed = sum(len(units[i]) for i in out)
    newly = sum(len(units[i]) for i in out if i not in given.units) if keep.count(False) > before else 0
    call_of = {r.id: r.tool_call_id for r in view.records if isinstance(r, Tool)}
    redacted = {call_of.get(r.record_id) for r in ctxview.redactions}
    visible = {m["tool_call_id"] for m in messages if m["role"] == "tool"} - redacted
    base_tokens = tools_tokens + count(base) + MESSAGE_OVERHEAD
    return Request(messages, total, base_tokens, window, trimmed, visible,
                   Cut(epoch_id, out, map_out) if out or map_out else None, newly)


def _units(messages: list[dict]) -> list[list[dict]]:
    """Messages grouped so that trimming never separates tool results from the call that made them."""
    units: list[list[dict]] = []
    for message in messages:
        if message["role"] == "tool" and units:
            units[-1].append(message)
        else:
            units.append([message])
    return units

