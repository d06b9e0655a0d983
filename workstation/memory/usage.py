"""`workstation reflect usage`: tokens and cost of model calls per session, day, month or model.

Read from the episodic log, where every model call lands: the agent's own (`model_call` events,
and `compaction` events for the summaries it had written) and imported ones (engine.py writes a
`model_call` per imported assistant record, at the source's time). For each row:

    input           prompt tokens read neither from nor into a cache (tokens_in - cache reads - cache writes)
    output          completion tokens (reasoning included)
    cache_creation  prompt tokens written to a prompt cache
    cache_read      prompt tokens read from it
    cost_usd        the cost recorded with the call: litellm's for the agent's calls, the litellm price
                    map's (importers/pricing.py) or the source's own for imported ones
    unpriced        calls with tokens but no cost (a model the price map does not know)

Days and months are UTC. `like_ccusage` counts a streamed Claude Code response's output as
ccusage does, from its first logged snapshot (`tokens_out_first`), and takes the difference off
its cost at the model's output price; ccusage undercounts output so (its issues #901, #938), and
the default counts the final snapshot.

The agent's calls carry cache counts once the model client records them (`cache_read_tokens`,
`cache_creation_tokens` in the model_call event's data); until then their whole prompt counts
as input.
"""

from __future__ import annotations

from typing import Any

from ..store.broker import readonly
from .errors import ReflectError
from .reflect import Result, _plain

BY = ("session", "day", "month", "model")
_KEYS = {"session": "session", "day": "strftime(ts, '%Y-%m-%d')", "month": "strftime(ts, '%Y-%m')",
         "model": "model"}
COLUMNS = ["calls", "input", "output", "cache_creation", "cache_read", "total_tokens", "cost_usd", "unpriced"]


def usage(db: Any, by: str = "session", *, session: str | None = None, like_ccusage: bool = False) -> Result:
    """One row per session | day | month | model, newest (or costliest model) first, and totals in meta."""
    if by not in BY:
        raise ReflectError(f"reflect usage --by takes one of {', '.join(BY)}, not {by!r}")
    columns, rows = db.call(usage_rows, by, session)
    groups: dict[Any, dict[str, Any]] = {}
    for row in rows:
        item = dict(zip(columns, row))
        key = item["key"]
        group = groups.setdefault(key, {by: key, "agent": item["agent"], "first": item["first"],
                                        "last": item["last"], **{c: 0 for c in COLUMNS}})
        if item["agent"] and item["agent"] != group["agent"]:
            group["agent"] = "mixed" if group["agent"] else item["agent"]
        output, cost = item["output"], item["cost_usd"]
        if like_ccusage and item["streamed_extra"]:
            output -= item["streamed_extra"]
            if cost is not None:
                from ..importers.pricing import output_price

                price = output_price(item["model"] or "")
                cost = cost - item["streamed_extra"] * price if price is not None else cost
        group["calls"] += item["calls"]
        group["input"] += item["fresh"]
        group["output"] += output
        group["cache_creation"] += item["cache_creation"]
        group["cache_read"] += item["cache_read"]
        group["cost_usd"] += cost or 0.0
        group["unpriced"] += item["unpriced"]
        group["first"] = min(group["first"], item["first"]) if group["first"] else item["first"]
        group["last"] = max(group["last"], item["last"]) if group["last"] else item["last"]
    out = list(groups.values())
    for group in out:
        group["total_tokens"] = group["input"] + group["output"] + group["cache_creation"] + group["cache_read"]
        group["cost_usd"] = round(group["cost_usd"], 6)
    if by == "session":
        out.sort(key=lambda g: g["last"] or "", reverse=True)
    elif by == "model":
        out.sort(key=lambda g: (-g["cost_usd"], -g["total_tokens"]))
    else:
        out.sort(key=lambda g: g[by] or "")
    totals = {c: sum(g[c] for g in out) for c in COLUMNS}
    totals["cost_usd"] = round(totals["cost_usd"], 6)
    shown = [by] + (["agent"] if by == "session" else []) + COLUMNS + (["last"] if by == "session" else [])
    records = [[_plain(g.get(c)) for c in shown] for g in out]
    return Result(shown, records, name=f"usage by {by}", meta={"totals": totals, "like_ccusage": like_ccusage})


@readonly
def usage_rows(con, by: str, session: str | None) -> tuple[list[str], list[tuple]]:
    """Sums per (row key, model) of every model call and compaction with tokens or a cost."""
    key = _KEYS[by]
    cur = con.execute(f"""
        WITH calls AS (
            SELECT session, ts, type,
                   CASE WHEN type = 'compaction' THEN coalesce(data->>'model', '')
                        ELSE coalesce(nullif(name, ''), data->>'model', '') END AS model,
                   coalesce(tokens_in, 0) AS tin, coalesce(tokens_out, 0) AS tout,
                   coalesce(TRY_CAST(data->>'cache_read_tokens' AS BIGINT), 0) AS cread,
                   coalesce(TRY_CAST(data->>'cache_creation_tokens' AS BIGINT), 0) AS cwrite,
                   TRY_CAST(data->>'tokens_out_first' AS BIGINT) AS tfirst,
                   data->>'continues' IS NOT NULL AS continues,
                   cost_usd, coalesce(data->>'source', 'workstation') AS agent
            FROM events
            WHERE type IN ('model_call', 'compaction')
              AND (tokens_in IS NOT NULL OR tokens_out IS NOT NULL OR cost_usd IS NOT NULL)
              AND ($session IS NULL OR session = $session))
        SELECT {key} AS key, model, min(agent) AS agent,
               count(*) FILTER (NOT continues) AS calls,
               sum(greatest(tin - cread - cwrite, 0)) AS fresh, sum(tout) AS output,
               sum(cwrite) AS cache_creation, sum(cread) AS cache_read,
               sum(cost_usd) AS cost_usd,
               count(*) FILTER (cost_usd IS NULL AND (tin > 0 OR tout > 0)) AS unpriced,
               coalesce(sum(tout - tfirst) FILTER (tfirst IS NOT NULL), 0) AS streamed_extra,
               min(ts) AS first, max(ts) AS last
        FROM calls GROUP BY ALL""", {"session": session})
    columns = [d[0] for d in cur.description]
    return columns, [tuple(_plain(v) for v in row) for row in cur.fetchall()]
