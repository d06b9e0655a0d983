"""Snapshots of the main layout in each shipped theme, over fixed sample data."""

from __future__ import annotations

import pytest

from snapshot_app import SnapshotApp
from tui_support import SIZE, settle


@pytest.mark.parametrize("theme", ["workstation-dark", "workstation-light", "workstation-high-contrast"])
def test_main_layout(snap_compare, theme):
    assert snap_compare(SnapshotApp(theme), terminal_size=SIZE, run_before=settle)


def test_memory_editor_over_the_layout(snap_compare):
    async def open_editor(pilot):
        await settle(pilot)
        pilot.app.memory.show_tier("ltm")
        pilot.app.memory.table.focus()
        await pilot.press("enter")
        await settle(pilot)

    assert snap_compare(SnapshotApp(), terminal_size=SIZE, run_before=open_editor)
