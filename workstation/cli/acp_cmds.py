"""`workstation acp`: serve the agent to an editor over ACP on stdio (workstation.acp)."""

from __future__ import annotations

import click

from .common import pass_workspace


@click.command("acp")
@pass_workspace
def acp_command(ws) -> None:
    """Serve the agent over ACP (the Agent Client Protocol) on stdin/stdout, for Zed, JetBrains IDEs and other
    editors (see the README's "Editors (ACP)"). Each editor thread is a session of ours (`workstation session
    list`); the editor loads any of them, imported ones too. Logs go to stderr, one line each."""
    ws.load()  # a bad config is one line here, before the editor connects
    from ..acp.start import serve_stdio  # lazy: asyncio; the ACP SDK loads while `initialize` is answered

    click.echo(f"workstation: serving ACP for {ws.root} over stdio", err=True)
    serve_stdio(ws)


COMMANDS = [acp_command]
