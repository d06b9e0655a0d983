"""The Anthropic Messages wire format of the fake server (tests/support/fakellm.py): requests back to the OpenAI
chat shape the scripted responders read, answers as Anthropic sends them. No I/O here.

`to_chat_body` turns a Messages request into an OpenAI chat-completions body, so that one responder
serves both endpoints: each system block becomes a leading system message, a `tool_use` block an
assistant `tool_calls` entry (arguments: the input as JSON), a `tool_result` block a `tool` message
(its text), and every text block of a user message one user message (litellm merges consecutive user
and tool messages into one Anthropic user message; this splits them again, in order). Cache markers
are dropped (the raw body is recorded beside it).

`events` builds the stream as Anthropic sends it: message_start (with the input usage), ping, per block
content_block_start / content_block_delta (text_delta, or input_json_delta in pieces) /
content_block_stop, message_delta (stop_reason, output usage), message_stop.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Sequence

__all__ = ["to_chat_body", "events", "message", "error_body", "stop_reason", "tool_id", "sse"]

_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
                529: "overloaded_error"}


def stop_reason(finish_reason: str) -> str:
    """Anthropic's stop_reason for an OpenAI finish_reason (an unknown one is sent as it is)."""
    return _STOP.get(finish_reason, finish_reason)


def error_body(status: int, message: str) -> dict:
    return {"type": "error", "error": {"type": _ERROR_TYPES.get(status, "api_error"), "message": message}}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or () if isinstance(b, dict) and b.get("type") == "text")


def to_chat_body(body: dict) -> dict:
    """The Messages request `body` in OpenAI chat shape (see the module doc)."""
    messages: list[dict] = []
    system = body.get("system")
    if isinstance(system, str) and system:
        messages.append({"role": "system", "content": system})
    elif isinstance(system, list):
        messages += [{"role": "system", "content": _text_of([b])} for b in system]
    for m in body.get("messages") or ():
        role, content = m.get("role"), m.get("content")
        if isinstance(content, str):
            messages.append({"role": role, "content": content})
            continue
        if role == "assistant":
            calls = [{"id": b["id"], "type": "function",
                      "function": {"name": b["name"], "arguments": json.dumps(b.get("input") or {})}}
                     for b in content if b.get("type") == "tool_use"]
            out: dict[str, Any] = {"role": "assistant", "content": _text_of(content) or None}
            if calls:
                out["tool_calls"] = calls
            messages.append(out)
            continue
        for b in content or ():
            if b.get("type") == "tool_result":
                messages.append({"role": "tool", "tool_call_id": b.get("tool_use_id"),
                                 "content": _text_of(b.get("content"))})
            elif b.get("type") == "text":
                messages.append({"role": role, "content": b.get("text", "")})
    chat: dict[str, Any] = {"model": body.get("model"), "messages": messages}
    if body.get("tools"):
        chat["tools"] = [{"type": "function", "function": {
            "name": t.get("name"), "description": t.get("description", ""), "parameters": t.get("input_schema") or {}}}
            for t in body["tools"]]
    for key in ("stream", "max_tokens", "temperature"):
        if key in body:
            chat[key] = body[key]
    return chat


def _split(s: str, n: int) -> list[str]:
    n = max(1, n)
    return [s[i:i + n] for i in range(0, len(s), n)] or [""]


def _input_of(args: str) -> Any:
    """A tool_use block's input: the parsed arguments; text that is no JSON object is sent as it is."""
    try:
        value = json.loads(args) if args else {}
    except ValueError:
        return args
    return value if isinstance(value, dict) else args


def message(model: str, text: str, calls: Sequence[tuple[str, str, str]], stop: str, usage: dict) -> dict:
    """A non-streaming Messages answer; `calls` are (id, name, arguments text)."""
    content: list[dict] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": cid, "name": name, "input": _input_of(args)} for cid, name, args in calls]
    return {"id": "msg_" + uuid.uuid4().hex[:20], "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage}


def events(model: str, text: str, calls: Sequence[tuple[str, str, str]], stop: str, usage: dict, *,
           text_chunk: int = 4, args_chunk: int = 7, whole_args: bool = False) -> list[tuple[str, dict]]:
    """The (event name, data) stream of one answer (see the module doc); `usage` is the full usage."""
    start_usage = {k: v for k, v in usage.items() if k != "output_tokens"}
    start_usage["output_tokens"] = 1
    out: list[tuple[str, dict]] = [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_" + uuid.uuid4().hex[:20], "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None, "usage": start_usage}}),
        ("ping", {"type": "ping"}),
    ]
    index = 0
    if text:
        out.append(("content_block_start", {"type": "content_block_start", "index": index,
                                            "content_block": {"type": "text", "text": ""}}))
        out += [("content_block_delta", {"type": "content_block_delta", "index": index,
                                         "delta": {"type": "text_delta", "text": piece}})
                for piece in _split(text, text_chunk)]
        out.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    for cid, name, args in calls:
        block = {"type": "tool_use", "id": cid, "name": name, "input": {}}
        out.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": block}))
        pieces = [args] if whole_args else _split(args, args_chunk)
        out += [("content_block_delta", {"type": "content_block_delta", "index": index,
                                         "delta": {"type": "input_json_delta", "partial_json": piece}})
                for piece in pieces if piece]
        out.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    out.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                  "usage": {"output_tokens": usage.get("output_tokens", 0)}}))
    out.append(("message_stop", {"type": "message_stop"}))
    return out


def tool_id(i: int) -> str:
    return f"toolu_{i}_{uuid.uuid4().hex[:12]}"


def sse(name: str, data: dict) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

