"""The episodic events of an imported record: turn, model_call (tokens and cost), tool_call (its arguments
clipped, secret-looking keys redacted), file_read and file_edit for the tools that name a file (derived as a
live call's are, by sessions.derive: what `report` and replay read too), error;
at the source's timestamps, in the shape `import_flush` stores (episodic.append_events' plus session and
flow). Ids are the record's id and a number, the same at every import: a batch sent twice adds nothing."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from .. import scrub
from ..sessions.derive import events, foreign_meaning
from ..sessions.log import json_line, tool_call_arguments
from ..sessions.records import Assistant, Compact, Record, System, Tool, ToolCall, User

_ARG_CLIP = 300  # characters of a string argument kept in an episodic tool_call event
_CLIP_DEPTH = 8  # levels of nested arguments kept in it


def event_lines(record: Record, slug: str, fmt: str, calls: dict[str, ToolCall], flow: str) -> list[bytes]:
    """The episodic events of one imported record, encoded for import_flush (episodic.append_events'
    shape plus the session and flow). Ids are the record id and a number: the same every time."""
    out: list[bytes] = []
    t = _micros(record.ts)
    rid = record.id

    def add(type_: str, name: str, data: dict, **columns: Any) -> None:
        line: dict[str, Any] = {"ss": slug, "fl": flow, "i": f"{rid}:{len(out)}", "t": t, "y": type_, "n": name}
        line.update({k: v for k, v in columns.items() if v is not None})
        data = {k: v for k, v in data.items() if v is not None}
        if data:
            line["x"] = data
        # values under secret-looking keys (api_key...) redacted, as episodic does; only a tool's
        # arguments have keys the source chose
        if "args" in data and _secret_field(data["args"]):
            line["x"] = scrub.redact_fields(data)
        out.append(json_line(line))

    if isinstance(record, User):
        add("turn", "user", {"chars": len(record.content), "turn_id": rid, "source": fmt})
    elif isinstance(record, Assistant):
        model = record.model or ""
        add("model_call", model, {"model": model or None, "turn_id": rid, "source": fmt,
                                  "cache_read_tokens": record.cache_read_tokens,
                                  "cache_creation_tokens": record.cache_creation_tokens,
                                  "cache_creation_1h_tokens": record.cache_creation_1h_tokens,
                                  "tokens_out_first": record.tokens_out_first,
                                  "usage_scope": record.usage_scope, "calls": record.calls,
                                  "continues": record.continues},
            ti=_int32(record.tokens_in), to=_int32(record.tokens_out), c=record.cost_usd, o=True)
        add("turn", "assistant", {"chars": len(record.content), "turn_id": rid, "source": fmt})
    elif isinstance(record, Tool):
        name = record.name or "tool"
        call = calls.get(record.tool_call_id)
        args = tool_call_arguments(call) if call else {}
        ok = record.ok
        add("tool_call", name, {"tool": name, "args": _clip(args) or None, "turn_id": rid, "source": fmt,
                                "result_chars": len(record.content),
                                "outcome": "ok" if ok else "error"}, d=record.duration_ms, o=ok)
        # what the call did, as a live call's events are derived (sessions.derive.events)
        for type_, what, fields in events(foreign_meaning(name, args, record, call), live=False):
            add(type_, what, {**fields, "turn_id": rid, "source": fmt})
    elif isinstance(record, Compact):
        covers = record.covers
        add("compaction", slug, {"first_turn": covers.new_first_turn if covers else None,
                                 "last_turn": covers.last_turn if covers else None,
                                 "model": record.model, "reason": record.reason, "record_id": rid,
                                 "source": fmt}, o=True)
    elif isinstance(record, System) and record.notice == "error":
        add("error", fmt, {"error": record.content[:500], "turn_id": rid, "source": fmt})
    return out


def _int32(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and -2**31 <= value < 2**31:
        return value
    return None


def _micros(ts: str) -> int:
    try:
        moment = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return time.time_ns() // 1000
    return int(moment.timestamp() * 1_000_000)


def _clip(value: Any, depth: int = 0) -> Any:
    """A tool call's arguments cut down for an event: long strings, long lists and deep nesting."""
    if isinstance(value, str):
        return value if len(value) <= _ARG_CLIP else value[:_ARG_CLIP] + "…"
    if isinstance(value, (dict, list)) and depth >= _CLIP_DEPTH:
        return "…"
    if isinstance(value, dict):
        return {k: _clip(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_clip(v, depth + 1) for v in value[:50]]
    return value


def _secret_field(value: Any) -> bool:
    """Whether a (clipped, so shallow) value holds a key that looks secret (scrub.SECRET_FIELD)."""
    if isinstance(value, dict):
        return any(type(k) is str and scrub.SECRET_FIELD.search(k) or _secret_field(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_secret_field(v) for v in value)
    return False
