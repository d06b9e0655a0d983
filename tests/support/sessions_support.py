"""Helpers shared by the tests/test_sessions_*.py files: workspaces, filled sessions, a summarizing server."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable

from support.fakellm import Reply
from workstation import config as config_mod
from workstation.sessions import Session

KEY_ENV = "WS_TEST_KEY"
KEY = "sk-wstest-FAKE0123456789abcdefDONOTLEAK"


def make_config(root: Path, url: str | None = None, **memory):
    """Config and paths for a workspace; chat and compact models point at the scripted server."""
    memory.setdefault("compact_model", "openai/compact" if url else "")
    memory.setdefault("compact_fallback_model", "openai/fallback" if url else "")
    overrides = {"memory": memory,
                 "model": {"name": "openai/chat", "api_base": url or "", "api_key_env": KEY_ENV if url else "",
                           "timeout_s": 2.0, "max_retries": 0, "context_window": 1_000_000}}
    return config_mod.load(root, overrides)


def write_config_file(root: Path, url: str, **memory) -> Path:
    """The same settings as a config.toml, for subprocesses (the sidecar, the CLI): the user's own (in
    WORKSTATION_HOME, which subprocesses inherit), since a workspace's config never names an endpoint or
    a key (workstation.trust). Returns the file."""
    memory.setdefault("compact_model", "openai/compact")
    memory.setdefault("compact_fallback_model", "openai/fallback")
    lines = ["[model]", 'name = "openai/chat"', f'api_base = "{url}"', f'api_key_env = "{KEY_ENV}"',
             "timeout_s = 5.0", "max_retries = 0", "context_window = 1000000", "", "[memory]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in memory.items()]
    from workstation.paths import user_dir

    user_dir().mkdir(parents=True, exist_ok=True)
    (user_dir() / "config.toml").write_text("\n".join(lines) + "\n")
    return user_dir() / "config.toml"


def fill(session: Session, turns: int, *, start: int = 0, tools: bool = False, big: int = 0) -> list[dict]:
    """Append `turns` turn records (user, assistant, tool: not turns as sessions.turns counts them; see
    fill_turns). Plain: user/assistant alternating. With tools: user, assistant calling read_file, tool
    result (`big` chars when big), assistant. Record text names its position."""
    records = []
    n = start
    while len(records) < turns:
        n += 1
        left = turns - len(records)
        if tools and left >= 3 and n % 4 == 2:
            call = {"id": f"call_{n}", "name": "read_file", "arguments": {"path": f"src/mod_{n}.py"}}
            records.append(session.assistant(f"turn {n}: let me read src/mod_{n}.py", [call]))
            body = (f"# src/mod_{n}.py turn {n + 1}\n" + "x = 1\n" * (big // 6 + 1))[: max(big, 40)]
            records.append(session.tool(f"call_{n}", "read_file", body))
            n += 1
        elif n % 2:
            records.append(session.user(f"turn {n}: please keep going (user message {n})"))
        else:
            records.append(session.assistant(f"turn {n}: done step {n}"))
    return records


def fill_turns(session: Session, turns: int, *, start: int = 0, steps: int = 1, big: int = 0) -> list[dict]:
    """Append `turns` turns as sessions.turns counts them, numbered from start + 1: a user message, then
    `steps` - 1 steps of an assistant calling read_file and its result (`big` chars when big), then the
    assistant's answer. Every record's text starts with `turn N:`."""
    records = []
    for n in range(start + 1, start + turns + 1):
        records.append(session.user(f"turn {n}: please keep going (user message {n})"))
        for step in range(1, steps):
            call = {"id": f"call_{n}_{step}", "name": "read_file", "arguments": {"path": f"src/mod_{n}_{step}.py"}}
            records.append(session.assistant(f"turn {n}: step {step}, reading src/mod_{n}_{step}.py", [call]))
            body = (f"turn {n}: # src/mod_{n}_{step}.py\n" + "x = 1\n" * (big // 6 + 1))[: max(big, 40)]
            records.append(session.tool(f"call_{n}_{step}", "read_file", body))
        records.append(session.assistant(f"turn {n}: done"))
    return records


SUMMARY = """## Task & instructions
{task}
## Decisions & conventions
- keep the log append-only
## Files touched
{files}
## Open to-dos
- finish the loader
## Errors seen
(none)"""


def turns_in_prompt(body: dict) -> list[int]:
    """The [turn N] numbers a compaction request asked to fold in (not those of a previous summary), each
    once (a turn's records share its number)."""
    text = body["messages"][-1]["content"]
    new_part = text.split("to fold in:", 1)[1]
    return list(dict.fromkeys(int(n) for n in re.findall(r"^\[turn (\d+)\]", new_part, flags=re.M)))


def summarizer(fail: Iterable[str] = (), *, files: str = "- src/loader.py") -> Callable[[dict], Reply]:
    """A responder summarizing whatever it is sent; models named in `fail` answer 500."""
    failing = set(fail)

    def respond(body: dict) -> Reply:
        if body["model"] in failing:
            return Reply(status=500, error_message=f"{body['model']} is down")
        numbers = turns_in_prompt(body)
        task = f"Summarized turns {numbers[0]}-{numbers[-1]} for {body['model']}."
        return Reply(text=SUMMARY.format(task=task, files=files), usage=(100, 50))

    return respond


@contextmanager
def real_episodic(paths):
    """The real episodic recorder on the workspace database (this process becomes its owner)."""
    from workstation.memory.episodic import Episodic
    from workstation.store import Database

    db = Database(paths)
    episodic = Episodic(db, flow="test")
    try:
        yield episodic
    finally:
        episodic.close()
        db.close()


def compaction_events(episodic) -> list[dict]:
    """Recorded compaction events, newest first."""
    return episodic.query(types=["compaction"])


def run_cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    """The real `workstation -C root ARGS` in a child process: exit code and stderr as a user sees them."""
    return subprocess.run([sys.executable, "-m", "workstation", "-C", str(root), *args],
                          capture_output=True, text=True, timeout=120, check=False)


HOLDER = """
import sys
from workstation.paths import Paths
from workstation.sessions.log import Claim
with Claim(Paths.for_root(sys.argv[1]), sys.argv[2]) as claimed:
    print("held" if claimed else "not held", flush=True)
    sys.stdin.read()
"""


@contextmanager
def claim_held_elsewhere(paths, slug: str):
    """Another process holds the session's claim (as a sidecar compacting it would) until the block ends."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(paths.root), slug], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        yield
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
