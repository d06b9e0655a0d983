"""`workstation trust [PATH]`: show what a workspace's own config asks for and trust the folder, or
revoke that trust, or list the trusted folders (workstation.trust)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from .common import json_option, pass_workspace, print_json


@click.command("trust")
@click.argument("path", required=False, default=None)
@click.option("--revoke", is_flag=True, help="Stop trusting the folder.")
@click.option("--list", "list_all", is_flag=True, help="List the trusted folders.")
@json_option
@pass_workspace
def trust_command(ws, path: str | None, revoke: bool, list_all: bool, as_json: bool) -> None:
    """Trust a workspace (PATH, default the -C folder): its own config's programs, MCP servers, models,
    allow-list, sandbox and state settings, its instructions.md and ignore file, and language servers apply
    from then on, until its config or those files change, or another folder takes its path. Model endpoints
    and key names never come from a workspace; its budgets only lower yours.

    The record is kept in your config home (trust.json), never in the repository."""
    from .. import config as config_mod  # lazy: msgspec, not read by --help
    from .. import trust  # lazy: with the config, not read by --help

    if list_all:
        if revoke or path:
            raise click.UsageError("--list takes no PATH and no --revoke")
        found = trust.entries()
        if as_json:
            print_json([{"path": p, **entry} for p, entry in sorted(found.items())])
        elif not found:
            click.echo(f"no trusted workspaces (record: {trust.record_file()})")
        else:
            for folder, entry in sorted(found.items()):
                click.echo(f"{folder}  (trusted {entry.get('at', '?')})")
        return
    where = path if path is not None else ws.requested_root
    if revoke:  # the folder may be gone: its record goes all the same
        root = Path(os.path.realpath(os.path.expanduser(where)))
        done = trust.revoke(root)
        if as_json:
            print_json({"path": str(root), "revoked": done})
        else:
            click.echo(f"no longer trusted: {root}" if done else f"{root} was not trusted")
        return
    config_mod.check_workspace(where)  # a config with mistakes is fixed before it is trusted, not after
    verdict, parts = config_mod.inspect(where)
    root = verdict.root
    files = [rel for rel in trust.FILES if (root / rel).exists()]
    trust.grant(root, verdict.digest)
    if as_json:
        print_json({"path": str(root), "trusted": True, "digest": verdict.digest, "gated": parts.gated,
                    "files": files, "never": trust.dotted(parts.never)})
        return
    click.echo(f"trusted: {root}")
    if parts.gated:
        click.echo("its config now applies:")
        for line in json.dumps(parts.gated, indent=2, sort_keys=True).splitlines()[1:-1]:
            click.echo(f"  {line}")
    else:
        click.echo("its config asks for nothing that needs trust")
    for rel in files:
        click.echo(f"read from now on: {rel}")
    if parts.never:
        click.echo(f"still ignored: {', '.join(trust.dotted(parts.never))} (endpoints and key names come only "
                   "from your own config and environment)")
    for name in trust.REPOSITORY_FILES:
        if (root / name).is_file():
            click.echo(f"read as the repository's (trusted or not): {name}")
    click.echo("a change to these settings or files, or another folder at this path, asks again; undo with "
               "`workstation trust --revoke`")


COMMANDS = [trust_command]
