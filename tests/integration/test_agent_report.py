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

from support.agent_scenario import CHECK, TASK, RequestIdPolicy, check_repo, make_repo
from support.agent_support import agent, config_overrides, module_server, records, requests_since, workspace
from support.conftest_llm import FAKE_API_KEY, TEST_KEY_ENV
from support.fakellm import Reply
from workstation import config as config_mod
from workstation.agent import tools
from workstation.agent.loop import base_tokens
from workstation.cli import main
from workstation.costs import billed as billed_mod
from workstation.costs import report as report_mod
from workstation.costs.report import Figures, agent_figures, baseline_figures
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
    assert agent_figures(view, tools.meaning_of) == Figures(model_calls=6, file_reads=2, memory_queries=4, memory_hits=3,
                                          reads_avoided=2, tokens_sent=2950, peak_context=700,
                                          decisions_logged=1, decisions_reused=1)
    # naive: every request = its base tokens + the raw history so far; a file look = the whole file
    # (history before each call: 5, 1014, 2028, 2044, 2054, 3163; the two reads of a.py in one step count once)
    assert baseline_figures(view, None, 999, one_token, tools.meaning_of) == Figures(
        model_calls=6, file_reads=3, tokens_sent=10608, peak_context=3213)
    # charitable naive: the read of a.py with the same content as its last full read is not repeated
    assert baseline_figures(view, None, 999, one_token, tools.meaning_of, reread_unchanged=False) == Figures(
        model_calls=6, file_reads=2, tokens_sent=6608, peak_context=2213)


def test_the_report_command(tmp_path):
    s = handmade_log(tmp_path)
    result = CliRunner().invoke(main, ["-C", str(tmp_path), "report", s.slug, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["agent"]["file_reads"] == 2 and data["baseline"]["file_reads"] == 3
    assert data["reduction"]["file_reads"] == pytest.approx(1 / 3)
    assert data["baseline_reading_unchanged_files_once"]["file_reads"] == 2
    table = CliRunner().invoke(main, ["-C", str(tmp_path), "report", str(s.path)])
    assert table.exit_code == 0 and "memory agent vs naive baseline" in table.output
    assert "file reads" in table.output and "33.3%" in table.output
    ideal = data["billed"]["ideal_prefix_cache"]  # (counted with cl100k here: the figures are the test above's)
    assert data["billed"]["unit"] == "units" and ideal["naive"]["cost"] > ideal["naive_once"]["cost"] > 0
    assert ideal["agent_vs_naive"] == pytest.approx(ideal["agent"]["cost"] / ideal["naive"]["cost"])
    assert ideal["agent"]["requests"] == ideal["naive"]["requests"] == 6
    assert "billed with an ideal prefix cache, in units" in table.output
    assert f"{ideal['agent_vs_naive']:.2f}x" in table.output and "agent step requests: 6; cache-served" in table.output
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
    rep = report_mod.build(ws.paths, "scenario", tools.meaning_of, base_tokens)
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
    assert [r["type"] for r in records(session)] == ["epoch", "user", "assistant", "tool", "assistant"]
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
    data = json.loads(result.stdout)
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


# --------------------------------------------------------------------------- billed with a prefix cache
def test_billed_with_an_ideal_prefix_cache_worked_out_by_hand(tmp_path):
    """The handmade log in units (openai/test-model has no price): input 1, write 1.25, read 0.1, output 5."""
    view = handmade_log(tmp_path).read()
    naive, once = [], []
    baseline_figures(view, None, 999, one_token, tools.meaning_of, requests=naive)
    baseline_figures(view, None, 999, one_token, tools.meaning_of, reread_unchanged=False, requests=once)
    bill = billed_mod.build(view, naive, once, lambda r: report_mod.output_tokens(r, one_token))
    assert bill.unit == "units" and "no price in litellm's price map" in bill.priced_by
    # output (one token a text or a call): 1, 2, 2, 1, 1, 1 = 8 tokens = 40 units in every column
    # agent: 300, 400, 500, 450 (fewer than before: only the base, 50, is read), 600, 700
    steps = bill.steps
    assert (steps.requests, steps.prompt_tokens, steps.cache_read, steps.cache_write, steps.output_tokens) == (
        6, 2950, 300 + 400 + 50 + 450 + 600, 300 + 100 + 100 + 400 + 150 + 100, 8)
    assert steps.cost == pytest.approx(1150 * 1.25 + 1800 * 0.1 + 8 * 5)
    # naive: 55, 1064, 2078, 2094, 2104, 3213 sent; each reads the one before, writes the rest
    assert [sent for sent, _, _ in naive] == [55, 1064, 2078, 2094, 2104, 3213]
    assert (bill.naive.cache_read, bill.naive.cache_write) == (55 + 1064 + 2078 + 2094 + 2104, 3213)
    assert bill.naive.cost == pytest.approx(3213 * 1.25 + 7395 * 0.1 + 40)
    assert bill.naive_once.cost == pytest.approx(2213 * 1.25 + (6608 - 2213) * 0.1 + 40)
    assert bill.ratio(bill.naive) == pytest.approx(1657.5 / 4795.75)
    assert bill.compactions.requests == 0 and bill.reported["step"].prompt_tokens == 0


def test_a_base_change_reads_nothing_in_an_append_only_history():
    from workstation.pricing import UNIT

    got = billed_mod.appended([(100, 50, 1), (150, 50, 1), (170, 60, 1)], UNIT)
    assert (got.cache_read, got.cache_write) == (100, 100 + 50 + 170)


def test_compactions_breaks_and_the_provider_figures(tmp_path):
    _, paths = config_mod.load(tmp_path)
    s = Session.create(paths, "cached", counter=one_token)
    model = "openai/test-model"
    s.user("go")
    s.assistant("a", model=model, context_tokens=1000, base_tokens=100, tokens_in=1100, tokens_out=10,
                cache_creation_tokens=1100)
    s.assistant("b", model=model, context_tokens=1500, base_tokens=100, tokens_in=1600, tokens_out=10,
                cache_read_tokens=1100, cache_creation_tokens=500)
    s.append("compact", summary="so far", sections={}, files=[], covers={"first_id": "x", "last_id": "y"},
             model=model, tokens_in=2000, tokens_out=200, calls=2)
    s.user("more")
    s.assistant("c", model=model, context_tokens=800, base_tokens=100, tokens_in=900, tokens_out=10,
                cache_read_tokens=100, cache_creation_tokens=800, cache_break="compaction")
    s.assistant("d", model=model, context_tokens=1200, base_tokens=100, tokens_in=1300, tokens_out=10,
                cache_read_tokens=900, cache_creation_tokens=400)
    s.assistant("e", model=model, context_tokens=1300, base_tokens=100, tokens_in=1400, tokens_out=10,
                cache_break="tools changed")
    view = s.read()
    bill = billed_mod.build(view, [], [], lambda r: report_mod.output_tokens(r, one_token))
    # ideal reads: nothing, the request before (1000), after the compaction the base (100), the request
    # before (800), nothing after the tools changed
    assert (bill.steps.prompt_tokens, bill.steps.cache_read) == (5800, 1900)
    assert bill.steps.cost == pytest.approx(3900 * 1.25 + 1900 * 0.1 + 50 * 5)
    assert (bill.compactions.requests, bill.compactions.cost) == (2, pytest.approx(2000 * 1.25 + 200 * 5))
    step, compaction = bill.reported["step"], bill.reported["compaction"]
    # as reported: reads 1100 + 100 + 900 of 6300; writes 1100 + 500 + 800 + 400; the rest plain input
    assert (step.prompt_tokens, step.cache_read, step.cache_write) == (6300, 2100, 2800)
    assert step.cost == pytest.approx(1400 * 1 + 2100 * 0.1 + 2800 * 1.25 + 50 * 5)
    assert step.served == pytest.approx(1 / 3)
    assert (compaction.requests, compaction.cost, compaction.served) == (2, pytest.approx(2000 + 1000), 0)
    data = bill.to_dict()
    assert data["ideal_prefix_cache"]["agent"]["requests"] == 7 and data["as_reported"]["compaction"]["served"] == 0
    assert "agent compaction requests: 2; cache-served 0.0% ideal, 0.0% as reported" in "\n".join(bill.lines())
