"""A tiny entry app for snapshot tests: the main layout over fixed sample data.

    TZ=UTC textual run tests/tui/snapshot_app.py      (or python tests/tui/snapshot_app.py)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import tui_sample  # noqa: E402
from textual.widgets import Input  # noqa: E402
from workstation.tui.app import WorkstationApp  # noqa: E402
from workstation.tui.panes import turn_render  # noqa: E402


class SnapshotApp(WorkstationApp):
    """Sample data in every pane, a symbol previewed, nothing that blinks or moves."""

    def __init__(self, theme: str = "workstation-dark") -> None:
        super().__init__(theme=theme)
        self.animation_level = "none"

    def on_mount(self) -> None:
        # load markdown and the lexer now so the first frame is the final one
        for name in (turn_render.MARKDOWN, "python"):
            turn_render.warm(name)
        for field in self.query(Input):
            field.cursor_blink = False
        tui_sample.load(self)
        pane = self.map
        pane.node_for("src").expand()
        pane.set_symbols("src/client.py", tui_sample.SYMBOLS["src/client.py"])
        pane.node_for("src/client.py").expand()
        purpose = tui_sample.CHILDREN["src"][0].purpose
        pane.show_preview("src/client.py", 20, 23, tui_sample.PREVIEW, purpose=purpose)


app = SnapshotApp()

if __name__ == "__main__":
    app.run()
