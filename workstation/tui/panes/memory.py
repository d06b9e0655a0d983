"""The memory pane: STM, LTM and Episodic in one table, a tab per tier, one filter.

Data down: `set_entries(tier, entries)`, `upsert(tier, entry)` and
`delete_entry(tier, key, namespace)` for "stm" and "ltm" (MemoryEntry);
`set_events(events)` / `append_events(events)` for "episodic" (TimelineEvent);
`set_frontier(data)`: where the session's work stands (sessions.frontier.Frontier.as_dict()), a fourth tab
that appears once given, the user's goal and what is in progress first; `set_filter(text)`, `show_tier(tier)`.
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
        height: auto;  /* a narrow pane wraps the tabs: every one stays in view */
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

    frontier: reactive[bool] = reactive(False, layout=True)  # the Frontier tab shows once the backend gave one

    def render(self) -> Content:
        parts = []
        for tier, title in [*TITLES.items(), *([(FRONTIER, "Frontier")] if self.frontier else [])]:
            if tier == self.active:  # not a link: link colours would override the highlight
                parts.append(Content.styled(title, "bold underline $text-primary"))
            else:
                parts.append(Content.from_markup(f"[@click=choose('{tier}')]{title}[/]"))
        tabs = Content("  ").join(parts)
        hint = Content.styled("   [ ] switch", "$text-muted 60%")
        # the hint only where the tabs and it fit on one line (a narrow pane wraps the tabs alone)
        return tabs + hint if tabs.cell_length + hint.cell_length <= self.content_region.width else tabs

    def on_resize(self) -> None:
        self.refresh(layout=True)  # the hint comes or goes with the width

    def action_choose(self, tier: str) -> None:
        self.post_message(self.Selected(tier))


class FrontierText(Static):
    """The Frontier tab's text: the goal is cut to the rows it has at the width shown, so a new width draws it
    again."""

    drawn_width = 0  # the width the text was cut for

    def on_resize(self) -> None:
        pane = next((node for node in self.ancestors if isinstance(node, MemoryPane)), None)
        if pane is not None and pane.active_tier == FRONTIER and self.content_region.width != self.drawn_width:
            pane._show_frontier()


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
        #memory-frontier { height: 1fr; background: $surface; display: none; scrollbar-size-vertical: 1; }
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
        self._frontier: dict[str, Any] = {}  # the session's frontier (Frontier.as_dict(); {}: none given, no tab)

    def compose_body(self) -> ComposeResult:
        yield Input(self._filter_text, placeholder="/ filter keys and values", id="memory-filter")
        tabs = TierBar(id="memory-tabs")
        tabs.active = self._tier
        yield tabs
        yield DataTable(id="memory-table", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="memory-frontier"):
            yield FrontierText("", id="memory-frontier-text", markup=False)
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
        body_focused = False
        if self.built:
            body_focused = self.screen.focused is self.focus_target()
            if self._tier != FRONTIER:
                self._cursor[self._tier] = self.table.cursor_row
            self.query_one(TierBar).active = tier
        self._tier = tier
        self._redraw()
        if body_focused:  # the keys go on to the body shown (the hidden one would hand the focus to the filter)
            self.focus_target().focus()

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

    def set_frontier(self, frontier: dict[str, Any]) -> None:
        """Where the session's work stands (sessions.frontier.Frontier.as_dict(); {} for none); its tab shows
        from now on."""
        self._frontier = dict(frontier or {})
        if self.built:
            self.query_one(TierBar).frontier = bool(self._frontier)
            if self._tier == FRONTIER:
                self._redraw()

    def frontier_lines(self) -> list[tuple[str, str]]:
        """The frontier as the tab shows it, (style, line), headings kept and items narrowed by the filter."""
        lines = frontier_lines(self._frontier, self.query_one(FrontierText).content_region.width if self.built else 0)
        if not self._filter:
            return lines
        return [(style, line) for style, line in lines if style == HEADING or self._filter in line.lower()]

    def frontier_text(self) -> str:
        return "\n".join(line for _, line in self.frontier_lines())

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
            self._show_frontier()
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

    def _show_frontier(self) -> None:
        text = self.query_one(FrontierText)
        text.drawn_width = text.content_region.width
        text.update(Content("\n").join(Content.styled(line, style) for style, line in self.frontier_lines()))

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
        if self._tier == FRONTIER:  # what the tab holds, and how to see more of it than a short pane shows
            data = self._frontier
            said = len(data.get("messages") or ()) + len(data.get("left_out") or ())
            files = len(data.get("files") or ()) + int(data.get("more_files") or 0)
            self.query_one("#memory-status", Static).update(  # the keys first: a narrow pane cuts the end
                f"f11 full · ↑↓ scroll · turn {data.get('turn', 0)}: {said} message{'s' if said != 1 else ''}, "
                f"{files} file{'s' if files != 1 else ''}")
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


HEADING = "bold $text-primary"
NOW = "bold $text-accent"
FAILED = "$text-error"


def _one_line(text: str, limit: int = 400) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _rows(text: str, width: int, rows: int) -> str:
    """`text` cut to what `rows` rows of `width` cells show when wrapped, ending in … when cut (0: whole)."""
    if width <= 0:
        return text
    lines = Content(text).wrap(width)
    if len(lines) <= rows:
        return text
    words = " ".join(line.plain.strip() for line in lines[:rows]).split(" ")
    while len(words) > 1 and len(Content(" ".join(words) + " …").wrap(width)) > rows:
        words.pop()  # room for the mark, a word at a time
    return " ".join(words) + " …"


def frontier_lines(data: dict[str, Any], width: int = 0) -> list[tuple[str, str]]:
    """(style, line) of the Frontier tab, for people (the model's copy, Frontier.render, goes oldest first):
    the goal (the session's first message, cut to two rows of `width` here, whole among the messages) and the
    step in progress first, so that a short pane shows them; then the failure, the open questions, the
    newest message, decisions and pins, the files, the whole plan, the user's messages newest first, the
    failure's output."""
    if not data:
        return []
    out: list[tuple[str, str]] = []
    messages = list(data.get("messages") or ())
    left_out = list(data.get("left_out") or ())
    plan = data.get("plan")
    failure = data.get("failure")
    questions = list(data.get("questions") or ())
    if messages:
        goal = messages[0]
        out.append((HEADING, f"Goal · turn {goal['turn']}"))
        out.append(("", _rows(_one_line(goal["text"]) + (" …" if goal.get("cut_tokens") else ""), width, 2)))
    now: list[tuple[str, str]] = []
    if plan:
        done = sum(1 for item in plan if item.get("status") == "done")
        step = data.get("step_in_progress")
        now.append((NOW, f"▸ {step}" if step else "▸ no step in progress"))
        now.append(("$text-muted", f"  plan: {done} of {len(plan)} done"))
    if failure:
        now.append((FAILED, f"✗ failing since turn {failure['turn']}: {_one_line(failure['command'], 120)}"))
    for question in questions:
        now.append(("$text-warning", f"? turn {question['turn']} asks you: {_one_line(question['text'], 200)}"))
    if len(messages) > 1:
        last = messages[-1]
        now.append(("", f"last message · turn {last['turn']}: {_one_line(last['text'], 200)}"))
    out.extend(now)  # no heading: a short pane has a row for the step, not for a title above it
    decisions = list((data.get("decisions") or {}).values())
    if decisions:
        out.append((HEADING, f"Decisions in force ({len(decisions)})"))
        out.extend(("", line if line.startswith("- ") else f"- {line}") for line in decisions)
    pins = list(data.get("pins") or ())
    if pins:
        out.append((HEADING, f"Pinned ({len(pins)})"))
        out.extend(("", f"- {pin}") for pin in pins)
    if data.get("instructions"):
        out.append((HEADING, "Project instructions"))
        out.append(("", ", ".join(data["instructions"])))
    files = list(data.get("files") or ())
    if files:
        more = int(data.get("more_files") or 0)
        out.append((HEADING, f"Files changed ({len(files) + more}, as they are now)"))
        for f in files:
            turns = f.get("turns") or []
            where = f" · turn {turns[-1]}" if turns else ""
            counts = f" +{f.get('added', 0)} -{f.get('removed', 0)}" if f.get("added") or f.get("removed") else ""
            name = f"{f['moved_from']} → {f['path']}" if f.get("state") == "moved" else f["path"]
            out.append(("", f"{f.get('state', '')} {name}{counts}{where}"))
        if more:
            out.append(("$text-muted", f"… and {more} more"))
    if plan:
        marks = {"done": "✓", "in_progress": "▸", "pending": "○"}
        out.append((HEADING, "Plan"))
        out.extend((NOW if item.get("status") == "in_progress" else "",
                    f"{marks.get(item.get('status'), '?')} {item.get('text', '')}") for item in plan)
    if messages:
        cut = sum(1 for m in messages if m.get("cut_tokens")) + len(left_out)
        out.append((HEADING, f"Your messages ({len(messages) + len(left_out)}, newest first"
                    + (f"; {cut} cut, /recall N shows one whole)" if cut else ")")))
        for m in reversed(messages):
            out.append(("", f"turn {m['turn']}: {_one_line(m['text'])}" + (" …" if m.get("cut_tokens") else "")))
        if left_out:
            out.append(("$text-muted", f"turns {', '.join(map(str, left_out[:20]))}"
                        f"{' …' if len(left_out) > 20 else ''}: left out to fit (/recall N)"))
    if failure and failure.get("output"):
        out.append((HEADING, f"Last failure · turn {failure['turn']}"))
        out.append((FAILED, f"$ {failure['command']}"))
        out.extend(("", line) for line in str(failure["output"]).splitlines()[-30:])
    return out


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
