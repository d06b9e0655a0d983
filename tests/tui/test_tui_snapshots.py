"""Snapshots of the main layout in each shipped theme, over fixed sample data, at three terminal sizes."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from snapshot_app import SnapshotApp
from tui_support import SIZE, settle

THEMES = ["workstation-dark", "workstation-light", "workstation-high-contrast"]
SIZES = [(80, 24), (100, 30), SIZE]  # the smallest usable terminal, a common small one, the tests' default


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("theme", THEMES)
def test_main_layout(snap_compare, theme, size):
    assert snap_compare(SnapshotApp(theme), terminal_size=size, run_before=settle)


def test_memory_editor_over_the_layout(snap_compare):
    async def open_editor(pilot):
        await settle(pilot)
        pilot.app.memory.show_tier("ltm")
        pilot.app.memory.table.focus()
        await pilot.press("enter")
        await settle(pilot)
        for field in pilot.app.screen.query(Input):  # the editor came after SnapshotApp stopped the blinking
            field.cursor_blink = False
        await pilot.pause()

    assert snap_compare(SnapshotApp(), terminal_size=SIZE, run_before=open_editor)


def test_the_map_maximized_at_100x30(snap_compare):
    async def maximize(pilot):
        await settle(pilot)
        await pilot.press("f2", "f11")
        await settle(pilot)

    assert snap_compare(SnapshotApp(), terminal_size=(100, 30), run_before=maximize)


PLAN = [{"text": "read the client", "status": "done"}, {"text": "write the retry test", "status": "in_progress"},
        {"text": "run the tests", "status": "pending"}, {"text": "update the changelog", "status": "pending"}]


@pytest.mark.parametrize("size", [(80, 24), (100, 30)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("theme", ["workstation-dark", "workstation-high-contrast"])
def test_the_agents_plan_and_the_branch_in_the_chat(snap_compare, theme, size):
    async def plan_and_branch(pilot):
        await settle(pilot)
        pilot.app.chat.set_git("main ±3")
        pilot.app.chat.set_plan(PLAN)
        await settle(pilot)

    assert snap_compare(SnapshotApp(theme), terminal_size=size, run_before=plan_and_branch)


def test_the_frontier_tab_at_80x24(snap_compare):
    """The memory pane's tabs wrap at 80x24 (the Frontier tab was cut off); the goal and the step in progress
    are the first lines of the tab, the status line says what it holds and how to see it all."""
    from test_tui_memory import long_frontier

    async def frontier(pilot):
        await settle(pilot)
        pilot.app.memory.set_frontier(long_frontier())
        pilot.app.memory.show_tier("frontier")
        await settle(pilot)

    assert snap_compare(SnapshotApp(), terminal_size=(80, 24), run_before=frontier)
