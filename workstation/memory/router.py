"""The memory router: one API over the three tiers (QMEM / UMEM / FENCE).

    mem = Memory(db, session="s1", flow="main")
    mem.umem("ltm", "style.quotes", "double")     # buffered; fence("ltm") makes it durable
    mem.qmem("ltm", "style.quotes")               # -> "double" (records memory_hit)
    with mem.operation(TOOL_CALL, "grep", args={"pattern": "x"}) as op: ...
    mem.close()                                   # execution ends: flush, STM dropped

Each tier has its own lock, so a slow LTM write never blocks an STM read.

STM lives in the executing process. Another process (the CLI) can only see
what an execution chose to publish: `fence("stm")` copies a JSON view of STM
to the owner's memory (never to disk), `close()` withdraws it, and the owner
forgets snapshots of dead processes. `workstation memory get --tier stm` reads
those snapshots and says so when there are none.
"""

from __future__ import annotations

import builtins
import json
import os
from typing import Any

from ..store.broker import readonly
from . import reflect
from .decisions import TEAM_ACCEPTED, Decision, Decisions
from .episodic import MEMORY_HIT, MEMORY_MISS, OP, Episodic, Operation, new_id
from .errors import MemoryKeyError, MemoryTierError
from .ltm import ABSENT, DEFAULT_NAMESPACE, LTM, check_key
from .stm import MISSING, STM, stm_publish, stm_published, stm_withdraw

TIERS = ("stm", "ltm", "episodic")


def check_tier(tier: Any) -> str:
    if tier not in TIERS:
        raise MemoryTierError(f"unknown memory tier {tier!r}; tiers are stm, ltm, episodic")
    return tier


def _append_only(action: str) -> MemoryTierError:
    return MemoryTierError(f"episodic memory is append-only: {action} is refused "
                           "(events are recorded by the runtime)")


class Memory:
    """The memory of one execution (a session's run)."""

    def __init__(self, db, session: str = "", flow: str = "", *, writer: str = "",
                 record_lookups: tuple[str, ...] = ("ltm",), team_authors: tuple[str, ...] = ()) -> None:
        self.db = db
        self.session = session
        self.flow = flow
        self.execution = new_id()
        self.stm = STM()
        self.ltm = LTM(db, writer or session or f"pid{os.getpid()}")
        self.episodic = Episodic(db, session, flow)
        self.decision_log = Decisions(db, self.episodic, team_authors)
        self.team_authors = list(team_authors)  # teammates whose memory counts unasked ([team] accept_authors)
        self.record_lookups = frozenset(record_lookups)  # tiers whose qmem records memory_hit/miss
        self._published = False
        self._closed = False
        db.add_close_hook(self.close)

    @property
    def step(self) -> int | None:
        return self.episodic.step

    @step.setter
    def step(self, value: int | None) -> None:
        self.episodic.step = value

    # -- QMEM / UMEM / FENCE

    def qmem(self, tier: str, key: str, *, namespace: str = DEFAULT_NAMESPACE, default: Any = MISSING) -> Any:
        """Read a value; a missing key raises MemoryKeyError unless `default` is given."""
        check_tier(tier)
        check_key(key)
        if tier == "stm":
            value = self.stm.get(key, MISSING)
        elif tier == "ltm":
            value = self.ltm.get(key, namespace, ABSENT)
            if value is ABSENT:  # a teammate's value, once accepted, says whose it is
                found = self.db.call(team_ltm_get, namespace, key, self.team_authors)
                value = MISSING if found is None else {"team_value": json.loads(found[0]), "author": found[1],
                                                       "origin": found[2]}
        else:
            try:
                value = self.episodic.get(key)
            except MemoryKeyError:
                value = MISSING
        if tier in self.record_lookups:
            self.episodic.record(MEMORY_HIT if value is not MISSING else MEMORY_MISS, key,
                                 tier=tier, namespace=namespace if tier == "ltm" else "")
        if value is not MISSING:
            return value
        if default is not MISSING:
            return default
        if tier == "stm":
            raise MemoryKeyError(f"no stm key {key!r} in this execution")
        if tier == "ltm":
            raise MemoryKeyError(f"no ltm key {key!r} in namespace {namespace!r}")
        raise MemoryKeyError(f"no episodic event with id {key!r}")

    def umem(self, tier: str, key: str, value: Any, *, namespace: str = DEFAULT_NAMESPACE) -> None:
        """Write a value; LTM values must be JSON and are durable after fence('ltm')."""
        check_tier(tier)
        check_key(key)
        if tier == "stm":
            self.stm.set(key, value)
        elif tier == "ltm":
            self.ltm.set(key, value, namespace)
        else:
            raise _append_only("umem (set)")

    def fence(self, tier: str | None = None) -> None:
        """Make earlier writes of `tier` (all tiers if None) durable and visible to every process."""
        tiers = TIERS if tier is None else (check_tier(tier),)
        if "ltm" in tiers:
            self.ltm.fence()
        if "episodic" in tiers:
            self.episodic.fence()
        if "stm" in tiers:
            self.db.call(stm_publish, self.execution, self.session, self.flow, os.getpid(),
                         self.stm.snapshot_json())
            self._published = True

    def delete(self, tier: str, key: str, *, namespace: str = DEFAULT_NAMESPACE) -> bool:
        """Delete a key; returns whether it existed."""
        check_tier(tier)
        check_key(key)
        if tier == "stm":
            return self.stm.delete(key)
        if tier == "ltm":
            return self.ltm.delete(key, namespace)
        raise _append_only("delete")

    def list(self, tier: str, *, namespace: str | None = None, prefix: str = "", limit: int | None = None,
             session: str | None = None, types: list[str] | None = None) -> list[dict]:
        """Entries of a tier: STM keys and values, LTM entries, or the newest episodic events."""
        check_tier(tier)
        if tier == "stm":
            keys = self.stm.keys(prefix)[:limit]
            return [{"key": k, "value": self.stm.get(k)} for k in keys]
        if tier == "ltm":
            return self.ltm.list(namespace, prefix, limit)
        return self.episodic.query(session=session, types=types, limit=limit or 200)

    # -- episodic and decisions

    def record(self, type: str, name: str = "", **fields: Any) -> str:
        return self.episodic.record(type, name, **fields)

    def operation(self, type: str = OP, name: str = "", **data: Any) -> Operation:
        return self.episodic.operation(type, name, **data)

    def log_decision(self, decision: str, reasoning: str = "", files: builtins.list[str] | tuple[str, ...] = (),
                     step: int | None = None) -> str:
        return self.decision_log.log(decision, reasoning, files, step)

    def decisions(self, **filters: Any) -> builtins.list[Decision]:  # `list` here is Memory.list
        return self.decision_log.list(**filters)

    def mark_decision_reused(self, decision_id: str, step: int | None = None) -> None:
        self.decision_log.mark_reused(decision_id, step)

    def reflect(self, name: str, **params: Any):
        self.episodic.fence()  # this execution's own events count
        return reflect.run(self.db, name, **params)

    def reflect_sql(self, sql: str, **params: Any):
        self.episodic.fence()
        return reflect.run_sql(self.db, sql, **params)

    # -- end of the execution

    def close(self) -> None:
        """End the execution: flush LTM and episodic, withdraw and drop STM."""
        if self._closed:
            return
        self._closed = True
        self.db.remove_close_hook(self.close)
        try:
            self.ltm.close()
        finally:
            try:
                self.episodic.close()
            finally:
                self.stm.clear()
                if self._published:
                    self.db.call(stm_withdraw, self.execution)

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@readonly
def team_ltm_get(con, namespace: str, key: str, authors: list[str]) -> tuple[str, str, str] | None:
    """The newest accepted teammate's write of (namespace, key): (JSON text, author, origin), or None when
    there is none or the newest accepted one deleted it (decisions.TEAM_ACCEPTED)."""
    row = con.execute(f"""SELECT r.value, r.author, r.origin, r.deleted FROM team.remote_ltm r
                          WHERE r.namespace = $ns AND r.key = $key
                            AND {TEAM_ACCEPTED.format(kind='ltm', ident="r.namespace || chr(0) || r.key")}
                          ORDER BY r.stamp DESC, r.origin DESC LIMIT 1""",
                      {"ns": namespace, "key": key, "authors": list(authors)}).fetchone()
    return None if row is None or row[3] else (row[0] or "null", row[1], row[2])


def published_stm(db, session: str | None = None) -> list[dict]:
    """STM snapshots that running executions published with fence('stm')."""
    return db.call(stm_published, session)
