"""`workstation acp` through the ACP SDK's own client, over stdio, with the model served by the scripted
server through the real litellm path: a round trip (initialize, a new session, a prompt whose reply
streams, an edit with its diff, the plan, permission requests answered allow and reject), cancel while the
model streams and while a question is pending, loading a session (ours and an imported one) replayed to
the client, an untrusted workspace, the editor's own MCP server, and lines that are not JSON-RPC."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from acp import RequestError, spawn_agent_process, text_block
from acp.schema import (AgentMessageChunk, AgentPlanUpdate, AllowedOutcome, AvailableCommandsUpdate, FileEditToolCallContent, RequestPermissionResponse, ToolCallProgress, ToolCallStart,
                        UserMessageChunk)
from support.agent_support import config_overrides, module_server, records, write_repo
from support.conftest_llm import FAKE_API_KEY, TEST_KEY_ENV
from support.fakellm import Reply
from workstation.paths import Paths
from workstation.replay import Episode
from workstation.sessions.catalog import search
from workstation.sessions.log import Session

server_module, server = module_server()

PLAN = [{"text": "read clean", "status": "done"}, {"text": "lowercase it", "status": "in_progress"}]
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "import"


@pytest.fixture
def repo(tmp_path):
    return write_repo(tmp_path / "repo")


@pytest.fixture
def home(tmp_path, server):
    """The user's own config (a workspace never names a model's endpoint): the scripted server."""
    home = tmp_path / "home"
    home.mkdir()
    model = config_overrides(server.url)["model"]
    (home / "config.toml").write_text("[model]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in model.items()))
    return home


class Editor:
    """The client side: records every update; answers permission requests from `answers` in order
    ("wait": never answers, as a user who looks away)."""

    def __init__(self, answers: list[str] = ()):
        self.updates: list = []
        self.asked: list = []
        self.answers = list(answers)
        self.texted = asyncio.Event()
        self.waiting = asyncio.Event()

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append(update)
        if isinstance(update, AgentMessageChunk):
            self.texted.set()

    async def request_permission(self, options, session_id, tool_call, **kwargs):
        self.asked.append((tool_call, [o.option_id for o in options]))
        answer = self.answers.pop(0)
        if answer == "wait":
            self.waiting.set()
            await asyncio.Event().wait()
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=answer))

    def of(self, kind) -> list:
        return [u for u in self.updates if isinstance(u, kind)]

    def text(self) -> str:
        return "".join(u.content.text for u in self.of(AgentMessageChunk))


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 120))


def connect(editor: Editor, repo: Path, home: Path, stderr, **connection):
    env = {**os.environ, "WORKSTATION_HOME": str(home), TEST_KEY_ENV: FAKE_API_KEY,
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("WORKSTATION_MODEL", None)
    return spawn_agent_process(editor, sys.executable, "-m", "workstation", "-C", str(repo), "acp", env=env,
                               cwd=str(repo), transport_kwargs={"stderr": stderr}, **connection)


def test_round_trip_streams_edits_plans_and_asks(repo, home, server, tmp_path):
    server.push(
        Reply(text="Let me look at clean.", tool_calls=[("read_lines", {"path": "pkg/util.py", "start": 1, "end": 6}),
                                                        ("todo", {"items": PLAN})]),
        Reply(tool_calls=[("edit_file", {"path": "pkg/util.py", "old": "return text.strip()",
                                         "new": "return text.strip().lower()"})]),
        Reply(tool_calls=[("run_command", {"cmd": "touch allowed-by-editor"}),
                          ("run_command", {"cmd": "touch refused-by-editor"}),
                          ("run_command", {"cmd": "touch allowed-by-editor"})]),
        Reply(text="Done: clean lowercases now."))
    editor = Editor(["allow-session", "reject"])

    async def session():
        with open(tmp_path / "stderr", "w") as err:
            async with connect(editor, repo, home, err) as (conn, _proc):
                init = await conn.initialize(protocol_version=1)
                new = await conn.new_session(cwd=str(repo), mcp_servers=[])
                done = await conn.prompt(session_id=new.session_id, prompt=[text_block("Make clean lowercase")])
                listed = await conn.list_sessions(cwd=str(repo))
                edited = (repo / "pkg/util.py").read_text()
                said = len(editor.updates)
                undone = await conn.prompt(session_id=new.session_id, prompt=[text_block("/undo")])
                return init, new, done, listed, edited, editor.updates[said:], undone

    init, new, done, listed, edited, undo_said, undone = run(session())
    assert init.protocol_version == 1 and init.agent_capabilities.load_session
    assert init.agent_info.name == "workstation"
    assert new.modes.current_mode_id == "edits"
    assert [m.id for m in new.modes.available_modes] == ["ask", "edits", "plan", "auto"]
    assert done.stop_reason == "end_turn"
    slug = new.session_id
    assert [s.session_id for s in listed.sessions] == [slug]

    # the reply streamed in pieces; the session's slash commands were offered
    chunks = editor.of(AgentMessageChunk)
    turn = "".join(u.content.text for u in editor.updates if isinstance(u, AgentMessageChunk) and u not in undo_said)
    assert len(chunks) > 3 and turn == "Let me look at clean.Done: clean lowercases now."
    commands = editor.of(AvailableCommandsUpdate)[0].available_commands
    assert {"undo", "compact", "plan"} <= {c.name for c in commands} and "new" not in {c.name for c in commands}

    # every tool call: started (pending), then finished with its result
    started = {u.tool_call_id: u for u in editor.of(ToolCallStart)}
    finished = {u.tool_call_id: u for u in editor.of(ToolCallProgress) if u.status != "in_progress"}
    assert [u.title.split("(")[0] for u in started.values()] == ["read_lines", "todo", "edit_file", "run_command",
                                                                  "run_command", "run_command"]
    assert set(finished) == set(started)
    running = [u.tool_call_id for u in editor.of(ToolCallProgress) if u.status == "in_progress"]
    assert running == list(started)  # each call said it was running, in order, before it finished
    edit = next(u for u in started.values() if u.title.startswith("edit_file"))
    assert edit.kind == "edit" and edit.raw_input["path"] == "pkg/util.py"
    diffs = [c for c in finished[edit.tool_call_id].content if isinstance(c, FileEditToolCallContent)]
    assert len(diffs) == 1 and diffs[0].path == str(repo.resolve() / "pkg/util.py")
    assert "    return text.strip()\n" in diffs[0].old_text and "return text.strip().lower()" not in diffs[0].old_text
    assert "    return text.strip().lower()\n" in diffs[0].new_text
    assert finished[edit.tool_call_id].status == "completed"

    # the plan as ACP plan entries
    plan = editor.of(AgentPlanUpdate)
    assert [(e.content, e.status) for e in plan[-1].entries] == [("read clean", "completed"),
                                                                 ("lowercase it", "in_progress")]

    # commands off the allow-list: the editor was asked, allowed the first for the session, rejected the
    # second; the first, run again, was not asked about
    assert [(call.title, options) for call, options in editor.asked] == [
        ("touch allowed-by-editor", ["allow", "allow-session", "reject"]),
        ("touch refused-by-editor", ["allow", "allow-session", "reject"])]
    runs = [u for u in started.values() if u.title.startswith("run_command")]
    assert editor.asked[0][0].tool_call_id == runs[0].tool_call_id  # the question names the call it is about
    assert finished[runs[0].tool_call_id].status == "completed" and (repo / "allowed-by-editor").exists()
    assert finished[runs[1].tool_call_id].status == "failed" and not (repo / "refused-by-editor").exists()
    assert "you refused" in finished[runs[1].tool_call_id].content[-1].content.text
    assert finished[runs[2].tool_call_id].status == "completed"

    # an ordinary session of ours: the log the app, replay and search read
    session = Session.open(Paths.for_root(repo), slug)
    assert [r["type"] for r in records(session) if r["type"] != "epoch"][:3] == ["user", "assistant", "tool"]
    assert records(session, "user")[0]["content"] == "Make clean lowercase"
    assert [hit.slug for hit in search(Paths.for_root(repo), "Make clean lowercase")] == [slug]
    assert len(Episode.load(Paths.for_root(repo), slug)) == len(records(session))  # replay reads it
    # /undo over ACP takes the turn's edit back, as in the app
    assert "return text.strip().lower()" in edited and "return text.strip().lower()" not in (
        repo / "pkg/util.py").read_text()
    assert undone.stop_reason == "end_turn"
    assert [u.content.text for u in undo_said] == ["undid user turn 1: 1 file restored (pkg/util.py)"]
    assert (tmp_path / "stderr").read_text() == f"workstation: serving ACP for {repo.resolve()} over stdio\n"


def test_cancel_stops_a_streaming_reply_and_a_pending_question(repo, home, server, tmp_path):
    server.push(Reply(text="word " * 400, chunk_delay_s=0.02),
                Reply(tool_calls=[("run_command", {"cmd": "touch never-made"})]))
    editor = Editor(["wait"])

    async def session():
        with open(tmp_path / "stderr", "w") as err:
            async with connect(editor, repo, home, err) as (conn, _proc):
                await conn.initialize(protocol_version=1)
                new = await conn.new_session(cwd=str(repo), mcp_servers=[])
                turn = asyncio.create_task(conn.prompt(session_id=new.session_id, prompt=[text_block("Talk")]))
                await editor.texted.wait()
                await conn.cancel(session_id=new.session_id)
                first = await turn
                second = asyncio.create_task(conn.prompt(session_id=new.session_id, prompt=[text_block("Touch")]))
                await editor.waiting.wait()
                await conn.cancel(session_id=new.session_id)
                return new.session_id, first, await second

    slug, first, second = run(session())
    assert first.stop_reason == "cancelled" and second.stop_reason == "cancelled"
    assert len(editor.text()) < len("word " * 400)  # the stream stopped early
    assert not (repo / "never-made").exists()
    log = records(Session.open(Paths.for_root(repo), slug))
    assert [r["content"] for r in log if r.get("notice") == "cancelled"] == ["[cancelled]", "[cancelled]"]
    # the pending question was withdrawn as the app's Escape withdraws its dialog: the command was not run
    said = [r["content"] for r in log if r["type"] == "tool"]
    assert len(said) == 1 and said[0].startswith("error: you refused: 'touch never-made' (")
    assert editor.text().endswith("\n\n[cancelled]\n")


def test_load_replays_an_earlier_session_and_goes_on_in_it(repo, home, server, tmp_path):
    server.push(Reply(text="Reading.", tool_calls=[("read_lines", {"path": "pkg/util.py", "start": 1, "end": 6}),
                                                   ("todo", {"items": PLAN})]),
                Reply(tool_calls=[("edit_file", {"path": "pkg/util.py", "old": "return text.strip()",
                                                 "new": "return text.strip(' ')"})]),
                Reply(text="Edited."))
    first = Editor()

    async def one():
        with open(tmp_path / "stderr1", "w") as err:
            async with connect(first, repo, home, err) as (conn, _proc):
                await conn.initialize(protocol_version=1)
                new = await conn.new_session(cwd=str(repo), mcp_servers=[])
                await conn.prompt(session_id=new.session_id, prompt=[text_block("Strip spaces only")])
                await conn.prompt(session_id=new.session_id, prompt=[text_block("/diff")])
                return new.session_id

    slug = run(one())
    server.push(Reply(text="Still here."))
    second = Editor()

    async def two():
        with open(tmp_path / "stderr2", "w") as err:
            async with connect(second, repo, home, err) as (conn, _proc):
                await conn.initialize(protocol_version=1)
                loaded = await conn.load_session(cwd=str(repo), session_id=slug, mcp_servers=[])
                replayed = len(second.updates)
                done = await conn.prompt(session_id=slug, prompt=[text_block("Are you there?")])
                return loaded, replayed, done

    loaded, replayed, done = run(two())
    history = second.updates[:replayed]
    assert loaded.modes.current_mode_id == "edits" and done.stop_reason == "end_turn"
    assert [u.content.text for u in history if isinstance(u, UserMessageChunk)] == ["Strip spaces only", "/diff"]
    said = "".join(u.content.text for u in history if isinstance(u, AgentMessageChunk))
    assert said.startswith("Reading.Edited.pkg/util.py: +1 -1\n")  # the slash command's answer, kept in the log
    starts = [u for u in history if isinstance(u, ToolCallStart)]
    assert [u.title.split("(")[0] for u in starts] == ["read_lines", "todo", "edit_file"]
    ends = [u for u in history if isinstance(u, ToolCallProgress)]
    diff = next(c for c in ends[2].content if isinstance(c, FileEditToolCallContent))
    assert "return text.strip(' ')" in diff.new_text and ends[2].tool_call_id == starts[2].tool_call_id
    (plan,) = [u for u in history if isinstance(u, AgentPlanUpdate)]
    assert [e.content for e in plan.entries] == ["read clean", "lowercase it"]
    # the history the live turn showed is the history the load replays
    live = [(type(u).__name__, getattr(u, "tool_call_id", None)) for u in first.updates
            if isinstance(u, (ToolCallStart, ToolCallProgress)) and u.status != "in_progress"]
    assert live == [(type(u).__name__, getattr(u, "tool_call_id", None)) for u in history
                    if isinstance(u, (ToolCallStart, ToolCallProgress))]
    # the turn went on in the same log, with the earlier turns in the model's context
    assert second.text().endswith("Still here.")
    assert any(m.get("content") == "Strip spaces only" for m in server.requests[-1]["messages"])
    assert [r["content"] for r in records(Session.open(Paths.for_root(repo), slug), "user")] == [
        "Strip spaces only", "Are you there?"]


def test_an_imported_session_loads_like_ours(repo, home, server, tmp_path):
    import subprocess

    env = {**os.environ, "WORKSTATION_HOME": str(home)}
    made = subprocess.run([sys.executable, "-m", "workstation", "-C", str(repo), "import", "--format",
                           "claude-code", str(FIXTURES / "claude_session.jsonl")], capture_output=True, text=True,
                          env=env, timeout=120)
    assert made.returncode == 0, made.stderr
    paths = Paths.for_root(repo)
    slug = next(p.stem for p in paths.sessions.glob("*.jsonl"))
    theirs = records(Session.open(paths, slug))
    editor = Editor()

    async def session():
        refused = []
        with open(tmp_path / "stderr", "w") as err:
            async with connect(editor, repo, home, err) as (conn, _proc):
                await conn.initialize(protocol_version=1)
                for bad in ("no-such-session", "../../etc/passwd"):
                    try:
                        await conn.load_session(cwd=str(repo), session_id=bad, mcp_servers=[])
                    except RequestError as exc:
                        refused.append((exc.code, str(exc)))
                await conn.load_session(cwd=str(repo), session_id=slug, mcp_servers=[])
        return refused

    # the protocol's codes: "resource not found" (an editor starts a new session on it), bad params
    assert run(session()) == [(-32002, f"no session named no-such-session in {repo.resolve()}"),
                              (-32602, "invalid session name '../../etc/passwd': use lowercase letters, digits, '_' "
                                       "or '-' (at most 100)")]
    users = [u.content.text for u in editor.of(UserMessageChunk)]
    main = [r for r in theirs if not r.get("sidechain")]  # a sub-agent's steps are not the thread's
    assert len(main) < len(theirs)  # the fixture has some: they were left out, not missing
    assert users == [r["content"] for r in main if r["type"] == "user"] and users
    assert len(editor.of(ToolCallStart)) == sum(len(r.get("tool_calls") or ()) for r in main)


def test_an_untrusted_workspace_keeps_its_allow_list_to_itself(repo, home, server, tmp_path):
    (repo / ".workstation").mkdir()
    (repo / ".workstation" / "config.toml").write_text('[agent]\ncommand_allow = ["touch ..."]\n')
    server.push(Reply(tool_calls=[("run_command", {"cmd": "touch planted"})]), Reply(text="ok"))
    editor = Editor(["reject"])

    async def session():
        with open(tmp_path / "stderr", "w") as err:
            async with connect(editor, repo, home, err) as (conn, _proc):
                await conn.initialize(protocol_version=1)
                new = await conn.new_session(cwd=str(repo), mcp_servers=[])
                return await conn.prompt(session_id=new.session_id, prompt=[text_block("touch it")])

    assert run(session()).stop_reason == "end_turn"
    assert [call.title for call, _ in editor.asked] == ["touch planted"]  # asked: the planted allow-list is ignored
    assert not (repo / "planted").exists()
    assert "is not trusted: ignored agent.command_allow" in editor.text()
    assert "is not trusted: ignored agent.command_allow" in (tmp_path / "stderr").read_text()


def test_the_editors_mcp_server_serves_the_session_and_asks_first(repo, home, server, tmp_path):
    from acp.schema import McpServerStdio

    fixture = str(Path(__file__).resolve().parent.parent / "support" / "mcp_fixture_server.py")
    server.push(Reply(tool_calls=[("fixture__echo", {"text": "editor", "reverse": True})]),
                Reply(text="It said rotide."))
    editor = Editor(["allow"])

    async def session():
        with open(tmp_path / "stderr", "w") as err:
            async with connect(editor, repo, home, err) as (conn, _proc):
                await conn.initialize(protocol_version=1)
                new = await conn.new_session(cwd=str(repo), mcp_servers=[
                    McpServerStdio(name="fixture", command=sys.executable, args=[fixture], env=[])])
                return await conn.prompt(session_id=new.session_id, prompt=[text_block("echo it")])

    assert run(session()).stop_reason == "end_turn"
    assert "fixture__echo" in json.dumps(server.requests[-2]["tools"])
    assert [call.title for call, _ in editor.asked] == ['fixture__echo {"text": "editor", "reverse": true}']
    running, done = editor.of(ToolCallProgress)
    assert running.status == "in_progress"
    assert done.status == "completed" and done.content[-1].content.text == "rotide"


def test_auto_mode_and_requests_refused_in_one_line(repo, home, server, tmp_path):
    from workstation import sandbox

    full = sandbox.status(sandbox.Policy(".")).full
    server.push(Reply(tool_calls=[("run_command", {"cmd": "touch made-in-auto-mode"})]), Reply(text="made"))
    editor = Editor()  # no answers: a question would fail the test

    async def session():
        refused = []
        with open(tmp_path / "stderr", "w") as err:
            async with connect(editor, repo, home, err) as (conn, _proc):
                await conn.initialize(protocol_version=1)
                new = await conn.new_session(cwd=str(repo), mcp_servers=[])
                for bad in (conn.set_session_mode(session_id=new.session_id, mode_id="nope"),
                            conn.prompt(session_id="not-open", prompt=[text_block("hi")]),
                            conn.new_session(cwd="relative/path", mcp_servers=[]),
                            conn.new_session(cwd=str(tmp_path / "missing"), mcp_servers=[]),
                            conn.prompt(session_id=new.session_id, prompt=[text_block("   ")])):
                    try:
                        await bad
                    except RequestError as exc:
                        refused.append((exc.code, str(exc)))
                await conn.set_session_mode(session_id=new.session_id, mode_id="bypassPermissions")  # Claude's name
                return refused, await conn.prompt(session_id=new.session_id, prompt=[text_block("make it")])

    refused, done = run(session())
    assert refused == [(-32602, "no mode 'nope': one of ask, edits, plan, auto"),
                       (-32002, "no open session 'not-open': load it first (session/load)"),
                       (-32602, "cwd must be an absolute path, not 'relative/path'"),
                       (-32602, f"cwd: no such folder: {tmp_path / 'missing'}"),
                       (-32603, "empty message")]
    # auto never asks: the command ran in the sandbox, or, with none here, was refused without a question
    assert done.stop_reason == "end_turn" and editor.asked == [] and (repo / "made-in-auto-mode").exists() == full


def test_a_line_that_is_not_json_rpc_gets_one_error_and_serving_goes_on(repo, home, tmp_path):
    async def session():
        env = {**os.environ, "WORKSTATION_HOME": str(home)}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "workstation", "-C", str(repo), "acp", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
        proc.stdin.write(b"this is not json\n[1, 2]\n")
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "initialize",
                                     "params": {"protocolVersion": 1}}).encode() + b"\n")
        await proc.stdin.drain()
        lines = [json.loads(await proc.stdout.readline()) for _ in range(3)]
        proc.stdin.close()
        await proc.wait()
        return lines, (await proc.stderr.read()).decode(), proc.returncode

    (bad, array, good), err, code = run(session())
    assert bad["id"] is None and bad["error"]["code"] == -32700 and "this is not json" in bad["error"]["message"]
    assert array["id"] is None and array["error"]["code"] == -32600 and "not list" in array["error"]["message"]
    assert good["id"] == 7 and good["result"]["protocolVersion"] == 1
    assert code == 0 and "Traceback" not in err
    assert sum("not a JSON-RPC message" in line for line in err.splitlines()) == 2


def test_initialize_is_answered_while_the_sdk_loads_as_the_sdk_answers_it(repo, home, tmp_path):
    """The first `initialize` is answered by acp.start before the SDK has loaded; a second one, and one the
    start would not vouch for (Zed's date as the version), by the SDK: the same result, the start's a copy."""
    import acp
    from acp.schema import InitializeRequest
    from workstation.acp import start

    assert start.PROTOCOL_VERSION == acp.PROTOCOL_VERSION

    async def session():
        env = {**os.environ, "WORKSTATION_HOME": str(home)}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "workstation", "-C", str(repo), "acp", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
        answers = []
        for ident, version in ((1, 1), (2, 1), (3, "2024-11-05")):
            proc.stdin.write(_request(ident, "initialize", protocolVersion=version,
                                      clientInfo={"name": "zed", "version": "1"}))
            await proc.stdin.drain()
            answers.append(json.loads(await proc.stdout.readline()))
        proc.stdin.write(_request(4, "session/new", cwd=str(repo), mcpServers=[]))
        await proc.stdin.drain()
        new = json.loads(await proc.stdout.readline())
        proc.stdin.close()
        await proc.wait()
        return answers, new, (await proc.stderr.read()).decode(), proc.returncode

    answers, new, err, code = run(session())
    assert [a["id"] for a in answers] == [1, 2, 3]
    assert answers[0]["result"] == answers[1]["result"] == answers[2]["result"] == start.initialize_result()
    assert new["id"] == 4 and new["result"]["sessionId"]
    assert code == 0 and "Traceback" not in err
    # which requests the start answers itself: only what the SDK takes as it is
    for params, early in (({"protocolVersion": 1}, True), ({"protocolVersion": 1, "clientCapabilities": None}, True),
                          ({"protocolVersion": "1"}, False), ({"protocolVersion": True}, False),
                          ({"protocolVersion": 70000}, False), ({"protocolVersion": 1, "clientInfo": {}}, False),
                          ({"protocolVersion": 1, "clientCapabilities": []}, False)):
        message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
        assert start.ordinary_initialize(message) is early, params
        if early:
            InitializeRequest.model_validate(params)  # what the start answers, the SDK accepts


async def _never() -> None:
    await asyncio.Event().wait()


def test_the_start_answers_initialize_alone_and_holds_the_rest_in_order():
    """With the SDK still loading (it never finishes here), `initialize` is answered and what follows is
    held, in order, for the SDK: nothing else is answered early."""
    from workstation.acp import start

    class Pipe:
        def __init__(self, messages):
            self.messages, self.sent = list(messages), []

        async def receive(self):
            return self.messages.pop(0) if self.messages else await _never()

        async def send(self, message):
            self.sent.append(message)

    async def handshake():
        pipe = Pipe([{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
                     {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}},
                     {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"protocolVersion": 1}}])
        early = start.EarlyTransport(pipe)
        loading = asyncio.ensure_future(_never())
        await early.handshake(loading)
        loading.cancel()
        return pipe.sent, [await early.receive(), await early.receive()]

    sent, then = run(handshake())
    assert sent == [{"jsonrpc": "2.0", "id": 1, "result": start.initialize_result()}]
    assert [m["id"] for m in then] == [2, 3]


def _request(ident: int, method: str, **params) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": method, "params": params}).encode() + b"\n"


def _memory_kb(pid: int) -> dict[str, int]:
    found = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0])
    return found


def test_a_line_too_deep_or_too_long_gets_one_error_and_memory_stays_within_the_limit(repo, tmp_path):
    """100,000 `[` (deeper than `json` reads) once ended serving without a word; 400 MB without a newline grew
    the process by 550 MB, past the 50 MB limit of one message."""
    from workstation.acp.server import STDIO_LIMIT

    # No model configured: with one, litellm loads in the background (about 300 MB) while the line is read,
    # and the peak measured would be its, not the transport's.
    home = tmp_path / "home-without-a-model"
    home.mkdir()

    flood = 4 * STDIO_LIMIT

    async def session():
        env = {**os.environ, "WORKSTATION_HOME": str(home)}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "workstation", "-C", str(repo), "acp", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env, limit=1 << 20)
        proc.stdin.write(_request(1, "initialize", protocolVersion=1))
        first = json.loads(await proc.stdout.readline())
        Path(f"/proc/{proc.pid}/clear_refs").write_text("5")  # the peak from here on, not start-up's
        before = _memory_kb(proc.pid)["VmRSS"]
        proc.stdin.write(b"[" * 100_000 + b"\n")
        chunk = b"a" * (1 << 20)
        for _ in range(flood // len(chunk)):
            proc.stdin.write(chunk)
            await proc.stdin.drain()
        proc.stdin.write(b"\n" + _request(2, "initialize", protocolVersion=1))
        await proc.stdin.drain()
        lines = [json.loads(await proc.stdout.readline()) for _ in range(3)]
        grown = _memory_kb(proc.pid)["VmHWM"] - before
        proc.stdin.close()
        await proc.wait()
        return first, lines, grown, (await proc.stderr.read()).decode(), proc.returncode

    first, (deep, long, good), grown_kb, err, code = run(session())
    assert first["id"] == 1 and "result" in first
    assert deep["id"] is None and deep["error"]["code"] == -32700
    assert deep["error"]["message"].startswith("Parse error: nested too deeply to read: '[[[[")
    assert long["id"] is None and long["error"]["code"] == -32700
    assert long["error"]["message"] == (f"Parse error: a line of {flood:,} bytes is over the {STDIO_LIMIT:,}-byte "
                                        "limit of one message: dropped")
    assert good["id"] == 2 and good["result"]["protocolVersion"] == 1  # serving went on
    assert grown_kb * 1024 < STDIO_LIMIT + 32 * 1024 * 1024, f"grew by {grown_kb:,} kB for a {flood:,}-byte line"
    assert code == 0 and "Traceback" not in err
    assert sum("not a JSON-RPC message" in line for line in err.splitlines()) == 2


def test_regular_files_as_stdin_and_stdout_serve_every_request(repo, home, tmp_path):
    """A regular file as stdin or stdout once ended in `ValueError: Pipe transport is for pipes/sockets only`.
    Every request of the file is answered, in a file."""
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(_request(1, "initialize", protocolVersion=1)
                         + _request(2, "session/new", cwd=str(repo), mcpServers=[])
                         + b"not json\n" + _request(3, "session/list", cwd=str(repo)))
    answers = tmp_path / "answers.jsonl"
    env = {**os.environ, "WORKSTATION_HOME": str(home)}
    with open(requests, "rb") as stdin, open(answers, "wb") as stdout:
        done = subprocess.run([sys.executable, "-m", "workstation", "-C", str(repo), "acp"], stdin=stdin,
                              stdout=stdout, stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    said = [json.loads(line) for line in answers.read_text().splitlines()]
    by_id = {m["id"]: m for m in said if "id" in m and "method" not in m}
    assert by_id[None]["error"]["code"] == -32700
    assert by_id[1]["result"]["protocolVersion"] == 1
    slug = by_id[2]["result"]["sessionId"]
    # requests are served at once, not one after another: the list may be answered before the new session is
    # made; the session outlives the process either way (kept until it expires)
    assert [s["sessionId"] for s in by_id[3]["result"]["sessions"]] in ([], [slug])
    assert (repo / ".workstation" / "sessions" / f"{slug}.jsonl").is_file()


def test_a_new_session_outlives_the_agent_process_until_it_expires(repo, home, server, tmp_path):
    """acpx's ordinary flow: `sessions new` in one agent process, the prompt in another, which loads the
    session. A session nothing was said in was deleted when the first process ended (the load answered
    -32000); it is kept until it expires, and a session gone is -32002, "resource not found"."""
    server.push(Reply(text="Here."))

    async def new() -> str:
        with open(tmp_path / "stderr", "a") as err:
            async with connect(Editor(), repo, home, err) as (conn, _proc):
                await conn.initialize(protocol_version=1)
                return (await conn.new_session(cwd=str(repo), mcp_servers=[])).session_id

    async def load_and_prompt(slug: str):
        with open(tmp_path / "stderr", "a") as err:
            async with connect(Editor(), repo, home, err) as (conn, _proc):
                await conn.initialize(protocol_version=1)
                try:
                    await conn.load_session(cwd=str(repo), session_id=slug, mcp_servers=[])
                except RequestError as exc:
                    return exc.code, str(exc)
                return (await conn.prompt(session_id=slug, prompt=[text_block("hello")])).stop_reason

    slug = run(new())
    assert run(load_and_prompt(slug)) == "end_turn"  # loaded in a new process, and used
    paths = Paths.for_root(repo)
    assert [r["content"] for r in records(Session.open(paths, slug), "user")] == ["hello"]

    unused, used = run(new()), slug
    day_and_more = time.time() - 25 * 3600
    for old in (unused, used):  # both untouched for more than a day
        os.utime(paths.sessions / f"{old}.jsonl", (day_and_more, day_and_more))
    assert run(load_and_prompt(unused)) == (-32002, f"no session named {unused} in {repo.resolve()}")
    assert not (paths.sessions / f"{unused}.jsonl").exists()  # expired when the folder was opened
    assert (paths.sessions / f"{used}.jsonl").exists()  # a session with a conversation never expires


class FormEditor(Editor):
    """An editor that renders form elicitations (ACP's unstable elicitation/create): it sends `edit(default)`."""

    def __init__(self, answers, edit):
        super().__init__(answers)
        self.edit, self.forms = edit, []

    async def create_elicitation(self, message, mode, **kwargs):
        from acp.schema import AcceptElicitationResponse

        self.forms.append((message, mode))
        (name, field), = mode.requested_schema.properties.items()
        return AcceptElicitationResponse(action="accept", content={name: self.edit(field.default)})


def test_a_plan_is_edited_in_the_editors_form_then_carried_out(repo, home, server, tmp_path):
    """In plan mode, an editor with form elicitation is offered a third option, to edit the plan: the form
    holds the plan, and the turn carries out the text the editor sent back (and writes nothing before). An
    editor without forms is offered approve and reject only (acpx's command line: its tests' flow)."""
    from acp.schema import ClientCapabilities, ElicitationCapabilities, ElicitationFormCapabilities

    plan = "1. Lowercase the result of clean.\n2. Add a test."
    server.push(Reply(tool_calls=[("write_file", {"path": "early.py", "content": "x = 1\n"})]), Reply(text=plan),
                Reply(tool_calls=[("write_file", {"path": "done.py", "content": "y = 2\n"})]), Reply(text="done"))
    editor = FormEditor(["edit-plan"], lambda text: text.replace("2. Add a test.", "2. No test, please."))

    async def session():
        with open(tmp_path / "stderr", "w") as err:
            async with connect(editor, repo, home, err, use_unstable_protocol=True) as (conn, _proc):
                await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities(
                    elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities())))
                new = await conn.new_session(cwd=str(repo), mcp_servers=[])
                await conn.set_session_mode(session_id=new.session_id, mode_id="plan")
                return await conn.prompt(session_id=new.session_id, prompt=[text_block("improve clean")])

    done = run(session())
    assert done.stop_reason == "end_turn"
    (call, options), = editor.asked
    assert options == ["approve-plan", "keep-planning", "edit-plan"]
    (message, form), = editor.forms
    assert form.session_id and form.requested_schema.properties["plan"].default == plan
    assert not (repo / "early.py").exists() and (repo / "done.py").read_text() == "y = 2\n"
    carried = next(str(m["content"]) for r in server.requests for m in r["messages"] if m["role"] == "user"
                   and "approved this plan" in str(m["content"]))
    assert "as they edited it" in carried and "2. No test, please." in carried and "Add a test" not in carried

    # the same editor, declining the form: the plan is rejected, nothing runs, the mode stays plan
    server.push(Reply(text=plan))
    declined = FormEditor(["edit-plan"], lambda text: "   ")

    async def again():
        with open(tmp_path / "stderr2", "w") as err:
            async with connect(declined, repo, home, err, use_unstable_protocol=True) as (conn, _proc):
                await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities(
                    elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities())))
                new = await conn.new_session(cwd=str(repo), mcp_servers=[])
                await conn.set_session_mode(session_id=new.session_id, mode_id="plan")
                await conn.prompt(session_id=new.session_id, prompt=[text_block("improve clean")])
                return new.session_id

    slug = run(again())
    log = Session.open(Paths.for_root(repo), slug).read().records
    assert any(r.get("update") == {"plan": "rejected"} for r in log)
