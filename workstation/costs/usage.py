"""`workstation reflect usage`: tokens and cost of model calls per session, day, month or model.

Read from the episodic log, where every model call lands: the agent's own (`model_call` events,
and `compaction` events for the summaries it had written) and imported ones (engine.py writes a
`model_call` per imported assistant record, at the source's time). For each row:

    input           prompt tokens read neither from nor into a cache (tokens_in - cache reads - cache writes)
    output          completion tokens (reasoning included)
    cache_creation  prompt tokens written to a prompt cache (1-hour writes included)
    cache_read      prompt tokens read from it
    cache_hit       cache_read over the whole prompt (input + cache_creation + cache_read)
    cost_usd        the cost as billed (pricing.py): the agent's own calls priced by the
                    litellm price map with the model's cache prices (reads, 5-minute and 1-hour
                    writes), or the cost recorded with the call (litellm's) for a model the map does
                    not know; imported calls as recorded (priced by the map at import, or the source's own)
    unpriced        calls with tokens but no cost (a model the price map does not know)

Days and months are UTC. `like_ccusage` counts a streamed Claude Code response's output as
ccusage does, from its first logged snapshot (`tokens_out_first`), and takes the difference off
its cost at the model's output price; ccusage undercounts output so (its issues #901, #938), and
the default counts the final snapshot.

The agent's calls carry cache counts once the model client records them (`cache_read_tokens`,
`cache_creation_tokens`, `cache_creation_1h_tokens` in the model_call event's data); until then
their whole prompt counts as input.
"""

from __future__ import annotations

from typing import Any

from ..pricing import TIER_TOKENS, output_price, rates
from ..store.broker import Database, readonly
from ..memory.errors import ReflectError
from ..memory.reflect import Result, in_schema

BY = ("session", "day", "month", "model", "person")  # person: the team's rows (team=True), by author
_KEYS = {"session": "session", "day": "strftime(ts, '%Y-%m-%d')", "month": "strftime(ts, '%Y-%m')",
         "model": "model", "person": "author"}
COLUMNS = ["calls", "input", "output", "cache_creation", "cache_read", "cache_hit", "total_tokens", "cost_usd",
           "unpriced"]


def usage(db: Database, by: str = "session", *, session: str | None = None, like_ccusage: bool = False,
          team: bool = False) -> Result:
    """One row per session | day | month | model | person, newest (or costliest model or person) first, and
    totals in meta. `team`: over the team's rows (workstation.team's replica and this workspace's own)."""
    if by not in BY:
        raise ReflectError(f"reflect usage --by takes one of {', '.join(BY)}, not {by!r}")
    if by == "person" and not team:
        raise ReflectError("reflect usage --by person counts the team's rows: add --team")
    groups: dict[Any, dict] = {}
    for row in db.call(usage_groups, by, session, schema="team" if team else "main"):
        part = dict(zip(_PART_COLUMNS, row))
        group = groups.setdefault(part["key"], {by: part["key"], "agents": set(), "cost_usd": 0.0, "unpriced": 0,
                                                "first": None, "last": None,
                                                **{c: 0 for c in _SUMMED}})
        group["agents"].update(a for a in part["agents"] if a is not None)
        for column in _SUMMED:
            group[column] += part[column]
        group["first"] = min(filter(None, (group["first"], part["first"])), default=None)
        group["last"] = max(filter(None, (group["last"], part["last"])), default=None)
        found = rates(part["model"], (TIER_TOKENS + 1) if part["high"] else 0) if part["native"] else None
        if found is not None:  # the agent's own calls, priced as billed
            group["cost_usd"] += found.billed(part["input"] + part["cache_read"] + part["cache_creation"],
                                              part["output"], part["cache_read"], part["cache_creation"],
                                              part["cache_creation_1h"])
            continue
        group["cost_usd"] += part["recorded"] or 0.0
        group["unpriced"] += part["unrecorded"]
        if like_ccusage and part["streamed_extra"]:  # ccusage's output: the first snapshot of a streamed answer
            group["output"] -= part["streamed_extra"]
            price = output_price(part["model"])
            if price is not None:
                group["cost_usd"] -= part["streamed_extra"] * price
    out = []
    for group in groups.values():
        agents = group.pop("agents")
        named = {a for a in agents if a}
        group["agent"] = "mixed" if len(named) > 1 else (max(named) if named else min(agents, default=""))
        group["total_tokens"] = group["input"] + group["output"] + group["cache_creation"] + group["cache_read"]
        group["cache_hit"] = _hit(group)
        group["cost_usd"] = round(group["cost_usd"], 6)
        group["first"], group["last"] = _iso(group["first"]), _iso(group["last"])
        out.append(group)
    if by == "session":
        out.sort(key=lambda g: g["last"] or "", reverse=True)
    elif by in ("model", "person"):
        out.sort(key=lambda g: (-g["cost_usd"], -g["total_tokens"]))
    else:
        out.sort(key=lambda g: g[by])
    totals = {c: sum(g[c] for g in out) for c in COLUMNS if c != "cache_hit"}
    totals["cost_usd"] = round(totals["cost_usd"], 6)
    totals["cache_hit"] = _hit(totals)
    shown = [by] + (["agent"] if by == "session" else []) + COLUMNS + (["last"] if by == "session" else [])
    records = [[g.get(c) for c in shown] for g in out]
    return Result(shown, records, name=f"usage by {by}", meta={"totals": totals, "like_ccusage": like_ccusage})


_SUMMED = ("calls", "input", "output", "cache_creation", "cache_creation_1h", "cache_read")


def _hit(group: dict) -> float | None:
    """The cache hit share: cache reads over the whole prompt (input + cache writes + cache reads)."""
    prompt = group["input"] + group["cache_creation"] + group["cache_read"]
    return round(group["cache_read"] / prompt, 4) if prompt else None


def _iso(ts: Any) -> str | None:
    """A time as reflect.plain writes one (milliseconds, UTC)."""
    return None if ts is None else ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


# Each model call or compaction with tokens or a cost, its data's fields read in one pass over the JSON
# (one `->>` each read it six times: most of the query's time over a gigabyte of imported history).
_CALLS = """
    WITH raw AS (
        SELECT session, ts, type, name, tokens_in, tokens_out, cost_usd, {who} AS author,
               json_transform(data, '{"model": "VARCHAR", "cache_read_tokens": "VARCHAR",
                                      "cache_creation_tokens": "VARCHAR", "cache_creation_1h_tokens": "VARCHAR",
                                      "tokens_out_first": "VARCHAR",
                                      "continues": "JSON", "source": "VARCHAR"}') AS d
        FROM events
        WHERE type IN ('model_call', 'compaction')
          AND (tokens_in IS NOT NULL OR tokens_out IS NOT NULL OR cost_usd IS NOT NULL)
          AND ($session IS NULL OR session = $session)),
    calls AS (
        SELECT session, ts, author,
               CASE WHEN type = 'compaction' THEN coalesce(d.model, '')
                    ELSE coalesce(nullif(name, ''), d.model, '') END AS model,
               coalesce(tokens_in, 0) AS tin, coalesce(tokens_out, 0) AS tout,
               coalesce(TRY_CAST(d.cache_read_tokens AS BIGINT), 0) AS cread,
               coalesce(TRY_CAST(d.cache_creation_tokens AS BIGINT), 0) AS cwrite,
               coalesce(TRY_CAST(d.cache_creation_1h_tokens AS BIGINT), 0) AS cwrite1h,
               TRY_CAST(d.tokens_out_first AS BIGINT) AS tfirst,
               d.continues IS NOT NULL AND d.continues <> 'null' AS continues,
               cost_usd, coalesce(d.source, 'workstation') AS agent
        FROM raw)"""
_PART_COLUMNS = ["key", "model", "native", "high", "agents", "calls", "input", "output", "cache_creation",
                 "cache_creation_1h", "cache_read", "recorded", "unrecorded", "streamed_extra", "first", "last"]


@readonly
def usage_groups(con, by: str, session: str | None, schema: str = "main") -> list[tuple]:
    """Sums per (row key, model, the agent's own or imported, prompt past the price map's 200k tier) of every
    model call and compaction with tokens or a cost (_PART_COLUMNS)."""
    key = _KEYS[by]
    with in_schema(con, schema):
        return _groups(con, key, "author" if schema == "team" else "''", session)


def _groups(con, key: str, who: str, session: str | None) -> list[tuple]:
    cur = con.execute(f"""{_CALLS.replace("{who}", who)}
        SELECT {key} AS key, model, agent = 'workstation' AS native, tin > {TIER_TOKENS} AS high,
               list(DISTINCT agent), count(*) FILTER (NOT continues), sum(greatest(tin - cread - cwrite, 0)),
               sum(tout), sum(cwrite), sum(least(cwrite1h, cwrite)), sum(cread), sum(cost_usd),
               count(*) FILTER (cost_usd IS NULL AND (tin > 0 OR tout > 0)),
               coalesce(sum(tout - tfirst) FILTER (tfirst IS NOT NULL), 0), min(ts), max(ts)
        FROM calls GROUP BY ALL""", {"session": session})
    return cur.fetchall()
