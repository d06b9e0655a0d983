"""Compaction: two knobs, a token guard, a structured summary appended as a record.

Both knobs count turns as sessions.turns defines them (a user message and everything the agent did in
answer to it). `memory.compact_threshold` says when: once the live context (turns not yet covered by a
summary) holds that many turns. `memory.keep_recent` says how much stays verbatim: everything older than
the newest keep_recent turns is folded into one `compact` record, cut at a user message. The token guard
starts compaction early when the next request as sent (sessions.requestsize: tools, head, summary,
turns) passes `memory.compact_token_ratio` of the chat model's window, or would not fit it: then the
tools, the head and the newest records kept take half that limit, so one long turn is compacted too,
cut before one of its steps (an assistant message), never between a tool call and its result.

Never called on the reply's hot path. Two drivers, one rule of when a compaction is due
(`plan_compaction`): `AutoCompactor` for compaction nobody asked for (the agent between turns, in a
background thread; the sidecar between passes), and `compact_now` for compaction a person asked for
(/compact, `session compact`, the sessions screen, archive). Replies only read the newest compact
record. A per-session claim (flock) plus a re-read of the log under the append lock before writing
means two workers never compact the same range twice, and a kill -9 at any moment leaves the log as
it was or with one complete record more.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .. import llm
from ..llm import LLMCancelled, LLMError, ModelSpec
from ..providers import spec_for
from .modelview import assemble, covered_count, memory_of, seen, uncompact_held, update_text
from .log import CLAIM_WAIT_S, Claim, LogView, Session, SessionError, TokenCounter, tool_call_arguments
from .records import Assistant, Compact, Covers, Epoch, Record, System, Tool, Uncompact
from .frontier import frontier_budget
from .requestsize import budget, limit, request_size
from .plan import current as current_plan, render as render_plan
from .turns import count as count_turns, cut_fitting, cut_keeping, number as turns_of, starts_step, starts_turn

if TYPE_CHECKING:
    from ..config import Config
    from ..memory.episodic import Episodic

SECTIONS = (
    ("task", "Task & instructions"),
    ("decisions", "Decisions & conventions"),
    ("files", "Files touched"),
    ("todos", "Open to-dos"),
    ("errors", "Errors seen"),
)
# heading words that identify a section in the model's answer
_SECTION_WORDS = (("task", ("task", "instruction", "goal")), ("decisions", ("decision", "convention")),
                  ("files", ("file",)), ("todos", ("to-do", "todo", "to do", "open")),
                  ("errors", ("error", "failure")))
_KEYS = frozenset(key for key, _ in SECTIONS)
_PATH_ARGS = ("path", "file_path", "file", "filename", "paths", "src", "dst", "target")
_CAPS = {"user": 4000, "system": 2000, "assistant": 3000, "tool": 1200}  # chars per turn in the prompt
MAX_LISTED_FILES = 60
SUMMARY_SHARE = 0.1  # of the chat model's window, the most a summary takes (fit_sections)
CUT_NOTE = "\n… (cut to keep the summary small; recall(turn=N) gives any turn back)"
MAX_LISTED_ERRORS = 20
RETRY_MIN_S = 30.0  # after every model failed, leave that session alone this long (doubling) before trying again
RETRY_MAX_S = 600.0

PROMPT = """You compact the older part of a coding-agent session into a summary that replaces those \
turns in the agent's context. The raw turns stay on disk, but your summary is all the agent will see of them.

Write markdown with exactly these five sections, in this order, and nothing before or after:
## Task & instructions
The user's goals and every instruction or constraint still in force (quote the user where wording matters).
## Decisions & conventions
Choices made and why; naming, style, tooling and workflow conventions agreed on.
## Files touched
One bullet per file path read, created or changed, saying what was done to it.
## Open to-dos
What remains to be done, as bullets, most urgent first.
## Errors seen
Errors, failed commands and failing tests with their exact message, and whether each was resolved.

If a previous summary is given, fold it in: your answer replaces it, so carry over everything in it that \
still matters, merged with the new turns. Never quote or nest the previous summary. Be dense; keep exact \
paths, names, commands and numbers. Write (none) under an empty section."""


class SummaryFormatError(Exception):
    """A model answered without the summary sections."""


@dataclass
class CompactPlan:
    turns: list[Record]  # the records to fold in (not yet covered): whole turns, or up to a step boundary
    first_turn: int  # the turn (sessions.turns) turns[0] belongs to
    last_turn: int  # the turn the last record folded in belongs to: the summary reaches that far
    previous: Compact | None  # the compact record being folded in
    reason: str  # threshold | tokens | manual
    todo: list[dict] | None = None  # the agent's plan in force at the cut (sessions.plan); None: none written
    focus: str = ""  # what the user asked the summary to focus on (/compact FOCUS)
    partial: bool = False  # the cut falls inside last_turn (the token guard): its newest steps stay verbatim
    numbers: list[int] = field(default_factory=list)  # the turn of each record in `turns`
    summary_budget: int = 0  # tokens the summary may take (SUMMARY_SHARE of the window; 0: no bound)


@dataclass
class CompactResult:
    status: str  # compacted | failed | busy (another process is compacting) | nothing (compact_now: none due)
    slug: str
    reason: str = ""  # why it failed, is busy or had nothing to do, or why it ran (threshold | tokens | manual)
    record: Record | None = None
    first_turn: int = 0  # range newly folded in, in turns (sessions.turns)
    last_turn: int = 0
    model: str = ""
    duration_s: float = 0.0
    errors: list[str] = field(default_factory=list)
    partial: bool = False  # last_turn was folded in only in part (its newest steps stay verbatim)

    @property
    def ok(self) -> bool:
        return self.status == "compacted"

    def span(self) -> str:
        """`turns 3–7`, `turn 4`, or with a cut inside the last one `turns 3–7 (7 up to its newest steps)`."""
        first, last = self.first_turn, self.last_turn
        text = f"turn {last}" if first == last else f"turns {first}–{last}"
        return text + (f" ({last} up to its newest steps)" if self.partial else "")

    def describe(self) -> str:
        if self.ok:
            return f"compacted {self.span()} of {self.slug} with {self.model} in {self.duration_s:.1f}s"
        if self.status == "nothing":
            return f"nothing to compact in {self.slug}: {self.reason}"
        if self.status == "busy":
            return self.reason
        return f"compaction of {self.slug} skipped: {self.reason}"


# --------------------------------------------------------------------------- planning
def context_window_of(config: Config) -> int | None:
    """The chat model's window in tokens (None when no model is configured: no token guard)."""
    model = config.model
    if model.context_window:
        return model.context_window
    if not model.name:
        return None
    return llm.context_window(model.name)


def plan_compaction(view: LogView, config: Config, *, force: bool = False, keep: int | None = None,
                    window_tokens: int | None = None, counter: TokenCounter | None = None) -> CompactPlan | None:
    """What a compaction would cover now, or None when nothing is due. Turns as sessions.turns defines
    them: due once the live part (not yet summarized) holds compact_threshold turns; everything older
    than the newest keep_recent turns is folded in, cut at a user message. The token guard keeps the
    newest records that fit in half its budget, cut inside a long turn only when it must, and then
    before one of the agent's steps (turns.cut_fitting)."""
    memory = memory_of(config)
    numbered = turns_of(view.records)  # numbers count every user message, also those a rewind took back
    whole = view
    view = seen(view)  # turns a rewind took back are neither summarized nor counted
    records = view.turns
    previous = view.last_compact()
    start = covered_count(records, previous)
    live = records[start:]
    keep_n = memory.keep_recent if keep is None else max(0, keep)
    cut = cut_keeping(live, keep_n)
    if force:
        reason = "manual"
    elif uncompact_held(view) is not None and not (
            window_tokens and request_size(whole, config, counter=counter).total > budget(window_tokens)):
        return None  # the user undid the last compaction: automatic compaction waits until it must
    elif count_turns(live) >= memory.compact_threshold:
        reason = "threshold"
    elif window_tokens and (size := request_size(whole, config, counter=counter)).total > (
            most := limit(config, window_tokens)):
        # the next request as sent (sessions.requestsize) is over the limit: after the compaction, what every
        # request carries (tools, head) and the turns kept verbatim take half of it
        reason = "tokens"
        # the head after it carries the frontier too (sessions.frontier: the user's words, the files...), which
        # the head before it did not: room is kept for twice its budget of user messages
        room = frontier_budget(budget(window_tokens)) * 2
        cut = max(cut, cut_fitting(live, max(0.0, most / 2 - size.tools - size.head - room)))
    else:
        return None
    folded = live[:cut]
    if not folded or not any(numbered.of(r) for r in folded):
        return None  # nothing, or only what came before the first user message
    last = numbered.of(folded[-1])
    partial = cut < len(live) and not starts_turn(live[cut])
    return CompactPlan(folded, max(1, numbered.of(folded[0])), last, previous if start else None, reason,
                       todo=_plan_at(view, folded[-1].id), partial=partial,
                       numbers=[numbered.of(r) for r in folded])


def _plan_at(view: LogView, last_id: str) -> list[dict] | None:
    """The agent's plan in force after record `last_id` (sessions.plan)."""
    upto = next((i for i, r in enumerate(view.records) if r.id == last_id), len(view.records) - 1)
    return current_plan(view.records[: upto + 1])




def needs_compaction(session: Session, config: Config, *, window_tokens: int | None = None) -> bool:
    """Cheap check for workers: is a compaction due (turn threshold or token guard)?"""
    if window_tokens is None:
        window_tokens = context_window_of(config)
    return plan_compaction(session.read(), config, window_tokens=window_tokens,
                           counter=session.counter) is not None


# --------------------------------------------------------------------------- rendering the prompt
def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit:,} more chars]"


def render_turn(number: int, record: Record) -> str:
    kind = record.kind
    text = _clip(str(getattr(record, "content", "") or ""), _CAPS.get(kind, 2000))
    if isinstance(record, Assistant):
        calls = "".join(f"\n  -> {c.name}({_clip(c.arguments, 400)})" for c in record.tool_calls or ())
        return f"[turn {number}] assistant: {text}{calls}"
    if isinstance(record, Tool):
        status = "" if record.ok else " FAILED"
        return f"[turn {number}] tool {record.name}{status}: {text}"
    return f"[turn {number}] {kind}: {text}"


def _chunks(lines: list[tuple[int, str]], budget: int, counter: TokenCounter) -> list[list[tuple[int, str]]]:
    chunks: list[list[tuple[int, str]]] = [[]]
    used = 0
    for number, line in lines:
        size = counter(line)
        if chunks[-1] and used + size > budget:
            chunks.append([])
            used = 0
        chunks[-1].append((number, line))
        used += size
    return chunks


def build_messages(previous_summary: str | None, covered_before: int, chunk: list[tuple[int, str]], *,
                   todo: list[dict] | None = None, focus: str = "") -> list[dict]:
    parts = []
    if focus:
        parts.append(f"The user asks this summary to focus on: {focus}\nKeep everything about that in full "
                     "detail (exact names, paths, errors, decisions); shorten the rest.")
    if todo:
        parts.append("The agent's plan, as it last wrote it with its todo tool. \"Open to-dos\" must list every "
                     f"item of it with its status, in this order:\n{_plan_lines(todo)}")
    if previous_summary:
        parts.append(f"Previous summary (turns 1–{covered_before}):\n{previous_summary}")
    parts.append(f"Turns {chunk[0][0]}–{chunk[-1][0]} to fold in:\n" + "\n".join(line for _, line in chunk))
    return [{"role": "system", "content": PROMPT}, {"role": "user", "content": "\n\n".join(parts)}]


# --------------------------------------------------------------------------- the summary
def parse_sections(text: str) -> dict[str, str]:
    """The five sections of a model's answer, then every other section it wrote under a heading of its own
    (what a /compact FOCUS asked for, say), keyed by that heading, and what it wrote before its first heading
    (`Notes`): nothing the model wrote is dropped. A heading that names a section already given starts a
    section of its own too. SummaryFormatError if the answer has none of the five."""
    sections: dict[str, list[str]] = {}
    current: str | None = None
    preamble: list[str] = []
    for line in text.splitlines():
        heading = re.match(r"^\s*#{1,6}\s*(.+?)\s*#*\s*$", line) or re.match(r"^\s*\*\*(.+?)\*\*:?\s*$", line)
        if heading:
            title = heading.group(1).strip()
            key = _section_of(title)
            if key is None or key in sections:
                key = title if title not in _KEYS else f"{title} (2)"
            current = key
            sections.setdefault(key, [])
        elif current is not None:
            sections[current].append(line)
        else:
            preamble.append(line)
    if not any(key in sections for key in _KEYS):
        raise SummaryFormatError("the answer has none of the summary sections")
    out = {key: "\n".join(sections.get(key, [])).strip() or "(none)" for key, _ in SECTIONS}
    if "\n".join(preamble).strip():
        sections.setdefault("Notes", []).extend(preamble)
    out.update((key, "\n".join(lines).strip()) for key, lines in sections.items()
               if key not in _KEYS and "\n".join(lines).strip())
    return out


def _section_of(heading: str) -> str | None:
    low = heading.lower()
    for key, words in _SECTION_WORDS:
        if any(word in low for word in words):
            return key
    return None


def _plan_lines(todo: list[dict]) -> str:
    return "\n".join(f"- {line}" for line in render_plan(todo).splitlines())


def with_plan(section: str, todo: list[dict] | None) -> str:
    """The "Open to-dos" section holding the plan exactly (its items and statuses), then whatever else the
    model listed there that is not one of its items."""
    if not todo:
        return section
    texts = [t["text"].lower() for t in todo]
    others = [line for line in section.splitlines()
              if line.strip() and line.strip() != "(none)" and not any(t in line.lower() for t in texts)
              and not line.strip().lower().startswith("plan (")]
    return "\n".join(["Plan (todo, as last written):", _plan_lines(todo), *others])


def render_summary(sections: dict[str, str]) -> str:
    """The five sections in order, then the model's own (parse_sections), each under its heading."""
    parts = [f"## {title}\n{sections.get(key) or '(none)'}" for key, title in SECTIONS]
    parts += [f"## {key}\n{text}" for key, text in sections.items() if key not in _KEYS]
    return "\n\n".join(parts)


def touched_paths(turns: list[Record]) -> list[str]:
    """File paths named in tool-call arguments, in first-seen order."""
    seen: dict[str, None] = {}
    for record in turns:
        for call in record.tool_calls or () if isinstance(record, Assistant) else ():
            args = tool_call_arguments(call)
            for name in _PATH_ARGS:
                value = args.get(name)
                for item in value if isinstance(value, list) else [value]:
                    if isinstance(item, str) and item.strip() and len(item) < 300:
                        seen.setdefault(item.strip(), None)
    return list(seen)


def errors_seen(turns: list[Record]) -> list[str]:
    found = []
    for record in turns:
        if isinstance(record, Tool) and not record.ok:
            first = next((line.strip() for line in record.content.splitlines() if line.strip()), "")
            found.append(f"{record.name}: {_clip(first, 160)}")
    return found[-MAX_LISTED_ERRORS:]


def _ensure_listed(section: str, items: list[str], note: str, limit: int) -> str:
    """Add the deterministic facts (paths, errors) the model's text left out."""
    missing = [item for item in items if item[:60] not in section][:limit]
    if not missing:
        return section
    body = "" if section == "(none)" else section + "\n"
    return body + "\n".join(f"- {item} ({note})" for item in missing)


# --------------------------------------------------------------------------- compacting
def compact_models(config: Config) -> list[str]:
    """memory.compact_model (the chat model when unset), then memory.compact_fallback_model."""
    memory = memory_of(config)
    chat = config.model.name
    return [m for m in dict.fromkeys((memory.compact_model or chat, memory.compact_fallback_model)) if m]


def _spec(config: Config, model: str) -> ModelSpec:
    """The compaction model's spec: the chat model's endpoint and key only if it is the same provider."""
    spec = spec_for(config.model, model, fallbacks=False, cache_ttl=config.agent.cache_ttl)
    if spec is None:  # compact_models lists only named models; a conversation always names its model
        raise LLMError("no model to compact with: set model.name or memory.compact_model")
    return spec


@dataclass
class Conversation:
    """What the chat model was last sent (or would be sent now: the same bytes, grown at the end), so a
    compaction by that model reads it from the provider's prompt cache instead of a transcript sent cold."""

    model: str
    messages: list[dict]
    tools: list[dict] | None
    cache_key: str | None = None
    cut_short: bool = False  # its newest messages were left out to fit the window (see `shows`)


def kept_from(view: LogView, plan: CompactPlan) -> Record | None:
    """The first record the compaction keeps verbatim (None: it folds in everything)."""
    turns = seen(view).turns
    ids = [t.id for t in turns]
    last = plan.turns[-1].id
    at = ids.index(last) + 1 if last in ids else len(turns)
    return turns[at] if at < len(turns) else None


def _start_of(record: Record) -> str:
    """The first words of a record as the conversation shows it, to name it in the instruction."""
    if isinstance(record, System) and record.update is not None:
        text = update_text(record)
    else:
        text = str(getattr(record, "content", "") or "")
    return " ".join(text.split())[:160]


def shows(conversation: Conversation, record: Record) -> bool:
    """Whether the conversation still shows `record` (an agent may send it cut short at its end, so that its
    prefix stays what the provider cached): a compaction over it must see where its summary stops. A message
    that calls tools is found by its first call's id (its text may be empty)."""
    call_ids = [c.id for c in record.tool_calls or () if c.id] if isinstance(record, Assistant) else []
    if call_ids:
        return any(call.get("id") == call_ids[0] for m in conversation.messages for call in m.get("tool_calls") or ())
    start = _start_of(record)
    return not start or any(start in " ".join(str(m.get("content") or "").split()) for m in conversation.messages)


def shown_part(conversation: Conversation, plan: CompactPlan, view: LogView) -> CompactPlan | None:
    """`plan` folding in only what a conversation cut short still shows: up to the newest cut boundary (a
    turn's or a step's start) the conversation shows, which the summary then stops at. None when it shows
    no such boundary past a turn worth folding."""
    for at in range(len(plan.turns) - 1, 0, -1):
        record = plan.turns[at]
        numbers = (plan.numbers or [plan.first_turn] * len(plan.turns))[:at]
        if not starts_step(record) or not any(numbers) or not shows(conversation, record):
            continue
        return replace(plan, turns=plan.turns[:at], numbers=numbers, last_turn=numbers[-1],
                       partial=not starts_turn(record), todo=_plan_at(seen(view), plan.turns[at - 1].id))
    return None


def cached_messages(conversation: Conversation, plan: CompactPlan, keep_first: Record | None) -> list[dict]:
    """The conversation, then one user message asking for the summary of all of it but its newest part."""
    parts = [PROMPT]
    if keep_first is not None:
        is_update = isinstance(keep_first, System) and keep_first.update is not None
        role = ("your message" if isinstance(keep_first, Assistant) else
                "the user message" if is_update else f"the {keep_first.kind} message")
        start = _start_of(keep_first)
        calls = (keep_first.tool_calls or []) if isinstance(keep_first, Assistant) else []
        named = f"that begins: «{start}»" if start or not calls else \
            f"that calls {calls[0].name} (call id {calls[0].id})"
        parts.append(f"Summarize the conversation above up to, not including, {role} {named}; "
                     "that message and everything after it stay verbatim, so leave them out. The previous "
                     "summary above (if any) is yours to fold in.")
    else:
        parts.append("Summarize the whole conversation above; fold in the previous summary above, if any.")
    if plan.focus:
        parts.append(f"The user asks this summary to focus on: {plan.focus}\nKeep everything about that in full "
                     "detail (exact names, paths, errors, decisions); shorten the rest.")
    if plan.todo:
        parts.append("The agent's plan, as it last wrote it with its todo tool. \"Open to-dos\" must list every "
                     f"item of it with its status, in this order:\n{_plan_lines(plan.todo)}")
    parts.append("Answer with the summary only, without calling any tool.")
    return [*conversation.messages, {"role": "user", "content": "\n\n".join(parts)}]


def _cached_summary(plan: CompactPlan, config: Config, conversation: Conversation, keep_first: Record | None,
                    cancel: threading.Event | None) -> tuple[dict, dict]:
    spec = _spec(config, conversation.model)
    answer = llm.complete(spec, cached_messages(conversation, plan, keep_first), tools=conversation.tools,
                          cancel=cancel, cache_key=conversation.cache_key)
    if answer.tool_calls and not answer.text.strip():
        raise SummaryFormatError("the model called a tool instead of writing the summary")
    usage = {"tokens_in": answer.tokens_in, "tokens_out": answer.tokens_out, "cost_usd": answer.cost_usd,
             "calls": 1, "cache_read_tokens": answer.cache_read_tokens,
             "cache_creation_tokens": answer.cache_creation_tokens,
             "cache_creation_1h_tokens": answer.cache_creation_1h_tokens, "cached_history": True}
    return parse_sections(answer.text), usage


def cheaper_with_cache(conversation: Conversation, model: str, transcript_tokens: int,
                       history_tokens: int) -> bool:
    """Whether summarizing with the chat model over its cached history costs less than sending `model`
    a transcript of `transcript_tokens` cold: computed from the price map (cache reads at the chat
    model's cache-read price); unknown prices keep the configured compaction model."""
    from ..pricing import rates  # lazy: the price map, only when two compaction models compete

    chat, cheap = rates(conversation.model, history_tokens), rates(model, transcript_tokens)
    if chat is None or cheap is None:
        return False
    return history_tokens * chat.cache_read < transcript_tokens * cheap.input


def summarize(plan: CompactPlan, config: Config, model: str, counter: TokenCounter,
              cancel: threading.Event | None = None) -> tuple[dict, dict]:
    """Fold plan.turns (in prompt-sized chunks) into the previous summary with one model.

    Returns (sections, usage); raises LLMError or SummaryFormatError.
    """
    spec = _spec(config, model)
    running = plan.previous.summary if plan.previous else None
    # the previous summary reached into plan.first_turn when its first record is not the turn's user message
    covered_before = plan.first_turn - (1 if plan.turns and starts_turn(plan.turns[0]) else 0)
    numbers = plan.numbers or [plan.first_turn] * len(plan.turns)
    lines = [(n, render_turn(n, r)) for n, r in zip(numbers, plan.turns)]
    budget = max(2000, int(llm.context_window(model) * 0.5) - counter(running or "") - counter(PROMPT))
    usage: dict[str, Any] = {"tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0, "calls": 0}
    sections: dict[str, str] = {}
    for chunk in _chunks(lines, budget, counter):
        answer = llm.complete(spec, build_messages(running, covered_before, chunk, todo=plan.todo, focus=plan.focus),
                              cancel=cancel)
        sections = parse_sections(answer.text)
        running = render_summary(sections)
        covered_before = chunk[-1][0]
        usage["tokens_in"] += answer.tokens_in
        usage["tokens_out"] += answer.tokens_out
        usage["cost_usd"] = None if answer.cost_usd is None or usage["cost_usd"] is None \
            else usage["cost_usd"] + answer.cost_usd
        usage["calls"] += 1
    return sections, usage


def compact(session: Session, config: Config, episodic: Episodic | None = None, force: bool = False, *,
            keep: int | None = None, window_tokens: int | None = None, wait: float = 0.0,
            cancel: threading.Event | None = None, focus: str = "",
            conversation: Callable[[], Conversation | None] | None = None) -> CompactResult | None:
    """Compact now if due (or forced). None when nothing is due, or when `cancel` was set meanwhile
    (the model call stops; nothing is written).

    When another process holds the session's claim (after `wait` seconds), a
    forced compaction returns status `busy`, so whoever asked for it hears why
    nothing happened; an unforced one returns None: the holder does the work.
    Model failures never raise: the result says `failed`, the raw turns stay as
    they were, and the episodic recorder (duck-typed `.record(...)`) gets why. `focus`: what the
    user asked the summary to keep in detail (/compact FOCUS). `conversation`: what the chat model was
    last sent, grown to now (an agent's; see Conversation), asked for once a compaction is due.
    """
    if window_tokens is None and not force:
        window_tokens = context_window_of(config)
    with Claim(session.paths, session.slug, wait=wait) as claimed:
        if not claimed:
            if not force:
                return None
            return CompactResult("busy", session.slug, f"session {session.slug} is being compacted by another "
                                 "process; try again when it finishes")
        plan = plan_compaction(session.read(), config, force=force, keep=keep,
                               window_tokens=window_tokens, counter=session.counter)
        if plan is None:
            return None
        plan.focus = " ".join(focus.split())[:500]
        window = window_tokens or context_window_of(config) or 0
        plan.summary_budget = int(SUMMARY_SHARE * window)
        return _run(session, config, plan, episodic, cancel, conversation() if conversation else None)


def compact_now(session: Session, config: Config, episodic: Episodic | None = None, *, keep: int | None = None,
                focus: str = "", wait: float = CLAIM_WAIT_S,
                conversation: Callable[[], Conversation | None] | None = None) -> CompactResult:
    """Compact because a person asked: whatever the threshold, keeping the newest `keep` turns
    (memory.keep_recent when None), waiting up to `wait` seconds for another process's claim.
    Always a result to show: `nothing` when every older turn is summarized already."""
    result = compact(session, config, episodic, force=True, keep=keep, wait=wait, focus=focus,
                     conversation=conversation)
    if result is None:
        kept = memory_of(config).keep_recent if keep is None else keep
        return CompactResult("nothing", session.slug, f"every turn but the newest {kept} is summarized already")
    return result


class AutoCompactor:
    """Compaction nobody asked for: compact a session when it is due; after a failure (every model
    failed, which the episodic log records), leave that session alone for RETRY_MIN_S, doubling up to
    RETRY_MAX_S, so a model that is down is not asked again on every turn or pass. The agent and the
    sidecar each hold one; failures are theirs to log, never to announce on every turn."""

    def __init__(self, episodic: Episodic | None = None, *, clock: Callable[[], float] = time.monotonic):
        self.episodic = episodic
        self._clock = clock
        self._retry_at: dict[str, tuple[float, float]] = {}  # slug -> (not before, current delay)

    def waiting(self, slug: str) -> float:
        """Seconds until `slug` may be tried again (0 when it may now)."""
        return max(0.0, self._retry_at.get(slug, (0.0, 0.0))[0] - self._clock())

    def due(self, session: Session, config: Config, window_tokens: int | None = None) -> bool:
        """Cheap check before starting a worker: not backing off, and a compaction is due."""
        return not self.waiting(session.slug) and needs_compaction(session, config, window_tokens=window_tokens)

    def run(self, session: Session, config: Config, window_tokens: int | None = None,
            cancel: threading.Event | None = None,
            conversation: Callable[[], Conversation | None] | None = None) -> CompactResult | None:
        """Compact if due and not backing off; None when nothing happened."""
        slug = session.slug
        if self.waiting(slug):
            return None
        result = compact(session, config, self.episodic, window_tokens=window_tokens, cancel=cancel,
                         conversation=conversation)
        if result is None:
            return None
        if result.ok:
            self._retry_at.pop(slug, None)
        else:
            delay = min(RETRY_MAX_S, max(RETRY_MIN_S, self._retry_at.get(slug, (0.0, 0.0))[1] * 2))
            self._retry_at[slug] = (self._clock() + delay, delay)
        return result


def _context_tokens(session: Session, config: Config) -> int:
    return assemble(session.read(), config, counter=session.counter).tokens


def _run(session: Session, config: Config, plan: CompactPlan, episodic: Episodic | None,
         cancel: threading.Event | None = None, conversation: Conversation | None = None) -> CompactResult | None:
    started = time.monotonic()
    before = _context_tokens(session, config) if episodic is not None else 0
    keep_first = None
    if conversation is not None:
        view = session.read()
        keep_first = kept_from(view, plan)
        if conversation.cut_short and keep_first is not None and not shows(conversation, keep_first):
            # cut short past where the summary stops: fold in only what it shows (its prefix is the epoch's
            # requests, in the provider's cache), else a transcript of what the plan folds in, sent cold
            shorter = shown_part(conversation, plan, view)
            if shorter is None:
                conversation = None
            else:
                plan, keep_first = shorter, kept_from(view, shorter)
    models = compact_models(config)
    if conversation is not None and conversation.model not in models[:1]:
        # a separate compaction model: whichever costs less, its transcript cold or the chat model's cache
        history = sum(session.counter(str(m.get("content") or "")) for m in conversation.messages)
        transcript = sum(session.counter(render_turn(0, t)) for t in plan.turns)
        if models and cheaper_with_cache(conversation, models[0], transcript, history):
            models = [conversation.model, *models]
    errors: list[str] = []
    if not models:
        errors.append("no model to compact with: set model.name or memory.compact_model")
    for model in models:
        try:
            if conversation is not None and model == conversation.model:
                sections, usage = _cached_summary(plan, config, conversation, keep_first, cancel)
            else:
                sections, usage = summarize(plan, config, model, session.counter, cancel)
        except LLMCancelled:
            return None  # the process is closing: the turns stay as they were, for the next run
        except (LLMError, SummaryFormatError) as err:
            errors.append(f"{model}: {err}")
            continue
        record = _append_compact(session, plan, model, sections, usage, time.monotonic() - started)
        if record is None:  # another worker's compact landed first (only without the claim): theirs stands
            return None
        result = CompactResult("compacted", session.slug, plan.reason, record, plan.first_turn,
                               plan.last_turn, model, time.monotonic() - started, errors, plan.partial)
        if episodic is not None:
            _record_event(episodic, result, usage, before, _context_tokens(session, config))
        return result
    result = CompactResult("failed", session.slug, "; ".join(errors), None, plan.first_turn, plan.last_turn,
                           "", time.monotonic() - started, errors, plan.partial)
    if episodic is not None:
        _record_event(episodic, result, None, before, before)
    return result


def fit_sections(sections: dict[str, str], budget: int, counter: TokenCounter) -> dict[str, str]:
    """The summary's sections within `budget` tokens (0: as they are): a summary that grows at every
    compaction would make every request after it dearer, so the longest section is cut (at a line) until the
    whole fits. What is cut is not lost: the log keeps every turn (recall), and the head's frontier keeps the
    user's words, the plan, the files and the last failure whatever the summary says."""
    if not budget:
        return sections
    out = dict(sections)
    for _ in range(64):
        if counter(render_summary(out)) <= budget:
            return out
        key = max(out, key=lambda k: len(out[k]))
        lines = out[key].removesuffix(CUT_NOTE).rstrip().splitlines()
        if len(lines) <= 1:
            text = out[key]
            out[key] = text[: max(40, len(text) * 2 // 3)].rstrip() + CUT_NOTE
            continue
        out[key] = "\n".join(lines[: max(1, len(lines) * 2 // 3)]) + CUT_NOTE
    return out


def _append_compact(session: Session, plan: CompactPlan, model: str, sections: dict, usage: dict,
                    elapsed: float) -> Record | None:
    previous = plan.previous
    files = list(dict.fromkeys(((previous.files if previous else None) or []) + touched_paths(plan.turns)))
    sections = dict(sections)
    sections["files"] = _ensure_listed(sections["files"], files, "from tool calls", MAX_LISTED_FILES)
    sections["errors"] = _ensure_listed(sections["errors"], errors_seen(plan.turns), "from tool results",
                                        MAX_LISTED_ERRORS)
    sections["todos"] = with_plan(sections["todos"], plan.todo)
    sections = fit_sections(sections, plan.summary_budget, session.counter)
    summary = render_summary(sections)
    first, last = plan.turns[0], plan.turns[-1]
    first_id = previous.covers.first_id if previous and previous.covers else None
    covers = Covers(first_id=first.id if first_id is None else first_id, last_id=last.id, first_turn=1,
                    last_turn=plan.last_turn, new_first_turn=plan.first_turn, new_first_id=first.id)
    expected_previous = previous.id if previous else None

    def still_uncovered(view: LogView) -> bool:
        view = seen(view)  # and no rewind took back a turn of the plan meanwhile
        newest = view.last_compact()
        live = {t.id for t in view.turns}
        return (newest.id if newest else None) == expected_previous and first.id in live and last.id in live

    return session.append_if(
        still_uncovered, "compact", replaced=replaced_by(plan), summary=summary, sections=sections, files=files,
        covers=covers, folds=expected_previous, model=model, reason=plan.reason, tokens_in=usage["tokens_in"],
        tokens_out=usage["tokens_out"], cost_usd=usage["cost_usd"], calls=usage["calls"],
        duration_ms=int(elapsed * 1000), focus=plan.focus or None,
        cache_read_tokens=usage.get("cache_read_tokens") or None,
        cache_creation_tokens=usage.get("cache_creation_tokens") or None,
        cache_creation_1h_tokens=usage.get("cache_creation_1h_tokens") or None,
        cached_history=usage.get("cached_history"))


READING_TOOLS = ("read_lines", "file_meta", "read_file", "Read", "view", "open")
MAX_LISTED_OUTPUTS = 20


def replaced_by(plan: CompactPlan) -> dict:
    """What this compaction's summary replaces in the model's context (the compact record's `replaced`): the
    turns it newly folds in, the tool calls made in them by name, the files read and the largest outputs.
    `recall` with a turn number (or an output's record id) returns any of it whole from the log."""
    calls: dict[str, int] = {}
    read: dict[str, None] = {}
    outputs: list[dict[str, Any]] = []
    by_call = {}
    for number, record in zip(plan.numbers or [plan.first_turn] * len(plan.turns), plan.turns):
        for call in record.tool_calls or () if isinstance(record, Assistant) else ():
            calls[call.name] = calls.get(call.name, 0) + 1
            by_call[call.id] = call
            if call.name in READING_TOOLS:
                args = tool_call_arguments(call)
                path = next((args[k] for k in ("path", "file_path") if isinstance(args.get(k), str)), None)
                if path:
                    read.setdefault(path, None)
        if isinstance(record, Tool):
            outputs.append({"id": record.id, "turn": number, "name": record.name or "tool",
                            "chars": len(record.content)})
    largest = sorted(outputs, key=lambda o: -o["chars"])[:MAX_LISTED_OUTPUTS]
    return {"turns": [plan.first_turn, plan.last_turn], "partial": plan.partial, "records": len(plan.turns),
            "tool_calls": dict(sorted(calls.items(), key=lambda kv: (-kv[1], kv[0]))),
            "files_read": list(read)[:MAX_LISTED_FILES], "outputs": len(outputs),
            "output_chars": sum(o["chars"] for o in outputs), "largest": largest}


def describe_replaced(replaced: dict) -> str:
    """One line of a compact record's `replaced`: `turns 3–12: 41 tool calls (read_lines ×20, grep ×9, …),
    12 files read, 38 outputs of 210,400 chars (largest: read_lines 40,210 chars, turn 7)`."""
    turns = replaced.get("turns") or [0, 0]
    span = f"turn {turns[0]}" if turns[0] == turns[-1] else f"turns {turns[0]}–{turns[-1]}"
    calls = replaced.get("tool_calls") or {}
    named = ", ".join(f"{name} ×{n}" for name, n in list(calls.items())[:5]) + (", …" if len(calls) > 5 else "")
    text = f"{span}: {sum(calls.values())} tool calls" + (f" ({named})" if named else "")
    text += f", {len(replaced.get('files_read') or ())} files read"
    text += f", {replaced.get('outputs', 0)} outputs of {replaced.get('output_chars', 0):,} chars"
    largest = replaced.get("largest") or []
    if largest:
        top = largest[0]
        text += f" (largest: {top.get('name')} {top.get('chars', 0):,} chars, turn {top.get('turn')})"
    return text


def compaction_marks(records: list[Record]) -> dict[str, dict]:
    """compact record id -> how the timeline marks it: `span` (the turns it newly folded in), `replaced`
    (describe_replaced), `undone` (what undid it: an uncompact record) when one did."""
    undone = {r.compact: r for r in records if isinstance(r, Uncompact)}
    marks = {}
    for record in records:
        if not isinstance(record, Compact):
            continue
        replaced = record.replaced or {}
        covers = record.covers or Covers()
        turns = replaced.get("turns") or [covers.new_first_turn or 1, covers.last_turn or 0]
        marks[record.id] = {
            "span": f"turn {turns[0]}" if turns[0] == turns[-1] else f"turns {turns[0]}–{turns[-1]}",
            "replaced": describe_replaced(replaced) if replaced else "(logged before compactions listed it)",
            "undone": "undone by /uncompact" if record.id in undone else ""}
    return marks


def uncompact(session: Session) -> Uncompact:
    """Undo the compaction in force (`/uncompact`, `session uncompact`): an `uncompact` record naming it puts
    the epoch before it back (sessions.modelview.seen), and holds compaction nobody asked for until the request
    would no longer fit the window. Raises SessionError when no compaction is in force."""
    problem: list[str] = []

    def make(view: LogView) -> list[Record]:
        model_view = seen(view)
        compact = model_view.last_compact()
        if compact is None:
            problem.append(f"nothing to uncompact: no compaction of {session.slug} is in force")
            return []
        covers = compact.covers or Covers()
        epochs = [r.id for r in model_view.records if isinstance(r, Epoch) and r.summary == compact.id]
        turns = [int(covers.new_first_turn or covers.first_turn or 1), int(covers.last_turn or 0)]
        return [session._make(Uncompact(
            compact=compact.id, epochs=epochs, turns=turns, tokens=0,
            held="automatic compaction waits until the request would no longer fit the window"), {})]

    written = session.append_from(make)[1]
    if not written or not isinstance(written[0], Uncompact):
        raise SessionError(problem[0] if problem else f"nothing to uncompact in {session.slug}")
    return written[0]


def _record_event(episodic: Episodic, result: CompactResult, usage: dict | None, before: int, after: int) -> None:
    data: dict[str, Any] = {"first_turn": result.first_turn, "last_turn": result.last_turn, "reason": result.reason,
            "context_tokens_before": before, "context_tokens_after": after}
    if result.ok:
        assert usage is not None and result.record is not None  # a compaction that landed: _run passes both
        episodic.record("compaction", result.slug, duration_ms=int(result.duration_s * 1000),
                        tokens_in=usage["tokens_in"], tokens_out=usage["tokens_out"], cost_usd=usage["cost_usd"],
                        ok=True, model=result.model, record_id=result.record.id,
                        cache_read_tokens=usage.get("cache_read_tokens") or None,
                        cache_creation_tokens=usage.get("cache_creation_tokens") or None,
                        cache_creation_1h_tokens=usage.get("cache_creation_1h_tokens") or None, **data)
    else:
        episodic.record("compaction", result.slug, duration_ms=int(result.duration_s * 1000), ok=False, **data)
