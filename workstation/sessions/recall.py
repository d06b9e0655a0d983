"""Recall: what the model no longer sees, back whole from the log. A record by its id (a redaction marker
names it), or a whole turn by its number (a compaction replaced it by a summary; the compact record's
`replaced` and the frontier name the turns), as the `recall` tool and the MCP server answer it."""

from __future__ import annotations

from ..errors import WorkstationError
from .modelview import fetch_original
from .log import LogView, Session
from .records import TURN_CLASSES, Assistant, System, Tool
from .turns import number as number_turns

MAX_TURN_CHARS = 200_000  # a turn longer than this is cut at its end (recall its records by id for the rest)


def turn_text(view: LogView, turn: int) -> str:
    """Every record of user turn `turn` as it was said: the user's message, the agent's messages and tool calls,
    the tool results whole (sub-agents' records too, marked)."""
    numbers = number_turns(view.records)
    if not 1 <= turn <= numbers.count:
        raise WorkstationError(f"no turn {turn}: this session has {numbers.count}")
    lines = [f"[turn {turn}, from the session log]"]
    for record in view.records:
        if numbers.of(record) != turn or not isinstance(record, TURN_CLASSES):
            continue
        if isinstance(record, System) and (record.notice or record.update is not None):
            continue  # notices are the user's, updates the head's
        who = f"[{record.sidechain}] " if record.sidechain else ""
        text = record.content
        if isinstance(record, Tool):
            failed = "" if record.ok else " (failed)"
            lines.append(f"{who}tool {record.name}{failed} (record {record.id}):\n{text}")
            continue
        calls = "".join(f"\n  -> {c.name}({c.arguments})"
                        for c in (record.tool_calls or () if isinstance(record, Assistant) else ()))
        lines.append(f"{who}{record.kind}: {text}{calls}")
    out = "\n\n".join(lines)
    if len(out) > MAX_TURN_CHARS:
        out = out[:MAX_TURN_CHARS] + f"\n[… {len(out) - MAX_TURN_CHARS:,} more chars: recall a record by its id]"
    return out


def recall(session: Session, key: str) -> str:
    """`key`: a record id (its content) or a turn number (the whole turn: turn_text)."""
    key = key.strip()
    if key.isdigit():
        return turn_text(session.read(), int(key))
    return str(getattr(fetch_original(session, key), "content", "") or "")
