"""What of teammates' memory the user lets into the model's context.

A teammate's decision or LTM key reaches the model only once accepted: per item (`workstation team
accept REF`, kept in the local replica's team.accepted), or per author ([team] accept_authors in the
user's own config; a workspace's config can never set it, workstation.trust NEVER). The rule itself is
one SQL predicate, memory.decisions.TEAM_ACCEPTED, which the decision log and LTM reads apply. A
poisoned entry on the server therefore sits in `team inbox` with its author and origin until someone
looks at it; it steers nobody's agent on its own. An LTM key is accepted per origin: later writes of that
key from the same origin count too (its author is the server's login, which the author cannot forge).
"""

from __future__ import annotations

from ..memory.decisions import TEAM_ACCEPTED
from ..store.broker import Database, readonly
from . import TeamError

_LTM_ID = "r.namespace || chr(0) || r.key"


@readonly
def _inbox(con, authors: list[str]) -> list[dict]:
    decisions = TEAM_ACCEPTED.format(kind="decision", ident="r.id")
    ltm = TEAM_ACCEPTED.format(kind="ltm", ident=_LTM_ID)
    cur = con.execute(f"""
        SELECT r.id AS ref, 'decision' AS kind, r.author, r.origin, r.decision AS text, {decisions} AS accepted, r.ts
        FROM team.remote_decisions r
        UNION ALL
        SELECT 'L' || substr(md5(r.origin || chr(0) || {_LTM_ID}), 1, 10), 'ltm', r.author, r.origin,
               r.namespace || '/' || r.key || ' = ' || coalesce(r.value::VARCHAR, '(deleted)'), {ltm}, r.updated_at
        FROM team.remote_ltm r
        QUALIFY row_number() OVER (PARTITION BY r.origin, r.namespace, r.key ORDER BY r.stamp DESC) = 1
        ORDER BY ts""", {"authors": list(authors)})
    cols = [d[0] for d in cur.description][:-1]
    return [dict(zip(cols, row[:-1])) for row in cur.fetchall()]


def inbox(db: Database, authors: list[str]) -> list[dict]:
    """Teammates' decisions and LTM keys (newest write per origin), each with its REF, author, origin and
    whether it is accepted."""
    return db.call(_inbox, list(authors))


def _find(con, ref: str) -> tuple[str, str, str] | None:
    """(kind, origin, id) of the item REF names."""
    row = con.execute("SELECT 'decision', origin, id FROM team.remote_decisions WHERE id = ? LIMIT 1", [ref]).fetchone()
    if row is None:
        row = con.execute(f"""SELECT 'ltm', r.origin, {_LTM_ID} FROM team.remote_ltm r
                              WHERE 'L' || substr(md5(r.origin || chr(0) || {_LTM_ID}), 1, 10) = ? LIMIT 1""",
                          [ref]).fetchone()
    return row


def accept_item(con, ref: str) -> tuple[str, str, str] | None:
    found = _find(con, ref)
    if found is not None:
        con.execute("INSERT INTO team.accepted VALUES (?, ?, ?, now()::TIMESTAMP) ON CONFLICT DO NOTHING",
                    list(found))
    return found


def reject_item(con, ref: str) -> tuple[str, str, str] | None:
    found = _find(con, ref)
    if found is not None:
        con.execute("DELETE FROM team.accepted WHERE kind = ? AND origin = ? AND id = ?", list(found))
    return found


def accept(db: Database, ref: str) -> str:
    found = db.call(accept_item, ref)
    if found is None:
        raise TeamError(f"no teammate's item {ref!r} (see `workstation team inbox`)")
    return f"accepted {found[0]} {ref} from {found[1]}: it enters the model's context from the next request"


def reject(db: Database, ref: str) -> str:
    found = db.call(reject_item, ref)
    if found is None:
        raise TeamError(f"no teammate's item {ref!r} (see `workstation team inbox`)")
    return f"withdrew {found[0]} {ref} from {found[1]} (an accepted author's items stay in: edit [team] accept_authors)"
