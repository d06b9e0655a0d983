"""`workstation memory get|set|list|delete|fence` and `workstation reflect`.

LTM is the default tier. STM belongs to a running execution: from here you
can only read what executions published with fence('stm'); writing it would
vanish when this command exits, so that is refused. Episodic is append-only.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import click

from ..errors import WorkstationError
from .common import json_option, pass_workspace, print_json, print_table

if TYPE_CHECKING:
    from ..runtime import Workspace

TIERS = ("stm", "ltm", "episodic")
_STM_IS_LIVE = ("stm belongs to a running execution (the app or an agent run); "
                "this command has none of its own")

tier_option = click.option("--tier", type=click.Choice(TIERS), default="ltm", show_default=True,
                           help="Memory tier.")
namespace_option = click.option("--namespace", "-n", default="default", show_default=True, help="LTM namespace.")


def _memory(ws: Workspace):
    from ..memory import Memory  # lazy: the memory package, ~80 ms on --help

    return Memory(ws.db, session="cli", writer="cli", record_lookups=())


def _iso(epoch: float | None) -> str:
    if epoch is None:
        return ""
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _short(value: Any, width: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def _event_out(event: dict) -> dict:
    return {**event, "ts": _iso(event["ts"])}


def _published(ws: Workspace, session: str | None) -> list[dict]:
    from ..memory import published_stm  # lazy: the memory package, ~80 ms on --help

    snapshots = published_stm(ws.db, session)
    if not snapshots:
        whose = f"session {session!r}" if session else "any running execution"
        raise WorkstationError(f"no STM published by {whose}: STM lives inside a running execution and is "
                               "visible here only after it fences stm")
    return snapshots


@click.group("memory")
def memory() -> None:
    """Read and write the memory tiers: stm, ltm (default) and episodic."""


@memory.command("get")
@click.argument("key")
@tier_option
@namespace_option
@click.option("--session", default=None, help="STM: the session whose published STM to read.")
@json_option
@pass_workspace
def get_cmd(ws: Workspace, key: str, tier: str, namespace: str, session: str | None, as_json: bool) -> None:
    """Print the value of KEY (for episodic, KEY is an event id)."""
    from ..memory import MemoryKeyError  # lazy: the memory package, ~80 ms on --help

    if tier == "stm":
        snapshots = _published(ws, session)
        found = [s for s in snapshots if key in s["values"]]
        if not found:
            raise MemoryKeyError(f"no stm key {key!r} in the STM published by {len(snapshots)} running execution(s)")
        if len(found) > 1 and len({s["session"] for s in found}) > 1:
            raise WorkstationError(f"stm key {key!r} is in several sessions "
                                   f"({', '.join(sorted({s['session'] for s in found}))}): pass --session")
        snap = max(found, key=lambda s: s["published_at"])
        value = json.loads(snap["values"][key])
        out = {"tier": tier, "key": key, "value": value, "session": snap["session"],
               "published_at": _iso(snap["published_at"])}
    elif tier == "ltm":
        out = {"tier": tier, "namespace": namespace, "key": key, "value": _memory(ws).qmem("ltm", key,
                                                                                         namespace=namespace)}
    else:
        out = {"tier": tier, "key": key, "value": _event_out(_memory(ws).qmem("episodic", key))}
    if as_json:
        print_json(out)
    else:
        click.echo(json.dumps(out["value"], ensure_ascii=False, indent=2))


@memory.command("set")
@click.argument("key")
@click.argument("value")
@tier_option
@namespace_option
@click.option("--string", "-s", "as_string", is_flag=True, help="Store VALUE as a JSON string, unparsed.")
@pass_workspace
def set_cmd(ws: Workspace, key: str, value: str, tier: str, namespace: str, as_string: bool) -> None:
    """Store VALUE (JSON, e.g. '{"a": 1}' or '"text"') under KEY, durably."""
    from ..memory import MemoryTierError  # lazy: the memory package, ~80 ms on --help
    from ..memory.ltm import parse_value  # lazy: as above

    if tier == "stm":
        raise MemoryTierError(f"{_STM_IS_LIVE}: a value set here would vanish when it exits; use --tier ltm")
    parsed: Any = value if as_string else parse_value(value, hint="quote text as '\"text\"' or pass --string")
    mem = _memory(ws)
    mem.umem(tier, key, parsed, namespace=namespace)
    mem.fence(tier)
    click.echo(f"stored {tier} {namespace}:{key}")


@memory.command("list")
@tier_option
@click.option("--namespace", "-n", default=None, help="LTM: only this namespace (default: all).")
@click.option("--prefix", default="", help="Only keys starting with this.")
@click.option("--session", default=None, help="Episodic/STM: only this session.")
@click.option("--type", "types", multiple=True, help="Episodic: only events of this type (repeatable).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most this many rows.")
@json_option
@pass_workspace
def list_cmd(ws: Workspace, tier: str, namespace: str | None, prefix: str, session: str | None,
             types: tuple[str, ...], limit: int | None, as_json: bool) -> None:
    """List entries: LTM keys, the newest episodic events, or published STM."""
    if tier == "stm":
        rows = [{"session": s["session"], "execution": s["execution"], "pid": s["pid"], "key": k,
                 "value": json.loads(v), "published_at": _iso(s["published_at"])}
                for s in _published(ws, session) for k, v in sorted(s["values"].items())
                if k.startswith(prefix)][:limit]
        columns = ["session", "pid", "key", "value", "published_at"]
    elif tier == "ltm":
        rows = [{**r, "updated_at": _iso(r["updated_at"])}
                for r in _memory(ws).list("ltm", namespace=namespace, prefix=prefix, limit=limit)]
        columns = ["namespace", "key", "value", "updated_at", "updated_by"]
    else:
        rows = [_event_out(e) for e in _memory(ws).list("episodic", session=session, types=list(types) or None,
                                                            limit=limit or 50)]
        columns = ["ts", "session", "step", "type", "name", "duration_ms", "ok", "data"]
    if as_json:
        print_json(rows)
        return
    print_table([{c: (_short(r[c]) if c in ("value", "data") else r[c]) for c in columns} for r in rows], columns)


@memory.command("delete")
@click.argument("key")
@tier_option
@namespace_option
@pass_workspace
def delete_cmd(ws: Workspace, key: str, tier: str, namespace: str) -> None:
    """Delete KEY from LTM (durably)."""
    from ..memory import MemoryKeyError, MemoryTierError  # lazy: the memory package, ~80 ms on --help

    if tier == "stm":
        raise MemoryTierError(f"{_STM_IS_LIVE}: only the execution itself can delete from it")
    mem = _memory(ws)
    if not mem.delete(tier, key, namespace=namespace):
        raise MemoryKeyError(f"no ltm key {key!r} in namespace {namespace!r}")
    mem.fence(tier)
    click.echo(f"deleted ltm {namespace}:{key}")


@memory.command("fence")
@click.option("--tier", type=click.Choice(TIERS), default=None, help="Tier to fence (default: ltm and episodic).")
@pass_workspace
def fence_cmd(ws: Workspace, tier: str | None) -> None:
    """Make every earlier write durable and visible to all processes."""
    if tier == "stm":
        click.echo(f"stm: nothing to fence: {_STM_IS_LIVE}")
        return
    mem = _memory(ws)
    for name in ([tier] if tier else ["ltm", "episodic"]):
        mem.fence(name)
        click.echo(f"fenced {name}")


@click.command("reflect")
@click.argument("name", required=False)
@click.option("--sql", default=None, help="Run your own read-only SELECT over the documented views.")
@click.option("--list", "list_names", is_flag=True, help="List the named reflections.")
@click.option("--session", default=None, help="Only this session (named reflections).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most this many rows.")
@click.option("--by", type=click.Choice(["session", "day", "month", "model", "person"]), default=None,
              help="usage: one row per session (default), day, month, model or person (with --team).")
@click.option("--team", is_flag=True, help="Over the team's rows too (pulled by `workstation team pull`).")
@click.option("--like-ccusage", is_flag=True,
              help="usage: count streamed Claude Code answers' output as ccusage does (first snapshot).")
@json_option
@pass_workspace
def reflect_cmd(ws: Workspace, name: str | None, sql: str | None, list_names: bool, session: str | None,
                limit: int | None, by: str | None, team: bool, like_ccusage: bool, as_json: bool) -> None:
    """Ask the episodic history: `reflect NAME`, `reflect usage [--by ...]`, `reflect --sql "SELECT ..."`,
    `reflect --list`."""
    from ..memory import reflect  # lazy: the memory package, ~80 ms on --help

    if sum(bool(x) for x in (name, sql, list_names)) != 1:
        raise click.UsageError("give exactly one of NAME, --sql or --list")
    if (by or like_ccusage) and name != "usage":
        raise click.UsageError("--by and --like-ccusage go with `reflect usage`")
    if name == "usage":
        _usage(ws, by or "session", session, like_ccusage, limit, as_json, team)
        return
    if list_names:
        rows = [{"name": "usage", "description": "Tokens (input, output, cache) and cost per session, day, "
                                                 "month or model, imported sessions included."}]
        rows += [{"name": n, "description": d} for n, d in reflect.names()]
        print_json(rows) if as_json else print_table(rows, ["name", "description"])
        return
    if sql:
        result = reflect.run_sql(ws.db, sql, limit=limit or reflect.SQL_ROW_LIMIT, team=team)
    else:
        result = reflect.run(ws.db, name, session=session, limit=limit or reflect.DEFAULT_LIMIT, team=team)
    if as_json:
        print_json(result.records())
    else:
        print_table(result.records(), result.columns, title=result.name or None)
    if result.truncated:
        click.echo(f"(first {len(result.rows)} rows shown; pass --limit for more)", err=True)


def _usage(ws: Workspace, by: str, session: str | None, like_ccusage: bool, limit: int | None,
           as_json: bool, team: bool = False) -> None:
    from ..costs.usage import usage  # lazy: the memory package, ~80 ms on --help

    result = usage(ws.db, by, session=session, like_ccusage=like_ccusage, team=team)
    records = result.records()[:limit] if limit else result.records()
    if as_json:
        print_json({"by": by, "like_ccusage": like_ccusage, "rows": records, "totals": result.meta["totals"]},
                   flat_rows="rows")
        return
    if not records:
        click.echo("no model calls recorded yet")
        return
    totals = result.meta["totals"]
    shown = [{**r, "cost_usd": f"{r['cost_usd']:.4f}", "cache_hit": _share(r["cache_hit"]),
              **({"last": (r.get("last") or "")[:16]} if "last" in r else {})} for r in records]
    shown.append({result.columns[0]: "total", **totals, "cost_usd": f"{totals['cost_usd']:.4f}",
                  "cache_hit": _share(totals["cache_hit"])})
    print_table(shown, result.columns, title=result.name)


def _share(value: float | None) -> str:
    return "" if value is None else f"{value:.1%}"


COMMANDS: list = [memory, reflect_cmd]
