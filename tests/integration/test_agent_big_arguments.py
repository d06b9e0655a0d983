"""A tool-call argument streamed far past what any tool takes (issue 19, item 11): the model (or whoever
steers it) streams 10 MB of arguments in small chunks. The turn must not stay busy reading them: the
stream is left once the arguments pass llm.MAX_TOOL_ARGS_CHARS, the call is refused in one line, and the
turn goes on. Real litellm, scripted server.

What is left: litellm's cost per chunk. The arguments are read up to the limit, 1,000,000 characters: in
chunks of 7 characters that is ~143,000 chunks, minutes on a busy machine; the user's stop ends it."""

from __future__ import annotations

import threading
import time

from agent_support import agent, module_server, records, workspace
from fakellm import Reply
from workstation.llm import MAX_TOOL_ARGS_CHARS

server_module, server = module_server()
LIMIT_S = 60.0
# characters per streamed chunk: litellm spends ~1-4 ms on each chunk here whatever its size, so 10 MB in
# chunks of a few characters would take hours to receive even read linearly; at 256, 10 MB is 40,000 chunks
CHUNK = 256


def test_a_10_mb_streamed_argument_does_not_keep_the_turn_busy(tmp_path, server):
    ws = workspace(tmp_path, server.url, model={"timeout_s": 600})
    a = agent(ws)
    server.push(Reply(tool_calls=[("write_file", {"path": "big.txt", "content": "x" * 10_000_000})],
                      args_chunk_size=CHUNK), Reply(text="gave up"))
    cancel = threading.Event()
    out: list = []
    worker = threading.Thread(target=lambda: out.append(a.run("write it", cancel=cancel)), daemon=True)
    started = time.monotonic()
    worker.start()
    worker.join(LIMIT_S)
    took = time.monotonic() - started
    through = worker.is_alive()
    if through:  # stop it: the test has its answer
        cancel.set()
        worker.join(60)
    print(f"\n10 MB streamed argument: 1 attempt, {int(through)} got through (the turn took "
          f"{'over ' if through else ''}{took:.1f} s)")
    a.close()
    ws.close()
    assert not through
    result = out[0]
    assert result.error is None and result.text == "gave up", result
    tool = records(a.session, "tool")[-1]
    assert not tool["ok"] and f"over the limit of {MAX_TOOL_ARGS_CHARS:,}" in tool["content"], tool["content"][:300]
    assert not (ws.root / "big.txt").exists()
