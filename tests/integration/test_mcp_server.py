"""`workstation mcp` through the SDK's own client: over stdio and streamable HTTP, what is listed, what a
call does to the tree, the episodic log and the session log, and what a hostile client cannot do."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.agent_support import write_repo
from workstation.agent import tools

WORKSTATION = str(Path(sys.executable).with_name("workstation"))
SECRET = "ws-mcp-secret-value-0123456789"  # the value of a secret-named variable in the server's environment
PROVIDER_KEY = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" * 2  # a key format scrub knows without being told


@pytest.fixture
def repo(tmp_path):
    root = write_repo(tmp_path / "repo")
    (root / "settings.py").write_text(f'TOKEN = "{SECRET}"\nKEY = "{PROVIDER_KEY}"\n')
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (root / ".workstation").mkdir()
    (root / ".workstation" / "config.toml").write_text("[agent]\nmax_steps = 5\n")
    (root / "escape").symlink_to(tmp_path)  # a symlink out of the workspace
    (tmp_path / "outside.txt").write_text("outside\n")
    return root


def server_env(tmp_path) -> dict[str, str]:
    return {"WORKSTATION_HOME": str(tmp_path / "home"), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "WS_MCP_TEST_TOKEN": SECRET}


def stdio(root, tmp_path, *flags):
    from mcp import StdioServerParameters

    return StdioServerParameters(command=WORKSTATION, args=["-C", str(root), "mcp", *flags],
                                 env=server_env(tmp_path))


def client(server, name: str, mode: str = "legacy", token: str | None = None):
    from mcp import Client
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
    from mcp.types import Implementation

    if token is not None:  # an HTTP server: the bearer token its start printed
        server = streamable_http_client(server, http_client=create_mcp_http_client(
            headers={"Authorization": f"Bearer {token}"}))
    return Client(server, client_info=Implementation(name=name, version="9.9"), mode=mode)


async def call(c, name: str, **args) -> tuple[bool, str]:
    result = await c.call_tool(name, args)
    return not result.is_error, "\n".join(b.text for b in result.content)


def cli(root, tmp_path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([WORKSTATION, "-C", str(root), *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **server_env(tmp_path)})


def sql(root, tmp_path, query: str) -> list[dict]:
    run = cli(root, tmp_path, "reflect", "--sql", query, "--json")
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def session_records(root) -> dict[str, list[dict]]:
    out = {}
    for path in sorted((root / ".workstation" / "sessions").glob("*.jsonl")):
        out[path.stem] = [json.loads(line) for line in path.read_text().splitlines()]
    return out


def served_by_effect(read_only: bool) -> set[str]:
    """The registry's tools by effect, and the server's own `frontier` (it looks only)."""
    effects = {tools.QUERY} if read_only else {tools.QUERY, tools.MEMORY, tools.WRITE}
    return {name for name, tool in tools.TOOLS.items() if tool.effect in effects} | {"frontier"}


# --------------------------------------------------------------------------- the round trip
def test_stdio_round_trip_lists_reads_edits_and_logs(repo, tmp_path):
    async def session():
        async with client(stdio(repo, tmp_path), "Claude Code") as c:
            listed = {t.name: t for t in (await c.list_tools()).tools}
            refused = await call(c, "replace_lines", path="pkg/util.py", start=4, end=4,
                                 content="def clean(text: str) -> str:  # edited")
            meta = await call(c, "file_meta", path="pkg/util.py")
            edited = await call(c, "replace_lines", path="pkg/util.py", start=4, end=4,
                                content="def clean(text: str) -> str:  # edited")
            found = await call(c, "find", query="Cleaner")
            return listed, refused, meta, edited, found

    listed, refused, meta, edited, found = asyncio.run(session())
    # what is offered is the registry's tools by effect: never a command
    assert set(listed) == served_by_effect(False) and "run_command" not in listed
    assert listed["file_meta"].annotations.read_only_hint is True
    assert listed["replace_lines"].annotations.read_only_hint is False
    # the hash guard: no edit before this client read the file
    assert not refused[0] and "read it before" in refused[1]
    assert meta[0] and "def clean" in meta[1] and "class Cleaner" in meta[1]
    assert edited[0] and "replaced lines 4-4" in edited[1]
    assert "# edited" in (repo / "pkg/util.py").read_text().splitlines()[3]
    assert found[0] and "pkg/util.py" in found[1]

    # the session log: named for the client, a notice, then each call and its result side by side
    logs = session_records(repo)
    assert len(logs) == 1
    slug, records = next(iter(logs.items()))
    assert slug.endswith("-mcp-claude-code")
    assert records[0]["type"] == "system" and records[0]["notice"] == "mcp" and "Claude Code 9.9" in records[0]["content"]
    calls = records[1:]
    assert [r["type"] for r in calls] == ["assistant", "tool"] * 4
    assert [r["name"] for r in calls if r["type"] == "tool"] == ["replace_lines", "file_meta", "replace_lines", "find"]
    for asked, answered in zip(calls[::2], calls[1::2]):
        assert asked["client"] == "Claude Code" and asked["tool_calls"][0]["id"] == answered["tool_call_id"]
    assert calls[1]["ok"] is False and calls[5]["ok"] is True and calls[5]["lines"] == [4, 4]

    # the episodic log, read by another process: each call an operation, its meaning's events inside it
    events = sql(repo, tmp_path, "SELECT id, parent, session, type, name, data->>'via' AS via, "
                                 "data->>'client' AS client, data->>'turn_id' AS turn_id, ok FROM events ORDER BY ts")
    assert {e["session"] for e in events} == {slug}
    ops = [e for e in events if e["type"] == "tool_call"]
    assert [e["name"] for e in ops] == ["replace_lines", "file_meta", "replace_lines", "find"]
    assert all(e["via"] == "mcp" and e["client"] == "Claude Code" for e in ops)
    assert [e["ok"] for e in ops] == [False, True, True, True]
    tool_ids = {r["id"] for r in calls if r["type"] == "tool"}
    assert {e["turn_id"] for e in ops} == tool_ids  # the timeline jumps from the event to the record
    starts = {e["id"]: e for e in events if e["type"] == "op_start"}
    edit = next(e for e in events if e["type"] == "file_edit")
    assert edit["name"] == "pkg/util.py" and starts[edit["parent"]]["name"] == "replace_lines"
    assert any(e["type"] == "read_avoided" and starts.get(e["parent"], {}).get("name") == "file_meta" for e in events)

    # replay reads the session like any other
    replay = cli(repo, tmp_path, "replay", slug, "--print")
    assert replay.returncode == 0, replay.stderr
    assert "replace_lines(pkg/util.py 4-4)" in replay.stdout and "file_meta(pkg/util.py)" in replay.stdout


def test_read_only_offers_only_tools_that_change_nothing(repo, tmp_path):
    async def session():
        async with client(stdio(repo, tmp_path, "--read-only"), "codex", mode="auto") as c:
            listed = [t.name for t in (await c.list_tools()).tools]
            await call(c, "read_lines", path="pkg/util.py", start=1, end=5)
            edit = await call(c, "replace_lines", path="pkg/util.py", start=1, end=1, content="x")
            write = await call(c, "umem", tier="ltm", key="k", value=1)
            return listed, edit, write

    before = (repo / "pkg/util.py").read_text()
    listed, edit, write = asyncio.run(session())
    assert set(listed) == served_by_effect(True)
    assert all(tools.get(name).effect == tools.QUERY for name in listed if name != "frontier")
    assert "replace_lines" not in listed and "umem" not in listed
    assert not edit[0] and "read-only" in edit[1]
    assert not write[0] and "read-only" in write[1]
    assert (repo / "pkg/util.py").read_text() == before


# --------------------------------------------------------------------------- a hostile client
def test_attacks_through_the_server_are_refused(repo, tmp_path):
    deep: dict = {}
    node = deep
    for _ in range(60):
        node["a"] = {}
        node = node["a"]

    async def session():
        async with client(stdio(repo, tmp_path), "attacker") as c:
            out = {}
            for path in ("../outside.txt", str(tmp_path / "outside.txt"), "escape/outside.txt",
                         ".workstation/config.toml", ".git/config"):
                out[("read", path)] = await call(c, "read_lines", path=path, start=1, end=1)
                out[("meta", path)] = await call(c, "file_meta", path=path)
                out[("edit", path)] = await call(c, "replace_lines", path=path, start=1, end=1, content="pwned\n")
            out["grep outside"] = await call(c, "grep", pattern="outside", path="..")
            out["nested"] = await call(c, "grep", pattern=deep)
            out["nested list"] = await call(c, "read_lines", path=[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["x"]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
                                            start=1, end=1)
            out["bad type"] = await call(c, "read_lines", path="pkg/util.py", start="one", end=2)
            out["extra arg"] = await call(c, "read_lines", path="pkg/util.py", start=1, end=2, mode="rw")
            out["command"] = await call(c, "run_command", cmd="touch pwned")
            out["unknown"] = await call(c, "no_such_tool")
            out["secrets"] = await call(c, "read_lines", path="settings.py", start=1, end=2)
            out["still alive"] = await call(c, "read_lines", path="pkg/util.py", start=1, end=1)
            return out

    out = asyncio.run(session())
    for (kind, path), (ok, text) in ((k, v) for k, v in out.items() if isinstance(k, tuple)):
        if kind == "read" and path == ".git/config":
            continue  # reading the repository's config is allowed; writing it is not
        assert not ok, (kind, path, text)
    assert "outside the workspace" in out[("read", "../outside.txt")][1]
    assert "state folder" in out[("edit", ".workstation/config.toml")][1]
    assert ".git folder" in out[("edit", ".git/config")][1]
    assert (repo / ".git" / "config").read_text() == "[core]\n\tbare = false\n"
    assert (repo / ".workstation" / "config.toml").read_text() == "[agent]\nmax_steps = 5\n"
    assert (tmp_path / "outside.txt").read_text() == "outside\n"
    assert not out["grep outside"][0]
    assert not out["nested"][0] and "nested deeper" in out["nested"][1]
    assert not out["nested list"][0] and "nested deeper" in out["nested list"][1]
    assert not out["bad type"][0] and "start must be an integer" in out["bad type"][1]
    assert not out["extra arg"][0] and "bad arguments" in out["extra arg"][1]
    assert not out["command"][0] and "not offered" in out["command"][1]
    assert not (repo / "pwned").exists()
    assert not out["unknown"][0] and "unknown tool" in out["unknown"][1]
    ok, text = out["secrets"]
    assert ok and SECRET not in text and PROVIDER_KEY not in text and text.count("***") == 2
    assert out["still alive"][0]
    # neither the session log nor the episodic log keeps a secret
    state = repo / ".workstation"
    assert not any(SECRET in p.read_text() or PROVIDER_KEY in p.read_text() for p in (state / "sessions").glob("*.jsonl"))
    dump = json.dumps(sql(repo, tmp_path, "SELECT * FROM events"), default=str)
    assert SECRET not in dump and PROVIDER_KEY not in dump and "not logged: not a JSON object" in dump


def test_several_stdio_servers_share_one_workspace(repo, tmp_path):
    """Three agents, each starting its own `workstation mcp`, at once: one owner process holds the database,
    the others reach it through the broker; nothing is lost."""
    files = ["pkg/core.py", "pkg/util.py", "pkg/__init__.py"]

    async def one(i: int, path: str):
        async with client(stdio(repo, tmp_path), f"agent-{i}") as c:
            ok, _ = await call(c, "read_lines", path=path, start=1, end=1)
            assert ok
            ok, text = await call(c, "replace_lines", path=path, start=1, end=1, content=f'"""Edited by agent {i}."""')
            assert ok, text
            ok, text = await call(c, "umem", tier="ltm", key=f"agent{i}.done", value=True)
            assert ok, text
            await call(c, "fence", tier="ltm")

    async def all_at_once():
        await asyncio.gather(*(one(i, path) for i, path in enumerate(files)))

    asyncio.run(all_at_once())
    for i, path in enumerate(files):
        assert (repo / path).read_text().startswith(f'"""Edited by agent {i}."""')
    logs = session_records(repo)
    assert sorted(slug.split("-mcp-")[1] for slug in logs) == ["agent-0", "agent-1", "agent-2"]
    rows = sql(repo, tmp_path, "SELECT session, count(*) AS n FROM events WHERE type = 'tool_call' GROUP BY session")
    assert {r["session"]: r["n"] for r in rows} == {slug: 4 for slug in logs}
    run = cli(repo, tmp_path, "memory", "list", "--tier", "ltm", "--json")
    assert run.returncode == 0, run.stderr
    assert {e["key"] for e in json.loads(run.stdout)} >= {"agent0.done", "agent1.done", "agent2.done"}


# --------------------------------------------------------------------------- HTTP, several clients at once
def start_http(repo, tmp_path, *flags) -> tuple[subprocess.Popen, str, str]:
    """(the server, its URL, its bearer token) as its start printed them on stderr."""
    proc = subprocess.Popen([WORKSTATION, "-C", str(repo), "mcp", "--http", "0", *flags], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **server_env(tmp_path)})
    deadline = time.monotonic() + 60
    url = None
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if "http://127.0.0.1:" in line:
            url = line.split(" on ")[-1].strip()
        elif url and "Authorization: Bearer " in line:
            return proc, url, line.split("Authorization: Bearer ", 1)[1].split("`", 1)[0]
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"the HTTP server did not start: {proc.stderr.read()}")


def test_http_serves_many_clients_each_with_its_own_reads(repo, tmp_path):
    import httpx

    proc, url, token = start_http(repo, tmp_path)
    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")

        async def reader(c):
            await call(c, "read_lines", path="pkg/core.py", start=1, end=3)

        async def session():
            async with (client(url, "reader-agent", token=token) as a,
                        client(url, "editor-agent", mode="auto", token=token) as b):
                await asyncio.gather(reader(a), call(b, "find", query="fetch"),
                                     *(call(a, "grep", pattern="def ") for _ in range(4)))
                # b never read pkg/core.py: a's read is not b's
                refused = await call(b, "replace_lines", path="pkg/core.py", start=1, end=1,
                                     content='"""Core helpers, edited by b."""')
                edited = await call(a, "replace_lines", path="pkg/core.py", start=1, end=1,
                                    content='"""Core helpers, edited by a."""')
                return refused, edited

        refused, edited = asyncio.run(session())
        assert not refused[0] and "read it before" in refused[1]
        assert edited[0], edited[1]
        assert (repo / "pkg/core.py").read_text().startswith('"""Core helpers, edited by a."""')
        # a page elsewhere cannot drive it through the user's browser (DNS rebinding)
        forged = httpx.post(url, headers={"Host": "evil.example", "Content-Type": "application/json",
                                          "Authorization": f"Bearer {token}",
                                          "Accept": "application/json, text/event-stream"},
                            content=b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}')
        assert forged.status_code in (400, 403, 421)
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) is not None

    logs = session_records(repo)
    assert sorted(slug.split("-mcp-")[1] for slug in logs) == ["editor-agent", "reader-agent"]
    by_client = {slug.split("-mcp-")[1]: [r for r in recs if r["type"] == "tool"] for slug, recs in logs.items()}
    assert [r["name"] for r in by_client["editor-agent"]] == ["find", "replace_lines"]
    assert len(by_client["reader-agent"]) == 6
    sessions = {e["session"] for e in sql(repo, tmp_path, "SELECT DISTINCT session FROM events")}
    assert sessions == set(logs)


def test_what_the_wire_allows_but_a_file_cannot_hold_is_refused_or_replaced(repo):
    """Lone surrogates (legal JSON escapes), a tool name of any length, arguments that are not an object:
    each call is answered and logged, none raises."""
    from workstation.mcp.server import Service
    from workstation.runtime import Workspace

    with Workspace(repo) as ws:
        service = Service(ws)
        state = service.client("k", "client\ud800", "1")
        try:
            answers = [service.call(state, name, args) for name, args in (
                ("read_lines", {"path": "pkg/\ud800.py", "start": 1, "end": 2}),
                ("grep", {"pattern": "\ud800"}),
                ("replace_lines", {"path": ".git/\ud800", "start": 1, "end": 1, "content": "x"}),
                ("grep", [1, 2]),
                ("x" * 10_000, {}))]
        finally:
            service.close()
        assert [a.ok for a in answers] == [False, True, False, False, False]
        assert "no such file" in answers[0].text and ".git folder" in answers[2].text
        assert "JSON object" in answers[3].text and len(answers[4].text) < 1000
        (records,) = session_records(repo).values()
        assert records[0]["content"] == "[MCP client client\ufffd 1 over stdio]"
        assert [r["ok"] for r in records if r["type"] == "tool"] == [False, True, False, False, False]


# --------------------------------------------------------------------------- the start
def _lines(proc, count: int) -> list[dict]:
    return [json.loads(proc.stdout.readline()) for _ in range(count)]


def test_the_handshake_is_answered_while_the_sdk_loads_as_the_sdk_answers_it(repo, tmp_path):
    """mcp.start answers initialize, tools/list and ping before the SDK has loaded; the SDK, given the same
    lines, answers the same (checked by the start: a difference is a warning on stderr), and later requests
    (resources/list, only the SDK's; tools/list again) are the SDK's: the same list."""
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
    from workstation.mcp import start

    assert start.HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS
    proc = subprocess.Popen([WORKSTATION, "-C", str(repo), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **server_env(tmp_path)})
    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
        for message in ({"id": 0, "method": "initialize", "params": hello}, {"method": "notifications/initialized"},
                        {"id": 1, "method": "tools/list"}, {"id": 2, "method": "ping"}):
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        proc.stdin.flush()
        first = _lines(proc, 3)
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "resources/list"}) + "\n")
        proc.stdin.flush()
        resources = _lines(proc, 1)[0]  # the SDK is serving now
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}) + "\n")
        proc.stdin.flush()
        again = _lines(proc, 1)[0]
    finally:
        proc.stdin.close()
        err = proc.stderr.read()
        proc.wait(30)
    assert [m["id"] for m in first] == [0, 1, 2]
    assert first[0]["result"]["protocolVersion"] == "2025-06-18"
    assert first[0]["result"]["serverInfo"]["name"] == "workstation"
    assert resources["id"] == 3 and resources["result"]["resources"][0]["uri"] == "workstation://frontier"
    assert again["id"] == 4 and again["result"] == first[1]["result"]
    assert {t["name"] for t in first[1]["result"]["tools"]} == served_by_effect(False)
    assert first[2]["result"] == {}
    assert "differs" not in err and "Traceback" not in err, err
    assert proc.returncode == 0


def test_an_early_answer_unlike_the_sdks_is_reported_and_never_sent_twice(tmp_path, caplog):
    from workstation.mcp import start

    out = tmp_path / "out"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT, 0o600)
    checked = start._Checked(fd, {7: {"tools": []}, 8: {}})

    async def write():
        await checked.write(json.dumps({"jsonrpc": "2.0", "id": 7, "result": {"tools": [{"name": "x"}]}}) + "\n")
        await checked.write(json.dumps({"jsonrpc": "2.0", "id": 8, "result": {}}) + "\n")
        await checked.write(json.dumps({"jsonrpc": "2.0", "id": 8, "result": {}}) + "\n")

    asyncio.run(write())
    os.close(fd)
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == [8]  # the third line only
    assert [r.getMessage()[:45] for r in caplog.records] == ["the early answer to request 7 differs from th"]
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
    base = {"jsonrpc": "2.0", "id": 1, "method": "initialize"}
    assert start.early_answer(None, {**base, "params": hello}, False) is not None
    for params in ({**hello, "protocolVersion": "1999-01-01"}, {**hello, "capabilities": None},
                   {k: v for k, v in hello.items() if k != "clientInfo"}):
        assert start.early_answer(None, {**base, "params": params}, False) is None, params
    assert start.early_answer(None, {**base, "params": hello}, True) is None  # a second initialize: the SDK's
    assert start.early_answer(None, {"jsonrpc": "2.0", "id": 2, "method": "ping"}, False) is None  # before init
