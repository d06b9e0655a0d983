"""Command line: `workstation [-C PATH] COMMAND` or `workstation [PATH]` for the app.

Each area registers its commands from its own module; heavy libraries are
imported inside commands so that `workstation --help` stays instant.
"""

from __future__ import annotations

import click

from ..process import exit_on_sigterm, finish
from ..terminal import safe
from . import (acp_cmds, agent_cmds, app_cmds, import_cmds, index_cmds, mcp_cmds, memory_cmds, replay_cmds,
               session_cmds, team_cmds, trust_cmds)
from .common import WorkstationGroup, run_main


@click.group(cls=WorkstationGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-C", "workspace", default=".", metavar="PATH",
              help="Run as if started in PATH (the workspace root).")
@click.option("--model", "model", default=None, help="litellm model string for this run.")
@click.version_option(package_name="workstation")
@click.pass_context
def main(ctx: click.Context, workspace: str, model: str | None) -> None:
    """workstation: a terminal agent workstation with a live knowledge map and tiered memory."""
    from ..runtime import Workspace  # lazy: the config (msgspec), not read by --help

    said: set[str] = set()

    def warn(line: str) -> None:  # once each: a command's own --model loads the config again
        if line not in said:
            said.add(line)
            click.echo(safe(f"warning: {line}"), err=True)

    ctx.obj = Workspace(workspace, model=model, lazy=True, on_warning=warn)
    ctx.call_on_close(ctx.obj.close)


def _register() -> None:
    for module in (app_cmds, acp_cmds, index_cmds, memory_cmds, session_cmds, agent_cmds, replay_cmds, import_cmds,
                   mcp_cmds, trust_cmds, team_cmds):
        for command in getattr(module, "COMMANDS", []):
            main.add_command(command)


_register()


def entry() -> None:
    exit_on_sigterm()
    try:
        run_main(main)
    except SystemExit as exc:
        finish(exc.code)
