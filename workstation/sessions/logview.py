"""Reading a session log: the record format (version 1, sessions/README.md) and a reader that never gives
up on a bad line: each is reported (line number and reason, a deeply nested one too) and every valid line
after it is kept. Writing is sessions/log.py's."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable

import msgspec

from .records import (FORMAT_VERSION, RECORD_TYPES, TURN_CLASSES, TURN_TYPES, Compact, Record, Tool,  # noqa: F401
                      decode_line, decode_lines, from_dict, problem, reason)


# --------------------------------------------------------------------------- reading
def changed_files(records: Iterable[Record]) -> list[str]:
    """The files a session's tool calls changed (the `edits` of their records), first change first;
    a moved file under both its names."""
    seen: dict[str, None] = {}
    for record in records:
        if isinstance(record, Tool) and record.ok:
            for entry in record.edits or ():
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

    records: list[Record] = field(default_factory=list)
    problems: list[LogProblem] = field(default_factory=list)
    size: int = 0

    @property
    def turns(self) -> list[Record]:
        return [r for r in self.records if isinstance(r, TURN_CLASSES)]

    def compacts(self) -> list[Compact]:
        return [r for r in self.records if isinstance(r, Compact)]

    def last_compact(self) -> Compact | None:
        for record in reversed(self.records):
            if isinstance(record, Compact):
                return record
        return None

    def get(self, record_id: str) -> Record | None:
        for record in self.records:
            if record.id == record_id:
                return record
        return None

    @property
    def last_activity(self) -> str | None:
        return (self.records[-1].ts or None) if self.records else None


# A JSON value's type in the words of the reasons (archive metadata is checked with fields_problem).
_NUMBER = "number"  # int or float; a bool is neither here
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


def parse_line(raw: bytes) -> tuple[Record, None] | tuple[None, str]:
    """One line to a record, or (None, reason) saying why it is not one."""
    try:
        record = decode_line(raw)
    except msgspec.DecodeError:  # a ValidationError too
        return _slow_parse(raw)
    trouble = problem(record)
    return (None, trouble) if trouble else (record, None)


def _slow_parse(raw: bytes) -> tuple[Record, None] | tuple[None, str]:
    """A line msgspec refused, read with the json module: why it is not a record, in the order a reader
    checks (JSON, object, version, type, id, then the first field of another type); or the record, when
    only msgspec minded it (a lone surrogate's escape: legal JSON, which msgspec does not decode)."""
    if not raw.strip():
        return None, "empty line"
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        return None, f"not valid JSON ({str(err).split(':')[0]})"
    except RecursionError:
        return None, "not valid JSON (nested too deeply)"
    if not isinstance(value, dict):
        return None, "not a JSON object"
    version = value.get("v")
    if version != FORMAT_VERSION:
        return None, f"unsupported format version {version!r} (this reader knows {FORMAT_VERSION})"
    kind = value.get("type")
    if kind not in RECORD_TYPES:
        return None, f"unknown record type {kind!r}"
    if not isinstance(value.get("id"), str) or not value["id"]:
        return None, "record without an id"
    try:
        return from_dict(value), None
    except msgspec.ValidationError as err:
        return None, f"bad field: {reason(err)}"


def parse_lines(data: bytes, *, first_line: int = 1) -> LogView:
    """Parse a whole log held in memory (archived logs are read this way). The lines are decoded at
    once, straight from the bytes; only a chunk holding a bad line is read again line by line."""
    view = LogView(size=len(data))
    end = data.rfind(b"\n") + 1
    body, tail = data[:end], data[end:]
    if body:
        try:
            records = decode_lines(body)
        except msgspec.DecodeError:
            records = None
        if (records is not None and len(records) == body.count(b"\n")
                and not any(problem(r) for r in records)):
            view.records = records
        else:
            lines = body.split(b"\n")
            lines.pop()
            for number, raw in enumerate(lines, start=first_line):
                parsed = parse_line(raw)
                if parsed[0] is None:
                    view.problems.append(LogProblem(number, parsed[1]))
                else:
                    view.records.append(parsed[0])
    if tail:
        record, why = parse_line(tail)
        if record is None:
            view.problems.append(LogProblem(first_line + body.count(b"\n"), f"torn last line ({why})"))
        else:
            view.records.append(record)  # complete JSON, only its newline was lost
    return view
