"""An episode: a recorded session, one step per log record, and the state the agent had at each step.

Everything a step shows is derived from the log alone: no model, no database,
so a shipped demo replays on a fresh clone. What a tool call did (files read
and edited, memory lookups, decisions) comes from the tool's own declaration
(agent.tools), the same one the live loop records its events from.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from ..agent import tools
from ..agent.tools import call_label
from ..config import Config
from ..errors import WorkstationError
from ..paths import Paths
from ..sessions.catalog import load as load_session, rewind_line, summary_span
from ..sessions.modelview import ContextView, Redaction, assemble, update_line
from ..sessions.log import LogProblem, LogView, default_counter, parse_lines, tool_call_arguments
from ..sessions.records import (Assistant, Command, Compact, Covers, Record, Redaction as RedactionRecord, Rewind,
                                System, Tool, ToolCall, User, to_builtins)
from ..sessions.transcript import log_groups
from ..sessions.turns import Coverage, TakenBack, hit_turn, number as number_turns, of_log, starts_turn, taken_back

MAX_PAUSE_S = 2.0  # longer gaps between records (the user thinking, a night) play as this long
UNTIMED_STEP_S = 1.0  # a record whose time was not recorded (SWE-agent's, an unreadable ts) plays this long


class ReplayError(WorkstationError):
    """An episode that cannot be loaded, or a step that does not exist."""


# --------------------------------------------------------------------------- steps
def timed(record: Record) -> bool:
    """Does the record carry the time it happened? An importer says when it does not (`source.time`:
    SWE-agent logs no times, so its records all get the file's modification time)."""
    return _epoch(record.ts) is not None and not (record.source is not None and record.source.time)


def _epoch(ts: Any) -> float | None:
    if not isinstance(ts, str) or not ts:
        return None
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def clip(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class Step:
    """One record of the episode, in log order."""

    index: int  # 0-based position in the episode
    record: Record  # the log record, verbatim
    ts: float  # epoch seconds (a record without a readable ts takes its predecessor's)
    offset_s: float  # seconds from the first step on the replay clock (pauses capped at MAX_PAUSE_S, a record
    # without a recorded time UNTIMED_STEP_S after its predecessor)
    turn: int | None  # the turn (sessions.turns) of a user/assistant/tool/system record; None before the first
    # user message and for the other records (as search hits say it: sessions.turns.hit_turn)
    call: ToolCall | None = None  # for a tool result: the call that asked for it
    args: dict = field(default_factory=dict)  # that call's arguments ({} when unreadable)
    span: str = ""  # for a compact record: the turns it summarizes (`1–7`)
    taken: TakenBack | None = None  # what took this record back later in the log (sessions.turns.taken_back)

    @property
    def number(self) -> int:
        return self.index + 1

    def meaning(self) -> tools.Meaning:
        """What this step's tool call did, as its tool declares (nothing for other records)."""
        if not isinstance(self.record, Tool):
            return tools.Meaning()
        # the tools read a record through Fields' mapping access until their own reads are typed (issue 32, 2)
        return tools.meaning_of(self.record.name, self.args, self.record, self.call)  # type: ignore[arg-type]

    @property
    def kind(self) -> str:
        return self.record.kind

    @property
    def id(self) -> str:
        return self.record.id

    def label(self) -> str:
        """What happened at this step, in one line; a sub-agent's step (`sidechain`) behind its flow's name,
        what took it back after it."""
        flow = self.record.sidechain
        taken = f" [{self.taken.describe()}]" if self.taken is not None else ""
        return (f"[{flow}] " if flow else "") + self._label() + taken

    def _label(self) -> str:
        r = self.record
        if isinstance(r, User):
            turn = f" (turn {self.turn})" if starts_turn(r) and self.turn else ""
            return f"user{turn}: {clip(r.content, 100)}"
        if isinstance(r, Assistant):
            facts = [r.model or ""]
            if r.latency_ms is not None:
                facts.append(f"{float(r.latency_ms):.0f} ms")
            if r.context_tokens is not None:
                facts.append(f"{int(r.context_tokens):,} tokens in context")
            head = f"assistant ({', '.join(f for f in facts if f)})" if any(facts) else "assistant"
            calls = [call_label(c.name, tool_call_arguments(c)) for c in r.tool_calls or ()]
            text = clip(r.content, 100)
            return head + (f": {text}" if text else "") + (f" → {', '.join(calls)}" if calls else "")
        if isinstance(r, Tool):
            name = r.name or "tool"
            extra = ["ok" if r.ok else "failed"]
            if r.duration_ms is not None:
                extra.append(f"{float(r.duration_ms):.0f} ms")
            extra.append(f"{len(r.content):,} chars")
            if r.served_from:
                extra.append(f"from {r.served_from}")
            return f"  ↳ {call_label(name, self.args)}: {', '.join(extra)}"
        if isinstance(r, System):
            if r.pin:
                return f"pinned: {clip(r.content, 100)}"
            if r.update is not None:
                return update_line(r.content)
            if r.notice:
                return f"notice ({r.notice}): {clip(r.content, 100)}"
            return f"system: {clip(r.content, 100)}"
        if isinstance(r, Compact):
            return (f"== compaction: turns {self.span} summarized by "
                    f"{r.model or '?'} ({r.reason or '?'}) ==")
        if isinstance(r, RedactionRecord):
            targets = r.targets or ()
            return f"-- redaction: {len(targets)} tool output(s) hidden from the model from here on --"
        if isinstance(r, Rewind):
            return f"<< {rewind_line(r)} >>"
        if isinstance(r, Command):
            return f"command: {clip(r.line, 100)} ({'ok' if r.ok else 'failed'})"
        return r.kind

    def to_dict(self) -> dict:
        return {"step": self.number, "id": self.id, "ts": self.record.ts or None, "type": self.kind,
                "turn": self.turn, "offset_s": round(self.offset_s, 3), "label": self.label(),
                "taken_back": self.taken.to_dict() if self.taken is not None else None}


# --------------------------------------------------------------------------- state at a step
@dataclass
class MemoryView:
    """What the agent's memory held at a step, as far as the log tells."""

    decisions: list[dict] = field(default_factory=list)  # {id, decision, reasoning, files, step, reused}
    pins: list[str] = field(default_factory=list)
    files_read: dict[str, list] = field(default_factory=dict)  # path -> [[start, end] | "map" | "whole", ...]
    files_edited: dict[str, int] = field(default_factory=dict)  # path -> successful edits
    stm: list[dict] = field(default_factory=list)  # MemoryEntry-shaped: key, value, namespace, updated
    ltm: list[dict] = field(default_factory=list)  # the LTM writes of this episode (earlier values: not logged)
    plan: list[dict] | None = None  # the agent's plan in force: [{text, status}]; None: it wrote none yet

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class ReplayState:
    """The episode as the agent saw it at one step."""

    step: Step
    transcript: list[dict]  # chat turns so far, shaped as tui.viewdata.Turn (role, text, id, ts, ...)
    context: ContextView  # the conversation the next model call starts from (compaction, redaction applied)
    request: ContextView | None  # on a model reply: the conversation that model call was sent
    compaction: Compact | None  # the compact record in effect (it stands in for turns 1..covered)
    timeline: list[dict]  # episodic events so far, shaped as tui.viewdata.TimelineEvent
    memory: MemoryView
    turns: int = 0  # turns so far (sessions.turns)
    covered: Coverage = Coverage(0, False)  # how far the summary in effect reaches, in turns

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
            "context": {"messages": len(ctx.messages), "tokens": ctx.tokens, "turns": self.turns,
                        "covered_turns": self.covered.last_turn, "summary_id": ctx.summary_id,
                        "redactions": [dataclasses.asdict(r) | {"marker": r.marker} for r in ctx.redactions]},
            "request_tokens": self.request.tokens if self.request else None,
            "compaction": None if self.compaction is None else {
                "id": self.compaction.id, "model": self.compaction.model, "reason": self.compaction.reason,
                "covers": to_builtins(self.compaction.covers)},
            "transcript_turns": len(self.transcript),
            "timeline_events": len(self.timeline),
            "memory": self.memory.to_dict(),
        }


# --------------------------------------------------------------------------- the episode
class Episode:
    """A recorded session, one step per log record; see the module docstring."""

    def __init__(self, name: str, view: LogView, *, source: str = "", config: Config | None = None,
                 max_pause_s: float = MAX_PAUSE_S):
        if not view.records:
            raise ReplayError(f"session {name} has no readable records to replay")
        if config is None:
            config = Config()
        self.name = name
        self.source = source or name
        self.config = config
        self.records: list[Record] = list(view.records)
        self.problems: list[LogProblem] = list(view.problems)
        self.steps: list[Step] = _make_steps(self.records, max_pause_s)
        # each step's chat turns
        self._turns = log_groups(self.records, tools=tools, ts=lambda record: _epoch(record.ts))
        self._events = [_timeline_events(s, name) for s in self.steps]
        self._counter: Callable[[str], int] | None = None
        self._token_cache: dict[str, int] = {}

    @classmethod
    def load(cls, source: Paths | str | os.PathLike, target: str | os.PathLike | None = None, *,
             config: Config | None = None) -> "Episode":
        """`load(paths, "slug")` (live or archived), `load(paths, "dir/file.jsonl")`, or `load("file.jsonl")`."""
        if target is None:
            if isinstance(source, Paths):
                raise ReplayError("which session? give a slug or a .jsonl file")
            paths, target = None, source
        elif isinstance(source, Paths):
            paths = source
        else:
            raise ReplayError("a session slug is read from a workspace: load(paths, slug)")
        target = str(target)
        if target.endswith(".jsonl") or "/" in target or os.sep in target:
            return cls._from_file(Path(target).expanduser(), config)
        if paths is None:
            raise ReplayError(f"{target} is not a .jsonl file; a session slug needs a workspace")
        view, state = load_session(paths, target)
        return cls(target, view, source=state, config=config)

    @classmethod
    def _from_file(cls, path: Path, config: Config | None) -> "Episode":
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

    @property
    def timed(self) -> bool:
        """Do the records carry their times? (False: every step is paced UNTIMED_STEP_S)"""
        return any(timed(r) for r in self.records)

    def length_text(self) -> str:
        """'41.3 s recorded', or for an untimed episode 'times not recorded: 1 s a step'."""
        if self.timed:
            return f"{self.duration_s:.1f} s recorded"
        return f"times not recorded: {UNTIMED_STEP_S:g} s a step"

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
                self._counter = default_counter()
            cached = self._token_cache[text] = self._counter(text)
        return cached

    def context_at(self, upto: int) -> ContextView:
        """The conversation the model is given after the first `upto` records, as the loop builds it:
        compaction and redaction applied, pinned instructions and notices kept out (pins go in the system
        prompt, notices are for the user)."""
        prefix = self.records[:upto]
        view = assemble(LogView(prefix), self.config, counter=self._count)
        hidden = {r.content: int(r.tokens or 0) for r in prefix if isinstance(r, System) and (r.pin or r.notice)}
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
            if isinstance(record, Compact):
                compaction = record if context.summary_id == record.id else None
                break
        numbered, covered = of_log(LogView(self.records[: i + 1]))
        return ReplayState(step=step, transcript=[t for turns in self._turns[: i + 1] for t in turns],
                           context=context, request=request, compaction=compaction,
                           timeline=[e for events in self._events[: i + 1] for e in events],
                           memory=memory_at(self.steps[: i + 1]), turns=numbered.count, covered=covered)

    def transcript_of(self, index: int) -> list[dict]:
        """The chat turns step `index` adds (an incremental view for a UI appending as it plays)."""
        return list(self._turns[self.check_index(index)])

    def events_of(self, index: int) -> list[dict]:
        return list(self._events[self.check_index(index)])


def _make_steps(records: list[Record], max_pause_s: float) -> list[Step]:
    calls: dict[str, ToolCall] = {}
    steps: list[Step] = []
    turns = number_turns(records)
    marks = taken_back(records)
    offset = 0.0
    last_ts: float | None = None
    for index, record in enumerate(records):
        ts = _epoch(record.ts)
        if ts is None:
            ts = last_ts if last_ts is not None else 0.0
        if last_ts is not None:
            offset += min(max(ts - last_ts, 0.0), max_pause_s) if timed(record) else min(UNTIMED_STEP_S,
                                                                                          max_pause_s)
        last_ts = ts
        if isinstance(record, Assistant):
            calls.update((made.id, made) for made in record.tool_calls or () if made.id)
        call = calls.get(record.tool_call_id) if isinstance(record, Tool) else None
        steps.append(Step(index, record, ts, offset, hit_turn(record, turns.of(record)), call,
                          tool_call_arguments(call) if call else {},
                          summary_span(turns, record) if isinstance(record, Compact) else "",
                          marks.get(record.id)))
    return steps


# --------------------------------------------------------------------------- timeline events
def _timeline_events(step: Step, session: str) -> list[dict]:
    """The episodic events of one step, derived from its record (types as in memory.episodic)."""
    r = step.record
    events: list[dict] = []

    taken = step.taken.describe() if step.taken is not None else None

    def add(type_: str, name: str, duration_ms: Any = None, tokens: Any = None, **details: Any) -> None:
        events.append({"ts": step.ts, "type": type_, "name": name, "id": f"{step.id}:{len(events)}",
                       "turn_id": step.id, "session": session, "flow": r.sidechain or "",
                       "duration_ms": float(duration_ms) if duration_ms is not None else None,
                       "tokens": int(tokens) if tokens is not None else None,
                       "details": {k: v for k, v in {**details, "taken_back": taken}.items() if v is not None}})

    if isinstance(r, User):
        memory = r.memory or {}
        add("turn", "user", tokens=r.tokens, chars=len(r.content),
            lookups=memory.get("lookups"), hits=memory.get("hits"))
        for key in memory.get("misses") or ():
            add("memory_miss", str(key), tier="kmap")
    elif isinstance(r, Assistant):
        tokens_in, tokens_out = r.tokens_in, r.tokens_out
        total = (tokens_in or 0) + (tokens_out or 0) if tokens_in is not None or tokens_out is not None else None
        add("model_call", r.model or "model", r.latency_ms, total, tokens_in=tokens_in,
            tokens_out=tokens_out, context_tokens=r.context_tokens, cost_usd=r.cost_usd,
            finish_reason=r.finish_reason, tool_calls=len(r.tool_calls or ()) or None)
        add("turn", "assistant", tokens=r.tokens, chars=len(r.content))
        for decision_id in r.reused or ():
            add("decision_reused", str(decision_id))
    elif isinstance(r, Tool):
        name = r.name or "tool"
        args = step.args
        add("tool_call", name, r.duration_ms, r.tokens, ok=r.ok, args=args or None,
            result_chars=len(r.content), path=r.path or args.get("path"),
            lines=r.lines, served_from=r.served_from, memory=r.memory)
        for type_, subject, fields in tools.events(step.meaning(), live=False):
            add(type_, str(subject), **fields)
    elif isinstance(r, System) and r.notice == "error":
        add("error", "agent", error=r.content)
    elif isinstance(r, Compact):
        tokens_in, tokens_out = r.tokens_in, r.tokens_out
        total = (tokens_in or 0) + (tokens_out or 0) if tokens_in is not None or tokens_out is not None else None
        covers = r.covers or Covers()
        add("compaction", session, r.duration_ms, total, model=r.model, reason=r.reason,
            first_turn=covers.new_first_turn, last_turn=covers.last_turn, record_id=r.id)
    elif isinstance(r, RedactionRecord):
        for target in r.targets or ():
            add("redaction", target.name or "tool", record_id=target.id, chars_before=target.chars, turn=r.at_turn)
    return events


# --------------------------------------------------------------------------- memory view
def read_text(read: list | str) -> str:
    """One entry of MemoryView.files_read in words: '12-40', 'map', 'whole'."""
    return read if isinstance(read, str) else f"{read[0]}-{read[1]}"



def memory_at(steps: list[Step]) -> MemoryView:
    """Decisions, pins, files read and edited, STM/LTM writes, the plan: everything the steps so far put in
    memory."""
    view = MemoryView()
    decisions: dict[str, dict] = {}
    stm: dict[str, dict] = {}
    ltm: dict[str, dict] = {}
    for step in steps:
        r = step.record
        if isinstance(r, System) and r.pin:
            view.pins.append(r.content)
        elif isinstance(r, Assistant):
            for decision_id in r.reused or ():
                if decision_id in decisions:
                    decisions[decision_id]["reused"] += 1
        elif step.kind == "tool":
            meaning = step.meaning()
            for m in meaning.map_reads:
                view.files_read.setdefault(m.path, []).append("map")
            for read in meaning.reads:  # no lines: the whole file (another agent's Read, a read of it all)
                view.files_read.setdefault(read.path, []).append(list(read.lines) if read.lines else "whole")
            for edit in meaning.edits:
                view.files_edited[edit.path] = view.files_edited.get(edit.path, 0) + 1
            if meaning.decision:
                decisions[meaning.decision["id"]] = {**meaning.decision, "step": step.number, "reused": 0}
            if meaning.plan is not None:
                view.plan = [dataclasses.asdict(t) for t in meaning.plan]
            if meaning.memory_write:
                tier, key, value = meaning.memory_write
                entry = {"key": key, "value": value, "namespace": "", "updated": r.ts}
                (stm if tier == "stm" else ltm)[key] = entry
    view.decisions = list(decisions.values())
    view.stm = sorted(stm.values(), key=lambda e: e["key"])
    view.ltm = sorted(ltm.values(), key=lambda e: e["key"])
    return view
