"""What of teammates' memory the user lets into the model's context.

A teammate's decision or LTM key reaches the model only once accepted: per item (`workstation team
accept REF`, kept in the local replica's team.accepted_items), or per author ([team] accept_authors in the
user's own config; a workspace's config can never set it, workstation.trust NEVER). The rule itself is
one SQL predicate, memory.decisions.TEAM_ACCEPTED, which the decision log and LTM reads apply. A
poisoned entry on the server therefore sits in `team inbox` with its author and origin until someone
looks at it; it steers nobody's agent on its own. An item is its author's at its origin, and is accepted
as such: later writes of an accepted LTM key by the same author at the same origin count too; a write of
that key under the same origin by anyone else is another item, shown apart in the inbox (the server names
the author, and refuses a write under an origin another login wrote first).
"""

from __future__ import annotations

from ..memory.decisions import TEAM_ACCEPTED
from ..store.broker import Database, readonly
from . import TeamError

_LTM_ID = "r.namespace || chr(0) || r.key"


def _ref(prefix: str, ident: str) -> str:
    """SQL for an item's REF: its kind, and a digest of its author, origin and id (one per whose it is)."""
    return f"'{prefix}' || substr(md5(r.author || chr(0) || r.origin || chr(0) || {ident}), 1, 10)"


@readonly
def _inbox(con, authors: list[str]) -> list[dict]:
    decisions = TEAM_ACCEPTED.format(kind="decision", ident="r.id")
    ltm = TEAM_ACCEPTED.format(kind="ltm", ident=_LTM_ID)
    cur = con.execute(f"""
        SELECT {_ref('D', 'r.id')} AS ref, 'decision' AS kind, r.author, r.origin, r.decision AS text,
               {decisions} AS accepted, r.ts
        FROM team.remote_decisions r
        UNION ALL
        SELECT {_ref('L', _LTM_ID)}, 'ltm', r.author, r.origin,
               r.namespace || '/' || r.key || ' = ' || coalesce(r.value::VARCHAR, '(deleted)'), {ltm}, r.updated_at
        FROM team.remote_ltm r
        QUALIFY row_number() OVER (PARTITION BY r.author, r.origin, r.namespace, r.key ORDER BY r.stamp DESC) = 1
        ORDER BY ts""", {"authors": list(authors)})
    cols = [d[0] for d in cur.description][:-1]
    return [dict(zip(cols, row[:-1])) for row in cur.fetchall()]


def inbox(db: Database, authors: list[str]) -> list[dict]:
    """Teammates' decisions and LTM keys (newest write per author and origin), each with its REF, author,
    origin and whether it is accepted."""
    return db.call(_inbox, list(authors))


def _find(con, ref: str) -> tuple[str, str, str, str] | None:
    """(kind, origin, author, id) of the item REF names."""
    return con.execute(f"""SELECT 'decision', r.origin, r.author, r.id FROM team.remote_decisions r
                           WHERE {_ref('D', 'r.id')} = $ref
                           UNION ALL
                           SELECT 'ltm', r.origin, r.author, {_LTM_ID} FROM team.remote_ltm r
                           WHERE {_ref('L', _LTM_ID)} = $ref LIMIT 1""", {"ref": ref}).fetchone()


def accept_item(con, ref: str) -> tuple[str, str, str, str] | None:
    found = _find(con, ref)
    if found is not None:
        con.execute("INSERT INTO team.accepted_items VALUES (?, ?, ?, ?, now()::TIMESTAMP) ON CONFLICT DO NOTHING",
                    list(found))
    return found


def reject_item(con, ref: str) -> tuple[str, str, str, str] | None:
    found = _find(con, ref)
    if found is not None:
        con.execute("DELETE FROM team.accepted_items WHERE kind = ? AND origin = ? AND author = ? AND id = ?",
                    list(found))
    return found


def accept(db: Database, ref: str) -> str:
    found = db.call(accept_item, ref)
    if found is None:
        raise TeamError(f"no teammate's item {ref!r} (see `workstation team inbox`)")
    return (f"accepted {found[0]} {ref} of {found[2]} at {found[1]}: it enters the model's context from the next "
            "request")


def reject(db: Database, ref: str) -> str:
    found = db.call(reject_item, ref)
    if found is None:
        raise TeamError(f"no teammate's item {ref!r} (see `workstation team inbox`)")
    return (f"withdrew {found[0]} {ref} of {found[2]} at {found[1]} (an accepted author's items stay in: edit "
            "[team] accept_authors)")
