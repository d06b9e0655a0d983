"""The workstation app: assembles the panes and forwards their requests to a backend.

The backend is a `seam.Backend` (or None, for tests and snapshots). The app calls:
- `backend.start(app)` once the first frame is on screen, in a thread worker: load first
  data, start the sidecar and watchers; feed panes with `app.call_from_thread(app.chat.add_turn, ...)`.
- `backend.on_<pane>_<message>(message)` for every `BackendRequest` a pane or screen posts
  (`on_chat_pane_submitted`, `on_map_pane_symbol_selected`, ... the Textual handler
  name), in a thread worker, or as an async worker if it is a coroutine function. A request
  nothing serves is reported on screen, never dropped.
- `backend.stop()` when the app shuts down.
An exception from a backend call is shown as a one-line notification.

Column widths are shares of the terminal's width with minimums, the chat's first
(`layout.column_widths`): from 80 columns up the chat keeps at least 40.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import threading
from functools import partial
from pathlib import Path
from typing import Iterable

from textual import events, on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.screen import ModalScreen, Screen
from textual.widget import Widget
from textual.widgets import Footer
from textual.worker import Worker, WorkerState

from ..terminal import attention
from .layout import MAP_SHARE, MIN_CHAT, MIN_MAP, MIN_SIDE, SIDE_SHARE, column_widths
from .messages import BackendRequest, ModeCycleRequested, NewSessionRequested, ResumeSessionRequested, ThemeChanged
from .panes.chat import ChatPane
from .panes.map import MapPane
from .panes.memory import MemoryPane
from .panes.timeline import TimelinePane
from .seam import Backend
from .themes import DEFAULT_THEME, load_themes

PANE_ACTIONS = frozenset({"focus_pane", "toggle_maximize", "resize", "resize_height", "stop_agent", "cycle_mode"})
SIGTERM_GRACE_S = 10.0  # after a SIGTERM, the seconds a clean quit may take before the process ends anyway


class WorkstationApp(App):
    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses live elsewhere
    TITLE = "workstation"
    AUTO_FOCUS = None  # the prompt takes focus after the first frame (see _initial_focus)
    BINDINGS = [
        Binding("f2", "focus_pane('map')", "Map"),
        Binding("f3", "focus_pane('chat')", "Chat"),
        Binding("f4", "focus_pane('memory')", "Memory"),
        Binding("f5", "focus_pane('timeline')", "Timeline"),
        Binding("f6", "open_screen('sessions')", "Sessions"),
        Binding("f7", "open_screen('reflection')", "Reflection"),
        Binding("ctrl+r", "resume_last", "Continue last"),  # only while a launch's offer stands (check_action)
        Binding("f11,ctrl+g", "toggle_maximize", "Maximize"),
        Binding("ctrl+left,alt+left", "resize(-4)", "Narrow"),
        Binding("ctrl+right,alt+right", "resize(4)", "Widen"),
        Binding("alt+up", "resize_height(-10)", "Shorter", show=False),
        Binding("alt+down", "resize_height(10)", "Taller", show=False),
        Binding("escape", "stop_agent", "Stop", show=False),  # only while the agent works (check_action)
        # the permission modes (agent.modes); over the screen's focus-previous, only on the main screen
        Binding("shift+tab", "cycle_mode", "Mode", priority=True, show=False),
    ]
    # shares of the terminal's width (column_widths); watchers run only on change
    map_share: reactive[float] = reactive(MAP_SHARE, init=False)
    side_share: reactive[float] = reactive(SIDE_SHARE, init=False)
    memory_share: reactive[int] = reactive(50, init=False)  # percent of the side column for memory

    def __init__(self, backend: Backend | None = None, *, theme: str | None = None,
                 quit_on_sigterm: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.backend = backend
        self.quit_on_sigterm = quit_on_sigterm  # the real command: a SIGTERM quits as ctrl+q does
        self.resume_offer: str | None = None  # the last session, continued by ctrl+r (offer_resume)
        self._sigterm_backstop: threading.Timer | None = None
        themes, self.theme_problems = load_themes()
        self.workstation_themes = sorted(themes)
        for item in themes.values():
            self.register_theme(item)
        wanted = theme or DEFAULT_THEME
        if wanted not in self.available_themes:
            self.theme_problems.append(f"theme {wanted!r} is not installed; using {DEFAULT_THEME}")
            wanted = DEFAULT_THEME
        self.theme = wanted
        # made once: the properties below reach them from any screen (a query sees only the active one)
        self._panes = {"map": MapPane(id="map"), "chat": ChatPane(id="chat"), "memory": MemoryPane(id="memory"),
                       "timeline": TimelinePane(id="timeline")}

    def compose(self) -> ComposeResult:
        # the panes sit in column containers that carry the widths: a maximized pane then fills the screen
        with Horizontal(id="columns"):
            with Vertical(id="map-column", classes="column"):
                yield self._panes["map"]
            with Vertical(id="chat-column", classes="column"):
                yield self._panes["chat"]
            with Vertical(id="side-column", classes="column"):
                yield self._panes["memory"]
                yield self._panes["timeline"]
        yield Footer()

    def on_mount(self) -> None:
        self._layout_columns(self.size.width)
        if self.quit_on_sigterm:  # a Python handler, not the loop's: it runs even when the loop is stuck
            signal.signal(signal.SIGTERM, partial(self._sigterm, asyncio.get_running_loop()))
        for problem in self.theme_problems:
            self.notify(problem, severity="warning", timeout=8)
        self.theme_changed_signal.subscribe(self, lambda theme: self.post_message(ThemeChanged(theme.name)))
        # focusing restyles the focus chain: do it after the first frame is on screen
        self.call_after_refresh(self._initial_focus)
        if self.backend is not None:
            # after the first frame: the backend's imports would otherwise compete with it for the GIL
            self.call_after_refresh(self.run_worker, partial(self.backend.start, self), thread=True,
                                    group="backend", exit_on_error=False, name="backend.start")

    def _sigterm(self, loop: asyncio.AbstractEventLoop, signum: int, _frame) -> None:
        """Quit as ctrl+q does; a process still alive SIGTERM_GRACE_S later (a shutdown that hangs, a blocked
        loop: once seen ignoring SIGTERM for 10 minutes) or sent a second SIGTERM ends at once."""
        code = 128 + signum
        if self._sigterm_backstop is not None:
            os._exit(code)
        self._sigterm_backstop = threading.Timer(SIGTERM_GRACE_S, os._exit, (code,))
        self._sigterm_backstop.daemon = True
        self._sigterm_backstop.start()
        try:
            loop.call_soon_threadsafe(partial(self.exit, return_code=code))
        except RuntimeError:
            pass  # the loop is closed: the app is already on its way out, and the backstop runs

    def _initial_focus(self) -> None:
        if self.screen.focused is None:  # a key may have chosen a pane already
            self.chat.prompt.focus()

    def on_unmount(self) -> None:
        if self.backend is not None:
            self.backend.stop()

    # ----------------------------------------------------------------- panes
    @property
    def chat(self) -> ChatPane:
        return self._panes["chat"]

    @property
    def map(self) -> MapPane:
        return self._panes["map"]

    @property
    def memory(self) -> MemoryPane:
        return self._panes["memory"]

    @property
    def timeline(self) -> TimelinePane:
        return self._panes["timeline"]

    def pane_of(self, widget: Widget | None) -> Widget | None:
        for node in [widget, *(widget.ancestors if widget else [])]:
            if isinstance(node, (ChatPane, MapPane, MemoryPane, TimelinePane)):
                return node
        return None

    # --------------------------------------------------------------- backend
    @on(BackendRequest)
    def _forward(self, request: BackendRequest) -> None:
        handler = getattr(self.backend, request.handler_name, None)  # seam.Backend names each one
        if handler is None:
            what = type(request).__qualname__
            self.notify(f"{what} was not served: " + ("this app has no backend" if self.backend is None else
                        f"the backend has no {request.handler_name}"), severity="error", timeout=10)
            return
        name = f"backend.{request.handler_name}"
        if inspect.iscoroutinefunction(handler):
            self.run_worker(handler(request), group="backend", exit_on_error=False, name=name)
        else:
            self.run_worker(partial(handler, request), thread=True, group="backend",
                            exit_on_error=False, name=name)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.group == "backend":
            error = event.worker.error
            first = str(error).strip().splitlines()[0] if str(error).strip() else ""
            self.notify(f"{type(error).__name__}: {first}" if first else type(error).__name__,
                        title=event.worker.name, severity="error", timeout=10)

    @on(TimelinePane.EventSelected)
    def _jump_to_turn(self, message: TimelinePane.EventSelected) -> None:
        event = message.event
        if event.turn_id and self.chat.transcript.has_turn(event.turn_id):
            self.chat.scroll_to_turn(event.turn_id)
        elif event.turn_id:  # e.g. a model call that was stopped before it answered
            self.notify(f"{event.type} {event.name}: its turn ({event.turn_id}) is not in this chat",
                        severity="warning", timeout=6)
        else:
            self.notify(f"{event.type} {event.name} belongs to no turn of the chat", timeout=4)

    # --------------------------------------------------------------- the agent
    @property
    def escape_to_minimize(self) -> bool:
        return super().escape_to_minimize and not self.chat.busy  # escape stops the agent first

    def action_stop_agent(self) -> None:
        self.chat.action_cancel()

    def action_new_session(self) -> None:
        self.post_message(NewSessionRequested())

    def action_cycle_mode(self) -> None:
        """Shift+Tab: the next permission mode (ask, edits, plan, auto); the status line shows it."""
        self.post_message(ModeCycleRequested())

    def ring(self, message: str) -> None:
        """Call the user back to the terminal (a finished turn, a pending approval or plan): OSC 9 with
        `message` where the terminal shows it as a notification, else the bell (terminal.attention)."""
        sequence = attention(message, dict(os.environ))
        driver = self._driver
        if sequence == "\a" or driver is None or self.is_headless:
            self.bell()
            return
        driver.write(sequence)
        driver.flush()

    # --------------------------------------------------------------- actions
    def action_focus_pane(self, name: str) -> None:
        if name == "chat":
            self.chat.prompt.focus()
        elif name == "map":
            self.map.knowledge_tree.focus()
        elif name == "memory":
            self.memory.focus_body()
        elif name == "timeline":
            self.timeline.focus_body()

    def action_toggle_maximize(self) -> None:
        screen = self.screen
        if screen.maximized is not None:
            screen.minimize()
        elif (pane := self.pane_of(screen.focused)) is not None:
            screen.maximize(pane, container=False)

    def action_resize(self, delta: int) -> None:
        """Widen (delta > 0) or narrow the column holding the focused pane."""
        focused = self.screen.focused
        column = next((n for n in [focused, *focused.ancestors] if n.has_class("column")), None) \
            if focused else None
        if column is None:
            return
        total = self.size.width or 1
        map_w, _, side_w = column_widths(total, self.map_share, self.side_share)
        if column.id == "map-column":
            map_w = self._clamp_side(map_w + delta, side_w, MIN_MAP)
        elif column.id == "side-column":
            side_w = self._clamp_side(side_w + delta, map_w, MIN_SIDE)
        else:  # the chat grows by taking from both sides
            half = delta // 2
            map_w = self._clamp_side(map_w - half, side_w, MIN_MAP)
            side_w = self._clamp_side(side_w - (delta - half), map_w, MIN_SIDE)
        self.map_share, self.side_share = map_w / total, side_w / total

    def action_resize_height(self, delta: int) -> None:
        pane = self.pane_of(self.screen.focused)
        if isinstance(pane, (MemoryPane, TimelinePane)):
            sign = 1 if isinstance(pane, MemoryPane) else -1
            self.memory_share = max(20, min(80, self.memory_share + sign * delta))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # the panes' keys do nothing (and leave the footer) while another screen covers them
        if action in PANE_ACTIONS and self.screen is not self.screen_stack[0]:
            return False
        if action == "resume_last":
            return self.resume_offer is not None and self.screen is self.screen_stack[0]
        return self.chat.busy if action == "stop_agent" else True

    def offer_resume(self, slug: str | None) -> None:
        """Offer ctrl+r to continue session `slug` (a launch's last session); None withdraws the offer."""
        self.resume_offer = slug
        self.refresh_bindings()

    def action_resume_last(self) -> None:
        slug, self.resume_offer = self.resume_offer, None
        self.refresh_bindings()
        if slug is not None:
            self.post_message(ResumeSessionRequested(slug))

    def action_open_screen(self, name: str) -> None:
        """Show the sessions or reflection screen over the main layout, one at a time."""
        if isinstance(self.screen, ModalScreen) or getattr(self.screen, "SCREEN_NAME", None) == name:
            return
        while len(self.screen_stack) > 1:  # sessions / reflection / replay: replace, never stack up
            self.pop_screen()
        workspace = self.backend.workspace if self.backend is not None else None
        if workspace is None:
            self.notify("the workspace is still opening: try again in a moment", severity="warning", timeout=5)
            return
        current = self.backend.session_slug if self.backend is not None else None
        if name == "sessions":
            from .screens.sessions import SessionsScreen  # lazy: replay, sessions, agent tools: +280 ms of first paint

            self.push_screen(SessionsScreen(workspace, current=current))
        elif name == "reflection":
            from .screens.reflection import ReflectionScreen  # lazy: plotext, the memory stack: +170 ms of first paint

            self.push_screen(ReflectionScreen(workspace, session=current))

    def _clamp_side(self, width: int, other: int, least: int) -> int:
        return max(least, min(width, self.size.width - other - MIN_CHAT))

    def on_resize(self, event: events.Resize) -> None:
        self._layout_columns(event.size.width)

    def watch_map_share(self) -> None:
        self._layout_columns(self.size.width)

    def watch_side_share(self) -> None:
        self._layout_columns(self.size.width)

    def _layout_columns(self, total: int) -> None:
        if not total:
            return
        map_w, _, side_w = column_widths(total, self.map_share, self.side_share)
        for column, width in ((self.query_one("#map-column"), map_w), (self.query_one("#side-column"), side_w)):
            column.display = width > 0
            if width:
                column.styles.width = width

    def watch_memory_share(self, share: int) -> None:
        self.memory.styles.height = f"{share}fr"
        self.timeline.styles.height = f"{100 - share}fr"

    # ------------------------------------------------------- command palette
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for pane in ("chat", "map", "memory", "timeline"):
            yield SystemCommand(f"Focus {pane}", f"Move the focus to the {pane} pane",
                                partial(self.action_focus_pane, pane))
        yield SystemCommand("Maximize / restore pane", "Fill the screen with the focused pane",
                            self.action_toggle_maximize)
        yield SystemCommand("Widen column", "Widen the focused column", partial(self.action_resize, 4))
        yield SystemCommand("Narrow column", "Narrow the focused column", partial(self.action_resize, -4))
        yield SystemCommand("Taller pane", "Give the focused side pane more height",
                            partial(self.action_resize_height, 10))
        yield SystemCommand("Shorter pane", "Give the focused side pane less height",
                            partial(self.action_resize_height, -10))
        yield SystemCommand("New session", "Start a new session; this one stays as it is (/new)",
                            self.action_new_session)
        yield SystemCommand("Next permission mode", "ask → edits → plan → auto, as shift+tab does "
                            "(ask: edits and commands ask; plan: read-only until you approve a plan; "
                            "auto: no questions, inside the sandbox, no network)", self.action_cycle_mode)
        yield SystemCommand("Sessions", "List sessions: resume, replay, compact, archive, restore, export",
                            partial(self.action_open_screen, "sessions"))
        yield SystemCommand("Reflection", "Reflection queries as tables; context size and tool usage plots",
                            partial(self.action_open_screen, "reflection"))
        if self.resume_offer is not None:
            yield SystemCommand("Continue last session", f"Go on in {self.resume_offer}, as ctrl+r does",
                                self.action_resume_last)
        for name in self.workstation_themes:
            yield SystemCommand(f"Theme: {name}", f"Switch to the {name} theme",
                                partial(setattr, self, "theme", name))
        if screen is self.screen_stack[0]:
            for pane in (self.chat, self.map, self.memory, self.timeline):
                for title, help_text, callback in pane.palette_commands():
                    yield SystemCommand(title, help_text, callback)
            yield from self._mcp_commands()
            yield from self._skill_commands()

    def _skill_commands(self) -> Iterable[SystemCommand]:
        """The skills the agent may load (workstation.skills): one puts a request to use it in the prompt.
        (Custom commands are among the chat's commands: palette_commands.)"""
        workspace = self.backend.workspace if self.backend is not None else None
        if workspace is None:
            return
        for skill in workspace.skills.skills.values():
            yield SystemCommand(f"Skill {skill.name}", f"{skill.description} ({skill.source})",
                                partial(self.insert_in_prompt, f"Use the {skill.name} skill: "))

    def _mcp_commands(self) -> Iterable[SystemCommand]:
        """The MCP servers the agent has (their state) and their tools: a tool puts its name in the prompt."""
        toolset = getattr(self.backend, "toolset", None)  # LiveBackend's, once its servers started
        if toolset is None:
            return
        from ..mcp.client import servers_of  # lazy: agent tools, pydantic: +220 ms of first paint

        for server in servers_of(toolset):
            yield SystemCommand(f"MCP server {server.name}", server.line(),
                                partial(self.notify, server.line(), title="MCP", timeout=8))
            for tool in server.tools:
                yield SystemCommand(f"MCP tool {tool.qualified}", tool.description or f"a tool of {server.name}",
                                    partial(self.insert_in_prompt, tool.qualified))

    def insert_in_prompt(self, text: str) -> None:
        """Type `text` into the prompt at its cursor (a palette entry's name for the agent to use)."""
        prompt = self.chat.prompt
        prompt.insert_text_at_cursor(text)
        prompt.focus()
