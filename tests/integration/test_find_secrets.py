"""A secret typed into a find query (the user's, or the model's from a file it read) reaches neither the model
that ranks tier two nor anything under the state folder (issue 19, item 11). Real litellm, scripted server."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

from support.agent_support import agent, module_server, requests_since, workspace
from support.fakellm import Reply
from test_secrets_canary import _database_text
from workstation.commands import slash

server_module, server = module_server()

GITHUB = "ghp_" + secrets.token_hex(18)  # a well-known key format
CANARY = "canary-" + secrets.token_hex(12)  # the value of a secret-named variable


def test_a_secret_in_a_find_query_reaches_no_model_and_no_database(tmp_path, server, monkeypatch):
    monkeypatch.setenv("WS_FIND_API_KEY", CANARY)
    ws = workspace(tmp_path, server.url)
    a = agent(ws, slug="finder")
    attempts, through = 0, []
    server.dispatch.fn = lambda body: Reply(text="NONE")
    for query in (f"where is {GITHUB} used", f"who reads {CANARY}"):
        before = len(requests_since(server))
        for how, do in (("find (the map)", lambda: ws.kmap.find(query)),
                        ("/find", lambda: slash.run(a, f"/find {query}")),
                        ("the model's find", lambda: _model_find(server, a, query))):
            attempts += 1
            server.dispatch.fn = lambda body: Reply(text="NONE")
            do()
            sent = json.dumps(requests_since(server)[before:])
            if GITHUB in sent or CANARY in sent:
                through.append(f"{how} sent it to the model")
            before = len(requests_since(server))
    a.close()
    ws.close()
    for db in (ws.paths.memory_db, ws.paths.index_db):
        attempts += 1
        text = _database_text(db)
        if GITHUB in text or CANARY in text:
            through.append(f"{db.name} holds it")
    print(f"find secrets: {attempts} attempts, {len(through)} got through {through}")
    assert through == []


def _model_find(server, a, query):
    server.push(Reply(tool_calls=[("find", {"query": query})]), Reply(text="NONE"), Reply(text="done"))
    a.run("find it")


def _find(root, home, query: str) -> tuple[dict, str]:
    """`workstation find QUERY --json` as a fresh process: (its answer, the modules it imported)."""
    env = {**os.environ, "WORKSTATION_HOME": str(home)}
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "workstation", "-C", str(root), "find", query,
                           "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout), done.stderr


def test_find_masks_a_query_without_the_detectors_unless_it_may_hold_a_key(tmp_path):
    """Masking a query loads detect-secrets (~0.5 s) only for a query the prefilter says may hold a key: the
    prefilter is kept in the user cache after the first process builds it. A key still comes back masked."""
    root, home = tmp_path / "ws", tmp_path / "home"
    (root / "pkg").mkdir(parents=True)
    home.mkdir()
    (root / "pkg" / "config.py").write_text("def parse_config(path):\n    return path\n")
    first, imported = _find(root, home, "parse_config")  # builds the prefilter: imports the detectors
    assert "detect_secrets.plugins" in imported
    again, imported = _find(root, home, "parse_config")
    assert again["hits"] and again["hits"][0]["name"] == "parse_config" and again == first
    assert "detect_secrets" not in imported
    keyed, imported = _find(root, home, f"where is {GITHUB} used")
    assert GITHUB not in json.dumps(keyed) and "***" in keyed["query"]
    assert "detect_secrets.plugins" in imported  # the candidate went to the detectors
