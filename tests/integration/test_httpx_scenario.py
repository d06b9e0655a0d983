"""Seed 003's scenario on the real httpx sources, end to end through the real agent loop (benchmarks/bench_agent.py
--scenario httpx runs the same): the edit happens, the check proves it, and the file reads are cut at least as
much as the seed's agent cut them."""

from __future__ import annotations

import pytest

from support.agent_support import agent, module_server, workspace
from support.httpx_scenario import (API, CHECK, CLIENT, SEED_REDUCTION, TASK, HttpxRequestIdPolicy, check_repo, make_repo,
                           passed_blind)
from workstation.agent import tools
from workstation.agent.loop import base_tokens
from workstation.costs import report as report_mod

server_module, server = module_server()


def test_a_fresh_copy_fails_the_check(tmp_path):
    make_repo(tmp_path)
    problems = check_repo(tmp_path)
    assert len(problems) == 28 + 27  # every target's signature, every call between them
    assert "Client.get does not end with a keyword-only request_id: str | None" in problems
    assert any(p.startswith("AsyncClient.request calls build_request (line ") for p in problems)


@pytest.mark.timeout(60, func_only=True)  # the run itself; importing litellm for the module is apart
@pytest.mark.parametrize("per_function", [False, True], ids=["edits-per-file", "edits-per-function"])
def test_the_httpx_scenario_through_the_real_loop(tmp_path, server, per_function):
    policy = HttpxRequestIdPolicy(per_function=per_function)
    broken: list[list[str]] = []  # at every request, what the edits so far left inconsistent

    def responder(body):
        broken.append(passed_blind(ws.root))
        return policy(body)

    server.dispatch.fn = responder
    ws = workspace(tmp_path, server.url, files={}, agent={"max_steps": 40})  # as bench_agent's
    copied = make_repo(ws.root)
    assert API in copied and CLIENT in copied and len(copied) > 20
    ws.kmap.index_all()
    a = agent(ws, "httpx", compaction="sync")
    first, second = a.run(TASK), a.run(CHECK)
    a.close()
    assert first.error is None and second.error is None, (first.error, second.error)
    assert second.text.startswith("Verified: all 28 functions take request_id and pass it on, per [D:d")
    # map, decide, grep + read, edit _client.py, grep, edit _api.py, done; or one step per function's edits
    # (19 in _client.py, build_request's body with its signature; 9 in _api.py)
    assert first.steps == (7 - 2 + 19 + 9 if per_function else 7) and first.tool_calls == 62
    edits = [line.split(":")[0] for line in policy.log if line.startswith("edit ")]
    assert edits == [f"edit {CLIENT}", f"edit {API}"]  # the callees first: the sink's file, then the API
    # so no step left a call passing request_id to a function not taking it yet (nothing for a language server)
    assert len(broken) == first.steps + second.steps and not any(broken), [b for b in broken if b][:1]
    assert check_repo(ws.root) == []

    rep = report_mod.build(ws.paths, "httpx", tools.meaning_of, base_tokens)
    assert rep.agent.file_reads == 1  # build_request's body: everything else came from maps and grep
    assert rep.agent.decisions_logged == 1 and rep.agent.decisions_reused >= 6
    reads = rep.reduction("file_reads")
    assert reads >= SEED_REDUCTION and reads >= 0.5, (rep.agent.file_reads, rep.baseline.file_reads)
    assert rep.reduction("file_reads", rep.baseline_once) >= 0.5

    # what passed_blind catches: a caller edited before its callee, a function using an id it does not take
    api = ws.root / API
    done = api.read_text()
    api.write_text(done.replace("    request_id: str | None = None,\n) -> Response:", ") -> Response:", 1))
    assert sorted(passed_blind(ws.root)) == ["delete passes request_id to request, which does not take it",
                                             "get passes request_id to request, which does not take it",
                                             "head passes request_id to request, which does not take it",
                                             "options passes request_id to request, which does not take it",
                                             "patch passes request_id to request, which does not take it",
                                             "post passes request_id to request, which does not take it",
                                             "put passes request_id to request, which does not take it",
                                             "request uses request_id without taking it"]
    api.write_text(done)

    # the check fails on what it must catch: a call that drops the id, an id that never reaches the request
    client = ws.root / CLIENT
    edited = client.read_text()
    lines = edited.splitlines(keepends=True)
    dropped = max(i for i, line in enumerate(lines) if line.strip() == "request_id=request_id,")
    client.write_text("".join(lines[:dropped] + lines[dropped + 1:]))
    problems = check_repo(ws.root)
    assert len(problems) == 1 and problems[0].startswith("AsyncClient.delete calls request (line "), problems
    sink = '{**extensions, "request_id": request_id}'
    assert edited.count(sink) == 1
    client.write_text(edited.replace(sink, "extensions"))
    problems = check_repo(ws.root)
    assert len(problems) == 1 and problems[0].startswith("the transport saw the ids [null, null,"), problems
    ws.close()
