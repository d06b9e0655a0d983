"""`workstation mcp`: serve workstation's tools to other agents over MCP."""

from __future__ import annotations

import click

from .common import pass_state


@click.command("mcp")
@click.option("--http", "port", type=click.IntRange(0, 65535), default=None, metavar="PORT",
              help="Serve streamable HTTP on 127.0.0.1:PORT (0: any free port) instead of stdio.")
@click.option("--read-only", is_flag=True, help="Offer only the tools that change nothing (no edits, no memory writes).")
@pass_state
def mcp_command(state, port: int | None, read_only: bool) -> None:
    """Serve the knowledge map, surgical reads and edits, memory and reflection over MCP (stdio by default).

    Every call is logged as an operation in the episodic log and in a session named for the client.
    Commands (run_command) are never served."""
    from ..mcp.server import Service, serve_http, serve_stdio

    service = Service(state.load(), read_only=read_only, transport="stdio" if port is None else "http")
    what = f"{len(service.tools)} tools" + (" (read-only)" if read_only else "")
    try:
        if port is None:
            click.echo(f"workstation: serving {what} of {state.root} over stdio", err=True)
            serve_stdio(service)
        else:
            serve_http(service, port, on_ready=lambda url: click.echo(
                f"workstation: serving {what} of {state.root} on {url}", err=True))
    finally:
        service.close()


COMMANDS = [mcp_command]
