"""Command line: `workstation [-C PATH] COMMAND` or `workstation [PATH]` for the app.

Each area keeps its commands in a module of its own, imported only when one of them runs (MODULES):
`workstation find` loads the index commands alone, `--help` lists the names and loads each module only for
its one-line help. Heavy libraries are imported inside the commands too.
"""

from __future__ import annotations

import click

from .. import __version__
from ..process import exit_on_sigterm, finish
from ..terminal import safe
from .common import WorkstationGroup, run_main

# command -> the module of this package that defines it (in its COMMANDS)
MODULES = {"ui": "app_cmds", "acp": "acp_cmds", "index": "index_cmds", "map": "index_cmds", "find": "index_cmds",
           "impact": "index_cmds", "watch": "index_cmds", "memory": "memory_cmds", "reflect": "memory_cmds",
           "session": "session_cmds", "sidecar": "session_cmds", "chat": "agent_cmds", "report": "agent_cmds",
           "exec": "headless_cmds",
           "sandbox": "agent_cmds", "replay": "replay_cmds", "import": "import_cmds", "mcp": "mcp_cmds",
           "trust": "trust_cmds", "team": "team_cmds"}


@click.group(cls=WorkstationGroup, lazy=MODULES, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-C", "workspace", default=".", metavar="PATH",
              help="Run as if started in PATH (the workspace root).")
@click.option("--model", "model", default=None, help="litellm model string for this run.")
@click.version_option(__version__, prog_name="workstation")  # not importlib.metadata: ~70 ms
@click.pass_context
def main(ctx: click.Context, workspace: str, model: str | None) -> None:
    """workstation: a terminal agent workstation with a live knowledge map and tiered memory.

    `workstation -p TEXT [OPTIONS]` (or --print) is `workstation exec TEXT [OPTIONS]`: one headless run."""
    from ..runtime import Workspace  # lazy: the config (msgspec), not read by --help

    said: set[str] = set()

    def warn(line: str) -> None:  # once each: a command's own --model loads the config again
        if line not in said:
            said.add(line)
            click.echo(safe(f"warning: {line}"), err=True)

    ctx.obj = Workspace(workspace, model=model, lazy=True, on_warning=warn)
    ctx.call_on_close(ctx.obj.close)


def entry() -> None:
    exit_on_sigterm()
    try:
        run_main(main)
    except SystemExit as exc:
        finish(exc.code)
