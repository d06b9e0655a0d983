"""The plan a turn in plan mode ended with (agent.modes), for the user to approve, edit or reject:
`push_screen(PlanScreen(plan), callback)`.

Dismisses with ("approve", plan, False), ("approve", edited plan, True) or ("reject", "", False); escape
closes it with no answer (None: the plan stands, and the mode stays plan until the user switches or
answers a later plan). Nothing is approved by default: the focus starts on Reject, so a stray enter never
starts the changes. `e` turns the plan into an editor; ctrl+s approves the edited text.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Markdown, Static, TextArea


class PlanScreen(ModalScreen["tuple[str, str, bool] | None"]):
    BINDINGS = [
        Binding("a", "approve", "Approve"),
        Binding("e", "edit", "Edit"),
        Binding("r", "reject", "Reject"),
        Binding("ctrl+s", "approve", "Approve", show=False),
        Binding("escape", "later", "Later", show=False),
        Binding("left,right", "switch", "Switch", show=False),
    ]
    DEFAULT_CSS = """
    PlanScreen {
        align: center middle;
        #plan-dialog {
            width: 90%;
            max-width: 120;
            height: auto;
            max-height: 90%;
            padding: 1 2;
            background: $panel;
            border: thick $warning;
        }
        #plan-title { text-style: bold; color: $text-warning; }
        #plan-view { height: auto; max-height: 45vh; margin-top: 1; background: $surface; }
        #plan-view Markdown { margin: 0; padding: 0 1; background: $surface; }
        #plan-editor { display: none; height: 45vh; margin-top: 1; }
        #plan-dialog.-editing #plan-view { display: none; }
        #plan-dialog.-editing #plan-editor { display: block; }
        #plan-hint { color: $text-muted; margin-top: 1; }
        #plan-buttons { height: auto; width: 100%; align-horizontal: right; margin-top: 1; }
        Button { margin-left: 1; }
    }
    """

    def __init__(self, plan: str) -> None:
        super().__init__()
        self.plan = plan

    def compose(self) -> ComposeResult:
        with Vertical(id="plan-dialog"):
            yield Static("The agent's plan: nothing has changed yet", id="plan-title", markup=False)
            with VerticalScroll(id="plan-view"):
                yield Markdown(self.plan)
            yield TextArea(self.plan, id="plan-editor")
            yield Static("a approve · e edit · r reject · escape later (the mode stays plan)", id="plan-hint",
                         markup=False)
            with Horizontal(id="plan-buttons"):
                yield Button("Reject", id="plan-reject")
                yield Button("Edit", id="plan-edit")
                yield Button("Approve", variant="primary", id="plan-approve")

    def on_mount(self) -> None:
        self.query_one("#plan-reject", Button).focus()

    @property
    def editing(self) -> bool:
        return self.query_one("#plan-dialog").has_class("-editing")

    @property
    def editor(self) -> TextArea:
        return self.query_one("#plan-editor", TextArea)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # while editing, letters are the plan's text: only ctrl+s and escape act
        if self.editing and action in ("edit", "reject", "switch"):
            return False
        return True

    def action_approve(self) -> None:
        text = self.editor.text if self.editing else self.plan
        if not text.strip():
            self.notify("the plan is empty: write one, or reject it", severity="warning")
            return
        self.dismiss(("approve", text, self.editing and text != self.plan))

    def action_edit(self) -> None:
        self.query_one("#plan-dialog").add_class("-editing")
        self.query_one("#plan-hint", Static).update("ctrl+s approve as edited · escape later")
        self.query_one("#plan-edit", Button).display = False
        self.editor.focus()

    def action_reject(self) -> None:
        self.dismiss(("reject", "", False))

    def action_later(self) -> None:
        self.dismiss(None)

    def action_switch(self) -> None:
        buttons = [b for b in self.query(Button) if b.display]
        at = next((i for i, b in enumerate(buttons) if b.has_focus), -1)
        buttons[(at + 1) % len(buttons)].focus()

    @on(Button.Pressed, "#plan-approve")
    def _approve(self) -> None:
        self.action_approve()

    @on(Button.Pressed, "#plan-edit")
    def _edit(self) -> None:
        self.action_edit()

    @on(Button.Pressed, "#plan-reject")
    def _reject(self) -> None:
        self.action_reject()
