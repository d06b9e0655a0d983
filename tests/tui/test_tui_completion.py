"""`@file` completion in the prompt: from the indexed paths, following files as they come and go."""

from __future__ import annotations

from test_tui_live import make_repo, wait_for
from support.trust_support import trust
from tui_support import settle, started
from workstation.tui.app import WorkstationApp
from workstation.tui.backend import LiveBackend
from workstation.tui.panes.completion import complete_path, file_token, path_hints

PATHS = sorted(["README.md", "pkg/__init__.py", "pkg/core.py", "pkg/cores/fast.py", "tests/test_core.py"])


def test_what_an_at_completes_to():
    assert file_token("look at @pkg/co") == "pkg/co" and file_token("@") == ""
    assert file_token("mail me@example.com") is None and file_token("@a.py then") is None
    assert complete_path(PATHS, "p") == "pkg/"  # the prefix every match shares
    assert complete_path(PATHS, "pkg/") == "pkg/__init__.py"  # no more shared: the first match, whole
    assert complete_path(PATHS, "pkg/core") == "pkg/core.py"  # core.py and cores/ share nothing more: first
    assert complete_path(PATHS, "pkg/cores") == "pkg/cores/fast.py"
    assert complete_path(PATHS, "nope") is None and complete_path([], "") is None
    assert path_hints(PATHS, "core", 3) == ["pkg/core.py", "pkg/cores/fast.py", "tests/test_core.py"]
    assert path_hints(PATHS, "PKG/c", 6) == ["pkg/core.py", "pkg/cores/fast.py"]


async def test_at_completes_a_path_with_the_right_arrow_and_lists_matches(backend):
    app = WorkstationApp(backend)
    async with started(app) as pilot:
        app.chat.set_files(PATHS)
        await pilot.pause()
        await pilot.press(*"look at @p")
        await settle(pilot)
        await pilot.press("right")
        assert app.chat.prompt.value == "look at @pkg/"
        await pilot.press(*"co")
        await settle(pilot)
        hints = str(app.chat.query_one("#command-hints").render())
        assert hints.splitlines() == ["pkg/core.py", "pkg/cores/fast.py"]
        await pilot.press("right")
        assert app.chat.prompt.value == "look at @pkg/core"  # what both share
        await settle(pilot)
        await pilot.press("right")
        assert app.chat.prompt.value == "look at @pkg/core.py"
        await pilot.press(*" and @test_c")  # no path starts so: the hints find it inside one
        await settle(pilot)
        assert str(app.chat.query_one("#command-hints").render()) == "tests/test_core.py"
        await pilot.press("right")
        assert app.chat.prompt.value == "look at @pkg/core.py and @test_c"
        await pilot.press(*"zz")
        await settle(pilot)
        assert "no indexed file holds test_czz" in str(app.chat.query_one("#command-hints").render())
        await pilot.press("enter")
        await settle(pilot)
        (sent,) = backend.named("on_chat_pane_submitted")
        assert sent.text == "look at @pkg/core.py and @test_czz"  # sent as typed


async def test_the_live_app_completes_indexed_files_and_new_ones(tmp_path):
    make_repo(tmp_path)
    trust(tmp_path)
    backend = LiveBackend(str(tmp_path), sidecar=False)
    app = WorkstationApp(backend)
    async with started(app) as pilot:
        await wait_for(pilot, lambda: backend._ready.is_set() and "pkg/core.py" in app.chat._paths)
        assert app.chat._paths == ["pkg/__init__.py", "pkg/core.py"]
        (tmp_path / "pkg" / "extra.py").write_text("def more():\n    pass\n")
        await wait_for(pilot, lambda: "pkg/extra.py" in app.chat._paths)
        app.chat.prompt.focus()
        await pilot.press(*"@pkg/e")
        await settle(pilot)
        await pilot.press("right")
        assert app.chat.prompt.value == "@pkg/extra.py"
        (tmp_path / "pkg" / "extra.py").unlink()
        await wait_for(pilot, lambda: "pkg/extra.py" not in app.chat._paths)
