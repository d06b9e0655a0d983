"""Memory tools: qmem/umem/fence over the tiers, the decision log, reflection over the agent's own
history, and recall of a redacted tool output."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from ...errors import WorkstationError
from .invocation import Invocation
from .base import (BOOL, INT, MEMORY, NOTHING, QUERY, STR, TIER, Call, Meaning, Tool, ToolResult,
                   as_int, as_text, cap, params)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ...memory import Memory
    from ...memory.decisions import Decision

_DECISION_ID = re.compile(r"\bdecision (d[0-9a-f]+) logged")


def render_rows(rows: list[dict], limit: int = 40, width: int = 40) -> str:
    """A plain-text table (for reflection results in chat and in tool results)."""
    if not rows:
        return "(no rows)"
    columns = list(rows[0])
    cells = [[("" if r.get(c) is None else str(r.get(c)))[:width] for c in columns] for r in rows[:limit]]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    if len(rows) > limit:
        lines.append(f"... {len(rows) - limit} more rows")
    return "\n".join(lines)


def render_decisions(rows: "Iterable[Decision]") -> str:
    """The decision log for the decisions tool; a teammate's accepted decision says whose it is."""
    return "\n".join(f"[D:{d.id}] " + (f"(teammate {d.author}, {d.origin}) " if d.author else "")
                     + f"step {d.step if d.step is not None else '-'}: {d.decision}"
                     + (f" — {d.reasoning}" if d.reasoning else "")
                     + (f" (reused {d.reuse_count}x)" if d.reuse_count else "") for d in rows)


def _memory(inv: Invocation) -> Memory:
    """The agent's memory; a context without one (replay's verification) refuses the memory tools."""
    if inv.services.memory is None:
        raise WorkstationError("memory is not available here")
    return inv.services.memory


def _qmem(inv: Invocation, tier: str, key: str) -> ToolResult:
    from ...memory import MemoryKeyError  # lazy: the memory stack, +25 ms on `replay` and `report`

    lookup = tier in ("stm", "ltm")  # the tiers whose reads count as memory lookups (episodic: by event id)
    try:
        value = _memory(inv).qmem(tier, key)
    except MemoryKeyError as err:
        return ToolResult(f"error: {err}", ok=False,
                          data={"tier": tier, "key": key, **({"memory": "miss"} if lookup else {})})
    return ToolResult(cap(json.dumps(value, ensure_ascii=False, default=str)),
                      data={"tier": tier, "key": key, **({"memory": "hit"} if lookup else {})})


def _umem(inv: Invocation, tier: str, key: str, value: Any) -> ToolResult:
    _memory(inv).umem(tier, key, value)
    return ToolResult(f"stored {tier}:{key}" + (" (durable after fence('ltm'))" if tier == "ltm" else ""),
                      data={"tier": tier, "key": key})


def _umem_meaning(call: Call) -> Meaning:
    tier = call.args.get("tier")
    if not call.ok or tier not in ("stm", "ltm"):
        return NOTHING
    return Meaning(memory_write=(str(tier), str(call.args.get("key") or ""), call.args.get("value")))


def _fence(inv: Invocation, tier: str) -> ToolResult:
    _memory(inv).fence(tier)
    return ToolResult(f"fenced {tier}: earlier writes are durable and visible", data={"tier": tier})


def _log_decision(inv: Invocation, decision: str, reasoning: str = "", files: Any = None) -> ToolResult:
    files = files or []
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise WorkstationError("files must be a list of paths")
    decision_id = _memory(inv).log_decision(as_text("decision", decision), as_text("reasoning", reasoning or ""),
                                          files, step=inv.turn.step)
    return ToolResult(f"decision {decision_id} logged; it is shown in every later context: follow it and "
                      f"cite [D:{decision_id}] when you do", data={"decision_id": decision_id})


def _log_decision_meaning(call: Call) -> Meaning:
    found = _DECISION_ID.search(call.text) if call.ok else None
    if found is None:
        return NOTHING
    files = call.args.get("files")
    return Meaning(decision={"id": found.group(1), "decision": str(call.args.get("decision") or ""),
                             "reasoning": str(call.args.get("reasoning") or ""),
                             "files": list(files) if isinstance(files, list) else []})


def _decisions(inv: Invocation) -> ToolResult:
    rows = _memory(inv).decisions(limit=200)
    if not rows:
        return ToolResult("no decisions logged yet", data={"count": 0})
    return ToolResult(cap(render_decisions(rows)), data={"count": len(rows)})


def _reflect(inv: Invocation, name: str, all_sessions: Any = False) -> ToolResult:
    session = None if all_sessions or not inv.services.session else inv.services.session
    rows = _memory(inv).reflect(as_text("name", name), session=session).records()
    return ToolResult(cap(render_rows(rows)), data={"rows": len(rows)})


def _recall(inv: Invocation, record_id: Any = None, turn: Any = None) -> ToolResult:
    """A record by id, or a whole turn by number (one a compaction replaced: its summary's `replaced` and the
    frontier name them)."""
    if (record_id is None) == (turn is None):
        raise WorkstationError("recall takes record_id or turn, one of them")
    if turn is not None:
        number = as_int("turn", turn)
        return ToolResult(cap(inv.services.recall(str(number))), data={"turn": number})
    return ToolResult(cap(inv.services.recall(as_text("record_id", record_id))), data={"record_id": record_id})


TOOLS = [
    Tool("qmem", "Read a memory value. Tiers: stm (this run's scratch), ltm (persistent), episodic (event id).",
         params(["tier", "key"], tier=TIER, key=STR), _qmem, QUERY),
    Tool("umem", "Write a JSON value to stm or ltm (episodic is append-only).",
         params(["tier", "key", "value"], tier=TIER, key=STR, value={"description": "any JSON value"}),
         _umem, MEMORY, meaning=_umem_meaning),
    Tool("fence", "Make every earlier write to a tier durable and visible to other processes.",
         params(["tier"], tier=TIER), _fence, MEMORY),
    Tool("log_decision", "Record a naming, pattern or design decision once, so that every later step "
         "follows it.", params(["decision"], decision=STR, reasoning=STR, files={"type": "array", "items": STR}),
         _log_decision, MEMORY, meaning=_log_decision_meaning),
    Tool("decisions", "The decisions logged in this workspace, with how often they were reused.",
         params([]), _decisions, QUERY),
    Tool("reflect", "A named reflection query over your own history (e.g. reads_avoided, tool_errors, "
         "hit_rate, decision_reuse); all_sessions widens it to the workspace.",
         params(["name"], name=STR, all_sessions=BOOL), _reflect, QUERY),
    Tool("recall", "The original text of a redacted tool output, by the record id its marker names; or a whole "
         "turn a compaction replaced, by its number.", params([], record_id=STR, turn=INT), _recall, QUERY),
]
