"""The agent's tools as the loop calls them: confinement, approval, staleness, results the model can act on."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.agent_support import agent, module_server, records, workspace
from support.fakellm import Reply
from workstation.agent import tools
from workstation.commands import slash

server_module, server = module_server()


@pytest.fixture
def ws(tmp_path):
    w = workspace(tmp_path, None)
    (tmp_path / "secret.txt").write_text("top secret\n")
    yield w
    w.close()


@pytest.fixture
def ag(ws):
    a = agent(ws)
    yield a
    a.close()


def call(a, tool, **args):
    return tools.call(a.ctx, tool, args)


ESCAPES = ["../secret.txt", "pkg/../../secret.txt", "{tmp}/secret.txt", "link.txt", "dirlink/secret.txt"]


@pytest.fixture(scope="module")
def linked(tmp_path_factory):
    """One workspace for every escape: a symlink to a file outside, one to the folder outside."""
    tmp_path = tmp_path_factory.mktemp("escapes")
    w = workspace(tmp_path, None)
    (tmp_path / "secret.txt").write_text("top secret\n")
    (w.root / "link.txt").symlink_to(tmp_path / "secret.txt")
    (w.root / "dirlink").symlink_to(tmp_path)
    a = agent(w)
    yield a, tmp_path
    a.close()
    w.close()


@pytest.mark.parametrize("how", ESCAPES)
@pytest.mark.parametrize("tool", ["file_meta", "read_lines", "replace_lines", "grep"])
def test_paths_outside_the_workspace_are_refused(linked, how, tool):
    ag, tmp_path = linked
    path = how.format(tmp=tmp_path)
    args = {"file_meta": {"path": path}, "read_lines": {"path": path, "start": 1, "end": 1},
            "replace_lines": {"path": path, "start": 1, "end": 1, "content": "pwned"},
            "grep": {"pattern": "secret", "path": path}}[tool]
    ag.ctx.services.ledger.saw("secret.txt", "anything")  # even a (forged) read would not open the door
    result = tools.call(ag.ctx, tool, args)
    assert not result.ok and "is outside the workspace" in result.text
    assert (tmp_path / "secret.txt").read_text() == "top secret\n"


def test_grep_never_reads_outside_even_through_a_linked_folder(linked):
    ag, _ = linked
    result = call(ag, "grep", pattern="top secret")
    assert result.ok and result.text == ("no match for 'top secret'\n[2 file(s) not searched:\n"
                                         "  dirlink: outside root (a symlink out of the workspace)\n"
                                         "  link.txt: outside root (a symlink out of the workspace)]")


def test_a_path_escape_through_the_model_loop(tmp_path, server):
    w = workspace(tmp_path, server.url)
    (tmp_path / "secret.txt").write_text("top secret\n")
    a = agent(w)
    server.push(Reply(tool_calls=[("read_lines", {"path": "../secret.txt", "start": 1, "end": 1}),
                                  ("replace_lines", {"path": str(tmp_path / "secret.txt"), "start": 1, "end": 1,
                                                     "content": "pwned"})]),
                Reply(text="refused, fine"))
    assert a.run("read the secret").error is None
    results = records(a.session, "tool")
    assert [r["ok"] for r in results] == [False, False]
    assert all("is outside the workspace" in r["content"] for r in results)
    assert "top secret" not in a.session.path.read_text()
    assert (tmp_path / "secret.txt").read_text() == "top secret\n"
    a.close()
    w.close()


def test_the_state_folder_is_off_limits_to_the_model(tmp_path, server):
    w = workspace(tmp_path, server.url)
    config = w.paths.config_file
    config.write_text('[agent]\ncommand_allow = ["pytest"]\n')
    before = config.read_bytes()
    (w.root / "cfg.toml").symlink_to(config)
    w.kmap.index_all()  # the link is indexed: a whole-workspace grep would open it
    a = agent(w)
    allow_rm = {"start": 2, "end": 2, "content": 'command_allow = ["pytest", "rm"]'}
    server.push(Reply(tool_calls=[("read_lines", {"path": ".workstation/config.toml", "start": 1, "end": 2}),
                                  ("replace_lines", {"path": ".workstation/config.toml", **allow_rm}),
                                  ("file_meta", {"path": "cfg.toml"}),
                                  ("replace_lines", {"path": "cfg.toml", **allow_rm}),
                                  ("grep", {"pattern": "allow", "path": ".workstation"}),
                                  ("grep", {"pattern": "command_allow"})]),
                Reply(text="refused, fine"))
    assert a.run("allow rm in the config").error is None
    *refused, walk = records(a.session, "tool")
    assert [r["ok"] for r in refused] == [False] * 5
    for r in refused:
        assert "in the workspace's state folder" in r["content"] and "\n" not in r["content"]
    assert walk["ok"] and walk["content"] == (  # the link is named as not searched, never opened
        "no match for 'command_allow'\n[1 file(s) not searched:\n  cfg.toml: private (symlink into .git or the "
        "state folder (config, databases, session logs): never indexed)]")
    assert config.read_bytes() == before
    a.close()
    w.close()


# --------------------------------------------------------------------------- commands

def test_commands_need_approval(ws):
    asked = []
    a = agent(ws, approve=lambda req: asked.append(req.subject) or False)
    result = call(a, "run_command", cmd="touch made-by-agent")
    assert not result.ok and result.text.startswith("error: you refused: 'touch made-by-agent'")
    assert result.data["outcome"] == "denied"
    assert asked == ["touch made-by-agent"] and not (ws.root / "made-by-agent").exists()
    a.close()


def test_commands_run_when_approved(ws):
    asked = []
    a = agent(ws, approve=lambda req: asked.append(req.subject) or True)
    result = call(a, "run_command", cmd="touch made-by-agent")
    assert result.ok and result.data == {"exit_code": 0, "approved_by": "user", "outcome": "ok",
                                         "sandbox": "bwrap", "duration_ms": result.data["duration_ms"]}
    assert asked == ["touch made-by-agent"] and (ws.root / "made-by-agent").exists()
    a.close()


def test_no_one_to_ask_means_refused(ws):
    a = agent(ws)  # approve=None: headless without --yes
    result = call(a, "run_command", cmd="touch x")
    assert not result.ok and not (ws.root / "x").exists()
    assert result.text.startswith("error: not approved: 'touch x'") and "nobody to ask" in result.text
    a.close()


def test_the_allow_list_bypasses_approval(tmp_path):
    w = workspace(tmp_path, None, agent={"command_allow": ["ls", "touch allowed"]})
    asked = []
    a = agent(w, approve=lambda req: asked.append(req.subject) or False)
    listing = call(a, "run_command", cmd="ls pkg")
    assert listing.ok and "core.py" in listing.text and listing.data["approved_by"] == "allow-list"
    assert call(a, "run_command", cmd="touch allowed").ok and (w.root / "allowed").exists()
    assert asked == []
    a.close()
    w.close()


@pytest.fixture(scope="module")
def generous(tmp_path_factory):
    """A workspace whose allow-list names the wrappers themselves; the user declines whatever is asked."""
    w = workspace(tmp_path_factory.mktemp("wrappers"), None,
                  agent={"command_allow": ["sh", "env", "xargs", "bash", "ls", "touch"]})
    asked: list[str] = []
    a = agent(w, approve=lambda req: asked.append(req.subject) or False)
    yield a, asked
    a.close()
    w.close()


@pytest.mark.parametrize("cmd", ["sh -c 'touch wrapped'", "env touch wrapped", "xargs touch wrapped",
                                 "bash -c 'touch wrapped'", "touch wrapped; ls", "ls && touch wrapped",
                                 "ls $(touch wrapped)"])
def test_wrappers_and_shell_syntax_never_match_implicitly(generous, cmd):
    a, asked = generous
    asked.clear()
    result = call(a, "run_command", cmd=cmd)
    assert not result.ok and result.data["outcome"] == "denied"
    assert asked == [cmd]  # the user was asked: the allow-list did not cover it
    assert not (a.ws.root / "wrapped").exists()


def test_commands_time_out_with_capped_output(tmp_path):
    w = workspace(tmp_path, None, agent={"command_timeout_s": 0.5, "max_output_chars": 100})
    a = agent(w, approve=lambda c: True)
    slow = call(a, "run_command", cmd="sleep 5")
    assert not slow.ok and slow.data["outcome"] == "timeout" and "[timed out after 0.5s]" in slow.text
    loud = call(a, "run_command", cmd="seq 1 10000")
    assert loud.ok and "bytes cut" in loud.text and len(loud.text) < 400
    assert "\n1\n2\n" in loud.text and "9999\n10000\n" in loud.text  # its head and its tail are kept
    a.close()
    w.close()


def test_a_command_is_over_when_its_process_is_even_if_a_background_child_holds_the_output():
    from workstation.agent.tools.shellrun import run_command
    from workstation.sandbox import Policy

    started = time.monotonic()  # without a sandbox: in one, the child ends with the command (test_sandbox.py)
    result = run_command("setsid sleep 6 & echo started", Path.cwd(), allow=[], approve=lambda c: True,
                         timeout_s=4, max_output_chars=1000, sandbox=Policy(Path.cwd(), mode="off"))
    assert result.exit_code == 0 and result.output.startswith("started\n")
    assert "still runs in the background" in result.output
    assert time.monotonic() - started < 4  # neither the sleep nor the timeout was waited for


def test_command_output_is_capped_as_it_streams_not_after():
    """200 MB of output: the process running the command never holds it (peak memory stays small)."""
    script = ("import resource; from pathlib import Path; from workstation.agent.tools.shellrun import run_command; "
              "peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; before = peak(); "
              "r = run_command('head -c 200000000 /dev/zero', Path.cwd(), allow=['head -c * /dev/zero'], approve=None, "
              "timeout_s=60, max_output_chars=1000); "
              "print(r.exit_code, r.truncated, len(r.output), peak() - before)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    code, truncated, chars, grew_kib = out.stdout.split()
    assert (code, truncated) == ("0", "True") and int(chars) < 1100
    assert int(grew_kib) < 20_000, f"peak memory grew by {int(grew_kib) // 1024} MiB"


# --------------------------------------------------------------------------- file tools

def test_replace_lines_needs_a_read_and_a_map_counts_as_one(ag, ws):
    refused = call(ag, "replace_lines", path="pkg/util.py", start=4, end=4, content="def clean(text: str) -> str:")
    assert not refused.ok and "read it before replacing lines" in refused.text
    meta = call(ag, "file_meta", path="pkg/util.py")
    assert meta.ok and "4-5 def clean(text: str) -> str" in meta.text
    assert meta.data["memory"] == "hit" and meta.data["file_tokens"] > 0
    edit = call(ag, "replace_lines", path="pkg/util.py", start=4, end=5,
                content="def clean(text: str, strip: bool = True) -> str:\n    return text.strip() if strip else text\n"
                        "# end of clean")
    assert edit.ok and edit.text.splitlines()[0] == ("pkg/util.py: replaced lines 4-5; the new text is lines 4-6; "
                                                     "lines after it moved by +1")
    # below the head, what it replaced: the model sent the new text, so it is not shown back (the log keeps
    # the whole diff)
    assert edit.text.splitlines()[1:] == ["-def clean(text: str) -> str:", "-    return text.strip()"]
    assert "+# end of clean" in edit.data["edits"][0]["diff"]
    # an insertion shows the lines it landed between, numbered as the file is now
    inserted = call(ag, "replace_lines", path="pkg/util.py", start=7, end=6, content="# cleaned\n# twice")
    assert inserted.ok and inserted.text.splitlines() == [
        "pkg/util.py: inserted 2 lines before line 7; the new text is lines 7-8; lines after it moved by +2",
        " 6| # end of clean", " 9| "]
    at_end = call(ag, "replace_lines", path="pkg/util.py", start=14, end=13, content="# the end")
    assert at_end.ok and at_end.text.splitlines()[1:] == [" 13|         return clean(text)"]  # nothing below
    # the next look at the map sees the edit: re-indexed before anything reads the map
    again = call(ag, "file_meta", path="pkg/util.py")
    assert "4-5 def clean(text: str, strip: bool = True) -> str" in again.text
    assert "11-13 class Cleaner" in again.text  # below the two lines inserted


def test_file_meta_of_a_changed_file_is_a_miss_and_fresh(ag, ws):
    path = ws.root / "pkg/util.py"
    path.write_text(path.read_text() + "\n\ndef added() -> None:\n    pass\n")
    meta = call(ag, "file_meta", path="pkg/util.py")
    assert meta.data["memory"] == "miss" and "def added()" in meta.text


def test_file_meta_points_at_the_repository_map_the_system_message_shows(ag, ws):
    """A map the repository map in the model's context shows whole and unchanged is not sent twice: its header
    lines and a pointer; shown in part, the lines it leaves out; shown otherwise (nested symbols are written
    differently there), or as it was before an edit, it is sent whole."""
    whole = call(ag, "file_meta", path="pkg/core.py").text
    ag.ctx.turn.head_map = ws.kmap.repo_map(tokens=2048)
    assert "\npkg/core.py:\n  6-9 def fetch" in ag.ctx.turn.head_map
    pointed = call(ag, "file_meta", path="pkg/core.py")
    symbols = [line for line in whole.splitlines() if line.lstrip()[:1].isdigit()]
    assert pointed.ok and pointed.data["in_head_map"] and "6-9 def fetch" not in pointed.text
    assert pointed.text.splitlines() == [line for line in whole.splitlines() if line not in symbols] + [
        f"symbols: as in the repository map in your context ({len(symbols)} lines, unchanged)"]
    skip = tools.get("file_meta").verify_skip  # replay cannot recompute it: told by the logged text alone
    assert skip(tools.Call.from_record({"ok": True, "name": "file_meta", "content": pointed.text}, {"path": "x"}))
    assert skip(tools.Call.from_record({"ok": True, "name": "file_meta", "content": whole}, {"path": "x"})) is None
    assert "in_head_map" not in call(ag, "file_meta", path="pkg/util.py").data  # `Cleaner: def run` there
    # a map the repository map shows in part (cut to its budget there): the lines it leaves out, and only them
    ag.ctx.turn.head_map = ag.ctx.turn.head_map.replace("\n  17-18 def _private() -> int", "")
    part = call(ag, "file_meta", path="pkg/core.py")
    assert part.data["in_head_map"] and part.text.splitlines()[-2:] == [
        "symbols: 2 lines as in the repository map in your context, unchanged; the 1 it leaves out:",
        "17-18 def _private() -> int"]
    call(ag, "replace_lines", path="pkg/core.py", start=6, end=6,
         content="def fetch(url: str, timeout: float = 5.0, request_id: str | None = None) -> str:")
    edited = call(ag, "file_meta", path="pkg/core.py")
    assert "in_head_map" not in edited.data and "request_id" in edited.text


def test_file_meta_asked_again_sends_only_what_the_map_in_context_left_out(ag):
    """A larger budget after a cut map: the header line, then only the lines the earlier map (same content,
    still in the model's context) left out; the same map again: a pointer; after an edit: whole again."""
    cut = tools.call(ag.ctx, "file_meta", {"path": "pkg/core.py", "tokens": 40}, call_id="call_cut")
    assert cut.text.endswith("more symbols)") and "continues" not in cut.data
    whole_text = tools.call(ag.user_ctx, "file_meta", {"path": "pkg/core.py"}).text  # no memory: all of it
    rest = tools.call(ag.ctx, "file_meta", {"path": "pkg/core.py", "tokens": 2048}, call_id="call_whole")
    shown = cut.text.splitlines()[1:-1]
    left = [line for line in whole_text.splitlines()[1:] if line not in shown]
    assert tools.get("file_meta").verify_skip(tools.Call.from_record({"content": rest.text}, {}))
    assert rest.data["continues"] == "call_cut" and rest.text.splitlines() == [
        whole_text.splitlines()[0], f"{len(shown)} lines as your file_meta (call call_cut) above showed them, "
        f"unchanged; the {len(left)} it left out:", *left]
    tools.call(ag.ctx, "file_meta", {"path": "pkg/util.py"}, call_id="call_same")
    again = tools.call(ag.ctx, "file_meta", {"path": "pkg/util.py"}, call_id="call_again")
    assert again.text.splitlines()[1] == "as your file_meta (call call_same) above showed it, unchanged: not sent again"
    ag.ranges.new_request(set())  # the request after a redaction: those results are no longer in context
    assert "continues" not in call(ag, "file_meta", path="pkg/util.py").data


def test_read_lines_numbers_and_bad_arguments(ag):
    result = call(ag, "read_lines", path="pkg/core.py", start="6", end=7)
    assert result.ok and result.text.splitlines() == [
        "6| def fetch(url: str, timeout: float = 5.0) -> str:", '7|     """Fetch a url (pretend)."""',
        "[pkg/core.py: lines 6-7 of 18]"]
    assert call(ag, "read_lines", path="pkg/core.py", start="six", end=7).text == \
        "error: start must be an integer, got 'six'"
    assert call(ag, "read_lines", path="pkg/core.py", start=30, end=40).text == \
        "error: pkg/core.py: lines 30-40 out of range (file has 18 lines)"
    assert "bad arguments for read_lines" in call(ag, "read_lines", path="pkg/core.py").text
    assert call(ag, "no_such_tool").text.startswith("error: unknown tool 'no_such_tool'")


def test_an_os_error_is_a_result_not_a_crash(ag, ws):
    long_name = "n" * 250 + ".txt"  # a temporary name beside it would be too long: it is made in the state folder
    (ws.root / long_name).write_text("one\n")
    assert call(ag, "read_lines", path=long_name, start=1, end=1).ok
    assert call(ag, "replace_lines", path=long_name, start=1, end=1, content="two").ok
    assert (ws.root / long_name).read_text() == "two\n"
    result = call(ag, "write_file", path="n" * 300 + ".txt", content="x")
    assert not result.ok and result.text.startswith("error: ") and "name too long" in result.text
    assert sorted(p.name for p in ws.root.iterdir() if p.name.startswith("n")) == [long_name]


def test_map_queries(ag):
    impact = call(ag, "impact", symbol="clean")
    assert impact.ok and impact.data["memory"] == "hit"
    assert "pkg/core.py:14 in parse (call of pkg/util.py:clean)" in impact.text
    assert "pkg/util.py:10 in Cleaner.run (call of pkg/util.py:clean)" in impact.text
    nothing = call(ag, "impact", symbol="nowhere_used")  # issue 12: fails as a missing symbol does
    assert not nothing.ok and nothing.text == "error: no symbol nowhere_used in the knowledge map"
    found = call(ag, "find", query="parse")
    assert found.ok and "pkg/core.py:12-14  function parse — def parse(text: str) -> str  [exact]" in found.text
    grep = call(ag, "grep", pattern=r"def \w+\(", path="pkg/util.py")
    assert grep.text.splitlines() == ["pkg/util.py:4: def clean(text: str) -> str:",
                                      "pkg/util.py:9:     def run(self, text: str) -> str:"]
    assert call(ag, "grep", pattern="(").text.startswith("error: invalid pattern '('")


def test_memory_tools(ag):
    assert call(ag, "umem", tier="ltm", key="style.quotes", value="double").ok
    assert call(ag, "fence", tier="ltm").ok
    got = call(ag, "qmem", tier="ltm", key="style.quotes")
    assert got.text == '"double"' and got.data["memory"] == "hit"
    missing = call(ag, "qmem", tier="stm", key="nothing.here")
    assert not missing.ok and missing.data["memory"] == "miss" and "no stm key 'nothing.here'" in missing.text
    assert "append-only" in call(ag, "umem", tier="episodic", key="x", value=1).text
    logged = call(ag, "log_decision", decision="tabs, never spaces", reasoning="house style", files=["pkg/core.py"])
    decision_id = logged.data["decision_id"]
    assert logged.ok and f"cite [D:{decision_id}]" in logged.text
    listed = call(ag, "decisions")
    assert listed.text == f"[D:{decision_id}] step -: tabs, never spaces — house style"
    assert not call(ag, "log_decision", decision="x", files="pkg/core.py").ok
    reflected = call(ag, "reflect", name="decision_reuse")
    assert reflected.ok and "tabs, never spaces" in reflected.text
    assert "unknown reflection" in call(ag, "reflect", name="nope").text


def test_recall_fetches_a_redacted_output(ag):
    record = ag.session.tool("call_x", "read_lines", "the original output " * 300)
    assert call(ag, "recall", record_id=record["id"]).text.startswith("the original output")
    assert "has no record" in call(ag, "recall", record_id="nope").text


def test_impact_marks_name_only_matches(ag):
    (ag.ws.root / "pkg/other.py").write_text("def go(job):\n    return job.clean()\n")
    (ag.ws.root / "pkg/extra.py").write_text("def clean():\n    return 0\n")  # two definitions now
    lines = call(ag, "impact", symbol="clean").text.splitlines()
    assert lines[-1] == "pkg/other.py:2 in go (call) [name-only]"
    assert all("[name-only]" not in line for line in lines[:-1]) and len(lines) >= 2
    missing = call(ag, "impact", symbol="NoSuchThing")
    assert not missing.ok and missing.text == "error: no symbol NoSuchThing in the knowledge map"


def test_grep_searches_a_file_the_map_skipped_as_too_large_and_names_what_it_did_not_search(tmp_path):
    """Issue 22: "no match" inside a 2.2 MB file where `grep -c` finds 11. The file is over
    index.max_file_bytes (1 MB): the map skips it, grep streams it; a binary file is named, not hidden."""
    w = workspace(tmp_path, None)
    filler = "x" * 99 + "\n"
    (w.root / "big.log").write_text("".join(("needle here\n" if i % 2000 == 7 else filler) for i in range(22_000)))
    (w.root / "blob.bin").write_bytes(b"needle\0" * 10)
    (w.root / "tail.log").write_bytes((filler * 11_000 + "needle first\n").encode() + b"\xff\xfeneedle\n")
    w.kmap.index_all()
    a = agent(w)
    try:
        assert (w.root / "big.log").stat().st_size > 2_000_000
        started = time.monotonic()
        result = call(a, "grep", pattern="needle")
        assert time.monotonic() - started < 10
        assert result.ok
        lines = result.text.splitlines()
        assert [ln.split(":")[1] for ln in lines if ln.startswith("big.log:")] == [
            str(i + 1) for i in range(22_000) if i % 2000 == 7]  # all 11, at their line numbers
        assert "tail.log:11001: needle first" in lines  # searched up to the bytes that are not UTF-8
        assert "[2 file(s) not searched:" in result.text
        assert "  blob.bin: binary (NUL byte at offset 6)" in lines
        assert "  tail.log: binary or not UTF-8 after line 11001]" in lines
        assert (result.data["hits"], result.data["not_searched"]) == (12, 2)
        narrowed = call(a, "grep", pattern="absent", path="blob.bin")
        assert narrowed.text.startswith("no match for 'absent'\n[1 file(s) not searched:")  # never a bare "no match"
        for meta in (call(a, "file_meta", path="big.log"), slash.run(a, "/map big.log")):
            assert "big.log is not in the knowledge map: skipped (too_large: " in meta.text
    finally:
        a.close()
        w.close()
