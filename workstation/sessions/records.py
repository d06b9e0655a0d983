"""The session log's records as types: one msgspec Struct per record type, tagged on `type`
(sessions/README.md describes the format; tests/unit/test_session_records.py checks the two agree).

A log line decodes straight from bytes into one of these (`decode_line`, `decode_lines`); a record is
written as the JSON object of its fields, those that are None left out (`to_json`). Like codex's
rollout items, the type names what a line is and the fields what it holds; unlike a dict, a field
renamed in a writer fails in mypy at every reader.

Tolerance, as the format promises (README, "Versioning"):
* a field this reader does not know (a newer writer's) is ignored: the line on disk keeps it, the
  record read here has no attribute for it;
* a record type this reader does not know, another format version, a line without an id, or a known
  field of another JSON type is not a record: the reader reports the line (number and reason) and
  keeps every line after it (sessions/logview.py).

Every field has a default, so the minimal line of each type still reads; `v` and `id` are checked
after decoding (`problem`), since a line must say both.
"""

from __future__ import annotations

import re
from typing import Any, Union

import msgspec

FORMAT_VERSION = 1
Number = Union[int, float]  # a JSON number; never a boolean


class Fields(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Mapping-style reads of a record (`r["id"]`, `r.get("ok", True)`, `"x" in r`) for the readers not yet
    converted to attributes: one release of transition, then gone. A field that is None reads as missing."""

    def get(self, key: str, default: Any = None) -> Any:
        value = getattr(self, _attr(key), None)
        return default if value is None else value

    def __getitem__(self, key: str) -> Any:
        value = getattr(self, _attr(key), None)
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and getattr(self, _attr(key), None) is not None


def _attr(key: str) -> str:
    return "kind" if key == "type" else key


# --------------------------------------------------------------------------- parts of records
class ToolCall(Fields):
    """One call of an assistant record, `arguments` a JSON string exactly as the model produced it."""
    id: str
    name: str
    arguments: str
    freeform: bool | None = None  # raw text rather than JSON arguments (Codex's apply_patch)

    def as_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)  # type: ignore[no-any-return]


class Target(Fields):
    """A tool output a redaction record hides from the model."""
    id: str
    name: str | None = None
    chars: int | None = None
    key: str | None = None


class Source(Fields):
    """Where an imported record came from (README, "Imported sessions")."""
    format: str
    id: str
    file: str | None = None
    merged: list[Any] | None = None
    line: Any = None
    session: Any = None
    message_id: Any = None
    request_id: Any = None
    response_id: Any = None
    meta: Any = None
    time: Any = None
    trigger: Any = None
    pre_tokens: Any = None
    subtype: Any = None


class Covers(Fields):
    """The range a compact record's summary stands in for."""
    first_id: str | None = None
    last_id: str | None = None
    new_first_id: str | None = None
    first_turn: int | None = None
    last_turn: int | None = None
    new_first_turn: int | None = None


# --------------------------------------------------------------------------- records
class Record(Fields, tag_field="type", omit_defaults=False):
    """What every line holds. `kind` is the line's `type` (a class attribute of each record type)."""
    v: int = 0  # 0: not given (a line without it is refused); Session.append writes FORMAT_VERSION
    id: str = ""
    ts: str = ""
    tokens: Number | None = None  # Session.append counts them when the writer did not
    # imported records (README, "Imported sessions")
    source: Source | None = None
    tokens_estimated: bool | None = None
    cwd: str | None = None
    git_branch: str | None = None
    sidechain: str | None = None  # a sub-agent's record: the name of its flow

    @property
    def kind(self) -> str:
        return type(self).__struct_config__.tag  # type: ignore[return-value]

    def as_dict(self) -> dict[str, Any]:
        """The record as the JSON object its line holds: v, id, ts and type first, None fields left out."""
        fields = msgspec.to_builtins(self)
        head = {"v": fields.pop("v"), "id": fields.pop("id"), "ts": fields.pop("ts"), "type": fields.pop("type")}
        head.update((k, v) for k, v in fields.items() if v is not None)
        return head


class User(Record, tag="user"):
    content: str = ""
    rewind_to: str | None = None  # continues the conversation from that record (an imported rewind)
    memory: dict[str, Any] | None = None  # the turn-start memory query


class System(Record, tag="system"):
    content: str = ""
    notice: str | None = None
    update: dict[str, Any] | None = None
    pin: bool | None = None
    forked_from: str | None = None


class Assistant(Record, tag="assistant"):
    content: str = ""
    tool_calls: list[ToolCall] | None = None
    model: str | None = None
    finish_reason: str | None = None
    latency_ms: Number | None = None
    tokens_in: Number | None = None
    tokens_out: Number | None = None
    cost_usd: Number | None = None
    cache_read_tokens: Number | None = None
    cache_creation_tokens: Number | None = None
    cache_creation_1h_tokens: Number | None = None
    cache_break: str | None = None
    context_tokens: Number | None = None
    base_tokens: Number | None = None
    trimmed: Any = None
    reused: list[Any] | None = None
    left_out: Any = None
    via: str | None = None  # written by a front end other than the agent loop (the MCP server)
    client: str | None = None
    # imported
    tokens_out_first: Number | None = None
    reasoning_tokens: Number | None = None
    reasoning: str | None = None
    continues: str | None = None
    usage_scope: str | None = None
    calls: Number | None = None

    @property
    def calls_made(self) -> list[ToolCall]:
        return self.tool_calls or []


class Tool(Record, tag="tool"):
    tool_call_id: str = ""
    name: str = ""
    content: str = ""
    ok: bool = True
    exit_code: Number | None = None
    duration_ms: Number | None = None
    # what the tool reported (agent/tools/base.py RECORDED_FIELDS); shapes vary by tool
    path: Any = None
    lines: Any = None
    served_from: str | None = None
    memory: Any = None
    sha: Any = None
    file_tokens: Any = None
    chars: Any = None
    chars_saved: Any = None
    lines_changed: Any = None
    outcome: Any = None
    edits: list[Any] | None = None
    plan: list[Any] | None = None
    subagent: dict[str, Any] | None = None
    diagnostics: dict[str, Any] | None = None


class Compact(Record, tag="compact"):
    summary: str = ""
    sections: dict[str, str] | None = None
    files: list[str] | None = None
    covers: Covers | None = None
    folds: str | None = None
    model: str | None = None
    reason: str | None = None
    focus: str | None = None
    tokens_in: Number | None = None
    tokens_out: Number | None = None
    cost_usd: Number | None = None
    calls: Number | None = None
    duration_ms: Number | None = None
    cache_read_tokens: Number | None = None
    cache_creation_tokens: Number | None = None
    cache_creation_1h_tokens: Number | None = None
    cached_history: bool | None = None
    replaced: dict[str, Any] | None = None


class Uncompact(Record, tag="uncompact"):
    compact: str = ""
    epochs: list[Any] | None = None
    turns: list[Any] | None = None
    held: str | None = None


class Redaction(Record, tag="redaction"):
    targets: list[Target] | None = None
    at_turn: int | None = None
    epoch: str | None = None


class Checkpoint(Record, tag="checkpoint"):
    turn: str = ""
    path: str = ""
    existed: bool | None = None
    before: str | None = None
    mode: int | None = None


class Intent(Record, tag="intent"):
    turn: str = ""
    path: str = ""
    exists: bool | None = None
    after: str | None = None


class Rewind(Record, tag="rewind"):
    to: str = ""
    turn: int | None = None
    files: list[Any] | None = None
    conversation: bool | None = None
    how: str | None = None


class Command(Record, tag="command"):
    line: str = ""
    content: str = ""
    ok: bool = True
    wrote_from: str | None = None


class Epoch(Record, tag="epoch"):
    system: str = ""
    excerpt: str | None = None
    state: dict[str, Any] | None = None
    tools: str | None = None
    tool_schemas: Any = None
    summary: str | None = None
    model: str | None = None


AnyRecord = Union[User, System, Assistant, Tool, Compact, Uncompact, Redaction, Checkpoint, Intent, Rewind,
                  Command, Epoch]
RECORD_CLASSES: tuple[type[Record], ...] = (User, System, Assistant, Tool, Compact, Uncompact, Redaction,
                                            Checkpoint, Intent, Rewind, Command, Epoch)
BY_TYPE: dict[str, type[Record]] = {cls.__struct_config__.tag: cls for cls in RECORD_CLASSES}  # type: ignore[misc]
TURN_CLASSES = (User, Assistant, Tool, System)
TURN_TYPES = frozenset({"user", "assistant", "tool", "system"})
RECORD_TYPES = frozenset(BY_TYPE)

_decoder = msgspec.json.Decoder(AnyRecord)


def decode_line(raw: bytes) -> Record:
    """One line to its record; msgspec.DecodeError (a ValidationError too) when it is not one."""
    return _decoder.decode(raw)  # type: ignore[no-any-return]


def decode_lines(data: bytes) -> list[Record]:
    """Newline-delimited records at once (blank lines skipped); raises like decode_line on any bad line."""
    return _decoder.decode_lines(data)  # type: ignore[no-any-return]


def problem(record: Record) -> str | None:
    """What a decoded record lacks that a line must have (None when nothing)."""
    if record.v != FORMAT_VERSION:
        return f"unsupported format version {record.v or None!r} (this reader knows {FORMAT_VERSION})"
    if not record.id:
        return "record without an id"
    return None


def from_fields(kind: str, fields: dict[str, Any]) -> Record:
    """A record of type `kind` built from JSON-shaped fields, checked as a line is (ValidationError)."""
    cls = BY_TYPE[kind]
    return msgspec.convert(fields, cls)


def from_dict(data: dict[str, Any]) -> Record:
    """A record from its JSON object (`type` included), checked as a line is (ValidationError)."""
    return msgspec.convert(data, AnyRecord)  # type: ignore[return-value]


def to_builtins(value: Any) -> Any:
    """Records (and anything holding them) as plain JSON values, for JSON output and foreign encoders."""
    if isinstance(value, Record):
        return value.as_dict()
    if isinstance(value, (list, tuple)):
        return [to_builtins(v) for v in value]
    if isinstance(value, dict):
        return {k: to_builtins(v) for k, v in value.items()}
    if isinstance(value, msgspec.Struct):
        return msgspec.to_builtins(value)
    return value


# --------------------------------------------------------------------------- documentation
README_BEGIN = "<!-- records: generated from workstation/sessions/records.py; regenerate with " \
               "`python -m workstation.sessions.records sessions/README.md` -->"
README_END = "<!-- records: end -->"


def readme_table() -> str:
    """The table of sessions/README.md's "Record types": each record type's fields and their JSON types, made
    from the Structs (the test of the README fails when the two disagree)."""
    import msgspec.inspect as mi  # lazy: only the README check and its regeneration ask

    def shape(t: Any) -> str:
        if isinstance(t, mi.UnionType):
            kinds = [k for k in t.types if not isinstance(k, mi.NoneType)]
            if len(kinds) == 2 and {type(k) for k in kinds} == {mi.IntType, mi.FloatType}:
                return "number"
            return " or ".join(shape(k) for k in kinds)
        if isinstance(t, mi.ListType):
            item = shape(t.item_type)
            return "list" if item == "any" else f"list of {item}"
        if isinstance(t, mi.StructType):
            return "{" + ", ".join(f.encode_name + ("" if f.required else "?") for f in t.fields) + "}"
        names: dict[type, str] = {mi.StrType: "string", mi.IntType: "integer", mi.FloatType: "number",
                                  mi.BoolType: "boolean", mi.DictType: "object", mi.AnyType: "any"}
        return names.get(type(t), type(t).__name__)

    def fields(cls: type[msgspec.Struct], skip: frozenset[str] = frozenset()) -> str:
        info = mi.type_info(cls)
        assert isinstance(info, mi.StructType)
        return ", ".join(f"`{f.encode_name}` {shape(f.type)}" for f in info.fields if f.encode_name not in skip)

    common = frozenset(Record.__struct_fields__)
    rows = ["| type | fields (every record: `type` and the common ones) |", "|------|------|",
            f"| (every) | {fields(Record)} |"]
    rows += [f"| `{cls.__struct_config__.tag}` | {fields(cls, common)} |" for cls in RECORD_CLASSES]
    return "\n".join([README_BEGIN, *rows, README_END])


def with_table(readme: str) -> str:
    """`readme` with its generated table replaced by the one the Structs give now."""
    start, end = readme.index(README_BEGIN), readme.index(README_END) + len(README_END)
    return readme[:start] + readme_table() + readme[end:]


# --------------------------------------------------------------------------- reasons
_TYPE_WORDS = {"str": "a string", "int": "an integer", "float": "a number", "int | float": "a number",
               "bool": "a boolean", "array": "a list", "object": "an object", "null": "null"}
_EXPECTED = re.compile(r"Expected `(?P<want>[^`]+)`, got `(?P<got>[^`]+)`(?: - at `\$(?P<at>[^`]*)`)?")
_MISSING = re.compile(r"Object missing required field `(?P<name>[^`]+)`(?: - at `\$(?P<at>[^`]*)`)?")


def reason(error: msgspec.ValidationError) -> str:
    """msgspec's validation message in the words the reader has always used (README, "Tolerant reading")."""
    text = str(error)
    if match := _EXPECTED.fullmatch(text):
        want = match["want"].removesuffix(" | null")
        got = _TYPE_WORDS.get(match["got"], match["got"])
        return f"{_where(match['at'] or '')} is {got}, not {_TYPE_WORDS.get(want, want)}"
    if match := _MISSING.fullmatch(text):
        where = _where(match["at"] or "", field=False)
        return f"{where + ' ' if where else ''}without {match['name']!r}"
    return text


def _where(path: str, *, field: bool = True) -> str:
    """`.tool_calls[0].id` as `tool_calls[0] 'id'`, `.covers` as `'covers'`, `.targets[1]` as `targets[1]`;
    field=False (the object a field is missing from): `.source` as `source`."""
    parts = re.findall(r"\.([^.\[]+)|(\[[^\]]*\])", path)
    words: list[str] = []
    for name, index in parts:
        if index and words:
            words[-1] += index
        elif name:
            words.append(name)
    if field and parts and parts[-1][0]:
        words[-1] = repr(words[-1])
    return " ".join(words)


if __name__ == "__main__":  # python -m workstation.sessions.records sessions/README.md: regenerate the table
    import sys
    from pathlib import Path

    target = Path(sys.argv[1])
    target.write_text(with_table(target.read_text(encoding="utf-8")), encoding="utf-8")
