"""A one-line bar: text on the left, text on the right. One widget, not a row of three."""

from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget


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
        gap = max(1, width - self.left.cell_length - self.right.cell_length)
        return Content.assemble(self.left, " " * gap, self.right)

    @property
    def text(self) -> str:
        return f"{self.left.plain} {self.right.plain}"
