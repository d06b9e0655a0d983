"""Helpers of the tests/test_agent_*.py files: a small repository, workspaces whose model is the scripted
server, and one server per test module whose script each test sets."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Callable

import pytest

from support import scenario_common
from support.conftest_llm import FAKE_API_KEY, TEST_KEY_ENV
from support.fakellm import Reply, ScriptedLLM

MODEL = "openai/test-model"

REPO = {
    "pkg/__init__.py": '"""A tiny package for the agent tests."""\n',
    "pkg/core.py": '''\
        """Core helpers: fetching and parsing."""

        from pkg.util import clean


        def fetch(url: str, timeout: float = 5.0) -> str:
            """Fetch a url (pretend)."""
            data = "<" + url + ">"
            return parse(data)


        def parse(text: str) -> str:
            """Strip the markers."""
            return clean(text.strip("<>"))


        def _private() -> int:
            return 1
        ''',
    "pkg/util.py": '''\
        """Utilities."""


        def clean(text: str) -> str:
            return text.strip()


        class Cleaner:
            def run(self, text: str) -> str:
                return clean(text)
        ''',
}


def write_repo(root: Path, files: dict[str, str] | None = None) -> Path:
    for rel, text in (REPO if files is None else files).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def config_overrides(url: str | None, **sections) -> dict:
    model = {"name": MODEL if url else "", "api_base": url or "", "api_key_env": TEST_KEY_ENV if url else "",
             "timeout_s": 5.0, "max_retries": 0, "context_window": 32768}
    model.update(sections.pop("model", {}))
    # no language server unless a test asks for one (tests/integration/test_agent_lsp.py): a server per
    # workspace would start for every test that reads or edits a .py file
    sections.setdefault("lsp", {"enabled": False})
    return {"model": model, **sections}


def workspace(tmp_path: Path, url: str | None, *, files: dict[str, str] | None = None, trusted: bool = False,
              **sections):
    """A workspace over a fresh copy of the small repository; its model is the scripted server at url.
    The configuration never comes from the developer's own files (also for module-scoped fixtures).
    `trusted`: the user trusts the folder (workstation.trust; its language servers start only then)."""
    from workstation.runtime import Workspace

    root = tmp_path / "repo"
    root.mkdir()
    write_repo(root, files)
    if trusted:
        from support.trust_support import trust

        trust(root, tmp_path / "user-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WORKSTATION_HOME", str(tmp_path / "user-home"))
        mp.delenv("WORKSTATION_MODEL", raising=False)
        ws = Workspace(root, overrides=config_overrides(url, **sections))
    ws.kmap.index_all()  # as the app does at start: the first turn finds a map, not an empty index
    return ws


def agent(ws, slug: str = "s", **kwargs):
    from workstation.agent.loop import Agent
    from workstation.sessions import Session

    kwargs.setdefault("compaction", "off")
    return Agent(ws, Session.create(ws.paths, slug), **kwargs)


class Dispatch:
    """ScriptedLLM responder delegating to whatever the current test set (queued replies go first)."""

    def __init__(self) -> None:
        self.fn: Callable[[dict], Reply | None] | None = None

    def __call__(self, body: dict) -> Reply | None:
        return self.fn(body) if self.fn is not None else None


def module_server():
    """A pytest fixture factory: one scripted server per test module, reset around each test."""

    @pytest.fixture(scope="module")
    def server_module():
        from workstation import llm

        llm.warm_import()
        dispatch = Dispatch()
        with ScriptedLLM(dispatch) as srv:
            srv.dispatch = dispatch
            yield srv

    @pytest.fixture
    def server(server_module, monkeypatch):
        monkeypatch.setenv(TEST_KEY_ENV, FAKE_API_KEY)
        server_module.dispatch.fn = None
        first = len(server_module.requests)
        server_module.mark = first
        yield server_module
        left = server_module.remaining
        server_module.dispatch.fn = None
        assert left == 0, f"{left} scripted replies were not consumed"

    return server_module, server


def is_compaction(body: dict) -> bool:
    """A compaction request: a transcript sent cold (the prompt first), or the chat model's conversation
    with the prompt appended (read from the provider's cache)."""
    return scenario_common.is_compaction(body["messages"])


def is_update(message: dict) -> bool:
    """A context update the loop appended (agent.updates): not the user's words."""
    return scenario_common.is_note(message)


def requests_since(server) -> list[dict]:
    return server.requests[server.mark:]


def records(session, kind: str | None = None) -> list[dict]:
    view = session.read()
    assert not view.problems, view.problems
    return [r for r in view.records if kind is None or r["type"] == kind]


def events(ws, slug: str) -> list[dict]:
    from workstation.memory.episodic import Episodic

    episodic = Episodic(ws.db, slug)
    try:
        return list(reversed(episodic.query(session=slug, limit=100_000)))
    finally:
        episodic.close()


def tool_results(messages: list[dict]) -> list[tuple[str, dict, str]]:
    """(tool name, arguments, content) of the tool results after the last assistant message."""
    calls = {}
    for m in messages:
        for c in m.get("tool_calls") or ():
            calls[c["id"]] = (c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
    last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    return [(*calls[m["tool_call_id"]], m["content"]) for m in messages[last + 1:] if m["role"] == "tool"]
