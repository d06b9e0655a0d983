"""The live backend: serves the panes' requests from the core (a `seam.Backend`).

Every request method runs in a thread worker (the app's `_forward`), so it may
block on DuckDB, the file system or the model; data goes back to the panes
through `app.call_from_thread`. Nothing here imports textual widgets, and the
core's heavy modules load inside `start`, after the first paint.

The agents are built and run by the session host (workstation.host, as ACP and `workstation chat`
have theirs): the workspace's MCP servers (started at start beside the rest, closed after the last
agent), the compaction policy, the turn's events; the agents get the servers' tools; the chat shows the agent's plan as it writes it
(`host.Plan`) and the repository's branch and dirty count, read with git in a worker
after every turn and slash command (`refresh_git`: 70-150 ms, never on the UI thread).

The chat shows the records a turn writes as it writes them (liveturn.LiveTurn), with their ids as
resumed ones have, so the timeline can move the chat to any of them. One agent turn runs at a time
(`_busy`); whatever replaces the chat's session (resume, /new, /archive) waits for none: it is refused
while a turn runs, with the way to stop it.
What another process appends to the session (the sidecar's compactions) shows as it lands (outside.Outside).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from ..errors import WorkstationError
from . import history
from .liveturn import LiveTurn, record_time
from .outside import Outside
from .viewdata import MemoryEntry, SlashCommand, Turn

if TYPE_CHECKING:
    from ..agent.approval import ApprovalRequest
    from ..agent.loop import Agent
    from ..host import Host, HostedSession
    from ..mcp.client import McpToolset
    from ..runtime import Workspace
    from ..sessions.log import Session
    from .app import WorkstationApp
    from .mapfeed import MapFeed
    from .messages import (ModeCycleRequested, NewSessionRequested, PlanAnswered, ResumeSessionRequested,
                           ThemeChanged)
    from .panes.chat import ChatPane
    from .panes.map import MapPane
    from .panes.memory import MemoryPane
    from .screens.sessions import SessionsScreen

log = logging.getLogger(__name__)

TIMELINE_LIMIT = 2000
PREVIEW_LINES = 80
# slash commands that change the session itself: never while a turn writes to it
SESSION_COMMANDS = frozenset({"/archive", "/new", "/clear", "/compact", "/uncompact", "/pin"})
WORKING = "the agent is working: escape stops it"
SESSION_CHANGE_WAIT_S = 30.0  # a message sent while the session changes waits this long to land in the new one
TEAM_BADGE_S = 2.0  # how often the status line's team badge looks at the sync state the sidecar notes


class LiveBackend:
    def __init__(self, root: str, *, model: str | None = None, session: str | None = None,
                 sidecar: bool = True):
        self.root = root
        self.model = model
        self.resume_slug = session  # the session to open at start (None: a new one)
        self.with_sidecar = sidecar
        self.app: WorkstationApp | None = None
        self.ws: Workspace | None = None
        self.host: Host | None = None  # the session host: the MCP servers' tools beside the built-in ones
        self.hosted: HostedSession | None = None  # the chat's session and its agent
        self._toolset_lock = threading.Lock()  # start hands the host over while stop may be closing
        self.map_feed: MapFeed | None = None
        self.sidecar = None
        self._cancel = threading.Event()  # stops the running turn (escape)
        self._closing = threading.Event()  # the app is closing: every background job stops
        self._busy = threading.Lock()  # one agent turn (or session change) at a time
        self._changing = threading.Event()  # set while `_busy` is held for a session change, not a turn
        self._ready = threading.Event()
        self.fatal: Exception | None = None  # set when the workspace cannot be opened at all
        self._bill = None  # costs.billing.Bill of the chat's session (refresh_bill)
        self._turn_count = 0  # turns of the chat's session so far (sessions.turns): the next user message's is +1
        self.outside = Outside(self)  # what another process (the sidecar) appends to the session, shown as it lands

    # ------------------------------------------------------------------ seam.Backend facts
    @property
    def agent(self) -> Agent | None:
        return self.hosted.agent if self.hosted is not None else None

    @property
    def toolset(self) -> McpToolset | None:
        """The MCP servers' tools beside the built-in ones, for every agent (None: not started, or closed)."""
        return self.host.toolset if self.host is not None else None  # type: ignore[return-value]

    @property
    def workspace(self) -> Workspace | None:
        return self.ws if self._ready.is_set() else None

    @property
    def session_slug(self) -> str | None:
        agent = self.agent
        return agent.session.slug if agent is not None else None

    @property
    def busy(self) -> bool:
        """A turn or a session change holds the chat's session."""
        return self._busy.locked()

    @property
    def closing(self) -> bool:
        """The app is closing: every background job stops."""
        return self._closing.is_set()

    def recount_turns(self, records: list[dict]) -> None:
        """The chat session's turns counted again from its records (another app's user message is a turn too)."""
        from ..sessions.turns import count  # lazy: the sessions stack; loaded by then

        self._turn_count = count(records)

    # ------------------------------------------------------------------ lifecycle
    def ui(self, fn, *args, **kwargs):
        """Run `fn` on the UI thread (from a worker: every widget is touched there) and return what it returns."""
        return self.app.call_from_thread(fn, *args, **kwargs)

    def show_screen(self, make, answered=None):
        """Show the screen `make()` builds, built on the UI thread as every widget is (a message pump made on
        a worker thread takes that thread for its own); returns the screen."""
        def push():
            screen = make()
            self.app.push_screen(screen, answered)
            return screen

        return self.ui(push)

    def warn(self, text: str) -> None:
        """One line for the user, from any thread."""
        self.ui(self.app.notify, text, severity="warning", timeout=10)

    def start(self, app: WorkstationApp) -> None:
        from ..commands import slash  # lazy: the agent stack, +170 ms; start runs after the first paint
        from ..runtime import Workspace  # lazy: the config and its validation, ~60 ms; start runs after the first paint
        from ..sessions.log import Session, track_own_writes  # lazy: the sessions stack, +32 ms; off the first paint
        from .mapfeed import MapFeed  # lazy: the index and watchdog, +40 ms; off the first paint

        self.app = app
        track_own_writes()  # before any: what this app did not write is what the chat must be told of
        config_notices: list[str] = []  # an untrusted workspace's ignored settings (workstation.trust), ...
        try:
            self.ws = ws = Workspace(self.root, model=self.model, on_warning=config_notices.append)
        except WorkstationError as err:  # bad config, unreadable store: the CLI prints it after exit
            self.fatal = err
            self.ui(app.exit)
            return
        custom = slash.custom_help(ws.skills)
        self.ui(app.chat.set_commands, [SlashCommand(u.split()[0], " ".join(u.split()[1:]), h)
                                         for u, h in [*slash.HELP.items(), *custom]])
        mcp_notices: list[str] = []
        opened: list = []
        mcp = threading.Thread(target=self._open_mcp, args=(opened, mcp_notices), name="mcp-start", daemon=True)
        mcp.start()  # servers start while the sidecar and the session open
        if ws.config.mcp.servers:
            self.ui(app.chat.set_status, f"starting MCP servers: {', '.join(ws.config.mcp.servers)} …")
        try:
            if self.with_sidecar:
                from ..sidecar import start_sidecar  # lazy: the sessions stack, +40 ms; off the first paint

                self.sidecar = start_sidecar(ws.paths, model=self.model)
            if self.resume_slug:
                session = Session.open(ws.paths, self.resume_slug)
            else:
                session = Session.create(ws.paths, title="chat")
        except BaseException:  # no agent will use the servers: they stop before the error is shown
            mcp.join()
            for toolset in opened:
                toolset.close()
            raise
        mcp.join()
        if opened and not self._keep_host(opened[0]):
            opened[0].close()  # the app closed meanwhile: its servers stop here
            return
        if self.host is None:  # the servers did not start: the agents go without them
            from ..host import Host  # lazy: loaded by _open_mcp already

            self.host = Host(ws)
        self.hosted = self._agent_on(session, self.model)
        self._ready.set()
        self._show_session([Turn("notice", line) for line in [*config_notices, *mcp_notices]])
        if not self.resume_slug:
            self._offer_last()
        for line in config_notices:
            self.warn(line)
        self._offer_trust()
        self.refresh_git()
        self.map_feed = MapFeed(ws.kmap, app.map, self.ui, self.warn, self._closing,
                                job=lambda text: self.ui(app.chat.set_job, text), paths=app.chat.set_files)
        self.map_feed.start()
        self.map_feed.describe()
        threading.Thread(target=self._say_sandbox, name="sandbox-probe", daemon=True).start()
        threading.Thread(target=self.outside.watch, args=(self._closing,), name="session-watch", daemon=True).start()
        if ws.config.team.enabled:
            threading.Thread(target=self._follow_team, name="team-badge", daemon=True).start()

    def _offer_last(self) -> None:
        history.offer_last(self)

    def _offer_trust(self) -> None:
        """A workspace whose own settings were ignored (workstation.trust): ask whether to trust it. They
        apply the next time it opens (its MCP servers, allow-list and sandbox are set up at start)."""
        from .. import config as config_mod  # lazy: loaded already by the workspace; here for the verdict
        from .. import trust  # lazy: as above
        from .screens.confirm import ConfirmScreen  # lazy: the backend loads no widget (module docstring)

        verdict, _ = config_mod.inspect(self.root)
        if verdict.trusted or not verdict.ignored:
            return
        why = ("is not the folder you trusted (made anew since)" if verdict.replaced else
               "changed since you trusted it" if verdict.changed else "came with settings of its own")
        question = (f"{verdict.root} {why}, ignored until you trust it:\n{', '.join(verdict.ignored)}\n\n"
                    "Trust this folder? They apply the next time you open it (model endpoints and keys never "
                    "come from a workspace; `workstation trust --revoke` undoes it).")
        if verdict.steering:
            question += (f"\n\nIts {' and '.join(verdict.steering)} reach the model either way, as the repository's "
                         "instructions, not yours.")

        def answered(ok: bool | None) -> None:
            if not ok:
                return
            try:
                config_mod.check_workspace(verdict.root)  # its mistakes are fixed before it is trusted
                trust.grant(verdict.root, verdict.digest)
            except WorkstationError as err:
                self.app.notify(str(err), severity="error")
                return
            self.app.notify(f"trusted {verdict.root}: its settings apply when you open it again", timeout=10)

        self.show_screen(lambda: ConfirmScreen(question, yes="Trust", no="Not now"), answered)

    def _open_mcp(self, opened: list, notices: list[str]) -> None:
        """Start the configured MCP servers (each that fails is a line in `notices`); on a thread of its own,
        as a server may take its whole startup_timeout_s."""
        from ..host import Host  # lazy: the agent's tools and pydantic, +300 ms; off the first paint

        try:  # the app stays after a turn: compactions may run in the background
            opened.append(Host.open(self.ws, on_notice=notices.append))
        except Exception as err:  # the agent works without them; say why they are missing
            notices.append(f"MCP servers not started: {type(err).__name__}: {err}")

    def _keep_host(self, host: Host) -> bool:
        """Hand the started host to the backend; False when the app is closing (then the caller closes it)."""
        with self._toolset_lock:
            if self._closing.is_set():
                return False
            self.host = host
            return True

    def refresh_git(self) -> None:
        """The repository's branch and dirty count beside the gauge (none outside a repository). git runs
        as a subprocess for 70-150 ms: called from the backend's worker threads only."""
        from .. import git  # lazy: +6 ms; off the first paint

        found = git.status(self.ws.root)
        if not self._closing.is_set():
            self.ui(self.app.chat.set_git, found.label if found is not None else "")
        if self.ws.config.team.enabled and not self._closing.is_set():  # the state the sidecar's push noted
            from ..team.sync import state_label  # lazy: the team package, only with [team]

            self.ui(self.app.chat.set_team, state_label(self.ws.db))

    def _follow_team(self) -> None:
        """The status line's team badge follows the sync state the sidecar's pushes note (a server back: `team ↑`
        at the next push), not only the next turn's refresh_git. One read of the replica's state table."""
        from ..team.sync import state_label  # lazy: the team package, only with [team]

        shown = None
        while not self._closing.wait(TEAM_BADGE_S):
            try:
                label = state_label(self.ws.db)
            except Exception as err:  # the store closing under the app (then nothing to say), or broken: say it
                if not self._closing.is_set():
                    self.warn(f"the team badge stopped following the sync state: {type(err).__name__}: {err}")
                return
            if label != shown:
                self.ui(self.app.chat.set_team, label)
                shown = label

    def _say_sandbox(self) -> None:
        """Say at start which sandbox commands will run in, or why none (then every command asks): the
        probe behind it runs commands, so it runs off the first paint and the agent's way."""
        from .. import sandbox  # lazy: +4 ms; off the first paint

        found = sandbox.status(sandbox.Policy.for_workspace(self.ws.paths, self.ws.config.agent))
        if not self._closing.is_set():
            self.ui(self.app.notify, found.line, title="sandbox",
                     severity="information" if found.full else "warning", timeout=8)

    def stop(self) -> None:
        self._closing.set()
        self._cancel.set()
        if self.map_feed is not None:
            self.map_feed.stop()
        if self.sidecar is not None:
            from ..sidecar import stop_sidecar  # lazy: the sessions stack, +40 ms; off the first paint

            stop_sidecar(self.sidecar)
        if self.hosted is not None:
            self._leave(self.hosted)
        with self._toolset_lock:
            host = self.host
        if host is not None:
            host.close()  # after the agent: no call of its MCP servers may be left running
        if self.ws is not None:
            self.ws.close()

    # ------------------------------------------------------------------ sessions
    def _agent_on(self, session: Session, model: str | None) -> HostedSession:
        assert self.host is not None  # set at start, before the first session
        return self.host.session(session, approve=self._approve, model=model, cancel=self._cancel)

    @staticmethod
    def _leave(hosted: HostedSession) -> None:
        """Close an agent; a session in which nothing was said leaves no file behind."""
        hosted.close()

    def _switch(self, session: Session) -> None:
        """Put the chat on `session` (the caller holds `_busy`): a fresh agent, its whole conversation."""
        assert self.hosted is not None
        old, self.hosted = self.hosted, self._agent_on(session, self.hosted.agent.model_name)
        self._leave(old)
        self._show_session()

    def _show_session(self, turns: list[Turn] | None = None) -> None:
        """The session's whole conversation (compactions included), scrolled to the end, then what
        `turns` adds; its plan while some of it is open; its status line, memory and timeline."""
        from ..mcp.client import servers_of  # lazy: the agent's tools and pydantic, +300 ms; off the first paint
        from ..sessions import plan  # lazy: the sessions stack, +35 ms; off the first paint

        from ..sessions.modelview import seen  # lazy: the sessions stack, +32 ms; off the first paint
        from ..sessions.turns import count  # lazy: as above

        chat = self.app.chat
        view = self.agent.session.read()
        records = view.records
        self._turn_count = count(records)
        self.outside.reset(len(records))
        self.ui(chat.set_turns, self._transcript(view) + (turns or []))
        items = plan.current(seen(view).records) or []  # a rewound turn's plan is not the plan in force
        self.ui(chat.set_plan, items if any(item["status"] != "done" for item in items) else [])
        agent = self.agent
        model = agent.model_name
        servers = servers_of(self.toolset)
        ready = sum(1 for server in servers if server.state == "ready")
        mcp = f" · MCP {ready} of {len(servers)} servers" if servers else ""
        line = self._billed(records)
        status = (f"session {agent.session.slug} · model {model}{mcp}" if model else
                  f"session {agent.session.slug}{mcp} · no model: set [model] name in ~/.config/workstation/"
                  "config.toml or WORKSTATION_MODEL (slash commands work without one)")
        budget = self._budget_left()
        mode = self.hosted.mode
        self.ui(lambda: (chat.set_bill(line), chat.set_budget(budget), chat.set_status(status),
                          chat.set_mode(mode)))  # one trip to the UI thread
        self.refresh_memory()
        self.refresh_timeline()
        # the window may ask litellm (seconds, the first time): the rest of start does not wait for the gauge
        threading.Thread(target=self.refresh_context, name="context-gauge", daemon=True).start()

    def turn_started(self) -> int:
        """The number of the turn whose user message was just recorded (sessions.turns)."""
        self._turn_count += 1
        return self._turn_count

    def _show_taken_back(self) -> None:
        history.show_taken_back(self)

    def _billed(self, records: list[dict]) -> str:
        """The status line's bill of a session's records (costs.billing.Bill.line), kept for count_call."""
        from ..costs import billing  # lazy: the sessions stack and the price map, +100 ms; off the first paint

        self._bill = billing.bill(records)
        return self._bill.line()

    def refresh_bill(self) -> None:
        """The session's cost as billed and its last request's cache hit in the status line, from its whole
        log (compactions included); worker threads only. A turn's steps add to it as they are recorded."""
        before = self._bill.line() if self._bill is not None else None
        line = self._billed(self.agent.session.read().records)
        if line != before:
            budget = self._budget_left()
            self.ui(lambda: (self.app.chat.set_bill(line), self.app.chat.set_budget(budget)))

    def refresh_context(self) -> None:
        """The gauge: the next request's size as the agent's guard measures it (an estimate before the session's
        first request) against the model's window; worker threads only (the window may ask litellm)."""
        agent = self.agent
        if agent is None or self._closing.is_set():
            return
        window = agent.context_window(agent.model_name) if agent.model_name else 0
        tokens, measured = agent.next_request_size()
        self.ui(self.app.chat.set_context, tokens, window, estimated=not measured)

    def count_call(self, record: dict) -> None:
        """A model call the running turn recorded: its cost and cache hit into the status line at once."""
        from ..costs import billing  # lazy: loaded by refresh_bill already

        if self._bill is not None:
            billing.add(self._bill, record)
            line, budget = self._bill.line(), self._budget_left()
            self.ui(lambda: (self.app.chat.set_bill(line), self.app.chat.set_budget(budget)))

    def _budget_left(self) -> str:
        """What is left of agent.max_budget_usd as billed ("$4.21 of $5.00 left"); "" with no budget."""
        limit = self.ws.config.agent.max_budget_usd if self.ws is not None else 0.0
        if not limit or self._bill is None:
            return ""
        left = max(0.0, limit - self._bill.total.cost_usd)
        return f"${left:.2f} of ${limit:.2f} left" if left else f"budget ${limit:.2f} spent"

    def _transcript(self, view) -> list[dict]:
        """The chat turns of the records `view` holds (the ones `outside` counts as shown), as replay has them."""
        from ..replay import Episode  # lazy: replay and the agent's tools, +100 ms; off the first paint

        if not view.records:
            return []
        episode = Episode(self.agent.session.slug, view, config=self.ws.config)
        return [turn for index in range(len(episode)) for turn in episode.transcript_of(index)]

    def _take_the_chat(self) -> bool:
        """Take `_busy` for a session change; False (and says why) while a turn runs. `_give_back`
        ends the change."""
        if self._busy.acquire(blocking=False):
            self._changing.set()
            return True
        self.warn(f"{WORKING}, then try again")
        return False

    def _give_back(self) -> None:
        self._busy.release()
        self._changing.clear()

    def on_sessions_screen_resume_requested(self, request: SessionsScreen.ResumeRequested) -> None:
        """Switch the chat to another session: a fresh agent on it, its transcript, its history."""
        self._resume(request.slug)

    def on_resume_session_requested(self, request: ResumeSessionRequested) -> None:
        """The launch's offer taken: the chat goes on in the last session (the new one, still empty, goes)."""
        self._resume(request.slug)

    def _resume(self, slug: str) -> None:
        from ..sessions.log import Session  # lazy: the sessions stack, +32 ms; off the first paint

        self._ready.wait()
        if not self._take_the_chat():
            return
        try:
            self._switch(Session.open(self.ws.paths, slug))
        finally:
            self._give_back()

    def on_new_session_requested(self, request: NewSessionRequested) -> None:
        """The palette's New session (ctrl+n): `/new`, its line in the chat as if typed."""
        self._ready.wait()
        self._run_command("/new", "", "/new")

    # ------------------------------------------------------------------ knowledge map
    def on_map_pane_children_requested(self, request: MapPane.ChildrenRequested) -> None:
        self._ready.wait()
        self.ui(self.app.map.set_children, request.path, self.map_feed.children(request.path))

    def on_map_pane_symbols_requested(self, request: MapPane.SymbolsRequested) -> None:
        self._ready.wait()
        self.ui(self.app.map.set_symbols, request.path, self.map_feed.symbols(request.path))

    def on_map_pane_file_selected(self, request: MapPane.FileSelected) -> None:
        from ..agent.tools.fileio import read_lines  # lazy: re2, +17 ms; off the first paint

        self._ready.wait()
        purpose = next((f.purpose for f in self.ws.kmap.files() if f.path == request.path), "")
        head = read_lines(self.ws.root, request.path, 1, PREVIEW_LINES)
        self.ui(self.app.map.show_preview, request.path, 1, head.end, head.text, purpose=purpose)

    def on_map_pane_symbol_selected(self, request: MapPane.SymbolSelected) -> None:
        from ..agent.tools.fileio import read_lines  # lazy: re2, +17 ms; off the first paint

        self._ready.wait()
        lines = read_lines(self.ws.root, request.path, request.start, request.end)
        self.ui(self.app.map.show_preview, request.path, request.start, request.end, lines.text)

    # ------------------------------------------------------------------ chat
    def _approve(self, request: ApprovalRequest) -> bool:
        """Ask the user in the app; the agent's thread waits for the answer, or for escape."""
        from .screens.confirm import ConfirmScreen  # lazy: the backend loads no widget (module docstring)

        chat = self.app.chat
        answer = threading.Event()
        verdict: list[bool | str] = []

        def done(ok: bool | str | None) -> None:
            verdict.append(ok if ok == "always" else bool(ok))
            answer.set()

        pattern = self._always_pattern(request)
        question = request.question()
        self.ui(self.app.ring, f"workstation needs your approval: {request.subject}")
        doing = self.ui(lambda: chat.activity)
        self.ui(chat.set_activity, "approval", request.subject)
        screen = self.show_screen(lambda: ConfirmScreen(question, always="Always" if pattern else None), done)
        while not answer.wait(0.05):
            if self._closing.is_set():
                return False  # the app is gone: nobody can answer
            if self._cancel.is_set():  # escape reached the chat before the dialog had the focus
                self.ui(self._withdraw, screen)
                return False
        if doing is not None:
            self.ui(chat.set_activity, *doing)
        if verdict[0] == "always" and pattern:
            self._allow_always(pattern)
        return bool(verdict[0])

    def _always_pattern(self, request: ApprovalRequest) -> str | None:
        return history.always_pattern(self.root, request)

    def _allow_always(self, entry: str) -> None:
        history.allow_always(self, entry)

    def _withdraw(self, screen) -> None:
        if self.app.screen is screen:
            screen.dismiss(False)

    def on_chat_pane_submitted(self, request: ChatPane.Submitted) -> None:
        self._ready.wait()
        self._send(request.text)

    def _send(self, text: str) -> None:
        """`text` to the agent: one turn."""
        self._turn(text, lambda sink: self.hosted.run(text, sink))

    def on_plan_answered(self, request: PlanAnswered) -> None:
        """The user's answer to the plan a turn in plan mode ended with (agent.modes): approved (maybe as
        edited), the mode goes back to the one before plan and a turn carries it out; rejected, it stays."""
        self._ready.wait()
        if request.verdict == "approve":
            self._turn(request.plan, lambda sink: self.hosted.approve_plan(request.plan, sink,
                                                                            edited=request.edited),
                       before=lambda: self.ui(self.app.chat.set_mode, "edits" if self.hosted.mode == "plan"
                                               else self.hosted.mode))
            return
        if not self._busy.acquire(blocking=False):
            self.warn(f"{WORKING}, then answer the plan again")
            return
        try:
            mode = self.hosted.reject_plan()
        finally:
            self._busy.release()
        self.ui(self.app.chat.add_turn, Turn("notice", "plan rejected: nothing changed; the mode stays "
                                              f"{mode} (say what to do instead, or shift+tab to switch)"))

    def on_mode_cycle_requested(self, request: ModeCycleRequested) -> None:
        """Shift+Tab: the next permission mode; it holds from the agent's next tool call."""
        self._ready.wait()
        mode = self.hosted.cycle_mode()
        self.ui(self.app.chat.set_mode, mode)

    def _turn(self, text: str, run, before=None) -> None:
        """One agent turn (`run(sink)` -> TurnResult) under the one-turn lock, shown as it goes; then the
        terminal rings, and a plan the turn ended with goes to the user."""
        chat = self.app.chat
        if self.app.resume_offer is not None:  # the user goes on in the new session: the offer lapses
            self.ui(self.app.offer_resume, None)
        # what is typed while the session changes (the user just saw "a new session") waits for the new one
        if not (self._busy.acquire(blocking=False) or
                (self._changing.is_set() and self._busy.acquire(timeout=SESSION_CHANGE_WAIT_S))):
            self.ui(chat.add_turn, Turn("notice", f"{WORKING} (or wait for its answer)"))
            return
        result = None
        try:
            self.outside.catch_up(turn=True)  # what the sidecar wrote since comes before this turn
            self._cancel.clear()
            if before is not None:
                before()
            self.ui(chat.set_activity, "busy", "")
            turn = LiveTurn(self, chat)
            try:
                result = run(turn.heard)
            except WorkstationError as err:  # refused before it began (no model, empty message)
                self.ui(chat.discard_reply)
                if not turn.wrote_user:
                    self.ui(chat.add_turn, Turn("user", text, ts=time.time()))
                self.ui(chat.add_turn, Turn("error", str(err)))
        finally:
            self._busy.release()
            self.ui(chat.set_activity, "idle", "")
            items = self.ui(lambda: chat.plan)
            if items and all(item["status"] == "done" for item in items):
                self.ui(chat.set_plan, [])  # the plan is carried out: its todo calls stay in the transcript
            self.refresh_bill()
            self.refresh_context()
            self.refresh_memory()
            self.refresh_timeline()
            self.refresh_git()
        self.ui(chat.set_mode, self.hosted.mode)
        if result is not None:
            self._turn_over(result)

    def _turn_over(self, result) -> None:
        """Call the user back: the plan to approve, or the turn's end (the terminal rings, and the
        Notification hook hears it)."""
        if result.plan:
            from .messages import PlanAnswered  # lazy: textual's messages, as the widgets (module docstring)
            from .screens.plan import PlanScreen  # lazy: the backend loads no widget (module docstring)

            message = "workstation: a plan waits for your approval"
            self.ui(self.app.ring, message)
            self.hosted.notify(message, "permission_prompt")

            def answered(answer) -> None:
                if answer is not None:
                    self.app.post_message(PlanAnswered(*answer))

            self.show_screen(lambda: PlanScreen(result.plan), answered)
            return
        message = ("workstation: the turn stopped: " + result.error) if result.error else \
            "workstation: the agent finished; it waits for your input"
        self.ui(self.app.ring, message)
        self.hosted.notify(message, "idle_prompt")

    def on_chat_pane_cancel_requested(self, request: ChatPane.CancelRequested) -> None:
        self._cancel.set()

    def on_chat_pane_command_submitted(self, request: ChatPane.CommandSubmitted) -> None:
        self._ready.wait()
        self._run_command(request.name, request.args, request.text)

    def _run_command(self, name: str, args: str, text: str) -> None:
        """A slash command line (`text`: `name` and its `args`) as typed."""
        from ..commands import slash  # lazy: the agent stack, +170 ms; off the first paint

        if slash.is_custom(self.agent, text):  # a custom command: its body is the message
            self._send(text)
            return
        if name == "/rewind" and not args:
            self._pick_rewind()
            return
        if name not in SESSION_COMMANDS:
            self._command(name, text)
        elif not self._busy.acquire(blocking=False):
            self.ui(self.app.chat.add_turn, Turn("error", f"{WORKING}, then {name} again"))
        else:
            self._changing.set()
            try:
                self._command(name, text)
            finally:
                self._give_back()
        self.refresh_bill()
        self.refresh_context()  # /compact, /uncompact, /rewind... change what the next request holds
        self.refresh_memory()
        self.refresh_timeline()
        self.refresh_git()

    def _pick_rewind(self) -> None:
        history.pick_rewind(self)

    def _command(self, name: str, text: str) -> None:
        with self.outside.command():  # it shows what it writes (and what another process wrote meanwhile)
            self._slash(name, text)

    def _slash(self, name: str, text: str) -> None:
        from ..commands import slash  # lazy: the agent stack, +170 ms; off the first paint
        from ..agent import tools  # lazy: as above
        from ..sessions.transcript import command_asked, command_said, log_turns  # lazy: as above
        from ..sessions.log import Session  # lazy: the sessions stack, +32 ms; off the first paint

        chat = self.app.chat
        asked = command_asked(text, ts=time.time())  # shown at once; the answer when it comes
        at = self.ui(chat.add_turn, asked)
        alone = self._busy.locked() and name not in SESSION_COMMANDS  # a turn writes beside it
        before = len(self.agent.session.read().records)
        out = slash.run(self.agent, text)
        if out.action in ("new", "archived", "fork"):  # the chat moves to another session (a fork's: the original
            # stays as it was), which keeps the command as its first line: a resumed chat shows what this one does
            moved = (Session.open(self.ws.paths, out.slug) if out.action == "fork" and out.slug
                     else Session.create(self.ws.paths, title="chat"))
            slash.keep(moved, text, out)
            self._switch(moved)
            return
        if out.record is not None:  # what it wrote (its line and answer, an undo's note...) as resumed shows it
            records = self.agent.session.read().records
            start = next(i for i, r in enumerate(records) if r.id == out.record.id) if alone else before
            shown = log_turns(records, start, tools=tools, ts=record_time)
            self.outside.shown(records[start:])
            self.ui(chat.update_turn, at, shown[0])  # the line typed, then its answer and what it wrote
            self.ui(chat.add_turns, shown[1:])
        else:
            self.ui(chat.add_turn, command_said(out.text, out.ok, ts=time.time()))
        if out.action in ("rewound", "files"):  # what it took back is marked where it stands
            self._show_taken_back()
        if out.action == "model":
            self._show_session()

    def on_chat_pane_original_requested(self, request: ChatPane.OriginalRequested) -> None:
        from ..sessions.modelview import fetch_original  # lazy: the sessions stack, +36 ms; off the first paint

        turn = request.turn
        original = fetch_original(self.agent.session, turn.id)
        self.ui(self.app.chat.update_turn, turn.id,
                Turn(turn.role, turn.text, id=turn.id, ts=turn.ts, result=str(getattr(original, "content", "") or "")))

    # ------------------------------------------------------------------ memory and timeline
    def refresh_memory(self) -> None:
        memory = self.agent.memory
        pane = self.app.memory
        stm = [MemoryEntry(row["key"], row["value"]) for row in memory.list("stm", limit=1000)]
        ltm = [_ltm_entry(row) for row in memory.list("ltm", limit=1000)]
        self.ui(pane.set_entries, "stm", stm)
        self.ui(pane.set_entries, "ltm", ltm)
        self.ui(pane.set_frontier, self.frontier_data())

    def frontier_data(self) -> dict:
        """Where the session's work stands (sessions.frontier), {} before its first turn: the memory pane's tab."""
        from ..sessions.frontier import frontier  # lazy: the sessions stack; off the first paint

        found = frontier(self.agent.session.read(), counter=self.agent.session.counter)
        return found.as_dict() if found.turn else {}

    def refresh_timeline(self) -> None:
        from ..sessions.turns import taken_back  # lazy: the sessions stack, +32 ms; off the first paint

        from ..sessions.compaction import compaction_marks  # lazy: loaded with the sessions stack above

        events = self.agent.memory.episodic.query(session=self.agent.session.slug, limit=TIMELINE_LIMIT)
        records = self.agent.session.read().records
        marks = taken_back(records)
        compactions = compaction_marks(records)
        rows = [timeline_row(e, marks, compactions) for e in reversed(events) if e["type"] != "op_start"]
        self.ui(self.app.timeline.set_events, rows)
        self.ui(self.app.memory.set_events, rows)

    def on_memory_pane_edit_requested(self, request: MemoryPane.EditRequested) -> None:
        memory = self.agent.memory
        kwargs = {"namespace": request.namespace} if request.namespace and request.tier == "ltm" else {}
        memory.umem(request.tier, request.key, request.value, **kwargs)
        entry = MemoryEntry(request.key, request.value)
        if request.tier == "ltm":
            memory.fence("ltm")
            stored = [row for row in memory.list("ltm", namespace=request.namespace or None, prefix=request.key)
                      if row["key"] == request.key]
            entry = _ltm_entry(stored[0]) if stored else MemoryEntry(request.key, request.value,
                                                                     request.namespace)
        self.ui(self.app.memory.upsert, request.tier, entry)

    def on_theme_changed(self, request: ThemeChanged) -> None:
        """Remember the chosen theme where the theme in force was set: the workspace's config when it sets
        `ui.theme` (a SAFE key, workstation.trust), else the user's own config, so a look picked once holds
        in every workspace and a repository's config is not written for it. tomlkit keeps the formatting."""
        import tomlkit  # lazy: tomlkit, +9 ms; off the first paint

        from ..fsutil import atomic_write  # lazy: +4 ms; off the first paint

        if self.ws is None:
            return
        docs = []
        for path in (self.ws.paths.config_file, self.ws.paths.user_config_file):
            doc = tomlkit.parse(path.read_text()) if path.exists() else tomlkit.document()
            docs.append((path, doc))
        path, doc = next(((p, d) for p, d in docs if "theme" in d.get("ui", {})), docs[1])
        if doc.get("ui", {}).get("theme") == request.theme:
            return
        doc.setdefault("ui", tomlkit.table())["theme"] = request.theme
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, tomlkit.dumps(doc).encode())


def timeline_row(event: dict, marks: dict | None = None, compactions: dict | None = None) -> dict:
    """An episodic event as the timeline shows it: the turn it became (`data.turn_id`), its outcome, and
    what took that turn back (`marks`: sessions.turns.taken_back of the session's log); a compaction, what
    its summary replaced and whether /uncompact undid it (`compactions`: sessions.compaction.compaction_marks)."""
    data = dict(event.get("data") or {})
    turn_id = str(data.pop("turn_id", "") or "")
    name = event.get("name", "")
    if event.get("ok") is not None:
        data["ok"] = event["ok"]
    if marks and turn_id in marks:
        data["taken_back"] = marks[turn_id].describe()
    mark = (compactions or {}).get(str(data.get("record_id") or "")) if event["type"] == "compaction" else None
    if mark is not None:
        name = f"⊟ {mark['span']}"  # the summarized turns; the details say what they held
        data["replaced"] = mark["replaced"]
        if mark.get("undone"):
            data["taken_back"] = mark["undone"]
    return {"ts": event["ts"], "type": event["type"], "name": name,
            "duration_ms": event.get("duration_ms"),
            "tokens": (event.get("tokens_in") or 0) + (event.get("tokens_out") or 0) or None,
            "id": event["id"], "turn_id": turn_id, "session": event.get("session", ""), "details": data,
            "flow": "" if event.get("flow") in (None, "main") else event["flow"]}  # a sub-agent's flow: nested


def _ltm_entry(row: dict) -> MemoryEntry:
    return MemoryEntry(row["key"], row["value"], row["namespace"],
                       time.strftime("%Y-%m-%d %H:%M", time.localtime(row["updated_at"])))

