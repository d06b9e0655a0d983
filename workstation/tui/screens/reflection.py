"""The reflection screen: the built-in reflection queries as tables, and two plots.

Left, the named queries of `workstation.memory.reflect`; the chosen one runs in
the database owner (a thread worker) and fills the table. Below, two terminal
plots: the context size of every model call over the session's turns, with
each compaction marked where it happened (from the session log: assistant
records' `context_tokens`, compact records), and calls per tool, ok and failed
(the `tool_errors` reflection). `s` switches the tables and the tool plot
between this session and every session. Events recorded outside any session
(indexing, the sidecar, the sessions screen's operations) show as
"(no session)" rather than as a blank name.

The app hands the screen the workspace and the chat's session when it opens it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.color import Color, ColorParseError
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import Worker, WorkerState
from textual_plotext import PlotextPlot

from ...memory import reflect
from ...sessions.catalog import list_sessions, load as load_session
from ...sessions.records import Assistant, Compact, Record
from ...sessions.turns import numbers_in_order
from ..panes.bar import StatusBar

if TYPE_CHECKING:
    from ...runtime import Workspace

WORKER_GROUP = "reflection-screen"
CELL_CHARS = 60
NO_SESSION = "(no session)"


# --------------------------------------------------------------------------- plot data (no textual)
@dataclass
class ContextSeries:
    """Context tokens sent with each model call, by turn number, and where compactions happened."""

    session: str
    turns: list[int] = field(default_factory=list)  # turn number (1-based) of each model call
    tokens: list[int] = field(default_factory=list)  # context tokens sent with it
    compactions: list[tuple[int, int]] = field(default_factory=list)  # (at turn, last turn it summarized)

    @property
    def empty(self) -> bool:
        return not self.turns


def context_series(session: str, records: list[Record]) -> ContextSeries:
    """From a session log's records in file order (turns as sessions.turns numbers them: a user message
    and all that answered it, so the model calls of one turn share its number)."""
    series = ContextSeries(session)
    numbers = numbers_in_order(records)
    by_id = {r.id: n for r, n in zip(records, numbers)}
    for record, turn in zip(records, numbers):
        if isinstance(record, Assistant) and isinstance(record.context_tokens, int):
            series.turns.append(turn)
            series.tokens.append(record.context_tokens)
        elif isinstance(record, Compact):
            last_id = record.covers.last_id if record.covers else None
            last_turn = record.covers.last_turn if record.covers else None
            last = by_id.get(last_id) if last_id else None
            series.compactions.append((turn, int(last_turn or 0) if last is None else last))
    return series


@dataclass
class ToolUsage:
    tools: list[str] = field(default_factory=list)
    ok: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)


def tool_usage(columns: list[str], rows: list[list[Any]]) -> ToolUsage:
    """From the `tool_errors` reflection (tool, calls, errors, ...), most called first."""
    at = {name: i for i, name in enumerate(columns)}
    usage = ToolUsage()
    for row in sorted(rows, key=lambda r: (-(r[at["calls"]] or 0), r[at["tool"]])):
        calls, errors = int(row[at["calls"]] or 0), int(row[at["errors"]] or 0)
        usage.tools.append(str(row[at["tool"]]))
        usage.ok.append(calls - errors)
        usage.failed.append(errors)
    return usage


def cell_text(value: Any, column: str = "") -> str:
    if column == "session" and not value:
        return NO_SESSION
    text = "" if value is None else str(value)
    text = " ".join(text.split())
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


# --------------------------------------------------------------------------- the screen
class ReflectionScreen(Screen):
    SCREEN_NAME = "reflection"
    BINDINGS = [
        Binding("escape", "close", "Back"),
        Binding("s", "toggle_scope", "This session / all"),
        Binding("t", "toggle_team", "Mine / team"),
        Binding("g", "reload", "Reload"),
    ]
    DEFAULT_CSS = """
    ReflectionScreen {
        background: $background;
        #reflection-title { height: 1; padding: 0 1; color: $text-primary; text-style: bold; background: $panel; }
        #reflection-top { height: 1fr; }
        #reflection-queries { width: 24; height: 1fr; background: $surface; border: round $border-blurred; }
        #reflection-queries:focus { border: round $border; }
        #reflection-about { height: auto; padding: 0 1; color: $text-muted; }
        #reflection-table { height: 1fr; background: $surface; }
        #reflection-plots { height: 45%; min-height: 12; }
        PlotextPlot { width: 1fr; height: 1fr; border: round $border-blurred; }
        #reflection-status { height: 1; width: 1fr; }
    }
    """

    def __init__(self, workspace: Workspace, *, session: str | None = None, query: str = "") -> None:
        super().__init__()
        self.workspace = workspace
        self.session = session  # the session the plots show (None: the newest one)
        self.all_sessions = False
        self.team = False  # over the team's rows too (workstation.team's replica)
        self.query_name = reflect.canonical(query) if query else ""  # shown first (default: the first one)
        self.result: Any = None  # the reflect.Result on screen
        self.context: ContextSeries | None = None
        self.tools: ToolUsage | None = None

    def compose(self) -> ComposeResult:
        yield Static("Reflection", id="reflection-title", markup=False)
        with Horizontal(id="reflection-top"):
            yield OptionList(*[Option(name.replace("_", " "), id=name) for name, _ in reflect.names()],
                             id="reflection-queries")
            with Vertical():
                yield Static("", id="reflection-about", markup=False)
                yield DataTable(id="reflection-table", zebra_stripes=True, cursor_type="row")
        with Horizontal(id="reflection-plots"):
            yield PlotextPlot(id="context-plot")
            yield PlotextPlot(id="tools-plot")
        yield StatusBar(id="reflection-status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#context-plot").border_title = "Context size"
        self.query_one("#tools-plot").border_title = "Tool calls"
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._draw_plots())
        queries = self.query_one(OptionList)
        if self.query_name:
            queries.highlighted = queries.get_option_index(self.query_name)
        queries.focus()
        self.action_reload()

    # ---------------------------------------------------------------- where the data is
    @property
    def scope(self) -> str | None:
        """The session the tables are filtered to (None: every session)."""
        return None if self.all_sessions else self.session

    @property
    def table(self) -> DataTable:
        return self.query_one("#reflection-table", DataTable)

    @property
    def status(self) -> StatusBar:
        return self.query_one("#reflection-status", StatusBar)

    # ---------------------------------------------------------------- loading
    def action_reload(self) -> None:
        self._update_title()
        self._load_context()
        self._load_tools()
        self.run_query(self.query_name or self.query_one(OptionList).get_option_at_index(0).id)

    def action_toggle_scope(self) -> None:
        if self.session is None:
            self.notify("no session is open: every session is shown", severity="warning")
            return
        self.all_sessions = not self.all_sessions
        self.action_reload()

    def action_toggle_team(self) -> None:
        self.team = not self.team
        self.action_reload()

    def action_close(self) -> None:
        self.dismiss()

    def _update_title(self) -> None:
        scope = "every session" if self.scope is None else f"session {self.scope}"
        team = " · team (pulled by `workstation team pull`)" if self.team else ""
        self.query_one("#reflection-title", Static).update(f"Reflection · {scope}{team}")

    @on(OptionList.OptionHighlighted, "#reflection-queries")
    def _query_chosen(self, event: OptionList.OptionHighlighted) -> None:
        if event.option.id != self.query_name:
            self.run_query(event.option.id)

    def run_query(self, name: str) -> None:
        self.query_name = name
        self.query_one("#reflection-about", Static).update(reflect.QUERIES[name].description)
        self.status.set(left=f"running {name}…")
        self._run_query(name, self.scope, self.team)

    @work(thread=True, exit_on_error=False, group=WORKER_GROUP, exclusive=True, name="reflection query")
    def _run_query(self, name: str, session: str | None, team: bool = False) -> None:
        result = reflect.run(self.workspace.db, name, session=session, team=team)
        self.app.call_from_thread(self._show_result, result)

    def _show_result(self, result: Any) -> None:
        if result.name != self.query_name:
            return  # an older query finished after the user moved on
        self.result = result
        table = self.table
        table.clear(columns=True)
        for column in result.columns:
            table.add_column(column, key=column)
        for row in result.rows:
            table.add_row(*(cell_text(v, column) for v, column in zip(row, result.columns)))
        shown = f"{len(result.rows)} rows" if result.rows else "no rows: nothing recorded for this scope yet"
        self.status.set(left=f"{result.name}: {shown}")

    @on(DataTable.RowHighlighted, "#reflection-table")
    def _say_whose(self, event: DataTable.RowHighlighted) -> None:
        """A teammate's session (`SLUG · AUTHOR ORIGIN`, store.schema's team views) in full on the status line:
        the table clips it, and a narrow one cuts the origin off."""
        result = self.result
        if result is None or "session" not in result.columns or not 0 <= event.cursor_row < len(result.rows):
            return
        session = str(result.rows[event.cursor_row][result.columns.index("session")] or "")
        if " · " in session:
            self.status.set(left=f"{result.name}: {len(result.rows)} rows · {session}")

    @work(thread=True, exit_on_error=False, group=f"{WORKER_GROUP}-context", exclusive=True,
          name="context plot")
    def _load_context(self) -> None:
        slug = self.session
        if slug is None:  # no chat open: the newest session
            newest = list_sessions(self.workspace.paths)
            slug = newest[0].slug if newest else None
        if slug is None:
            series = ContextSeries("")
        else:
            view, _state = load_session(self.workspace.paths, slug)
            series = context_series(slug, view.records)
        self.app.call_from_thread(self._set_context, series)

    def _set_context(self, series: ContextSeries) -> None:
        self.context = series
        self._draw_plots()

    @work(thread=True, exit_on_error=False, group=f"{WORKER_GROUP}-tools", exclusive=True, name="tool plot")
    def _load_tools(self) -> None:
        result = reflect.run(self.workspace.db, "tool_errors", session=self.scope, limit=40, team=self.team)
        self.app.call_from_thread(self._set_tools, tool_usage(result.columns, result.rows))

    def _set_tools(self, usage: ToolUsage) -> None:
        self.tools = usage
        self._draw_plots()

    # ---------------------------------------------------------------- plots
    def _color(self, variable: str) -> tuple[int, int, int]:
        """A theme variable as plotext's RGB (plots are drawn outside the stylesheet)."""
        variables = self.app.theme_variables
        try:
            return Color.parse(variables.get(variable) or variables["foreground"]).rgb
        except ColorParseError:
            return Color.parse(variables["foreground"]).rgb

    def _draw_plots(self) -> None:
        if self.context is not None:
            self._draw_context(self.query_one("#context-plot", PlotextPlot), self.context)
        if self.tools is not None:
            self._draw_tools(self.query_one("#tools-plot", PlotextPlot), self.tools)

    def _draw_context(self, widget: PlotextPlot, series: ContextSeries) -> None:
        plt = widget.plt
        plt.clear_figure()
        widget.border_title = f"Context size · {series.session}" if series.session else "Context size"
        if series.empty:
            plt.title("no model calls with a recorded context size" if series.session else "no session yet")
        else:
            line = self._color("text-primary")
            marker = self._color("text-warning")
            under = self._color("surface")
            plt.plot(series.turns, series.tokens, marker="braille", color=line)
            plt.scatter(series.turns, series.tokens, marker="●", color=line)
            top = max(series.tokens)
            middle = (series.turns[0] + series.turns[-1]) / 2
            for at, last in series.compactions:
                plt.vline(at, color=marker)
                # the label runs away from the nearer edge, or plotext drops what does not fit
                label, align = (f"compacted 1–{last} ◆", "right") if at > middle else (f"◆ compacted 1–{last}", "left")
                plt.text(label, x=at, y=top, color=marker, background=under, alignment=align)
            marks = len(series.compactions)
            plt.title(f"tokens sent per model call · {marks} compaction{'s' if marks != 1 else ''}")
            plt.xlabel("turn")
        widget.refresh()

    def _draw_tools(self, widget: PlotextPlot, usage: ToolUsage) -> None:
        plt = widget.plt
        plt.clear_figure()
        scope = "every session" if self.scope is None else "this session"
        widget.border_title = f"Tool calls · {scope}"
        if not usage.tools:
            plt.title("no tool calls recorded")
        else:
            order = list(reversed(range(len(usage.tools))))  # horizontal bars draw bottom-up: most used on top
            plt.stacked_bar([usage.tools[i] for i in order],
                            [[usage.ok[i] for i in order], [usage.failed[i] for i in order]],
                            color=[self._color("text-primary"), self._color("text-error")],
                            orientation="horizontal", width=0.6)
            plt.title(f"{sum(usage.ok)} ok · {sum(usage.failed)} failed")
        widget.refresh()

    # ---------------------------------------------------------------- errors
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if not event.worker.group.startswith(WORKER_GROUP) or event.state != WorkerState.ERROR:
            return
        event.stop()
        error = event.worker.error
        first = (str(error).strip().splitlines() or [""])[0]
        text = f"{event.worker.name} failed: {first or type(error).__name__}"
        self.status.set(left=text)
        self.notify(text, severity="error", timeout=12)
