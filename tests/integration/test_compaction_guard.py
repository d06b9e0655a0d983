"""The compaction guard: before every request, the request as it will be sent (sessions.requestsize) decides,
and a compaction runs before any trim. Headless (`workstation chat`, one process per turn, as a script or a
CI job runs it) against the scripted model server, with a small window."""

from __future__ import annotations

import json

from click.testing import CliRunner

from support.agent_support import agent, config_overrides, is_compaction, module_server, records, workspace
from support.fakellm import Reply
from support.scenario_common import content
from workstation.agent.loop import AgentEvents
from workstation.sessions import Session
from workstation.sessions.log import LogView
from workstation.sessions.requestsize import budget, request_size
from workstation.sessions.turns import number as number_turns

server_module, server = module_server()

WINDOW = 16_000
RATIO = 0.6
SUMMARY = ("## Task & instructions\nkeep going\n## Decisions & conventions\n(none)\n## Files touched\n(none)\n"
           "## Open to-dos\n(none)\n## Errors seen\n(none)")


def files(n: int) -> dict[str, str]:
    """n modules of ~70 distinct lines each (~700 tokens read whole): one read per turn grows the context."""
    return {f"pkg/mod_{i}.py": "".join(f"def f_{i}_{j}(x):\n    return x * {i * 1000 + j}  # module {i}, line {j}\n"
                                       for j in range(35)) for i in range(n)}


def browsing(body: dict) -> Reply:
    """A model that reads one module per user message, then answers; a summarizer when asked to compact."""
    messages = body["messages"]
    if is_compaction(body):
        return Reply(text=SUMMARY)
    last = messages[-1]
    if last["role"] == "tool":
        return Reply(text="Read it: nothing to change there. " + "Noted. " * 40)
    asked = next(content(m) for m in reversed(messages) if m["role"] == "user" and "read module" in content(m))
    n = int(asked.split("read module ")[1].split()[0])
    return Reply(tool_calls=[("read_lines", {"path": f"pkg/mod_{n}.py", "start": 1, "end": 70})])


def user_config(tmp_path, url: str, **memory) -> dict:
    """The user's own config.toml (a workspace never names endpoints): the scripted model, a small window."""
    model = {**config_overrides(url)["model"], "context_window": WINDOW}
    home = tmp_path / "user-home"
    home.mkdir(exist_ok=True)
    memory = {"compact_token_ratio": RATIO, **memory}
    (home / "config.toml").write_text(
        "[model]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in model.items())
        + "[memory]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in memory.items())
        + "[lsp]\nenabled = false\n")
    return {"model": model, "memory": memory}


def turn_sizes(session) -> list[int]:
    """Tokens of each turn's records (sessions.turns)."""
    view = session.read()
    numbered = number_turns(view.records)
    sizes: dict[int, int] = {}
    for record in view.turns:
        n = numbered.of(record)
        if n:
            sizes[n] = sizes.get(n, 0) + int(record.get("tokens") or 0)
    return list(sizes.values())


def test_a_headless_session_compacts_before_it_would_trim(tmp_path, server, monkeypatch):
    """24 turns of `workstation chat --session`, each in a process of its own (CliRunner: the command's own
    code, start to exit): compactions happen, no request is trimmed, and no request passes the ratio of the
    window by more than one turn. Each process exits right after its turn, so each compaction ran before
    the request that needed it, never in a background thread that the exit would cancel."""
    from workstation.cli import main

    turns = 24
    ws = workspace(tmp_path, None, files=files(turns))
    ws.close()
    user_config(tmp_path, server.url)
    monkeypatch.setenv("WORKSTATION_HOME", str(tmp_path / "user-home"))
    monkeypatch.delenv("WORKSTATION_MODEL", raising=False)
    server.dispatch.fn = browsing
    slug = None
    for n in range(turns):
        args = ["-C", str(ws.root), "chat", f"please read module {n} and tell me what it does " + "now " * 30,
                "--json"]
        out = CliRunner().invoke(main, [*args, *(["--session", slug] if slug else [])])
        assert out.exit_code == 0, out.output
        reply = json.loads(out.stdout)
        assert reply["error"] is None and reply["trimmed"] == 0, reply
        slug = reply["session"]
    session = Session.open(ws.paths, slug)
    answers = records(session, "assistant")
    compacts = records(session, "compact")
    assert len(compacts) >= 2, f"{len(compacts)} compactions in {turns} turns"
    assert all(not a.get("trimmed") and not a.get("left_out") for a in answers)
    assert not [r for r in records(session) if r.get("notice") == "trimmed"]
    peak = max(a["context_tokens"] for a in answers)
    assert peak <= RATIO * WINDOW + max(turn_sizes(session)), (peak, max(turn_sizes(session)))
    # compaction requests did not count as chat requests: every chat request is an assistant record
    chat_requests = [b for b in server.requests[server.mark:] if not is_compaction(b)]
    assert len(chat_requests) == len(answers) == 2 * turns


def test_the_guard_measures_the_request_as_it_is_sent(tmp_path, server):
    """One size rule: what sessions.requestsize says of the log just before a request is that request's size as
    the agent counted it (context_tokens), for every request of a session that compacted on the way, so the
    sidecar, reading only the log, decides as the agent does."""
    ws = workspace(tmp_path, server.url, files=files(12), model={"context_window": WINDOW},
                   memory={"compact_token_ratio": RATIO})
    a = agent(ws, compaction="sync")
    server.dispatch.fn = browsing
    for n in range(12):
        assert a.run(f"please read module {n} and tell me what it does " + "now " * 30).error is None
    assert records(a.session, "compact")
    view = a.session.read()
    checked = 0
    for at, record in enumerate(view.records):
        if record["type"] == "assistant":
            before = LogView(view.records[:at], [], 0)
            assert request_size(before, ws.config, counter=a.session.counter).total == record["context_tokens"]
            checked += 1
    assert checked == 24
    a.close()
    ws.close()


def test_a_turn_that_alone_outgrows_the_window_is_cut_once_and_the_cut_holds(tmp_path, server):
    """No compaction can help (it is off here, as for a sub-agent): the trim leaves out a whole block at once,
    says so once, and the requests after it keep the same prefix (the provider's cache still serves it)."""
    ws = workspace(tmp_path, server.url, files=files(30), model={"context_window": WINDOW})
    a = agent(ws, compaction="off")
    state = {"n": 0}

    def reading(body: dict) -> Reply:
        if body["messages"][-1]["role"] == "tool" and state["n"] >= 24:
            return Reply(text="done")
        state["n"] += 1
        return Reply(tool_calls=[("read_lines", {"path": f"pkg/mod_{state['n'] - 1}.py", "start": 1, "end": 70})])

    server.dispatch.fn = reading
    notices: list[str] = []
    result = a.run("read every module, one after the other", AgentEvents(on_notice=notices.append))
    assert result.error is None and result.trimmed > 0
    trims = [n for n in notices if n.startswith("context trimmed to fit 16,000 tokens")]
    sent = [b["messages"] for b in server.requests[server.mark:]]
    cut_at = next(i for i, m in enumerate(sent[1:], 1) if len(m) < len(sent[i - 1]))
    # after the cut, each request starts with the whole of the one before it: only its end grows
    for before, after in zip(sent[cut_at:], sent[cut_at + 1:]):
        if len(after) < len(before):  # a second cut (the block ran out): said again, once
            continue
        assert after[: len(before)] == before
    cuts = sum(1 for before, after in zip(sent, sent[1:]) if len(after) < len(before))
    assert 1 <= len(trims) == cuts < len(sent) // 3, (len(trims), cuts, len(sent))
    a.close()
    ws.close()


def test_the_app_chat_and_acp_make_the_same_compactions(tmp_path, server, monkeypatch):
    """One scripted session of 16 turns driven three ways, each through its front end's own path to the session
    host (workstation.host): as the app runs its agent (one process, compaction in the background, a pause
    after each answer), as `workstation chat` (one process per turn: CliRunner, the command start to exit)
    and over ACP (the SDK's client, `workstation acp` in a process of its own). The compactions are the same:
    the same turns covered, for the same reason."""
    import asyncio
    import os
    import sys
    import time

    from acp import spawn_agent_process, text_block
    from support.conftest_llm import FAKE_API_KEY, TEST_KEY_ENV
    from workstation.cli import main
    from workstation.host import Host, TurnFinished

    turns = 16
    memory = {"compact_threshold": 8, "keep_recent": 2}
    server.dispatch.fn = browsing
    prompts = [f"please read module {n} and tell me what it does" for n in range(turns)]

    def compactions(ws_paths, slug) -> list[tuple]:
        return [(c["covers"]["new_first_turn"], c["covers"]["last_turn"], c["reason"])
                for c in records(Session.open(ws_paths, slug), "compact")]

    # the app's path: one process, a host that stays (background compaction)
    (tmp_path / "app").mkdir()
    ws = workspace(tmp_path / "app", server.url, files=files(turns), model={"context_window": WINDOW},
                   memory={**memory, "compact_token_ratio": RATIO})
    host = Host(ws)
    hosted = host.session(Session.create(ws.paths, "app"))
    finished = []
    hosted.subscribe(lambda event: finished.append(event) if isinstance(event, TurnFinished) else None)
    for text in prompts:
        assert hosted.run(text).error is None
        while hosted.agent._compactor is not None and hosted.agent._compactor.is_alive():
            time.sleep(0.05)  # the user reads the answer meanwhile
    assert len(finished) == turns
    app = compactions(ws.paths, "app")
    hosted.close()
    host.close()
    ws.close()

    # `workstation chat`, one process per turn
    (tmp_path / "chat").mkdir()
    ws = workspace(tmp_path / "chat", None, files=files(turns))
    ws.close()
    user_config(tmp_path / "chat", server.url, **memory)
    monkeypatch.setenv("WORKSTATION_HOME", str(tmp_path / "chat" / "user-home"))
    monkeypatch.delenv("WORKSTATION_MODEL", raising=False)
    slug = None
    for text in prompts:
        out = CliRunner().invoke(main, ["-C", str(ws.root), "chat", text, "--json",
                                        *(["--session", slug] if slug else [])])
        assert out.exit_code == 0, out.output
        slug = json.loads(out.stdout)["session"]
    chat = compactions(ws.paths, slug)

    # ACP: the SDK's client, the agent in a process of its own
    (tmp_path / "acp").mkdir()
    ws = workspace(tmp_path / "acp", None, files=files(turns))
    ws.close()
    user_config(tmp_path / "acp", server.url, **memory)
    env = {**os.environ, "WORKSTATION_HOME": str(tmp_path / "acp" / "user-home"), TEST_KEY_ENV: FAKE_API_KEY,
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("WORKSTATION_MODEL", None)

    class Editor:
        async def session_update(self, session_id, update, **kwargs):
            return None

        async def request_permission(self, options, session_id, tool_call, **kwargs):
            raise AssertionError("nothing here asks")

    async def over_acp() -> str:
        with open(tmp_path / "acp-stderr", "w") as err:
            async with spawn_agent_process(Editor(), sys.executable, "-m", "workstation", "-C", str(ws.root), "acp",
                                           env=env, cwd=str(ws.root), transport_kwargs={"stderr": err}) as (conn, _):
                await conn.initialize(protocol_version=1)
                new = await conn.new_session(cwd=str(ws.root), mcp_servers=[])
                for text in prompts:
                    done = await conn.prompt(session_id=new.session_id, prompt=[text_block(text)])
                    assert done.stop_reason == "end_turn"
                    await asyncio.sleep(0.3)  # the editor's user reads the answer
                return new.session_id

    acp = compactions(ws.paths, asyncio.run(asyncio.wait_for(over_acp(), 300)))

    assert len(app) >= 2, app
    assert chat == app and acp == app, (app, chat, acp)


def test_the_conversation_a_compaction_reads_keeps_the_epochs_prefix(tmp_path, server):
    """A background compaction builds its conversation while the turn goes on; when the log has grown past the
    budget meanwhile, the conversation leaves its newest messages out (the ones the compaction keeps verbatim),
    never its oldest: it starts with every message the last request sent, so the provider's cache serves it.
    And the requests after it are not cut because of it."""
    ws = workspace(tmp_path, server.url, files=files(6), model={"context_window": WINDOW})
    a = agent(ws, compaction="off")
    server.dispatch.fn = browsing
    for n in range(4):
        assert a.run(f"please read module {n} and tell me what it does").error is None
    sent = [(m["role"], content(m)) for m in server.requests[-1]["messages"]]
    for n in range(8):  # what the turn added while the compactor started: more than the budget holds
        a.session.assistant(f"thinking aloud, step {n}: " + "so on and so forth " * 300)
    assert request_size(a.session.read(), ws.config, counter=a.session.counter).total > budget(WINDOW)
    conversation = a.conversation()
    assert conversation is not None
    got = [(m["role"], content(m)) for m in conversation.messages]
    assert got[:len(sent)] == sent
    assert len(got) > len(sent)  # what fits of the newest is there too
    assert a.context_sync.cut is None  # the epoch's requests are not cut because a compaction looked
    a.close()
    ws.close()


def test_a_conversation_cut_short_past_the_cut_folds_in_what_it_shows(tmp_path, server):
    """The turn grew past the window before the guard compacted: the conversation the compaction reads is cut
    short from its end, past the first record the plan keeps verbatim. The compaction then folds in only what
    the conversation shows, up to a step it shows, and reads it from the provider's cache (its prefix is the
    epoch's last request), instead of a transcript sent cold; the request after it is not trimmed."""
    ws = workspace(tmp_path, server.url, files=files(6), model={"context_window": WINDOW},
                   memory={"compact_token_ratio": RATIO})
    a = agent(ws, compaction="off")
    server.dispatch.fn = browsing
    for n in range(4):
        assert a.run(f"please read module {n} and tell me what it does").error is None
    sent = [content(m) for m in server.requests[-1]["messages"]]
    for n in range(8):  # the turn's newest steps: more than the budget holds
        a.session.assistant(f"thinking aloud, step {n}: " + "so on and so forth " * 300)
    assert request_size(a.session.read(), ws.config, counter=a.session.counter).total > budget(WINDOW)
    a.compaction = "sync"
    mark, earlier = len(server.requests), len(records(a.session, "compact"))
    assert a._guard(WINDOW, AgentEvents())
    compact = records(a.session, "compact")[earlier]  # the first (another may fold the rest: the guard loops)
    assert compact["cached_history"] is True
    body = next(b for b in server.requests[mark:] if is_compaction(b))
    assert [content(m) for m in body["messages"][:len(sent)]] == sent
    named = content(body["messages"][-1]).split("that begins: «")[1].split("»")[0]
    assert named.startswith("thinking aloud, step")
    assert any(named in " ".join(content(m).split()) for m in body["messages"][:-1])
    kept = next(r for r in a.session.read().turns if " ".join(str(r.get("content")).split()).startswith(named))
    assert compact["covers"]["last_id"] != kept["id"] and compact["replaced"]["partial"] is True
    result = a.run("please read module 5 and tell me what it does")
    assert result.error is None and result.trimmed == 0
    a.close()
    ws.close()
