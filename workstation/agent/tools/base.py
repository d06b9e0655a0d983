"""What a tool is: its schema, its implementation, and what a call of it *means*, declared once.

A `Tool` declares, typed, everything the rest of the system needs to know about
its calls, so that the agent loop, replay (its timeline, memory view and
`--verify`), the efficiency report, checkpoints and the MCP server never test a
tool's name:

* `effect`: whether a call only looks (`QUERY`), writes memory (`MEMORY`),
  changes files (`WRITE`: checkpointed before it runs, refused in read-only
  servers, one at a time per agent and its sub-agents), runs a process
  (`COMMAND`) or a sub-agent (`DELEGATE`: its own calls are recorded and
  checked one by one, each with its own effect);
* `writes(args)`: the paths a `WRITE` call will change, known before it runs;
* `meaning(call)`: what one finished call did, from its arguments and the
  fields recorded with its result (`Meaning`: maps and ranges read, files
  edited, memory lookups, a decision, a memory write, the plan). It is the same function
  for a live call (`ToolResult.data`) and for a session log record (the tool
  record's fields), which is why both sides see the same events;
* `verify`: what `replay --verify` may do with a past call (recompute it
  against today's tree and compare, re-apply it in a scratch copy, or never),
  with `verify_skip` for calls that cannot be recomputed and `comparable` for
  the parts of a result that are compared;
* `label(args)`: the call in one short line.

Every tool takes an `Invocation` (invocation.py: the agent's services, the turn,
and the call resolved once) and returns a `ToolResult`: text for the model plus
`data`, whose `RECORDED_FIELDS` go on the session log's tool record.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ... import scrub
from ...errors import WorkstationError
from ...sessions.modelview import key_context
from ...sessions.derive import NOTHING, Edit, Lookup, MapRead, Meaning, Read, Todo, events  # noqa: F401 (the tools' vocabulary)

MAX_RESULT_CHARS = 12_000

# What a call does to the world.
QUERY = "query"  # reads the knowledge map, files or memory; changes nothing
MEMORY = "memory"  # writes the agent's memory (STM, LTM, decisions)
WRITE = "write"  # changes files in the workspace
COMMAND = "command"  # runs a process
DELEGATE = "delegate"  # runs a sub-agent (agent/subagent.py); never served over MCP
EFFECTS = (QUERY, MEMORY, WRITE, COMMAND, DELEGATE)

# What `replay --verify` may do with a past call.
RECOMPUTE = "recompute"  # run it again against today's tree and compare the result
REAPPLY = "reapply"  # apply it again in the scratch copy (an edit), and compare its result
NEVER = "never"  # not re-run (a command, a memory write)

# Fields of ToolResult.data that are written on the session log's tool record (sessions/README.md).
RECORDED_FIELDS = ("duration_ms", "path", "lines", "served_from", "memory", "sha", "file_tokens", "chars",
                   "chars_saved", "lines_changed", "outcome", "edits", "plan", "subagent",
                   "diagnostics", "exit_code")


# --------------------------------------------------------------------------- calls and what they mean
@dataclass(frozen=True)
class Call:
    """One finished tool call, as a live run or a session log knows it."""

    name: str
    args: Mapping[str, Any]
    ok: bool
    text: str  # the result the model saw
    data: Mapping[str, Any]  # ToolResult.data, or the log record's fields

    @classmethod
    def from_record(cls, record: Mapping[str, Any], args: Mapping[str, Any]) -> "Call":
        return cls(str(record.get("name") or ""), args, bool(record.get("ok", True)),
                   str(record.get("content") or ""), record)

    def path(self) -> str | None:
        path = self.data.get("path") or self.args.get("path")
        return path if isinstance(path, str) and path else None


# --------------------------------------------------------------------------- the declaration
def default_label(name: str, args: Mapping[str, Any]) -> str:
    """`grep(TODO)`: the tool and its telling argument (a path, a pattern, a command...; else the first
    text argument). Also for tools this version does not know, such as an imported agent's Bash."""
    key = key_context({"arguments": dict(args)}, "") if args else ""
    if not key:
        key = next((str(v) for v in args.values() if isinstance(v, str) and v), "")
    return f"{name}({_clip(key, 80)})"


def _clip(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def default_outcome(call: Call) -> str:
    """What a finished call came to, in a few words (the transcript's collapsed tool line): the lines an
    edit added and removed, a command's exit status, a failure's first line, else the result's size.
    Also for tools this version does not know (an imported agent's Bash with its `exit_code`)."""
    edits = [e for e in call.data.get("edits") or () if isinstance(e, dict) and isinstance(e.get("path"), str)]
    if call.ok and edits:
        return edits_outcome(edits)
    code = call.data.get("exit_code")
    if isinstance(code, (int, float)) and not isinstance(code, bool):
        return f"exit {int(code)}" + ("" if call.ok and code == 0 else f": {_last_words(call.text)}")
    if not call.ok:
        return _clip(_first_line(call.text).removeprefix("error: "), 120) or "failed"
    return size_outcome(call.text)


def edit_outcome(call: Call) -> str:
    """A file-changing tool's outcome: its `edits` counted, or for a record that predates them (a shipped
    demo) the first line of its result without the path the label already names."""
    if call.ok and not call.data.get("edits"):
        first = _first_line(call.text).split(";", 1)[0]  # "replaced lines 85-85; the new text is ..."
        path = call.path()
        return _clip(first.removeprefix(f"{path}: ") if path else first, 60) or "done"
    return default_outcome(call)


def edits_outcome(edits: list[dict]) -> str:
    """`+3 −1`, `new file +12`, `deleted −40`, `moved`; with the count of files when more than one."""
    if len(edits) == 2 and all(e.get("op") == "move" for e in edits):
        return "moved"
    added = sum(int(e.get("added") or 0) for e in edits)
    removed = sum(int(e.get("removed") or 0) for e in edits)
    counts = " ".join(part for part in (f"+{added}" if added or not removed else "",
                                        f"−{removed}" if removed else "") if part)
    if len(edits) > 1:
        return f"{len(edits)} files {counts}"
    op = str(edits[0].get("op") or "")
    return {"create": f"new file {counts}", "delete": f"deleted {counts}"}.get(op, counts)


def size_outcome(text: str) -> str:
    if not text:
        return "no output"
    lines = text.count("\n") + 1
    if lines > 1:
        return f"{lines} lines"
    return _clip(text, 40) if len(text) <= 40 else f"{len(text):,} chars"


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _last_words(text: str) -> str:
    """A failed command's last line of output before its status line, the usual place of the reason."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not _STATUS.match(line.strip())]
    return _clip(lines[-1], 80) if len(lines) > 1 else "no output"


_STATUS = re.compile(r"^\[(?:exit (-?\d+)|timed out), [\d.]+s\]$")  # run_command's last line


def command_outcome(call: Call) -> str:
    """A command's exit status (read off its result's last line when the record predates `exit_code`)."""
    if "exit_code" not in call.data and call.data.get("outcome") in ("ok", "error", "timeout"):
        status = _STATUS.match(call.text.rstrip().rsplit("\n", 1)[-1].strip())
        if status is not None and status.group(1) is None:
            return "timed out"
        if status is not None:
            call = Call(call.name, call.args, call.ok, call.text, {**call.data, "exit_code": int(status.group(1))})
    if call.data.get("outcome") == "timeout":
        return "timed out"
    return default_outcome(call)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments
    run: Callable[..., "ToolResult"]  # run(invocation, **args): invocation.Invocation first
    effect: str = QUERY
    meaning: Callable[[Call], Meaning] = lambda call: NOTHING
    writes: Callable[[Mapping[str, Any]], list[str]] = lambda args: []  # WRITE tools: paths changed
    verify: str = NEVER
    verify_skip: Callable[[Call], str | None] = lambda call: None  # why a past call cannot be recomputed
    comparable: Callable[[str], str] = lambda text: text  # the part of a result --verify compares
    label: Callable[[str, Mapping[str, Any]], str] = default_label
    outcome: Callable[[Call], str] = default_outcome  # what a finished call came to (the transcript's tool line)
    time_limit_s: float | None = 30.0  # None: the tool keeps its own time (run_command)

    def __post_init__(self) -> None:
        if self.effect not in EFFECTS:
            raise ValueError(f"tool {self.name}: effect {self.effect!r} is not one of {EFFECTS}")
        if self.verify not in (RECOMPUTE, REAPPLY, NEVER):
            raise ValueError(f"tool {self.name}: verify {self.verify!r} is unknown")

    @property
    def read_only(self) -> bool:
        return self.effect == QUERY

    def schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}}


# --------------------------------------------------------------------------- running
@dataclass
class ToolResult:
    text: str
    ok: bool = True
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class RangeMemory:
    """Ranges of files the model was sent, so that a range read again while unchanged and still in its
    context is answered from memory instead of being sent twice (read_lines)."""

    reads: dict[tuple[str, int, int], tuple[str, str, int]] = field(default_factory=dict)  # -> (sha, call, chars)
    visible: set[str] = field(default_factory=set)  # call ids whose full result the last request carried
    fresh: set[str] = field(default_factory=set)  # call ids made since the last request

    maps: dict[str, tuple[str, str, tuple[str, ...]]] = field(default_factory=dict)  # -> (sha, call, lines shown)

    def remember(self, path: str, start: int, end: int, sha: str, call_id: str, chars: int) -> None:
        self.reads[(path, start, end)] = (sha, call_id, chars)
        self.fresh.add(call_id)

    def remember_map(self, path: str, sha: str, call_id: str, lines: list[str]) -> None:
        """A file map sent as rendered (file_meta): the lines it showed below its header line."""
        self.maps[path] = (sha, call_id, tuple(lines))
        self.fresh.add(call_id)

    def shown_map(self, path: str, sha: str) -> tuple[str, tuple[str, ...]] | None:
        """(call id, lines shown) of the map of this content last sent, if still in the model's context."""
        found = self.maps.get(path)
        if found is None or found[0] != sha or not (found[1] in self.visible or found[1] in self.fresh):
            return None
        return found[1], found[2]

    def forget(self, path: str) -> None:
        for key in [k for k in self.reads if k[0] == path]:
            del self.reads[key]
        self.maps.pop(path, None)

    def clear(self) -> None:
        self.reads.clear()
        self.maps.clear()

    def new_request(self, visible: set[str]) -> None:
        self.visible, self.fresh = set(visible), set()

    def covering(self, path: str, start: int, end: int, sha: str) -> tuple[int, int, str, int] | None:
        """(first, last, call id, chars) of an earlier read of the same content that covers start..end
        and is still in the model's context."""
        for (rel, first, last), (seen_sha, call_id, chars) in self.reads.items():
            if rel == path and first <= start and end <= last and seen_sha == sha and (
                    call_id in self.visible or call_id in self.fresh):
                return first, last, call_id, chars
        return None


# --------------------------------------------------------------------------- helpers for tool modules
STR = {"type": "string"}
INT = {"type": "integer"}
BOOL = {"type": "boolean"}
TIER = {"type": "string", "enum": ["stm", "ltm", "episodic"]}


def params(required: list[str], **props: dict) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required}


def cap(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit:,} more chars cut; narrow the request]"


def as_int(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise WorkstationError(f"{name} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    raise WorkstationError(f"{name} must be an integer, got {value!r}")


def as_text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise WorkstationError(f"{name} must be a string, got {type(value).__name__}")
    return value


ARG_CLIP = 300  # characters of one tool argument kept in the episodic log


def logged_args(args: Mapping[str, Any]) -> dict:
    """A call's arguments as the episodic log keeps them: masked, each text clipped to ARG_CLIP."""
    out = {}
    for key, value in args.items():
        if isinstance(value, str):
            value = scrub.mask(value)
            if len(value) > ARG_CLIP:
                value = value[:ARG_CLIP] + f"... [{len(value):,} chars]"
        else:
            value = scrub.mask_data(value)  # a list or an object may hold a key as well
        out[key] = value
    return out


def activity_label(name: str, args: Mapping[str, Any]) -> str:
    """`run_command: pytest -q`, `read_lines: a.py 1-40`: what a running tool works on, in one line."""
    subject = args.get("cmd") or args.get("path") or next((v for v in args.values() if isinstance(v, str)), "")
    if "start" in args and "end" in args:
        subject = f"{subject} {args['start']}-{args['end']}"
    subject = " ".join(str(subject).split())
    return f"{name}: {subject[:80]}" if subject else name
