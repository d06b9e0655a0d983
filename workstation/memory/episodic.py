"""Episodic memory: the append-only log of what every execution did.

The runtime calls `record(...)` at each operation boundary, or wraps work in
`with episodic.operation(TOOL_CALL, "read_lines", args=...) as op:` which
records an `op_start` event on entry and, on exit, one event of the given type
carrying the duration, `ok` and the error if one escaped. Events recorded
inside an operation get its start event's id as `parent`.

Appends are encoded at once (so bad data fails in the caller), buffered, and
sent to the owner in batches every ~100 ms and on fence/close. Each batch has
a client-made id recorded in `event_batches`, so a batch retried after an
owner crash is applied exactly once. Readers see a consistent snapshot: each
query is one DuckDB statement.

The `data` fields each event type carries are documented in EVENT_TYPES; the
reflection views (reflect.py) rely on them.
"""

from __future__ import annotations

import contextvars
import itertools
import json
import logging
import os
import re
import time
from collections import deque
from collections.abc import Callable
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]  # C speedups, no stubs
from typing import Any, Literal

from .. import scrub
from ..store.broker import readonly
from .errors import MemoryKeyError, MemoryValueError
from .flusher import BufferedWriter, flusher

log = logging.getLogger(__name__)

# Event types. `name` is the event's subject; other fields go in `data`.
OP = "op"  # a generic operation: operation(OP, name) ends with an op_end event
OP_START = "op_start"
OP_END = "op_end"
TURN = "turn"
TOOL_CALL = "tool_call"
MODEL_CALL = "model_call"
MEMORY_HIT = "memory_hit"
MEMORY_MISS = "memory_miss"
FILE_READ = "file_read"
FILE_EDIT = "file_edit"
READ_AVOIDED = "read_avoided"
DECISION_LOGGED = "decision_logged"
DECISION_REUSED = "decision_reused"
COMPACTION = "compaction"
REDACTION = "redaction"
ERROR = "error"

EVENT_TYPES: dict[str, tuple[str, str]] = {  # type -> (name holds, data fields)
    OP_START: ("operation name", "op: the type of the operation's end event; plus the caller's fields"),
    OP_END: ("operation name", "error (on failure); plus the caller's fields; duration_ms and ok are columns"),
    TURN: ("role (user | assistant)", "chars, turn_id"),
    TOOL_CALL: ("tool", "tool, args (object), result_chars, outcome (ok | error | denied | timeout), error"),
    MODEL_CALL: ("model", "model, context_tokens, fallback_from; tokens_in/out, cost_usd, duration_ms are columns"),
    MEMORY_HIT: ("key", "tier (stm | ltm | kmap), namespace"),
    MEMORY_MISS: ("key", "tier, namespace"),
    FILE_READ: ("path", "path, lines ([start, end], 1-indexed), chars, served_from (memory | disk)"),
    FILE_EDIT: ("path", "path, lines ([start, end] of the new text), lines_changed"),
    READ_AVOIDED: ("path", "path, reason, chars_saved"),
    DECISION_LOGGED: ("decision id", "decision, files"),
    DECISION_REUSED: ("decision id", "(none required)"),
    COMPACTION: ("session slug", "first_turn, last_turn, model, reason, record_id, context_tokens_before, "
                                 "context_tokens_after"),
    REDACTION: ("tool", "turn, chars_before, chars_after, record_id"),
    ERROR: ("where it happened", "error"),
}

FLUSH_AT = 20_000  # buffered events that wake the background flush at once
BATCH_MAX = 50_000  # events per call to the owner
BLOCK_AT = 500_000  # buffered events at which record() flushes inline (back-pressure)

_current_op: contextvars.ContextVar[str | None] = contextvars.ContextVar("ws_current_op", default=None)


def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def json_encoder() -> Callable[[Any], str]:
    """Compact JSON (no NaN, UTF-8 kept) from json's C encoder, built once (LTM uses it too).

    JSONEncoder.encode() builds a new C encoder on every call, which costs as much
    as encoding a small event. No circular-reference markers: a cycle raises
    RecursionError, which record() reports like any other non-JSON value.
    """
    if c_make_encoder is None:  # an interpreter without the C accelerator
        return json.JSONEncoder(separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode
    encode = c_make_encoder(None, _not_json, encode_basestring, None, ":", ",", False, False, False)
    return lambda value: "".join(encode(value, 0))


_encode = json_encoder()

def _reversed_name(name: str) -> str:
    return "".join(reversed(re.findall(r".\??", name)))  # "api_?key" -> "yek_?ipa"


# Every key scrub.SECRET_FIELD matches shows in compact JSON text as `"…NAME":` with NAME right after `"`,
# `_` or `-` and maybe an escaped newline before the closing quote (`$` allows one): escaping leaves NAME
# alone and the JSON text of a string value never holds an unescaped `":`. Searching the text reversed, so
# the pattern starts with the literal `:"` the regex engine skips to, is several times cheaper than walking
# the data; a match (rarely a false one) sends the data through the exact scrub.redact_fields().
_SECRET_IN_REVERSED_JSON = re.compile(
    rf':"(?:n\\)?(?:{"|".join(map(_reversed_name, scrub.SECRET_FIELD_NAMES))})["_-]', re.IGNORECASE)


def _new_prefix() -> str:
    return os.urandom(6).hex()


_id_prefix = _new_prefix()
_id_counter = itertools.count(1)


def new_id() -> str:
    """A process-unique, practically globally unique id (random prefix + counter)."""
    return f"{_id_prefix}{next(_id_counter):x}"


def _reset_ids_in_child() -> None:
    global _id_prefix, _id_counter
    _id_prefix, _id_counter = _new_prefix(), itertools.count(1)


os.register_at_fork(after_in_child=_reset_ids_in_child)


_I32 = 2**31


def _int32(value: Any, field: str) -> str:
    """JSON text of an INTEGER column: DuckDB would silently store NULL for a non-integer or one out of range."""
    if value.__class__ is int or (isinstance(value, int) and not isinstance(value, bool)):
        if -_I32 <= value < _I32:
            return int.__repr__(value)
        raise MemoryValueError(f"episodic {field} is out of range for a 32-bit integer, got {value!r}")
    raise MemoryValueError(f"episodic {field} must be a number (integer), got {value!r}")


def _double(value: Any, field: str) -> str:
    """JSON text of a DOUBLE column (finite: JSON has no NaN or infinity)."""
    if value.__class__ is not float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise MemoryValueError(f"episodic {field} must be a number, got {value!r}")
        try:
            value = float(value)
        except OverflowError:
            raise MemoryValueError(f"episodic {field} is too large for a double, got {value!r}") from None
    if value - value == 0.0:  # false for inf and nan
        return float.__repr__(value)
    raise MemoryValueError(f"episodic {field} must be a finite number, got {value!r}")


_type_fields: dict[str, str] = {}  # event type -> its JSON field, e.g. ',"y":"tool_call"'


def _type_field(type: Any) -> str:
    if not isinstance(type, str) or not type:
        raise MemoryValueError(f"episodic event type must be a non-empty string, got {type!r}")
    field = f',"y":{encode_basestring(type)}'
    if type.__class__ is str and len(_type_fields) < 1000:  # types are a handful of constants
        _type_fields[type] = field
    return field


def _valid_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


class Episodic(BufferedWriter):
    """The episodic tier as seen from one execution; thread-safe, with its own (flush) lock."""

    _tier = "episodic"

    def __init__(self, db, session: str = "", flow: str = "", *, step: int | None = None) -> None:
        for label, text in (("session", session), ("flow", flow)):
            if not isinstance(text, str) or not _valid_unicode(text):
                raise MemoryValueError(f"episodic {label} must be a valid Unicode string, got {text!r}")
        self.db = db
        self.session = session
        self.flow = flow
        self.step = step  # the agent's current step, used when record() is not told one
        # Appended to by record() and emptied from the front by the flush, both single list
        # operations that are atomic, so record() takes no lock.
        self._buffer: list[str] = []
        self._batches: deque[tuple[str, list[str]]] = deque()  # sealed, not yet acknowledged
        super().__init__()

    # -- writing

    def record(self, type: str, name: str = "", *, step: int | None = None, parent: str | None = None,
               duration_ms: float | None = None, tokens_in: int | None = None, tokens_out: int | None = None,
               cost_usd: float | None = None, ok: bool | None = None, event_id: str | None = None,
               **data: Any) -> str:
        """Append one event; returns its id (made here unless given).

        `data` must be JSON; values under secret-looking keys are redacted.
        The event is encoded here, as one JSON line, so bad data fails in the caller.
        """
        type_field = _type_fields.get(type) if type.__class__ is str else None
        if type_field is None:
            type_field = _type_field(type)
        if event_id:
            event_id = str(event_id)
            line = f'{{"i":{encode_basestring(event_id)},"t":{time.time_ns() // 1000}{type_field}'
        else:
            event_id = f"{_id_prefix}{next(_id_counter):x}"  # new_id(), inline: this is the hot path
            line = f'{{"i":"{event_id}","t":{time.time_ns() // 1000}{type_field}'
        if name:
            line += f',"n":{encode_basestring(str(name))}'
        if step is None:
            step = self.step
        if step is not None:
            line += f',"s":{step}' if step.__class__ is int and -_I32 <= step < _I32 else f',"s":{_int32(step, "step")}'
        parent = parent or _current_op.get()
        if parent:
            line += f',"p":{encode_basestring(str(parent))}'
        if duration_ms is not None:
            line += f',"d":{duration_ms!r}' if duration_ms.__class__ is float and duration_ms - duration_ms == 0.0 \
                else f',"d":{_double(duration_ms, "duration_ms")}'
        if tokens_in is not None:
            line += f',"ti":{_int32(tokens_in, "tokens_in")}'
        if tokens_out is not None:
            line += f',"to":{_int32(tokens_out, "tokens_out")}'
        if cost_usd is not None:
            line += f',"c":{_double(cost_usd, "cost_usd")}'
        if ok is not None:
            line += ',"o":true' if ok else ',"o":false'
        try:
            if data:
                text = _encode(data)
                if _SECRET_IN_REVERSED_JSON.search(text[::-1]):  # rare: redact a copy, key by key
                    text = _encode(scrub.redact_fields(data))
                text = scrub.mask_values(text)  # a known key's value, wherever it hides in the data
                line += f',"x":{text}}}'
            else:
                line += "}"
            if not line.isascii():
                line.encode("utf-8")  # an unpaired surrogate would poison the whole batch in DuckDB
        except UnicodeEncodeError:
            raise MemoryValueError(f"episodic {type} event is not valid Unicode (an unpaired surrogate)") from None
        except RecursionError:
            raise MemoryValueError(f"episodic {type} event data is not JSON: it refers to itself "
                                   "or is nested too deeply") from None
        except (TypeError, ValueError) as err:
            raise MemoryValueError(f"episodic {type} event data is not JSON: {err}") from None
        buffer = self._buffer
        buffer.append(line)
        size = len(buffer)
        if size >= FLUSH_AT:
            if size >= BLOCK_AT:
                self.fence()
            else:
                flusher().wake()
        return event_id

    def operation(self, type: str = OP, name: str = "", **data: Any) -> "Operation":
        """`with ep.operation(TOOL_CALL, "grep", args={...}) as op: ...; op.set(result_chars=n)`."""
        return Operation(self, type, name, data)

    @property
    def pending(self) -> int:
        return len(self._buffer) + sum(len(lines) for _, lines in self._batches)

    def _has_pending(self) -> bool:
        return bool(self._buffer or self._batches)

    def _flush_locked(self) -> None:
        buffer = self._buffer
        count = len(buffer)
        for start in range(0, count, BATCH_MAX):  # sealed batches keep their id across retries
            self._batches.append((new_id(), buffer[start:min(start + BATCH_MAX, count)]))
        del buffer[:count]  # events recorded meanwhile stay queued
        while self._batches:
            batch_id, lines = self._batches[0]
            self.db.call(append_events, batch_id, self.session, self.flow, "\n".join(lines), len(lines))
            self._batches.popleft()

    # -- reading (fences first, so this execution's own events are included)

    def get(self, event_id: str) -> dict:
        self.fence()
        row = self.db.call(event_get, event_id)
        if row is None:
            raise MemoryKeyError(f"no episodic event with id {event_id!r}")
        return row

    def query(self, *, session: str | None = None, flow: str | None = None, types: list[str] | None = None,
              since: float | None = None, limit: int = 200) -> list[dict]:
        """Newest events first; `since` is epoch seconds."""
        self.fence()
        return self.db.call(events_query, session, flow, list(types) if types else None, since, limit)


class Operation:
    """An operation in flight; `set()` adds fields to the end event."""

    def __init__(self, episodic: Episodic, type: str, name: str, data: dict[str, Any]) -> None:
        self.episodic = episodic
        self.type = type
        self.name = name
        self.data = data
        self.end: dict[str, Any] = {}
        self.id = ""
        self.ok: bool | None = None

    def set(self, **fields: Any) -> None:
        """Fields for the end event: tokens_in, tokens_out, cost_usd, ok, or data."""
        self.end.update(fields)

    def __enter__(self) -> "Operation":
        self.id = self.episodic.record(OP_START, self.name, op=self.type, **self.data)
        self._token = _current_op.set(self.id)
        self._started = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb) -> Literal[False]:
        duration_ms = (time.perf_counter() - self._started) * 1000
        _current_op.reset(self._token)
        fields = {**self.data, **self.end}
        ok = fields.pop("ok", None)
        if exc_type is not None:
            ok = False
            fields["error"] = " ".join(f"{exc_type.__name__}: {exc}".split())[:500]
        elif ok is None:
            ok = True
        self.ok = ok
        # The end event's id is the start's plus "-end", which is how the operations view pairs them.
        self.episodic.record(OP_END if self.type == OP else self.type, self.name, parent=self.id,
                             duration_ms=duration_ms, ok=ok, event_id=self.id + "-end", **fields)
        return False  # never swallow the exception


# ---------------------------------------------------------------- owner side

_EVENT_STRUCT = ('{"i":"VARCHAR","t":"BIGINT","y":"VARCHAR","n":"VARCHAR","s":"INTEGER","p":"VARCHAR",'
                 '"d":"DOUBLE","ti":"INTEGER","to":"INTEGER","c":"DOUBLE","o":"BOOLEAN","x":"JSON"}')

_INSERT = f"""
    INSERT INTO events (id, ts, session, flow, step, parent, type, name, duration_ms,
                        tokens_in, tokens_out, cost_usd, ok, data)
    SELECT e.i, make_timestamp(e.t), $session, $flow, e.s, e.p, e.y, coalesce(e.n, ''), e.d,
           e.ti, e.to, e.c, e.o, e.x
    FROM (SELECT json_transform(unnest(string_split($blob, chr(10))), '{_EVENT_STRUCT}') AS e)
"""


def append_events(con, batch_id: str, session: str, flow: str, blob: str, count: int) -> int:
    """Insert one batch unless it was applied before; returns how many events were added."""
    if con.execute("SELECT 1 FROM event_batches WHERE id = ?", [batch_id]).fetchone():
        return 0  # a retry of a batch that did land before its owner died
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(_INSERT, {"session": session, "flow": flow, "blob": blob})
        con.execute("INSERT INTO event_batches VALUES (?, ?, make_timestamp(?))",
                    [batch_id, count, time.time_ns() // 1000])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return count


_COLUMNS = ("id", "ts", "session", "flow", "step", "parent", "type", "name", "duration_ms",
            "tokens_in", "tokens_out", "cost_usd", "ok", "data")
_SELECT = ("SELECT id, epoch(ts), session, flow, step, parent, type, name, duration_ms, "
           "tokens_in, tokens_out, cost_usd, ok, data FROM events")


def _row(values: tuple) -> dict:
    row = dict(zip(_COLUMNS, values))
    row["data"] = json.loads(row["data"]) if row["data"] is not None else {}
    return row


@readonly
def event_get(con, event_id: str) -> dict | None:
    found = con.execute(f"{_SELECT} WHERE id = ?", [event_id]).fetchone()
    return _row(found) if found else None


@readonly
def events_query(con, session: str | None, flow: str | None, types: list[str] | None,
                 since: float | None, limit: int) -> list[dict]:
    rows = con.execute(
        f"""{_SELECT} WHERE ($session IS NULL OR session = $session) AND ($flow IS NULL OR flow = $flow)
            AND ($types IS NULL OR list_contains($types, type))
            AND ($since IS NULL OR ts >= make_timestamp(CAST($since * 1e6 AS BIGINT)))
            ORDER BY ts DESC, id DESC LIMIT $limit""",
        {"session": session, "flow": flow, "types": types, "since": since, "limit": limit}).fetchall()
    return [_row(r) for r in rows]
