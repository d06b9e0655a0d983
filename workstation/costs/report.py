"""Proof of savings: a session's efficiency figures beside a naive baseline replay of the same steps.

Both columns come from the session log alone, so any log can be reported on
(a live, archived or shipped demo session), with no model and no database.

Memory agent (what the agent loop wrote on its records):
  model calls       assistant records
  file reads        file content read from disk into the context (each tool declares its reads:
                    agent.tools, Meaning.reads)
  memory queries    turn-start lookups (user record `memory.lookups`) + tool results with a
                    `memory` verdict (file_meta, find, impact, repeated range reads, qmem stm/ltm)
  memory hits       the same, answered from memory (fresh)
  reads avoided     maps served instead of a file and ranges answered from memory (file_meta maps,
                    unchanged ranges still in context)
  tokens sent       sum of `context_tokens` of every answered request (messages + tool schemas,
                    cl100k), i.e. after compaction, rolling redaction and trimming
  peak context      the largest of those requests
  decisions         log_decision results; reuses = decisions cited as [D:id] by later answers

Naive baseline: the same steps replayed by an agent with no knowledge map, no
memory, no compaction and no redaction. It makes the same model calls with
the same base system prompt and tool schemas (`base_tokens` of each call), and
each request carries the whole raw history so far. Every look at a file
(a map or a range: Meaning.looked_at) is a full read of that file, whose result is the
whole file (`file_tokens`, counted when the agent looked; a file looked at
twice within one model step is read once). Every other tool result, message
and tool call costs what it cost the agent. Memory figures are zero.

A sub-agent's steps (`sidechain` records, agent/subagent.py) are a history of their own in both
columns: the naive agent delegates the same tasks, each sub-agent starting from the base.

A second, more charitable baseline is reported beside it: the same naive
agent re-reading a file only when it changed since its last full read (an
edit in between, or another content hash); otherwise the copy already in its
raw history serves.

Billed: the three priced as providers bill them with an ideal prefix cache, and
the agent as its provider reported it, per request kind (costs/billed.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import WorkstationError
from ..sessions.catalog import load as load_session
from ..sessions.derive import Meaning
from ..sessions.log import LogView, parse_lines, tool_call_arguments
from ..sessions.records import Assistant, System, Tool, ToolCall, User
from ..tokens import count
from . import billed

MESSAGE_OVERHEAD = 4  # the same per-message cost loop.py counts
REDUCED = ("file_reads", "tokens_sent", "peak_context")
# What a recorded tool call did, as its tool declares (agent.tools.meaning_of: name, arguments, record, call).
# The caller hands the agent's tools in: this package sits below the agent, whose budget reads its bill.
MeaningOf = Callable[[str, Mapping[str, Any], Mapping[str, Any], Mapping[str, Any] | None], Meaning]


@dataclass
class Figures:
    model_calls: int = 0
    file_reads: int = 0
    memory_queries: int = 0
    memory_hits: int = 0
    reads_avoided: int = 0
    tokens_sent: int = 0
    peak_context: int = 0
    decisions_logged: int = 0
    decisions_reused: int = 0


@dataclass
class Report:
    session: str
    agent: Figures
    baseline: Figures  # the naive policy as the issue defines it: a full read at every look
    baseline_once: Figures  # the same, re-reading a file only after it changed
    billing: billed.Billing | None = None  # what each costs as billed (costs/billed.py)
    subagents: dict | None = None  # {tasks, model_calls, tokens_sent} of its sub-agents (subagent_figures)

    def reduction(self, name: str, baseline: Figures | None = None) -> float | None:
        base = getattr(baseline or self.baseline, name)
        return None if not base else 1 - getattr(self.agent, name) / base

    def to_dict(self) -> dict:
        return {"session": self.session, "agent": asdict(self.agent), "baseline": asdict(self.baseline),
                "baseline_reading_unchanged_files_once": asdict(self.baseline_once),
                "reduction": {name: self.reduction(name) for name in REDUCED},
                "reduction_vs_reading_once": {name: self.reduction(name, self.baseline_once) for name in REDUCED},
                "billed": self.billing.to_dict() if self.billing else None, "subagents": self.subagents}

    def subagent_line(self) -> str | None:
        """What the sub-agents took of the agent's figures, in one line (None: it ran none)."""
        sub = self.subagents
        if not sub:
            return None
        return (f"sub-agents: {sub['tasks']} task(s), {sub['model_calls']:,} of the {self.agent.model_calls:,} model "
                f"calls and {sub['tokens_sent']:,} of the {self.agent.tokens_sent:,} tokens sent (each a history of "
                "its own in the naive columns)")

    def rows(self) -> list[dict]:
        out = []
        for name in Figures.__dataclass_fields__:
            reduced = name in REDUCED
            red, once = self.reduction(name), self.reduction(name, self.baseline_once)
            out.append({"metric": name.replace("_", " "), "agent": f"{getattr(self.agent, name):,}",
                        "naive": f"{getattr(self.baseline, name):,}",
                        "saved": f"{red:.1%}" if reduced and red is not None else "",
                        "naive*": f"{getattr(self.baseline_once, name):,}",
                        "saved*": f"{once:.1%}" if reduced and once is not None else ""})
        return out


def _assistant_tokens(record: Assistant, count: Callable[[str], int]) -> int:
    total = count(record.content) + MESSAGE_OVERHEAD
    for call in record.tool_calls or ():
        total += count(call.name + call.arguments)
    return total


def output_tokens(record: Assistant, count: Callable[[str], int]) -> int:
    """An answer's output tokens: as its provider reported them, else counted."""
    out = record.tokens_out
    return int(out) if out is not None else _assistant_tokens(record, count) - MESSAGE_OVERHEAD


def _meanings(view: LogView, meaning_of: MeaningOf):
    """(record, meaning) of every tool record: what each call did, as its tool declares (agent.tools)."""
    calls: dict[str, ToolCall] = {}
    for record in view.records:
        if isinstance(record, Assistant):
            calls.update({c.id: c for c in record.tool_calls or ()})
        elif isinstance(record, Tool):
            call = calls.get(record.tool_call_id)
            # the tools read a record through Fields' mapping access until their reads are typed (issue 32, 2)
            yield record, meaning_of(record.name, tool_call_arguments(call or {}), record,  # type: ignore[arg-type]
                                     call)  # type: ignore[arg-type]


def agent_figures(view: LogView, meaning_of: MeaningOf) -> Figures:
    fig = Figures()
    meanings = {id(record): meaning for record, meaning in _meanings(view, meaning_of)}
    for record in view.records:
        if isinstance(record, User):
            memory = record.memory or {}
            fig.memory_queries += int(memory.get("lookups") or 0)
            fig.memory_hits += int(memory.get("hits") or 0)
        elif isinstance(record, Assistant):
            fig.model_calls += 1
            sent = int(record.context_tokens or 0)
            fig.tokens_sent += sent
            fig.peak_context = max(fig.peak_context, sent)
            fig.decisions_reused += len(record.reused or ())
        elif isinstance(record, Tool):
            if record.memory in ("hit", "miss"):
                fig.memory_queries += 1
                fig.memory_hits += record.memory == "hit"
            meaning = meanings[id(record)]
            fig.reads_avoided += len(meaning.map_reads) + sum(r.served_from == "memory" for r in meaning.reads)
            fig.file_reads += sum(r.served_from == "disk" for r in meaning.reads)
            fig.decisions_logged += meaning.decision is not None
    return fig


def subagent_figures(view: LogView) -> dict | None:
    """The sub-agents' part of a session (agent/subagent.py): task calls, and their model calls and tokens sent."""
    tasks = sum(1 for r in view.records if isinstance(r, Tool) and r.subagent is not None)
    calls = [r for r in view.records if isinstance(r, Assistant) and r.sidechain]
    if not tasks and not calls:
        return None
    return {"tasks": tasks, "model_calls": len(calls), "tokens_sent": sum(int(r.context_tokens or 0) for r in calls)}


def baseline_figures(view: LogView, root: Path | None, default_base_tokens: int,
                     count: Callable[[str], int], meaning_of: MeaningOf, *, reread_unchanged: bool = True,
                     requests: list[tuple[int, int, int]] | None = None) -> Figures:
    """Replay the session's steps under the naive policy (see the module docstring).

    With reread_unchanged=False the naive agent reads a file again only when it changed since its
    last full read (an edit, or another content hash): the most charitable reading of "naive".
    `requests` gets (tokens sent, base tokens, output tokens) of each of its requests, a sub-agent's with its
    flow as a fourth: each sub-agent (`sidechain`) has a history of its own."""
    fig = Figures()
    sizes: dict[str, int] = {}

    def whole_file(record: Tool, path: str) -> int:
        if isinstance(record.file_tokens, int) and record.path in (None, path):
            return record.file_tokens
        if path not in sizes:  # a log written without file_tokens: the file as it is now
            try:
                sizes[path] = count((root / path).read_text(encoding="utf-8", errors="replace")) if root else -1
            except OSError:
                sizes[path] = -1
        return sizes[path] if sizes[path] >= 0 else count(record.content)

    meanings = {id(record): meaning for record, meaning in _meanings(view, meaning_of)}
    chains: dict[str, _Chain] = {}  # "": the agent's own history; else a sub-agent's, by flow
    for record in view.records:
        flow = record.sidechain or ""
        chain = chains.setdefault(flow, _Chain())
        read_this_step, last_read = chain.read_this_step, chain.last_read
        if isinstance(record, User) or (isinstance(record, System) and not record.notice):
            chain.history += count(record.content) + MESSAGE_OVERHEAD
        elif isinstance(record, Assistant):
            fig.model_calls += 1
            base = int(record.base_tokens or default_base_tokens)
            sent = base + chain.history
            if requests is not None:
                requests.append((sent, base, output_tokens(record, count), *((flow,) if flow else ())))
            fig.tokens_sent += sent
            fig.peak_context = max(fig.peak_context, sent)
            chain.history += _assistant_tokens(record, count)
            chain.read_this_step = set()
        elif isinstance(record, Tool):
            meaning = meanings[id(record)]
            looked = meaning.looked_at
            for path in looked:  # every look at a file is a full read of it for the naive agent
                unchanged = path in last_read and last_read[path] == record.sha is not None
                if path in read_this_step or (not reread_unchanged and unchanged):
                    chain.history += MESSAGE_OVERHEAD  # the whole file is in the history already
                else:
                    read_this_step.add(path)
                    last_read[path] = record.sha
                    fig.file_reads += 1
                    chain.history += whole_file(record, path) + MESSAGE_OVERHEAD
            for edit in meaning.edits:
                last_read.pop(edit.path, None)  # its copy in the history is out of date
            if not looked:
                chain.history += count(record.content) + MESSAGE_OVERHEAD
    return fig


@dataclass
class _Chain:
    """One history of the naive agent: its tokens, the files read in its current step, its last full reads
    (path -> content hash)."""

    history: int = 0
    read_this_step: set[str] = field(default_factory=set)
    last_read: dict[str, str | None] = field(default_factory=dict)


def load(paths, target: str) -> tuple[LogView, str]:
    """A session by slug (live or archived), or a session log file by path."""
    candidate = Path(target).expanduser()
    if target.endswith(".jsonl") or "/" in target:
        if not candidate.is_file():
            raise WorkstationError(f"no session log file {target}")
        try:
            data = candidate.read_bytes()
        except OSError as err:
            raise WorkstationError(f"cannot read {target}: {err.strerror}") from None
        return parse_lines(data), candidate.name.removesuffix(".jsonl")
    view, _ = load_session(paths, target)
    return view, target


def build(paths, target: str, meaning_of: MeaningOf, base_tokens: Callable[[Path], int]) -> Report:
    """The report of a session (slug, live or archived) or of a session log file (path) of a workspace, with the
    agent's tools (`meaning_of`) and the head its requests start with (`base_tokens` of a root: the system prompt
    and the tool schemas as the code is now, for logs that did not record them): agent.tools.meaning_of and
    agent.loop.base_tokens."""
    view, name = load(paths, target)
    if not any(isinstance(r, Assistant) for r in view.records):
        raise WorkstationError(f"session {name} has no model calls to report on")
    base = base_tokens(paths.root)
    naive: list[tuple[int, int, int]] = []
    once: list[tuple[int, int, int]] = []
    return Report(name, agent_figures(view, meaning_of),
                  baseline_figures(view, paths.root, base, count, meaning_of, requests=naive),
                  baseline_figures(view, paths.root, base, count, meaning_of, reread_unchanged=False, requests=once),
                  billed.build(view, naive, once, lambda record: output_tokens(record, count)),
                  subagent_figures(view))
