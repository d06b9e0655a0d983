"""The model's view of a session, built on the reply's hot path.

Reading only: the newest `compact` record stands in (as one system turn) for
the raw turns it covers, the turns after it follow verbatim, and rolling
redaction swaps old, large tool outputs for a marker naming the record id to
fetch them back with. Nothing here calls a model or takes a lock, so a
compaction running elsewhere cannot slow a reply down.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .log import (LogProblem, LogView, Session, SessionError, TokenCounter, conversation_turns, default_counter,
                  record_text, tool_call_arguments)
from .records import TURN_CLASSES, Assistant, Compact, Epoch, Record, Redaction as RedactionRecord, Rewind, \
    System, Target, Tool, ToolCall, Uncompact, User

if TYPE_CHECKING:
    from ..config import Config, MemoryConfig

# arguments that say what a tool output was about, most telling first
_KEY_ARGS = ("path", "file_path", "file", "filename", "paths", "pattern", "query", "command", "cmd", "url")


@dataclass(frozen=True)
class Redaction:
    record_id: str
    name: str
    chars: int
    key: str

    @property
    def marker(self) -> str:
        key = f" Key context: {self.key}." if self.key else ""
        return (f"[REDACTED: Output of {self.name} ({self.chars:,} chars).{key} "
                f"Fetch with record id {self.record_id}.]")


@dataclass
class ContextView:
    messages: list[dict]
    tokens: int  # estimated tokens of `messages`
    turn_count: int  # turns in the log
    covered_turns: int  # turns 1..covered_turns are stood in for by the summary
    summary_id: str | None
    redactions: list[Redaction] = field(default_factory=list)
    problems: list[LogProblem] = field(default_factory=list)

    @property
    def live_turns(self) -> int:
        return self.turn_count - self.covered_turns


def memory_of(config: Config) -> MemoryConfig:
    """The [memory] section: what compaction and redaction read."""
    return config.memory


def covered_count(turns: list[Record], compact: Compact | None) -> int:
    """How many leading turn records (`turns`: the log's records of TURN_TYPES) a compact record covers:
    found by id, or, if that line is lost, every record before the turn after its `last_turn`
    (sessions.turns: the N-th user message opens turn N)."""
    if compact is None:
        return 0
    last_id = compact.covers.last_id if compact.covers else None
    for index in range(len(turns) - 1, -1, -1):
        if turns[index].id == last_id:
            return index + 1
    opens = [i for i, t in enumerate(turns) if isinstance(t, User) and not t.sidechain]
    last_turn = max(0, int(compact.covers.last_turn or 0) if compact.covers else 0)
    return opens[last_turn] if last_turn < len(opens) else len(turns)


def key_context(call: ToolCall | dict | None, output: str) -> str:
    if call is not None:
        args = tool_call_arguments(call)
        for name in _KEY_ARGS:
            value = args.get(name)
            if isinstance(value, list):
                value = ", ".join(str(v) for v in value[:5])
            if value:
                return _one_line(str(value), 120)
    for line in output.splitlines():
        if line.strip():
            return _one_line(line.strip(), 80)
    return ""


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def redaction_start(turn_count: int, redact_every: int) -> int:
    """Turns with a 0-based index below this are old enough to redact.

    Redaction moves in steps: at each multiple R of redact_every turns, tool
    outputs older than the newest redact_every turns (index < R - redact_every)
    become eligible, so the model's context changes only once per step.
    """
    step = (turn_count // redact_every) * redact_every
    return max(0, step - redact_every)


def planned_redactions(turns: list[Record], start: int, memory: MemoryConfig,
                       calls: dict[str, ToolCall]) -> list[Redaction]:
    """Rolling redaction over turns[start:]: large tool outputs old enough to go."""
    limit = redaction_start(len(turns), memory.redact_every)
    found = []
    for record in turns[start:limit]:
        if not isinstance(record, Tool) or record.sidechain:  # a subagent's output is in no context here
            continue
        if len(record.content) > memory.redact_min_chars:
            found.append(_redaction(record, calls))
    return found


def _redaction(record: Tool, calls: dict[str, ToolCall]) -> Redaction:
    return Redaction(record.id, record.name or "tool", len(record.content),
                     key_context(calls.get(record.tool_call_id), record.content))


def _calls(records: list[Record]) -> dict[str, ToolCall]:
    """The tool calls of these records' assistant messages, by call id."""
    return {c.id: c for r in records if isinstance(r, Assistant) for c in r.tool_calls or ()}


def _persisted_redactions(view: LogView) -> set[str]:
    ids: set[str] = set()
    for record in view.records:
        if isinstance(record, RedactionRecord):
            ids.update(t.id for t in record.targets or () if t.id)
    return ids


def seen(view: LogView) -> LogView:
    """The log as the model knows it: a `rewind` record with `conversation` takes the turns from its
    `to` record up to itself out of the model's view (the lines stay), and with them every compact
    record whose summary covers one of those turns (an older summary that stops before them stands
    in again). An `uncompact` record takes out the compact record it names, the epochs written for that
    summary and the redactions made within them: the epoch before the compaction is in force again, so
    the next request continues the one sent before the compaction byte for byte. Compaction plans over
    this view too, so a later summary never brings them back."""
    if not any((isinstance(r, Rewind) and r.conversation) or isinstance(r, Uncompact) for r in view.records):
        return view
    kept: list[Record] = []
    for record in view.records:
        if isinstance(record, Rewind) and record.conversation:
            at = next((i for i, k in enumerate(kept) if k.id == record.to), None)
            if at is not None:
                gone = {k.id for k in kept[at:] if isinstance(k, TURN_CLASSES)}
                kept = kept[:at] + [k for k in kept[at:] if not isinstance(k, TURN_CLASSES)]
                kept = [k for k in kept if not isinstance(k, Compact)
                        or (k.covers.last_id if k.covers else None) not in gone]
        elif isinstance(record, Uncompact):
            undone = record.compact
            epochs = {k.id for k in kept if isinstance(k, Epoch) and k.summary == undone}
            kept = [k for k in kept if k.id != undone and k.id not in epochs
                    and not (isinstance(k, RedactionRecord) and k.epoch in epochs)]
        kept.append(record)
    return LogView(kept, list(view.problems), view.size)


def uncompact_held(view: LogView) -> Uncompact | None:
    """The `uncompact` record that holds automatic compaction (`view`: the model's view): the newest, when no
    compaction came after it. Compaction nobody asked for waits until the request would not fit the window."""
    for record in reversed(view.records):
        if isinstance(record, Compact):
            return None
        if isinstance(record, Uncompact):
            return record
    return None


def due_redactions(view: LogView, config: Config) -> list[str]:
    """Ids of the tool outputs rolling redaction hides now, by rule or by a `redaction` record (an epoch
    freezes them)."""
    view = seen(view)
    turns = view.turns
    start = covered_count(turns, view.last_compact())
    calls = _calls(turns[start:])
    live = {t.id for t in turns[start:] if isinstance(t, Tool)}
    due = [r.record_id for r in planned_redactions(turns, start, memory_of(config), calls)]
    return [*due, *sorted((_persisted_redactions(view) & live) - set(due))]


def redaction_targets(view: LogView, ids: list[str]) -> list[Target]:
    """The `targets` of a `redaction` record hiding these tool outputs: id, tool name, chars, key context."""
    calls = _calls(view.records)
    by_id = {r.id: r for r in view.records if isinstance(r, Tool)}
    targets = []
    for record_id in ids:
        record = by_id.get(record_id)
        if record is not None:
            hidden = _redaction(record, calls)
            targets.append(Target(id=record_id, name=hidden.name, chars=hidden.chars, key=hidden.key))
    return targets


def epoch_redactions(view: LogView, epoch: Epoch) -> set[str]:
    """What an epoch hides: what was due when it began, and what the agent redacted within it since
    (`redaction` records naming the epoch: worth more than re-caching what follows them)."""
    hidden = set((epoch.state or {}).get("redacted") or ())
    for record in view.records:
        if isinstance(record, RedactionRecord) and record.epoch == epoch.id:
            hidden.update(t.id for t in record.targets or () if t.id)
    return hidden


def update_text(record: System) -> str:
    """How a context update (a `system` record with `update`) reads to the model."""
    return UPDATE_PREFIX + record.content


UPDATE_PREFIX = "[workstation] "


def update_line(content: str) -> str:
    """A context update in one line for people (the transcript, replay): what it told the model about."""
    first = next((line for line in content.splitlines() if line.strip()), "")
    first = first.rstrip(":")
    return f"context update for the model: {first[:160]}" + ("…" if len(first) > 160 else "")


def assemble(view: LogView, config: Config, *, system_prompt: str | None = None,
             counter: TokenCounter | None = None, epoch: Epoch | None = None) -> ContextView:
    """The messages a model sees for this log (pure: no I/O); turns a rewind took back are not among
    them (`seen`).

    With `epoch` (the `epoch` record the request's head comes from), rolling redaction is the one
    frozen when that epoch began (its state's `redacted` ids), so the messages of one epoch only ever
    grow at the end and a provider's prefix cache serves every earlier byte; without it, as due now.
    Context updates (system records with `update`) are user messages at their place in the log:
    a system message there would be moved into the provider's system block and change the prefix."""
    view = seen(view)
    memory = memory_of(config)
    counter = counter or default_counter()
    turns = view.turns
    compact = view.last_compact()
    start = covered_count(turns, compact)
    live = conversation_turns(turns[start:])  # without abandoned branches and subagents (imported sessions)
    if start and live and (not isinstance(live[0], User) or live[0].sidechain):
        # the summary stops inside a turn (the token guard's cut before one of its steps): the turn's own
        # user message comes first still, in the user's words (a request opens with one; the model works on it)
        opener = next((r for r in reversed(turns[:start]) if isinstance(r, User) and not r.sidechain), None)
        live = [opener, *live] if opener is not None else live
    calls = _calls(live)

    if epoch is None:
        redactions = {r.record_id: r for r in planned_redactions(turns, start, memory, calls)}
    else:
        frozen = epoch_redactions(view, epoch)
        redactions = {}
        for record in live:
            if record.id in frozen and isinstance(record, Tool):
                redactions[record.id] = _redaction(record, calls)
    for record_id in _persisted_redactions(view) - set(redactions):
        found = next((t for t in live if t.id == record_id and isinstance(t, Tool)), None)
        if isinstance(found, Tool):
            redactions[record_id] = _redaction(found, calls)

    messages: list[dict] = []
    tokens = 0
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
        tokens += counter(system_prompt)
    if compact is not None and start:
        text = summary_turn_text(compact)
        messages.append({"role": "system", "content": text})
        tokens += counter(text)

    pending: list[str] = []  # tool calls of the latest assistant turn still without a result
    for record in live:
        if not isinstance(record, Tool) and pending:
            # an interrupted tool call: the API needs a result for every call
            messages.extend({"role": "tool", "tool_call_id": cid, "content": "[no result recorded]"}
                            for cid in pending)
            pending = []
        if isinstance(record, Tool):
            call_id = record.tool_call_id
            if call_id not in calls:
                continue  # its call was compacted away; an orphan result would be rejected
            if call_id in pending:
                pending.remove(call_id)
            redaction = redactions.get(record.id)
            content = redaction.marker if redaction else record.content
            messages.append({"role": "tool", "tool_call_id": call_id, "name": record.name, "content": content})
            tokens += counter(content) if redaction else _tokens(record, counter)
            continue
        if isinstance(record, System) and record.update is not None:
            text = update_text(record)
            messages.append({"role": "user", "content": text})
            tokens += counter(text)
            continue
        message: dict[str, Any] = {"role": record.kind, "content": str(getattr(record, "content", "") or "")}
        if isinstance(record, Assistant) and record.tool_calls:
            message["content"] = message["content"] or None
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in record.tool_calls]
            pending = [c.id for c in record.tool_calls]
        messages.append(message)
        tokens += _tokens(record, counter)

    return ContextView(messages, tokens, len(turns), start, compact.id if compact and start else None,
                       sorted(redactions.values(), key=lambda r: r.record_id), list(view.problems))


def current_epoch(view: LogView) -> Epoch | None:
    """The epoch the next request belongs to: the newest `epoch` record, if it was written for the
    summary now in force (a compaction since starts a new epoch). `view` is the model's view (`seen`)."""
    compact = view.last_compact()
    summary = compact.id if compact else None
    for record in reversed(view.records):
        if isinstance(record, Epoch):
            return record if record.summary == summary else None
    return None


def as_sent(view: LogView, config: Config, *, epoch: Epoch, counter: TokenCounter | None = None
            ) -> tuple[ContextView, list[dict], list[dict]]:
    """The messages of a request in `epoch` as the agent sends them before it trims any to fit the window:
    the head (the epoch's system message, then the summary in force), then the body (the turns, without
    the pins and notices, which are the head's and the user's, and with tool-call arguments the model
    mangled sent as {}). Any process rebuilds the same bytes from the log (sidecar compaction reads them
    from the provider's cache)."""
    ctxview = assemble(view, config, system_prompt=epoch.system, counter=counter, epoch=epoch)
    hidden = {r.content for r in view.records if isinstance(r, System) and (r.pin or r.notice)}
    head_len = 2 if ctxview.summary_id else 1
    body = [_sanitized(m) for m in ctxview.messages[head_len:]
            if not (m["role"] == "system" and m["content"] in hidden)]
    return ctxview, ctxview.messages[:head_len], body


def _sanitized(message: dict) -> dict:
    """Tool-call arguments the model mangled are sent back as {}: providers reject invalid JSON there
    (the log keeps them as the model sent them)."""
    calls = message.get("tool_calls")
    if not calls:
        return message
    fixed = []
    for call in calls:
        try:
            ok = isinstance(json.loads(call["function"]["arguments"] or "{}"), dict)
        except (ValueError, RecursionError):
            ok = False
        fixed.append(call if ok else {**call, "function": {**call["function"], "arguments": "{}"}})
    return {**message, "tool_calls": fixed}


def _tokens(record: Record, counter: TokenCounter) -> int:
    if isinstance(record.tokens, int):
        return record.tokens
    return counter(record_text(record))


def summary_turn_text(compact: Compact) -> str:
    """The summary as the model reads it (part of the requests' head until the next compaction)."""
    last_turn = compact.covers.last_turn if compact.covers else None
    return (f"Summary of the earlier conversation (turns 1–{'?' if last_turn is None else last_turn}, compacted by "
            f"{compact.model or '?'}; the raw turns stay on disk):\n\n{compact.summary}")


class SessionContext:
    """Entry point for the agent's reply path."""

    @staticmethod
    def build(session: Session, config: Config, *, system_prompt: str | None = None) -> ContextView:
        return assemble(session.read(), config, system_prompt=system_prompt, counter=session.counter)


def fetch_original(session: Session, record_id: str) -> Record:
    """The record a redaction marker (or anything else) names, verbatim from disk."""
    record = session.read().get(record_id)
    if record is None:
        raise SessionError(f"session {session.slug} has no record {record_id}")
    return record
