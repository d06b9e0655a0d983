"""The sessions screen: every session of the workspace, live and archived, and what can be done to one.

/ filters the list by slug and title (enter or escape goes back to it); sessions
in which nothing was said are not listed (but the one the chat is on).
enter resumes (the backend switches the chat to it: `ResumeRequested`), p replays
it, f opens its reflection, c compacts (asking how many of the newest turns stay
verbatim, and showing what that covers), a archives, r restores, e / j export
markdown / JSON to `<state>/exports/`. Whatever changes a session asks first.

The screen works on the `runtime.Workspace` it is given, and knows which session
the chat is on (`current`): the app passes both when it opens the screen. Every
file and model operation runs in a thread worker; results come back as
notifications and a status line, and the list reloads after each change.
"""

from __future__ import annotations

import time
from contextlib import closing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static
from textual.worker import Worker, WorkerState

from ...fsutil import atomic_write
from ...memory.episodic import Episodic
from ...replay import Episode
from ...sessions.archive import archive, restore
from ...sessions.catalog import export, list_sessions
from ...sessions.compaction import compact_now, plan_compaction
from ...sessions.log import Session
from ...sessions.turns import number as number_turns
from ..messages import BackendRequest
from ..panes.bar import StatusBar
from ..viewdata import human_count
from .compact import CompactScreen
from .confirm import ConfirmScreen
from .replay import ReplayScreen

if TYPE_CHECKING:
    from ...runtime import Workspace

COLUMNS = ("", "slug", "state", "turns", "compacted", "size", "last activity", "title")
WORKER_GROUP = "sessions-screen"
TITLE_CHARS = 48  # in the table; the line under it shows the whole title


def size_text(size: int) -> str:
    return f"{human_count(size)}B" if size >= 1000 else f"{size}B"


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def activity_text(iso: str | None) -> str:
    """'2025-01-31T09:12:03.114Z' -> '2025-01-31 09:12' (UTC, as logged)."""
    return (iso or "")[:16].replace("T", " ")


class SessionsScreen(Screen):
    SCREEN_NAME = "sessions"
    TITLE = "Sessions"
    BINDINGS = [
        Binding("escape", "close", "Back"),
        Binding("enter", "resume", "Resume"),
        Binding("p", "replay", "Replay"),
        Binding("f", "reflect", "Reflect"),
        Binding("c", "compact", "Compact"),
        Binding("a", "archive", "Archive"),
        Binding("r", "restore", "Restore"),
        Binding("e", "export('md')", "Export md"),
        Binding("j", "export('json')", "Export JSON"),
        Binding("g", "reload", "Reload"),
        Binding("t", "toggle_team", "Mine / team"),
        Binding("slash", "focus_filter", "Filter"),
    ]
    DEFAULT_CSS = """
    SessionsScreen {
        background: $background;
        #sessions-title { height: 1; padding: 0 1; color: $text-primary; text-style: bold; background: $panel; }
        #sessions-filter { border: none; height: 1; padding: 0 1; background: $panel; }
        #sessions-filter:focus { background: $surface; }
        #sessions-table { height: 1fr; background: $surface; }
        #sessions-detail { height: auto; max-height: 6; padding: 0 1; color: $text-muted; background: $surface; }
        #sessions-status { height: 1; width: 1fr; }
    }
    """

    @dataclass(eq=False)
    class ResumeRequested(BackendRequest):
        """Switch the chat to session `slug` (live; the screen restores an archived one first)."""

        slug: str

    def __init__(self, workspace: Workspace, *, current: str | None = None) -> None:
        super().__init__()
        self.workspace = workspace
        self.current = current  # the slug the chat is on: it is not archived from here
        self.sessions: dict[str, Any] = {}  # slug -> SessionInfo, in table order (those the filter lets through)
        self._all: list = []  # every SessionInfo listed, newest activity first
        self._team_rows: list[dict] = []  # with `team`: every teammate's session listed
        self.hidden_empty = 0  # sessions left out for holding no turn
        self.last_export: str | None = None  # path of the last export, for the status line and tests
        self.team = False  # teammates' shared sessions instead (read-only: `workstation team pull` brings them)

    # ---------------------------------------------------------------- composition
    def compose(self) -> ComposeResult:
        yield Static("Sessions", id="sessions-title")
        yield Input(placeholder="/ filter by slug or title", id="sessions-filter")
        table: DataTable = DataTable(id="sessions-table", cursor_type="row", zebra_stripes=True)
        for column in COLUMNS:
            table.add_column(column, key=column or "mark")
        yield table
        yield Static("", id="sessions-detail", markup=False)
        yield StatusBar(id="sessions-status")
        yield Footer()

    def on_mount(self) -> None:
        self.table.focus()
        self.action_reload()

    @property
    def table(self) -> DataTable:
        return self.query_one("#sessions-table", DataTable)

    @property
    def status(self) -> StatusBar:
        return self.query_one("#sessions-status", StatusBar)

    @property
    def selected(self) -> Any:
        """SessionInfo under the cursor, or None."""
        table = self.table
        if not table.row_count:
            return None
        return self.sessions.get(table.ordered_rows[table.cursor_row].key.value)

    # ---------------------------------------------------------------- listing
    def action_reload(self) -> None:
        self._load()

    def action_toggle_team(self) -> None:
        self.team = not self.team
        self.refresh_bindings()
        self._load()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A teammate's session is read-only here: what would resume or change a session leaves the footer."""
        return not (self.team and action in ("resume", "replay", "reflect", "compact", "archive", "restore", "export"))

    @work(thread=True, exit_on_error=False, group=f"{WORKER_GROUP}-list", exclusive=True, name="list sessions")
    def _load(self) -> None:
        if self.team:
            from ...team.sessions import team_sessions  # lazy: the team package, only on this toggle

            rows = self.workspace.db.call(team_sessions)
            self.app.call_from_thread(self._show_team, rows)
            return
        infos = list_sessions(self.workspace.paths, archived=True)
        self.app.call_from_thread(self._show, infos)

    def _show_team(self, rows: list[dict]) -> None:
        """Teammates' sessions, each with its author and origin; nothing here can be resumed or changed.
        The filter holds here too: by author, slug or origin."""
        self._team_rows = list(rows)
        table = self.table
        table.clear()
        self.sessions = {}
        needle = self._needle()
        shown = [row for row in rows if not needle or any(
            needle in str(row[key]).casefold() for key in ("author", "slug", "origin"))]
        for row in shown:
            table.add_row("", f"{row['author']}/{row['slug']}", "team", "", "", f"{row['lines']} lines", "",
                          clip(row["origin"], TITLE_CHARS), key=f"{row['origin']}\0{row['slug']}")
        title = f"Sessions · team · {len(rows)} shared by teammates" + (f" · {len(shown)} match {needle!r}"
                                                                          if needle else "")
        self.query_one("#sessions-title", Static).update(title)
        self.query_one("#sessions-detail", Static).update(
            "no teammate's session's author, slug or origin holds " + repr(needle) if rows and not shown else
            "teammates' sessions, read-only (`workstation session search TEXT --team`)" if rows else
            "no teammates' sessions pulled: they share them with [team] share = [..., \"sessions\"]")
        self._describe()

    def _teammates_session(self) -> dict | None:
        """The teammate's session under the cursor (team mode), or None."""
        table = self.table
        if not self.team or not table.row_count:
            return None
        key = table.ordered_rows[table.cursor_row].key.value
        return next((row for row in self._team_rows if f"{row['origin']}\0{row['slug']}" == key), None)

    def _needle(self) -> str:
        return self.query_one("#sessions-filter", Input).value.strip().casefold()

    def _show(self, infos: list) -> None:
        self._all = list(infos)
        table = self.table
        keep = self.selected.slug if self.selected is not None else None
        table.clear()
        current = self.current
        needle = self._needle()
        listed = [i for i in infos if i.turns or i.slug == current]
        self.hidden_empty = len(infos) - len(listed)
        shown = [i for i in listed if not needle or needle in i.slug.casefold() or needle in i.title.casefold()]
        self.sessions = {info.slug: info for info in shown}
        for info in shown:
            turns = f"{info.turns} ({info.taken_back}↶)" if info.taken_back else str(info.turns)
            table.add_row("●" if info.slug == current else "", info.slug, info.state, turns,
                          info.compacted, size_text(info.size), activity_text(info.last_activity),
                          clip(info.title, TITLE_CHARS), key=info.slug)
        if keep in self.sessions:
            table.move_cursor(row=table.get_row_index(keep), animate=False)
        live = sum(1 for i in listed if i.state == "live")
        title = f"Sessions · {live} live · {len(listed) - live} archived"
        if self.hidden_empty:
            title += f" · {self.hidden_empty} empty not listed"
        if needle:
            title += f" · {len(shown)} match {needle!r}"
        self.query_one("#sessions-title", Static).update(title)
        if not listed:
            self.query_one("#sessions-detail", Static).update("no sessions yet: the chat starts one")
        elif not shown:
            self.query_one("#sessions-detail", Static).update(f"no session's slug or title holds {needle!r}")
        self._describe()

    @on(Input.Changed, "#sessions-filter")
    def _filter_changed(self) -> None:
        if self.team:
            self._show_team(self._team_rows)
        else:
            self._show(self._all)

    @on(Input.Submitted, "#sessions-filter")
    def _filter_done(self) -> None:
        self.table.focus()

    def action_focus_filter(self) -> None:
        self.query_one("#sessions-filter", Input).focus()

    @on(DataTable.RowHighlighted, "#sessions-table")
    def _describe(self) -> None:
        if (row := self._teammates_session()) is not None:  # whose and where, in full: a narrow table clips it
            lines = f"{row['lines']} line{'' if row['lines'] == 1 else 's'}"
            self.query_one("#sessions-detail", Static).update(
                f"{row['slug']} · {row['author']} at {row['origin']} · {lines}\n"
                "a teammate's session, read-only (`workstation session search TEXT --team`)")
            return
        info = self.selected
        if info is None:
            return
        facts = [f"{info.slug} · {info.state} · {info.turns} turn{'' if info.turns == 1 else 's'}"]
        if info.covered_turns:
            facts.append(f"turns {info.compacted} summarized")
        if info.taken_back:
            facts.append(f"↶ {info.taken_back} taken back by /rewind")
        if info.problems:
            facts.append(f"{info.problems} unreadable lines")
        if info.slug == self.current:
            facts.append("open in the chat")
        lines = [" · ".join(facts)]
        if info.title:
            lines.append(info.title)
        if info.changed:
            shown = ", ".join(info.changed[:8]) + (f" and {len(info.changed) - 8} more" if len(info.changed) > 8 else "")
            lines.append(f"changed {len(info.changed)} file{'s' if len(info.changed) != 1 else ''}: {shown}")
        self.query_one("#sessions-detail", Static).update("\n".join(lines))

    # ---------------------------------------------------------------- actions
    @on(DataTable.RowSelected, "#sessions-table")
    def _row_chosen(self) -> None:
        self.action_resume()

    def action_close(self) -> None:
        if self.query_one("#sessions-filter", Input).has_focus:  # escape in the filter: back to the list
            self.table.focus()
            return
        self.dismiss()

    def action_resume(self) -> None:
        info = self.selected
        if info is None:
            return
        if info.slug == self.current:
            self.dismiss()
            return
        if info.state == "archived":
            self._confirm(f"Session {info.slug} is archived.\n\nRestore it to the live folder and resume it?",
                          lambda: self._restore(info.slug, resume=True))
            return
        self._resume(info.slug)

    def _resume(self, slug: str) -> None:
        self.app.post_message(self.ResumeRequested(slug))  # not via this screen: it is closing
        self.notify(f"resuming {slug}")
        self.dismiss()

    def action_replay(self) -> None:
        info = self.selected
        if info is not None:
            self.status.set(left=f"loading {info.slug} for replay…")
            self._load_episode(info.slug)

    @work(thread=True, exit_on_error=False, group=WORKER_GROUP, name="load episode")
    def _load_episode(self, slug: str) -> None:
        episode = Episode.load(self.workspace.paths, slug, config=self.workspace.config)
        self.app.call_from_thread(self._open_replay, episode)

    def _open_replay(self, episode) -> None:
        self.status.set(left="")
        self.app.push_screen(ReplayScreen(episode))

    def action_reflect(self) -> None:
        from .reflection import ReflectionScreen  # lazy: plotext, +60 ms on opening this screen

        info = self.selected
        if info is not None:
            self.app.push_screen(ReflectionScreen(self.workspace, session=info.slug))

    def action_compact(self) -> None:
        info = self.selected
        if info is None:
            return
        if info.state == "archived":
            self.notify(f"{info.slug} is archived (summarized when it was archived); restore it to compact it",
                        severity="warning")
            return
        self.status.set(left=f"reading {info.slug}…")
        self._ask_compaction(info.slug)

    @work(thread=True, exit_on_error=False, group=WORKER_GROUP, name="plan compaction")
    def _ask_compaction(self, slug: str) -> None:
        """Read the session, then ask how many turns to keep, showing what each choice covers."""
        view = Session.open(self.workspace.paths, slug).read()
        config = self.workspace.config

        def covers(keep: int) -> tuple[int, int] | None:
            plan = plan_compaction(view, config, force=True, keep=keep)
            return None if plan is None else (plan.first_turn, plan.last_turn)

        turns = number_turns(view.records).count
        if covers(0) is None:
            self._done(f"nothing to compact in {slug}: " + (
                f"all {turns} turns are summarized already" if turns > 1 else
                "its turn is summarized already" if turns else "it has no turns yet"), reload=False)
            return

        def ask() -> None:
            self.status.set(left="")
            dialog = CompactScreen(slug, turns, config.memory.keep_recent, covers)
            self.app.push_screen(dialog, lambda keep: None if keep is None else self._compact(slug, keep))

        self.app.call_from_thread(ask)

    @work(thread=True, exit_on_error=False, group=WORKER_GROUP, name="compact")
    def _compact(self, slug: str, keep: int) -> None:
        ws = self.workspace
        self._working(f"compacting {slug}…")
        with self._episodic("sessions screen: compact") as episodic:
            result = compact_now(Session.open(ws.paths, slug), ws.config, episodic, keep=keep)
        self._done(result.describe(), severity="information" if result.ok or result.status == "nothing" else "error")

    def action_archive(self) -> None:
        info = self.selected
        if info is None:
            return
        if info.state == "archived":
            self.notify(f"{info.slug} is archived already", severity="warning")
            return
        if info.slug == self.current:
            self.notify(f"{info.slug} is open in the chat: resume another session before archiving it",
                        severity="warning")
            return
        self._confirm(f"Archive {info.slug}?\n\nIt is summarized (if a compact model answers), compressed and "
                      "moved to the archive; restore brings it back.", lambda: self._archive(info.slug))

    @work(thread=True, exit_on_error=False, group=WORKER_GROUP, name="archive")
    def _archive(self, slug: str) -> None:
        ws = self.workspace
        self._working(f"archiving {slug}…")
        with self._episodic("sessions screen: archive") as episodic:
            result = archive(ws.paths, slug, ws.config, episodic=episodic)
        compaction = result.compaction
        if compaction is not None and not compaction.ok:
            self._done(f"archived {slug} without a fresh summary: {compaction.reason}", severity="warning")
        else:
            self._done(f"archived {slug} to {result.path}")

    def action_restore(self) -> None:
        info = self.selected
        if info is None:
            return
        if info.state != "archived":
            self.notify(f"{info.slug} is live already", severity="warning")
            return
        self._confirm(f"Restore {info.slug} from the archive to the live sessions?",
                      lambda: self._restore(info.slug))

    @work(thread=True, exit_on_error=False, group=WORKER_GROUP, name="restore")
    def _restore(self, slug: str, resume: bool = False) -> None:
        self._working(f"restoring {slug}…")
        session = restore(self.workspace.paths, slug)
        self._done(f"restored {slug} to {session.path}")
        if resume:
            self.app.call_from_thread(self._resume, slug)

    def action_export(self, fmt: str) -> None:
        info = self.selected
        if info is not None:
            self._export(info.slug, fmt)

    @work(thread=True, exit_on_error=False, group=WORKER_GROUP, name="export")
    def _export(self, slug: str, fmt: str) -> None:
        text = export(self.workspace.paths, slug, fmt)
        folder = self.workspace.paths.state / "exports"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{slug}.{fmt}"
        atomic_write(path, text.encode(), mode=0o600)  # logs may quote private files
        self.last_export = str(path)
        self._done(f"exported {slug} to {path}", reload=False)

    # ---------------------------------------------------------------- helpers
    def _confirm(self, question: str, then: Callable[[], Any]) -> None:
        def answered(yes: bool | None) -> None:
            if yes:
                then()

        self.app.push_screen(ConfirmScreen(question), answered)

    def _episodic(self, flow: str):
        """An episodic recorder so compactions show in reflection; flushed when the operation ends."""
        return closing(Episodic(self.workspace.db, flow=flow))

    def _working(self, text: str) -> None:
        """From a worker thread: say what is running."""
        self.app.call_from_thread(self.status.set, text, time.strftime("%H:%M:%S"))

    def _done(self, text: str, *, severity: str = "information", reload: bool = True) -> None:
        """From a worker thread: report the outcome and show the list as it is now."""

        def show() -> None:
            self.status.set(text, time.strftime("%H:%M:%S"))
            self.notify(text, severity=severity, timeout=8 if severity == "information" else 12)
            if reload and self.is_attached:
                self._load()

        self.app.call_from_thread(show)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if not event.worker.group.startswith(WORKER_GROUP) or event.state != WorkerState.ERROR:
            return
        event.stop()
        error = event.worker.error
        first = (str(error).strip().splitlines() or [""])[0]
        text = f"{event.worker.name} failed: {first or type(error).__name__}"
        self.status.set(text, time.strftime("%H:%M:%S"))
        self.notify(text, severity="error", timeout=12)
        if event.worker.name != "list sessions":
            self._load()  # a failed change may still have moved files: show what is there
