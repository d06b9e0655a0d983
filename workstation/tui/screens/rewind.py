"""The /rewind picker: `/rewind` with no number lists the session's turns to go back to.

`push_screen(RewindScreen(turns), callback)` with `turns` the session's
`sessions.turns.TurnSummary` list (oldest first; the cursor starts on the
newest). Each line shows the turn's number, the first line of its prompt and
the files it changed; a turn a rewind already took back is shown dimmed and
cannot be chosen. Dismisses with (number, what) — enter: "both", f: "files",
c: "conversation" — or None (escape).
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

FILES_SHOWN = 3  # file names on a turn's line; the rest are counted


def turn_line(turn) -> Content:
    """`  3  fix the parser  · 2 files: a.py, b.py  · 1 file undone: c.py`: a turn as the picker lists it."""
    files = ""
    for paths, undone in ((turn.files, ""), (turn.undone, " undone")):
        if paths:
            names = ", ".join(paths[:FILES_SHOWN]) + (" …" if len(paths) > FILES_SHOWN else "")
            files += f"  · {len(paths)} file{'s' if len(paths) != 1 else ''}{undone}: {names}"
    parts = [Content.styled(f"{turn.number:>3}  ", "bold"), Content(turn.prompt or "(empty message)"),
             Content.styled(files, "$text-muted")]
    if turn.taken_back:
        parts.append(Content.styled(f"  ↶ {turn.taken_back}", "italic"))
    return Content.assemble(*parts)


class RewindScreen(ModalScreen[tuple[int, str] | None]):
    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("enter", "choose('both')", "Rewind", show=False, priority=True),
        Binding("f", "choose('files')", "Files only"),
        Binding("c", "choose('conversation')", "Conversation only"),
    ]
    DEFAULT_CSS = """
    RewindScreen {
        align: center middle;
        #rewind-dialog {
            width: 90%;
            max-width: 110;
            height: auto;
            max-height: 90%;
            padding: 0 1;
            background: $panel;
            border: thick $primary;
        }
        #rewind-title { color: $text; text-style: bold; }
        #rewind-list { height: auto; max-height: 20; background: $surface; }
        #rewind-hint { color: $text-muted; }
    }
    """

    def __init__(self, turns: list) -> None:
        super().__init__()
        self.turns = list(turns)

    def compose(self) -> ComposeResult:
        with Vertical(id="rewind-dialog"):
            yield Static("Rewind to before which turn?", id="rewind-title", markup=False)
            options = [Option(turn_line(t), id=str(t.number), disabled=bool(t.taken_back)) for t in self.turns]
            yield OptionList(*options, id="rewind-list")
            yield Static("enter: files and conversation · f: files only · c: conversation only · escape: cancel",
                         id="rewind-hint", markup=False)

    def on_mount(self) -> None:
        listing = self.query_one(OptionList)
        standing = [i for i, t in enumerate(self.turns) if not t.taken_back]
        if standing:
            listing.highlighted = standing[-1]
        listing.focus()

    @property
    def highlighted(self) -> int | None:
        """The number of the turn under the cursor (None: none can be chosen)."""
        index = self.query_one(OptionList).highlighted
        if index is None or not 0 <= index < len(self.turns) or self.turns[index].taken_back:
            return None
        return self.turns[index].number

    def action_choose(self, what: str) -> None:
        number = self.highlighted
        if number is not None:
            self.dismiss((number, what))

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.action_choose("both")
