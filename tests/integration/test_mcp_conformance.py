"""The official MCP conformance suite (npm `@modelcontextprotocol/conformance`, pinned, installed at test time)
against our MCP server and our MCP client.

Server: `workstation mcp --http` behind a proxy that adds the bearer token (tests/support/header_proxy.py): every
server scenario that applies to a server with our capabilities. The base ones always; logging, resources,
prompts and completions when the server declares them (its initialize answer says). The scenarios left
out need the suite's own test fixtures on the server (tools named test_*, test:// resources, prompts named
test_*), which a real server does not have.

Client: the scenarios initialize, tools_call and sse-retry against workstation.mcp.client
(tests/support/mcp_conformance_client.py).

Each scenario passes when the suite exits 0 and every check it wrote is SUCCESS (or INFO): no failure, no
warning.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.agent_support import write_repo
from support.header_proxy import HeaderProxy
from support.npm_support import bin_of, node_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

CONFORMANCE = ("@modelcontextprotocol/conformance", "0.1.16")
WORKSTATION = str(Path(sys.executable).with_name("workstation"))
CLIENT = str(Path(__file__).resolve().parents[1] / "support" / "mcp_conformance_client.py")
ALWAYS = ["server-initialize", "ping", "tools-list", "dns-rebinding-protection", "server-sse-multiple-streams"]
DECLARED = {  # a capability the server declares -> the scenarios that apply to any server with it
    "logging": ["logging-set-level"],
    "resources": ["resources-list"],
    "prompts": ["prompts-list"],
    "completions": ["completion-complete"],
}
CLIENT_SCENARIOS = ["initialize", "tools_call", "sse-retry"]


def conformance(*args: str, out: Path) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """Run the suite; its exit and the checks it wrote (results/<scenario>-<time>/checks.json)."""
    run = subprocess.run([*bin_of(*CONFORMANCE, "conformance"), *args, "-o", str(out)], capture_output=True,
                         text=True, env=node_env(), timeout=240)
    checks = [check for found in sorted(out.rglob("checks.json")) for check in json.loads(found.read_text())]
    return run, checks


def judged(run: subprocess.CompletedProcess, checks: list[dict]) -> list[str]:
    """What did not pass: the suite's exit, and each check neither SUCCESS nor INFO."""
    bad = [f"{c['id']}: {c['status']} {c.get('errorMessage') or ''}".strip() for c in checks
           if c["status"] not in ("SUCCESS", "INFO")]
    if run.returncode != 0 or not checks:
        bad.append(f"exit {run.returncode} with {len(checks)} checks:\n{run.stdout[-3000:]}\n{run.stderr[-2000:]}")
    return bad


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """`workstation mcp --http 0` on a small repository, and a proxy adding its token: (proxy, url, token)."""
    tmp = tmp_path_factory.mktemp("conformance")
    repo = write_repo(tmp / "repo")
    err = tmp / "stderr"
    env = {**os.environ, "WORKSTATION_HOME": str(tmp / "home"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with open(err, "w") as sink:
        proc = subprocess.Popen([WORKSTATION, "-C", str(repo), "mcp", "--http", "0"], stdout=subprocess.DEVNULL,
                                stderr=sink, env=env)
    try:
        url = token = None
        deadline = time.monotonic() + 60
        while token is None and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
            for line in err.read_text().splitlines():
                if " on http://127.0.0.1:" in line:
                    url = line.split(" on ")[-1].strip()
                elif "Authorization: Bearer " in line:
                    token = line.split("Authorization: Bearer ", 1)[1].split("`", 1)[0]
        assert url and token, f"the HTTP server did not start: {err.read_text()}"
        port = int(url.split(":")[2].split("/")[0])
        with HeaderProxy(port, {"Authorization": f"Bearer {token}"}) as proxy:
            yield proxy, url, token
    finally:
        proc.terminate()
        proc.wait(30)


def declared(url: str, token: str) -> dict:
    """The capabilities the server's initialize answer declares."""
    import asyncio

    from mcp import Client
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    async def ask() -> dict:
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                return client.server_capabilities.model_dump(exclude_none=True)

    return asyncio.run(ask())


def test_the_server_passes_every_scenario_that_applies(served, tmp_path):
    proxy, url, token = served
    capabilities = declared(url, token)
    assert "tools" in capabilities
    scenarios = ALWAYS + [s for capability, extra in DECLARED.items() if capability in capabilities for s in extra]
    failed, passed = {}, {}
    for scenario in scenarios:
        run, checks = conformance("server", "--url", proxy.url, "--scenario", scenario, out=tmp_path / scenario)
        bad = judged(run, checks)
        if bad:
            failed[scenario] = bad
        else:
            passed[scenario] = [c["id"] for c in checks if c["status"] == "SUCCESS"]
    assert not failed, json.dumps(failed, indent=1)
    assert set(passed) == set(scenarios) and all(passed.values())
    assert passed["dns-rebinding-protection"] == ["localhost-host-rebinding-rejected", "localhost-host-valid-accepted"]
    assert proxy.requests > len(scenarios)  # the suite spoke to the server through the proxy


def test_without_the_token_the_suite_is_refused(served, tmp_path):
    """The proxy is what lets the suite in: straight to the server, initialize fails (401)."""
    _proxy, url, _token = served
    run, checks = conformance("server", "--url", url, "--scenario", "server-initialize", out=tmp_path / "bare")
    assert run.returncode != 0 and [c["status"] for c in checks] == ["FAILURE"]
    assert "401" in checks[0]["errorMessage"] or "Unauthorized" in checks[0]["errorMessage"]


@pytest.mark.parametrize("scenario", CLIENT_SCENARIOS)
def test_our_client_passes(scenario, tmp_path):
    run, checks = conformance("client", "--command", f"{sys.executable} {CLIENT}", "--scenario", scenario,
                              out=tmp_path / scenario)
    assert not judged(run, checks), "\n".join(judged(run, checks))
    said = next((tmp_path / scenario).rglob("stdout.txt")).read_text()
    assert said.startswith("MCP conformance (http): ")  # our client started, as the agent starts it
    expected = {"initialize": "0 tools", "tools_call": "add_numbers: The sum of 5 and 3 is 8",
                "sse-retry": "test_reconnection: Reconnection test completed successfully"}[scenario]
    assert expected in said, said
