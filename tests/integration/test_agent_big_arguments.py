"""A tool-call argument streamed far past what any tool takes (issue 19, item 11): the model (or whoever
steers it) streams 10 MB of arguments in small chunks. The turn must not stay busy reading them: the
stream is left once the arguments pass llm.MAX_TOOL_ARGS_CHARS, the call is refused in one line, and the
turn goes on. Real litellm, scripted server.

In small chunks the size limit alone does not help: litellm costs 1-4 ms a chunk, so reading up to 1,000,000
characters in 7-character chunks (~143,000 chunks) took minutes. An honest provider spends at least one output
token on every chunk that carries text or arguments, so a stream of more chunks than the model's output limit
(model.max_output_tokens, else litellm's figure, plus a slack for the structural chunks) is not the model's
answer: it is left with one line, and a write of the model's full output limit still goes through."""

from __future__ import annotations

import threading
import time

from support.agent_support import agent, module_server, records, workspace
from support.fakellm import Reply
from workstation.llm import MAX_TOOL_ARGS_CHARS
from workstation.llm.attempt import STREAM_SLACK_CHUNKS

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


def test_a_stream_longer_than_the_model_can_write_is_left_and_a_write_within_it_goes_through(tmp_path, server):
    """10 MB of arguments in 7-character chunks against a model whose answers hold at most 1,000 tokens: the
    stream is left at 1,000 + slack chunks, the turn ends with one line naming the limit and nothing is
    written. A write of 1,000 chunks (what that model can honestly send) goes through whole."""
    limit = 1_000
    ws = workspace(tmp_path, server.url, model={"timeout_s": 600, "max_output_tokens": limit})
    a = agent(ws)
    honest = "y" * (7 * (limit - 10) - len('{"path": "ok.txt", "content": ""}'))  # ~990 chunks of 7 characters
    server.push(Reply(tool_calls=[("write_file", {"path": "ok.txt", "content": honest})], args_chunk_size=7),
                Reply(text="written"))
    assert a.run("write the small one").text == "written"
    assert (ws.root / "ok.txt").read_text() == honest

    server.push(Reply(tool_calls=[("write_file", {"path": "big.txt", "content": "x" * 10_000_000})],
                      args_chunk_size=7))
    asked = len(server.requests)
    started = time.monotonic()
    result = a.run("write the big one")
    took = time.monotonic() - started
    budget = limit + STREAM_SLACK_CHUNKS
    print(f"\n10 MB in 7-character chunks, output limit {limit:,} tokens: left after {budget:,} chunks, "
          f"the turn took {took:.1f} s")
    a.close()
    ws.close()
    assert result.error is not None and "\n" not in result.error, result
    assert f"went past {budget:,} chunks" in result.error and "output limit of 1,000 tokens" in result.error
    assert not (ws.root / "big.txt").exists() and len(server.requests) == asked + 1  # the turn ended there
    assert took < 60, took
