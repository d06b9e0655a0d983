"""Claude Code session logs: `~/.claude/projects/<encoded cwd>/<session id>.jsonl`.

The quirks of the format, and what this importer does with each:

- One JSON object per line. `type` user | assistant | system carry the conversation; the rest
  (summary, file-history-snapshot, queue-operation, progress, attachment, custom-title...) are
  metadata: skipped, though those with a `uuid` keep their place in the parent chain.
- One model response is split over several lines, one content block each (thinking, text,
  tool_use), sharing `message.id` and `requestId`. They become one assistant record. `usage` is
  repeated on every line and grows while the answer streams (the first line's output_tokens is
  often 1): the record keeps the last line's usage, counted once, and the first line's output
  count as `tokens_out_first` — what ccusage counts, since it keeps the first line of a
  message.id:requestId pair (ccusage issues #901, #938).
- Tool results come as user lines whose content holds `tool_result` blocks (`tool_use_id`,
  `is_error`, content as text or blocks): one tool record each, named after its call. Text beside
  them (an interruption note) becomes a user record. `toolUseResult` repeats the output in a
  structured form and is not copied. A call whose result never came (the session ended, the user
  interrupted) stays a call without a result.
- Lines form a tree through `uuid` / `parentUuid`. A rewind (Esc Esc, or editing an earlier
  prompt) appends a user prompt whose parent is an earlier line: what was logged after that point
  and before the prompt is an abandoned branch. Every record stays, in file order, in the one
  session (those calls were billed, and they stay searchable and replayable); the prompt gets
  `rewind_to`, the id of the record the conversation continues from, and the model-context
  builder follows `rewind_to` so the abandoned turns are left out. Only a user prompt forks: tool
  results and assistant lines whose parent is not the newest line (parallel tool calls, hook
  progress lines) are the same conversation going on (claude-code-log's DAG notes list these
  false forks).
- `isSidechain: true` lines are a subagent's (the Task tool): in the main file in older versions,
  in `<session>/subagents/agent-<id>.jsonl` with the parent's `sessionId` in newer ones. They are
  imported into the parent's session marked `sidechain` (the `agentId`, or the uuid of the
  sidechain's first line) and kept out of the main conversation's context.
- A compaction is a `system` line with subtype `compact_boundary` (`parentUuid` null,
  `logicalParentUuid` the line before it, `compactMetadata.trigger` / `preTokens`) followed by a
  user line with `isCompactSummary` holding the summary (older versions: a user line starting
  "This session is being continued from a previous conversation"). Together they are one
  `compact` record standing in for every turn before it; the summary line is not a user turn.
- `isMeta` user lines are injected by Claude Code (command caveats, hook feedback): user records
  (the model saw them) with `source.meta`, which the session title skips.
- Other `system` lines (API errors, local command output, turn durations) are for the user, never
  for the model: system records with `notice` (`error` or `info`).
- Timestamps are UTC with Z. `cwd`, `gitBranch`, `version` are on every line: kept on a record
  when they change. `message.model` is on assistant lines (`<synthetic>` for Claude Code's own
  placeholder answers, which have zero usage).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..fsutil import open_regular
from .base import (Conversation, Draft, Parsed, Part, Problem, Usage, arguments_text, as_int, iso_ts,
                   loads, read_jsonl, text_of)

NAME = "claude-code"
PREFIX = "claude"
_TURN_TYPES = ("user", "assistant", "system")
_METADATA_TYPES = ("summary", "file-history-snapshot", "queue-operation", "progress", "attachment",
                   "custom-title", "ai-title", "agent-setting", "pr-link", "tag")
_CONTINUED = "This session is being continued from a previous conversation"


def sniff(head: bytes) -> bool:
    """True when the first lines look like Claude Code's."""
    for raw in head.split(b"\n")[:8]:
        value, reason = loads(raw) if raw.strip() else (None, "empty")
        if reason or not isinstance(value, dict):
            continue
        if "parentUuid" in value or ("sessionId" in value and value.get("type") in _TURN_TYPES):
            return True
        if value.get("type") in ("summary", "file-history-snapshot", "queue-operation") and \
                ("leafUuid" in value or "sessionId" in value or "messageId" in value):
            return True
    return False


def parse(data: bytes, path: Path) -> Parsed:
    lines, problems, consumed = read_jsonl(data, str(path))
    parser = _Parser(str(path), path.stem)
    for number, obj in lines:
        reason = parser.line(number, obj)
        if reason:
            problems.append(Problem(str(path), reason, number))
    return Parsed([parser.conversation()], problems, consumed)


class _Parser:
    def __init__(self, file: str, stem: str):
        self.file = file
        self.key: str | None = None
        self.stem = stem
        self.first_ts = ""
        self.last_ts = ""
        self.drafts: list[Draft] = []
        self.facts: dict[str, Any] = {}
        self.anchor: dict[str, str | None] = {}  # line uuid -> sid of the record it is (or hangs under)
        self.last_main: str | None = None  # sid of the newest record of the main conversation
        self.messages: dict[tuple, Draft] = {}  # (message.id, requestId) -> its assistant draft
        self.tool_names: dict[str, str] = {}  # tool_use id -> tool name
        self.sidechain_of: dict[str, str] = {}  # sidechain line uuid -> its sidechain label
        self.boundary: dict | None = None  # a compact_boundary waiting for its summary line
        self.model = ""
        self.cwd: str | None = None
        self.branch: str | None = None

    def conversation(self) -> Conversation:
        return Conversation(self.key or self.stem, PREFIX, self.first_ts or self.last_ts, self.drafts, self.facts)

    # ------------------------------------------------------------------ one line
    def line(self, number: int, obj: dict) -> str | None:
        kind = obj.get("type")
        uuid = obj["uuid"] if isinstance(obj.get("uuid"), str) else None
        parent = obj["parentUuid"] if isinstance(obj.get("parentUuid"), str) else None
        if kind not in _TURN_TYPES:
            if uuid:
                self.anchor[uuid] = self.anchor.get(parent) if parent else None
            if kind in _METADATA_TYPES or isinstance(kind, str):
                return None  # metadata of Claude Code itself, or a type newer than this importer
            return "line without a type"
        if self.key is None and isinstance(obj.get("sessionId"), str) and obj["sessionId"]:
            self.key = obj["sessionId"]
        ts = iso_ts(obj.get("timestamp"), naive_local=False) or self.last_ts
        if not ts:
            return "line without a readable timestamp (and none before it)"
        self.last_ts = ts
        self.first_ts = self.first_ts or ts
        uuid = uuid or f"line-{number}"
        message = obj.get("message")
        if kind != "system" and not isinstance(message, dict):
            self.anchor[uuid] = self.anchor.get(parent) if parent else None
            return f"{kind} line without a message object"
        side = self._sidechain(obj, uuid, parent)
        where = {"line": number}
        if isinstance(obj.get("sessionId"), str) and obj["sessionId"] != self.key:
            where["session"] = obj["sessionId"]
        if kind == "assistant":
            self._assistant(obj, message, uuid, parent, ts, side, where)
        elif kind == "user":
            self._user(obj, message, uuid, parent, ts, side, where)
        else:
            self._system(obj, uuid, parent, ts, side, where)
        return None

    def _sidechain(self, obj: dict, uuid: str, parent: str | None) -> str | None:
        if obj.get("isSidechain") is not True:
            return None
        label = obj["agentId"] if isinstance(obj.get("agentId"), str) and obj["agentId"] else None
        label = label or (self.sidechain_of.get(parent) if parent else None) or uuid
        self.sidechain_of[uuid] = label
        return label

    def _facts(self, obj: dict, fields: dict) -> None:
        """cwd and git branch on the first record and whenever they change."""
        cwd, branch = obj.get("cwd"), obj.get("gitBranch")
        if isinstance(cwd, str) and cwd and cwd != self.cwd:
            self.cwd = fields["cwd"] = cwd
            self.facts.setdefault("cwd", cwd)
        if isinstance(branch, str) and branch and branch != self.branch:
            self.branch = fields["git_branch"] = branch
            self.facts.setdefault("git_branch", branch)
        if isinstance(obj.get("version"), str):
            self.facts.setdefault("version", obj["version"])

    def _add(self, draft: Draft, side: str | None) -> Draft:
        if side:
            draft.fields["sidechain"] = side
        self.drafts.append(draft)
        return draft

    # ------------------------------------------------------------------ assistant
    def _assistant(self, obj, message, uuid, parent, ts, side, where) -> None:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else \
            [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        parts = []
        for index, block in enumerate(blocks):
            sid = uuid if index == 0 else f"{uuid}#{index}"
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                parts.append(Part(sid, "text", block["text"], ts))
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                parts.append(Part(sid, "reasoning", block["thinking"], ts))
            elif kind in ("tool_use", "server_tool_use") and isinstance(block.get("name"), str):
                call_id = block["id"] if isinstance(block.get("id"), str) else f"{uuid}-call-{index}"
                self.tool_names[call_id] = block["name"]
                parts.append(Part(sid, "call", {"id": call_id, "name": block["name"],
                                                "arguments": arguments_text(block.get("input"))}, ts))
        usage = _usage(message.get("usage"))
        model = message["model"] if isinstance(message.get("model"), str) else ""
        if model and model != "<synthetic>":
            self.model = model
        mid = message.get("id")
        key = (mid, obj.get("requestId")) if isinstance(mid, str) and mid else None
        draft = self.messages.get(key) if key else None
        if draft is not None and draft.fields.get("sidechain") == side:
            assert draft.parts is not None  # self.messages holds assistant drafts, which have parts
            draft.parts.extend(parts)
            if usage is not None:
                first = draft.usage.first_out if draft.usage else usage.tokens_out
                usage.first_out = first
                draft.usage = usage
            if isinstance(message.get("stop_reason"), str):
                draft.fields["finish_reason"] = message["stop_reason"]
        else:
            fields: dict[str, Any] = {}
            if model:
                fields["model"] = model
            if isinstance(message.get("stop_reason"), str):
                fields["finish_reason"] = message["stop_reason"]
            self._facts(obj, fields)
            if usage is not None:
                usage.first_out = usage.tokens_out
            source = dict(where)
            if obj.get("isApiErrorMessage") is True:
                source["api_error"] = True
            if isinstance(mid, str):
                source["message_id"] = mid
            if isinstance(obj.get("requestId"), str):
                source["request_id"] = obj["requestId"]
            draft = self._add(Draft("assistant", uuid, ts, fields, parts, usage, source), side)
            if key:
                self.messages[key] = draft
        self.anchor[uuid] = draft.sid
        if not side:
            self.last_main = draft.sid

    # ------------------------------------------------------------------ user
    def _user(self, obj, message, uuid, parent, ts, side, where) -> None:
        content = message.get("content")
        text = text_of(content) if isinstance(content, str) else ""
        results = []
        if isinstance(content, list):
            results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
            text = text_of([b for b in content if not (isinstance(b, dict) and b.get("type") == "tool_result")])
        if obj.get("isCompactSummary") is True or (self.boundary and text.startswith(_CONTINUED)):
            self._compact(obj, text, uuid, ts, side, where)
            return
        first = True
        for index, block in enumerate(results):
            call_id = block["tool_use_id"] if isinstance(block.get("tool_use_id"), str) else ""
            fields: dict[str, Any] = {"tool_call_id": call_id, "name": self.tool_names.get(call_id, "unknown"),
                                      "content": text_of(block.get("content")), "ok": block.get("is_error") is not True}
            if first:
                self._facts(obj, fields)
            sid = uuid if first else f"{uuid}#{index}"
            self._add(Draft("tool", sid, ts, fields, source=dict(where)), side)
            first = False
        anchor = self.anchor.get(parent) if parent else None
        if text.strip():
            fields = {"content": text}
            if first:
                self._facts(obj, fields)
            source = dict(where)
            if obj.get("isMeta") is True:
                source["meta"] = True
            if not side and not results and anchor is not None and anchor != self.last_main:
                fields["rewind_to"] = anchor  # a sid here; the engine turns it into a record id
            self._add(Draft("user", uuid if first else f"{uuid}#text", ts, fields, source=source), side)
            first = False
        if first:  # nothing to import (an empty message): keep the chain going through it
            self.anchor[uuid] = anchor
            return
        self.anchor[uuid] = self.drafts[-1].sid
        if not side:
            self.last_main = self.drafts[-1].sid

    def _compact(self, obj, text, uuid, ts, side, where) -> None:
        boundary, self.boundary = self.boundary or {}, None
        trigger = boundary.get("trigger")
        fields: dict[str, Any] = {"summary": text, "reason": "manual" if trigger == "manual" else "tokens"}
        if self.model:
            fields["model"] = self.model
        source = dict(where)
        if trigger:
            source["trigger"] = trigger
        if boundary.get("pre_tokens") is not None:
            source["pre_tokens"] = boundary["pre_tokens"]
        if boundary.get("uuid"):
            source["boundary"] = boundary["uuid"]
        draft = self._add(Draft("compact", uuid, ts, fields, source=source), side)
        self.anchor[uuid] = draft.sid
        if not side:
            self.last_main = draft.sid

    # ------------------------------------------------------------------ system
    def _system(self, obj, uuid, parent, ts, side, where) -> None:
        subtype = obj.get("subtype")
        logical = obj["logicalParentUuid"] if isinstance(obj.get("logicalParentUuid"), str) else None
        before = parent or logical
        self.anchor[uuid] = self.anchor.get(before) if before else None
        if subtype == "compact_boundary":
            meta = obj["compactMetadata"] if isinstance(obj.get("compactMetadata"), dict) else {}
            self.boundary = {"uuid": uuid, "trigger": meta.get("trigger"), "pre_tokens": meta.get("preTokens")}
            return
        content = obj.get("content")
        if not isinstance(content, str) or not content.strip():
            return
        level = obj.get("level")
        notice = "error" if level == "error" or "error" in str(subtype or "") else "info"
        fields = {"content": content, "notice": notice}
        source = dict(where)
        if isinstance(subtype, str):
            source["subtype"] = subtype
        self._add(Draft("system", uuid, ts, fields, source=source), side)


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    fresh, out = as_int(raw.get("input_tokens")), as_int(raw.get("output_tokens"))
    created, read = as_int(raw.get("cache_creation_input_tokens")), as_int(raw.get("cache_read_input_tokens"))
    split = raw.get("cache_creation")  # {ephemeral_5m_input_tokens, ephemeral_1h_input_tokens}: the writes by TTL
    long = min(created, as_int(split.get("ephemeral_1h_input_tokens"))) if isinstance(split, dict) else 0
    return Usage(tokens_in=fresh + created + read, tokens_out=out, cache_read=read, cache_creation=created,
                 cache_creation_1h=long)


def project_dir_name(root: str) -> str:
    """The folder Claude Code keeps a workspace's sessions in: every character of the path that is
    not a letter or digit becomes '-' (`/home/me/my.app` -> `-home-me-my-app`)."""
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in root)


def recorded_cwd(path: Path, limit: int = 64 * 1024) -> str | None:
    """The cwd the first lines of a session file record (None when none does)."""
    try:
        with os.fdopen(open_regular(path), "rb") as fh:
            head = fh.read(limit)
    except OSError:
        return None
    for raw in head.split(b"\n")[:50]:
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict) and isinstance(value.get("cwd"), str):
            return value["cwd"]
    return None
