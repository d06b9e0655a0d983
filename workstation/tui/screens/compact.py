"""Compact a session: how many of the newest turns stay verbatim, and what that covers, before anything runs.

`push_screen(CompactScreen(slug, turns, keep, covers), callback)` dismisses with
the keep count, or None when cancelled. `covers(keep)` says which turns a
compaction keeping that many would summarize ((first, last), or None when
nothing would be): the dialog shows it as the number changes, and will not
start a compaction that would do nothing.
"""

from __future__ import annotations

from typing import Callable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

Covers = Callable[[int], tuple[int, int] | None]


def coverage_text(turns: int, keep: int, span: tuple[int, int] | None) -> str:
    """'turns 1–24 are summarized; the newest 6 (25–30) stay verbatim', or why nothing would be."""
    if span is None:
        return f"keeping the newest {keep}, nothing is left to summarize: enter a smaller number"
    first, last = span
    kept = turns - last
    return (f"turns {first}–{last} are summarized; the newest {kept} "
            + (f"({last + 1}–{turns}) stay verbatim" if kept else "stay verbatim (none)"))


class CompactScreen(ModalScreen[int | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    CompactScreen {
        align: center middle;
        #compact-dialog {
            width: 72;
            max-width: 100%;
            height: auto;
            padding: 1 2;
            background: $panel;
            border: thick $primary;
        }
        #compact-title { text-style: bold; color: $text; margin-bottom: 1; }
        #compact-about { color: $text; }
        #compact-row { height: auto; margin-top: 1; }
        #compact-row Label { padding: 1 1 0 0; color: $text; }
        #compact-keep { width: 12; }
        #compact-covers { color: $text-accent; height: auto; margin-top: 1; }
        #compact-hint { color: $text-muted; margin-top: 1; }
        #compact-buttons { height: auto; align-horizontal: right; margin-top: 1; }
        Button { margin-left: 1; }
    }
    """

    def __init__(self, slug: str, turns: int, keep: int, covers: Covers) -> None:
        super().__init__()
        self.slug = slug
        self.turns = turns
        self.keep = max(0, keep)
        self.covers = covers

    def compose(self) -> ComposeResult:
        with Vertical(id="compact-dialog"):
            yield Label(f"Compact {self.slug}", id="compact-title", markup=False)
            yield Static(f"{self.turns} turns. The compact model summarizes the older ones; the model sees the "
                         "summary instead of them from then on (the log keeps every turn).", id="compact-about",
                         markup=False)
            with Horizontal(id="compact-row"):
                yield Label("Keep the newest")
                yield Input(str(self.keep), type="integer", id="compact-keep")
                yield Label("turns verbatim")
            yield Static("", id="compact-covers", markup=False)
            yield Static("enter compacts · escape cancels", id="compact-hint")
            with Horizontal(id="compact-buttons"):
                yield Button("Cancel", id="compact-cancel")
                yield Button("Compact", variant="primary", id="compact-go")

    def on_mount(self) -> None:
        self._show(self.keep)
        self.query_one("#compact-keep", Input).focus()

    def _keep_value(self) -> int | None:
        text = self.query_one("#compact-keep", Input).value.strip()
        return int(text) if text.isdigit() else None

    def _show(self, keep: int | None) -> None:
        covers = self.query_one("#compact-covers", Static)
        if keep is None:
            covers.update("enter how many of the newest turns stay verbatim (0 or more)")
        else:
            covers.update(coverage_text(self.turns, keep, self.covers(keep)))

    @on(Input.Changed, "#compact-keep")
    def _changed(self) -> None:
        self._show(self._keep_value())

    @on(Input.Submitted, "#compact-keep")
    @on(Button.Pressed, "#compact-go")
    def action_compact(self) -> None:
        keep = self._keep_value()
        if keep is not None and self.covers(keep) is not None:
            self.dismiss(keep)
        # otherwise the line under the number already says what to change

    @on(Button.Pressed, "#compact-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
