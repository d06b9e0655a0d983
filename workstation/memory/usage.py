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
from .reflect import Result

BY = ("session", "day", "month", "model")
_KEYS = {"session": "session", "day": "strftime(ts, '%Y-%m-%d')", "month": "strftime(ts, '%Y-%m')",
         "model": "model"}
COLUMNS = ["calls", "input", "output", "cache_creation", "cache_read", "total_tokens", "cost_usd", "unpriced"]


def usage(db: Any, by: str = "session", *, session: str | None = None, like_ccusage: bool = False) -> Result:
    """One row per session | day | month | model, newest (or costliest model) first, and totals in meta."""
    if by not in BY:
        raise ReflectError(f"reflect usage --by takes one of {', '.join(BY)}, not {by!r}")
    prices = None
    if like_ccusage:
        from ..importers.pricing import output_price  # lazy: the price map, only for --like-ccusage

        prices = {model: output_price(model) for model in db.call(usage_models, session)}
    rows = db.call(usage_groups, by, session, prices)
    out = [dict(zip(_GROUP_COLUMNS, row)) for row in rows]
    for group in out:
        group[by] = group.pop("key")
        group["total_tokens"] = group["input"] + group["output"] + group["cache_creation"] + group["cache_read"]
        group["cost_usd"] = round(group["cost_usd"], 6)
    if by == "session":
        out.sort(key=lambda g: g["last"] or "", reverse=True)
    elif by == "model":
        out.sort(key=lambda g: (-g["cost_usd"], -g["total_tokens"]))
    totals = {c: sum(g[c] for g in out) for c in COLUMNS}
    totals["cost_usd"] = round(totals["cost_usd"], 6)
    shown = [by] + (["agent"] if by == "session" else []) + COLUMNS + (["last"] if by == "session" else [])
    records = [[g.get(c) for c in shown] for g in out]
    return Result(shown, records, name=f"usage by {by}", meta={"totals": totals, "like_ccusage": like_ccusage})


# Each model call or compaction with tokens or a cost, its data's fields read in one pass over the JSON
# (one `->>` each read it six times: most of the query's time over a gigabyte of imported history).
_CALLS = """
    WITH raw AS (
        SELECT session, ts, type, name, tokens_in, tokens_out, cost_usd,
               json_transform(data, '{"model": "VARCHAR", "cache_read_tokens": "VARCHAR",
                                      "cache_creation_tokens": "VARCHAR", "tokens_out_first": "VARCHAR",
                                      "continues": "JSON", "source": "VARCHAR"}') AS d
        FROM events
        WHERE type IN ('model_call', 'compaction')
          AND (tokens_in IS NOT NULL OR tokens_out IS NOT NULL OR cost_usd IS NOT NULL)
          AND ($session IS NULL OR session = $session)),
    calls AS (
        SELECT session, ts,
               CASE WHEN type = 'compaction' THEN coalesce(d.model, '')
                    ELSE coalesce(nullif(name, ''), d.model, '') END AS model,
               coalesce(tokens_in, 0) AS tin, coalesce(tokens_out, 0) AS tout,
               coalesce(TRY_CAST(d.cache_read_tokens AS BIGINT), 0) AS cread,
               coalesce(TRY_CAST(d.cache_creation_tokens AS BIGINT), 0) AS cwrite,
               TRY_CAST(d.tokens_out_first AS BIGINT) AS tfirst,
               d.continues IS NOT NULL AND d.continues <> 'null' AS continues,
               cost_usd, coalesce(d.source, 'workstation') AS agent
        FROM raw)"""
_GROUP_COLUMNS = ["key", "agent", "calls", "input", "output", "cache_creation", "cache_read", "cost_usd",
                  "unpriced", "first", "last"]
_ISO_MS = "strftime({}, '%Y-%m-%dT%H:%M:%S.%g') || 'Z'"  # as reflect.plain writes a time


@readonly
def usage_models(con, session: str | None) -> list[str]:
    """The models of the calls usage counts (for their prices)."""
    return [row[0] for row in con.execute(f"{_CALLS} SELECT DISTINCT model FROM calls", {"session": session}).fetchall()]


@readonly
def usage_groups(con, by: str, session: str | None, prices: dict[str, float | None] | None) -> list[tuple]:
    """Sums per row key (_GROUP_COLUMNS) of every model call and compaction with tokens or a cost, summed
    per (key, model) first: `prices` (like_ccusage: the output price per model) takes a streamed Claude
    Code answer's later snapshots off its output, and their price off its cost. An agent of its own per
    key, or 'mixed'."""
    key = _KEYS[by]
    models = list(prices or {})
    cur = con.execute(f"""{_CALLS},
        per_model AS (
            SELECT {key} AS key, model, min(agent) AS agent,
                   count(*) FILTER (NOT continues) AS calls,
                   sum(greatest(tin - cread - cwrite, 0)) AS fresh, sum(tout) AS output,
                   sum(cwrite) AS cache_creation, sum(cread) AS cache_read,
                   sum(cost_usd) AS cost_usd,
                   count(*) FILTER (cost_usd IS NULL AND (tin > 0 OR tout > 0)) AS unpriced,
                   coalesce(sum(tout - tfirst) FILTER (tfirst IS NOT NULL), 0) AS streamed_extra,
                   min(ts) AS first, max(ts) AS last
            FROM calls GROUP BY ALL),
        priced AS (
            SELECT p.*, pr.price,
                   $like AND p.streamed_extra <> 0 AS cut
            FROM per_model p
            LEFT JOIN (SELECT unnest($models::VARCHAR[]) AS model, unnest($prices::DOUBLE[]) AS price) pr
                   USING (model))
        SELECT key,
               CASE WHEN count(DISTINCT nullif(agent, '')) > 1 THEN 'mixed'
                    ELSE coalesce(max(nullif(agent, '')), min(agent)) END,
               sum(calls)::BIGINT, sum(fresh)::BIGINT,
               sum(CASE WHEN cut THEN output - streamed_extra ELSE output END)::BIGINT,
               sum(cache_creation)::BIGINT, sum(cache_read)::BIGINT,
               coalesce(sum(CASE WHEN cut AND price IS NOT NULL THEN cost_usd - streamed_extra * price
                                 ELSE cost_usd END), 0.0),
               sum(unpriced)::BIGINT, {_ISO_MS.format("min(first)")}, {_ISO_MS.format("max(last)")}
        FROM priced GROUP BY key ORDER BY key""",
                      {"session": session, "like": prices is not None, "models": models,
                       "prices": [(prices or {})[m] for m in models]})
    return cur.fetchall()
