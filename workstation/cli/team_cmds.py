"""`workstation team ...`: sync with the team's PostgreSQL, and what of teammates' memory to let in."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..terminal import safe
from .common import json_option, pass_workspace, print_json, print_table

if TYPE_CHECKING:
    from ..runtime import Workspace


def _team(ws: Workspace):
    from ..team.sync import Team  # lazy: the team package, only for these commands

    return Team(ws.db, ws.paths, ws.config.team)


@click.group("team")
def team() -> None:
    """Share this workspace's history, decisions and LTM with a team's PostgreSQL ([team] in the config)."""


@team.command("status")
@click.option("--offline", is_flag=True, help="Do not try the server.")
@json_option
@pass_workspace
def status_cmd(ws: Workspace, offline: bool, as_json: bool) -> None:
    """What is pending, the last sync, and whether the server answers (one line)."""
    if not ws.config.team.enabled:
        if as_json:
            print_json({"enabled": False})
        else:
            click.echo("team: off (set [team] url and project in your config to share with a team)")
        return
    found = _team(ws).status(reach=not offline)
    if as_json:
        print_json({"enabled": True, **found})
        return
    pending = ", ".join(f"{n} {kind}" for kind, n in found["pending"].items())
    state = found["state"]
    click.echo(safe(f"team {found['project']} at {found['server']}: {found.get('reach', 'not tried (--offline)')}"))
    click.echo(safe(f"pending: {pending}; last push {state.get('last_push', 'never')}, "
                    f"last pull {state.get('last_pull', 'never')}"))
    pulled = found["pulled"]
    click.echo(f"replica: {pulled['events']} events, {pulled['decisions']} decisions, {pulled['ltm']} LTM writes, "
               f"{pulled['session_lines']} session lines from {found['teammates']} other workspaces")
    if state.get("last_error"):
        click.echo(safe(f"last error: {state['last_error']}"))


@team.command("push")
@json_option
@pass_workspace
def push_cmd(ws: Workspace, as_json: bool) -> None:
    """Send what this workspace shares past its watermark (safe to repeat: nothing lands twice)."""
    report = _team(ws).push()
    print_json(report) if as_json else click.echo(report.line())


@team.command("pull")
@json_option
@pass_workspace
def pull_cmd(ws: Workspace, as_json: bool) -> None:
    """Copy teammates' rows into the local replica (reflect --team, session list --team read it)."""
    report = _team(ws).pull()
    for line in report.skipped:  # rows a teammate's client wrote wrong: named once, everything else arrived
        click.echo(safe(f"team pull: {line}"), err=True)
    print_json(report) if as_json else click.echo(report.line())


@team.command("admin-sql")
@click.option("--upgrade", is_flag=True, help="The SQL that brings a server of schema 1 to this one instead.")
def admin_sql_cmd(upgrade: bool) -> None:
    """Print the SQL a team admin runs once on the server (schema, append-only engineer role, members)."""
    from ..team.server import ADMIN_SQL, UPGRADE_SQL  # lazy: the team package

    click.echo(UPGRADE_SQL if upgrade else ADMIN_SQL)


@team.command("inbox")
@json_option
@pass_workspace
def inbox_cmd(ws: Workspace, as_json: bool) -> None:
    """Teammates' decisions and LTM writes, with author and origin, and whether each is accepted."""
    from ..team import accept  # lazy: the team package

    rows = accept.inbox(ws.db, ws.config.team.accept_authors)
    if as_json:
        print_json(rows)
    elif not rows:
        click.echo("nothing from teammates (run `workstation team pull`)")
    else:
        print_table(rows, ["ref", "kind", "author", "origin", "text", "accepted"])


@team.command("accept")
@click.argument("refs", nargs=-1, required=True)
@pass_workspace
def accept_cmd(ws: Workspace, refs: tuple[str, ...]) -> None:
    """Let teammates' items (REF as `team inbox` shows it) into the model's context. To trust everything
    an author writes, list them in `[team] accept_authors` of your own config."""
    from ..team import accept  # lazy: the team package

    for ref in refs:
        click.echo(safe(accept.accept(ws.db, ref)))


@team.command("reject")
@click.argument("refs", nargs=-1, required=True)
@pass_workspace
def reject_cmd(ws: Workspace, refs: tuple[str, ...]) -> None:
    """Take accepted items out of the model's context again."""
    from ..team import accept  # lazy: the team package

    for ref in refs:
        click.echo(safe(accept.reject(ws.db, ref)))


COMMANDS: list = [team]
