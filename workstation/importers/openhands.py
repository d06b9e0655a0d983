"""OpenHands event trajectories: a JSON array of events (or {"trajectory"|"events"|"history": [...]}).

The quirks of the format, and what this importer does with each:

- Every event has `id`, `timestamp` (ISO without a zone: read as local time of this machine),
  `source` (user | agent | environment) and either `action` + `args` or `observation` + `content`
  + `extras`; an observation names the action it answers in `cause`.
- Agent actions made by function calling carry `tool_call_metadata`: `function_name`,
  `tool_call_id` and the whole litellm `model_response` (model, `choices[0].message` with the text
  and every tool call, `usage`). One response with several tool calls becomes several actions
  sharing `model_response.id`: they are one assistant record, its calls taken from the response
  exactly as the model wrote them (str_replace_editor, execute_bash, finish...), usage counted
  once. `usage.prompt_tokens` already includes the cache reads and writes litellm reports beside it.
- Observations with `tool_call_metadata` are the tool results of those calls (`error`
  observations and commands with a non-zero `extras.exit_code` are failures). Actions without
  metadata (older, non-function-calling runs) become a call named by the action with its `args`,
  and the observation whose `cause` is that action its result.
- User `message` actions are user records; a `system` action (the system prompt) is a system
  record. State changes (`agent_state_changed`, `null` observations, recalls) carry no turn and
  are skipped. A call without an observation (`finish`) stays a call without a result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .base import Conversation, Draft, Parsed, Part, Problem, Usage, arguments_text, as_int, iso_ts, text_of

NAME = "openhands"
PREFIX = "openhands"
_SILENT = ("agent_state_changed", "null", "recall", "change_agent_state", "condensation", "think")


def events_of(doc: Any) -> list | None:
    if isinstance(doc, dict):
        for name in ("trajectory", "events", "history"):
            if isinstance(doc.get(name), list):
                return doc[name]
        return None
    return doc if isinstance(doc, list) else None


def sniff(doc: Any) -> bool:
    events = events_of(doc)
    if not events:
        return False
    return isinstance(events[0], dict) and \
        any(isinstance(e, dict) and ("action" in e or "observation" in e) and "source" in e for e in events[:5])


def parse(doc: Any, path: Path, data_len: int) -> Parsed:
    file = str(path)
    problems: list[Problem] = []
    drafts: list[Draft] = []
    responses: dict[str, Draft] = {}  # model_response.id -> its assistant draft
    calls: dict[str, dict] = {}  # call id -> call (for the names of results)
    plain_calls: dict[str, str] = {}  # id of an action made without function calling -> its call id
    last_ts = ""
    first_ts = ""
    for index, event in enumerate(events_of(doc) or []):
        if not isinstance(event, dict):
            problems.append(Problem(file, f"event {index} is not an object; skipped"))
            continue
        ts = iso_ts(event.get("timestamp")) or last_ts or "1970-01-01T00:00:00.000Z"
        last_ts, first_ts = ts, first_ts or ts
        sid = str(event.get("id", f"e{index}"))
        where = {"event": event.get("id", index)}
        meta = event["tool_call_metadata"] if isinstance(event.get("tool_call_metadata"), dict) else None
        if "action" in event:
            action = event.get("action")
            args = event["args"] if isinstance(event.get("args"), dict) else {}
            if event.get("source") == "user" and action == "message":
                drafts.append(Draft("user", sid, ts, {"content": str(args.get("content") or event.get("message") or "")},
                                    source=where))
            elif action == "system":
                drafts.append(Draft("system", sid, ts, {"content": str(args.get("content") or "")}, source=where))
            elif meta is not None and isinstance(meta.get("model_response"), dict):
                response = meta["model_response"]
                rid = str(response.get("id") or sid)
                if rid in responses:
                    continue  # another call of a response already imported whole
                draft = _assistant(sid, ts, response, where)
                responses[rid] = draft
                for part in draft.parts or ():
                    if part.kind == "call":
                        calls[part.value["id"]] = part.value
                drafts.append(draft)
            elif action in ("message", "finish"):
                text = str(args.get("content") or args.get("final_thought") or event.get("message") or "")
                if text:
                    drafts.append(Draft("assistant", sid, ts, {}, [Part(sid, "text", text, ts)], None, where))
            elif event.get("source") == "agent" and isinstance(action, str) and action not in _SILENT:
                call = {"id": f"oh-{sid}", "name": action, "arguments": json.dumps(args, ensure_ascii=False)}
                calls[call["id"]] = call
                plain_calls[sid] = call["id"]
                thought = str(args.get("thought") or "")
                parts = ([Part(sid, "text", thought, ts)] if thought else []) + [Part(sid, "call", call, ts)]
                drafts.append(Draft("assistant", sid, ts, {}, parts, None, where))
        elif "observation" in event:
            kind = event.get("observation")
            extras = event["extras"] if isinstance(event.get("extras"), dict) else {}
            call_id = str(meta.get("tool_call_id")) if meta and meta.get("tool_call_id") else \
                plain_calls.get(str(event.get("cause")))
            content = text_of(event.get("content")) or str(event.get("message") or "")
            if call_id:
                name = (meta or {}).get("function_name") or calls.get(call_id, {}).get("name") or str(kind)
                ok = kind != "error" and not (isinstance(extras.get("exit_code"), int) and extras["exit_code"] != 0)
                drafts.append(Draft("tool", sid, ts, {"tool_call_id": call_id, "name": str(name), "content": content,
                                                      "ok": ok}, source=where))
            elif kind == "error":
                drafts.append(Draft("system", sid, ts, {"content": content, "notice": "error"}, source=where))
            # other observations (state changes, recalls) are not turns
        else:
            problems.append(Problem(file, f"event {index} is neither an action nor an observation; skipped"))
    return Parsed([Conversation(str(path.resolve()), PREFIX, first_ts, drafts, {})], problems, data_len)


def _assistant(sid: str, ts: str, response: dict, where: dict) -> Draft:
    choices = response["choices"] if isinstance(response.get("choices"), list) else []
    message = choices[0].get("message") if choices and isinstance(choices[0], dict) else {}
    message = message if isinstance(message, dict) else {}
    parts = []
    text = text_of(message.get("content"))
    if text:
        parts.append(Part(sid, "text", text, ts))
    for n, call in enumerate(message.get("tool_calls") or ()):
        if not isinstance(call, dict):
            continue
        function = call["function"] if isinstance(call.get("function"), dict) else {}
        parts.append(Part(sid, "call", {"id": str(call.get("id") or f"{sid}-{n}"),
                                        "name": str(function.get("name") or "unknown"),
                                        "arguments": arguments_text(function.get("arguments"))}, ts))
    fields: dict[str, Any] = {}
    if isinstance(response.get("model"), str):
        fields["model"] = response["model"]
    if choices and isinstance(choices[0], dict) and isinstance(choices[0].get("finish_reason"), str):
        fields["finish_reason"] = choices[0]["finish_reason"]
    usage = response["usage"] if isinstance(response.get("usage"), dict) else None
    parsed = None
    if usage:
        details = usage["prompt_tokens_details"] if isinstance(usage.get("prompt_tokens_details"), dict) else {}
        parsed = Usage(tokens_in=as_int(usage.get("prompt_tokens")), tokens_out=as_int(usage.get("completion_tokens")),
                       cache_read=as_int(usage.get("cache_read_input_tokens")) or as_int(details.get("cached_tokens")),
                       cache_creation=as_int(usage.get("cache_creation_input_tokens")))
    source = dict(where)
    if isinstance(response.get("id"), str):
        source["response_id"] = response["id"]
    return Draft("assistant", sid, ts, fields, parts, parsed, source)
