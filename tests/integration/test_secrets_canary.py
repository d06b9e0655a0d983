"""A canary secret is put everywhere a model, a file or a user could carry it; it must come out nowhere:
not in a request the model receives, not in anything under the state folder (session logs, archives,
both databases), not in an export, not on the streaming terminal. Real litellm, scripted server."""

from __future__ import annotations

import gzip
import json
import secrets

import duckdb
import pytest

from support.agent_support import agent, is_update, module_server, requests_since, tool_results, workspace
from support.fakellm import Reply
from workstation.agent.loop import AgentEvents

server_module, server = module_server()

CANARY = "canary-" + secrets.token_hex(12)  # the value of a secret-named variable
GITHUB = "ghp_" + secrets.token_hex(18)  # a well-known key format, in nobody's environment
# four secret-looking variables, and the values of a .env file the user names only in the second turn
VARIABLES = {"WS_CANARY_API_KEY": CANARY, "WS_CANARY_TOKEN": "tok-" + secrets.token_hex(10),
             "WS_CANARY_SECRET": "sec-" + secrets.token_hex(10), "WS_DB_PASSWORD": "pw-" + secrets.token_hex(10)}
DOTENV = {"STRIPE_KEY": "stripe-" + secrets.token_hex(10), "DATABASE_URL": "db-" + secrets.token_hex(10)}
CANARIES = {"github token": GITHUB, **VARIABLES, **DOTENV}


def _leaks(text: str) -> list[str]:
    return [name for name, value in CANARIES.items() if value in text]


def _database_text(path) -> str:
    con = duckdb.connect(str(path), read_only=True)
    try:
        out = []
        for schema, table in con.execute(
                "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = current_database()"
        ).fetchall():
            out.append(json.dumps(con.execute(f'SELECT CAST(COLUMNS(*) AS VARCHAR) FROM "{schema}"."{table}"').fetchall(), default=str))
        return "\n".join(out)
    finally:
        con.close()


def test_a_canary_secret_reaches_no_model_no_file_no_export_no_terminal(tmp_path, server, monkeypatch):
    from workstation.sessions import archive as archiving
    from workstation.sessions.catalog import export
    from workstation.sessions.compaction import compact

    for name, value in VARIABLES.items():
        monkeypatch.setenv(name, value)
    env_values = " ".join(VARIABLES.values())
    ws = workspace(tmp_path, server.url, files={
        "pkg/__init__.py": '"""Settings of the test app."""\n',
        "pkg/settings.py": f'"""Settings."""\nTOKEN = "{GITHUB}"\nBACKUP = "{CANARY}"\n',
        ".env": "".join(f"{k}={v}\n" for k, v in DOTENV.items())})
    a = agent(ws, slug="leak")
    a.pin(f"deploy with {CANARY}")
    leaking = {"value": f"the keys are {env_values} and {GITHUB}"}
    seen: dict[str, str] = {}

    def respond(body):
        last = [m for m in body["messages"] if not is_update(m)][-1]  # an update (a decision logged) is not the user
        if last["role"] == "user" and "settings" in last["content"]:
            return Reply(tool_calls=[("read_lines", {"path": "pkg/settings.py", "start": 1, "end": 3}),
                                     ("read_lines", {"path": ".env", "start": 1, "end": 2}),
                                     ("grep", {"pattern": "stripe-"}),
                                     ("write_file", {"path": ".env", "content": f"LEAK={DOTENV['STRIPE_KEY']}x\n"})])
        if last["role"] == "user":  # the second turn: the user names .env
            return Reply(tool_calls=[("read_lines", {"path": ".env", "start": 1, "end": 2})])
        results = tool_results(body["messages"])
        if results[0][0] == "read_lines" and len(results) == 4:
            seen["refused"] = [content for _name, _args, content in results[1:]]
            return Reply(tool_calls=[("umem", {"tier": "ltm", "key": "creds", "value": leaking}),
                                     ("log_decision", {"decision": f"rotate {CANARY}", "reasoning": GITHUB,
                                                       "files": ["pkg/settings.py"]})])
        if results[0][1].get("path") == ".env":
            seen["dotenv"] = results[0][2]
            return Reply(text=f"It holds {DOTENV['STRIPE_KEY']}.")
        return Reply(text=f"Stored. The values are {env_values} and {GITHUB}, done.", text_chunk_size=3)

    server.dispatch.fn = respond
    streamed: list[str] = []
    result = a.run(f"keep {CANARY} safe in the settings", AgentEvents(on_text=streamed.append))
    assert result.error is None, result.error
    assert "".join(streamed).startswith("Stored. The values are ") and not _leaks("".join(streamed))
    assert not _leaks(result.text)
    refused_read, no_hit, refused_write = seen["refused"]
    assert refused_read == refused_write == ("error: .env is an .env-style file (its values are secrets): the agent "
                                             "opens one only when the user names it in the message")
    assert no_hit == ("no match for 'stripe-'\n[1 file(s) not searched:\n"  # named, never opened
                      "  .env: secrets (an .env-style file: its values are secrets, kept out of the map)]")
    assert (ws.root / ".env").read_text() == "".join(f"{k}={v}\n" for k, v in DOTENV.items())
    assert not (ws.paths.state / "checkpoints").exists() or not any((ws.paths.state / "checkpoints").rglob("*.*"))

    result = a.run("what is in .env?")  # named: the agent reads it; its values are masked on the way out
    assert result.error is None and result.text == "It holds ***."
    assert "STRIPE_KEY=***" in seen["dotenv"] and "DATABASE_URL=***" in seen["dotenv"]

    server.dispatch.fn = lambda body: Reply(
        text=f"## Task & instructions\nThe user keeps {CANARY} and {GITHUB}.\n## Open to-dos\n- rotate {CANARY}\n")
    compacted = compact(a.session, ws.config, force=True, keep=1)
    assert compacted is not None and compacted.status == "compacted", compacted
    exported = export(ws.paths, "leak", "json") + export(ws.paths, "leak", "md")
    a.close()
    archiving.archive(ws.paths, "leak", ws.config)
    ws.close()

    sent = json.dumps(requests_since(server))
    assert CANARY not in sent and GITHUB not in sent  # the model never received them
    assert "settings.py" in sent and "***" in sent  # (it did receive the file, masked)
    assert not _leaks(exported) and "The user keeps ***" in exported
    found = {}
    for path in ws.paths.state.rglob("*"):
        if not path.is_file() or path.suffix == ".wal":
            continue
        if path.suffix == ".duckdb":
            text = _database_text(path)
        elif path.name.endswith(".gz"):
            text = gzip.decompress(path.read_bytes()).decode("utf-8", "replace")
        else:
            text = path.read_bytes().decode("utf-8", "replace")
        if _leaks(text):
            found[str(path.relative_to(ws.paths.state))] = _leaks(text)
    assert found == {}
    memory = _database_text(ws.paths.memory_db)
    assert "creds" in memory and "rotate ***" in memory  # what was stored was stored, masked


@pytest.mark.parametrize("pieces", [1, 2, 3, 5, 7, 40])
def test_the_streaming_terminal_never_shows_a_key_split_over_fragments(pieces):
    from workstation.scrub import StreamMasker

    key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow" + "A" * 120 + "\n-----END RSA PRIVATE KEY-----"
    text = f"use {CANARY} or {GITHUB}, then\n{key}\nand that is all"
    shown: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WS_CANARY_API_KEY", CANARY)
        masker = StreamMasker(shown.append)
        for start in range(0, len(text), pieces):
            masker(text[start:start + pieces])
        masker.flush()
    out = "".join(shown)
    assert not _leaks(out) and "MIIEow" not in out, out
    assert out.startswith("use *** or ***, then\n") and out.endswith("and that is all")
