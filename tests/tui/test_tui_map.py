"""Knowledge map pane: lazy loading, symbols, preview, live freshness badges."""

from __future__ import annotations

import pytest

import tui_sample
from tui_support import settle, started
from workstation.tui.app import WorkstationApp


def label(pane, path: str) -> str:
    node = pane.node_for(path)
    text = pane.knowledge_tree.render_label(node, node.tree.rich_style, node.tree.rich_style).plain
    return text.removeprefix("▶ ").removeprefix("▼ ")  # the expand toggle


def shown_lines(pane) -> list[str]:
    tree = pane.knowledge_tree
    return [tree.render_line(y).text.rstrip() for y in range(tree.size.height)]


async def test_folders_and_files_load_lazily_on_expand(backend):
    app = WorkstationApp(backend)
    async with started(app) as pilot:
        pane = app.map
        pane.set_root(tui_sample.ROOT, label="demo")
        await pilot.pause()
        assert pane.node_for("src/client.py") is None  # nothing below the top level yet
        pane.knowledge_tree.focus()
        await pilot.press("home", "space")  # the cursor starts on src/
        await settle(pilot)
        (request,) = backend.named("on_map_pane_children_requested")
        assert request.path == "src"
        assert any("loading…" in line for line in shown_lines(pane))
        assert pane.set_children("src", tui_sample.CHILDREN["src"])
        await pilot.pause()
        lines = "\n".join(shown_lines(pane))
        assert "util/" in lines and "client.py 88L ✓" in lines and "loading…" not in lines
        await pilot.press("space", "space")  # collapse and open again: no second request
        await settle(pilot)
        assert len(backend.named("on_map_pane_children_requested")) == 1
        assert not pane.set_children("gone", [])  # a folder no longer shown is not an error

        await pilot.press("down", "down", "space")  # src/util/, then client.py: open it
        await settle(pilot)
        (request,) = backend.named("on_map_pane_symbols_requested")
        assert request.path == "src/client.py"
        pane.set_symbols("src/client.py", tui_sample.SYMBOLS["src/client.py"])
        await pilot.pause()
        client = pane.node_for("src/client.py")
        names = [(c.data.entry.name, [g.data.entry.name for g in c.children]) for c in client.children]
        assert names == [("Client", ["send", "close"]), ("connect", [])]  # methods under their class


async def test_selecting_a_symbol_posts_its_range_and_previews(backend):
    app = WorkstationApp(backend)
    async with started(app) as pilot:
        pane = app.map
        pane.set_root(tui_sample.ROOT)
        pane.set_children("src", tui_sample.CHILDREN["src"])
        pane.set_symbols("src/client.py", tui_sample.SYMBOLS["src/client.py"])
        pane.node_for("src").expand()
        pane.node_for("src/client.py").expand()
        await pilot.pause()
        tree = pane.knowledge_tree
        send = next(n for n in pane.node_for("src/client.py").children[0].children
                    if n.data.entry.name == "send")
        tree.focus()
        tree.select_node(send)
        await settle(pilot)
        (message,) = backend.named("on_map_pane_symbol_selected")
        assert (message.path, message.name, message.start, message.end) == ("src/client.py", "send", 20, 41)
        pane.show_preview("src/client.py", 20, 23, tui_sample.PREVIEW, purpose="HTTP client")
        await pilot.pause()
        preview = pane.query_one("#preview").render().plain.splitlines()
        assert preview[0].startswith("20 ") and "def send(self, request):" in preview[0]
        assert preview[-1].startswith("23 ") and len(preview) == 4
        assert "src/client.py:20–23 · HTTP client" in pane.query_one("#preview-title").render().plain


async def test_freshness_badge_changes_live():
    app = WorkstationApp()
    async with started(app) as pilot:
        pane = app.map
        pane.set_root(tui_sample.ROOT)
        pane.set_children("src", tui_sample.CHILDREN["src"])
        pane.node_for("src").expand()
        await pilot.pause()
        assert label(pane, "src/client.py").startswith("client.py 88L ✓")
        assert label(pane, "src/transport.py").startswith("transport.py 140L !")
        assert pane.update_freshness("src/client.py", "stale")
        await pilot.pause()
        assert pane.freshness("src/client.py") == "stale"
        assert label(pane, "src/client.py").startswith("client.py 88L !")
        assert tui_sample.CHILDREN["src"][0].freshness == "fresh"  # the caller's data is not touched
        assert any("client.py 88L !" in line for line in shown_lines(pane))
        pane.update_freshness("src/client.py", "indexing")
        await pilot.pause()
        assert any("client.py 88L …" in line for line in shown_lines(pane))
        with pytest.raises(ValueError, match="freshness 'rotten'"):
            pane.update_freshness("src/client.py", "rotten")
        # told before its folder is loaded: the badge is right once it appears
        assert not pane.update_freshness("tests/test_client.py", "deleted")
        pane.set_children("tests", tui_sample.CHILDREN["tests"])
        assert pane.freshness("tests/test_client.py") == "deleted"


async def test_index_progress_bar_appears_and_hides():
    app = WorkstationApp()
    async with started(app) as pilot:
        pane = app.map
        assert not pane.has_class("-indexing")
        pane.set_progress(3, 10, "indexing src")
        await pilot.pause()
        bar = pane.query_one("#index-progress")
        assert pane.has_class("-indexing") and bar.progress == 3 and bar.total == 10
        pane.set_progress(10, 10)
        assert bar.progress == 10
        pane.set_progress(None)
        assert not pane.has_class("-indexing")
