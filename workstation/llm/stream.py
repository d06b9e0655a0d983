"""Stream assembly: text and tool-call deltas folded into one answer (by tool-call index, never by
``litellm.stream_chunk_builder``, which has lost tool calls for some providers)."""

from __future__ import annotations

import json
import uuid
from typing import Any, Optional

from .result import MAX_TOOL_ARGS_CHARS, ToolCall
from .usage import field_of, usage_of


def _is_json_object(s: str) -> bool:
    try:
        return isinstance(json.loads(s), dict)
    except (ValueError, RecursionError):
        return False


class _ToolCallBuilder:
    """One call's name and arguments from its deltas. Arguments are kept as parts (joined when read), so
    a long argument streamed in small pieces costs linear time, and the whole text is parsed to check
    for a provider re-sending complete arguments only once its size has doubled since the last check."""

    __slots__ = ("id", "name", "_parts", "size", "_checked")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self._parts: list[str] = []
        self.size = 0
        self._checked = 0  # size of the arguments when they were last found not a whole JSON object

    @property
    def arguments(self) -> str:
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def _set(self, args: str) -> None:
        self._parts, self.size = [args], len(args)

    def add(self, tc_id: Optional[str], name: Optional[str], args: Optional[str]) -> None:
        if tc_id and not self.id:
            self.id = tc_id
        if name:
            if not self.name or name.startswith(self.name):
                self.name = name  # first time, or a repeated / cumulative name
            elif name != self.name:
                self.name += name  # name streamed in pieces
        if not args:
            return
        if not self.size:
            self._set(args)
        elif len(args) > self.size and args.startswith(self.arguments) and _is_json_object(args):
            self._set(args)  # provider re-sent the cumulative arguments
        elif (args.lstrip().startswith("{") and self._parts[-1].rstrip().endswith("}")
              and self.size >= 2 * self._checked and _is_json_object(args)):
            if _is_json_object(self.arguments):
                self._set(args)  # provider re-sent complete arguments after a complete object
                return
            self._checked = self.size
            self._append(args)
        else:
            self._append(args)

    def _append(self, args: str) -> None:
        self._parts.append(args)
        self.size += len(args)


class Accumulator:
    def __init__(self) -> None:
        self.text_parts: list[str] = []
        self.calls: dict[int, _ToolCallBuilder] = {}
        self._id_to_index: dict[str, int] = {}
        self._remap: dict[int, int] = {}  # provider index -> slot (only differs for index reuse)
        self._last: Optional[int] = None
        self.finish_reason: Optional[str] = None
        self.usage: Optional[tuple[int, int, int, int, int]] = None  # prompt, completion, cache read, written, 1h

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    def _index_for(self, index: Optional[int], tc_id: Optional[str]) -> int:
        """Map a delta's (index, id) to our slot.  Normal providers: slot == index.  Robust to deltas
        without an index (continuation of the latest call, or a new call when an id is given) and
        to providers that reuse one index for several calls with different ids."""
        if tc_id and tc_id in self._id_to_index:
            slot = self._id_to_index[tc_id]
            if index is not None:
                self._remap[index] = slot
        elif index is None:
            slot = (max(self.calls, default=-1) + 1) if (tc_id or self._last is None) else self._last
        else:
            slot = self._remap.get(index, index)
            if tc_id:
                known = self.calls.get(slot)
                if known is not None and known.id and known.id != tc_id:
                    slot = max(self.calls) + 1
                self._remap[index] = slot
        if tc_id:
            self._id_to_index[tc_id] = slot
        self._last = slot
        return slot

    def add_tool_delta(self, index: Optional[int], tc_id: Optional[str], name: Optional[str],
                       args: Optional[str]) -> None:
        i = self._index_for(index, tc_id)
        self.calls.setdefault(i, _ToolCallBuilder()).add(tc_id, name, args)

    def add_chunk(self, chunk: Any) -> str:
        """Fold one litellm stream chunk in; returns the new text (for on_text)."""
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = usage_of(usage) or self.usage
        choices = getattr(chunk, "choices", None) or []
        if not choices:
            return ""
        choice = choices[0]
        if getattr(choice, "finish_reason", None):
            self.finish_reason = choice.finish_reason
        delta = getattr(choice, "delta", None)
        if delta is None:
            return ""
        for tc in getattr(delta, "tool_calls", None) or []:
            fn = field_of(tc, "function")
            self.add_tool_delta(field_of(tc, "index"), field_of(tc, "id"), field_of(fn, "name"), field_of(fn, "arguments"))
        fc = getattr(delta, "function_call", None)  # legacy single function_call deltas
        if fc is not None and (field_of(fc, "name") or field_of(fc, "arguments")):
            self.add_tool_delta(0, None, field_of(fc, "name"), field_of(fc, "arguments"))
        content = getattr(delta, "content", None)
        if content:
            self.text_parts.append(content)
            return content
        return ""

    @property
    def oversized(self) -> bool:
        """Whether a call's arguments passed MAX_TOOL_ARGS_CHARS: it will be refused, so reading on is waste
        (and a stream of megabytes in small chunks would keep the turn busy for minutes)."""
        return any(b.size > MAX_TOOL_ARGS_CHARS for b in self.calls.values())

    def tool_calls(self, cut: bool = False) -> list[ToolCall]:
        out = []
        for i in sorted(self.calls):
            b = self.calls[i]
            if not (b.name or b.size):
                continue
            out.append(ToolCall(id=b.id or f"call_{i}_{uuid.uuid4().hex[:12]}", name=b.name, arguments=b.arguments,
                                cut=cut and b.size > MAX_TOOL_ARGS_CHARS))
        return out


def fold_response(acc: Accumulator, resp: Any) -> None:
    choices = getattr(resp, "choices", None) or []
    if choices:
        choice = choices[0]
        acc.finish_reason = getattr(choice, "finish_reason", None)
        msg = getattr(choice, "message", None)
        if msg is not None:
            if getattr(msg, "content", None):
                acc.text_parts.append(msg.content)
            for i, tc in enumerate(getattr(msg, "tool_calls", None) or []):
                fn = field_of(tc, "function")
                acc.add_tool_delta(i, field_of(tc, "id"), field_of(fn, "name"), field_of(fn, "arguments"))
    usage = getattr(resp, "usage", None)
    if usage is not None:
        acc.usage = usage_of(usage) or acc.usage


def stream_was_truncated(resp: Any) -> bool:
    """litellm's CustomStreamWrapper synthesizes finish_reason='stop' (and a usage chunk) when a
    stream ends without one, so a body that simply stopped early looks complete.  Its private
    ``received_finish_reason`` tells the truth; if the attribute is missing we trust the stream."""
    missing = object()
    received = getattr(resp, "received_finish_reason", missing)
    if received is missing:
        return False
    return received is None and getattr(resp, "intermittent_finish_reason", None) is None
