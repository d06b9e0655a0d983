"""A tiny MCP server for the MCP client tests (the SDK's MCPServer over stdio).

    python tests/support/mcp_fixture_server.py            serve
    python tests/support/mcp_fixture_server.py --crash    write a line to stderr and exit before serving
    python tests/support/mcp_fixture_server.py --hang     never answer (a server that does not start in time)

At start it writes its pid to $PIDFILE when that is set, so a test can check it is gone afterwards.
"""

from __future__ import annotations

import os
import sys
import time

if "--crash" in sys.argv:
    print("fixture server: cannot open its database", file=sys.stderr, flush=True)
    sys.exit(3)

if os.environ.get("PIDFILE"):
    with open(os.environ["PIDFILE"], "w") as fh:
        fh.write(str(os.getpid()))

if "--hang" in sys.argv:
    while True:
        time.sleep(1)

from mcp.server.mcpserver import MCPServer  # noqa: E402

server = MCPServer("fixture")


@server.tool(description="Say text back, reversed when asked.")
def echo(text: str, reverse: bool = False) -> str:
    return text[::-1] if reverse else text


@server.tool(description="The names of the environment variables this server was started with.")
def env_names() -> str:
    return " ".join(sorted(os.environ))


@server.tool(description="Return a configured value, as the server read it from its environment.")
def leak() -> str:
    return "the token is " + os.environ.get("FIXTURE_TOKEN", "(unset)")


@server.tool(description="Sleep, then answer.")
def slow(seconds: float) -> str:
    time.sleep(seconds)
    return f"slept {seconds}"


@server.tool(description="Fail on purpose.")
def broken() -> str:
    raise ValueError("the fixture tool failed")


if __name__ == "__main__":
    server.run()
