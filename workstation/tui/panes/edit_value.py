"""A modal that edits one memory value as JSON (and its key, for a new entry)."""

from __future__ import annotations

import json
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static


class EditValueScreen(ModalScreen[tuple[str, Any] | None]):
    """Dismisses with (key, parsed value), or None when cancelled."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    EditValueScreen {
        align: center middle;
        #dialog {
            width: 72;
            height: auto;
            padding: 1 2;
            background: $panel;
            border: thick $primary;
        }
        #dialog-title { text-style: bold; color: $text; margin-bottom: 1; }
        #edit-error { color: $text-error; height: auto; }
        #edit-hint { color: $text-muted; }
        #dialog-buttons { height: auto; align-horizontal: right; margin-top: 1; }
        Button { margin-left: 1; }
    }
    """

    def __init__(self, title: str, key: str = "", value: Any = None, *, new: bool = False) -> None:
        super().__init__()
        self._title = title
        self._key = key
        self._value_text = "" if new and value is None else json.dumps(value, ensure_ascii=False)
        self._new = new

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self._title, id="dialog-title", markup=False)
            key = Input(self._key, placeholder="key", id="edit-key")
            key.display = self._new
            yield key
            yield Input(self._value_text, placeholder='JSON value, e.g. "text", 42, {"a": 1}',
                        id="edit-value")
            yield Static("", id="edit-error", markup=False)
            yield Static("enter saves · escape cancels · strings need double quotes", id="edit-hint")
            with Horizontal(id="dialog-buttons"):
                yield Button("Cancel", id="edit-cancel")
                yield Button("Save", variant="primary", id="edit-save")

    def on_mount(self) -> None:
        self.query_one("#edit-key" if self._new else "#edit-value", Input).focus()

    @on(Input.Submitted, "#edit-key")
    def _key_done(self) -> None:
        self.query_one("#edit-value", Input).focus()

    @on(Input.Submitted, "#edit-value")
    @on(Button.Pressed, "#edit-save")
    def action_save(self) -> None:
        key = self.query_one("#edit-key", Input).value.strip()
        text = self.query_one("#edit-value", Input).value
        error = self.query_one("#edit-error", Static)
        if not key:
            error.update("the key is empty")
            return
        try:
            value = json.loads(text)
        except json.JSONDecodeError as err:
            error.update(f"not JSON: {err.msg} at column {err.colno} (strings need double quotes)")
            return
        self.dismiss((key, value))

    @on(Button.Pressed, "#edit-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
