"""`workstation mcp`: serve workstation's tools to other agents over MCP, or check the MCP servers the
agent itself uses (`--check`)."""

from __future__ import annotations

import dataclasses

import click

from .common import json_option, pass_workspace, print_json, print_table


@click.command("mcp")
@click.option("--http", "port", type=click.IntRange(0, 65535), default=None, metavar="PORT",
              help="Serve streamable HTTP on 127.0.0.1:PORT (0: any free port) instead of stdio.")
@click.option("--read-only", is_flag=True, help="Offer only the tools that change nothing (no edits, no memory writes).")
@click.option("--check", is_flag=True,
              help="Start the servers of [mcp.servers] as the agent would, list their tools and state, stop them\n"
                   "(exit 1 when one did not start).")
@json_option
@pass_workspace
def mcp_command(ws, port: int | None, read_only: bool, check: bool, as_json: bool) -> None:
    """Serve the knowledge map, surgical reads and edits, memory and reflection over MCP (stdio by default).

    Every call is logged as an operation in the episodic log and in a session named for the client.
    Commands (run_command) are never served."""
    if check:
        _check(ws, as_json)
        return
    if as_json:
        raise click.UsageError("--json goes with --check")
    from ..mcp.server import Service, serve_http  # lazy: the tools; the MCP SDK loads when serving starts
    from ..mcp.start import serve_stdio  # lazy: as above

    service = Service(ws.load(), read_only=read_only, transport="stdio" if port is None else "http")
    what = f"{len(service.tools)} tools" + (" (read-only)" if read_only else "")
    try:
        if port is None:
            click.echo(f"workstation: serving {what} of {ws.root} over stdio", err=True)
            serve_stdio(service)
        else:
            def ready(url: str, token: str, token_file: str) -> None:
                click.echo(f"workstation: serving {what} of {ws.root} on {url}", err=True)
                click.echo(f"workstation: every request needs the header `Authorization: Bearer {token}` "
                           f"(also in {token_file}, readable by you only; a new one at each start)", err=True)

            serve_http(service, port, on_ready=ready)
    finally:
        service.close()


def _check(ws, as_json: bool) -> None:
    from ..mcp.client import open_toolset  # lazy: the MCP SDK, ~200 ms

    if not ws.config.mcp.servers:
        if as_json:
            print_json([])
        else:
            click.echo("no MCP servers configured ([mcp.servers.NAME] in ~/.config/workstation/config.toml, or in "
                       "the .workstation/config.toml of a workspace you trust)")
        return
    with open_toolset(ws) as toolset:  # their state as they answered: closing marks every one "stopped"
        servers = [dataclasses.replace(s, tools=list(s.tools)) for s in toolset.servers()]
    failed = any(s.state != "ready" for s in servers)
    if as_json:
        print_json([s.to_dict() for s in servers])
        if failed:
            raise SystemExit(1)
        return
    rows = []
    for server in servers:
        rows.append({"server": server.name, "state": server.state, "tool": "", "asks": "",
                     "what": server.error or f"{len(server.tools)} tools over {server.transport}"})
        rows += [{"server": "", "state": "", "tool": t.qualified, "asks": "yes" if server.asks(t.name) else "no",
                  "what": t.description[:80]} for t in server.tools]
    print_table(rows, title="MCP servers of the agent")
    if failed:
        raise SystemExit(1)


COMMANDS = [mcp_command]
