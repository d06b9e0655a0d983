"""`workstation mcp` answers "where are we": the frontier of the workspace's sessions as a tool and as resources,
through the SDK's own client over stdio."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from support.agent_support import write_repo
from workstation.paths import Paths
from workstation.sessions import Session

WORKSTATION = str(Path(sys.executable).with_name("workstation"))
GOAL = "Make the loader stream its input; never load the whole file."


def a_session(root: Path, slug: str, goal: str) -> Session:
    """A session as the agent leaves it: the user's goal, a plan, a file written."""
    session = Session.create(Paths.for_root(root), slug)
    session.user(goal)
    call = {"id": "c1", "name": "todo", "arguments": json.dumps({"items": []})}
    session.assistant("", tool_calls=[call])
    session.tool("c1", "todo", "plan updated", plan=[{"text": "stream the loader", "status": "in_progress"}])
    call = {"id": "c2", "name": "write_file", "arguments": json.dumps({"path": "pkg/loader.py", "content": "x"})}
    session.assistant("", tool_calls=[call])
    session.tool("c2", "write_file", "pkg/loader.py: created", edits=[
        {"path": "pkg/loader.py", "op": "create", "after": "ab" * 32, "added": 1, "removed": 0}])
    session.assistant("Done for now. Should the old loader stay as a fallback?")
    return session


def test_the_frontier_is_served_as_a_tool_and_as_resources(tmp_path):
    from mcp import Client, StdioServerParameters
    from mcp.shared.exceptions import MCPError
    from mcp.types import Implementation

    root = write_repo(tmp_path / "repo")
    a_session(root, "older", "An older session's goal.")
    newest = a_session(root, "newest", GOAL)
    os.utime(newest.path, (os.path.getmtime(newest.path) + 10,) * 2)  # written to last
    params = StdioServerParameters(command=WORKSTATION, args=["-C", str(root), "mcp", "--read-only"],
                                   env={"WORKSTATION_HOME": str(tmp_path / "home"),
                                        "LITELLM_LOCAL_MODEL_COST_MAP": "True"})

    async def ask():
        async with Client(params, client_info=Implementation(name="another-agent", version="1")) as c:
            listed = {t.name for t in (await c.list_tools()).tools}
            by_tool = await c.call_tool("frontier", {})
            named = await c.call_tool("frontier", {"session": "older"})
            bad = await c.call_tool("frontier", {"session": "../../etc/passwd"})
            resources = [str(r.uri) for r in (await c.list_resources()).resources]
            templates = [t.uri_template for t in (await c.list_resource_templates()).resource_templates]
            where = await c.read_resource("workstation://frontier")
            one = await c.read_resource("workstation://sessions/older/frontier")
            try:
                await c.read_resource("workstation://sessions/nope/frontier")
                missing = None
            except MCPError as err:
                missing = str(err)
            return listed, by_tool, named, bad, resources, templates, where, one, missing

    listed, by_tool, named, bad, resources, templates, where, one, missing = asyncio.run(ask())
    assert "frontier" in listed  # a read-only server serves it: it looks only
    text = by_tool.content[0].text
    assert not by_tool.is_error and text.startswith("# Session newest") and GOAL in text
    assert "[>] stream the loader" in text and "- created pkg/loader.py" in text
    assert "Should the old loader stay as a fallback?" in text  # the open question
    assert "An older session's goal." in named.content[0].text
    assert bad.is_error and "../../etc/passwd" in bad.content[0].text
    assert resources == ["workstation://frontier"] and templates == ["workstation://sessions/{slug}/frontier"]
    assert GOAL in where.contents[0].text and where.contents[0].mime_type == "text/markdown"
    assert "An older session's goal." in one.contents[0].text
    assert missing is not None and "no session named nope" in missing
