"""Headless runs other programs read (`workstation -p`, `workstation exec`): the session host's typed events
(workstation.host) as Claude Code's headless output, and the tool filter of `--allowed-tools`.

`--output-format stream-json` writes one JSON object a line, in Claude Code's shapes where the concept is
the same (the `claude-agent-sdk` package parses them: tests/integration/test_headless.py):

* `{"type": "system", "subtype": "init", ...}` first: the session id, model, tools, cwd, permission mode;
* `{"type": "assistant", "message": {...}}` for each answer of the model: its text and `tool_use` blocks,
  its usage (cache reads and writes apart, as Anthropic reports them);
* `{"type": "user", "message": {"content": [{"type": "tool_result", ...}]}}` for each tool result;
* `{"type": "system", "subtype": "notice" | "compact_boundary", ...}` for what the user is told meanwhile;
* `{"type": "result", "subtype": "success" | "error_max_turns" | "error_max_budget_usd" |
  "error_during_execution", ...}` last: usage, the cost as billed (costs.billing: sub-agents' and
  compactions' calls included), the model calls (`num_turns`), the duration, the session id.

A sub-agent's own messages (its task, its answers, its tool results) are streamed as Claude Code streams
them, each with `parent_tool_use_id` naming the task call that started it (None: the session's own).
`--output-format json` writes the result alone; `text` the reply. The exit codes are the command's (workstation.cli.headless_cmds).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from . import __version__
from .agent.modes import CLAUDE_NAMES
from .agent.tools import Tool, ToolContext, ToolResult, Toolset
from .errors import WorkstationError
from .hooks import tool_names
from .host import Event, Notice, RecordWritten, Retry, Step, TextFragment, TurnFinished
from .costs.billing import bill
from .sessions.records import Assistant, Compact, Record, Tool as ToolRecord, User

FORMATS = ("text", "json", "stream-json")

# --------------------------------------------------------------------------- --allowed-tools
def tool_list(values: tuple[str, ...] | list[str]) -> list[str]:
    """The tool names of repeated, comma- or space-separated option values (Claude Code's syntax)."""
    names = [n for value in values for n in value.replace(",", " ").split() if n]
    for name in names:
        if "(" in name:
            raise WorkstationError(f"tool rule {name!r}: patterns are not supported; name whole tools "
                                   "(commands are checked against agent.command_allow as always)")
    return names


class Restricted(Toolset):
    """The tools of `base` this run may use: the others are not offered to the model, and a call to one is
    refused. A name matches a tool by our name or Claude Code's (`Bash` is run_command, `Edit` both edit
    tools, `mcp__server__tool` an MCP server's)."""

    def __init__(self, base: Toolset, allowed: list[str], disallowed: list[str]):
        known = {alias for name in base.tools for alias in tool_names(name)}
        unknown = [n for n in [*allowed, *disallowed] if n not in known]
        if unknown:
            raise WorkstationError(f"unknown tool {unknown[0]!r} (tools: {', '.join(base.tools)})")
        self.base = base

        def offered(name: str) -> bool:
            aliases = set(tool_names(name))
            return (not allowed or bool(aliases & set(allowed))) and not aliases & set(disallowed)

        self.tools: dict[str, Tool] = {n: t for n, t in base.tools.items() if offered(n)}
        self.withheld = [n for n in base.tools if n not in self.tools]

    def call(self, ctx: ToolContext, name: str, arguments: dict[str, Any], call_id: str = "") -> ToolResult:
        if name in self.withheld:
            return ToolResult(f"error: {name} is not allowed in this run (--allowed-tools / --disallowed-tools)",
                              ok=False, data={"outcome": "denied"})
        return super().call(ctx, name, arguments, call_id)


# --------------------------------------------------------------------------- the stream
@dataclass
class Stream:
    """One headless run's messages, from the host's events (`event`) and its end (`result`)."""

    session_id: str
    model: str
    cwd: str
    tools: list[str]
    permission_mode: str = "edits"
    mcp_servers: list[dict] = field(default_factory=list)
    slash_commands: list[str] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)
    api_key_source: str = "none"
    partial: bool = False  # --include-partial-messages: stream_event lines as the model's answer streams
    started: float = field(default_factory=time.monotonic)
    _calls: dict[str, dict] = field(default_factory=dict)  # tool_use id -> {name, input}
    _answer: "_Answer | None" = None  # the model call streaming now (partial)
    _message_ids: dict[str, str] = field(default_factory=dict)  # record id -> its message_start's id (partial)

    def init(self) -> dict:
        return {"type": "system", "subtype": "init", "uuid": _uuid(), "session_id": self.session_id,
                "cwd": self.cwd, "model": self.model, "tools": self.tools, "mcp_servers": self.mcp_servers,
                "permissionMode": CLAUDE_NAMES.get(self.permission_mode, "default"),
                "permission_mode": self.permission_mode,  # ours (agent.modes.CLAUDE_NAMES maps it)
                "slash_commands": self.slash_commands, "skills": self.skills, "plugins": [], "agents": [],
                "apiKeySource": self.api_key_source, "output_style": "default",
                # not Claude Code: the field is required, so it names us
                "claude_code_version": f"workstation/{__version__}"}

    def event(self, event: Event) -> list[dict]:
        """The messages one host event becomes (most become none)."""
        if self.partial and isinstance(event, (Step, Retry, TextFragment)):
            return self._partial(event)
        if isinstance(event, RecordWritten):
            record = event.record
            if self.partial and isinstance(record, Assistant) and not record.sidechain:
                return [*self._answered(record), *self._record(record)]
            return self._record(record, event.parent_call)
        if isinstance(event, Notice):
            return [{"type": "system", "subtype": "notice", "uuid": _uuid(), "session_id": self.session_id,
                     "text": event.line}]
        return []

    def _record(self, record: Record, parent: str | None = None) -> list[dict]:
        """`parent`: the task call a sub-agent's record is of (Claude Code's parent_tool_use_id)."""
        if record.sidechain and isinstance(record, User):  # the sub-agent's task, its first message
            return [{"type": "user", "uuid": record.id or _uuid(), "session_id": self.session_id,
                     "parent_tool_use_id": parent,
                     "message": {"role": "user", "content": [{"type": "text", "text": record.content}]}}]
        if isinstance(record, Assistant):
            return [self._assistant(record, parent)]
        if isinstance(record, ToolRecord):
            return [{"type": "user", "uuid": record.id or _uuid(), "session_id": self.session_id,
                     "parent_tool_use_id": parent,
                     "message": {"role": "user", "content": [
                         {"type": "tool_result", "tool_use_id": record.tool_call_id, "content": record.content,
                          "is_error": not record.ok}]},
                     "tool_use_result": {"tool": record.name, "ok": record.ok,
                                         **({"outcome": record.outcome} if record.outcome else {})}}]
        if isinstance(record, Compact) and not record.sidechain:
            return [{"type": "system", "subtype": "compact_boundary", "uuid": _uuid(), "session_id": self.session_id,
                     "compact_metadata": {"trigger": "manual" if record.focus else "auto"}}]
        return []

    # ----------------------------------------------------------------- --include-partial-messages
    def _partial(self, event: Step | Retry | TextFragment) -> list[dict]:
        """Anthropic's stream events of the model call running now: message_start when it is sent (again
        after a retry, whose text is void), a text block's start and deltas as the text streams."""
        if isinstance(event, (Step, Retry)):
            self._answer = _Answer(f"msg_{uuid.uuid4().hex[:24]}")
            return [self._stream_event({"type": "message_start", "message": {
                "id": self._answer.id, "type": "message", "role": "assistant", "model": self.model, "content": [],
                "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 0, "output_tokens": 0}}})]
        if self._answer is None or not event.text:
            return []
        out = []
        if self._answer.text is None:
            self._answer.text = self._answer.blocks
            self._answer.blocks += 1
            out.append(self._stream_event({"type": "content_block_start", "index": self._answer.text,
                                           "content_block": {"type": "text", "text": ""}}))
        out.append(self._stream_event({"type": "content_block_delta", "index": self._answer.text,
                                       "delta": {"type": "text_delta", "text": event.text}}))
        return out

    def _answered(self, record: Assistant) -> list[dict]:
        """The rest of the model call's stream events once its answer is in: the text not streamed, each
        tool call's block (its input as one JSON delta), the stop reason and the output tokens."""
        answer, self._answer = self._answer or _Answer(f"msg_{uuid.uuid4().hex[:24]}"), None
        out: list[dict] = []
        text = record.content or ""
        if answer.text is None and text:  # not streamed (a reply masked whole, or no fragments heard)
            answer.text, answer.blocks = answer.blocks, answer.blocks + 1
            out.append(self._stream_event({"type": "content_block_start", "index": answer.text,
                                           "content_block": {"type": "text", "text": ""}}))
            out.append(self._stream_event({"type": "content_block_delta", "index": answer.text,
                                           "delta": {"type": "text_delta", "text": text}}))
        if answer.text is not None:
            out.append(self._stream_event({"type": "content_block_stop", "index": answer.text}))
        for call in record.tool_calls or ():
            index, answer.blocks = answer.blocks, answer.blocks + 1
            out += [self._stream_event({"type": "content_block_start", "index": index, "content_block": {
                        "type": "tool_use", "id": call.id, "name": call.name, "input": {}}}),
                    self._stream_event({"type": "content_block_delta", "index": index, "delta": {
                        "type": "input_json_delta", "partial_json": call.arguments or "{}"}}),
                    self._stream_event({"type": "content_block_stop", "index": index})]
        out += [self._stream_event({"type": "message_delta", "delta": {
                    "stop_reason": "tool_use" if record.tool_calls else "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": int(record.tokens_out or 0)}}),
                self._stream_event({"type": "message_stop"})]
        self._message_ids[record.id] = answer.id
        return out

    def _stream_event(self, event: dict) -> dict:
        return {"type": "stream_event", "uuid": _uuid(), "session_id": self.session_id, "event": event,
                "parent_tool_use_id": None}

    def _assistant(self, record: Assistant, parent: str | None = None) -> dict:
        content: list[dict] = []
        if record.content:
            content.append({"type": "text", "text": record.content})
        for call in record.tool_calls or ():
            try:
                args = json.loads(call.arguments or "{}")
            except ValueError:
                args = {"raw": call.arguments}
            args = args if isinstance(args, dict) else {"value": args}
            self._calls[call.id] = {"name": call.name, "input": args}
            content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": args})
        return {"type": "assistant", "uuid": record.id or _uuid(), "session_id": self.session_id,
                "parent_tool_use_id": parent,
                "message": {"id": self._message_ids.get(record.id, record.id), "type": "message",
                            "role": "assistant", "model": record.model or self.model, "content": content,
                            "stop_reason": "tool_use" if record.tool_calls else "end_turn",
                            "stop_sequence": None, "usage": usage([record])}}

    def result(self, finished: TurnFinished | None, records: list[Record], *, subtype: str = "",
               error: str = "", reply: str | None = None) -> dict:
        """The last message: `finished` the turn's end (None: it never began; `error` says why; `reply` what a
        slash command said instead), `records` what the run wrote to the log (billed as costs.billing bills
        them)."""
        outcome = finished.result if finished is not None else None
        error = error or (outcome.error if outcome is not None and outcome.error else "")
        subtype = subtype or STOPPED.get(outcome.stopped or "" if outcome is not None else "", "") or \
            ("error_during_execution" if error else "success")
        answers = [r for r in records if isinstance(r, Assistant)]
        steps = [r for r in answers if not r.sidechain]
        message = {"type": "result", "subtype": subtype, "is_error": subtype != "success",
                   "duration_ms": round((time.monotonic() - self.started) * 1000),
                   "duration_api_ms": round(sum(float(r.latency_ms or 0) for r in answers)),
                   "num_turns": len(steps),
                   "result": reply if reply is not None else outcome.text if outcome is not None else "",
                   "session_id": self.session_id, "stop_reason": "end_turn" if subtype == "success" else None,
                   "total_cost_usd": round(bill(records).total.cost_usd, 8), "usage": usage(records),
                   "permission_denials": self._denials(records), "uuid": _uuid(),
                   "terminal_reason": TERMINAL.get(subtype, "completed")}
        if error:
            message["errors"] = [error]
        return message

    def _denials(self, records: list[Record]) -> list[dict]:
        return [{"tool_name": r.name, "tool_use_id": r.tool_call_id,
                 "tool_input": self._calls.get(r.tool_call_id, {}).get("input", {})}
                for r in records if isinstance(r, ToolRecord) and r.outcome == "denied" and not r.sidechain]


@dataclass
class _Answer:
    """One model call's stream (partial messages): its message id, the blocks started, the text block's."""

    id: str
    blocks: int = 0
    text: int | None = None  # the index of its text block, once started


STOPPED = {"max_steps": "error_max_turns", "budget": "error_max_budget_usd"}  # TurnResult.stopped -> subtype
TERMINAL = {"success": "completed", "error_max_turns": "max_turns", "error_max_budget_usd": "max_budget",
            "error_during_execution": "error"}


def usage(records: list[Record]) -> dict:
    """Anthropic's usage of the billed records (assistant and compact): input tokens not read from or written
    to the cache, cache reads and writes, output tokens."""
    total = bill(records).total
    return {"input_tokens": max(0, total.tokens_in - total.cache_read - total.cache_creation),
            "cache_creation_input_tokens": total.cache_creation, "cache_read_input_tokens": total.cache_read,
            "output_tokens": total.tokens_out,
            "cache_creation": {"ephemeral_5m_input_tokens": total.cache_creation - total.cache_creation_1h,
                               "ephemeral_1h_input_tokens": total.cache_creation_1h}}


def line(message: dict) -> str:
    return json.dumps(message, ensure_ascii=False, default=str)


def _uuid() -> str:
    return str(uuid.uuid4())
