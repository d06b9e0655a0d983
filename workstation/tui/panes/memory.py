"""The memory pane: STM, LTM and Episodic in one table, a tab per tier, one filter.

Data down: `set_entries(tier, entries)`, `upsert(tier, entry)` and
`delete_entry(tier, key, namespace)` for "stm" and "ltm" (MemoryEntry);
`set_events(events)` / `append_events(events)` for "episodic" (TimelineEvent);
`set_frontier(text)`: where the session's work stands (sessions.frontier), a fourth tab that appears once
given; `set_filter(text)`, `show_tier(tier)`.
Messages up: `EditRequested(tier, key, value, namespace)` after the edit modal
(enter on an STM/LTM row, or `n` for a new entry). The pane does not change its
own rows: the backend writes, then calls `upsert`.

One DataTable shows the active tier (three would triple the start-up cost);
the pane keeps every tier's rows and redraws the table when the tab changes.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.message import Message
from textual.reactive import reactive
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Input, Static

from ..messages import BackendRequest
from .edit_value import EditValueScreen
from ..viewdata import MEMORY_TIERS, MemoryEntry, TimelineEvent, coerce, human_count, human_duration
from .deferred import DeferredPane

COLUMNS = {
    "stm": ("key", "value"),
    "ltm": ("namespace", "key", "value", "updated"),
    "episodic": ("time", "type", "name", "duration", "tokens"),
}
TITLES = {"stm": "STM", "ltm": "LTM", "episodic": "Episodic"}
FRONTIER = "frontier"  # not a memory tier: the session's frontier, derived from its log
VALUE_CHARS = 48
MAX_EPISODIC_ROWS = 2000  # the newest; the timeline and `workstation reflect` see them all


def value_text(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "…"


def event_time(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts)) + f".{int(ts * 1000) % 1000:03d}"


class TierBar(Static):
    """STM · LTM · Episodic as clickable labels: one widget where Tabs would mount six."""

    DEFAULT_CSS = """
    TierBar {
        height: 1;
        padding: 0 1;
        color: $text-muted;
        link-color: $text-muted;
        link-style: none;
        link-background-hover: $boost;
        link-style-hover: underline;
    }
    """
    active: reactive[str] = reactive("stm")

    class Selected(Message):
        def __init__(self, tier: str) -> None:
            super().__init__()
            self.tier = tier

    frontier: reactive[bool] = reactive(False)  # the Frontier tab shows once the backend gave one

    def render(self) -> Content:
        parts = []
        for tier, title in [*TITLES.items(), *([(FRONTIER, "Frontier")] if self.frontier else [])]:
            if tier == self.active:  # not a link: link colours would override the highlight
                parts.append(Content.styled(title, "bold underline $text-primary"))
            else:
                parts.append(Content.from_markup(f"[@click=choose('{tier}')]{title}[/]"))
        return Content("  ").join(parts) + Content.styled("   [ ] switch", "$text-muted 60%")

    def action_choose(self, tier: str) -> None:
        self.post_message(self.Selected(tier))


class MemoryPane(DeferredPane):
    ALLOW_MAXIMIZE = True
    BORDER_TITLE = "Memory"
    BINDINGS = [
        Binding("slash", "focus_filter", "Filter", show=False),
        Binding("n", "new_entry", "New entry"),
        Binding("left_square_bracket", "cycle_tier(-1)", "Prev tier", show=False),
        Binding("right_square_bracket", "cycle_tier(1)", "Next tier", show=False),
    ]
    DEFAULT_CSS = """
    MemoryPane {
        #memory-filter { border: none; height: 1; padding: 0 1; background: $panel; }
        #memory-filter:focus { background: $surface; }
        #memory-table { height: 1fr; background: $surface; }
        #memory-frontier { height: 1fr; background: $surface; display: none; }
        #memory-frontier-text { padding: 0 1; }
        #memory-status { height: 1; color: $text-muted; padding: 0 1; }
    }
    """

    @dataclass(eq=False)
    class EditRequested(BackendRequest):
        """Write `value` (already parsed from JSON) under `key` in `tier` ("stm" | "ltm"); the backend
        then calls `upsert` with the entry as stored (its time included)."""

        tier: str
        key: str
        value: Any
        namespace: str = ""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._entries: dict[str, dict[str, MemoryEntry]] = {"stm": {}, "ltm": {}}
        self._events: list[TimelineEvent] = []
        self._episodic_total = 0
        self._filter = ""  # lower-cased, as matched
        self._filter_text = ""  # as typed
        self._tier = "stm"
        self._cursor = {tier: 0 for tier in MEMORY_TIERS}
        self._frontier = ""  # the session's frontier as text ("": none given: no tab)

    def compose_body(self) -> ComposeResult:
        yield Input(self._filter_text, placeholder="/ filter keys and values", id="memory-filter")
        tabs = TierBar(id="memory-tabs")
        tabs.active = self._tier
        yield tabs
        yield DataTable(id="memory-table", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="memory-frontier"):
            yield Static("", id="memory-frontier-text", markup=False)
        yield Static("", id="memory-status", markup=False)

    def on_built(self) -> None:
        self.query_one(TierBar).frontier = bool(self._frontier)
        self._redraw()

    @property
    def table(self) -> DataTable:
        return self.query_one("#memory-table", DataTable)

    @property
    def active_tier(self) -> str:
        return self._tier

    def show_tier(self, tier: str) -> None:
        tier = tier if tier == FRONTIER and self._frontier else _tier(tier)
        if tier == self._tier:
            return
        if self.built:
            if self._tier != FRONTIER:
                self._cursor[self._tier] = self.table.cursor_row
            self.query_one(TierBar).active = tier
        self._tier = tier
        self._redraw()

    def entries(self, tier: str) -> list[MemoryEntry]:
        return list(self._entries[_kv_tier(tier)].values())

    def shown_keys(self, tier: str) -> list[str]:
        """Keys (STM/LTM) or event names (Episodic) that pass the filter, in table order."""
        if _tier(tier) == "episodic":
            return [e.name for e in self._events if self._matches(e)]
        return [e.key for e in self._entries[tier].values() if self._matches(e)]

    # ----------------------------------------------------------- data in
    def set_entries(self, tier: str, entries) -> None:
        tier = _kv_tier(tier)
        items = sorted((coerce(MemoryEntry, e) for e in entries), key=lambda e: (e.namespace, e.key))
        self._entries[tier] = {_row_key(e): e for e in items}
        self._changed(tier)

    def upsert(self, tier: str, entry) -> None:
        tier = _kv_tier(tier)
        entry = coerce(MemoryEntry, entry)
        key = _row_key(entry)
        self._entries[tier][key] = entry
        if tier == self._tier and self.built:
            table = self.table
            if key in table.rows:
                for column, cell in zip(COLUMNS[tier], self._cells(tier, entry)):
                    table.update_cell(key, column, cell, update_width=True)  # a longer value shows whole
            elif self._matches(entry):
                table.add_row(*self._cells(tier, entry), key=key)
        self._update_status()

    def delete_entry(self, tier: str, key: str, namespace: str = "") -> None:
        tier = _kv_tier(tier)
        row = _row_key(MemoryEntry(key, namespace=namespace))
        self._entries[tier].pop(row, None)
        if tier == self._tier and self.built and row in self.table.rows:
            self.table.remove_row(row)
        self._update_status()

    def set_events(self, events) -> None:
        items = sorted((coerce(TimelineEvent, e) for e in events), key=lambda e: e.ts)
        self._episodic_total = len(items)
        self._events = items[-MAX_EPISODIC_ROWS:]
        self._changed("episodic")

    def append_events(self, events) -> None:
        items = [coerce(TimelineEvent, e) for e in events]
        self._episodic_total += len(items)
        self._events.extend(items)
        if len(self._events) > MAX_EPISODIC_ROWS:
            self._events = self._events[-MAX_EPISODIC_ROWS:]
            self._changed("episodic")
            return
        if self._tier == "episodic" and self.built:
            for event in items:
                if self._matches(event):
                    self.table.add_row(*self._cells("episodic", event))
        self._update_status()

    def set_frontier(self, text: str) -> None:
        """Where the session's work stands (sessions.frontier.Frontier.render); its tab shows from now on."""
        self._frontier = text
        if self.built:
            self.query_one(TierBar).frontier = bool(text)
            if self._tier == FRONTIER:
                self._redraw()

    def frontier_text(self) -> str:
        """The frontier's lines that pass the filter (all of them without one)."""
        if not self._filter:
            return self._frontier
        return "\n".join(line for line in self._frontier.splitlines()
                         if line.startswith("#") or self._filter in line.lower())

    def set_filter(self, text: str) -> None:
        if self.built:
            self.query_one("#memory-filter", Input).value = text  # Input.Changed redraws
        else:
            self._set_filter(text)

    # ------------------------------------------------------------ rendering
    def _changed(self, tier: str) -> None:
        if tier == self._tier:
            self._redraw()
        else:
            self._update_status()

    def _redraw(self) -> None:
        if not self.built:
            return
        tier = self._tier
        table = self.table
        showing = tier == FRONTIER
        table.display = not showing
        self.query_one("#memory-frontier").display = showing
        if showing:
            self.query_one("#memory-frontier-text", Static).update(self.frontier_text())
            self._update_status()
            return
        table.clear(columns=True)
        for column in COLUMNS[tier]:
            table.add_column(column, key=column)
        if tier == "episodic":
            for event in self._events:
                if self._matches(event):
                    table.add_row(*self._cells(tier, event))
        else:
            for key, entry in self._entries[tier].items():
                if self._matches(entry):
                    table.add_row(*self._cells(tier, entry), key=key)
        if table.row_count:
            table.move_cursor(row=min(self._cursor[tier], table.row_count - 1), animate=False)
        self._update_status()

    def _cells(self, tier: str, item) -> tuple:
        if tier == "stm":
            return item.key, value_text(item.value)
        if tier == "ltm":
            return item.namespace, item.key, value_text(item.value), item.updated
        return (event_time(item.ts)[:8], item.type, item.name, human_duration(item.duration_ms),
                human_count(item.tokens))

    def _matches(self, item: MemoryEntry | TimelineEvent) -> bool:
        if not self._filter:
            return True
        if isinstance(item, MemoryEntry):
            hay = f"{item.namespace} {item.key} {json.dumps(item.value, default=str)}"
        else:
            hay = f"{item.type} {item.name} {json.dumps(item.details, default=str)}"
        return self._filter in hay.lower()

    def _update_status(self) -> None:
        if not self.built:
            return
        parts = []
        for tier in MEMORY_TIERS:
            shown = len(self.shown_keys(tier))
            total = self._episodic_total if tier == "episodic" else len(self._entries[tier])
            parts.append(f"{TITLES[tier]} {shown}" + (f"/{total}" if shown != total else ""))
        self.query_one("#memory-status", Static).update(" · ".join(parts))

    # ---------------------------------------------------------------- input
    @on(TierBar.Selected)
    def _tier_chosen(self, event: TierBar.Selected) -> None:
        event.stop()
        self.show_tier(event.tier)

    @on(Input.Changed, "#memory-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self._set_filter(event.value)

    def _set_filter(self, text: str) -> None:
        self._filter_text = text
        self._filter = text.strip().lower()
        self._redraw()

    @on(Input.Submitted, "#memory-filter")
    def _filter_done(self) -> None:
        self.table.focus()

    @on(DataTable.RowSelected, "#memory-table")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        tier = self._tier
        if tier in ("episodic", FRONTIER) or event.row_key.value is None:
            return
        entry = self._entries[tier].get(event.row_key.value)
        if entry is None:
            return
        where = f"{entry.namespace}/{entry.key}" if entry.namespace else entry.key
        self._edit(tier, f"Edit {TITLES[tier]} · {where}", entry.key, entry.value, entry.namespace)

    def focus_target(self):
        return self.query_one("#memory-frontier") if self._tier == FRONTIER else self.table

    def action_focus_filter(self) -> None:
        if self.built:
            self.query_one("#memory-filter", Input).focus()

    def action_cycle_tier(self, step: int) -> None:
        tiers = list(MEMORY_TIERS) + ([FRONTIER] if self._frontier else [])
        self.show_tier(tiers[(tiers.index(self._tier) + step) % len(tiers)])

    def action_new_entry(self) -> None:
        tier = self._tier if self._tier in ("stm", "ltm") else "stm"
        self._edit(tier, f"New {TITLES[tier]} entry", "", None, "", new=True)

    def _edit(self, tier: str, title: str, key: str, value: Any, namespace: str,
              new: bool = False) -> None:
        def done(result: tuple[str, Any] | None) -> None:
            if result is not None:
                self.post_message(self.EditRequested(tier, result[0], result[1], namespace))

        self.app.push_screen(EditValueScreen(title, key, value, new=new), done)

    def palette_commands(self):
        yield "Memory: filter", "Filter STM, LTM and Episodic rows", self.action_focus_filter
        for tier, title in TITLES.items():
            yield (f"Memory: show {title}", f"Switch to the {title} table",
                   lambda tier=tier: (self.show_tier(tier), self.focus_body()))
        if self._frontier:
            yield ("Memory: show the frontier", "Where the work stands: the user's words, plan, files, last failure",
                   lambda: (self.show_tier(FRONTIER), self.focus_body()))
        yield "Memory: new entry", "Add a key to STM or LTM", self.action_new_entry


def _tier(tier: str) -> str:
    if tier not in COLUMNS:
        raise ValueError(f"unknown memory tier {tier!r}: use stm, ltm or episodic")
    return tier


def _kv_tier(tier: str) -> str:
    if _tier(tier) == "episodic":
        raise ValueError("episodic memory is append-only: use set_events/append_events")
    return tier


def _row_key(entry: MemoryEntry) -> str:
    return f"{entry.namespace}\x1f{entry.key}" if entry.namespace else entry.key
