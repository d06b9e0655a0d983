"""What every importer shares: drafts of records, stable ids, provenance, timestamps, problems.

An importer reads one source file and returns `Conversation`s: for each target session, the
`Draft`s of its records in order. The engine (engine.py) turns drafts into session records,
skipping what an earlier import already wrote. A draft names the source items it came from
(`sid`, plus one per `Part`), so re-reading a file that grew recognises everything written
before, and a response that gained parts since (a streamed answer still being logged) is
continued by a record holding only the new parts.

Record ids of imported records are not random: milliseconds of the source timestamp in hex,
`-`, then 6 hex digits of a hash of (format, source session, source id). Importing the same
source twice, even into a fresh workspace, gives the same ids.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson


class ImportProblem(Exception):
    """A source that cannot be imported at all (one line, naming the file)."""


@dataclass(frozen=True)
class Problem:
    """Something in a source that was skipped: a line that is not JSON, a field of the wrong type..."""

    file: str
    reason: str
    line: int | None = None  # 1-based line of a line-oriented source

    def __str__(self) -> str:
        return f"{self.file}: line {self.line}: {self.reason}" if self.line else f"{self.file}: {self.reason}"


@dataclass
class Usage:
    """What one model call cost, as the source logged it.

    `tokens_in` is the whole prompt, cache reads and writes included (litellm's `prompt_tokens`);
    `cache_read`/`cache_creation` are the parts of it read from / written to a prompt cache.
    """

    tokens_in: int = 0
    tokens_out: int = 0
    cache_read: int = 0
    cache_creation: int = 0
    cache_creation_1h: int = 0  # of cache_creation, written with a 1-hour TTL
    reasoning: int | None = None  # output tokens spent reasoning (part of tokens_out)
    first_out: int | None = None  # output tokens of a streamed response's first logged snapshot
    cost: float | None = None  # a cost the source states itself (SWE-agent, aider)
    calls: int | None = None  # for run totals: how many calls they cover
    scope: str = "call"  # call | run (totals of a whole run, SWE-agent)

    def fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tokens_in": self.tokens_in, "tokens_out": self.tokens_out}
        if self.cache_read:
            out["cache_read_tokens"] = self.cache_read
        if self.cache_creation:
            out["cache_creation_tokens"] = self.cache_creation
        if self.cache_creation_1h:
            out["cache_creation_1h_tokens"] = self.cache_creation_1h
        if self.reasoning:
            out["reasoning_tokens"] = self.reasoning
        if self.first_out is not None and self.first_out != self.tokens_out:
            out["tokens_out_first"] = self.first_out
        if self.scope != "call":
            out["usage_scope"] = self.scope
            if self.calls is not None:
                out["calls"] = self.calls
        return out


@dataclass
class Part:
    """One piece of an assistant record and the source item it came from."""

    sid: str
    kind: str  # text | reasoning | call
    value: Any  # str, or a tool call {id, name, arguments}
    ts: str = ""


@dataclass
class Draft:
    """A record to be: its type, the source item it starts at, its fields and its provenance."""

    type: str
    sid: str
    ts: str
    fields: dict[str, Any] = field(default_factory=dict)
    parts: list[Part] | None = None  # assistant records: text, reasoning and calls, in order
    usage: Usage | None = None
    source: dict[str, Any] = field(default_factory=dict)  # extra provenance: line, meta...

    def sids(self) -> list[str]:
        out = [self.sid]
        for part in self.parts or ():
            if part.sid not in out:
                out.append(part.sid)
        return out


@dataclass
class Conversation:
    """The drafts of one target session, in order."""

    key: str  # the source's own session id (stable as the file grows)
    prefix: str  # slug prefix naming the agent: claude, codex, swe-agent, aider, openhands
    first_ts: str
    drafts: list[Draft] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)  # cwd, git branch, versions: shown on import
    label: str = ""  # the slug's middle part when the day of the first record is not stable

    @property
    def slug(self) -> str:
        return slug_for(self.prefix, self.first_ts, self.key, self.label)


@dataclass
class Parsed:
    conversations: list[Conversation]
    problems: list[Problem]
    consumed: int  # bytes of the source read as complete input


# --------------------------------------------------------------------------- ids and slugs
def stable_hash(*parts: str) -> str:
    return hashlib.sha1("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def record_id(ts: str, fmt: str, key: str, sid: str) -> str:
    return f"{epoch_ms(ts):011x}-{stable_hash(fmt, key, sid)[:6]}"


_SLUG_WORD = re.compile(r"[a-z0-9]+")


def slug_for(prefix: str, first_ts: str, key: str, label: str = "") -> str:
    """`claude-2025-10-21-cfa1e878`: agent, day of the first record (or a label), 8 characters of
    the source's id (or of a hash of it). The same source always gets the same slug."""
    day = first_ts[:10] if re.match(r"\d{4}-\d\d-\d\d", first_ts or "") else "undated"
    if label:
        day = "-".join(_SLUG_WORD.findall(label.lower()))[:40].strip("-") or day
    compact = "".join(_SLUG_WORD.findall(key.lower()))
    short = compact[:8] if len(compact) >= 8 and re.fullmatch(r"[0-9a-f-]{8,}", key.lower()) else \
        stable_hash(key)[:8]
    return f"{prefix}-{day}-{short}"


# --------------------------------------------------------------------------- time
_CANONICAL_TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def iso_ts(value: Any, *, naive_local: bool = True) -> str | None:
    """A source timestamp as UTC ISO 8601 with milliseconds and Z; None when unreadable.

    Timestamps without a zone (aider, OpenHands write datetime.now()) are read as local time
    of this machine when `naive_local`, else as UTC. Numbers are epoch seconds (or ms if huge).
    """
    if isinstance(value, str):
        if _CANONICAL_TS.match(value):
            return value
        text = value.strip()
        if not text:
            return None
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T", 1))
        except ValueError:
            return None
        if moment.tzinfo is None:
            moment = moment.astimezone() if naive_local else moment.replace(tzinfo=timezone.utc)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = value / 1000 if value > 1e11 else value
        try:
            moment = datetime.fromtimestamp(seconds, timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
    else:
        return None
    try:
        return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    except (OverflowError, ValueError):
        return None


def epoch_ms(ts: str) -> int:
    try:
        return int(datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000)
    except (ValueError, AttributeError):
        return 0


def file_ts(path: Path) -> str:
    """The file's modification time: the timestamp of sources that log none (SWE-agent)."""
    try:
        return iso_ts(path.stat().st_mtime) or "1970-01-01T00:00:00.000Z"
    except OSError:
        return "1970-01-01T00:00:00.000Z"


# --------------------------------------------------------------------------- reading sources
MAX_LINE_BYTES = 32 << 20  # a JSONL line longer than this is named and left out (memory: see read_jsonl)
MAX_DEPTH = 100  # JSON deeper than this is refused: records downstream are walked recursively


_DIGIT_MAP = bytes(48 if 48 <= byte <= 57 else 32 for byte in range(256))  # digits -> "0", the rest -> " "
_LONG_NUMBER = b"0" * 19
_UNREAD = object()


def exact_ints(raw: bytes) -> bool:
    """Whether orjson reads every integer in `raw` as the json module does: it turns one past 64 bits
    into a float, and such a number has 19 digits in a row (~1 ms a MB to look)."""
    return raw.translate(_DIGIT_MAP).find(_LONG_NUMBER) < 0


def loads(raw: bytes | str, exact: bool | None = None) -> tuple[Any, str | None]:
    """JSON text to a value, or (None, reason). orjson reads it (~3.5x the json module) unless it
    holds a 19-digit run (`exact`: exact_ints(raw), when the caller looked at the whole file) or is
    something orjson refuses; the json module reads those, and decides what is not valid JSON."""
    value = _UNREAD
    if type(raw) is bytes and (exact_ints(raw) if exact is None else exact):
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # NaN, a lone surrogate, a BOM, nesting past 1024...: the json module reads it or says why not
    if value is _UNREAD:
        try:
            value = json.loads(raw)
        except RecursionError:
            return None, "nested too deeply to read"
        except (ValueError, UnicodeDecodeError) as err:
            return None, f"not valid JSON ({str(err).split(':')[0]})"
    # nesting is at most the number of brackets: only text with many of them is walked
    brackets = raw.count(b"[") + raw.count(b"{") if isinstance(raw, bytes) else raw.count("[") + raw.count("{")
    if brackets > MAX_DEPTH and _too_deep(value):
        return None, f"nested deeper than {MAX_DEPTH} levels"
    return value, None


def _too_deep(value: Any) -> bool:
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item if isinstance(v, (dict, list)))
    return False


def _too_long(file: str, size: int, number: int) -> Problem:
    return Problem(file, f"{size >> 20} MB, longer than the {MAX_LINE_BYTES >> 20} MB a record may be: left out",
                   number)


def read_jsonl(data: bytes, file: str) -> tuple[list[tuple[int, dict]], list[Problem], int]:
    """Every JSON object line of a JSONL source with its line number; problems for the rest.

    An unterminated last line is read if it is whole JSON (a writer that never wrote the newline)
    and otherwise reported as cut off or still being written; `consumed` stops before it then. A line
    longer than MAX_LINE_BYTES is named and left out unread: parsed, it would take ~9 times its size.
    Lines are cut from `data` one at a time, so no second copy of the file is held.
    """
    out: list[tuple[int, dict]] = []
    problems: list[Problem] = []
    consumed = data.rfind(b"\n") + 1
    start = number = 0
    while start < consumed:
        stop = data.index(b"\n", start, consumed)
        number += 1
        if stop - start > MAX_LINE_BYTES:
            problems.append(_too_long(file, stop - start, number))
            start = stop + 1
            continue
        raw, start = data[start:stop], stop + 1
        if not raw.strip():
            continue
        value, reason = loads(raw)
        if reason is None and not isinstance(value, dict):
            reason = "not a JSON object"
        if reason:
            problems.append(Problem(file, reason, number))
        else:
            out.append((number, value))
    tail = len(data) - consumed
    if tail > MAX_LINE_BYTES:
        problems.append(_too_long(file, tail, number + 1))
    elif data[consumed:].strip():
        value, reason = loads(data[consumed:])
        if reason is None and isinstance(value, dict):
            out.append((number + 1, value))
            consumed = len(data)
        else:
            problems.append(Problem(file, "last line is cut off (a write was interrupted or is still in "
                                          "progress); it is imported once complete", number + 1))
    return out, problems, consumed


def text_of(value: Any) -> str:
    """Text of a message content: a string, or the text of a list of content blocks."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        pieces = []
        for block in value:
            if isinstance(block, str):
                pieces.append(block)
            elif isinstance(block, dict):
                kind = block.get("type")
                if isinstance(block.get("text"), str):
                    pieces.append(block["text"])
                elif kind in ("image", "input_image", "image_url"):
                    pieces.append("[image]")
                elif kind == "document":
                    pieces.append("[document]")
        return "\n".join(pieces)
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        return value["text"]
    return json.dumps(value, ensure_ascii=False)


def arguments_text(value: Any) -> str:
    """Tool-call arguments as the JSON string our records keep (a string stays exactly as it was)."""
    if isinstance(value, str):
        return value
    return json.dumps(value if value is not None else {}, ensure_ascii=False)


def as_int(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value == value:
        return int(value)
    return 0
