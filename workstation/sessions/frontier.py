"""The frontier of a session: where the work stands, derived from its log alone.

A compaction's summary is a model's prose, and a summarizer can drop anything. The frontier is what the
log itself says, computed by a pure function of the records (`frontier(view)`), so it survives every
compaction whatever the summary keeps: the head of the epoch after a compaction carries it
(agent.contextsync), `/frontier`, the memory pane, `workstation session frontier` and the MCP server show it.

It holds:
* every user message of the session in the user's words, within a token budget: the newest and the first
  (which states the goal) whole, then the others newest first while they fit; those that do not are cut,
  the oldest first, to their opening words, and when even that does not fit they are left out and counted
  (recall(turn=N) returns any of them whole);
* the plan (the agent's todo tool, sessions.plan) with its step in progress;
* the decisions, pins and project instructions in force: what the newest epoch and the updates after it
  told the model (agent.updates), with decisions logged since then by the agent's own log_decision calls;
* every file the agent created, changed, moved or deleted, with its net state now: from the `edits` of the
  tool records, less what a rewind of files took back (the checkpoints of that turn and later);
* the last failing command (a test run is one) with the tail of its output, until a later run of the same
  command or program passes;
* the questions the model asked that are still open: its reply ending the newest turn ends with a question
  and the user has not written since.

Turns a rewind took back from the conversation are not in it (sessions.modelview.seen); files are, as they
are now. Sub-agents' records count for files (their edits are the session's) and for nothing else.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import asdict, dataclass, field
from typing import Any

from .modelview import seen
from .log import LogView, TokenCounter, conversation_turns, default_counter, tool_call_arguments
from .plan import current as current_plan, progress, render as render_plan
from .records import TURN_CLASSES, Assistant, Epoch, Record, Rewind, System, Tool, ToolCall, User
from .turns import Turns, number as number_turns, starts_turn

USER_BUDGET = 2000  # tokens of user messages, unless the caller gives another
FLOOR_TOKENS = 40  # a cut message keeps at least this much of its opening
MAX_FILES = 80
FAILURE_CHARS = 1500  # of a failed command's output: its tail (where test runners put their summary)
COMMAND_TOOLS = frozenset({"run_command", "Bash", "shell", "execute_bash", "exec_command", "local_shell"})
_DECISION_ID = re.compile(r"\bdecision (d[0-9a-f]+) logged")
_RUNNERS = frozenset({"python", "python3", "uv", "npx", "npm", "pnpm", "yarn", "poetry", "cargo", "go", "make",
                      "bundle", "dotnet", "hatch", "pdm", "tox", "nox"})


@dataclass
class UserWords:
    turn: int
    text: str  # as the user wrote it, or its opening when cut
    cut_tokens: int = 0  # tokens of the message left out of `text`


@dataclass
class FileState:
    path: str
    state: str  # created | changed | deleted | moved
    moved_from: str | None = None  # state moved: the path it had when the session first changed it
    added: int = 0
    removed: int = 0
    turns: list[int] = field(default_factory=list)  # the turns that changed it, in order
    sha: str | None = None  # what it holds now as the agent left it (None: gone)

    def line(self) -> str:
        counts = f" (+{self.added} -{self.removed})" if self.added or self.removed else ""
        where = f", turn{'s' if len(self.turns) > 1 else ''} {_spans(self.turns)}" if self.turns else ""
        if self.state == "moved":
            return f"- moved {self.moved_from} -> {self.path}{counts}{where}"
        return f"- {self.state} {self.path}{counts}{where}"


@dataclass
class Failure:
    turn: int
    command: str
    output: str  # the tail of what it printed
    record_id: str


@dataclass
class Question:
    turn: int
    text: str


@dataclass
class Frontier:
    turn: int  # the newest turn it was derived after
    messages: list[UserWords] = field(default_factory=list)
    left_out: list[int] = field(default_factory=list)  # turns whose message did not fit at all
    plan: list[dict] | None = None
    decisions: dict[str, str] = field(default_factory=dict)  # id -> the line the model was shown
    pins: list[str] = field(default_factory=list)
    instructions: list[str] = field(default_factory=list)  # paths of project instruction files in force
    files: list[FileState] = field(default_factory=list)
    more_files: int = 0  # files beyond MAX_FILES, not listed
    failure: Failure | None = None
    questions: list[Question] = field(default_factory=list)

    @property
    def cut(self) -> int:
        """How many user messages are cut or left out."""
        return sum(1 for m in self.messages if m.cut_tokens) + len(self.left_out)

    def step_in_progress(self) -> str | None:
        for item in self.plan or ():
            if item["status"] == "in_progress":
                return item["text"]
        return None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["step_in_progress"] = self.step_in_progress()
        return data

    def render(self, *, told: bool = True) -> str:
        """Markdown for people and the model. `told=False` leaves out the decisions and pins, which an
        epoch's head carries in sections of its own."""
        out = [f"## Where the work stands (from the session log after turn {self.turn}, not from a summary)"]
        if self.messages:
            out.append("### The user's messages, in their words")
            if self.left_out:
                out.append(f"({len(self.left_out)} older message{'s' if len(self.left_out) != 1 else ''} left out "
                           f"to fit: turn{'s' if len(self.left_out) != 1 else ''} {_spans(self.left_out)}; "
                           "recall with turn=N returns one whole)")
            for m in self.messages:
                note = f" [… {m.cut_tokens:,} more tokens cut; recall turn={m.turn}]" if m.cut_tokens else ""
                out.append(f"- turn {m.turn}: {_indent(m.text)}{note}")
        if self.plan is not None:
            step = self.step_in_progress()
            out.append(f"### Plan ({progress(self.plan)}" + (f"; in progress: {step})" if step else ")"))
            out.append(render_plan(self.plan))
        if told and self.decisions:
            out.append("### Decisions in force")
            out.extend(line if line.startswith("- ") else f"- {line}" for line in self.decisions.values())
        if told and self.pins:
            out.append("### Pinned instructions")
            out.extend(f"- {p}" for p in self.pins)
        if self.instructions:
            out.append("### Project instructions in force\n" + ", ".join(self.instructions))
        if self.files:
            out.append("### Files this session changed (net, as they are now)")
            out.extend(f.line() for f in self.files)
            if self.more_files:
                out.append(f"- … and {self.more_files} more")
        if self.failure is not None:
            f = self.failure
            out.append(f"### Last failure, not passing since (turn {f.turn})\n$ {f.command}\n{f.output}")
        if self.questions:
            out.append("### Open questions to the user (not answered yet)")
            out.extend(f"- turn {q.turn}: {q.text}" for q in self.questions)
        return "\n".join(out)


def frontier_budget(budget: int) -> int:
    """Tokens the frontier takes in the head of a request of `budget` tokens, every section of it
    (head_frontier): a twelfth, at most USER_BUDGET * 2, at least 256. Every request of an epoch reads it and
    every compaction writes it anew, so a frontier that grew with the session would make each turn dearer."""
    return max(256, min(USER_BUDGET * 2, budget // 12))


def head_frontier(view: LogView, *, budget: int, counter: TokenCounter | None = None) -> str:
    """The frontier as an epoch's head carries it (render(told=False)), within about `budget` tokens whatever
    the session holds: the files at most a third of it (the most recently changed kept, the rest counted),
    the failure's output a sixth (its tail), and the user's words what is left, never less than a third (the
    first message, which states the goal, and the newest stay whole)."""
    counter = counter or default_counter()
    found = frontier(view, budget=budget, counter=counter)
    text = found.render(told=False)
    if counter(text) <= budget:
        return text
    lines = len(found.messages)
    found.messages, found.left_out = [], []
    files = sorted(found.files, key=lambda f: -(f.turns[-1] if f.turns else 0))
    kept: set[int] = set()
    used = 0
    for f in files:
        used += counter(f.line())
        if used > budget // 3:
            break
        kept.add(id(f))
    found.more_files += len(found.files) - len(kept)
    found.files = [f for f in found.files if id(f) in kept]
    if found.failure is not None and counter(found.failure.output) > budget // 6:
        tail = found.failure.output.splitlines()
        while len(tail) > 1 and counter("\n".join(tail)) > budget // 6:
            tail = tail[len(tail) // 4 or 1:]
        found.failure.output = "\n".join(tail)
    rest = counter(found.render(told=False)) + 16 + 6 * lines  # and the words' heading, each one's "- turn N: "
    words = frontier(view, budget=max(budget // 3, budget - rest), counter=counter)
    found.messages, found.left_out = words.messages, words.left_out
    return found.render(told=False)


def frontier(view: LogView, *, budget: int = USER_BUDGET, counter: TokenCounter | None = None) -> Frontier:
    """The frontier of the log `view` (the whole log, as read): see the module docstring."""
    counter = counter or default_counter()
    numbers = number_turns(view.records)
    model_view = seen(view)
    said = {r.id for r in conversation_turns(model_view.turns)}  # not an imported session's abandoned branch
    records = [r for r in model_view.records if r.id in said or not isinstance(r, TURN_CLASSES)]
    out = Frontier(turn=numbers.count)
    out.messages, out.left_out = _user_words(records, numbers, budget, counter)
    out.plan = current_plan(records)
    out.decisions, out.pins, out.instructions = _told(records)
    out.files = _files(view.records, numbers)
    if len(out.files) > MAX_FILES:
        out.more_files = len(out.files) - MAX_FILES
        out.files = out.files[:MAX_FILES]
    out.failure = _failure(records, numbers)
    out.questions = _questions(records, numbers)
    return out


# --------------------------------------------------------------------------- the user's words
def _user_words(records: list[Record], numbers: Turns, budget: int, counter: TokenCounter
                ) -> tuple[list[UserWords], list[int]]:
    users = [r for r in records if isinstance(r, User) and starts_turn(r) and not (r.source and r.source.meta)]
    if not users:
        return [], []
    sizes = [r.tokens if isinstance(r.tokens, int) else counter(r.content) for r in users]
    share = budget // 2  # neither the first nor the newest takes the whole budget
    whole = {len(users) - 1, 0}  # the newest message, and the first: it states the goal
    left = budget - sum(min(sizes[i], share) for i in whole)
    reserve = max(0, min(left // 4, FLOOR_TOKENS * (len(users) - 2)))  # for the openings of those cut
    left -= reserve
    for index in range(len(users) - 2, 0, -1):  # the others, newest first, while they fit whole
        if sizes[index] > left:
            break
        whole.add(index)
        left -= sizes[index]
    left += reserve
    words: dict[int, UserWords] = {}
    left_out: list[int] = []
    for index in sorted(whole):
        text = users[index].content
        words[index] = _cut(numbers.of(users[index]), text, share, sizes[index], counter) \
            if sizes[index] > share else UserWords(numbers.of(users[index]), text)
    rest = [i for i in range(1, len(users) - 1) if i not in whole]
    for index in reversed(rest):  # newest of the rest first: the oldest are cut (then left out) first
        if left >= FLOOR_TOKENS:
            keep = min(left, max(FLOOR_TOKENS, left // max(1, len(rest))))
            words[index] = _cut(numbers.of(users[index]), users[index].content, keep,
                                sizes[index], counter)
            left -= keep
        else:
            left_out.append(numbers.of(users[index]))
    return [words[i] for i in sorted(words)], sorted(left_out)


def _cut(turn: int, text: str, keep: int, size: int, counter: TokenCounter) -> UserWords:
    """`text`'s opening within `keep` tokens (cut at a word), and how many tokens went."""
    if size <= keep:
        return UserWords(turn, text)
    chars = max(1, len(text) * keep // max(1, size))
    opening = text[:chars]
    while opening and counter(opening) > keep:
        opening = opening[: len(opening) * 9 // 10]
    opening = opening.rsplit(" ", 1)[0] if " " in opening.strip() else opening
    return UserWords(turn, opening.rstrip(), max(1, size - counter(opening)))


# --------------------------------------------------------------------------- what the model was told
def _told(records: list[Record]) -> tuple[dict[str, str], list[str], list[str]]:
    """Decisions, pins and project instructions in force: the newest epoch's state and the updates after it,
    the agent's own decisions logged since, and every pin of the log."""
    decisions: dict[str, str] = {}
    instructions: dict[str, str] = {}
    start = 0
    for index in range(len(records) - 1, -1, -1):
        epoch = records[index]
        if isinstance(epoch, Epoch):
            state: dict = epoch.state or {}
            decisions.update({str(k): str(v) for k, v in (state.get("decisions") or {}).items()})
            instructions.update({str(k): str(v) for k, v in (state.get("instructions") or {}).items()})
            start = index + 1
            break
    calls: dict[str, ToolCall] = {}
    for record in records[start:]:
        if isinstance(record, System) and record.update is not None:
            told = record.update
            decisions.update({str(k): str(v) for k, v in (told.get("decisions") or {}).items()})
            for path, value in (told.get("instructions") or {}).items():
                if value:
                    instructions[str(path)] = str(value)
                else:
                    instructions.pop(str(path), None)
        elif isinstance(record, Assistant):
            calls.update({c.id: c for c in record.tool_calls or ()})
        elif isinstance(record, Tool) and record.name == "log_decision" and record.ok:
            found = _DECISION_ID.search(record.content)
            if found and found.group(1) not in decisions:
                args = tool_call_arguments(calls.get(record.tool_call_id, {}))
                why = str(args.get("reasoning") or "")
                decisions[found.group(1)] = (f"- [D:{found.group(1)}] {args.get('decision', '')}"
                                             + (f" (why: {why})" if why else ""))
    pins = [r.content for r in records if isinstance(r, System) and r.pin]
    return decisions, pins, sorted(instructions)


# --------------------------------------------------------------------------- files
def _files(records: list[Record], numbers: Turns) -> list[FileState]:
    """Each changed file's net state: its edits (tool records' `edits`) that no rewind of files took back."""
    entries: list[tuple[int, dict]] = []  # (turn, edit entry), in order
    for record in records:
        if isinstance(record, Tool) and record.ok:
            turn = numbers.of(record)
            entries += [(turn, e) for e in record.edits or ()
                        if isinstance(e, dict) and isinstance(e.get("path"), str)]
        elif isinstance(record, Rewind) and record.files is not None:
            back = _turn_number(numbers, record)
            restored = set(record.files)
            entries = [(t, e) for t, e in entries if t < back or e["path"] not in restored]
    origin: dict[str, str] = {}  # path -> the path its content had when the session first changed it
    first: dict[str, tuple[str | None, int]] = {}  # origin path -> (sha before the session's change, order)
    now: dict[str, FileState] = {}
    for turn, entry in entries:
        path, op = entry["path"], entry.get("op")
        if op == "move" and isinstance(entry.get("from"), str):
            source = entry["from"]
            moved = now.pop(source, None)
            root = origin.pop(source, source)
            origin[path] = root
            first.setdefault(root, (entry.get("before"), len(first)))
            state = moved or FileState(path, "changed")
            state.path, state.sha = path, entry.get("after")
            state.turns = [*state.turns, turn] if turn not in state.turns else state.turns
            now[path] = state
            continue
        if op == "move":  # the source's half of a move: what it held first; the destination's entry carries on
            first.setdefault(origin.get(path, path), (entry.get("before"), len(first)))
            continue
        root = origin.setdefault(path, path)
        first.setdefault(root, (entry.get("before"), len(first)))
        state = now.setdefault(path, FileState(path, "changed"))
        state.sha = entry.get("after")
        state.added += int(entry.get("added") or 0)
        state.removed += int(entry.get("removed") or 0)
        if turn not in state.turns:
            state.turns.append(turn)
    out: list[FileState] = []
    for path, state in now.items():
        root = origin.get(path, path)
        before = first.get(root, (None, 0))[0]
        if root != path:
            state.state, state.moved_from = "moved", root
            if state.sha is None:
                state.state, state.path, state.moved_from = "deleted", root, None
        elif before is None and state.sha is not None:
            state.state = "created"
        elif state.sha is None:
            state.state = "deleted" if before is not None else "unchanged"
        elif state.sha == before:
            state.state = "unchanged"
        out.append(state)
    order = {path: first.get(origin.get(path, path), (None, 0))[1] for path in now}
    return sorted((s for s in out if s.state != "unchanged"), key=lambda s: order[s.path])


def _turn_number(numbers: Turns, record: Rewind) -> int:
    value = record.turn
    if isinstance(value, int) and value > 0:
        return value
    to = record.to
    return numbers.starts.index(to) + 1 if to in numbers.starts else numbers.count


# --------------------------------------------------------------------------- the last failure
def command_key(command: str) -> str:
    """What a later run must share with a failed one to say whether it still fails: the program, and for a
    runner (python -m, npm run, uv run, cargo ...) the program it runs."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    words = [w for w in words if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w)]  # VAR=value prefixes
    if not words:
        return ""
    program = words[0].rsplit("/", 1)[-1]
    key = ["python" if re.match(r"^python3?(\.\d+)?$", program) else program]
    rest = [w for w in words[1:] if not w.startswith("-")]
    if key[0] in _RUNNERS:
        key += rest[:1] if key[0] not in ("npm", "pnpm", "yarn", "uv", "poetry", "hatch", "pdm") else rest[:2]
    return " ".join(key)


def _command_of(record: Tool, calls: dict[str, ToolCall]) -> str:
    args = tool_call_arguments(calls.get(record.tool_call_id, {}))
    for name in ("cmd", "command"):
        value = args.get(name)
        if isinstance(value, list):
            value = " ".join(str(v) for v in value)
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())
    first = record.content.split("\n", 1)[0]
    return first[2:] if first.startswith("$ ") else first


def _failure(records: list[Record], numbers: Turns) -> Failure | None:
    calls: dict[str, ToolCall] = {}
    failure: Failure | None = None
    for record in records:
        if isinstance(record, Assistant):
            calls.update({c.id: c for c in record.tool_calls or ()})
        if not isinstance(record, Tool) or record.name not in COMMAND_TOOLS:
            continue
        if record.outcome in ("denied", "cancelled"):
            continue  # never ran: says nothing of whether it passes
        command = _command_of(record, calls)
        if record.ok:
            if failure is not None and (command == failure.command
                                        or command_key(command) == command_key(failure.command)):
                failure = None
        else:
            output = record.content
            if output.startswith("$ "):
                output = output.split("\n", 1)[1] if "\n" in output else ""
            tail = output[-FAILURE_CHARS:]
            if len(output) > FAILURE_CHARS:
                tail = "…" + tail.split("\n", 1)[-1]
            failure = Failure(numbers.of(record), command, tail.strip(), record.id)
    return failure


# --------------------------------------------------------------------------- open questions
def _questions(records: list[Record], numbers: Turns) -> list[Question]:
    """The questions of the reply that ended the newest turn, when it ends with one; a user message since
    answers them (there is none: it would be the newest turn)."""
    last_user = max((i for i, r in enumerate(records) if starts_turn(r)), default=None)
    if last_user is None:
        return []
    reply = next((r for r in reversed(records[last_user:]) if isinstance(r, Assistant)), None)
    if reply is None or reply.tool_calls:
        return []
    text = reply.content.strip()
    if not re.search(r"\?[\s*_`)\"'»]*$", text):
        return []
    found = []
    for line in text.splitlines():
        for sentence in re.split(r"(?<=[.!?])\s+", line.strip()):
            sentence = sentence.strip(" -*#>_`\"'")
            if len(sentence) > 3 and sentence.endswith("?"):
                found.append(Question(numbers.of(reply), " ".join(sentence.split())[:400]))
    return found[-5:]


# --------------------------------------------------------------------------- helpers
def _spans(numbers: list[int]) -> str:
    """1, 3-5, 9"""
    runs: list[list[int]] = []
    for n in sorted(set(numbers)):
        if runs and runs[-1][1] == n - 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _indent(text: str) -> str:
    return text.strip().replace("\n", "\n  ")
