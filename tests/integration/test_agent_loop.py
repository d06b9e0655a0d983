"""The agent loop end to end through the real litellm path against the scripted server on 127.0.0.1."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest

from support.agent_support import (MODEL, agent, events, is_compaction, is_update, module_server, records, requests_since,
                           tool_results, workspace)
from support.conftest_llm import FAKE_API_KEY
from support.fakellm import Reply
from workstation.agent import tools
from workstation.agent.loop import NoModel, base_tokens
from workstation.agent.tools import TOOLS
from workstation.costs import report as report_mod

server_module, server = module_server()


def edit_policy(state: dict):
    """file_meta -> read_lines (the range the map gives) -> replace_lines + log_decision -> answer;
    in a later turn: cite the logged decision found in the context's decision log."""

    def respond(body: dict) -> Reply:
        messages = [m for m in body["messages"] if not is_update(m)]
        last = messages[-1]
        if last["role"] == "user" and "request_id" in last["content"]:
            return Reply(text="Mapping the file first.", tool_calls=[("file_meta", {"path": "pkg/core.py"})])
        if last["role"] == "user":  # the later turn: the decision is in the update appended after it was logged
            found = re.search(r"\[D:(d[0-9a-f]{12})\]", json.dumps(body["messages"]))
            return Reply(text=f"parse should follow the same convention [D:{found.group(1)}].")
        (name, args, content), *more = tool_results(messages)
        if name == "file_meta":
            span = re.search(r"^(\d+)-(\d+) def fetch", content, re.M)
            state["span"] = (int(span.group(1)), int(span.group(2)))
            return Reply(tool_calls=[("read_lines", {"path": "pkg/core.py", "start": state["span"][0],
                                                     "end": state["span"][0]})])
        if name == "read_lines":
            line_no, text = re.search(r"^\s*(\d+)\| (.*)$", content, re.M).groups()
            new = text.replace(") -> str:", ", request_id: str | None = None) -> str:")
            return Reply(text="Editing just that line.", tool_calls=[
                ("replace_lines", {"path": "pkg/core.py", "start": int(line_no), "end": int(line_no), "content": new}),
                ("log_decision", {"decision": "request_id: str | None = None is the last parameter",
                                  "reasoning": "backward compatible", "files": ["pkg/core.py"]})])
        if name == "replace_lines":
            state["decision"] = re.search(r"decision (d[0-9a-f]{12})", more[0][2]).group(1)
            return Reply(text=f"Done: fetch takes request_id [D:{state['decision']}].")
        raise AssertionError(f"unexpected step {name}")

    return respond


def test_multi_step_session_end_to_end(tmp_path, server):
    state: dict = {}
    server.dispatch.fn = edit_policy(state)
    ws = workspace(tmp_path, server.url)
    a = agent(ws)
    seen_tools = []
    result = a.run("Add a request_id parameter to fetch in pkg/core.py",
                   __import__("workstation.agent.loop", fromlist=["AgentEvents"]).AgentEvents(
                       on_tool=lambda name, args, res: seen_tools.append((name, res.ok))))
    assert result.error is None and result.steps == 4 and result.tool_calls == 4
    assert result.text == f"Done: fetch takes request_id [D:{state['decision']}]."
    assert seen_tools == [("file_meta", True), ("read_lines", True), ("replace_lines", True), ("log_decision", True)]

    # the file really changed, exactly on that line, and the map was re-indexed from it
    source = (ws.root / "pkg/core.py").read_text()
    assert "def fetch(url: str, timeout: float = 5.0, request_id: str | None = None) -> str:" in source
    assert source.count("request_id") == 1
    assert "request_id" in a.kmap.file_map("pkg/core.py").render()

    # the later turn cites the decision it found in its context: a reuse
    result2 = a.run("Now the same for parse")
    assert result2.error is None and f"[D:{state['decision']}]" in result2.text
    sent = requests_since(server)
    assert len(sent) == 5
    decision = f"[D:{state['decision']}] request_id: str | None = None is the last parameter"
    assert decision not in sent[4]["messages"][0]["content"]  # not an edit of the head...
    assert [m for m in sent[4]["messages"] if decision in str(m.get("content"))] == [  # ...but an update, once
        m for m in sent[4]["messages"] if is_update(m) and "Decisions logged since" in m["content"]]
    assert {t["function"]["name"] for t in sent[0]["tools"]} == set(TOOLS)
    # the task named pkg/core.py: its map is in every request of the turn (memory first)
    assert all("pkg/core.py (python" in r["messages"][0]["content"] for r in sent[:4])
    a.close()

    # the session log records every step; the epoch (the requests' head) and the context updates appended
    # since (agent.updates: the decision, the edited map) are looked at apart
    everything = records(a.session)
    assert [r["type"] for r in everything].count("epoch") == 1
    told = [r["content"] for r in everything if r.get("update")]
    assert told[0].startswith("Decisions logged since") and "request_id" in told[0]
    log = [r for r in everything if r["type"] != "epoch" and not r.get("update")]
    # before the edit, a checkpoint of what the file held, then the intent naming what it will hold
    # (agent/checkpoints.py)
    assert [r["type"] for r in log] == ["user", "assistant", "tool", "assistant", "tool", "assistant", "checkpoint",
                                        "intent", "tool", "tool", "assistant", "user", "assistant"]
    assert log[6]["path"] == "pkg/core.py" and log[6]["turn"] == log[0]["id"]
    assert log[7]["path"] == "pkg/core.py" and log[7]["after"] == log[8]["edits"][0]["after"]
    del log[6:8]
    user = log[0]
    assert user["memory"] == {"lookups": 2, "hits": 1, "files": ["pkg/core.py"], "misses": ["request_id"]}
    meta, read, edit = log[2], log[4], log[6]
    assert meta["name"] == "file_meta" and meta["served_from"] == "memory" and meta["memory"] == "hit"
    assert meta["file_tokens"] > 0 and meta["path"] == "pkg/core.py"
    assert read["served_from"] == "disk" and read["lines"] == [state["span"][0]] * 2
    assert edit["name"] == "replace_lines" and edit["ok"] is True
    assistants = [r for r in log if r["type"] == "assistant"]
    assert all(r["context_tokens"] > r["base_tokens"] > 0 and r["model"] == MODEL for r in assistants)
    assert assistants[-1]["reused"] == [state["decision"]]

    # ...and so does the episodic log
    evs = events(ws, a.session.slug)
    types = [e["type"] for e in evs]
    for kind in ("turn", "model_call", "tool_call", "memory_hit", "read_avoided", "file_read", "file_edit",
                 "decision_logged", "decision_reused"):
        assert kind in types, kind
    assert types.count("model_call") == 5 and types.count("tool_call") == 4
    edit_event = next(e for e in evs if e["type"] == "file_edit")
    assert edit_event["data"]["path"] == "pkg/core.py"
    reuses = [e for e in evs if e["type"] == "decision_reused"]
    assert [(e["name"], e["step"]) for e in reuses] == [(state["decision"], 4), (state["decision"], 5)]
    logged = next(e for e in evs if e["type"] == "decision_logged")
    assert logged["step"] == 3

    # the report's agent figures agree with the episodic log
    rep = report_mod.build(ws.paths, a.session.slug, tools.meaning_of, base_tokens)
    lookups = [e for e in evs if e["type"] in ("memory_hit", "memory_miss")]
    assert rep.agent.memory_queries == len(lookups)
    assert rep.agent.memory_hits == sum(e["type"] == "memory_hit" for e in lookups)
    assert rep.agent.reads_avoided == types.count("read_avoided") == 1
    assert rep.agent.file_reads == types.count("file_read") == 1
    assert (rep.agent.decisions_logged, rep.agent.decisions_reused) == (1, 2)
    assert rep.agent.tokens_sent == sum(r["context_tokens"] for r in assistants)
    ws.close()


def test_decisions_carry_over_to_a_new_session(tmp_path, server):
    ws = workspace(tmp_path, server.url)
    first = agent(ws, "first")
    decision_id = first.memory.log_decision("snake_case for every new name", "house style")
    first.close()
    second = agent(ws, "second")
    server.push(Reply(text=f"ok [D:{decision_id}] [D:d000000000000]"))  # the second id does not exist
    result = second.run("rename things")
    assert result.error is None
    assert f"[D:{decision_id}] snake_case for every new name (why: house style)" in \
        requests_since(server)[0]["messages"][0]["content"]
    assert records(second.session, "assistant")[0]["reused"] == [decision_id]
    second.close()
    ws.close()


def test_stale_file_is_refused_in_replace_lines(tmp_path, server):
    ws = workspace(tmp_path, server.url)
    path = ws.root / "pkg/util.py"

    def respond(body):
        results = tool_results(body["messages"]) if body["messages"][-1]["role"] == "tool" else []
        if not results:
            return Reply(tool_calls=[("read_lines", {"path": "pkg/util.py", "start": 4, "end": 5})])
        name, _, content = results[0]
        if name == "read_lines" and not respond.edited:
            path.write_text(path.read_text().replace("text.strip()", "text.strip().lower()"))  # someone else
            respond.edited = True
            return Reply(tool_calls=[("replace_lines", {"path": "pkg/util.py", "start": 5, "end": 5,
                                                        "content": "    return text.strip(' ')"})])
        if name == "replace_lines" and content.startswith("error"):
            return Reply(tool_calls=[("read_lines", {"path": "pkg/util.py", "start": 4, "end": 5})])
        if name == "read_lines":
            return Reply(tool_calls=[("replace_lines", {"path": "pkg/util.py", "start": 5, "end": 5,
                                                        "content": "    return text.strip().lower().strip('.')"})])
        return Reply(text="done")

    respond.edited = False
    server.dispatch.fn = respond
    a = agent(ws)
    assert a.run("tidy clean()").error is None
    tools = records(a.session, "tool")
    refused = tools[1]
    assert refused["name"] == "replace_lines" and refused["ok"] is False
    assert refused["content"] == ("error: pkg/util.py changed on disk since it was last read; read it again "
                                  "before editing")
    assert tools[2]["name"] == "read_lines" and tools[2]["served_from"] == "disk"  # not from memory: it changed
    assert tools[3]["ok"] is True
    assert path.read_text().splitlines()[4] == "    return text.strip().lower().strip('.')"
    a.close()
    ws.close()


def test_an_unchanged_range_still_in_context_is_not_sent_again(tmp_path, server):
    ws = workspace(tmp_path, server.url)
    read = ("read_lines", {"path": "pkg/core.py", "start": 6, "end": 9})
    server.push(Reply(tool_calls=[read]), Reply(tool_calls=[read, ("read_lines", {"path": "pkg/core.py",
                                                                                   "start": 7, "end": 8})]),
                Reply(text="seen"))
    a = agent(ws)
    assert a.run("look at fetch twice").error is None
    first, again, inner = records(a.session, "tool")
    assert first["served_from"] == "disk" and "def fetch" in first["content"]
    for pointer in (again, inner):
        assert pointer["served_from"] == "memory" and pointer["memory"] == "hit"
        assert "still in your context above" in pointer["content"] and "def fetch" not in pointer["content"]
    # changed on disk: read from disk again
    (ws.root / "pkg/core.py").write_text((ws.root / "pkg/core.py").read_text() + "\n# touched\n")
    server.push(Reply(tool_calls=[read]), Reply(text="re-read"))
    assert a.run("and again").error is None
    assert records(a.session, "tool")[-1]["served_from"] == "disk"
    evs = events(ws, a.session.slug)
    assert [e["type"] for e in evs].count("read_avoided") == 2
    assert [e["data"]["served_from"] for e in evs if e["type"] == "file_read"] == ["disk", "memory", "memory",
                                                                                  "disk"]
    a.close()
    ws.close()


def test_a_read_cut_at_the_cap_counts_only_the_lines_sent(tmp_path, server):
    ws = workspace(tmp_path, server.url)
    (ws.root / "big.txt").write_text("".join(f"line {n} of the long file, padded out a little\n"
                                             for n in range(1, 3001)))
    server.push(Reply(tool_calls=[("read_lines", {"path": "big.txt", "start": 1, "end": 2000})]),
                Reply(tool_calls=[("read_lines", {"path": "big.txt", "start": 1500, "end": 1502}),
                                  ("read_lines", {"path": "big.txt", "start": 10, "end": 12})]),
                Reply(text="seen"))
    a = agent(ws)
    assert a.run("read big.txt").error is None
    cut, beyond, within = records(a.session, "tool")
    last = cut["lines"][1]
    assert cut["lines"][0] == 1 and 100 < last < 1500
    assert cut["content"].splitlines()[-2].endswith(f"| line {last} of the long file, padded out a little")
    assert cut["content"].endswith(f"read on from line {last + 1}]")
    # past the cut: never sent, so read from disk, not "still in your context"
    assert beyond["served_from"] == "disk" and "1500| line 1500 of the long file" in beyond["content"]
    assert within["served_from"] == "memory" and "still in your context above" in within["content"]
    evs = events(ws, a.session.slug)
    assert [e["data"]["served_from"] for e in evs if e["type"] == "file_read"] == ["disk", "disk", "memory"]
    assert [e["type"] for e in evs].count("read_avoided") == 1
    a.close()
    ws.close()


def test_reflection_sees_operations_and_reads_from_memory(tmp_path, server):
    from workstation.memory import reflect

    ws = workspace(tmp_path, server.url)
    read = ("read_lines", {"path": "pkg/core.py", "start": 6, "end": 9})
    server.push(Reply(tool_calls=[read]), Reply(tool_calls=[read, ("find", {"query": "clean"})]), Reply(text="ok"))
    a = agent(ws)
    assert a.run("look at fetch twice").error is None
    slug = a.session.slug
    a.close()

    def one(name: str) -> list[dict]:
        return reflect.run(ws.db, name, session=slug).records()

    (row,) = one("memory_by_session")
    assert (row["reads_from_memory"], row["reads_from_disk"], row["reads_avoided"]) == (1, 1, 1)
    assert [(r["step"], r["from_memory"], r["from_disk"]) for r in one("reads_avoided")] == [(1, 0, 1), (2, 1, 0)]
    assert one("top_read_files")[0] == {"path": "pkg/core.py", "reads": 2, "from_memory": 1, "from_disk": 1,
                                        "avoided": 1}
    ops = reflect.run_sql(ws.db, "SELECT op, name, step, ended IS NOT NULL AS ended, ok FROM operations "
                                 f"WHERE session = '{slug}'").records()
    assert sorted((o["step"], o["op"], o["name"]) for o in ops) == [
        (1, "model_call", MODEL), (1, "tool_call", "read_lines"), (2, "model_call", MODEL),
        (2, "tool_call", "find"), (2, "tool_call", "read_lines"), (3, "model_call", MODEL)]
    assert all(o["ended"] and o["ok"] for o in ops)
    # each operation's end is the model_call or tool_call event itself (counted once), its reads its children
    evs = events(ws, slug)
    assert [e["type"] for e in evs].count("tool_call") == 3 and [e["type"] for e in evs].count("model_call") == 3
    starts = {e["id"]: e for e in evs if e["type"] == "op_start"}
    assert all(starts[e["parent"]]["name"] == "read_lines" for e in evs if e["type"] == "file_read")
    ws.close()


def _fill(session, turns: int, words: int) -> None:
    for n in range(turns):
        session.user(f"old question {n}: " + "lorem ipsum " * words)
        session.assistant(f"old answer {n}: " + "dolor sit " * words)


def test_a_context_over_the_window_is_trimmed(tmp_path, server):
    ws = workspace(tmp_path, server.url, model={"context_window": 4000})
    a = agent(ws)
    _fill(a.session, 12, 60)  # ~3,000 tokens of old turns
    before = len(records(a.session))
    server.push(Reply(text="short answer"))
    notices = []
    from workstation.agent.loop import AgentEvents

    result = a.run("the newest question", AgentEvents(on_notice=notices.append))
    assert result.error is None and result.trimmed > 0
    assert notices and "context trimmed to fit 4,000 tokens" in notices[0]
    sent = requests_since(server)[0]["messages"]
    assert sent[0]["role"] == "system" and sent[-1] == {"role": "user", "content": "the newest question"}
    assert "old question 0:" not in json.dumps(sent)  # the oldest went first
    assert len(sent) < 2 + 24
    reply = records(a.session, "assistant")[-1]
    assert reply["context_tokens"] <= 4000 - 1000 and reply["trimmed"] == result.trimmed
    # nothing left the log (the epoch, the message, the notice the user saw, the reply)
    assert len(records(a.session)) == before + 4
    (notice,) = [r for r in records(a.session) if r.get("notice") == "trimmed"]
    assert notice["content"] == f"[{notices[0]}]"  # a resumed chat shows what the live one did
    a.close()
    ws.close()


def test_a_context_that_cannot_fit_gives_a_clear_message(tmp_path, server):
    ws = workspace(tmp_path, server.url, model={"context_window": 1200})  # the tool schemas alone are bigger
    a = agent(ws)
    result = a.run("hello")
    assert result.error.startswith(f"the request cannot fit {MODEL}'s context window of 1,200 tokens")
    assert "\n" not in result.error
    assert requests_since(server) == []  # no request was sent
    log = records(a.session)
    assert [r["type"] for r in log] == ["epoch", "user", "system"] and log[2]["notice"] == "error"
    assert [e["type"] for e in events(ws, a.session.slug)].count("error") == 1
    a.close()
    ws.close()


def test_no_model_configured_says_how_to_set_one(tmp_path):
    from workstation.commands import slash

    ws = workspace(tmp_path, None)
    a = agent(ws)
    with pytest.raises(NoModel) as err:
        a.run("do something")
    message = str(err.value)
    assert "\n" not in message and "no model configured" in message
    for how in ("[model] name", "WORKSTATION_MODEL", "--model"):
        assert how in message
    assert records(a.session) == []  # nothing recorded for a turn that could not run
    assert slash.run(a, "/find fetch").ok  # the workstation stays useful
    a.close()
    ws.close()


def test_api_keys_never_land_in_the_logs(tmp_path, server):
    ws = workspace(tmp_path, server.url)
    a = agent(ws, approve=lambda cmd: True)
    server.push(Reply(tool_calls=[("run_command", {"cmd": "printenv WS_TEST_KEY"})]), Reply(text="printed"))
    assert a.run("show the key").error is None
    output = records(a.session, "tool")[0]
    # the command never had the key: a secret-named variable is left out of its environment (scrub.command_env)
    assert "[exit 1, " in output["content"] and FAKE_API_KEY not in output["content"]  # printenv: no such variable
    server.push(Reply(status=401, error_message=f"Incorrect API key provided: {FAKE_API_KEY}"))
    result = a.run("again")
    assert result.error.startswith("authentication failed") and FAKE_API_KEY not in result.error
    assert "check [model]" in result.error
    a.close()
    sent = server.request_log[-1].headers["Authorization"]
    assert sent == f"Bearer {FAKE_API_KEY}"  # the key was used...
    assert FAKE_API_KEY.encode() not in a.session.path.read_bytes()  # ...and never logged
    assert FAKE_API_KEY[:12] not in json.dumps(events(ws, a.session.slug))
    ws.close()


def test_a_key_in_a_workspace_file_never_lands_in_the_session_log(tmp_path, server):
    ws = workspace(tmp_path, server.url)
    (ws.root / ".env").write_text(f"DEBUG=1\nWS_TEST_KEY={FAKE_API_KEY}\n")
    server.push(Reply(tool_calls=[("read_lines", {"path": ".env", "start": 1, "end": 2}),
                                  ("grep", {"pattern": "KEY="}),
                                  ("grep", {"pattern": FAKE_API_KEY})]),  # a key in the arguments
                Reply(text=f"Your key is {FAKE_API_KEY}."))  # a model repeating what it was once told
    a = agent(ws)
    result = a.run(f"what is in .env? is it {FAKE_API_KEY}?")
    assert result.error is None and result.text == "Your key is ***."
    assert records(a.session, "user")[0]["content"] == "what is in .env? is it ***?"
    read, grep_key, grep_value = records(a.session, "tool")
    assert read["ok"] and read["content"].splitlines()[1] == "2| WS_TEST_KEY=***"
    # an .env file is never searched by grep, named by the user or not: it is named as not searched
    unread = ("\n[1 file(s) not searched:\n"
              "  .env: secrets (an .env-style file: its values are secrets, kept out of the map)]")
    assert grep_key["content"] == "no match for 'KEY='" + unread
    assert grep_value["content"] == "no match for '***'" + unread
    a.close()
    assert FAKE_API_KEY not in a.session.path.read_text()
    assert FAKE_API_KEY not in json.dumps(requests_since(server))  # nor did the model ever see it
    assert FAKE_API_KEY not in json.dumps(events(ws, a.session.slug))
    ws.close()


def test_pins_are_reinjected_after_compaction(tmp_path, server):
    from workstation.commands import slash

    ws = workspace(tmp_path, server.url, memory={"compact_threshold": 10, "keep_recent": 4})
    a = agent(ws)
    assert slash.run(a, "/pin always answer in French").action == "pinned"
    _fill(a.session, 6, 3)
    server.push(Reply(text="## Task & instructions\nchat\n## Decisions & conventions\n(none)\n## Files touched\n"
                           "(none)\n## Open to-dos\n(none)\n## Errors seen\n(none)"))
    out = slash.run(a, "/compact")
    assert out.ok and out.text.startswith("compacted turns 1–2"), out.text  # 6 turns, keep 4
    compact = records(a.session, "compact")[0]
    pin = next(r for r in records(a.session) if r.get("pin"))
    turn_ids = [r["id"] for r in records(a.session) if r["type"] in ("user", "assistant", "system", "tool")]
    assert turn_ids.index(pin["id"]) < turn_ids.index(compact["covers"]["last_id"])  # folded away...
    server.push(Reply(text="d'accord"))
    assert a.run("hello").error is None
    sent = requests_since(server)[-1]["messages"]
    assert "Pinned instructions (always follow):\n- always answer in French" in sent[0]["content"]
    assert sent[1]["role"] == "system" and sent[1]["content"].startswith("Summary of the earlier conversation")
    assert sum("always answer in French" in str(m["content"]) for m in sent) == 1  # ...and injected once
    a.close()
    ws.close()


def test_the_context_window_uses_compaction_when_due(tmp_path, server):
    ws = workspace(tmp_path, server.url, memory={"compact_threshold": 4, "keep_recent": 2})
    a = agent(ws, compaction="sync")
    _fill(a.session, 3, 2)  # and "new": 4 turns

    def respond(body):
        if is_compaction(body):
            return Reply(text="## Task & instructions\nold\n## Decisions & conventions\n(none)\n## Files touched\n"
                              "(none)\n## Open to-dos\n(none)\n## Errors seen\n(none)")
        return Reply(text="fresh")

    server.dispatch.fn = respond
    notes = []
    from workstation.agent.loop import AgentEvents

    assert a.run("new", AgentEvents(on_notice=notes.append)).error is None
    assert notes and notes[0].startswith("compacted turns 1–2")
    sent = requests_since(server)[-1]["messages"]
    assert sent[1]["content"].startswith("Summary of the earlier conversation")
    assert [m["role"] for m in sent[2:]] == ["user", "assistant", "user"]  # the newest 2 turns
    assert "compaction" in [e["type"] for e in events(ws, a.session.slug)]
    a.close()
    ws.close()


def test_closing_stops_a_background_compaction_mid_call(tmp_path, server):
    """Quitting must not wait for a slow summary: the call is cancelled and nothing is written."""
    ws = workspace(tmp_path, server.url, model={"timeout_s": 60.0}, memory={"compact_threshold": 4, "keep_recent": 2})
    a = agent(ws, compaction="background")  # as in the app
    _fill(a.session, 3, 2)

    summarizing = threading.Event()

    def respond(body):
        if is_compaction(body):
            summarizing.set()
            return Reply(text="## Task & instructions\nslow\n", delay_s=30)
        return Reply(text="fresh")

    server.dispatch.fn = respond
    assert a.run("new").text == "fresh"
    assert summarizing.wait(30), "the background compaction never called the model"
    started = time.monotonic()
    a.close()
    assert time.monotonic() - started < 10  # not the 30 s the summary would take
    assert not records(a.session, "compact")
    ws.close()


def test_a_failed_automatic_compaction_is_logged_not_announced(tmp_path, server):
    from workstation.commands import slash
    from workstation.agent.loop import AgentEvents

    ws = workspace(tmp_path, server.url, memory={"compact_threshold": 4, "keep_recent": 2})
    a = agent(ws, compaction="sync")
    _fill(a.session, 3, 2)  # and "new": 4 turns

    def respond(body):
        if is_compaction(body):
            return Reply(status=400, error_message="summaries are off today")
        return Reply(text="fresh")

    server.dispatch.fn = respond
    notes = []
    assert a.run("new", AgentEvents(on_notice=notes.append)).text == "fresh"
    assert notes == []  # not the user's business on every turn...
    (failed,) = [e for e in events(ws, a.session.slug) if e["type"] == "compaction"]
    assert failed["ok"] is False and "summaries are off today" in failed["data"]["reason"]  # ...but logged
    assert not records(a.session, "compact")
    asked = slash.run(a, "/compact")  # asked for: the failure is reported
    assert not asked.ok and asked.text.startswith(f"compaction of {a.session.slug} skipped:")
    assert "summaries are off today" in asked.text
    a.close()
    ws.close()


def test_the_ui_hears_of_every_record_and_of_what_the_agent_is_doing(tmp_path, server):
    from workstation.agent.loop import AgentEvents

    ws = workspace(tmp_path, server.url)
    a = agent(ws)
    server.push(Reply(tool_calls=[("file_meta", {"path": "pkg/core.py"})]), Reply(text="mapped"))
    written, doing = [], []
    result = a.run("map pkg/core.py", AgentEvents(on_record=written.append,
                                                  on_activity=lambda kind, what: doing.append((kind, what))))
    assert result.error is None
    assert [r["id"] for r in written] == [r["id"] for r in records(a.session)]  # every record, in order, with ids
    assert [r["type"] for r in written] == ["epoch", "user", "assistant", "tool", "assistant"]
    assert doing == [("model", MODEL), ("tool", "file_meta: pkg/core.py"), ("model", MODEL), ("idle", "")]
    a.close()
    ws.close()


def test_stopping_the_turn_kills_a_running_command_at_once(tmp_path, server):
    from workstation.agent.loop import AgentEvents

    ws = workspace(tmp_path, server.url)
    a = agent(ws, approve=lambda req: True)
    server.push(Reply(tool_calls=[("run_command", {"cmd": "sleep 30"})]))
    cancel = threading.Event()
    stopped_at: list[float] = []

    def on_activity(kind: str, what: str) -> None:
        if kind == "tool":  # the command is starting: stop the turn a moment later
            threading.Timer(0.3, lambda: (stopped_at.append(time.monotonic()), cancel.set())).start()

    result = a.run("sleep", AgentEvents(on_activity=on_activity), cancel=cancel)
    took = time.monotonic() - stopped_at[0]
    assert took < 0.5, f"the command outlived the stop by {took:.2f}s"
    tool = records(a.session, "tool")[0]
    assert tool["ok"] is False and tool["content"].startswith("error: stopped by the user")
    assert result.error == "cancelled"
    a.close()
    ws.close()


def test_model_and_tool_events_name_the_records_they_became(tmp_path, server):
    ws = workspace(tmp_path, server.url)
    a = agent(ws)
    server.push(Reply(tool_calls=[("file_meta", {"path": "pkg/core.py"})]), Reply(text="mapped"))
    assert a.run("map pkg/core.py").error is None
    by_type = {}
    for event in events(ws, a.session.slug):
        by_type.setdefault(event["type"], []).append(event)
    assistant_ids = [r["id"] for r in records(a.session, "assistant")]
    tool = records(a.session, "tool")[0]
    assert [e["data"]["turn_id"] for e in by_type["model_call"]] == assistant_ids
    (call_event,) = by_type["tool_call"]
    assert call_event["data"]["turn_id"] == tool["id"] and call_event["data"]["call_id"] == tool["tool_call_id"]
    a.close()
    ws.close()


def test_prompt_cache_tokens_are_recorded_on_the_reply_and_its_event(tmp_path, server):
    ws = workspace(tmp_path, server.url)
    a = agent(ws)
    server.push(Reply(text="cached", usage=(1200, 30), cached_tokens=1000))
    assert a.run("hello").error is None
    (reply,) = records(a.session, "assistant")
    assert (reply["tokens_in"], reply["tokens_out"], reply["cache_read_tokens"]) == (1200, 30, 1000)
    (call,) = [e for e in events(ws, a.session.slug) if e["type"] == "model_call"]
    assert call["tokens_in"] == 1200 and call["data"]["cache_read_tokens"] == 1000
    a.close()
    ws.close()


def test_a_compaction_that_lands_between_the_sync_and_the_request_gets_an_epoch(tmp_path, server):
    """The compactor runs on a thread of its own: its record may land just after the loop synced the
    context for a request. The loop syncs again (an epoch for the new summary) instead of failing the turn
    with "no epoch in force". The compaction is run, for real, at exactly that moment."""
    from workstation.agent.loop import Agent
    from workstation.sessions import Session

    ws = workspace(tmp_path, server.url, memory={"compact_threshold": 4, "keep_recent": 2})

    class Raced(Agent):
        raced = False

        def _sync_context(self, window: int) -> bool:
            began = super()._sync_context(window)
            cfg = self.compaction_config()
            if not self.raced and self._auto.due(self.session, cfg, window):  # the step's sync (turn 4 is in)
                self.raced = True  # the other thread's compaction, landing right after it
                assert self._auto.run(self.session, cfg, window).ok
            return began

    a = Raced(ws, Session.create(ws.paths, "s"), compaction="off")
    _fill(a.session, 3, 2)

    def respond(body):
        if is_compaction(body):
            return Reply(text="## Task & instructions\nold\n## Decisions & conventions\n(none)\n## Files touched\n"
                              "(none)\n## Open to-dos\n(none)\n## Errors seen\n(none)")
        return Reply(text="fresh")

    server.dispatch.fn = respond
    result = a.run("new")
    assert a.raced and result.error is None and result.text == "fresh"
    sent = requests_since(server)[-1]["messages"]
    assert sent[1]["content"].startswith("Summary of the earlier conversation")
    a.close()
    ws.close()
