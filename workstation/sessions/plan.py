"""The agent's plan as a session log holds it: the `plan` field of the newest successful tool record
that has one (the agent's todo tool records the whole plan with every call; sessions/README.md).

Read here, below the agent, so that compaction (also the sidecar's) can keep the plan in the
summary's "Open to-dos", and replay and the UI can show it, from the log alone.
"""

from __future__ import annotations

from typing import Any, Iterable

from .records import Record, Tool

STATUSES = ("pending", "in_progress", "done")
MARKS = {"pending": "[ ]", "in_progress": "[>]", "done": "[x]"}


def items_of(value: Any) -> list[dict] | None:
    """A recorded plan as [{text, status}], None when `value` is not one (a log written by something else)."""
    if not isinstance(value, list):
        return None
    items = []
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("text"), str) or item.get("status") not in STATUSES:
            return None
        items.append({"text": item["text"], "status": item["status"]})
    return items


def current(records: Iterable[Record]) -> list[dict] | None:
    """The plan in force after these records; None when none was written ([] when it was cleared)."""
    for record in reversed(list(records)):
        if isinstance(record, Tool) and record.ok and record.plan is not None and not record.sidechain:
            items = items_of(record.plan)
            if items is not None:
                return items
    return None


def render(items: list[dict]) -> str:
    """`[x] map the module` lines; '(empty plan)' when there are none."""
    if not items:
        return "(empty plan)"
    return "\n".join(f"{MARKS.get(i['status'], '[?]')} {i['text']}" for i in items)


def progress(items: list[dict]) -> str:
    return f"{sum(i['status'] == 'done' for i in items)} of {len(items)} done"
