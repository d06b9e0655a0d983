"""The episodic timeline: events in time order, filterable by type, with details.

Data down: `set_events(events)`, `append_events(events)` (TimelineEvent or mappings),
`set_type_filter(type or None)`, `select_event(id)`.
Messages up: `EventSelected(event)` on enter or click (the app moves the chat to
`event.turn_id`, or says why it cannot); moving the cursor only shows the details.
A failed event (a tool call that failed, a model call that errored or was
stopped) is marked ✗ in the name column and in the details; one whose turn a
rewind or undo took back (`details["taken_back"]`) is marked ↶ and dimmed. A
compaction is marked ⊟ with the turns it summarized (its name), in bold, and its details say what
its summary replaced (`details["replaced"]`); one /uncompact undid is marked ↶ too. A
sub-agent's events (its flow, agent/subagent.py) are nested under the task call
that ran it: their name is indented one step per level, behind `↳`.

The type filter is a label cycled by keys (t / T / a), a click, or the command
palette (one entry per type): a Select widget would double the pane's start-up cost.
"""

from __future__ import annotations

import json
from bisect import insort
from dataclasses import dataclass

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual import events
from rich.text import Text
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Static

from ..viewdata import TimelineEvent, coerce, human_count, human_duration
from .bar import StatusBar
from .deferred import DeferredPane
from .memory import event_time
from .turn_render import foreground_only

MAX_ROWS = 5000  # newest events kept on screen
COLUMN_WIDTHS = {"time": 8, "type": None, "name": 12, "dur": 6, "tokens": 6}  # None: fit


class TimelinePane(DeferredPane):
    ALLOW_MAXIMIZE = True
    BORDER_TITLE = "Timeline"
    BINDINGS = [
        Binding("t", "cycle_type(1)", "Next type"),
        Binding("T", "cycle_type(-1)", "Prev type", show=False),
        Binding("a", "all_types", "All types", show=False),
    ]
    COMPONENT_CLASSES = {"timeline--failed"}
    DEFAULT_CSS = """
    TimelinePane {
        & > .timeline--failed { color: $text-error; text-style: bold; }
        #timeline-bar { color: $text; }
        #timeline-bar:hover { background: $boost; }
        #timeline-table { height: 1fr; background: $surface; }
        #timeline-details-box { height: 7; max-height: 45%; background: $panel; border-top: hkey $surface; }
        #timeline-details { padding: 0 1; color: $text; }
    }
    """

    @dataclass(eq=False)
    class EventSelected(Message):
        """Enter or a click on an event: the app moves the chat to its turn (no backend involved)."""

        event: TimelineEvent

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._events: list[TimelineEvent] = []
        self._types: list[str] = []
        self._type: str | None = None
        self._shown: list[TimelineEvent] = []  # row i of the table is _shown[i]
        self._selected_id: str | None = None  # asked for before the table existed

    def compose_body(self) -> ComposeResult:
        yield StatusBar(id="timeline-bar")  # type filter (click or t cycles) · count
        table: DataTable = DataTable(id="timeline-table", cursor_type="row")
        for column, width in COLUMN_WIDTHS.items():
            table.add_column(column, key=column, width=width)
        yield table
        with VerticalScroll(id="timeline-details-box"):
            yield Static("", id="timeline-details", markup=False)

    def on_built(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._restyle())
        self._show_type()
        self._rebuild()
        if self._selected_id is not None:
            self.select_event(self._selected_id)

    def focus_target(self) -> DataTable:
        return self.table

    @property
    def table(self) -> DataTable:
        return self.query_one("#timeline-table", DataTable)

    @property
    def shown(self) -> list[TimelineEvent]:
        return list(self._shown)

    # ----------------------------------------------------------- data in
    def set_events(self, events) -> None:
        self._events = sorted((coerce(TimelineEvent, e) for e in events), key=lambda e: e.ts)
        self._events = self._events[-MAX_ROWS:]
        self._refresh_types()
        self._rebuild()

    def append_events(self, events) -> None:
        new = [coerce(TimelineEvent, e) for e in events]
        if not new:
            return
        in_order = not self._events or new[0].ts >= self._events[-1].ts
        in_order = in_order and all(a.ts <= b.ts for a, b in zip(new, new[1:]))
        for event in new:
            insort(self._events, event, key=lambda e: e.ts)
        trimmed = len(self._events) > MAX_ROWS
        del self._events[:-MAX_ROWS]
        if {e.type for e in new} - set(self._types):
            self._refresh_types()
        if not in_order or trimmed or not self.built:
            self._rebuild()
            return
        table = self.table
        follow = table.cursor_row >= table.row_count - 1
        for event in new:
            if self._type is None or event.type == self._type:
                self._shown.append(event)
                table.add_row(*self._cells(event))
        if follow and table.row_count:
            table.move_cursor(row=table.row_count - 1, animate=False)
        self._update_count()

    def set_type_filter(self, event_type: str | None) -> None:
        """Show only events of one type (None: all). The type need not be present yet."""
        self._type = event_type
        self._show_type()
        self._rebuild()

    @property
    def types(self) -> list[str]:
        return list(self._types)

    def select_event(self, event_id: str) -> bool:
        """Put the cursor on an event by id (e.g. when the chat jumps)."""
        if not self.built:
            self._selected_id = event_id
            return any(event.id == event_id for event in self._shown)
        self._selected_id = None
        for row, event in enumerate(self._shown):
            if event.id == event_id:
                self.table.move_cursor(row=row)
                return True
        return False

    # ------------------------------------------------------------ rendering
    def _refresh_types(self) -> None:
        self._types = sorted({e.type for e in self._events})
        self._show_type()

    @property
    def bar(self) -> StatusBar:
        return self.query_one("#timeline-bar", StatusBar)

    def _show_type(self) -> None:
        if not self.built:
            return
        label = "all" if self._type is None else self._type
        self.bar.set(left=f"type: {label}  (t cycles)")

    def _rebuild(self) -> None:
        self._shown = [e for e in self._events if self._type is None or e.type == self._type]
        if not self.built:
            return
        table = self.table
        table.clear()
        for event in self._shown:
            table.add_row(*self._cells(event))
        if self._shown:
            table.move_cursor(row=len(self._shown) - 1, animate=False)
        else:
            self.query_one("#timeline-details", Static).update("")
        self._update_count()

    def _restyle(self) -> None:
        """A new theme: the failure marks take its colour (the cursor stays where it was)."""
        row = self.table.cursor_row
        self._rebuild()
        if 0 <= row < self.table.row_count:
            self.table.move_cursor(row=row, animate=False)

    def _cells(self, event: TimelineEvent) -> tuple[str, str, Text, str, str]:
        # seconds in the table, milliseconds in the details; a failure is marked by shape and colour
        nest = "  " * (event.depth - 1) + "↳ " if event.depth else ""
        if failed(event):
            name = Text(f"{nest}✗ {event.name}", foreground_only(self.get_component_rich_style("timeline--failed")))
        else:
            name = Text(nest + event.name)  # never markup: names are paths and symbols
        if event.details.get("new_errors"):  # an edit the language server found errors in (workstation.lsp)
            name = Text(f"⚠{event.details['new_errors']} ",
                        foreground_only(self.get_component_rich_style("timeline--failed"))).append_text(name)
        if event.type == "compaction" and event.details.get("replaced"):  # what its summary replaced: the details
            name.stylize("bold")
        if taken_back(event):  # a rewind or undo took its turn back: marked by shape, dimmed
            name = Text.assemble("↶ ", name, style="dim")
        return (event_time(event.ts)[:8], event.type, name, human_duration(event.duration_ms),
                human_count(event.tokens))

    def _update_count(self) -> None:
        if not self.built:
            return
        shown, total = len(self._shown), len(self._events)
        self.bar.set(right=f"{shown}" if shown == total else f"{shown} of {total}")

    # ---------------------------------------------------------------- input
    @on(DataTable.RowHighlighted, "#timeline-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        if 0 <= event.cursor_row < len(self._shown):
            self.query_one("#timeline-details", Static).update(details_text(self._shown[event.cursor_row]))

    @on(DataTable.RowSelected, "#timeline-table")
    def _selected(self, event: DataTable.RowSelected) -> None:
        if 0 <= event.cursor_row < len(self._shown):
            self.post_message(self.EventSelected(self._shown[event.cursor_row]))

    def action_cycle_type(self, step: int) -> None:
        choices: list[str | None] = [None, *self._types]
        current = choices.index(self._type) if self._type in choices else 0
        self.set_type_filter(choices[(current + step) % len(choices)])

    def action_all_types(self) -> None:
        self.set_type_filter(None)

    def on_click(self, event: events.Click) -> None:
        if event.widget is not None and event.widget.id == "timeline-bar":
            self.action_cycle_type(1)

    def palette_commands(self):
        yield "Timeline: focus events", "Browse episodic events", self.focus_body
        yield "Timeline: show all types", "Clear the type filter", self.action_all_types
        for event_type in self._types:
            yield (f"Timeline: show only {event_type}", f"Filter the timeline to {event_type} events",
                   lambda t=event_type: self.set_type_filter(t))


def failed(event: TimelineEvent) -> bool:
    """The event says it failed (`ok` false in its details: a failed tool call, a stopped model call)."""
    return event.details.get("ok") is False


def taken_back(event: TimelineEvent) -> str:
    """What took the event's turn back ("taken back by /rewind 3"), "" while it stands."""
    return str(event.details.get("taken_back") or "")


def details_text(event: TimelineEvent) -> str:
    mark = ("✗ failed  " if failed(event) else "") + ("↶ taken back  " if taken_back(event) else "")
    lines = [f"{mark}{event_time(event.ts)}  {event.type}  {event.name}".rstrip()]
    facts = []
    if event.duration_ms is not None:
        facts.append(f"duration {human_duration(event.duration_ms)}")
    if event.tokens is not None:
        facts.append(f"tokens {event.tokens:,}")
    if event.turn_id:
        facts.append(f"turn {event.turn_id}")
    if event.session:
        facts.append(f"session {event.session}")
    if event.flow:
        facts.append(f"sub-agent {event.flow}")
    if facts:
        lines.append(" · ".join(facts))
    for key, value in event.details.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        lines.append(f"{key}: {text}")
    return "\n".join(lines)
