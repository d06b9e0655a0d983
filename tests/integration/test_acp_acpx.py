"""`workstation acp` driven by acpx (npm `acpx`, a headless ACP client nobody here wrote; pinned, installed at
test time), with the model served by the scripted server through the real litellm path. acpx's ordinary
flow, each step its own acpx process: `sessions new`; a prompt whose command the user rejects, in a new
agent process that loads the session; a prompt whose command is allowed, in another new agent process; a
prompt cancelled by `acpx cancel` while the reply streams; `sessions list` (the agent's session/list); and
a session gone, whose load answers -32002 ("resource not found"), on which acpx starts a new one.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time

import pytest

from support.agent_support import module_server, records, write_repo
from support.conftest_llm import FAKE_API_KEY, TEST_KEY_ENV
from support.fakellm import Reply
from support.npm_support import bin_of, node_env
from workstation.paths import Paths
from workstation.sessions.log import Session

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ACPX = ("acpx", "0.19.1")
server_module, server = module_server()


class Acpx:
    """acpx for one repository, with its own HOME (its session records live in ~/.acpx) and `--ttl 1`: its
    queue owner, and with it the agent process, ends a second after its last prompt, so the next prompt
    starts a new agent process, which loads the session."""

    def __init__(self, repo, home, tmp_path, model_url: str):
        self.repo = repo
        self.cli = bin_of(*ACPX, "acpx")
        (home / "config.toml").write_text(
            f'[model]\nname = "openai/test-model"\napi_base = "{model_url}"\napi_key_env = "{TEST_KEY_ENV}"\n'
            'timeout_s = 10.0\nmax_retries = 0\ncontext_window = 32768\n[lsp]\nenabled = false\n')
        self.env = node_env(HOME=str(tmp_path / "user"), WORKSTATION_HOME=str(home), **{TEST_KEY_ENV: FAKE_API_KEY},
                            LITELLM_LOCAL_MODEL_COST_MAP="True")
        self.env.pop("WORKSTATION_MODEL", None)
        (tmp_path / "user").mkdir()
        self.agent = shlex.join([sys.executable, "-m", "workstation", "-C", str(repo), "acp"])
        self.ttl = "1"

    def argv(self, *args: str) -> list[str]:
        return [*self.cli, "--agent", self.agent, "--cwd", str(self.repo), "--ttl", self.ttl, *args]

    def __call__(self, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(*args), capture_output=True, text=True, env=self.env, timeout=timeout)

    def start(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(self.argv(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self.env)

    def status(self) -> dict:
        run = self("--format", "json", "status")
        assert run.returncode == 0, run.stderr
        return json.loads(run.stdout)

    def settled(self, within: float = 60) -> dict:
        """Once no agent process runs for the session: its queue owner's time to live is over, and the
        owner (the pid acpx reports, which runs the agent process) has exited."""
        deadline = time.monotonic() + within
        while (state := self.status()).get("status") == "running" or _alive(state.get("pid")):
            assert time.monotonic() < deadline, f"the agent process still runs: {state}"
            time.sleep(0.5)
        return state


def _alive(pid: object) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wire(run_stdout: str) -> list[dict]:
    """The JSON-RPC messages acpx's --format json showed (one per line)."""
    out = []
    for line in run_stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def methods(messages: list[dict]) -> list[str]:
    return [m["method"] for m in messages if "method" in m]


def answer_to(messages: list[dict], method: str) -> dict:
    """The answer to the client's first request of `method`."""
    n, asked = next((n, m) for n, m in enumerate(messages) if m.get("method") == method)
    return next(m for m in messages[n + 1:] if m.get("id") == asked["id"] and "method" not in m)


def permission_answers(messages: list[dict]) -> list[tuple[str, dict]]:
    """(the call's title, the client's answer) of each session/request_permission (ids of the two sides'
    requests overlap: the answer is the next response with the request's id)."""
    out = []
    for n, asked in enumerate(messages):
        if asked.get("method") == "session/request_permission":
            answer = next(m for m in messages[n + 1:] if m.get("id") == asked["id"] and "method" not in m)
            out.append((asked["params"]["toolCall"]["title"], answer.get("result", answer)))
    return out


def test_acpx_new_prompt_reject_allow_cancel_load_and_list(tmp_path, server):
    repo = write_repo(tmp_path / "repo")
    home = tmp_path / "home"
    home.mkdir()
    acpx = Acpx(repo, home, tmp_path, server.url)
    paths = Paths.for_root(repo)

    # sessions new: one agent process makes the session and ends; nothing has been said in it yet
    made = acpx("sessions", "new")
    assert made.returncode == 0, made.stderr
    slug = made.stdout.split()[-1]
    assert (paths.sessions / f"{slug}.jsonl").exists()
    acpx.settled()

    # a prompt, in a new agent process (it loads the session); the user rejects the command
    server.push(Reply(tool_calls=[("run_command", {"cmd": "touch refused-by-user"})]), Reply(text="Not made."))
    refused = acpx("--format", "json", "--deny-all", "prompt", "make the refused file")
    said = wire(refused.stdout)
    assert refused.returncode == 5, refused.stdout[-3000:] + refused.stderr[-2000:]  # acpx: permission denied
    assert methods(said)[:2] == ["initialize", "session/load"] and "session/prompt" in methods(said)
    assert "error" not in answer_to(said, "session/load")  # a session nothing was said in, kept: loaded
    assert permission_answers(said) == [("touch refused-by-user", {"outcome": {"outcome": "selected",
                                                                               "optionId": "reject"}})]
    assert {"stopReason": "end_turn"} in [m.get("result") for m in said]
    assert not (repo / "refused-by-user").exists()
    acpx.settled()

    # another prompt, another new agent process; allowed this time; the earlier turn is in the context
    server.push(Reply(tool_calls=[("run_command", {"cmd": "touch allowed-by-user"})]), Reply(text="Made."))
    allowed = acpx("--format", "json", "--approve-all", "prompt", "make the allowed file")
    said = wire(allowed.stdout)
    assert allowed.returncode == 0, allowed.stdout[-3000:] + allowed.stderr[-2000:]
    assert methods(said)[:2] == ["initialize", "session/load"]  # a new agent process: initialized, loads
    assert "error" not in answer_to(said, "session/load")
    ((title, answer),) = permission_answers(said)
    assert title == "touch allowed-by-user" and answer["outcome"]["optionId"] in ("allow", "allow-session")
    assert (repo / "allowed-by-user").exists()
    assert any(m.get("content") == "make the refused file" for m in server.requests[-1]["messages"])
    acpx.settled()

    # a prompt cancelled while the reply streams
    server.push(Reply(text="word " * 2000, chunk_delay_s=0.02))
    asked_before = len(server.requests)
    talking = acpx.start("--format", "json", "prompt", "talk at length")
    try:
        deadline = time.monotonic() + 120
        while len(server.requests) == asked_before:  # the model was asked: the reply streams now
            assert time.monotonic() < deadline and talking.poll() is None, "the prompt never reached the model"
            time.sleep(0.2)
        time.sleep(1)
        cancelled = acpx("cancel")
        out, err = talking.communicate(timeout=120)
    finally:
        if talking.poll() is None:
            talking.kill()
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    said = wire(out)
    assert {"stopReason": "cancelled"} in [m.get("result") for m in said], out[-3000:] + err[-2000:]
    streamed = "".join(m["params"]["update"]["content"]["text"] for m in said if m.get("method") == "session/update"
                       and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
    assert 0 < len(streamed.replace("[cancelled]", "").strip()) < len("word " * 2000)
    acpx.settled()

    # sessions list: the agent's own session/list
    listed = acpx("--format", "json", "sessions", "list")
    assert listed.returncode == 0, listed.stderr
    assert slug in listed.stdout
    acpx.settled()

    # one session of ours held it all: the three turns, the refusal, the cancel
    log = records(Session.open(paths, slug))
    assert [r["content"] for r in log if r["type"] == "user"] == [
        "make the refused file", "make the allowed file", "talk at length"]
    assert any(r["type"] == "tool" and "you refused" in r["content"] for r in log)
    assert [r["content"] for r in log if r.get("notice") == "cancelled"] == ["[cancelled]"]

    # a session gone (expired, or removed by hand): its load answers -32002, "resource not found", on
    # which acpx starts a new session and the prompt goes on there (acpx does not print the failed load;
    # for a session with the agent's messages in it, it falls back on no other code: -32000, as the load
    # answered before, failed the prompt)
    (paths.sessions / f"{slug}.jsonl").unlink()
    server.push(Reply(text="Fresh start."))
    again = acpx("--format", "json", "prompt", "start over")
    said = wire(again.stdout)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-2000:]
    fresh = answer_to(said, "session/new")["result"]["sessionId"]
    assert [r["content"] for r in records(Session.open(paths, fresh), "user")] == ["start over"]
    assert not any(m.get("content") == "make the refused file" for m in server.requests[-1]["messages"])
    acpx.settled()


def test_acpx_permission_modes_plan_ask_and_auto(tmp_path, server):
    """Each permission mode set by acpx's `set-mode` (session/set_mode) in one agent process: plan writes and
    runs nothing until the editor approves the plan; ask asks before an edit; auto never asks and never
    reaches the network."""
    from workstation import sandbox
    from workstation.sandbox import Policy

    repo = write_repo(tmp_path / "repo")
    home = tmp_path / "home"
    home.mkdir()
    acpx = Acpx(repo, home, tmp_path, server.url)
    acpx.ttl = "120"  # one agent process for the whole test: the mode is the live session's
    made = acpx("sessions", "new")
    assert made.returncode == 0, made.stderr
    assert acpx("set-mode", "plan").returncode == 0

    # plan, rejected: the write and the command are refused without a question; the plan is asked about
    server.push(Reply(tool_calls=[("write_file", {"path": "planned.py", "content": "x = 1\n"})]),
                Reply(tool_calls=[("run_command", {"cmd": "touch ran-in-plan"})]),
                Reply(text="Plan: create planned.py with x = 1"))
    rejected = acpx("--format", "json", "--deny-all", "prompt", "make planned.py")
    said = wire(rejected.stdout)
    assert methods(said)[:3] == ["initialize", "session/load", "session/prompt"]  # the mode is the session's
    assert permission_answers(said) == [("Approve the plan?", {"outcome": {"outcome": "selected",
                                                                           "optionId": "keep-planning"}})]
    assert not (repo / "planned.py").exists() and not (repo / "ran-in-plan").exists()

    # plan, approved: back to edits (current_mode_update), and the plan is carried out in the same prompt
    server.push(Reply(text="Plan: create planned.py with x = 1"),
                Reply(tool_calls=[("write_file", {"path": "planned.py", "content": "x = 1\n"})]),
                Reply(text="Made it."))
    approved = acpx("--format", "json", "--approve-all", "prompt", "that plan is fine")
    said = wire(approved.stdout)
    assert approved.returncode == 0, approved.stdout[-3000:] + approved.stderr[-2000:]
    assert [title for title, _ in permission_answers(said)] == ["Approve the plan?"]
    modes = [m["params"]["update"]["currentModeId"] for m in said if m.get("method") == "session/update"
             and m["params"]["update"]["sessionUpdate"] == "current_mode_update"]
    assert modes == ["edits"]
    assert (repo / "planned.py").read_text() == "x = 1\n"

    # ask: the edit asks the editor, which refuses: nothing changes
    assert acpx("set-mode", "ask").returncode == 0
    server.push(Reply(tool_calls=[("write_file", {"path": "asked.py", "content": "y = 2\n"})]), Reply(text="No."))
    asked = acpx("--format", "json", "--deny-all", "prompt", "make asked.py")
    said = wire(asked.stdout)
    assert [(title, answer["outcome"]["optionId"]) for title, answer in permission_answers(said)] == [
        ("write_file: asked.py", "reject")]
    assert not (repo / "asked.py").exists()

    # auto: nothing asks (a question would be denied: exit 5), commands run in the sandbox, no network
    assert acpx("set-mode", "auto").returncode == 0
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(60)
    connected = threading.Event()
    threading.Thread(target=lambda: (listener.accept(), connected.set()), daemon=True).start()
    port = listener.getsockname()[1]
    probe = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)\""
    server.push(Reply(tool_calls=[("run_command", {"cmd": "touch made-in-auto"})]),
                Reply(tool_calls=[("run_command", {"cmd": probe})]), Reply(text="Done."))
    before = len(server.requests)
    auto = acpx("--format", "json", "--deny-all", "prompt", "make it")
    said = wire(auto.stdout)
    assert auto.returncode == 0, auto.stdout[-3000:] + auto.stderr[-2000:]
    assert permission_answers(said) == []
    assert len(server.requests) == before + 3 and not connected.is_set()  # the probe reached no one
    probed = [m for m in server.requests[-1]["messages"] if m["role"] == "tool"][-1]["content"]
    if sandbox.status(Policy(".")).full:
        assert (repo / "made-in-auto").exists() and "[exit 1" in probed
    else:  # no sandbox here: auto refuses what it cannot hold, still without a question
        assert not (repo / "made-in-auto").exists() and "not run: permission mode auto" in probed
    acpx("sessions", "close")
    listener.close()
