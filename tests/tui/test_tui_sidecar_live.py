"""A compaction the sidecar (another process, or its code on another thread) appends to the session the app
has open shows in the live chat as it lands, once, where a resumed chat shows it (issue 22). In the real app
over the live backend, its real sidecar process and the scripted model (real litellm)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading

from support.agent_support import is_compaction
from support.fakellm import Reply, ScriptedLLM
from support.sessions_support import SUMMARY
from test_tui_history import send
from test_tui_live import make_repo, wait_for
from test_tui_parity import SIZE, chat_lines, visible
from tui_support import started
from workstation.paths import Paths, user_dir
from workstation.sessions.log import Session
from workstation.tui.app import WorkstationApp
from workstation.tui.backend import LiveBackend

THREE = "compact_threshold = 3\nkeep_recent = 1"


async def test_a_sidecar_compaction_shows_live_as_it_shows_resumed(tmp_path):
    make_repo(tmp_path)
    paths = Paths.for_root(str(tmp_path))
    long = Session.create(paths, "long")
    for n in range(12):  # over compact_threshold = 8: the sidecar compacts it as soon as it starts
        long.user(f"old question {n}: " + "lorem ipsum " * 20)
        long.assistant(f"old answer {n}: " + "dolor sit " * 20)
    release = threading.Event()  # the sidecar's summary comes once the app shows the session without it
    midturn: list = []  # a second sidecar's pass, run while the second turn's request waits

    def respond(body: dict) -> Reply:
        if is_compaction(body):
            release.wait(30)
            return Reply(text=SUMMARY.format(task="Old questions.", files="(none)"))
        last = str(body["messages"][-1].get("content") or "")
        if "first" in last:
            return Reply(text="First.")
        if "second" in last and not midturn:
            # `sidecar --once` in a process of its own, due again after 3 turns (the app read its config at start)
            config = user_dir() / "config.toml"
            before = config.read_text()
            config.write_text(before.replace("compact_threshold = 8\nkeep_recent = 2", THREE))
            midturn.append(subprocess.run([sys.executable, "-m", "workstation", "-C", str(tmp_path), "sidecar",
                                           "--once"], capture_output=True, text=True, timeout=120))
            config.write_text(before)
            return Reply(text="Second.")  # the compaction lands between the user's message and this reply
        return Reply(text="?")

    with ScriptedLLM(respond) as llm:
        user_dir().mkdir(parents=True, exist_ok=True)
        (user_dir() / "config.toml").write_text(
            f'[model]\nname = "openai/test-model"\napi_base = "{llm.url}"\ntimeout_s = 20\nmax_retries = 1\n'
            '[memory]\ncompact_threshold = 8\nkeep_recent = 2\n')
        (tmp_path / ".workstation" / "config.toml").write_text("")
        backend = LiveBackend(str(tmp_path), session="long", sidecar=True)
        app = WorkstationApp(backend)
        async with started(app, size=SIZE) as pilot:
            await wait_for(pilot, lambda: backend._ready.is_set() and len(app.chat.transcript.turns) >= 24)
            turns = app.chat.transcript.turns
            assert not any(t.role == "compaction" for t in app.chat.transcript.turns)
            release.set()  # the sidecar process's compaction lands now, with no turn running
            await wait_for(pilot, lambda: any(t.role == "compaction" for t in app.chat.transcript.turns),
                           timeout=60)
            turns = app.chat.transcript.turns
            assert turns[-1].role == "compaction" and turns[-1].text.startswith("Compaction: turns 1–")
            await send(pilot, app, "first", lambda: any(t.text == "First." for t in app.chat.transcript.turns))
            await send(pilot, app, "second", lambda: any(t.text == "Second." for t in app.chat.transcript.turns))
            assert midturn and "long: compacted turns" in midturn[0].stdout, midturn
            # shown after the turn (no look while it writes), in its place: before the reply it preceded
            await wait_for(pilot, lambda: sum(t.role == "compaction" for t in app.chat.transcript.turns) == 2)
            await pilot.pause(1.2)  # more looks find nothing more to show
            live, shown = chat_lines(app), visible(app)
            slug = backend.agent.session.slug

        backend = LiveBackend(str(tmp_path), session=slug, sidecar=False)
        app = WorkstationApp(backend)
        async with started(app, size=SIZE) as pilot:
            await wait_for(pilot, lambda: backend._ready.is_set()
                           and any(t.text == "Second." for t in app.chat.transcript.turns))
            await pilot.pause(0.3)
            resumed, resumed_shown = chat_lines(app), visible(app)
    roles = [role for role, _ in live]
    assert roles.count("compaction") == 2, live
    assert live[-3:] == [("user", "second"), live[-2], ("assistant", "Second.")] and live[-2][0] == "compaction"
    assert resumed == live
    assert [line[9:] for line in resumed_shown] == [line[9:] for line in shown]  # the clock aside
    await asyncio.sleep(0)
