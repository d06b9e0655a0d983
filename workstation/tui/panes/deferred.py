"""Panes whose widgets mount just after the app's first frame.

The memory and timeline panes hold two DataTables and an Input: styling and
laying them out costs the first frame about 60 ms. Their border and title
paint at once; the widgets inside mount right after that frame is on screen.

A subclass keeps its data in plain attributes (data may arrive before the
widgets exist), yields its widgets from `compose_body`, draws them from the
data in `on_built`, and checks `built` before it touches a widget.
`focus_body()` focuses `focus_target()`, at once or as soon as it exists.
"""

from __future__ import annotations

import asyncio

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget


class DeferredPane(Vertical):
    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.built = False
        self._building = False
        self._built_event = asyncio.Event()
        self._focus_when_built = False

    def compose(self) -> ComposeResult:
        if self._building:
            yield from self.compose_body()

    def compose_body(self) -> ComposeResult:
        raise NotImplementedError

    def on_built(self) -> None:
        """Draw the widgets from the data received so far."""

    def focus_target(self) -> Widget:
        raise NotImplementedError

    def focus_body(self) -> None:
        if self.built:
            self.focus_target().focus()
        else:
            self._focus_when_built = True  # a key pressed before the widgets mounted still counts

    def on_mount(self) -> None:
        self.call_after_refresh(self._build)  # runs once the first frame has been painted

    async def _build(self) -> None:
        if self._building:
            return
        self._building = True
        await self.recompose()
        self.built = True
        self.on_built()
        self._built_event.set()
        if self._focus_when_built:
            self.focus_target().focus()

    async def wait_built(self) -> None:
        await self._built_event.wait()


async def all_built(screen) -> None:
    """Wait until every deferred pane on `screen` has its widgets."""
    for pane in screen.query(DeferredPane):
        await pane.wait_built()
