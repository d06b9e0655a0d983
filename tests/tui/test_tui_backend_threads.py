"""The backend's threads touch Textual only through `app.call_from_thread` (backend.ui): over a long scripted
session (automatic compactions, /frontier, /recall, /uncompact, /rewind with and without a number, more turns)
no message or widget is made on a thread not the app's, and no backend worker ends in an error, which the app
shows as a toast. A Textual object made on a worker thread is the bug class behind a toast once seen after a
rewind, `LookupError: <ContextVar name='active_message_pump'>`: it reads the app's context where there is none."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from textual.message import Message
from textual.message_pump import MessagePump

from support.fakellm import ScriptedLLM
from test_tui_live import make_repo, wait_for
from tui_support import started
from workstation.paths import user_dir
from workstation.tui.app import WorkstationApp
from workstation.tui.backend import LiveBackend
from workstation.tui.screens.rewind import RewindScreen

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from fakellm_serve import answer  # noqa: E402  the scripted model the app is tried against by hand

TEXTUAL_OWN = {"textual-input"}  # the driver's thread makes the key events, as Textual means it to


def off_the_app_thread(monkeypatch, app) -> list[str]:
    """Every Message or MessagePump (widget, screen) made on a thread other than the app's, named with it."""
    made: list[str] = []

    def watch(init):
        def wrapped(self, *args, **kwargs):
            thread = threading.current_thread()
            if app._thread_id and threading.get_ident() != app._thread_id and thread.name not in TEXTUAL_OWN:
                made.append(f"{type(self).__qualname__} on {thread.name}")
            return init(self, *args, **kwargs)
        return wrapped

    monkeypatch.setattr(Message, "__post_init__", watch(Message.__post_init__))
    monkeypatch.setattr(MessagePump, "__init__", watch(MessagePump.__init__))
    return made


async def test_no_textual_object_is_made_off_the_app_thread_over_a_long_session(tmp_path, monkeypatch):
    make_repo(tmp_path)
    with ScriptedLLM(answer, cache=True) as llm:
        user_dir().mkdir(parents=True, exist_ok=True)
        (user_dir() / "config.toml").write_text(  # a small window: the session compacts every few turns
            f'[model]\nname = "openai/test-model"\napi_base = "{llm.url}"\ntimeout_s = 10\nmax_retries = 0\n'
            'context_window = 4000\n')
        (tmp_path / ".workstation" / "config.toml").write_text("")
        backend = LiveBackend(str(tmp_path), sidecar=False)
        app = WorkstationApp(backend)
        toasts: list[str] = []
        async with started(app, size=(80, 24)) as pilot:
            await wait_for(pilot, backend._ready.is_set)
            made = off_the_app_thread(monkeypatch, app)
            notify = app.notify

            def toast(message, *args, severity="information", title="", **kwargs):  # a failed worker's toast
                if severity == "error":
                    toasts.append(f"{title}: {message}")
                return notify(message, *args, severity=severity, title=title, **kwargs)

            app.notify = toast

            def idle() -> bool:
                return not backend._busy.locked() and not any(w.group == "backend" and w.is_running
                                                              for w in app.workers)

            async def send(text: str) -> None:
                before = len(app.chat.transcript.turns)
                app.chat.prompt.value = text
                await pilot.press("enter")
                await wait_for(pilot, lambda: toasts or len(app.chat.transcript.turns) > before and idle())

            for n in range(1, 25):
                await send(f"write f{n}.txt: line {n}" if n % 2 else f"tell me about step {n}")
            for line in ("/frontier", "/recall 3", "/uncompact", "/rewind 11", "write after.txt: after", "and then"):
                await send(line)
            app.chat.prompt.value = "/rewind"  # the picker, then escape: nothing taken back
            await pilot.press("enter")
            await wait_for(pilot, lambda: toasts or isinstance(app.screen, RewindScreen))
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, RewindScreen) and idle())
            for line in ("/rewind 5", "write later.txt: later", "one more"):
                await send(line)
            records = backend.agent.session.read().records
    assert sum(r["type"] == "compact" for r in records) >= 2, "the session hardly compacted: not the case meant"
    assert any(r["type"] == "uncompact" for r in records) and sum(r["type"] == "rewind" for r in records) == 2
    assert (tmp_path / "later.txt").read_text() == "later\n"
    assert toasts == []
    assert made == []
