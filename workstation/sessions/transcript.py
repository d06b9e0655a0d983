"""A session's records as chat turns: the one derivation the live chat, a resumed chat and replay share.

A record becomes the turns tui.viewdata.Turn shows (mappings the TUI coerces), whoever shows it: the
live backend as the agent writes it (`AgentEvents.on_record`) and as a slash command answers, a resumed
session and the replay screen from the log (replay.episode). So a resumed transcript is the live one.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Protocol

from ..sessions.catalog import summary_span
from ..sessions.modelview import Redaction, summary_turn_text, update_line
from ..sessions.log import tool_call_arguments
from ..sessions.records import Assistant, Command, Compact, Record, Redaction as RedactionRecord, System, Tool, \
    ToolCall, User
from ..sessions.turns import hit_turn, number, starts_turn, taken_back
from ..textdiff import record_diff


class ToolShow(Protocol):
    """How the agent's tools show a recorded call, each as it declares beside its implementation: the module
    workstation.agent.tools, handed in by the caller (the sessions sit below the agent in the layers)."""

    def call_label(self, name: str, args: dict) -> str: ...

    def outcome_of(self, name: str, args: Mapping[str, Any], record: Mapping[str, Any]) -> str: ...


def tool_turn(record: Tool, args: dict, base: dict, tools: ToolShow) -> dict:
    """A tool record as a chat turn: the call in one line as its tool labels it, what it came to
    (`agent.tools.outcome_of`), its result and its diff."""
    name = record.name or "tool"
    # the tools and textdiff read a record through Fields' mapping access until their reads are typed
    return {**base, "role": "tool", "text": tools.call_label(name, args), "tool": name, "args": args,
            "result": record.content, "ok": record.ok, "diff": record_diff(record),  # type: ignore[arg-type]
            "outcome": tools.outcome_of(name, args, record)}  # type: ignore[arg-type]


def assistant_text(record: Assistant) -> str:
    """What an assistant message shows: its text, or the tools it calls when it says nothing."""
    text = record.content
    names = [c.name for c in record.tool_calls or ()]
    return text or (f"*calls {', '.join(names)}*" if names else "")


def command_asked(line: str, **base: Any) -> dict:
    """A slash command line as the chat shows it, from the moment it is typed."""
    return {**base, "role": "user", "text": line}


def command_said(text: str, ok: bool, **base: Any) -> dict:
    """A slash command's answer."""
    return {**base, "role": "command" if ok else "error", "text": text}


def record_turns(record: Record, *, tools: ToolShow, ts: float, args: dict | None = None, number: int | None = None,
                 span: str = "", taken: str = "", earlier: dict[str, Tool] | None = None) -> list[dict]:
    """The chat turns of one record. `args`: a tool record's call arguments; `number`: a turn-opening user
    message's turn (sessions.turns); `span`: a compact record's turns; `taken`: what took it back
    (sessions.turns.TakenBack.describe); `earlier`: the tool records before a redaction, by id. A
    sub-agent's records (`sidechain`) are none: the chat shows its task call and summary."""
    if record.sidechain:
        return []
    base: dict[str, Any] = {"id": record.id, "ts": ts, "tokens": record.tokens}
    if taken:
        base["taken_back"] = taken
    if isinstance(record, User):
        return [{**base, "role": "user", "text": record.content,
                 **({"number": number} if number and starts_turn(record) else {})}]
    if isinstance(record, Assistant):
        return [{**base, "role": "assistant", "text": assistant_text(record)}]
    if isinstance(record, Tool):
        return [tool_turn(record, args or {}, base, tools)]
    if isinstance(record, System):
        text = record.content
        if record.pin:
            return [{**base, "role": "system", "text": f"Pinned: {text}"}]
        if record.update is not None:  # what the model was told (agent.updates), in one line
            return [{**base, "role": "notice", "text": update_line(text)}]
        if record.notice:
            return [{**base, "role": "error" if record.notice == "error" else "notice", "text": text}]
        return [{**base, "role": "system", "text": text}]
    if isinstance(record, Command):  # the user's and the app's lines, no turn of the conversation (no id, as live)
        return [command_asked(record.line, ts=ts), command_said(record.content, record.ok, ts=ts)]
    if isinstance(record, Compact):
        said = (f"Compaction: turns {span} summarized by {record.model or '?'} "
                f"({record.reason or '?'}); the model sees the summary instead of them from here on")
        return [{**base, "role": "compaction", "text": said, "result": summary_turn_text(record)}]
    if isinstance(record, RedactionRecord):
        out = []
        for target in record.targets or ():
            original = (earlier or {}).get(target.id)
            marker = Redaction(target.id, target.name or "tool", int(target.chars or 0), target.key or "").marker
            out.append({**base, "role": "redaction", "text": marker, "tokens": None,
                        "result": original.content if original else ""})
        return out
    return []


def log_groups(records: list[Record], start: int = 0, *, tools: ToolShow,
               ts: Callable[[Record], float | None]) -> list[list[dict]]:
    """The chat turns of each record of `records[start:]`, a whole log in file order (what went before
    gives the calls' arguments, turn numbers, compaction spans and the taken-back marks), except that a
    slash command's lines come with the first record it wrote itself (`wrote_from`: the note an `/undo`
    leaves the model follows the `/undo`), and none with its own record. `ts`: a record's epoch seconds
    (None: unreadable, then its predecessor's)."""
    turns, marks = number(records), taken_back(records)
    where = {record.id: index for index, record in enumerate(records)}
    ahead = {r.wrote_from: r for r in records[start:] if isinstance(r, Command) and r.wrote_from is not None
             and start <= where.get(r.wrote_from, -1) < where[r.id]}
    moved = {r.id for r in ahead.values()}
    calls: dict[str, ToolCall] = {}
    tools_by_id: dict[str, Tool] = {}
    groups: list[list[dict]] = []
    last = 0.0
    for index, record in enumerate(records):
        last = ts(record) or last
        if isinstance(record, Assistant):
            calls.update((c.id, c) for c in record.tool_calls or () if c.id)
        if index >= start:
            group = []
            if record.id in ahead:  # the command that wrote it comes first
                group += record_turns(ahead[record.id], tools=tools, ts=ts(ahead[record.id]) or last)
            if record.id not in moved:
                call = calls.get(record.tool_call_id) if isinstance(record, Tool) else None
                mark = marks.get(record.id)
                group += record_turns(record, tools=tools, ts=last, args=tool_call_arguments(call) if call else {},
                                      number=hit_turn(record, turns.of(record)),
                                      span=summary_span(turns, record) if isinstance(record, Compact) else "",
                                      taken=mark.describe() if mark is not None else "",
                                      earlier=tools_by_id if isinstance(record, RedactionRecord) else None)
            groups.append(group)
        if isinstance(record, Tool):
            tools_by_id[record.id] = record
    return groups


def log_turns(records: list[Record], start: int = 0, *, tools: ToolShow,
              ts: Callable[[Record], float | None]) -> list[dict]:
    """The chat turns of `records[start:]` in the order a chat shows them (`log_groups`)."""
    return [turn for group in log_groups(records, start, tools=tools, ts=ts) for turn in group]
