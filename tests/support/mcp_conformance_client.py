"""Our MCP client (workstation.mcp.client.McpClients, as the agent starts it for a `[mcp.servers.NAME]` with
a url) driven by the MCP conformance suite's client scenarios: `conformance client --command "python
tests/support/mcp_conformance_client.py"` appends the scenario server's URL and names the scenario in
MCP_CONFORMANCE_SCENARIO. The client starts (initialize, tools/list) and calls what the scenario's server
expects; the suite judges the exchange. Exit 0 when every call came back as a result.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

CALLS = {  # scenario -> the calls its server waits for (tool, arguments)
    "initialize": [],
    "tools_call": [("add_numbers", {"a": 5, "b": 3})],
    "sse-retry": [("test_reconnection", {})],
}


def main() -> int:
    from workstation.config import McpServerConfig
    from workstation.mcp.client import McpClients

    url, scenario = sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if scenario not in CALLS:
        print(f"no calls known for the scenario {scenario!r}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        clients = McpClients({"conformance": McpServerConfig(url=url, startup_timeout_s=20, timeout_s=20)},
                             root=Path(scratch), log_dir=Path(scratch) / "mcp")
        try:
            failed = clients.start()
            for line in failed:
                print(line, file=sys.stderr)
            if failed:
                return 1
            print(clients.status["conformance"].line())
            ok = True
            for tool, arguments in CALLS[scenario]:
                result = clients.call("conformance", tool, arguments)
                print(f"{tool}: {result.text}")
                ok = ok and result.ok
            return 0 if ok else 1
        finally:
            clients.close()


if __name__ == "__main__":
    sys.exit(main())
