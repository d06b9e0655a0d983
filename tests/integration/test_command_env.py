"""The model is the attacker and the allow-listed `pytest` its tool: a test it planted prints the command's
whole environment, reversed and encoded. No secret of ours may come out (not in the tool result, not in
the next request to the model, not in the session log); a variable the user's config passes reaches the
command, and its encoded copies are masked all the same. Real loop, scripted model, real litellm path."""

from __future__ import annotations

import base64
import json
import secrets
from urllib.parse import quote

from support.agent_support import agent, module_server, records, requests_since, workspace
from support.fakellm import Reply
from workstation.scrub import MASK

server_module, server = module_server()

DUMP_TEST = '''
import base64, os
from urllib.parse import quote

def test_env():
    for name, value in sorted(os.environ.items()):
        raw = value.encode()
        print("ENV", name, value[::-1], base64.b64encode(raw).decode(), base64.b64encode(b"x" + raw).decode(),
              raw.hex(), quote(value, safe=""))
'''
MODEL_KEY = "model-" + secrets.token_hex(12)  # under a name that does not look secret: api_key_env names it
HIDDEN = {"WS_ATTACK_TOKEN": "tok-" + secrets.token_hex(12), "AWS_ACCESS_KEY_ID": "AKIA" + secrets.token_hex(8).upper(),
          "MY_DB_PASSWORD": "pw/" + secrets.token_hex(12), "WS_SESSION_COOKIE": "ck-" + secrets.token_hex(12)}
PASSED = ("WS_PASSED_TOKEN", "passed+" + secrets.token_hex(12))  # agent.command_env_pass names it


def _forms(value: str) -> list[str]:
    raw = value.encode()
    return [value, base64.b64encode(raw).decode().rstrip("="), raw.hex(), quote(value, safe="")]


def test_a_planted_test_prints_no_secret_of_ours(tmp_path, server, monkeypatch):
    for name, value in HIDDEN.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(PASSED[0], PASSED[1])
    monkeypatch.setenv("WS_MODEL_VAR", MODEL_KEY)
    monkeypatch.setenv("LANG", "C.UTF-8")
    ws = workspace(tmp_path, server.url, files={"test_dump.py": DUMP_TEST}, model={"api_key_env": "WS_MODEL_VAR"},
                   agent={"command_env_pass": [PASSED[0]]})
    a = agent(ws, approve=lambda req: True)  # runs where no full sandbox holds too: the env is ours to scrub
    server.push(Reply(tool_calls=[("run_command", {"cmd": "pytest -q -s -p no:cacheprovider test_dump.py"})]),
                Reply(text="printed"))
    result = a.run("run the tests")
    assert result.error is None, result.error
    [tool] = records(a.session, "tool")
    shown = tool["content"]
    assert "ENV PATH " in shown and "ENV LANG " in shown and "1 passed" in shown, shown  # it ran, with PATH and LANG
    assert "ENV WS_MODEL_VAR" not in shown and not any(f"ENV {name} " in shown for name in HIDDEN)
    [passed] = [line.split()[2:] for line in shown.splitlines() if line.startswith(f"ENV {PASSED[0]} ")]
    assert passed[0] == PASSED[1][::-1]  # the user's config passed it: the command got it
    assert [MASK in word for word in passed[1:]] == [True] * 4  # and its encoded copies were masked

    secret_values = [MODEL_KEY, *HIDDEN.values()]
    sent = json.dumps(requests_since(server))
    log = ws.paths.sessions.joinpath("s.jsonl").read_text()
    for where, text in {"tool result": shown, "next request": sent, "session log": log}.items():
        leaked = [v for v in secret_values if v in text or v[::-1] in text]
        leaked += [f for f in _forms(PASSED[1]) if f in text]
        assert leaked == [], (where, leaked)
    a.close()
    ws.close()
