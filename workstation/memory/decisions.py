"""The decision log: naming, pattern and design choices later steps must follow.

A decision is written at once (durably) with a client-made id, and an episodic
`decision_logged` event is recorded; each later use is a `decision_reused`
event, so reuse counts come from the log and a retried write never counts twice.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from .. import scrub
from ..store.broker import readonly
from .episodic import DECISION_LOGGED, DECISION_REUSED, Episodic
from .errors import MemoryKeyError, MemoryValueError


@dataclass
class Decision:
    id: str
    ts: float  # epoch seconds
    session: str
    step: int | None
    decision: str
    reasoning: str = ""
    files: list[str] = field(default_factory=list)
    reuse_count: int = 0
    last_reused: float | None = None
    author: str = ""  # a teammate's (workstation.team), else "": the user's own
    origin: str = ""  # the teammate's machine and workspace


class Decisions:
    def __init__(self, db, episodic: Episodic, team_authors: tuple[str, ...] = ()) -> None:
        self.db = db
        self.episodic = episodic
        self.team_authors = list(team_authors)  # teammates whose decisions count without accepting each

    def log(self, decision: str, reasoning: str = "", files: list[str] | tuple[str, ...] = (),
            step: int | None = None) -> str:
        """Record a decision durably; returns its id."""
        if not isinstance(decision, str) or not decision.strip():
            raise MemoryValueError("a decision needs a non-empty text")
        files = [str(f) for f in files]
        try:
            "".join([decision, reasoning or "", *files]).encode("utf-8")
        except UnicodeEncodeError:
            raise MemoryValueError("a decision's text is not valid Unicode (an unpaired surrogate)") from None
        decision, reasoning = scrub.mask(decision), scrub.mask(reasoning or "")  # the store is on disk
        files = [scrub.mask(f) for f in files]
        step = self.episodic.step if step is None else step
        decision_id = "d" + os.urandom(6).hex()
        ep = self.episodic
        self.db.call(decision_insert, decision_id, time.time_ns() // 1000, ep.session, ep.flow, step,
                     decision.strip(), reasoning or "", files)
        ep.record(DECISION_LOGGED, decision_id, step=step, decision=decision.strip()[:500], files=files)
        return decision_id

    def mark_reused(self, decision_id: str, step: int | None = None) -> None:
        """Note that a step followed this decision (counted by the decision_reuse reflection)."""
        if not self.db.call(decision_exists, decision_id):
            raise MemoryKeyError(f"no decision with id {decision_id!r}")
        self.episodic.record(DECISION_REUSED, decision_id, step=step)

    def list(self, *, session: str | None = None, step: int | None = None, file: str | None = None,
             limit: int = 200) -> list[Decision]:
        """Decisions, oldest first, with how often each was reused; teammates' ones only once accepted
        (TEAM_ACCEPTED), with their author and origin."""
        self.episodic.fence()  # reuse events of this execution count too
        return [Decision(*row) for row in self.db.call(decisions_query, session, step, file, limit,
                                                       self.team_authors)]


def decision_insert(con, decision_id: str, ts_us: int, session: str, flow: str, step: int | None,
                    decision: str, reasoning: str, files: list[str]) -> None:
    con.execute("""INSERT INTO decisions (id, ts, session, flow, step, decision, reasoning, related_files)
                   VALUES (?, make_timestamp(?), ?, ?, ?, ?, ?, ?::VARCHAR[]) ON CONFLICT (id) DO NOTHING""",
                [decision_id, ts_us, session, flow, step, decision, reasoning, files])


@readonly
def decision_exists(con, decision_id: str) -> bool:
    return con.execute("SELECT 1 FROM decisions WHERE id = ?", [decision_id]).fetchone() is not None


# Memory other people wrote is not the user's word: a teammate's row (alias r) of team.remote_decisions or
# team.remote_ltm counts only once the user accepted that item, its author's at its origin (`workstation team
# accept`), or its author ($authors: [team] accept_authors of the user's own config; the server, not the
# client, names the author, and an origin is only ever written by the login that first wrote it).
TEAM_ACCEPTED = """(list_contains($authors, r.author) OR EXISTS (
    SELECT 1 FROM team.accepted_items a WHERE a.kind = '{kind}' AND a.origin = r.origin AND a.author = r.author
    AND a.id = {ident}))"""


@readonly
def decisions_query(con, session: str | None, step: int | None, file: str | None, limit: int,
                    authors: list[str] | None = None) -> list[tuple]:
    accepted = TEAM_ACCEPTED.format(kind="decision", ident="r.id")
    return con.execute(
        f"""SELECT * FROM (
           SELECT d.id, epoch(d.ts), d.session, d.step, d.decision, d.reasoning, d.related_files,
                  count(e.id), epoch(max(e.ts)), '' AS author, '' AS origin
           FROM decisions d LEFT JOIN events e ON e.type = 'decision_reused' AND e.name = d.id
           WHERE ($session IS NULL OR d.session = $session) AND ($step IS NULL OR d.step = $step)
             AND ($file IS NULL OR list_contains(d.related_files, $file))
           GROUP BY ALL
           UNION ALL
           SELECT r.id, epoch(r.ts), r.session, r.step, r.decision, r.reasoning, r.related_files,
                  0, NULL, r.author, r.origin
           FROM team.remote_decisions r
           WHERE {accepted} AND ($session IS NULL OR r.session = $session) AND ($step IS NULL OR r.step = $step)
             AND ($file IS NULL OR list_contains(r.related_files, $file)))
           ORDER BY 2, 1 LIMIT $limit""",
        {"session": session, "step": step, "file": file, "limit": limit, "authors": list(authors or [])}).fetchall()
