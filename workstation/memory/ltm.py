"""Long-term memory: persistent JSON values by namespace and key, shared by every process.

Writes are buffered in the writing process (read-your-writes from the buffer)
and sent to the owner in batches; `fence()` returns once every earlier write
is committed, so any process reads it afterwards. Each write carries the
writer's clock: the newest write wins whatever order batches land in, which
makes a batch retried after an owner crash harmless, and deletes leave a
tombstone for the same reason.

Reads are served by an owner-side cache that mirrors the table (all of it
while it holds under COMPLETE_LIMIT rows, otherwise the keys recently read),
because a DuckDB point query costs about a millisecond on its own.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from itertools import repeat
from json.encoder import encode_basestring
from operator import add, itemgetter
from typing import Any

from .. import scrub
from ..store.broker import owner_state, readonly
from .episodic import json_encoder
from .errors import MemoryKeyError, MemoryValueError
from .flusher import BufferedWriter, flusher
from .stm import MISSING

log = logging.getLogger(__name__)

DEFAULT_NAMESPACE = "default"
FLUSH_AT = 20_000  # pending writes that wake the background flush at once
BLOCK_AT = 200_000  # pending writes at which set() flushes inline (back-pressure)
COMPLETE_LIMIT = 250_000  # rows the owner cache mirrors entirely

ABSENT: Any = object()  # a default that asks get() to return it instead of raising

Row = tuple[str, str, int, str, "str | None"]  # namespace, key, stamp, writer, JSON text (None: deleted)
Batch = dict[tuple[str, str], tuple[int, "str | None"]]  # (namespace, key) -> (stamp, JSON text or None)

_stamp_lock = threading.Lock()
_last_stamp = 0


def next_stamp() -> int:
    """Wall-clock nanoseconds, strictly increasing within this process."""
    global _last_stamp
    with _stamp_lock:
        now = time.time_ns()
        _last_stamp = now if now > _last_stamp else _last_stamp + 1
        return _last_stamp


_encode = json_encoder()


def encode(value: Any, key: str) -> str:
    """`value` as JSON text, or MemoryValueError naming `key`."""
    try:
        kind = value.__class__
        if kind is str:
            text = encode_basestring(value)
        elif kind is int:
            text = int.__repr__(value)
        else:
            text = _encode(value)
        if not text.isascii():
            text.encode("utf-8")  # an unpaired surrogate would poison the whole batch in DuckDB
        return text
    except UnicodeEncodeError:
        raise MemoryValueError(f"ltm value for {key!r} is not valid Unicode (an unpaired surrogate)") from None
    except RecursionError:
        raise MemoryValueError(f"ltm value for {key!r} is not JSON: it refers to itself "
                               "or is nested too deeply") from None
    except (TypeError, ValueError) as err:
        raise MemoryValueError(f"ltm value for {key!r} is not JSON: {err}") from None


def parse_value(text: str, *, bare_word: bool = False, hint: str = "quote text as '\"text\"'") -> Any:
    """A value a person typed, as JSON; with bare_word, text that is not JSON is that string. Past the
    parser's limits (nesting, an integer of more digits than Python converts) MemoryValueError, one line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        if bare_word:
            return text
        raise MemoryValueError(f"value is not JSON ({err.msg} at column {err.colno}); {hint}") from None
    except RecursionError:
        raise MemoryValueError(f"value nests too deeply to parse as JSON: flatten it, or {hint}") from None
    except ValueError:  # int_max_str_digits; its own message names a Python setting, not what to do
        raise MemoryValueError(f"value holds an integer of more than {sys.get_int_max_str_digits()} digits; "
                               f"{hint}") from None


def check_key(key: Any, what: str = "key") -> str:
    if not isinstance(key, str) or not key:
        raise MemoryKeyError(f"memory {what} must be a non-empty string, got {key!r}")
    if key.isascii():
        return key
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise MemoryKeyError(f"memory {what} {key!r} is not valid Unicode (an unpaired surrogate)") from None
    return key


class LTM(BufferedWriter):
    """The LTM tier as seen from one process; thread-safe, with its own lock."""

    _tier = "LTM"

    def __init__(self, db, writer: str = "") -> None:
        self.db = db
        self.writer = writer or f"pid{os.getpid()}"
        self._lock = threading.Lock()  # guards the buffers only: never held across I/O
        self._pending: Batch = {}
        self._inflight: Batch = {}
        super().__init__()

    # -- reads

    def get(self, key: str, namespace: str = DEFAULT_NAMESPACE, default: Any = MISSING) -> Any:
        """The value; a missing key raises MemoryKeyError unless `default` is given."""
        ident = (check_key(namespace, "namespace"), check_key(key))
        with self._lock:
            entry = self._pending.get(ident) or self._inflight.get(ident)
        text = entry[1] if entry is not None else self.db.call(ltm_get, *ident)
        if text is None:
            if default is MISSING:
                raise MemoryKeyError(f"no ltm key {key!r} in namespace {namespace!r}")
            return default
        return json.loads(text)

    def list(self, namespace: str | None = None, prefix: str = "", limit: int | None = None) -> list[dict]:
        """Live entries (fences first, so this process's writes are included)."""
        self.fence()
        rows = self.db.call(ltm_list, namespace, prefix, limit)
        return [{"namespace": ns, "key": k, "value": json.loads(v), "updated_at": at, "updated_by": by}
                for ns, k, v, at, by in rows]

    def namespaces(self) -> dict[str, int]:
        self.fence()
        return dict(self.db.call(ltm_namespaces))

    # -- writes

    def set(self, key: str, value: Any, namespace: str = DEFAULT_NAMESPACE) -> None:
        if namespace is not DEFAULT_NAMESPACE:
            check_key(namespace, "namespace")
        self._put((namespace, check_key(key)), encode(scrub.mask_data(value), key))  # no secret reaches the store

    def delete(self, key: str, namespace: str = DEFAULT_NAMESPACE) -> bool:
        """Delete a key; returns whether it existed."""
        existed = self.get(key, namespace, ABSENT) is not ABSENT
        self._put((check_key(namespace, "namespace"), key), None)
        return existed

    def _put(self, ident: tuple[str, str], text: str | None) -> None:
        entry = (next_stamp(), text)
        with self._lock:
            self._pending[ident] = entry
            size = len(self._pending)
        if size >= FLUSH_AT:
            if size >= BLOCK_AT:
                self.fence()
            else:
                flusher().wake()

    @property
    def pending(self) -> int:
        return len(self._pending) + len(self._inflight)

    def _has_pending(self) -> bool:
        return bool(self._pending)

    def _flush_locked(self) -> None:
        with self._lock:
            if not self._pending:
                return
            batch, self._pending = self._pending, {}
            self._inflight = batch
        try:
            self.db.call(ltm_write_batch, self.writer, batch)
        except BaseException:
            with self._lock:  # keep the data; writes made meanwhile are newer and win
                for ident, entry in batch.items():
                    self._pending.setdefault(ident, entry)
                self._inflight = {}
            raise
        with self._lock:
            self._inflight = {}


# ---------------------------------------------------------------- owner side

class _Cache:
    """Owner-side mirror of ltm: (namespace, key) -> (stamp, JSON text or None, writer)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rows: dict[tuple[str, str], tuple[int, str | None, str]] = {}
        self.complete = False  # rows holds every row of the table, tombstones included
        self.newest = 0  # the highest stamp in rows while complete
        self.tried_load = False
        self.version = 0  # bumped by every committed write: a fill read before it is stale


def _cache(con) -> _Cache:
    cache: _Cache = owner_state("ltm.cache", _Cache)
    if not cache.tried_load:
        _load(con, cache)
    return cache


def _load(con, cache: _Cache) -> None:
    with cache.lock:
        if cache.tried_load:
            return
        version = cache.version
    (count,) = con.execute("SELECT count(*) FROM ltm").fetchone()
    rows = None
    if count <= COMPLETE_LIMIT:
        rows = {(ns, k): (stamp, None if deleted else (v if v is not None else "null"), by)
                for ns, k, v, deleted, stamp, by in
                con.execute("SELECT namespace, key, value, deleted, stamp, updated_by FROM ltm").fetchall()}
    with cache.lock:
        if cache.tried_load:
            return
        if rows is not None and cache.version == version:  # no write landed while we read
            cache.rows, cache.complete = rows, True
            cache.newest = max(map(itemgetter(0), rows.values()), default=0)
            cache.tried_load = True
        elif rows is None:
            cache.tried_load = True  # too big to mirror: cache keys as they are read
        # else a write raced the load: the next read tries again


@readonly
def ltm_get(con, namespace: str, key: str) -> str | None:
    cache = _cache(con)
    ident = (namespace, key)
    with cache.lock:
        entry = cache.rows.get(ident)
        if entry is not None or cache.complete:
            return entry[1] if entry is not None else None
        version = cache.version
    row = con.execute("SELECT value, deleted, stamp, updated_by FROM ltm WHERE namespace = ? AND key = ?",
                      [namespace, key]).fetchone()
    entry = (0, None, "") if row is None else (row[2], None if row[1] else (row[0] or "null"), row[3])
    with cache.lock:
        if cache.version == version:
            if len(cache.rows) >= COMPLETE_LIMIT:
                cache.rows.clear()
            cache.rows[ident] = entry
    return entry[1]


# A batch crosses into DuckDB as one string of JSON lines, which DuckDB parses far
# faster than it converts Python lists. A line without "w" is the batch's writer's.
_INSERT = """
    INSERT INTO ltm (namespace, key, value, deleted, stamp, updated_at, updated_by)
    SELECT e.n, e.k, CASE WHEN e.d THEN NULL ELSE coalesce(e.v, 'null'::JSON) END, coalesce(e.d, false), e.s,
           make_timestamp(e.s // 1000), coalesce(e.w, $writer)
    FROM (SELECT json_transform(unnest(string_split($blob, chr(10))),
          '{"n":"VARCHAR","k":"VARCHAR","s":"BIGINT","w":"VARCHAR","d":"BOOLEAN","v":"JSON"}') AS e)
"""
_UPSERT = _INSERT + """
    ON CONFLICT (namespace, key) DO UPDATE SET
        value = excluded.value, deleted = excluded.deleted, stamp = excluded.stamp,
        updated_at = excluded.updated_at, updated_by = excluded.updated_by
    WHERE excluded.stamp > ltm.stamp OR (excluded.stamp = ltm.stamp AND excluded.updated_by >= ltm.updated_by)
"""


class _Quoted(dict):
    """JSON string literals of names that repeat across a batch (namespaces, writers), each quoted once."""

    def __missing__(self, text: str) -> str:
        quoted = self[text] = encode_basestring(text)
        return quoted


def _lines(items) -> str:
    """JSON lines of (ident, (stamp, text)) items of one writer's batch."""
    ns = _Quoted()
    return "\n".join([
        f'{{"n":{ns[namespace]},"k":{encode_basestring(key)},"s":{stamp},"v":{text}}}' if text is not None else
        f'{{"n":{ns[namespace]},"k":{encode_basestring(key)},"s":{stamp},"d":true}}'
        for (namespace, key), (stamp, text) in items])


def ltm_write_batch(con, writer: str, batch: Batch) -> None:
    """Upsert one writer's batch, newest stamp winning; idempotent, so safe to retry.

    Keys the table does not hold yet take a plain INSERT, which costs DuckDB far less
    than ON CONFLICT; the owner cache, while it mirrors the whole table, tells them apart.
    """
    if not batch:
        return
    cache = _cache(con)
    with cache.lock:
        absent = batch.keys() - cache.rows.keys() if cache.complete else set()
    items = batch.items()
    if not absent:
        con.execute(_UPSERT, {"blob": _lines(items), "writer": writer})
    elif len(absent) == len(batch):
        _insert_then_upsert(con, cache, writer, _lines(items), "")
    else:
        _insert_then_upsert(con, cache, writer, _lines([item for item in items if item[0] in absent]),
                            _lines([item for item in items if item[0] not in absent]))
    stamps = list(map(itemgetter(0), batch.values()))
    # Cache entries are (stamp, text, writer): each (stamp, text) + (writer,), built in C.
    _remember(con, zip(batch.keys(), map(add, batch.values(), repeat((writer,)))), min(stamps), max(stamps))


def _insert_then_upsert(con, cache: _Cache, writer: str, new_rows: str, other_rows: str) -> None:
    import duckdb  # lazy: duckdb, +90 ms; runs in the database's owner only, clients never load it

    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(_INSERT, {"blob": new_rows, "writer": writer})
        if other_rows:
            con.execute(_UPSERT, {"blob": other_rows, "writer": writer})
        con.execute("COMMIT")
        return
    except duckdb.ConstraintException as err:  # the cache missed a row: distrust it, and upsert everything
        con.execute("ROLLBACK")
        log.warning("LTM cache disagreed with the table (%s); reloading it", str(err).splitlines()[0])
        with cache.lock:
            cache.rows, cache.complete, cache.tried_load = {}, False, False
            cache.version += 1
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute(_UPSERT, {"blob": "\n".join(filter(None, (new_rows, other_rows))), "writer": writer})


def ltm_write(con, rows: list[Row]) -> None:
    """Upsert rows of any writers, newest stamp winning; idempotent, so safe to retry."""
    if not rows:
        return
    q = _Quoted()
    blob = "\n".join([
        f'{{"n":{q[ns]},"k":{encode_basestring(key)},"s":{stamp},"w":{q[writer]},"v":{text}}}' if text is not None
        else f'{{"n":{q[ns]},"k":{encode_basestring(key)},"s":{stamp},"w":{q[writer]},"d":true}}'
        for ns, key, stamp, writer, text in rows])
    con.execute(_UPSERT, {"blob": blob, "writer": None})
    stamps = [row[2] for row in rows]
    _remember(con, [((ns, key), (stamp, text, writer)) for ns, key, stamp, writer, text in rows],
              min(stamps), max(stamps))


def _remember(con, entries, oldest: int, newest: int) -> None:
    """Apply committed writes to the owner cache, newest (stamp, writer) winning as in the table."""
    cache = _cache(con)
    with cache.lock:
        cache.version += 1
        rows = cache.rows
        if not cache.complete:
            for ident, _ in entries:
                rows.pop(ident, None)
            return
        if oldest > cache.newest:  # the usual case: every write is newer than the whole table
            rows.update(entries)
        else:
            for ident, entry in entries:
                old = rows.get(ident)
                if old is None or (entry[0], entry[2]) >= (old[0], old[2]):
                    rows[ident] = entry
        cache.newest = max(cache.newest, newest)
        if len(rows) > COMPLETE_LIMIT * 1.2:  # grown past mirroring: fall back to reads
            rows.clear()
            cache.complete = False


@readonly
def ltm_list(con, namespace: str | None, prefix: str, limit: int | None) -> list[tuple]:
    return con.execute(
        """SELECT namespace, key, coalesce(value, 'null'::JSON), epoch(updated_at), updated_by FROM ltm
           WHERE NOT deleted AND ($ns IS NULL OR namespace = $ns) AND starts_with(key, $prefix)
           ORDER BY namespace, key LIMIT $limit""",
        {"ns": namespace, "prefix": prefix or "", "limit": limit if limit is not None else 2**62}).fetchall()


@readonly
def ltm_namespaces(con) -> list[tuple[str, int]]:
    return con.execute("SELECT namespace, count(*) FROM ltm WHERE NOT deleted GROUP BY 1 ORDER BY 1").fetchall()
