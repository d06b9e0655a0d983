"""The agent's plan: `todo` writes the whole list, each item pending, in_progress or done, every call
replacing the one before.

The plan needs no store of its own: each call records the whole plan on its tool record (the
`plan` field, sessions/README.md), so `sessions.plan.current(records)` finds the plan in force from
the log alone. The call's `Meaning.plan` is what the loop hands the UI as it is written
(`AgentEvents.on_plan`) and what replay's memory view shows at each step; compaction gives the plan
to the summarizer and makes the summary's "Open to-dos" hold it, so it survives every compaction.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from ...errors import WorkstationError
from ...sessions.plan import STATUSES, items_of, progress, render
from .invocation import Invocation
from .base import MEMORY, NOTHING, STR, Call, Meaning, Todo, Tool, ToolResult, params

MAX_ITEMS = 50
MAX_TEXT = 300
# what models write instead of the three statuses
_ALIASES = {"pending": "pending", "todo": "pending", "not_started": "pending", "open": "pending", "in_progress": "in_progress",
            "inprogress": "in_progress", "doing": "in_progress", "active": "in_progress", "started": "in_progress",
            "done": "done", "completed": "done", "complete": "done", "finished": "done"}


def parse_items(items: Any) -> list[dict]:
    """The plan a call's `items` argument describes, as [{text, status}]; WorkstationError naming the
    first bad item."""
    if isinstance(items, str):  # some models send the list as a JSON string
        try:
            items = json.loads(items)
        except ValueError:
            raise WorkstationError("items must be a list of {text, status} objects") from None
    if not isinstance(items, list):
        raise WorkstationError("items must be a list of {text, status} objects")
    if len(items) > MAX_ITEMS:
        raise WorkstationError(f"a plan holds at most {MAX_ITEMS} items, got {len(items)}: merge some")
    plan = []
    for n, item in enumerate(items, start=1):
        if isinstance(item, str):
            item = {"text": item}
        if not isinstance(item, Mapping):
            raise WorkstationError(f"item {n} must be an object with text and status")
        text = item.get("text", item.get("content"))
        if not isinstance(text, str) or not text.strip():
            raise WorkstationError(f"item {n} has no text")
        text = " ".join(text.split())
        if len(text) > MAX_TEXT:
            raise WorkstationError(f"item {n} is {len(text)} characters long; keep items under {MAX_TEXT}")
        raw = item.get("status", "pending")
        status = _ALIASES.get(str(raw).strip().lower().replace("-", "_").replace(" ", "_"))
        if status is None:
            raise WorkstationError(f"item {n}: status {raw!r} is not one of {', '.join(STATUSES)}")
        plan.append({"text": text, "status": status})
    return plan


def _todo(inv: Invocation, items: Any) -> ToolResult:
    plan = parse_items(items)
    text = f"plan updated ({progress(plan)}):\n{render(plan)}" if plan else "plan cleared"
    return ToolResult(text, data={"plan": plan})


def _meaning(call: Call) -> Meaning:
    items = items_of(call.data.get("plan")) if call.ok else None
    if items is None:
        return NOTHING
    return Meaning(plan=tuple(Todo(i["text"], i["status"]) for i in items))


def _label(name: str, args: Mapping[str, Any]) -> str:
    try:
        plan = parse_items(args.get("items"))
    except WorkstationError:
        return f"{name}(?)"
    return f"{name}({progress(plan)})" if plan else f"{name}(cleared)"


ITEM = {"type": "object", "properties": {"text": STR, "status": {"type": "string", "enum": list(STATUSES)}},
        "required": ["text", "status"]}

TOOLS = [
    Tool("todo", "Write your plan for a task of several steps: the WHOLE list each time (it replaces the "
         "previous one), each item pending, in_progress or done. Keep one item in_progress and mark items done "
         "as you finish them. The user sees the plan live, and it is kept when old turns are summarized.",
         params(["items"], items={"type": "array", "items": ITEM}), _todo, MEMORY, meaning=_meaning,
         label=_label),
]
