"""The long session in the app (issue 28): the context gauge before and between requests, and the frontier in
the memory pane at 80x24, against the scripted model through the real litellm path."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from support.fakellm import ScriptedLLM
from test_tui_live import make_repo, wait_for
from tui_support import started
from workstation.paths import user_dir
from workstation.tui.app import WorkstationApp
from workstation.tui.backend import LiveBackend

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from fakellm_serve import answer  # noqa: E402  the scripted model the app is tried against by hand

GAUGE = re.compile(r"ctx (~?)([\d.]+)(k?)/6k")


def small_window(root: Path, url: str, window: int = 6000) -> None:
    """The scripted model with a small window; /compact keeps the newest 2 turns."""
    user_dir().mkdir(parents=True, exist_ok=True)
    (user_dir() / "config.toml").write_text(
        f'[model]\nname = "openai/test-model"\napi_base = "{url}"\ntimeout_s = 10\nmax_retries = 0\n'
        f'context_window = {window}\n[memory]\nkeep_recent = 2\n')
    (root / ".workstation" / "config.toml").write_text("")


def gauge(app) -> tuple[bool, float] | None:
    """(estimated, tokens) as the status line shows them, None while it shows no window."""
    found = GAUGE.search(app.chat.status_bar.right.plain)
    if found is None:
        return None
    return found[1] == "~", float(found[2]) * (1000 if found[3] else 1)


def idle(app, backend) -> bool:
    return not backend._busy.locked() and not any(w.group == "backend" and w.is_running for w in app.workers)


async def send(pilot, text: str) -> None:
    app = pilot.app
    before = len(app.chat.transcript.turns)
    app.chat.prompt.value = text
    await pilot.press("enter")
    await wait_for(pilot, lambda: len(app.chat.transcript.turns) > before and idle(app, app.backend))


async def test_the_gauge_shows_the_next_request_against_the_window_before_and_between_requests(tmp_path):
    make_repo(tmp_path)
    with ScriptedLLM(answer, cache=True) as llm:
        small_window(tmp_path, llm.url)
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        async with started(app, size=(80, 24)) as pilot:
            # before the first request: the window from the config, the request estimated (tools, system prompt)
            await wait_for(pilot, lambda: gauge(app) is not None)
            estimated, first_guess = gauge(app)
            assert estimated and first_guess > 0, app.chat.status_bar.right.plain
            await send(pilot, "tell me about the core")
            sent = [r["context_tokens"] for r in backend.agent.session.read().records if r["type"] == "assistant"]
            assert first_guess <= sent[0] * 1.05 and first_guess >= sent[0] * 0.5, (first_guess, sent)
            # after it: the next request as the guard measures it, no longer an estimate
            await wait_for(pilot, lambda: gauge(app) is not None and not gauge(app)[0])
            tokens, measured = backend.agent.next_request_size()
            assert measured and abs(gauge(app)[1] - tokens) <= max(50, tokens * 0.05)
            for n in range(3):
                await send(pilot, f"tell me more, part {n}")
            before = gauge(app)[1]
            await send(pilot, "/compact")  # a slash command that changes the next request: the gauge follows
            await wait_for(pilot, lambda: gauge(app)[1] < before)
