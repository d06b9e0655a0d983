"""A yes/no question over the current screen: `push_screen(ConfirmScreen(question), callback)`.

Dismisses with True (y, Yes) or False (n, No, escape); given `always` (a label),
a third button (a) dismisses with "always". Nothing is answered by default:
enter presses the focused button, and the focus starts on No so a stray enter
never approves a change.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmScreen(ModalScreen["bool | str"]):
    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n", "answer(False)", "No"),
        Binding("a", "always", "Always", show=False),
        Binding("escape", "answer(False)", "No", show=False),
        Binding("left,right,tab,shift+tab", "switch", "Switch", show=False),
    ]
    DEFAULT_CSS = """
    ConfirmScreen {
        align: center middle;
        #confirm-dialog {
            width: auto;
            min-width: 40;
            max-width: 90%;
            height: auto;
            padding: 1 2;
            background: $panel;
            border: thick $primary;
        }
        #confirm-dialog.-always { min-width: 60; }  /* room for three buttons */
        #confirm-question { color: $text; width: auto; max-width: 100%; }
        #confirm-hint { color: $text-muted; margin-top: 1; }
        #confirm-buttons { height: auto; width: 100%; align-horizontal: right; margin-top: 1; }
        Button { margin-left: 1; }
    }
    """

    def __init__(self, question: str, *, yes: str = "Yes", no: str = "No", always: str | None = None) -> None:
        super().__init__()
        self.question = question
        self._labels = (yes, no)
        self._always = always

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-dialog", classes="-always" if self._always else ""):
            yield Static(self.question, id="confirm-question", markup=False)
            yield Static("y yes · n or escape no" + (f" · a {self._always.lower()}" if self._always else ""),
                         id="confirm-hint", markup=False)
            with Horizontal(id="confirm-buttons"):
                yield Button(self._labels[1], id="confirm-no")
                if self._always:
                    yield Button(self._always, id="confirm-always")
                yield Button(self._labels[0], variant="primary", id="confirm-yes")

    def on_mount(self) -> None:
        self.query_one("#confirm-no", Button).focus()

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)

    def action_always(self) -> None:
        if self._always:
            self.dismiss("always")

    def action_switch(self) -> None:
        buttons = list(self.query(Button))
        at = next((i for i, b in enumerate(buttons) if b.has_focus), -1)
        buttons[(at + 1) % len(buttons)].focus()

    @on(Button.Pressed, "#confirm-yes")
    def _yes(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#confirm-always")
    def _always_pressed(self) -> None:
        self.dismiss("always")

    @on(Button.Pressed, "#confirm-no")
    def _no(self) -> None:
        self.dismiss(False)
