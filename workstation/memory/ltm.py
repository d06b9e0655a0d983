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
import threading
import time
from typing import Any

from ..store.broker import owner_state, readonly
from .errors import MemoryKeyError, MemoryValueError
from .flusher import flusher
from .stm import MISSING

log = logging.getLogger(__name__)

DEFAULT_NAMESPACE = "default"
FLUSH_AT = 20_000  # pending writes that wake the background flush at once
BLOCK_AT = 200_000  # pending writes at which set() flushes inline (back-pressure)
COMPLETE_LIMIT = 250_000  # rows the owner cache mirrors entirely

ABSENT: Any = object()  # a default that asks get() to return it instead of raising

Row = tuple[str, str, int, str, "str | None"]  # namespace, key, stamp, writer, JSON text (None: deleted)

_stamp_lock = threading.Lock()
_last_stamp = 0


def next_stamp() -> int:
    """Wall-clock nanoseconds, strictly increasing within this process."""
    global _last_stamp
    with _stamp_lock:
        now = time.time_ns()
        _last_stamp = now if now > _last_stamp else _last_stamp + 1
        return _last_stamp


_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


def encode(value: Any, key: str) -> str:
    """`value` as JSON text, or MemoryValueError naming `key`."""
    try:
        text = _encode(value)
        if not text.isascii():
            text.encode("utf-8")  # an unpaired surrogate would poison the whole batch in DuckDB
        return text
    except UnicodeEncodeError:
        raise MemoryValueError(f"ltm value for {key!r} is not valid Unicode (an unpaired surrogate)") from None
    except (TypeError, ValueError) as err:
        raise MemoryValueError(f"ltm value for {key!r} is not JSON: {err}") from None


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


class LTM:
    """The LTM tier as seen from one process; thread-safe, with its own lock."""

    def __init__(self, db, writer: str = "") -> None:
        self.db = db
        self.writer = writer or f"pid{os.getpid()}"
        self._lock = threading.Lock()  # guards the buffers only: never held across I/O
        self._flush_lock = threading.Lock()  # one batch in flight at a time
        self._pending: dict[tuple[str, str], tuple[int, str | None]] = {}
        self._inflight: dict[tuple[str, str], tuple[int, str | None]] = {}
        flusher().register(self)

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
        self._put((namespace, check_key(key)), encode(value, key))

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
        if size >= BLOCK_AT:
            self.fence()
        elif size >= FLUSH_AT:
            flusher().wake()

    @property
    def pending(self) -> int:
        return len(self._pending) + len(self._inflight)

    def fence(self) -> None:
        """Return once every earlier write of this process is committed and visible everywhere."""
        with self._flush_lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        with self._lock:
            if not self._pending:
                return
            batch, self._pending = self._pending, {}
            self._inflight = batch
        rows = [(ns, key, stamp, self.writer, text) for (ns, key), (stamp, text) in batch.items()]
        try:
            self.db.call(ltm_write, rows)
        except BaseException:
            with self._lock:  # keep the data; writes made meanwhile are newer and win
                for ident, entry in batch.items():
                    self._pending.setdefault(ident, entry)
                self._inflight = {}
            raise
        with self._lock:
            self._inflight = {}

    def background_flush(self) -> None:
        if not self._pending or not self._flush_lock.acquire(blocking=False):
            return
        try:
            self._flush_locked()
        except Exception as err:  # data stays buffered; the next fence retries and raises
            log.warning("background LTM flush failed, will retry: %s", err)
        finally:
            self._flush_lock.release()

    def close(self) -> None:
        try:
            self.fence()
        finally:
            flusher().unregister(self)


# ---------------------------------------------------------------- owner side

class _Cache:
    """Owner-side mirror of ltm: (namespace, key) -> (stamp, writer, JSON text or None)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rows: dict[tuple[str, str], tuple[int, str, str | None]] = {}
        self.complete = False  # rows holds every row of the table, tombstones included
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
        rows = {(ns, k): (stamp, by, None if deleted else (v if v is not None else "null"))
                for ns, k, v, deleted, stamp, by in
                con.execute("SELECT namespace, key, value, deleted, stamp, updated_by FROM ltm").fetchall()}
    with cache.lock:
        if cache.tried_load:
            return
        if rows is not None and cache.version == version:  # no write landed while we read
            cache.rows, cache.complete = rows, True
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
            return entry[2] if entry is not None else None
        version = cache.version
    row = con.execute("SELECT value, deleted, stamp, updated_by FROM ltm WHERE namespace = ? AND key = ?",
                      [namespace, key]).fetchone()
    entry = (0, "", None) if row is None else (row[2], row[3], None if row[1] else (row[0] or "null"))
    with cache.lock:
        if cache.version == version:
            if len(cache.rows) >= COMPLETE_LIMIT:
                cache.rows.clear()
            cache.rows[ident] = entry
    return entry[2]


_UPSERT = """
    INSERT INTO ltm (namespace, key, value, deleted, stamp, updated_at, updated_by)
    SELECT e.n, e.k, CASE WHEN e.d THEN NULL ELSE coalesce(e.v, 'null'::JSON) END, e.d, e.s,
           make_timestamp(e.s // 1000), e.w
    FROM (SELECT json_transform(unnest(string_split($1, chr(10))),
          '{"n":"VARCHAR","k":"VARCHAR","s":"BIGINT","w":"VARCHAR","d":"BOOLEAN","v":"JSON"}') AS e)
    ON CONFLICT (namespace, key) DO UPDATE SET
        value = excluded.value, deleted = excluded.deleted, stamp = excluded.stamp,
        updated_at = excluded.updated_at, updated_by = excluded.updated_by
    WHERE excluded.stamp > ltm.stamp OR (excluded.stamp = ltm.stamp AND excluded.updated_by >= ltm.updated_by)
"""


def _blob(rows: list[Row]) -> str:
    """The batch as JSON lines for DuckDB to parse (one string crosses into DuckDB, not 5 lists)."""
    quoted: dict[str, str] = {}  # namespaces and writers repeat across a batch
    lines = []
    for ns, key, stamp, writer, text in rows:
        qns = quoted.get(ns) or quoted.setdefault(ns, json.dumps(ns))
        qw = quoted.get(writer) or quoted.setdefault(writer, json.dumps(writer))
        tail = ',"d":true}' if text is None else f',"d":false,"v":{text}}}'
        lines.append(f'{{"n":{qns},"k":{json.dumps(key)},"s":{stamp},"w":{qw}{tail}')
    return "\n".join(lines)


def ltm_write(con, rows: list[Row]) -> None:
    """Upsert a batch, newest stamp winning; idempotent, so safe to retry."""
    con.execute(_UPSERT, [_blob(rows)])
    cache = _cache(con)
    with cache.lock:
        cache.version += 1
        if cache.complete:
            for ns, key, stamp, writer, text in rows:
                old = cache.rows.get((ns, key))
                if old is None or (stamp, writer) >= (old[0], old[1]):
                    cache.rows[(ns, key)] = (stamp, writer, text)
            if len(cache.rows) > COMPLETE_LIMIT * 1.2:  # grown past mirroring: fall back to reads
                cache.rows.clear()
                cache.complete = False
        else:
            for ns, key, *_ in rows:
                cache.rows.pop((ns, key), None)


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
