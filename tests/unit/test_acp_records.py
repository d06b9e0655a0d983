"""The ACP mapping of session records (workstation.acp.records) and the stdio line check (acp.wire), without
a process: hunks that rebuild the file, what a record becomes, what a bad line gets back."""

from __future__ import annotations

import json

from acp.schema import AgentMessageChunk, AgentPlanUpdate, FileEditToolCallContent, ToolCallProgress, ToolCallStart

from workstation.acp import wire
from workstation.sessions.records import from_dict
from workstation.acp.records import Mapper, hunks
from workstation.textdiff import unified

BEFORE = "".join(f"line {n}\n" for n in range(1, 41))
AFTER = BEFORE.replace("line 3\n", "line three\n").replace("line 30\n", "").replace("line 40\n", "line 40\nline 41\n")


def test_each_hunk_is_a_piece_of_the_old_file_and_its_replacement_in_the_new():
    diff = unified(BEFORE, AFTER, "a/f.txt", "b/f.txt").text
    found = hunks(diff)
    assert len(found) == 3
    rebuilt = BEFORE
    for old, new in found:
        assert rebuilt.count(old) == 1
        rebuilt = rebuilt.replace(old, new)
    assert rebuilt == AFTER


def _updates(mapper, data: dict, **kw):
    """The updates of a record given as its JSON object."""
    return mapper.updates(from_dict({"v": 1, "id": "r1", **data}), **kw)


def test_a_tool_record_carries_its_diffs_its_result_and_the_plan(tmp_path):
    (tmp_path / "pkg").mkdir()
    mapper = Mapper(tmp_path)
    call = {"id": "c1", "name": "edit_file", "arguments": json.dumps({"path": "pkg/a.py", "old": "x", "new": "y"})}
    (start,) = _updates(mapper, {"type": "assistant", "content": "Editing.", "tool_calls": [call]}, streamed=True)
    assert isinstance(start, ToolCallStart) and start.kind == "edit" and start.status == "pending"
    assert start.locations[0].path == str(tmp_path / "pkg/a.py")
    diff = unified("x = 1\n", "y = 1\n", "a/pkg/a.py", "b/pkg/a.py").text
    made = unified("", "new\n", "/dev/null", "b/pkg/b.py").text
    record = {"type": "tool", "tool_call_id": "c1", "name": "edit_file", "ok": True, "content": "pkg/a.py: edited",
              "edits": [{"path": "pkg/a.py", "before": "h1", "after": "h2", "diff": diff},
                        {"path": "pkg/b.py", "after": "h3", "diff": made}],
              "plan": [{"text": "edit", "status": "done"}, {"text": "test", "status": "pending"}]}
    end, plan = _updates(mapper, record)
    assert isinstance(end, ToolCallProgress) and end.status == "completed"
    changed = [c for c in end.content if isinstance(c, FileEditToolCallContent)]
    assert [(c.path, c.old_text, c.new_text) for c in changed] == [
        (str(tmp_path / "pkg/a.py"), "x = 1\n", "y = 1\n"), (str(tmp_path / "pkg/b.py"), None, "new\n")]
    assert end.content[-1].content.text == "pkg/a.py: edited"
    assert isinstance(plan, AgentPlanUpdate)
    assert [(e.content, e.status) for e in plan.entries] == [("edit", "completed"), ("test", "pending")]


def test_what_the_conversation_is_not_maps_to_nothing_and_a_path_outside_is_no_location(tmp_path):
    (tmp_path / "out").symlink_to("/etc")
    mapper = Mapper(tmp_path / ".")
    assert _updates(mapper, {"type": "epoch", "content": "system prompt"}) == []
    assert _updates(mapper, {"type": "system", "content": "pinned", "pin": True}) == []
    (notice,) = _updates(mapper, {"type": "system", "content": "[cancelled]", "notice": "cancelled"})
    assert isinstance(notice, AgentMessageChunk) and notice.content.text.strip() == "[cancelled]"
    for path in ("../secret", "/etc/passwd", "out/passwd"):
        call = {"id": path, "name": "read_lines", "arguments": json.dumps({"path": path, "start": 1, "end": 2})}
        (start,) = _updates(mapper, {"type": "assistant", "tool_calls": [call]})
        assert start.locations is None, path


def test_a_line_that_is_not_a_message_is_named_and_a_message_passes():
    assert wire.problem(b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}') is None
    assert wire.problem(b'{"jsonrpc": "2.0", "id": 1, "result": {}}') is None  # a response to our request
    code, message, ident = wire.problem(b"{oops")
    assert (code, ident) == (wire.PARSE_ERROR, None) and "{oops" in message
    assert wire.problem(b"42")[0] == wire.INVALID_REQUEST
    code, message, _ = wire.problem(b"[" * 100_000)  # deeper than json reads: RecursionError, not ValueError
    assert code == wire.PARSE_ERROR and message.startswith("Parse error: nested too deeply to read: '[[[")
    assert wire.problem(b'{"jsonrpc": "2.0", "id": 3, "method": 5}') == (
        wire.INVALID_REQUEST, "Invalid Request: method must be a string", 3)
    assert wire.problem(b'{"jsonrpc": "2.0"}')[1] == "Invalid Request: neither a method nor an id"
    assert json.loads(wire.error_line(-32700, "Parse error", None)) == {
        "jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}


def _transport_reads(chunks: list[bytes], limit: int) -> tuple[list, list[str], bytes]:
    """What a StdioTransport over a pipe hands the SDK for `chunks` written one by one (the messages, then
    None at the end), the lines it named as bad, and what it wrote back."""
    import asyncio
    import os
    import threading
    import time

    inbound, feed = os.pipe()
    answers, outbound = os.pipe()
    bad: list[str] = []

    def write() -> None:
        for chunk in chunks:
            os.write(feed, chunk)
            time.sleep(0.01)  # each chunk its own read
        os.close(feed)

    async def serve() -> list:
        transport = await wire.StdioTransport(limit, bad.append, stdin=inbound, stdout=outbound).start()
        got = []
        while (message := await transport.receive()) is not None:
            got.append(message)
        got.append(None)
        await transport.close()
        return got

    writer = threading.Thread(target=write)
    writer.start()
    try:
        got = asyncio.run(asyncio.wait_for(serve(), 30))
    finally:
        writer.join()
        os.close(outbound)
    said = os.read(answers, 1 << 20)
    os.close(inbound)
    os.close(answers)
    return got, bad, said


def test_the_transport_gathers_lines_across_reads_and_drops_what_is_over_the_limit():
    ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    exact = b'{"jsonrpc":"2.0","id":2,"method":"' + b"x" * (100 - 36) + b'"}'
    assert len(exact) == 100
    got, bad, said = _transport_reads(
        [ping[:10], ping[10:] + b"\n" + exact + b"\n",  # a line split across reads; one exactly at the limit
         b"y" * 60, b"y" * 60, b"y" * 60 + b"\n",  # over the limit across reads: dropped as it comes
         b"z" * 101 + b"\n",  # over the limit within one read
         b"\n   \n" + b'{"jsonrpc":"2.0","id":3,"result":{}}'],  # blank lines; the last line without a newline
        limit=100)
    assert got == [json.loads(ping), json.loads(exact), {"jsonrpc": "2.0", "id": 3, "result": {}}, None]
    assert bad == ["Parse error: a line of 180 bytes is over the 100-byte limit of one message: dropped",
                   "Parse error: a line of 101 bytes is over the 100-byte limit of one message: dropped"]
    assert [json.loads(line)["error"]["message"] for line in said.splitlines()] == bad
