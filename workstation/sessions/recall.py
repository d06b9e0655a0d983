"""Recall: what the model no longer sees, back whole from the log. A record by its id (a redaction marker
names it), or a whole turn by its number (a compaction replaced it by a summary; the compact record's
`replaced` and the frontier name the turns), as the `recall` tool and the MCP server answer it."""

from __future__ import annotations

from ..errors import WorkstationError
from .modelview import fetch_original
from .log import LogView, Session
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
        if numbers.of(record) != turn or record["type"] not in ("user", "assistant", "tool", "system"):
            continue
        if record["type"] == "system" and (record.get("notice") or record.get("update") is not None):
            continue  # notices are the user's, updates the head's
        who = f"[{record['sidechain']}] " if record.get("sidechain") else ""
        text = str(record.get("content") or "")
        if record["type"] == "tool":
            failed = "" if record.get("ok", True) else " (failed)"
            lines.append(f"{who}tool {record.get('name', '')}{failed} (record {record['id']}):\n{text}")
            continue
        calls = "".join(f"\n  -> {c.get('name')}({c.get('arguments')})" for c in record.get("tool_calls") or ())
        lines.append(f"{who}{record['type']}: {text}{calls}")
    out = "\n\n".join(lines)
    if len(out) > MAX_TURN_CHARS:
        out = out[:MAX_TURN_CHARS] + f"\n[… {len(out) - MAX_TURN_CHARS:,} more chars: recall a record by its id]"
    return out


def recall(session: Session, key: str) -> str:
    """`key`: a record id (its content) or a turn number (the whole turn: turn_text)."""
    key = key.strip()
    if key.isdigit():
        return turn_text(session.read(), int(key))
    return str(fetch_original(session, key).get("content") or "")
