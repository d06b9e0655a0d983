"""Memory pane: tiers as tabs, one filter, the edit modal and its request."""

from __future__ import annotations

import pytest
from textual.widgets import Input

import tui_sample
from tui_support import settle, started
from workstation.tui.app import WorkstationApp
from workstation.tui.panes.edit_value import EditValueScreen
from workstation.tui.viewdata import MemoryEntry, TimelineEvent


def table_rows(pane) -> list[list[str]]:
    table = pane.table
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


async def loaded(pilot):
    app = pilot.app
    tui_sample.load(app)
    await pilot.pause()
    return app.memory


async def test_tabs_show_each_tier_and_the_filter_narrows_them():
    app = WorkstationApp()
    async with started(app) as pilot:
        pane = await loaded(pilot)
        assert [row[0] for row in table_rows(pane)] == ["plan", "step"]
        pane.show_tier("ltm")
        await pilot.pause()
        assert pane.active_tier == "ltm"
        assert [row[1] for row in table_rows(pane)] == ["naming", "timeout_default", "test_cmd"]
        pane.query_one("#memory-filter", Input).focus()
        await pilot.press(*"PYTEST")  # case-insensitive, matches values too
        await pilot.pause()
        assert [row[1] for row in table_rows(pane)] == ["test_cmd"]
        status = pane.query_one("#memory-status").render().plain
        assert "STM 0/2" in status and "LTM 1/3" in status and "Episodic 0/7" in status
        pane.show_tier("episodic")
        await pilot.pause()
        assert table_rows(pane) == []
        pane.set_filter("tool")
        await pilot.pause()
        assert [row[2] for row in table_rows(pane)] == ["file_meta", "read_lines", "replace_lines"]
        pane.set_filter("")
        await pilot.pause()
        assert len(table_rows(pane)) == 7


async def test_enter_on_a_row_opens_the_editor_and_posts_the_edit(backend):
    app = WorkstationApp(backend)
    async with started(app) as pilot:
        pane = await loaded(pilot)
        pane.show_tier("ltm")
        await pilot.pause()
        pane.table.focus()
        await pilot.press("down", "enter")  # decisions/timeout_default
        await pilot.pause()
        assert isinstance(app.screen, EditValueScreen)
        value = app.screen.query_one("#edit-value", Input)
        assert value.value == "null"
        value.value = "30 seconds"  # not JSON: refused, dialog stays
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, EditValueScreen)
        assert "not JSON" in app.screen.query_one("#edit-error").render().plain
        value.value = '{"seconds": 30}'
        await pilot.press("enter")
        await settle(pilot)
        assert not isinstance(app.screen, EditValueScreen)
        (edit,) = backend.named("on_memory_pane_edit_requested")
        assert (edit.tier, edit.namespace, edit.key, edit.value) == (
            "ltm", "decisions", "timeout_default", {"seconds": 30})
        # the pane shows what the backend confirms, not what was typed
        assert table_rows(pane)[1][2] == "null"
        pane.upsert("ltm", MemoryEntry("timeout_default", {"seconds": 30}, namespace="decisions"))
        await pilot.pause()
        assert table_rows(pane)[1][2] == '{"seconds": 30}'


async def test_escape_cancels_and_new_entry_asks_for_a_key(backend):
    app = WorkstationApp(backend)
    async with started(app) as pilot:
        pane = await loaded(pilot)
        pane.table.focus()
        await pilot.press("enter")
        await pilot.pause()
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, EditValueScreen) and backend.calls == []
        await pilot.press("n")
        await pilot.pause()
        await pilot.press(*"goal", "enter", *'"ship it"', "enter")
        await settle(pilot)
        (edit,) = backend.named("on_memory_pane_edit_requested")
        assert (edit.tier, edit.key, edit.value) == ("stm", "goal", "ship it")


async def test_live_updates_and_bad_input():
    app = WorkstationApp()
    async with started(app) as pilot:
        pane = await loaded(pilot)
        pane.upsert("stm", {"key": "step", "value": 4})
        pane.upsert("stm", MemoryEntry("extra", True))
        await pilot.pause()
        assert table_rows(pane) == [["plan", '["add timeout", "thread it", "test"]'],
                                    ["step", "4"], ["extra", "true"]]
        pane.delete_entry("stm", "plan")
        await pilot.pause()
        assert [row[0] for row in table_rows(pane)] == ["step", "extra"]
        pane.append_events([TimelineEvent(tui_sample.T0 + 20, "error", "model timeout")])
        pane.show_tier("episodic")
        await pilot.pause()
        assert table_rows(pane)[-1][1:3] == ["error", "model timeout"]
        with pytest.raises(ValueError, match="append-only"):
            pane.set_entries("episodic", [])
        with pytest.raises(ValueError, match="unknown memory tier 'mtm'"):
            pane.show_tier("mtm")
        with pytest.raises(ValueError, match="unknown field 'colour'"):
            pane.upsert("stm", {"key": "x", "colour": "red"})


async def test_an_edited_ltm_value_shows_whole_with_its_time(tmp_path):
    """Through the live backend: the cell widens to the new value and the time is the stored one."""
    import asyncio

    from test_tui_daily import write_config
    from test_tui_live import make_repo, wait_for
    from workstation.tui.backend import LiveBackend

    make_repo(tmp_path)
    write_config(tmp_path)
    backend = LiveBackend(str(tmp_path), sidecar=False)
    app = WorkstationApp(backend)
    async with started(app) as pilot:
        await wait_for(pilot, lambda: backend.workspace is not None)
        backend.agent.memory.umem("ltm", "style", "short", namespace="conventions")
        backend.agent.memory.fence("ltm")
        await asyncio.to_thread(backend.refresh_memory)  # as the backend does, from a thread
        pane = app.memory
        pane.show_tier("ltm")
        pane.table.focus()
        await wait_for(pilot, lambda: [row[1] for row in table_rows(pane)] == ["style"])
        await pilot.press("enter")
        await pilot.pause()
        editor = app.screen
        assert isinstance(editor, EditValueScreen)
        long_value = "use snake_case for every public parameter name"
        editor.query_one("#edit-value", Input).value = f'"{long_value}"'
        await pilot.press("enter")
        await wait_for(pilot, lambda: long_value in table_rows(pane)[0][2])
        namespace, key, value, updated = table_rows(pane)[0]
        assert (namespace, key, value) == ("conventions", "style", f'"{long_value}"')
        assert updated.startswith("20") and len(updated) == 16  # 'YYYY-MM-DD HH:MM', not blank
        column = pane.table.columns[list(pane.table.columns)[2]]
        assert column.content_width >= len(long_value) + 2  # the column widened: the value is not cut


async def test_the_frontier_tab_appears_once_given_and_shows_where_the_work_stands():
    from workstation.tui.panes.memory import TierBar

    text = {"turn": 3, "messages": [{"turn": 1, "text": "stream the loader", "cut_tokens": 0},
                                    {"turn": 3, "text": "go on", "cut_tokens": 0}],
            "files": [{"path": "pkg/loader.py", "state": "created", "added": 12, "removed": 0, "turns": [1]}]}
    app = WorkstationApp()
    async with started(app) as pilot:
        pane = await loaded(pilot)
        bar = pane.query_one(TierBar)
        assert "Frontier" not in bar.render().plain  # no frontier given: no tab (and no change of layout)
        pane.set_frontier(text)
        await pilot.pause()
        assert "Frontier" in bar.render().plain
        pane.action_cycle_tier(-1)  # stm -> the last tab: the frontier
        await pilot.pause()
        assert pane.active_tier == "frontier" and not pane.table.display
        shown = pane.query_one("#memory-frontier-text").render().plain
        assert "turn 1: stream the loader" in shown and "created pkg/loader.py" in shown
        pane.set_filter("loader")  # headings stay, lines narrow
        await pilot.pause()
        shown = pane.query_one("#memory-frontier-text").render().plain
        assert "turn 1: stream the loader" in shown and "turn 3: go on" not in shown and "Goal · turn 1" in shown
        pane.set_filter("")
        pane.show_tier("stm")
        await pilot.pause()
        assert pane.table.display and [row[0] for row in table_rows(pane)] == ["plan", "step"]


def screen_lines(app) -> list[str]:
    """The screen as a user sees it, one string a row."""
    update = app.screen._compositor.render_full_update(simplify=True)
    return ["".join(strip.text for strip in row) for row in update.strips]


def long_frontier() -> dict:
    """A 60-turn session's frontier: the goal first, a plan with a step in progress, a failure, many files."""
    messages = [{"turn": 1, "text": "Goal: stream the loader so large files never sit in memory", "cut_tokens": 0}]
    messages += [{"turn": n, "text": f"go on with part {n}", "cut_tokens": 0} for n in range(2, 61)]
    return {"turn": 60, "messages": messages, "left_out": [],
            "plan": [{"text": "read the loader", "status": "done"},
                     {"text": "stream the chunks", "status": "in_progress"},
                     {"text": "test a 2 GB file", "status": "pending"}],
            "step_in_progress": "stream the chunks",
            "decisions": {"d1": "- d1: chunks of 64 KiB"}, "pins": [], "instructions": [],
            "files": [{"path": f"pkg/part{n}.py", "state": "changed", "added": n, "removed": 1, "turns": [n]}
                      for n in range(2, 32)], "more_files": 0,
            "failure": {"turn": 58, "command": "pytest -q tests/test_loader.py",
                        "output": "F\nE   MemoryError\n1 failed", "record_id": "r1"},
            "questions": []}


async def test_the_frontier_tab_at_80x24_shows_the_goal_and_the_step_first_and_scrolls_to_the_rest():
    """At 80x24 the memory pane is 20 cells wide: its tabs wrap (the Frontier tab was cut off), the goal and
    the step in progress are the first lines in view, and the rest scrolls."""
    from workstation.tui.panes.memory import FRONTIER, TierBar

    app = WorkstationApp()
    async with started(app, size=(80, 24)) as pilot:
        pane = await loaded(pilot)
        pane.set_frontier(long_frontier())
        await pilot.pause()
        bar = pane.query_one(TierBar)
        assert bar.region.height == 2 and "[ ] switch" not in bar.render().plain  # wrapped, the hint left out
        assert any("Frontier" in line for line in screen_lines(app))
        app.action_focus_pane("memory")
        await pilot.press("right_square_bracket", "right_square_bracket", "right_square_bracket")
        await pilot.pause()
        assert pane.active_tier == FRONTIER
        body = pane.query_one("#memory-frontier")
        seen = "\n".join(line[body.region.x:body.region.right]
                         for line in screen_lines(app)[body.region.y:body.region.bottom])
        squeezed = " ".join(seen.split())
        assert "Goal · turn 1" in squeezed and "stream the loader" in squeezed, seen
        assert "▸ stream the chunks" in squeezed, seen  # the step in progress: in view without a scroll
        status = pane.query_one("#memory-status").render().plain
        assert status == "f11 full · ↑↓ scroll · turn 60: 60 messages, 30 files"
        assert app.screen.focused is body and body.max_scroll_y > 0
        await pilot.press("end")  # the rest: the files, the plan, every message, the failure's output
        await pilot.pause()
        seen = " ".join(" ".join(line[body.region.x:body.region.right]
                                 for line in screen_lines(app)[body.region.y:body.region.bottom]).split())
        assert body.scroll_y == body.max_scroll_y and "1 failed" in seen, seen
