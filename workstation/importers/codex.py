"""OpenAI Codex CLI rollouts: `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`.

The quirks of the format, and what this importer does with each:

- Lines are `{timestamp, type, payload}`: `session_meta` (id, cwd, git, cli_version, the first
  line), `turn_context` (cwd and model of the turns that follow), `response_item` (what the model
  was sent and answered: messages, reasoning, function calls and their outputs), `event_msg` (what
  the UI showed), `compacted`. The oldest Rust versions wrote bare response items with no
  envelope after a first `{id, timestamp, instructions}` line; both shapes are read.
- Every message is there twice: as a `response_item` and as an `event_msg` copy (`user_message`,
  `agent_message`, `agent_reasoning`). Only the response items are imported; the copies are
  skipped, so each message is imported once.
- A model call is a run of output items (reasoning, assistant message, function_call,
  custom_tool_call, local_shell_call, web_search_call) between two inputs (a user message or a
  tool output): one assistant record, its text, reasoning summaries and calls together. Tool
  names and arguments stay as the model produced them (`shell` with an argv list, `exec_command`,
  the free-form `apply_patch` of `custom_tool_call`, MCP tools as `server__tool`).
- Usage is in `event_msg` `token_count` events, not on the items. `info.last_token_usage` is the
  call's usage (`input_tokens` includes `cached_input_tokens`; `output_tokens` includes
  `reasoning_output_tokens`); where only `info.total_token_usage` exists, the call's usage is the
  difference from the previous total, and a repeated total is a duplicate event. Its place moved
  between CLI versions: 0.4x logged it just before the call's items, later versions just after
  them. So a count belongs to the run it touches with no input between them: the run before it
  if that run has no usage yet, otherwise the next run. `info: null` events (rate limits only)
  carry no usage.
- Tool outputs changed shape: up to ~0.4x `function_call_output.output` is a JSON string
  `{"output": ..., "metadata": {"exit_code", "duration_seconds"}}` (unwrapped here, the exit code
  giving `ok`); later it is plain text starting "Exit code: N" (read for `ok`), or for
  `custom_tool_call_output` a list of content items. A call without an output stays a call
  without a result.
- `compacted` (`payload.message`, the summary; newer versions also `replacement_history`) is one
  `compact` record standing in for every turn before it.
- User-role messages Codex injects itself (`<environment_context>`, `<user_instructions>`,
  AGENTS.md) are user records with `source.meta`; `developer` / `system` role messages are system
  records (the model was sent them as such).
- Timestamps are UTC with Z; `session_meta.git` gives the branch and commit.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ..fsutil import open_regular
from .base import (Conversation, Draft, Parsed, Part, Problem, Usage, arguments_text, as_int, iso_ts, loads,
                   read_jsonl, text_of)

NAME = "codex"
PREFIX = "codex"
_OUTPUT_ITEMS = ("reasoning", "function_call", "custom_tool_call", "local_shell_call", "web_search_call")
_CALL_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
_ENVELOPES = ("session_meta", "response_item", "event_msg", "turn_context", "compacted")
_INJECTED = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<INSTRUCTIONS>",
             "<user_shell_command>", "<turn_aborted>")
_EXIT_CODE = re.compile(r"^Exit code: (-?\d+)", re.MULTILINE)


def sniff(head: bytes) -> bool:
    for raw in head.split(b"\n")[:4]:
        value, reason = loads(raw) if raw.strip() else (None, "empty")
        if reason or not isinstance(value, dict):
            continue
        if value.get("type") in _ENVELOPES and "payload" in value:
            return True
        if "instructions" in value and "id" in value and "timestamp" in value:  # oldest rollouts
            return True
    return False


def parse(data: bytes, path: Path) -> Parsed:
    lines, problems, consumed = read_jsonl(data, str(path))
    parser = _Parser(path)
    for number, obj in lines:
        reason = parser.line(number, obj)
        if reason:
            problems.append(Problem(str(path), reason, number))
    parser.finish()
    return Parsed([parser.conversation()], problems, consumed)


class _Parser:
    def __init__(self, path: Path):
        self.path = path
        self.key: str | None = None
        self.first_ts = ""
        self.last_ts = ""
        self.drafts: list[Draft] = []
        self.facts: dict[str, Any] = {}
        self.model = ""
        self.cwd: str | None = None
        self.branch: str | None = None
        self.cwd_now: str | None = None  # the cwd of the latest turn_context
        self.run: Draft | None = None  # the newest model call (its output items so far)
        self.run_open = False  # no input came since the run's last item (and no count closed it)
        self.pending: Usage | None = None  # a token count waiting for the next run
        self.pending_clean = False  # no input came since that count
        self.total: tuple | None = None  # previous total_token_usage (dedup and differences)
        self.tool_names: dict[str, str] = {}

    def conversation(self) -> Conversation:
        key = self.key or _id_from_name(self.path.name) or self.path.stem
        return Conversation(key, PREFIX, self.first_ts or self.last_ts, self.drafts, self.facts)

    def finish(self) -> None:
        if self.pending is not None:  # a count with no run after it: the newest run's
            if self.run is not None:
                _add_usage(self.run, self.pending)
            self.pending = None

    # ------------------------------------------------------------------ one line
    def line(self, number: int, obj: dict) -> str | None:
        ts = iso_ts(obj.get("timestamp"), naive_local=False)
        if ts:
            self.last_ts = ts
            self.first_ts = self.first_ts or ts
        ts = ts or self.last_ts
        kind = obj.get("type")
        payload = obj.get("payload")
        if "payload" not in obj:  # the oldest rollouts: bare items after an {id, timestamp, instructions} line
            if "instructions" in obj and isinstance(obj.get("id"), str):
                self._meta(obj)
                return None
            if obj.get("record_type") == "state":
                return None
            kind, payload = "response_item", obj
        if not isinstance(payload, dict):
            return f"{kind or 'line'} without a payload object"
        if not ts:
            ts = "1970-01-01T00:00:00.000Z"
        if kind == "session_meta":
            self._meta(payload)
        elif kind == "turn_context":
            if isinstance(payload.get("model"), str) and payload["model"]:
                self.model = payload["model"]
            if isinstance(payload.get("cwd"), str):
                self.facts.setdefault("cwd", payload["cwd"])
                self.cwd_now = payload["cwd"]
        elif kind == "response_item":
            self._item(number, payload, ts)
        elif kind == "event_msg":
            if payload.get("type") == "token_count":
                self._tokens(payload)
        elif kind == "compacted":
            self._compacted(number, payload, ts)
        return None

    def _meta(self, meta: dict) -> None:
        if self.key is None and isinstance(meta.get("id"), str) and meta["id"]:
            self.key = meta["id"]
        for name in ("cwd", "cli_version", "originator", "model_provider"):
            if isinstance(meta.get(name), str):
                self.facts.setdefault(name, meta[name])
        git = meta["git"] if isinstance(meta.get("git"), dict) else {}
        if isinstance(git.get("branch"), str):
            self.facts.setdefault("git_branch", git["branch"])
        if isinstance(git.get("commit_hash"), str):
            self.facts.setdefault("git_commit", git["commit_hash"])

    def _fields(self, fields: dict) -> dict:
        cwd = self.cwd_now or self.facts.get("cwd")
        if isinstance(cwd, str) and cwd != self.cwd:
            self.cwd = fields["cwd"] = cwd
        branch = self.facts.get("git_branch")
        if isinstance(branch, str) and branch != self.branch:
            self.branch = fields["git_branch"] = branch
        return fields

    def _sid(self, number: int, payload: dict) -> str:
        ident = payload["id"] if isinstance(payload.get("id"), str) else None
        return f"{number}:{ident}" if ident else f"line-{number}"

    # ------------------------------------------------------------------ items
    def _item(self, number: int, payload: dict, ts: str) -> None:
        kind = payload.get("type")
        sid = self._sid(number, payload)
        where = {"line": number}
        if kind == "message":
            role = payload.get("role")
            text = text_of(payload.get("content"))
            if role == "assistant":
                self._part(Part(sid, "text", text, ts), ts, where)
            elif role in ("developer", "system"):
                self._input()
                self.drafts.append(Draft("system", sid, ts, self._fields({"content": text}), source=where))
            else:
                self._input()
                source = dict(where)
                if text.lstrip().startswith(_INJECTED):
                    source["meta"] = True
                self.drafts.append(Draft("user", sid, ts, self._fields({"content": text}), source=source))
        elif kind == "reasoning":
            summary = payload.get("summary")
            text = "\n".join(s.get("text", "") for s in summary if isinstance(s, dict)) \
                if isinstance(summary, list) else ""
            if not text and isinstance(payload.get("content"), list):
                text = text_of(payload["content"])
            self._part(Part(sid, "reasoning", text, ts), ts, where)
        elif kind in ("function_call", "custom_tool_call", "local_shell_call", "web_search_call"):
            call_id = payload.get("call_id") or payload.get("id") or sid
            name = payload.get("name")
            if kind == "local_shell_call":
                name, args = "local_shell", arguments_text(payload.get("action"))
            elif kind == "web_search_call":
                name, args = "web_search", arguments_text(payload.get("action"))
            elif kind == "custom_tool_call":
                args = payload["input"] if isinstance(payload.get("input"), str) else arguments_text(payload.get("input"))
            else:
                args = arguments_text(payload.get("arguments"))
            name = name if isinstance(name, str) and name else kind
            self.tool_names[str(call_id)] = name
            call = {"id": str(call_id), "name": name, "arguments": args}
            if kind == "custom_tool_call":
                call["freeform"] = True  # the model wrote raw text (a patch), not JSON arguments
            self._part(Part(sid, "call", call, ts), ts, where)
        elif kind in _CALL_OUTPUTS:
            self._input()
            call_id = str(payload.get("call_id") or "")
            content, ok, extra = _output(payload.get("output"))
            fields = {"tool_call_id": call_id, "name": self.tool_names.get(call_id, "unknown"),
                      "content": content, "ok": ok, **extra}
            self.drafts.append(Draft("tool", sid, ts, self._fields(fields), source=where))
        # other items (ghost snapshots, tool search results) carry nothing to replay

    def _input(self) -> None:
        self.run_open = False
        self.pending_clean = False

    def _part(self, part: Part, ts: str, where: dict) -> None:
        if part.kind != "call" and not part.value:
            return
        # a count waiting while the open run already has one: that count announces a new call
        new_call = self.pending is not None and self.run is not None and self.run.usage is not None
        if self.run is None or not self.run_open or new_call:
            if self.pending is not None and not self.pending_clean:
                self._orphan(self.pending)
                self.pending = None
            fields: dict[str, Any] = {}
            if self.model:
                fields["model"] = self.model
            self.run = Draft("assistant", part.sid, ts, self._fields(fields), [], None, dict(where))
            self.drafts.append(self.run)
            self.run_open = True
            if self.pending is not None:  # logged just before this call's items (0.4x)
                _add_usage(self.run, self.pending)
                self.pending = None
        assert self.run.parts is not None  # an assistant draft, made with parts
        self.run.parts.append(part)

    def _orphan(self, usage: Usage) -> None:
        """A count that touches no run: kept on the newest run rather than lost."""
        target = next((d for d in reversed(self.drafts) if d.type == "assistant"), None)
        if target is not None:
            _add_usage(target, usage)

    # ------------------------------------------------------------------ usage
    def _tokens(self, payload: dict) -> None:
        info = payload.get("info")
        usage = None
        if isinstance(info, dict):
            total = info.get("total_token_usage")
            last = info.get("last_token_usage")
            key = _usage_key(total)
            if key is not None and key == self.total:
                return  # the same count logged again
            if isinstance(last, dict):
                usage = _codex_usage(last)
            elif key is not None:
                previous = self.total or (0, 0, 0, 0)
                usage = Usage(tokens_in=key[0] - previous[0], tokens_out=key[2] - previous[2],
                              cache_read=key[1] - previous[1], reasoning=key[3] - previous[3] or None)
            if key is not None:
                self.total = key
        elif info is None and "input_tokens" in payload:  # the oldest shape: the counts on the payload
            usage = _codex_usage(payload)
        if usage is None or (usage.tokens_in == 0 and usage.tokens_out == 0):
            return
        if self.pending is not None:  # two counts with no run between: the first belongs behind us
            self._orphan(self.pending)
            self.pending = None
        if self.run is not None and self.run_open and self.run.usage is None:
            _add_usage(self.run, usage)  # logged just after its call's items (newer versions)
            self.run_open = False  # the count ends the call
        else:
            self.pending, self.pending_clean = usage, True

    # ------------------------------------------------------------------ compaction
    def _compacted(self, number: int, payload: dict, ts: str) -> None:
        self._input()
        summary = payload["message"] if isinstance(payload.get("message"), str) else text_of(payload.get("message"))
        fields: dict[str, Any] = {"summary": summary, "reason": "tokens"}
        if self.model:
            fields["model"] = self.model
        source = {"line": number}
        if isinstance(payload.get("replacement_history"), list):
            source["replacement_items"] = len(payload["replacement_history"])
        self.drafts.append(Draft("compact", f"line-{number}", ts, fields, source=source))


def _usage_key(total: Any) -> tuple | None:
    if not isinstance(total, dict):
        return None
    return (as_int(total.get("input_tokens")), as_int(total.get("cached_input_tokens")),
            as_int(total.get("output_tokens")), as_int(total.get("reasoning_output_tokens")))


def _codex_usage(raw: dict) -> Usage:
    return Usage(tokens_in=as_int(raw.get("input_tokens")), tokens_out=as_int(raw.get("output_tokens")),
                 cache_read=as_int(raw.get("cached_input_tokens")),
                 reasoning=as_int(raw.get("reasoning_output_tokens")) or None)


def _add_usage(draft: Draft, usage: Usage) -> None:
    if draft.usage is None:
        draft.usage = usage
        return
    have = draft.usage
    have.tokens_in += usage.tokens_in
    have.tokens_out += usage.tokens_out
    have.cache_read += usage.cache_read
    have.cache_creation += usage.cache_creation
    if usage.reasoning:
        have.reasoning = (have.reasoning or 0) + usage.reasoning


def _output(raw: Any) -> tuple[str, bool, dict]:
    """(content, ok, extra fields) of a tool output in any of the shapes the CLI versions wrote."""
    extra: dict[str, Any] = {}
    if isinstance(raw, list):
        return text_of(raw), True, extra
    if isinstance(raw, dict):
        raw = json.dumps(raw, ensure_ascii=False)
    if not isinstance(raw, str):
        return "", True, extra
    if raw.startswith("{") and '"output"' in raw:
        value, reason = loads(raw)
        if reason is None and isinstance(value, dict) and "output" in value:
            meta = value["metadata"] if isinstance(value.get("metadata"), dict) else {}
            code = meta.get("exit_code")
            if isinstance(meta.get("duration_seconds"), (int, float)):
                extra["duration_ms"] = round(float(meta["duration_seconds"]) * 1000, 1)
            if isinstance(code, int):
                extra["exit_code"] = code
            return text_of(value.get("output")), not (isinstance(code, int) and code != 0), extra
    found = _EXIT_CODE.match(raw)
    if found:
        extra["exit_code"] = int(found.group(1))
        return raw, found.group(1) == "0", extra
    return raw, True, extra


def _id_from_name(name: str) -> str | None:
    found = re.search(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})", name)
    return found.group(1) if found else None


def session_cwd(path: Path, limit: int = 64 * 1024) -> str | None:
    """The cwd a rollout records in its first lines (session_meta or turn_context)."""
    try:
        with os.fdopen(open_regular(path), "rb") as fh:
            head = fh.read(limit)
    except OSError:
        return None
    for raw in head.split(b"\n")[:20]:
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        payload = value.get("payload") if isinstance(value, dict) else None
        for obj in (payload, value):
            if isinstance(obj, dict) and isinstance(obj.get("cwd"), str):
                return obj["cwd"]
    return None
