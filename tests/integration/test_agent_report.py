"""Proof of savings: the report's arithmetic, the scenario through the real loop, the CLI, the shipped demo."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_scenario import CHECK, TASK, RequestIdPolicy, check_repo, make_repo
from agent_support import agent, config_overrides, module_server, records, requests_since, workspace
from conftest_llm import FAKE_API_KEY, TEST_KEY_ENV
from fakellm import Reply
from workstation import config as config_mod
from workstation.agent import report as report_mod
from workstation.agent.report import Figures, agent_figures, baseline_figures
from workstation.cli import main
from workstation.sessions import Session
from workstation.sessions.log import parse_lines

server_module, server = module_server()
TOP = Path(__file__).resolve().parents[2]
DEMO_LOG = TOP / "sessions" / "demo-request-id.jsonl"
DEMO_REPO = TOP / "sessions" / "demo-repo"


def one_token(text: str) -> int:
    """A counter that makes the expected figures easy to work out by hand: any text is one token."""
    return 1 if text else 0


def call(call_id: str, name: str, **args) -> dict:
    return {"id": call_id, "name": name, "arguments": json.dumps(args)}


def handmade_log(tmp_path) -> Session:
    _, paths = config_mod.load(tmp_path)
    s = Session.create(paths, "hand", counter=one_token)
    s.user("fix it", memory={"lookups": 2, "hits": 1, "files": ["a.py"], "misses": ["fix"]})
    s.assistant("", [call("c1", "file_meta", path="a.py")], base_tokens=50, context_tokens=300)
    s.tool("c1", "file_meta", "a map", path="a.py", sha="s1", file_tokens=1000, served_from="memory", memory="hit")
    s.assistant("", [call("c2", "read_lines", path="a.py", start=1, end=5),
                     call("c3", "read_lines", path="a.py", start=2, end=3)], base_tokens=50, context_tokens=400)
    s.tool("c2", "read_lines", "1| x", path="a.py", sha="s1", file_tokens=1000, served_from="disk")
    s.tool("c3", "read_lines", "unchanged since", path="a.py", sha="s1", file_tokens=1000, served_from="memory",
           memory="hit")
    s.assistant("", [call("c4", "replace_lines", path="a.py", start=1, end=1, content="y"),
                     call("c5", "log_decision", decision="y not x")], base_tokens=50, context_tokens=500)
    s.tool("c4", "replace_lines", "replaced", path="a.py")
    s.tool("c5", "log_decision", "decision d0123456789ab logged")
    s.system("[boom]", notice="error")
    s.assistant("done", base_tokens=50, context_tokens=450, reused=["d0123456789ab"])
    s.user("again")
    s.assistant("", [call("c6", "read_lines", path="a.py", start=1, end=5)], base_tokens=50, context_tokens=600)
    s.tool("c6", "read_lines", "1| y", path="a.py", sha="s2", file_tokens=1100, served_from="disk")
    s.assistant("bye", base_tokens=50, context_tokens=700)
    return s


def test_the_figures_worked_out_by_hand(tmp_path):
    view = handmade_log(tmp_path).read()
    assert agent_figures(view) == Figures(model_calls=6, file_reads=2, memory_queries=4, memory_hits=3,
                                          reads_avoided=2, tokens_sent=2950, peak_context=700,
                                          decisions_logged=1, decisions_reused=1)
    # naive: every request = its base tokens + the raw history so far; a file look = the whole file
    # (history before each call: 5, 1014, 2028, 2044, 2054, 3163; the two reads of a.py in one step count once)
    assert baseline_figures(view, None, 999, one_token) == Figures(
        model_calls=6, file_reads=3, tokens_sent=10608, peak_context=3213)
    # charitable naive: the read of a.py with the same content as its last full read is not repeated
    assert baseline_figures(view, None, 999, one_token, reread_unchanged=False) == Figures(
        model_calls=6, file_reads=2, tokens_sent=6608, peak_context=2213)


def test_the_report_command(tmp_path):
    s = handmade_log(tmp_path)
    result = CliRunner().invoke(main, ["-C", str(tmp_path), "report", s.slug, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["agent"]["file_reads"] == 2 and data["baseline"]["file_reads"] == 3
    assert data["reduction"]["file_reads"] == pytest.approx(1 / 3)
    assert data["baseline_reading_unchanged_files_once"]["file_reads"] == 2
    table = CliRunner().invoke(main, ["-C", str(tmp_path), "report", str(s.path)])
    assert table.exit_code == 0 and "memory agent vs naive baseline" in table.output
    assert "file reads" in table.output and "33.3%" in table.output
    missing = CliRunner().invoke(main, ["-C", str(tmp_path), "report", "nope"])
    assert missing.exit_code != 0 and "no session named nope" in str(missing.exception)


def test_the_scenario_through_the_real_loop(tmp_path, server):
    """The benchmark's task, small: the edit really happens, and the figures agree with the episodic log."""
    server.dispatch.fn = RequestIdPolicy()
    ws = workspace(tmp_path, server.url, files={})
    make_repo(ws.root, "small")
    ws.kmap.index_all()
    a = agent(ws, "scenario", compaction="sync")
    first, second = a.run(TASK), a.run(CHECK)
    assert first.error is None and second.error is None
    assert second.text.startswith("Verified: all 5 public functions take request_id, per [D:d")
    a.close()
    assert check_repo(ws.root, "small") == []
    rep = report_mod.build(ws.paths, "scenario")
    assert rep.agent.file_reads == 2  # only the two wrapped signatures were read
    assert rep.baseline.file_reads == 6 and rep.baseline_once.file_reads == 4
    assert rep.agent.decisions_logged == 1 and rep.agent.decisions_reused == 6
    memory = a.memory.reflect("memory_by_session", session="scenario").records()[0]
    assert (memory["lookups"], memory["hits"]) == (rep.agent.memory_queries, rep.agent.memory_hits)
    assert (memory["reads_from_disk"], memory["reads_avoided"]) == (rep.agent.file_reads, rep.agent.reads_avoided)
    reuse = a.memory.reflect("decision_reuse", session="scenario").records()
    assert [r["reuse_count"] for r in reuse] == [6]
    ws.close()


# --------------------------------------------------------------------------- the command line, headless

def _cli(root: Path, *args: str, url: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, TEST_KEY_ENV: FAKE_API_KEY, "WORKSTATION_HOME": str(root.parent / "home")}
    env.pop("WORKSTATION_MODEL", None)
    return subprocess.run([sys.executable, "-m", "workstation", "-C", str(root), *args], env=env,
                          capture_output=True, text=True, timeout=120)


def _config_file(root: Path, url: str) -> None:
    model = config_overrides(url)["model"]
    del model["name"]  # the model comes from --model
    lines = ["[model]"] + [f"{k} = {json.dumps(v)}" for k, v in model.items()]
    home = root.parent / "home"  # the user's own config (as _cli's WORKSTATION_HOME): never a workspace's
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text("\n".join(lines) + "\n")


def test_chat_runs_one_headless_turn(tmp_path, server, monkeypatch):
    ws = workspace(tmp_path, None)
    ws.close()
    _config_file(ws.root, server.url)
    server.push(Reply(text="Looking.", tool_calls=[("grep", {"pattern": "def fetch"})]),
                Reply(text="fetch is in pkg/core.py."))
    proc = _cli(ws.root, "chat", "where is fetch?", "--model", "openai/test-model", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["text"] == "fetch is in pkg/core.py." and out["tool_calls"] == 1 and out["error"] is None
    sent = requests_since(server)
    assert sent[0]["model"] == "test-model" and sent[-1]["messages"][-1]["content"].startswith("pkg/core.py:6:")
    session = Session.open(ws.paths, out["session"])
    assert [r["type"] for r in records(session)] == ["user", "assistant", "tool", "assistant"]
    assert FAKE_API_KEY not in session.path.read_text()
    # plain text (in this process: litellm is imported already): the reply streams to stdout
    server.push(Reply(text="Still there."))
    monkeypatch.setenv("WORKSTATION_HOME", str(ws.root.parent / "home"))  # the user config _config_file wrote
    again = CliRunner().invoke(main, ["-C", str(ws.root), "--model", "openai/test-model", "chat", "and now?",
                                      "--session", out["session"]])
    assert again.exit_code == 0, again.output
    assert again.stdout.strip() == "Still there."
    assert f"[session {out['session']}: 1 model calls, 0 tool calls]" in again.stderr
    assert len(records(session, "user")) == 2


def test_chat_without_a_model_says_so_in_one_line(tmp_path):
    ws = workspace(tmp_path, None)
    ws.close()
    proc = _cli(ws.root, "chat", "do something")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: no model configured: set [model] name")
    assert not list(ws.paths.sessions.glob("*.jsonl"))  # no session made for nothing
    slash = _cli(ws.root, "chat", "/grep def clean")  # slash commands need no model
    assert slash.returncode == 0 and slash.stdout.strip() == "pkg/util.py:4: def clean(text: str) -> str:"
    assert not list(ws.paths.sessions.glob("*.jsonl"))  # nor for a slash command that said nothing
    pinned = _cli(ws.root, "chat", "/pin keep answers short")
    assert pinned.returncode == 0 and len(list(ws.paths.sessions.glob("*.jsonl"))) == 1  # a pin is kept


# --------------------------------------------------------------------------- the shipped demo

def test_the_demo_episode_is_a_real_readable_log():
    view = parse_lines(DEMO_LOG.read_bytes())
    assert view.problems == []
    kinds = [r["type"] for r in view.records]
    assert kinds.count("user") == 2 and kinds.count("assistant") >= 8
    tools = {r["name"] for r in view.records if r["type"] == "tool"}
    assert {"file_meta", "log_decision", "grep", "read_lines", "replace_lines"} <= tools
    assert all(r.get("ok") for r in view.records if r["type"] == "tool")
    assert "/tmp" not in DEMO_LOG.read_text()


def test_the_demo_reports_without_a_model_or_database(tmp_path):
    result = CliRunner().invoke(main, ["-C", str(tmp_path), "report", str(DEMO_LOG), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["session"] == "demo-request-id"
    assert data["agent"]["file_reads"] < data["baseline"]["file_reads"]
    assert data["agent"]["tokens_sent"] < data["baseline"]["tokens_sent"]


def test_the_demo_repository_is_where_the_episode_started(tmp_path):
    """What the episode saw first is what a fresh map of sessions/demo-repo shows: it replays."""
    from workstation.agent import tools
    from workstation.runtime import Workspace

    problems = check_repo(DEMO_REPO, "small", run=False)
    assert sum("does not end with request_id" in p for p in problems) == 5  # not edited yet
    root = tmp_path / "demo-repo"
    shutil.copytree(DEMO_REPO, root)
    view = parse_lines(DEMO_LOG.read_bytes())
    calls = {c["id"]: c for r in view.records if r["type"] == "assistant" for c in r.get("tool_calls") or ()}
    first_maps = [r for r in view.records if r["type"] == "tool" and r["name"] == "file_meta"][:2]
    with Workspace(root) as ws:
        from workstation.agent.loop import Agent
        from workstation.sessions import Session as S

        a = Agent(ws, S.create(ws.paths, "replay"), compaction="off")
        for record in first_maps:
            args = json.loads(calls[record["tool_call_id"]]["arguments"])
            assert tools.call(a.ctx, "file_meta", args).text == record["content"]
        a.close()
