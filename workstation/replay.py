"""Replaying a recorded episode: a session log stepped through as the agent lived it, and verified.

    episode = Episode.load(paths, "2025-01-31-fix-the-loader")     # live or archived, by slug
    episode = Episode.load("sessions/demo-request-id.jsonl")       # or any session log file
    state = episode.state_at(12)     # transcript, model context, compaction, timeline, memory at step 12
    player = Player(episode, clock=time.monotonic)                 # step / back / seek / play(speed) / tick()
    report = verify(episode, workspace)                            # re-run the read-only tool calls today

An episode is the log's records in file order (append-only, so time order),
one step each. Everything a step shows is derived from the log alone: no
model, no database, so a shipped demo replays on a fresh clone.

`verify` re-runs the episode's VERIFIABLE tool calls (agent.tools) against
today's tree and marks the first one whose result differs from what the agent
saw then. It never writes to the user's tree: an episode that edited files
before reading them again is checked in a private scratch copy of the tree
where the episode's own recorded edits are re-applied in order, so every read
is compared against the tree as it would be at that point. Commands
(run_command) are never re-run.

No textual import here: the TUI's replay screen drives a `Player` from a timer.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from .errors import WorkstationError
from .sessions.context import ContextView, Redaction, assemble, key_context, summary_turn_text
from .sessions.log import TURN_TYPES, LogProblem, LogView, parse_lines, tool_call_arguments
from .store.broker import readonly

MAX_PAUSE_S = 2.0  # longer gaps between records (the user thinking, a night) play as this long
_DECISION_ID = re.compile(r"\bdecision (d[0-9a-f]+) logged")
_NO_MODEL_NOTE = "(tier one only: no model configured for semantic search)"
DIFF_LINES = 16  # lines of a "short diff"


class ReplayError(WorkstationError):
    """An episode that cannot be loaded, or a step that does not exist."""


# --------------------------------------------------------------------------- steps
def _epoch(ts: Any) -> float | None:
    if not isinstance(ts, str) or not ts:
        return None
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _clip(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def call_label(name: str, args: dict) -> str:
    """`read_lines(shop/api.py 59-67)`: a tool call in one short line."""
    key = key_context({"arguments": args}, "") if args else ""
    if not key:  # impact(symbol), umem(tier, key, ...), log_decision(decision): the first text argument
        key = next((str(v) for v in args.values() if isinstance(v, str) and v), "")
    if name in ("read_lines", "replace_lines") and "start" in args:
        key += f" {args.get('start')}-{args.get('end')}"
    return f"{name}({_clip(key, 80)})"


@dataclass(frozen=True)
class Step:
    """One record of the episode, in log order."""

    index: int  # 0-based position in the episode
    record: dict  # the log record, verbatim
    ts: float  # epoch seconds (a record without a readable ts takes its predecessor's)
    offset_s: float  # seconds from the first step on the replay clock (pauses capped at MAX_PAUSE_S)
    turn: int | None  # 1-based turn number for user/assistant/tool/system records
    call: dict | None = None  # for a tool result: the call that asked for it ({id, name, arguments})
    args: dict = field(default_factory=dict)  # that call's arguments ({} when unreadable)

    @property
    def number(self) -> int:
        return self.index + 1

    @property
    def kind(self) -> str:
        return self.record["type"]

    @property
    def id(self) -> str:
        return self.record["id"]

    def label(self) -> str:
        """What happened at this step, in one line."""
        r = self.record
        kind = self.kind
        if kind == "user":
            return f"user: {_clip(r.get('content') or '', 100)}"
        if kind == "assistant":
            facts = [r.get("model") or ""]
            if r.get("latency_ms") is not None:
                facts.append(f"{float(r['latency_ms']):.0f} ms")
            if r.get("context_tokens") is not None:
                facts.append(f"{int(r['context_tokens']):,} tokens in context")
            head = f"assistant ({', '.join(f for f in facts if f)})" if any(facts) else "assistant"
            calls = [call_label(c.get("name", "?"), tool_call_arguments(c)) for c in r.get("tool_calls") or ()]
            text = _clip(r.get("content") or "", 100)
            return head + (f": {text}" if text else "") + (f" → {', '.join(calls)}" if calls else "")
        if kind == "tool":
            name = r.get("name") or "tool"
            outcome = "ok" if r.get("ok", True) else "failed"
            extra = [outcome]
            if r.get("duration_ms") is not None:
                extra.append(f"{float(r['duration_ms']):.0f} ms")
            extra.append(f"{len(str(r.get('content') or '')):,} chars")
            if r.get("served_from"):
                extra.append(f"from {r['served_from']}")
            return f"  ↳ {call_label(name, self.args)}: {', '.join(extra)}"
        if kind == "system":
            if r.get("pin"):
                return f"pinned: {_clip(r.get('content') or '', 100)}"
            if r.get("notice"):
                return f"notice ({r['notice']}): {_clip(r.get('content') or '', 100)}"
            return f"system: {_clip(r.get('content') or '', 100)}"
        if kind == "compact":
            covers = r.get("covers") or {}
            return (f"== compaction: turns 1–{covers.get('last_turn', '?')} summarized by "
                    f"{r.get('model', '?')} ({r.get('reason', '?')}) ==")
        if kind == "redaction":
            targets = r.get("targets") or ()
            return f"-- redaction: {len(targets)} tool output(s) hidden from the model from here on --"
        return kind

    def to_dict(self) -> dict:
        return {"step": self.number, "id": self.id, "ts": self.record.get("ts"), "type": self.kind,
                "turn": self.turn, "offset_s": round(self.offset_s, 3), "label": self.label()}


# --------------------------------------------------------------------------- state at a step
@dataclass
class MemoryView:
    """What the agent's memory held at a step, as far as the log tells."""

    decisions: list[dict] = field(default_factory=list)  # {id, decision, reasoning, files, step, reused}
    pins: list[str] = field(default_factory=list)
    files_read: dict[str, list] = field(default_factory=dict)  # path -> [[start, end] | "map", ...]
    files_edited: dict[str, int] = field(default_factory=dict)  # path -> successful edits
    stm: list[dict] = field(default_factory=list)  # MemoryEntry-shaped: key, value, namespace, updated
    ltm: list[dict] = field(default_factory=list)  # the LTM writes of this episode (earlier values: not logged)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class ReplayState:
    """The episode as the agent saw it at one step."""

    step: Step
    transcript: list[dict]  # chat turns so far, shaped as tui.viewdata.Turn (role, text, id, ts, ...)
    context: ContextView  # the conversation the next model call starts from (compaction, redaction applied)
    request: ContextView | None  # on a model reply: the conversation that model call was sent
    compaction: dict | None  # the compact record in effect (it stands in for turns 1..covered)
    timeline: list[dict]  # episodic events so far, shaped as tui.viewdata.TimelineEvent
    memory: MemoryView

    @property
    def index(self) -> int:
        return self.step.index

    @property
    def redactions(self) -> list[Redaction]:
        return self.context.redactions

    def to_dict(self) -> dict:
        ctx = self.context
        return {
            "step": self.step.to_dict(),
            "context": {"messages": len(ctx.messages), "tokens": ctx.tokens, "turns": ctx.turn_count,
                        "covered_turns": ctx.covered_turns, "summary_id": ctx.summary_id,
                        "redactions": [dataclasses.asdict(r) | {"marker": r.marker} for r in ctx.redactions]},
            "request_tokens": self.request.tokens if self.request else None,
            "compaction": None if self.compaction is None else {
                k: self.compaction.get(k) for k in ("id", "model", "reason", "covers")},
            "transcript_turns": len(self.transcript),
            "timeline_events": len(self.timeline),
            "memory": self.memory.to_dict(),
        }


# --------------------------------------------------------------------------- the episode
class Episode:
    """A recorded session, one step per log record; see the module docstring."""

    def __init__(self, name: str, view: LogView, *, source: str = "", config: Any = None,
                 max_pause_s: float = MAX_PAUSE_S):
        if not view.records:
            raise ReplayError(f"session {name} has no readable records to replay")
        if config is None:
            from .config import Config

            config = Config()
        self.name = name
        self.source = source or name
        self.config = config
        self.records: list[dict] = list(view.records)
        self.problems: list[LogProblem] = list(view.problems)
        self.steps: list[Step] = _make_steps(self.records, max_pause_s)
        self._turns = [_transcript_turns(s, self.records) for s in self.steps]
        self._events = [_timeline_events(s, name) for s in self.steps]
        self._counter = None
        self._token_cache: dict[str, int] = {}

    @classmethod
    def load(cls, source: Any, target: str | os.PathLike | None = None, *, config: Any = None) -> "Episode":
        """`load(paths, "slug")` (live or archived), `load(paths, "dir/file.jsonl")`, or `load("file.jsonl")`."""
        from .paths import Paths

        if target is None:
            if isinstance(source, Paths):
                raise ReplayError("which session? give a slug or a .jsonl file")
            paths, target = None, source
        else:
            paths = source
        target = str(target)
        if target.endswith(".jsonl") or "/" in target or os.sep in target:
            return cls._from_file(Path(target).expanduser(), config)
        if paths is None:
            raise ReplayError(f"{target} is not a .jsonl file; a session slug needs a workspace")
        from .sessions.catalog import load as load_session

        view, state = load_session(paths, target)
        return cls(target, view, source=state, config=config)

    @classmethod
    def _from_file(cls, path: Path, config: Any) -> "Episode":
        if not path.is_file():
            raise ReplayError(f"no session log file {path}")
        try:
            data = path.read_bytes()
        except OSError as err:
            raise ReplayError(f"cannot read {path}: {err.strerror}") from None
        return cls(path.name.removesuffix(".jsonl"), parse_lines(data), source=str(path), config=config)

    def __len__(self) -> int:
        return len(self.steps)

    def __repr__(self) -> str:
        return f"Episode({self.name!r}, {len(self.steps)} steps)"

    @property
    def duration_s(self) -> float:
        return self.steps[-1].ts - self.steps[0].ts

    def index_of(self, record_id: str) -> int:
        """The step of a record id (e.g. a timeline event's turn_id)."""
        for step in self.steps:
            if step.id == record_id:
                return step.index
        raise ReplayError(f"episode {self.name} has no record {record_id}")

    def check_index(self, index: Any) -> int:
        if isinstance(index, bool) or not isinstance(index, int):
            raise ReplayError(f"a step is an integer, got {index!r}")
        if not 0 <= index < len(self.steps):
            raise ReplayError(f"episode {self.name} has steps 1–{len(self.steps)}; there is no step {index + 1}")
        return index

    def _count(self, text: str) -> int:
        """Token counts of the texts assemble measures itself (markers, summaries), cached across states."""
        cached = self._token_cache.get(text)
        if cached is None:
            if self._counter is None:
                from .sessions.log import default_counter

                self._counter = default_counter()
            cached = self._token_cache[text] = self._counter(text)
        return cached

    def context_at(self, upto: int) -> ContextView:
        """The conversation the model is given after the first `upto` records, as the loop builds it:
        compaction and redaction applied, pinned instructions and notices kept out (pins go in the system
        prompt, notices are for the user)."""
        prefix = self.records[:upto]
        view = assemble(LogView(prefix), self.config, counter=self._count)
        hidden = {str(r.get("content") or ""): int(r.get("tokens") or 0) for r in prefix
                  if r["type"] == "system" and (r.get("pin") or r.get("notice"))}
        if not hidden:
            return view
        kept, dropped = [], 0
        for message in view.messages:
            if message["role"] == "system" and message.get("content") in hidden and not (
                    view.summary_id and message is view.messages[0]):
                dropped += hidden[message["content"]]
                continue
            kept.append(message)
        return dataclasses.replace(view, messages=kept, tokens=view.tokens - dropped)

    def state_at(self, index: int) -> ReplayState:
        i = self.check_index(index)
        step = self.steps[i]
        context = self.context_at(i + 1)
        request = self.context_at(i) if step.kind == "assistant" else None
        compaction = None
        for record in reversed(self.records[: i + 1]):
            if record["type"] == "compact":
                compaction = record if context.summary_id == record["id"] else None
                break
        return ReplayState(step=step, transcript=[t for turns in self._turns[: i + 1] for t in turns],
                           context=context, request=request, compaction=compaction,
                           timeline=[e for events in self._events[: i + 1] for e in events],
                           memory=memory_at(self.steps[: i + 1]))

    def transcript_of(self, index: int) -> list[dict]:
        """The chat turns step `index` adds (an incremental view for a UI appending as it plays)."""
        return list(self._turns[self.check_index(index)])

    def events_of(self, index: int) -> list[dict]:
        return list(self._events[self.check_index(index)])


def _make_steps(records: list[dict], max_pause_s: float) -> list[Step]:
    calls: dict[str, dict] = {}
    steps: list[Step] = []
    turn = 0
    offset = 0.0
    last_ts: float | None = None
    for index, record in enumerate(records):
        ts = _epoch(record.get("ts"))
        if ts is None:
            ts = last_ts if last_ts is not None else 0.0
        if last_ts is not None:
            offset += min(max(ts - last_ts, 0.0), max_pause_s)
        last_ts = ts
        if record["type"] in TURN_TYPES:
            turn += 1
        if record["type"] == "assistant":
            for call in record.get("tool_calls") or ():
                if isinstance(call, dict) and call.get("id"):
                    calls[call["id"]] = call
        call = calls.get(record.get("tool_call_id", "")) if record["type"] == "tool" else None
        steps.append(Step(index, record, ts, offset, turn if record["type"] in TURN_TYPES else None, call,
                          tool_call_arguments(call) if call else {}))
    return steps


# --------------------------------------------------------------------------- transcript turns
def _transcript_turns(step: Step, records: list[dict]) -> list[dict]:
    """Chat turns of one step, shaped as tui.viewdata.Turn (a mapping the TUI coerces)."""
    r = step.record
    kind = step.kind
    base = {"id": step.id, "ts": step.ts, "tokens": r.get("tokens")}
    if kind == "user":
        return [{**base, "role": "user", "text": str(r.get("content") or "")}]
    if kind == "assistant":
        text = str(r.get("content") or "")
        names = [c.get("name", "?") for c in r.get("tool_calls") or ()]
        if not text and names:
            text = f"*calls {', '.join(names)}*"
        return [{**base, "role": "assistant", "text": text}]
    if kind == "tool":
        name = r.get("name") or "tool"
        return [{**base, "role": "tool", "text": call_label(name, step.args), "tool": name, "args": step.args,
                 "result": str(r.get("content") or ""), "ok": bool(r.get("ok", True))}]
    if kind == "system":
        text = str(r.get("content") or "")
        if r.get("pin"):
            return [{**base, "role": "system", "text": f"Pinned: {text}"}]
        if r.get("notice"):
            return [{**base, "role": "error" if r["notice"] == "error" else "notice", "text": text}]
        return [{**base, "role": "system", "text": text}]
    if kind == "compact":
        covers = r.get("covers") or {}
        text = (f"Compaction: turns 1–{covers.get('last_turn', '?')} summarized by {r.get('model', '?')} "
                f"({r.get('reason', '?')}); the model sees the summary instead of them from here on")
        return [{**base, "role": "compaction", "text": text, "result": summary_turn_text(r)}]
    if kind == "redaction":
        by_id = {rec["id"]: rec for rec in records[: step.index] if rec["type"] == "tool"}
        out = []
        for target in r.get("targets") or ():
            original = by_id.get(target.get("id", ""))
            marker = Redaction(str(target.get("id", "")), str(target.get("name") or "tool"),
                               int(target.get("chars") or 0), str(target.get("key") or "")).marker
            out.append({**base, "role": "redaction", "text": marker, "tokens": None,
                        "result": str(original.get("content") or "") if original else ""})
        return out
    return []


# --------------------------------------------------------------------------- timeline events
def _timeline_events(step: Step, session: str) -> list[dict]:
    """The episodic events of one step, derived from its record (types as in memory.episodic)."""
    r = step.record
    kind = step.kind
    events: list[dict] = []

    def add(type_: str, name: str, duration_ms: Any = None, tokens: Any = None, **details: Any) -> None:
        events.append({"ts": step.ts, "type": type_, "name": name, "id": f"{step.id}:{len(events)}",
                       "turn_id": step.id, "session": session,
                       "duration_ms": float(duration_ms) if duration_ms is not None else None,
                       "tokens": int(tokens) if tokens is not None else None,
                       "details": {k: v for k, v in details.items() if v is not None}})

    if kind == "user":
        memory = r.get("memory") or {}
        add("turn", "user", tokens=r.get("tokens"), chars=len(str(r.get("content") or "")),
            lookups=memory.get("lookups"), hits=memory.get("hits"))
        for key in memory.get("misses") or ():
            add("memory_miss", str(key), tier="kmap")
    elif kind == "assistant":
        tokens_in, tokens_out = r.get("tokens_in"), r.get("tokens_out")
        total = (tokens_in or 0) + (tokens_out or 0) if tokens_in is not None or tokens_out is not None else None
        add("model_call", str(r.get("model") or "model"), r.get("latency_ms"), total, tokens_in=tokens_in,
            tokens_out=tokens_out, context_tokens=r.get("context_tokens"), cost_usd=r.get("cost_usd"),
            finish_reason=r.get("finish_reason"), tool_calls=len(r.get("tool_calls") or ()) or None)
        add("turn", "assistant", tokens=r.get("tokens"), chars=len(str(r.get("content") or "")))
        for decision_id in r.get("reused") or ():
            add("decision_reused", str(decision_id))
    elif kind == "tool":
        name = str(r.get("name") or "tool")
        ok = bool(r.get("ok", True))
        args = step.args
        path = r.get("path") or args.get("path")
        add("tool_call", name, r.get("duration_ms"), r.get("tokens"), ok=ok, args=args or None,
            result_chars=len(str(r.get("content") or "")), path=path, lines=r.get("lines"),
            served_from=r.get("served_from"), memory=r.get("memory"))
        if ok:
            verdict = r.get("memory")
            if name == "file_meta":
                add("memory_hit" if verdict == "hit" else "memory_miss", str(path), tier="kmap", kind="path")
                add("read_avoided", str(path), path=path, reason="knowledge map instead of the file")
            elif name == "read_lines" and r.get("served_from") == "memory":
                add("memory_hit", str(path), tier="reads", kind="range")
                add("read_avoided", str(path), path=path, reason="unchanged range still in context")
            elif name == "read_lines":
                add("file_read", str(path), path=path, lines=r.get("lines"), served_from="disk")
            elif name == "replace_lines":
                add("file_edit", str(path), path=path, lines=r.get("lines"))
            elif name in ("find", "impact") and verdict:
                add("memory_hit" if verdict == "hit" else "memory_miss",
                    str(args.get("query") or args.get("symbol") or ""), tier="kmap", kind=name)
            elif name == "log_decision":
                found = _DECISION_ID.search(str(r.get("content") or ""))
                if found:
                    add("decision_logged", found.group(1), decision=args.get("decision"), files=args.get("files"))
    elif kind == "system" and r.get("notice") == "error":
        add("error", "agent", error=str(r.get("content") or ""))
    elif kind == "compact":
        tokens_in, tokens_out = r.get("tokens_in"), r.get("tokens_out")
        total = (tokens_in or 0) + (tokens_out or 0) if tokens_in is not None or tokens_out is not None else None
        covers = r.get("covers") or {}
        add("compaction", session, r.get("duration_ms"), total, model=r.get("model"), reason=r.get("reason"),
            first_turn=covers.get("new_first_turn"), last_turn=covers.get("last_turn"), record_id=r["id"])
    elif kind == "redaction":
        for target in r.get("targets") or ():
            add("redaction", str(target.get("name") or "tool"), record_id=target.get("id"),
                chars_before=target.get("chars"), turn=r.get("at_turn"))
    return events


# --------------------------------------------------------------------------- memory view
def memory_at(steps: list[Step]) -> MemoryView:
    """Decisions, pins, files read and edited, STM/LTM writes: everything the steps so far put in memory."""
    view = MemoryView()
    decisions: dict[str, dict] = {}
    stm: dict[str, dict] = {}
    ltm: dict[str, dict] = {}
    for step in steps:
        r = step.record
        if step.kind == "system" and r.get("pin"):
            view.pins.append(str(r.get("content") or ""))
        elif step.kind == "assistant":
            for decision_id in r.get("reused") or ():
                if decision_id in decisions:
                    decisions[decision_id]["reused"] += 1
        elif step.kind == "tool" and r.get("ok", True):
            name, args = r.get("name"), step.args
            path = r.get("path") or args.get("path")
            if name == "file_meta" and path:
                view.files_read.setdefault(path, []).append("map")
            elif name == "read_lines" and path:
                lines = r.get("lines") or [args.get("start"), args.get("end")]
                view.files_read.setdefault(path, []).append(list(lines))
            elif name == "replace_lines" and path:
                view.files_edited[path] = view.files_edited.get(path, 0) + 1
            elif name == "log_decision":
                found = _DECISION_ID.search(str(r.get("content") or ""))
                if found:
                    decisions[found.group(1)] = {
                        "id": found.group(1), "decision": str(args.get("decision") or ""),
                        "reasoning": str(args.get("reasoning") or ""), "files": list(args.get("files") or []),
                        "step": step.number, "reused": 0}
            elif name == "umem" and args.get("tier") in ("stm", "ltm"):
                entry = {"key": str(args.get("key") or ""), "value": args.get("value"), "namespace": "",
                         "updated": str(r.get("ts") or "")}
                (stm if args["tier"] == "stm" else ltm)[entry["key"]] = entry
    view.decisions = list(decisions.values())
    view.stm = sorted(stm.values(), key=lambda e: e["key"])
    view.ltm = sorted(ltm.values(), key=lambda e: e["key"])
    return view


# --------------------------------------------------------------------------- the player
class Player:
    """Steps through an episode, by hand or in (scaled) real time.

    The caller owns the clock and the timer: `clock()` returns seconds
    (monotonic); while playing, call `tick()` from a timer (`due_in()` says
    when the next step is due) and redraw when it returns True.
    """

    def __init__(self, episode: Episode, *, clock: Callable[[], float] = time.monotonic, start: int = 0):
        self.episode = episode
        self.clock = clock
        self.position = episode.check_index(start)
        self.speed = 1.0
        self.playing = False
        self._anchor_clock = 0.0
        self._anchor_offset = 0.0
        self._state: ReplayState | None = None

    @property
    def step_now(self) -> Step:
        return self.episode.steps[self.position]

    @property
    def at_end(self) -> bool:
        return self.position == len(self.episode.steps) - 1

    def state(self) -> ReplayState:
        if self._state is None or self._state.index != self.position:
            self._state = self.episode.state_at(self.position)
        return self._state

    def _move(self, index: int) -> bool:
        index = max(0, min(index, len(self.episode.steps) - 1))
        moved = index != self.position
        self.position = index
        if self.playing:
            self._anchor()
        return moved

    def step(self, n: int = 1) -> bool:
        """Forward n steps (clamped at the last); True if the position changed."""
        return self._move(self.position + n)

    def back(self, n: int = 1) -> bool:
        return self._move(self.position - n)

    def seek(self, index: int) -> bool:
        """To step `index` (0-based); a step outside the episode is an error, not a clamp."""
        return self._move(self.episode.check_index(index))

    def play(self, speed: float | None = None) -> None:
        """Play from here at `speed` × real time (from the start again when at the end)."""
        if speed is not None:
            if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not speed > 0 \
                    or speed == float("inf"):
                raise ReplayError(f"speed must be a positive number, got {speed!r}")
            self.speed = float(speed)
        if self.at_end:
            self.position = 0
        self.playing = True
        self._anchor()

    def pause(self) -> None:
        self.playing = False

    def toggle(self, speed: float | None = None) -> None:
        self.pause() if self.playing else self.play(speed)

    def _anchor(self) -> None:
        self._anchor_clock = self.clock()
        self._anchor_offset = self.step_now.offset_s

    def tick(self) -> bool:
        """Advance to wherever the clock says playback is; True if the position changed."""
        if not self.playing:
            return False
        target = self._anchor_offset + (self.clock() - self._anchor_clock) * self.speed
        steps = self.episode.steps
        index = self.position
        while index + 1 < len(steps) and steps[index + 1].offset_s <= target:
            index += 1
        moved = index != self.position
        self.position = index
        if self.at_end:
            self.playing = False
        return moved

    def due_in(self) -> float | None:
        """Seconds of clock time until the next step is due (None when not playing)."""
        if not self.playing or self.at_end:
            return None
        elapsed = (self.clock() - self._anchor_clock) * self.speed
        wait = self.episode.steps[self.position + 1].offset_s - self._anchor_offset - elapsed
        return max(0.0, wait / self.speed)


# --------------------------------------------------------------------------- verification
@dataclass
class Check:
    """One tool call of the episode re-run today."""

    index: int  # step index
    record_id: str
    tool: str
    args: dict
    status: str  # same | differ | skipped | edit-same | edit-differ
    reason: str = ""
    diff: str = ""

    @property
    def number(self) -> int:
        return self.index + 1

    def to_dict(self) -> dict:
        return {"step": self.number, "record_id": self.record_id, "tool": self.tool, "args": self.args,
                "status": self.status, "reason": self.reason or None, "diff": self.diff or None}


@dataclass
class VerifyReport:
    episode: str
    root: str
    mode: str  # "tree": checked in place (read-only) | "scratch": a private copy, the episode's edits replayed
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def _count(self, *statuses: str) -> int:
        return sum(1 for c in self.checks if c.status in statuses)

    @property
    def checked(self) -> int:
        return self._count("same", "differ")

    @property
    def same(self) -> int:
        return self._count("same")

    @property
    def differ(self) -> int:
        return self._count("differ")

    @property
    def skipped(self) -> int:
        return self._count("skipped")

    @property
    def edits_replayed(self) -> int:
        return self._count("edit-same", "edit-differ")

    @property
    def edits_differ(self) -> int:
        return self._count("edit-differ")

    @property
    def first_difference(self) -> Check | None:
        return next((c for c in self.checks if c.status in ("differ", "edit-differ")), None)

    @property
    def ok(self) -> bool:
        return self.first_difference is None

    def status_of(self, index: int) -> str | None:
        """The verdict on step `index` (None: nothing to check there)."""
        return next((c.status for c in self.checks if c.index == index), None)

    def to_dict(self) -> dict:
        first = self.first_difference
        return {"episode": self.episode, "root": self.root, "mode": self.mode, "ok": self.ok,
                "checked": self.checked, "same": self.same, "differ": self.differ, "skipped": self.skipped,
                "edits_replayed": self.edits_replayed, "edits_differ": self.edits_differ,
                "first_difference": first.to_dict() if first else None,
                "checks": [c.to_dict() for c in self.checks], "notes": self.notes,
                "seconds": round(self.seconds, 3)}

    def render(self) -> str:
        where = ("in a scratch copy of it, the episode's own edits re-applied" if self.mode == "scratch"
                 else "read-only")
        lines = [f"episode {self.episode} against {self.root} ({where})",
                 f"checked {self.checked}: {self.same} same, {self.differ} differ; skipped {self.skipped}"
                 + (f"; edits replayed {self.edits_replayed} ({self.edits_differ} differ)"
                    if self.edits_replayed else "")]
        for check in self.checks:
            mark = _MARKS[check.status]
            text = f"  {mark} step {check.number:>4}  {call_label(check.tool, check.args)}"
            if check.reason:
                text += f"  ({check.reason})"
            lines.append(text)
        first = self.first_difference
        if first is None:
            lines.append("every checked result is the same as what the agent saw: the episode still applies")
        else:
            lines.append(f"FIRST DIFFERENCE at step {first.number}: {call_label(first.tool, first.args)}")
            lines += ["    " + line for line in first.diff.splitlines()]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


_MARKS = {"same": "=", "differ": "≠", "skipped": "-", "edit-same": "✎", "edit-differ": "≠"}


def _short_diff(then: str, now: str) -> str:
    lines = list(difflib.unified_diff(then.splitlines(), now.splitlines(), "then", "now", n=1, lineterm=""))
    if len(lines) > DIFF_LINES:
        lines = lines[:DIFF_LINES] + [f"… {len(lines) - DIFF_LINES} more diff lines"]
    return "\n".join(lines)


def _comparable(name: str, text: str) -> str:
    if name == "find":  # the verifier runs without a model; tier one's hits are what is compared
        text = "\n".join(line for line in text.splitlines() if line.strip() != _NO_MODEL_NOTE)
    return text


def _arguments_ok(call: dict) -> bool:
    raw = call.get("arguments")
    if isinstance(raw, dict):
        return True
    try:
        return isinstance(json.loads(raw or "{}"), dict)
    except (TypeError, ValueError):
        return False


def _skip_reason(step: Step) -> str | None:
    r = step.record
    content = str(r.get("content") or "")
    if step.call is None:
        return "its call is not in the log"
    if not _arguments_ok(step.call):
        return "its arguments were not a JSON object"
    if not r.get("ok", True) and content.startswith("[not run"):
        return "never ran"
    if r.get("name") == "read_lines" and r.get("served_from") == "memory":
        return "answered from the agent's memory of an earlier read, not by the tool"
    if r.get("name") == "find" and ("[semantic]" in content or "(tier two failed:" in content):
        return "used the model (semantic search)"
    return None


def _edits_before_reads(episode: Episode) -> bool:
    """Did the episode change a file before a later verifiable call?"""
    from .agent.tools import VERIFIABLE

    edited = False
    for step in episode.steps:
        if step.kind != "tool":
            continue
        if step.record.get("name") == "replace_lines" and step.record.get("ok", True):
            edited = True
        elif edited and step.record.get("name") in VERIFIABLE:
            return True
    return False


def _verifier_config(config: Any) -> Any:
    """The workspace's config with no model (find stays in tier one; nothing leaves the machine)."""
    cfg = config.model_copy(deep=True)
    cfg.model.name = ""
    cfg.model.fallbacks = []
    cfg.workspace.state_dir = ""
    return cfg


def verify(episode: Episode, workspace: Any, *, scratch: bool | None = None,
           progress: Callable[[int, int], None] | None = None) -> VerifyReport:
    """Re-run the episode's VERIFIABLE tool calls against today's tree of `workspace` (anything with
    .config, .paths and .db: a runtime.Workspace) and compare each result with what the agent
    saw then. `scratch` (default: when the episode edited files before reading again) checks in a private
    copy of the tree with the episode's edits re-applied; the workspace's tree is never written."""
    from .agent.tools import VERIFIABLE, ToolContext, call
    from .index.map import KnowledgeMap

    started = time.perf_counter()
    if scratch is None:
        scratch = _edits_before_reads(episode)
    root = workspace.paths.root
    report = VerifyReport(episode.name, str(root), "scratch" if scratch else "tree")
    tree = _ScratchTree(workspace, episode) if scratch else None
    try:
        if tree is not None:
            kmap = tree.open()
        else:
            kmap = KnowledgeMap(workspace.db, workspace.paths, _verifier_config(workspace.config))
        ctx = ToolContext(root=kmap.root, kmap=kmap, memory=None, recall=_no_recall, session=episode.name)
        work = [s for s in episode.steps if s.kind == "tool"]
        for done, step in enumerate(work, start=1):
            _check_step(step, ctx, call, VERIFIABLE, scratch, report)
            if progress is not None:
                progress(done, len(work))
        ctx.reindex()
    finally:
        if tree is not None:
            tree.close()
    report.seconds = time.perf_counter() - started
    return report


def _check_step(step: Step, ctx: Any, call: Callable, verifiable: tuple, scratch: bool,
                report: VerifyReport) -> None:
    r = step.record
    name = str(r.get("name") or "")
    args = step.args
    then = str(r.get("content") or "")
    if name in verifiable:
        reason = _skip_reason(step)
        if reason is not None:
            report.checks.append(Check(step.index, step.id, name, args, "skipped", reason))
            return
        result = call(ctx, name, args)
        was_ok = bool(r.get("ok", True))
        same = result.ok == was_ok and _comparable(name, result.text) == _comparable(name, then)
        reason = "" if result.ok == was_ok else (
            "failed then, succeeds now" if result.ok else "succeeded then, fails now")
        report.checks.append(Check(step.index, step.id, name, args, "same" if same else "differ", reason,
                                   "" if same else _short_diff(then, result.text)))
    elif name == "replace_lines" and r.get("ok", True):
        if not scratch:
            report.notes.append(f"step {step.number} edited {args.get('path', '?')}; not replayed (read-only check)")
            return
        if step.call is None or not _arguments_ok(step.call):
            report.notes.append(f"step {step.number}: an edit whose call is unreadable was not replayed")
            return
        result = call(ctx, name, args)  # inside the scratch copy only
        same = result.ok and result.text == then
        report.checks.append(Check(step.index, step.id, name, args, "edit-same" if same else "edit-differ",
                                   "" if same else "the episode's edit does not apply the same way",
                                   "" if same else _short_diff(then, result.text)))
    elif name == "run_command":
        report.notes.append(f"step {step.number} ran a command ({_clip(str(args.get('cmd', '')), 60)}) that "
                            "is not re-run; whatever it changed is not in the checked tree")


def _no_recall(record_id: str) -> str:
    raise WorkstationError("recall is not available while verifying")


class _ScratchTree:
    """A private copy of the workspace's tree (what the index sees, plus the files the episode named),
    with its own state folder, database and knowledge map. Deleted on close."""

    def __init__(self, workspace: Any, episode: Episode):
        self.workspace = workspace
        self.episode = episode
        self.tmp: Path | None = None
        self.db = None

    def open(self):
        from .index import indexer
        from .index.ignore import IgnoreRules
        from .index.map import KnowledgeMap
        from .paths import STATE_DIRNAME, Paths
        from .store import Database

        src = self.workspace.paths
        config = self.workspace.config
        self.tmp = Path(tempfile.mkdtemp(prefix="ws-verify-"))
        root = self.tmp / "tree"
        root.mkdir()
        rules = IgnoreRules(src.root, src.state, config.index.ignore)
        found = indexer.scan(src.root, rules, config.index.max_file_bytes)
        wanted = {rel: read_from for rel, (read_from, _sig) in found.files.items()}
        for rel in (f"{STATE_DIRNAME}/ignore", ".git/info/exclude"):
            if (src.root / rel).is_file():
                wanted[rel] = str(src.root / rel)
        for rel in self._named_files(src.root):
            wanted.setdefault(rel, str(src.root / rel))
        for rel, read_from in wanted.items():
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(read_from, target)
        paths = Paths.for_root(root)
        self.db = Database(paths)
        kmap = KnowledgeMap(self.db, paths, _verifier_config(config))
        kmap.index_all()
        self._copy_model_purposes()
        return kmap

    def _named_files(self, root: Path) -> list[str]:
        """Files the episode's file tools named that the index leaves out (they may still be read)."""
        from .fsutil import confine

        out = []
        for step in self.episode.steps:
            if step.kind != "tool" or not isinstance(step.args.get("path"), str):
                continue
            try:
                real, rel = confine(root, step.args["path"])
            except WorkstationError:
                continue
            if rel and real.is_file() and not rel.startswith((".git/", ".workstation/")):
                out.append(rel)
        return out

    def _copy_model_purposes(self) -> None:
        """Purposes a model wrote for the real index (same content hash) appear in file_meta; carry them."""
        src = self.workspace.paths
        if not src.index_db.exists():
            return
        from .index.describe import set_model_purpose

        for path, sha, purpose in self.workspace.db.call(_model_purposes):
            self.db.call(set_model_purpose, path, sha, purpose)

    def close(self) -> None:
        try:
            if self.db is not None:
                self.db.close()
        finally:
            if self.tmp is not None:
                shutil.rmtree(self.tmp, ignore_errors=True)


@readonly
def _model_purposes(con) -> list[tuple]:
    return con.execute("SELECT path, sha256, purpose FROM kmap.files WHERE purpose_source = 'model'").fetchall()


# --------------------------------------------------------------------------- text rendering
def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(seconds, 60)
    return f"{int(minutes):02d}:{secs:04.1f}"


def render_steps(episode: Episode, upto: int | None = None) -> str:
    """The episode step by step, one line each (up to step index `upto`)."""
    last = len(episode.steps) - 1 if upto is None else episode.check_index(upto)
    width = len(str(len(episode.steps)))
    return "\n".join(f"{s.number:>{width}}  {_elapsed(s.offset_s)}  {s.label()}" for s in episode.steps[: last + 1])


def render_state(episode: Episode, state: ReplayState) -> str:
    ctx = state.context
    mem = state.memory
    lines = [f"state at step {state.step.number} of {len(episode.steps)} ({state.step.kind}, {state.step.id}, "
             f"{state.step.record.get('ts', '?')})"]
    if state.request is not None:
        lines.append(f"  this model call was sent {len(state.request.messages)} messages, "
                     f"{state.request.tokens:,} tokens of conversation"
                     + (f" ({state.step.record['context_tokens']:,} tokens in all, as recorded)"
                        if isinstance(state.step.record.get("context_tokens"), int) else ""))
    summary = (f"; turns 1–{ctx.covered_turns} summarized by compact record {ctx.summary_id}"
               if ctx.summary_id else "; no compaction in effect")
    lines.append(f"  model context: {len(ctx.messages)} messages, {ctx.tokens:,} tokens, {ctx.turn_count} turns"
                 + summary)
    for red in ctx.redactions:
        lines.append(f"    {red.marker}")
    lines.append(f"  decisions: {len(mem.decisions)}")
    lines += [f"    [D:{d['id']}] step {d['step']}: {_clip(d['decision'], 100)} (reused {d['reused']}x)"
              for d in mem.decisions]
    if mem.pins:
        lines.append("  pins: " + "; ".join(_clip(p, 60) for p in mem.pins))
    if mem.files_read:
        lines.append("  files read: " + ", ".join(
            f"{p} ({', '.join('map' if x == 'map' else f'{x[0]}-{x[1]}' for x in v)})"
            for p, v in sorted(mem.files_read.items())))
    if mem.files_edited:
        lines.append("  files edited: " + ", ".join(f"{p} ({n}x)" for p, n in sorted(mem.files_edited.items())))
    for tier, entries in (("stm", mem.stm), ("ltm", mem.ltm)):
        if entries:
            lines.append(f"  {tier}: " + ", ".join(f"{e['key']}={_clip(json.dumps(e['value']), 40)}" for e in entries))
    kinds: dict[str, int] = {}
    for event in state.timeline:
        kinds[event["type"]] = kinds.get(event["type"], 0) + 1
    lines.append(f"  timeline: {len(state.timeline)} events (" + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
                 + ")")
    return "\n".join(lines)
