"""What a "turn" is, defined once: every command, screen and knob counts in this unit.

A turn is one user message and everything the agent did in answer to it: the assistant messages, the
tool calls and their results, notes and checkpoints, up to the next user message. Turn N is the N-th
`user` record of the log in file order, counting every one the log holds: a turn a rewind took back
keeps its number and the next message gets the next one, so a number, once given, names the same turn
for good (`/rewind N`, `/fork N`, the transcript, search hits, replay and compaction ranges agree).
A subagent's prompt (`sidechain`, imported) starts no turn: it belongs to the turn that ran the subagent.
Records before the first user message (an imported system prompt, a notice) are turn 0, the preamble:
they belong to no turn and no count includes them.

A turn can be *taken back* (`taken_back`): a rewind of the conversation takes its records out of what
the model sees, an undo (or a rewind of files only) restores the files its edits changed, and an
imported session's own rewind (`rewind_to`) leaves the turns it went past as an abandoned branch. The
log keeps every line; whatever shows a taken-back record says so, and what took it back.

Inside a turn, a *step* starts at each of the agent's assistant messages: the message and the results
of the tool calls it made. Compaction cuts at a turn boundary, and only its token guard cuts inside a
long turn, always at a step boundary, so a tool call is never separated from its result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from .modelview import covered_count, seen
from .log import conversation_turns
from .logview import LogView
from .records import TURN_CLASSES, Assistant, Compact, Record, Rewind, Tool, User


def starts_turn(record: Record) -> bool:
    """A user message that opens a turn (not a subagent's prompt)."""
    return isinstance(record, User) and not record.sidechain


def starts_step(record: Record) -> bool:
    """A record before which a compaction may cut inside a turn: a turn's start or the agent's own
    assistant message (a subagent's ones run while the agent's tool call waits for its result)."""
    return isinstance(record, (User, Assistant)) and not record.sidechain


@dataclass
class Turns:
    """The turns of a list of records: each record's turn number and where each turn starts."""

    numbers: dict[str, int] = field(default_factory=dict)  # record id -> its turn (0: the preamble)
    starts: list[str] = field(default_factory=list)  # ids of the user records: turn N is starts[N-1]

    @property
    def count(self) -> int:
        return len(self.starts)

    def of(self, record: Record) -> int:
        """The turn a record belongs to (0: before the first user message, or not among these records)."""
        return self.numbers.get(record.id, 0)

    def user_id(self, number: int) -> str | None:
        return self.starts[number - 1] if 1 <= number <= len(self.starts) else None


def number(records: Iterable[Record]) -> Turns:
    """Number the turns of `records` (a whole log in file order)."""
    turns = Turns()
    current = 0
    for record in records:
        if starts_turn(record):
            turns.starts.append(record.id)
            current = len(turns.starts)
        turns.numbers[record.id] = current
    return turns


def numbers_in_order(records: Iterable[Record], first: int = 0) -> list[int]:
    """The turn number of each record in order, continuing after `first` turns (a log read in pieces)."""
    out = []
    for record in records:
        first += starts_turn(record)
        out.append(first)
    return out


def hit_turn(record: Record, turn: int) -> int | None:
    """The turn a search hit shows for a record in turn `turn`: none for the preamble (0), nor for the
    records that are about the log rather than said in a turn (compact, redaction, checkpoint, ...)."""
    return turn if turn and isinstance(record, TURN_CLASSES) else None


def count(records: Iterable[Record]) -> int:
    """How many turns start among `records`."""
    return sum(1 for r in records if starts_turn(r))


def cut_keeping(records: list[Record], keep: int) -> int:
    """Where to cut `records` so that the newest `keep` turns stay after the cut (an index into them):
    at the user message that starts the keep-th newest turn; 0 when they hold no more than `keep` turns
    and start with one; len(records) for keep 0. Records before the first user message among them
    (the preamble, or the rest of a turn a previous cut went into) are older than any turn that starts
    here, so they are cut whenever one turn is."""
    if keep <= 0:
        return len(records)
    starts = [i for i, r in enumerate(records) if starts_turn(r)]
    return starts[-keep] if keep <= len(starts) else 0


def cut_fitting(records: list[Record], budget: float) -> int:
    """The token guard's cut: the newest records whose `tokens` fit in `budget` stay. The cut falls at the
    first user message at or after the newest record that does not fit; when none follows (the newest turn
    alone does not fit), at the first step boundary there (an assistant message); and when the newest step
    alone does not fit, before that step, which always stays whole."""
    used = 0.0
    fit = 0
    for index in range(len(records) - 1, -1, -1):
        used += int(records[index].tokens or 0)
        if used > budget:
            fit = index + 1
            break
    for test in (starts_turn, starts_step):
        at = next((i for i in range(fit, len(records)) if test(records[i])), None)
        if at is not None:
            return at
    return max((i for i, r in enumerate(records) if starts_step(r)), default=0)


@dataclass(frozen=True)
class Coverage:
    """How far the summary in force reaches, in turns."""

    last_turn: int  # turns 1..last_turn are summarized (the last maybe only in part)
    partial: bool  # the cut went inside last_turn: its newest steps stay verbatim

    def describe(self) -> str:
        if not self.last_turn:
            return ""
        if self.partial:
            return f"1–{self.last_turn - 1} and part of {self.last_turn}" if self.last_turn > 1 \
                else f"part of {self.last_turn}"
        return f"1–{self.last_turn}"


def coverage(turns: Turns, live: list[Record], compact: Compact | None, covered: int) -> Coverage:
    """The coverage of `compact`, which stands in for the first `covered` of `live` (the turn records of the
    log as the model sees it), numbered by `turns` (the whole log's)."""
    if compact is None or covered <= 0:
        return Coverage(0, False)
    last = live[covered - 1] if covered <= len(live) else None
    if last is None or last.id not in turns.numbers:  # its line is lost: the number it was written with
        return Coverage(min(int(compact.covers.last_turn or 0) if compact.covers else 0, turns.count), False)
    partial = covered < len(live) and not starts_turn(live[covered])
    return Coverage(turns.of(last), partial and turns.of(last) > 0)


def of_log(view: LogView) -> tuple[Turns, Coverage]:
    """A whole log's turns, and how far the summary the model is given reaches (turns a rewind took
    back keep their numbers; a summary that covered them no longer stands, as sessions.modelview.seen says)."""
    turns = number(view.records)
    model = seen(view)
    live = model.turns
    compact = model.last_compact()
    return turns, coverage(turns, live, compact, covered_count(live, compact))


# --------------------------------------------------------------------------- taken back
@dataclass(frozen=True)
class TakenBack:
    """What took a record back: a rewind of the conversation, an undo or rewind of the files its edits
    changed, or an imported session's own rewind (`branch`)."""

    how: str  # "rewind" | "undo" | "branch"
    turn: int  # the rewind went back to before this turn (0 for a branch)
    conversation: bool  # the model no longer sees the record; False: only its file changes were restored

    def describe(self) -> str:
        """`taken back by /rewind 3`, `undone by /undo`, `files restored by /rewind 3`."""
        if self.how == "branch":
            return "taken back in its source (an abandoned branch)"
        if self.conversation:
            return f"taken back by /rewind {self.turn}"
        return "undone by /undo" if self.how == "undo" else f"files restored by /rewind {self.turn}"

    def to_dict(self) -> dict:
        return {"how": self.how, "before_turn": self.turn, "conversation": self.conversation, "by": self.describe()}


def taken_back(records: list[Record]) -> dict[str, TakenBack]:
    """The records of a whole log (in file order) that a later rewind, undo or imported rewind took back,
    by id. A conversation rewind marks every turn record from its `to` up to itself that the model still
    saw; a restore of files marks the tool records in those turns whose edits it put back (an undo leaves
    the conversation standing: the model is told in an update). The first mark of a record stands, except
    that a conversation rewind outranks an earlier restore of its files."""
    marks: dict[str, TakenBack] = {}
    turns = number(records)
    position = {r.id: i for i, r in enumerate(records)}
    for i, record in enumerate(records):
        if not isinstance(record, Rewind):
            continue
        at = position.get(record.to)
        if at is None or at >= i:
            continue
        how = "undo" if record.how == "undo" else "rewind"
        mark_turn = int(record.turn or turns.of(records[at]))
        files = set(record.files or ())
        for r in records[at:i]:
            if not isinstance(r, TURN_CLASSES):
                continue
            old = marks.get(r.id)
            if record.conversation and (old is None or not old.conversation):
                marks[r.id] = TakenBack(how, mark_turn, True)
            elif old is None and files and isinstance(r, Tool) and r.ok and any(
                    isinstance(e, dict) and e.get("path") in files for e in r.edits or ()):
                marks[r.id] = TakenBack(how, mark_turn, False)
    main = [r for r in records if isinstance(r, TURN_CLASSES) and not r.sidechain]
    if any(isinstance(r, User) and r.rewind_to is not None for r in main):
        kept = {r.id for r in conversation_turns(main)}
        for r in main:
            if r.id not in kept and r.id not in marks:
                marks[r.id] = TakenBack("branch", 0, True)
    return marks


@dataclass(frozen=True)
class TurnSummary:
    """One turn in a line, for choosing one (the /rewind picker)."""

    number: int
    id: str  # its user record's id
    prompt: str  # the first line of the user's message
    files: tuple[str, ...]  # the files its tool calls changed that stand as it left them, first change first
    taken_back: str  # what took it back ("" while it stands)
    undone: tuple[str, ...] = ()  # the files it changed that a later undo or rewind restored


def restored_edits(records: list[Record]) -> set[str]:
    """Ids of the successful tool records whose every changed file a later undo or rewind restored."""
    position = {r.id: i for i, r in enumerate(records)}
    out: set[str] = set()
    for i, record in enumerate(records):
        if not isinstance(record, Rewind):
            continue
        at = position.get(record.to)
        files = set(record.files or ()) if at is not None and at < i else set()
        for r in records[at:i] if files else ():
            if not isinstance(r, Tool):
                continue
            paths = {e.get("path") for e in r.edits or () if isinstance(e, dict)}
            if paths and paths <= files:
                out.add(r.id)
    return out


def summaries(records: list[Record]) -> list[TurnSummary]:
    """Every turn of a whole log, oldest first: its number, prompt, the files it changed (those still as it
    left them, and those undone since), and its mark."""
    turns = number(records)
    marks = taken_back(records)
    restored = restored_edits(records)
    files: dict[int, dict[str, bool]] = {}  # turn -> path -> restored since
    for record in records:
        if isinstance(record, Tool) and record.ok:
            for entry in record.edits or ():
                if isinstance(entry, dict) and isinstance(entry.get("path"), str):
                    changed = files.setdefault(turns.of(record), {})
                    changed[entry["path"]] = changed.get(entry["path"], True) and record.id in restored
    out = []
    for record in records:
        if isinstance(record, User) and starts_turn(record):
            n = turns.of(record)
            first = next((line.strip() for line in record.content.splitlines() if line.strip()), "")
            mark = marks.get(record.id)
            changed = files.get(n, {})
            out.append(TurnSummary(n, record.id, first, tuple(p for p, gone in changed.items() if not gone),
                                   mark.describe() if mark is not None else "",
                                   tuple(p for p, gone in changed.items() if gone)))
    return out
