"""The status line's bill: the session's cost as billed and the last request's cache hit, with why it dropped."""

from __future__ import annotations

import asyncio

from support.fakellm import Reply, ScriptedLLM
from test_tui_live import make_repo, wait_for
from tui_support import started
from workstation import config as config_mod
from workstation.sessions import Session
from workstation.tui.app import WorkstationApp
from workstation.tui.backend import LiveBackend

KEY_ENV, KEY = "WS_TEST_KEY", "sk-wstest-FAKE0123456789abcdefDONOTLEAK"


def priced_config(root, url) -> None:
    """A model litellm's price map knows (gpt-4o: input $2.50, cached input $1.25, output $10 per million), in
    the user's config (this test's home: conftest), where endpoints and keys come from."""
    from workstation.paths import user_dir

    user_dir().mkdir(parents=True, exist_ok=True)
    (user_dir() / "config.toml").write_text(
        f'[model]\nname = "openai/gpt-4o"\napi_base = "{url}"\napi_key_env = "{KEY_ENV}"\ntimeout_s = 10\n'
        "max_retries = 0\n")


async def test_a_turn_shows_its_cost_as_billed_and_the_cache_hit_of_its_last_request(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    make_repo(tmp_path)
    call = ("read_lines", {"path": "pkg/core.py", "start": 1, "end": 3})
    with ScriptedLLM([Reply(tool_calls=[call], usage=(2000, 10), cached_tokens=0),
                      Reply(text="done", usage=(2100, 10), cached_tokens=1920)]) as llm:
        priced_config(tmp_path, llm.url)
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app) as pilot:
            status = lambda: app.chat.status_bar.left.plain  # noqa: E731
            await wait_for(pilot, lambda: backend._ready.is_set() and "session " in status())
            assert "cache" not in status() and "$" not in status()  # nothing billed yet
            app.chat.prompt.value = "look at core"
            await pilot.press("enter")
            # step 1: 2000 x 2.5e-6 + 10 x 1e-5 = $0.0051; step 2: 180 x 2.5e-6 + 1920 x 1.25e-6 + 10 x 1e-5
            # = $0.00295; 1920 of 2100 prompt tokens read from the cache: 91%
            await wait_for(pilot, lambda: app.chat.bill == "cache 91% · $0.008")
            await wait_for(pilot, lambda: not app.chat.busy)
            assert status().startswith("✎ edits · cache 91% · $0.008 · session ")  # first: a narrow pane cuts the end
        assert len(llm.requests) == 2
    await asyncio.sleep(0)


async def test_a_resumed_session_shows_why_its_last_request_missed_the_cache(tmp_path):
    make_repo(tmp_path)
    _, paths = config_mod.load(tmp_path)
    session = Session.create(paths, "resumed")
    session.user("hello")
    session.assistant("hi", model="openai/test-model", tokens_in=1000, tokens_out=10, cache_read_tokens=970,
                      cache_creation_tokens=30, cost_usd=0.5)
    session.user("again")
    session.assistant("hi again", model="openai/test-model", tokens_in=1000, tokens_out=10, cache_read_tokens=120,
                      cost_usd=0.25, cache_break="compaction")
    backend = LiveBackend(str(tmp_path), session=session.slug, sidecar=False)
    app = WorkstationApp(backend)
    async with started(app) as pilot:
        # a model the price map does not know: the cost litellm recorded
        await wait_for(pilot, lambda: app.chat.bill == "cache 12% (compaction) · $0.750")
        assert app.chat.status_bar.left.plain.startswith(f"✎ edits · cache 12% (compaction) · $0.750 · session {session.slug} · ")
