"""Slash commands, each one, with no model configured (and /compact, /archive with the scripted one)."""

from __future__ import annotations

import pytest

from support.agent_support import agent, module_server, records, requests_since, workspace
from support.fakellm import Reply
from workstation.agent import tools
from workstation.commands import slash
from workstation.memory.reflect import QUERIES

server_module, server = module_server()

SUMMARY = ("## Task & instructions\nplay with slash commands\n## Decisions & conventions\n(none)\n"
           "## Files touched\n(none)\n## Open to-dos\n(none)\n## Errors seen\n(none)")


@pytest.fixture
def ag(tmp_path):
    w = workspace(tmp_path, None)  # no model at all
    a = agent(w)
    yield a
    a.close()
    w.close()


def run(a, line):
    out = slash.run(a, line)
    return out


def test_help_lists_every_command(ag):
    out = run(ag, "/help")
    assert out.ok
    for command in slash.COMMANDS:
        assert command in out.text
    assert len(out.text.splitlines()) == len(slash.COMMANDS) == 28


def test_map(ag):
    repo = run(ag, "/map")
    assert repo.ok and repo.text.startswith("Repository map:") and "pkg/core.py" in repo.text
    one = run(ag, "/map pkg/core.py")
    assert one.ok and "6-9 def fetch(url: str, timeout: float = 5.0) -> str" in one.text
    assert "not in the knowledge map" in run(ag, "/map pkg/none.py").text
    budgeted = run(ag, "/map pkg/core.py 4000")  # issue 12: a budget after the file
    assert budgeted.ok and "6-9 def fetch(url: str, timeout: float = 5.0) -> str" in budgeted.text
    assert run(ag, "/map pkg/core.py 0").text == "error: tokens must be between 1 and 4096, got 0"


def test_read(ag):
    out = run(ag, "/read pkg/core.py 6-7")
    assert out.ok and out.text.startswith("6| def fetch(")
    assert run(ag, "/read pkg/core.py 12").text.startswith("12| def parse(")
    assert run(ag, "/read pkg/core.py ten-twelve").text == "error: bad line range 'ten-twelve': use A-B, e.g. 10-40"
    assert run(ag, "/read pkg/core.py").text == "error: usage: /read FILE A-B"
    assert "outside the workspace" in run(ag, "/read ../x.py 1-2").text


def test_the_users_reads_are_not_the_models(ag):
    assert run(ag, "/read pkg/util.py 4-5").ok
    edit = tools.call(ag.ctx, "replace_lines", {"path": "pkg/util.py", "start": 4, "end": 4, "content": "x"})
    assert not edit.ok and "read it before replacing lines" in edit.text


def test_impact_find_grep(ag):
    assert "pkg/core.py:14 in parse" in run(ag, "/impact clean").text
    assert run(ag, "/impact").text == "error: usage: /impact NAME"
    assert "function fetch" in run(ag, "/find fetch").text
    assert run(ag, "/find").text == "error: usage: /find QUERY"
    assert run(ag, "/grep def clean").text == "pkg/util.py:4: def clean(text: str) -> str:"
    assert run(ag, r"/grep \bclean\( pkg/core.py").text == 'pkg/core.py:14:     return clean(text.strip("<>"))'
    assert run(ag, "/grep").text == "error: usage: /grep PATTERN [PATH]"


def test_memory_commands(ag):
    assert run(ag, '/umem ltm style.indent {"width": 4}').ok
    assert run(ag, "/umem stm scratch just a sentence").ok
    assert run(ag, "/qmem stm scratch").text == '"just a sentence"'
    assert run(ag, "/fence ltm").text == "fenced ltm: earlier writes are durable and visible"
    assert run(ag, "/qmem ltm style.indent").text == '{"width": 4}'
    missing = run(ag, "/qmem ltm no.such.key")
    assert not missing.ok and "no ltm key 'no.such.key'" in missing.text
    assert "unknown memory tier 'attic'" in run(ag, "/qmem attic x").text
    assert run(ag, "/umem ltm only-key").text == "error: usage: /umem TIER KEY VALUE"
    assert run(ag, "/fence").text == "error: usage: /fence TIER"


def test_umem_values_past_the_parsers_limits_are_one_line(ag):
    """A value nested past the JSON parser's depth or holding an integer past Python's digit limit is one
    line naming the problem (issue 19, item 11), and nothing is stored."""
    for value, expected in (("[" * 100_000, "nests too deeply"), ("[" * 5000 + "]" * 5000, "nests too deeply"),
                            ("9" * 5000, "an integer of more than 4300 digits"),
                            ("[" + "9" * 5000 + "]", "an integer of more than 4300 digits")):
        out = run(ag, f"/umem ltm k {value}")
        assert not out.ok and out.text.startswith("error: ") and expected in out.text, out.text[:200]
        assert "\n" not in out.text and len(out.text) < 300
    assert "no ltm key 'k'" in run(ag, "/qmem ltm k").text
    assert run(ag, "/umem ltm k a bare sentence").ok  # a bare word or sentence is still a string
    assert run(ag, "/qmem ltm k").text == '"a bare sentence"'


def test_decisions_and_reflect(ag):
    assert run(ag, "/decisions").text == "no decisions logged yet"
    decision_id = ag.memory.log_decision("tabs everywhere", "house style")
    assert run(ag, "/decisions").text == f"[D:{decision_id}] step -: tabs everywhere — house style"
    names = run(ag, "/reflect")
    assert names.ok and all(name in names.text for name in QUERIES)
    assert run(ag, "/map pkg/util.py").ok
    calls = run(ag, "/reflect tool_errors")
    assert calls.ok and calls.text.splitlines()[0].split()[:3] == ["tool", "calls", "errors"]
    assert "file_meta" in calls.text  # slash commands land in the episodic log too
    assert "unknown reflection 'nope'" in run(ag, "/reflect nope").text


def test_pin(ag):
    out = run(ag, "/pin never touch the migrations")
    assert out.ok and out.action == "pinned"
    assert ag.pins() == ["never touch the migrations"]
    pinned, kept = records(ag.session)[-2:]  # the pin, then the command's own record (never the model's)
    assert pinned["pin"] is True
    assert (kept["type"], kept["line"], kept["content"], kept["ok"]) == (
        "command", "/pin never touch the migrations", "pinned: never touch the migrations", True)
    assert run(ag, "/pin").text == "error: usage: /pin TEXT"


def test_pin_never_echoes_a_secret(ag):
    key = "sk-ant-api03-" + "Q" * 40
    out = run(ag, f"/pin deploy with {key}")
    assert out.ok and key not in out.text and "deploy with" in out.text, out.text
    assert all(key not in pin for pin in ag.pins())


def test_model(ag):
    assert run(ag, "/model").text.startswith("model: none configured")
    switched = []
    out = slash.run(ag, "/model openai/gpt-4o-mini", set_model=switched.append)
    assert out.action == "model" and switched == ["openai/gpt-4o-mini"]
    assert ag.model_spec().model == "openai/gpt-4o-mini"
    assert run(ag, "/model").text == "model: openai/gpt-4o-mini"  # the configured window was another model's


def test_model_shows_the_configured_window(tmp_path):
    w = workspace(tmp_path, "http://127.0.0.1:9/v1")
    a = agent(w)
    assert run(a, "/model").text == "model: openai/test-model (context window 32,768 tokens)"
    a.close()
    w.close()


def test_compact_and_archive_without_a_model(ag):
    ag.session.user("hello")
    out = run(ag, "/compact")
    assert not out.ok and out.text == ("error: compaction needs a model: set memory.compact_model or a chat model "
                                       "(/model NAME)")
    archived = run(ag, "/archive")
    assert archived.ok and archived.action == "archived"
    assert archived.text.startswith(f"archived {ag.session.slug} (without a fresh summary")
    assert not ag.session.path.exists() and (ag.ws.paths.archive / f"{ag.session.slug}.jsonl.gz").exists()


def test_compact_and_archive_with_the_model(tmp_path, server):
    w = workspace(tmp_path, server.url)
    a = agent(w)
    for n in range(3):
        a.session.user(f"question {n}")
        a.session.assistant(f"answer {n}")
    assert run(a, "/compact").text == (f"nothing to compact in {a.session.slug}: every turn but the newest 40 is "
                                       "summarized already")
    server.push(Reply(text=SUMMARY))
    out = run(a, "/compact 2")
    # keeping the newest 2 turns (a question and its answer each) leaves the first to summarize
    assert out.ok and out.text.startswith(f"compacted turn 1 of {a.session.slug} with openai/test-model")
    prompt = requests_since(server)[0]["messages"][1]["content"]
    assert "question 0" in prompt and "answer 0" in prompt and "question 1" not in prompt
    assert records(a.session, "compact")[0]["summary"].startswith("## Task & instructions\nplay with slash")
    assert run(a, "/compact 2").text.startswith("nothing to compact")
    assert run(a, "/compact keep=all").text.startswith("error: usage: /compact [KEEP] [FOCUS]")
    a.session.user("one more")
    server.push(Reply(text=SUMMARY))
    archived = run(a, "/archive")
    assert archived.text == f"archived {a.session.slug}" and archived.action == "archived"
    a.close()
    w.close()


def test_compact_shows_the_summary_and_keeps_the_sections_the_model_added(tmp_path, server):
    w = workspace(tmp_path, server.url)
    a = agent(w)
    for n in range(3):
        a.session.user(f"question {n}")
        a.session.assistant(f"answer {n}")
    answer = ("Here is the summary.\n\n## Task & instructions\nplay with slash commands\n\n"
              "## Retry logic\nretries back off 2x up to 30 s (asked for in detail)\n\n## Decisions & conventions\n"
              "(none)\n## Files touched\n(none)\n## Open to-dos\n- none\n## Open questions\n- why 30 s?\n"
              "## Errors seen\n(none)")
    server.push(Reply(text=answer))
    out = run(a, "/compact 2 the retry logic")
    assert out.ok and out.text.startswith(f"compacted turn 1 of {a.session.slug}")
    (record,) = records(a.session, "compact")
    # the summary is in the command's answer, whole; nothing the model wrote is dropped or moved
    assert out.text.endswith(record["summary"]) and "the model sees this summary instead of them:" in out.text
    assert record["sections"]["Retry logic"] == "retries back off 2x up to 30 s (asked for in detail)"
    assert record["sections"]["Open questions"] == "- why 30 s?"  # not folded into "Open to-dos"
    assert record["sections"]["Notes"] == "Here is the summary."
    assert record["sections"]["todos"] == "- none"
    assert "## Retry logic\nretries back off" in record["summary"] and "## Notes\nHere is the summary." in record["summary"]
    a.close()
    w.close()


def test_unknown_command(ag):
    out = run(ag, "/frobnicate now")
    assert not out.ok and out.text == "unknown command /frobnicate; /help lists them"
    assert slash.is_command("/map x") and not slash.is_command("/frobnicate")


def test_new_and_clear_ask_the_ui_for_a_new_session(tmp_path):
    from workstation.commands import slash

    ws = workspace(tmp_path, None)
    a = agent(ws)
    for line in ("/new", "/clear"):
        out = slash.run(a, line)
        assert out.ok and out.action == "new" and a.session.slug in out.text
    assert not slash.run(a, "/new now").ok
    a.close()
    ws.close()


def test_map_takes_a_token_budget_after_the_file(ag):
    small, large = run(ag, "/map pkg/core.py 40"), run(ag, "/map pkg/core.py 4000")
    assert small.ok and "more symbols)" in small.text
    assert large.ok and "more symbols)" not in large.text and "def parse(" in large.text
    assert "tokens must be between" in run(ag, "/map pkg/core.py 99999999").text


def test_grep_takes_a_bare_folder_name_as_its_path(ag):
    assert run(ag, "/grep def clean pkg").text == "pkg/util.py:4: def clean(text: str) -> str:"
    assert run(ag, "/grep clean nowhere").text.startswith("no match")  # not a path: part of the pattern
