"""A one-line bar: text on the left, text on the right. One widget, not a row of three.

When both do not fit, the left is cut (with …) so the right shows whole, as long
as the left keeps MIN_LEFT cells; otherwise the right goes.
"""

from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

MIN_LEFT = 12


class StatusBar(Widget):
    DEFAULT_CSS = """
    StatusBar {
        height: 1;
        padding: 0 1;
        background: $panel;
        color: $text-muted;
    }
    """
    left: reactive[Content] = reactive(Content, layout=False)
    right: reactive[Content] = reactive(Content, layout=False)

    def set(self, left: str | Content | None = None, right: str | Content | None = None) -> None:
        if left is not None:
            self.left = Content(left) if isinstance(left, str) else left
        if right is not None:
            self.right = Content(right) if isinstance(right, str) else right

    def render(self) -> Content:
        width = self.content_region.width
        left, right = self.left, self.right
        if left.cell_length + 1 + right.cell_length > width:
            if width - right.cell_length - 1 >= MIN_LEFT:
                left = left.truncate(max(0, width - right.cell_length - 1), ellipsis=True)
            else:
                right = Content("")
        gap = max(1, width - left.cell_length - right.cell_length)
        return Content.assemble(left, " " * gap, right)

    @property
    def text(self) -> str:
        return f"{self.left.plain} {self.right.plain}"
