"""Reading a session log: the record format (version 1, sessions/README.md) and a reader that never gives
up on a bad line: each is reported (line number and reason, a deeply nested one too) and every valid line
after it is kept. Writing is sessions/log.py's."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable

FORMAT_VERSION = 1
TURN_TYPES = frozenset({"user", "assistant", "tool", "system"})
RECORD_TYPES = TURN_TYPES | {"compact", "redaction", "checkpoint", "intent", "rewind", "epoch", "command",
                             "uncompact"}


# --------------------------------------------------------------------------- reading
def changed_files(records: Iterable[dict]) -> list[str]:
    """The files a session's tool calls changed (the `edits` of their records), first change first;
    a moved file under both its names."""
    seen: dict[str, None] = {}
    for record in records:
        if record.get("type") == "tool" and record.get("ok", True):
            for entry in record.get("edits") or ():
                if isinstance(entry, dict) and isinstance(entry.get("path"), str):
                    seen.setdefault(entry["path"], None)
    return list(seen)


@dataclass(frozen=True)
class LogProblem:
    line: int  # 1-based line number in the file
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


@dataclass
class LogView:
    """Everything readable in one log: valid records in file order, and the problems met."""

    records: list[dict] = field(default_factory=list)
    problems: list[LogProblem] = field(default_factory=list)
    size: int = 0

    @property
    def turns(self) -> list[dict]:
        return [r for r in self.records if r["type"] in TURN_TYPES]

    def compacts(self) -> list[dict]:
        return [r for r in self.records if r["type"] == "compact"]

    def last_compact(self) -> dict | None:
        for record in reversed(self.records):
            if record["type"] == "compact":
                return record
        return None

    def get(self, record_id: str) -> dict | None:
        for record in self.records:
            if record.get("id") == record_id:
                return record
        return None

    @property
    def last_activity(self) -> str | None:
        return self.records[-1].get("ts") if self.records else None


# The documented fields of each record type and the JSON types readers rely on (sessions/README.md).
# A known field of another type makes the line unreadable like broken JSON: code downstream indexes
# into these, and one bad field must not crash every command that lists or shows the session.
_NUMBER = "number"  # int or float; a bool is neither here
_COMMON_FIELDS: dict[str, Any] = {"ts": str, "tokens": _NUMBER,
                                  # imported records (sessions/README.md, "Imported sessions")
                                  "source": dict, "tokens_estimated": bool, "cwd": str, "git_branch": str,
                                  "sidechain": str}
_RECORD_FIELDS: dict[str, dict[str, Any]] = {
    "user": {"content": str, "rewind_to": str},
    "system": {"content": str, "notice": str, "update": dict},
    "assistant": {"content": str, "tool_calls": list, "model": str, "finish_reason": str,
                  "tokens_in": _NUMBER, "tokens_out": _NUMBER, "cost_usd": _NUMBER,
                  "cache_read_tokens": _NUMBER, "cache_creation_tokens": _NUMBER,
                  "cache_creation_1h_tokens": _NUMBER, "cache_break": str, "tokens_out_first": _NUMBER,
                  "reasoning_tokens": _NUMBER, "reasoning": str, "continues": str, "usage_scope": str,
                  "calls": _NUMBER},
    "tool": {"tool_call_id": str, "name": str, "content": str, "ok": bool, "exit_code": _NUMBER,
             "duration_ms": _NUMBER},
    "compact": {"summary": str, "sections": dict, "files": list, "covers": dict, "folds": str, "model": str,
                "reason": str, "tokens_in": _NUMBER, "tokens_out": _NUMBER, "cost_usd": _NUMBER,
                "calls": _NUMBER, "duration_ms": _NUMBER, "cache_read_tokens": _NUMBER,
                "cache_creation_tokens": _NUMBER, "cache_creation_1h_tokens": _NUMBER, "cached_history": bool,
                "replaced": dict},
    "uncompact": {"compact": str, "epochs": list, "turns": list, "held": str},
    "redaction": {"targets": list, "at_turn": int, "epoch": str},
    "checkpoint": {"turn": str, "path": str, "existed": bool, "before": str, "mode": int},
    "intent": {"turn": str, "path": str, "exists": bool, "after": str},
    "rewind": {"to": str, "turn": int, "files": list, "conversation": bool, "how": str},
    "command": {"line": str, "content": str, "ok": bool, "wrote_from": str},
    "epoch": {"system": str, "excerpt": str, "state": dict, "tools": str, "summary": str, "model": str},
}
# (fields, required) of the objects inside a record's lists and objects
_TOOL_CALL = ({"id": str, "name": str, "arguments": str, "freeform": bool}, ("id", "name", "arguments"))
_TARGET = ({"id": str, "name": str, "chars": int, "key": str}, ("id",))
# provenance of an imported record (sessions/README.md, "Imported sessions")
_SOURCE = ({"format": str, "file": str, "id": str, "merged": list}, ("format", "id"))
_COVERS = ({"first_id": str, "last_id": str, "new_first_id": str, "first_turn": int, "last_turn": int,
            "new_first_turn": int}, ())
_TYPE_NAMES = {str: "a string", int: "an integer", _NUMBER: "a number", bool: "a boolean",
               list: "a list", dict: "an object"}


def _has_type(value: Any, kind: Any) -> bool:
    if isinstance(value, bool):
        return kind is bool
    if kind == _NUMBER:
        return isinstance(value, (int, float))
    return isinstance(value, kind)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return next(_TYPE_NAMES[kind] for kind in (bool, str, int, _NUMBER, list, dict) if _has_type(value, kind))


def fields_problem(obj: dict, fields: dict[str, Any], required: Iterable[str], where: str) -> str | None:
    for name in required:
        if name not in obj:
            return f"{where}without {name!r}"
    for name, kind in fields.items():
        if name in obj and not _has_type(obj[name], kind):
            return f"{where}{name!r} is {_json_type(obj[name])}, not {_TYPE_NAMES[kind]}"
    return None


def _items_problem(items: list, shape: tuple[dict[str, Any], tuple[str, ...]], where: str) -> str | None:
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            return f"{where}[{index}] is {_json_type(item)}, not an object"
        problem = fields_problem(item, *shape, where=f"{where}[{index}] ")
        if problem:
            return problem
    return None


def _field_problem(record: dict) -> str | None:
    """Why a record's documented fields cannot be used as documented (None when they can)."""
    kind = record["type"]
    problem = fields_problem(record, {**_COMMON_FIELDS, **_RECORD_FIELDS[kind]}, (), "")
    if problem is None and kind == "assistant":
        problem = _items_problem(record.get("tool_calls", []), _TOOL_CALL, "tool_calls")
    elif problem is None and kind == "redaction":
        problem = _items_problem(record.get("targets", []), _TARGET, "targets")
    if problem is None and "source" in record:
        problem = fields_problem(record["source"], *_SOURCE, where="source ")
    elif problem is None and kind == "compact":
        problem = fields_problem(record.get("covers", {}), *_COVERS, where="covers ")
        named = [(f"files[{i}]", v) for i, v in enumerate(record.get("files", []))]
        named += [(f"sections {k!r}", v) for k, v in record.get("sections", {}).items()]
        problem = problem or next((f"{name} is {_json_type(v)}, not a string"
                                   for name, v in named if not isinstance(v, str)), None)
    return f"bad field: {problem}" if problem else None


def parse_line(raw: bytes) -> tuple[dict, None] | tuple[None, str]:
    """One line to a record, or (None, reason) saying why it is not one."""
    if not raw.strip():
        return None, "empty line"
    try:
        record = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        return None, f"not valid JSON ({str(err).split(':')[0]})"
    except RecursionError:
        return None, "not valid JSON (nested too deeply)"
    if not isinstance(record, dict):
        return None, "not a JSON object"
    version = record.get("v")
    if version != FORMAT_VERSION:
        return None, f"unsupported format version {version!r} (this reader knows {FORMAT_VERSION})"
    kind = record.get("type")
    if kind not in RECORD_TYPES:
        return None, f"unknown record type {kind!r}"
    if not isinstance(record.get("id"), str) or not record["id"]:
        return None, "record without an id"
    problem = _field_problem(record)
    if problem:
        return None, problem
    return record, None


def parse_lines(data: bytes, *, first_line: int = 1) -> LogView:
    """Parse a whole log held in memory (archived logs are read this way)."""
    view = LogView(size=len(data))
    lines = data.split(b"\n")
    tail = lines.pop()  # after the last newline: b"" for a well-formed file
    for number, raw in enumerate(lines, start=first_line):
        parsed = parse_line(raw)
        if parsed[0] is None:
            view.problems.append(LogProblem(number, parsed[1]))
        else:
            view.records.append(parsed[0])
    if tail:
        record, reason = parse_line(tail)
        if record is None:
            view.problems.append(LogProblem(first_line + len(lines), f"torn last line ({reason})"))
        else:
            view.records.append(record)  # complete JSON, only its newline was lost
    return view
