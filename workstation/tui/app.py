"""The workstation app: assembles the panes and forwards their requests to a backend.

The backend is any object (or None). The app calls, when present:
- `backend.start(app)` once mounted, in a thread worker: load first data, start
  the sidecar and watchers; feed panes with `app.call_from_thread(app.chat.add_turn, ...)`.
- `backend.on_<pane>_<message>(message)` for every `BackendRequest` a pane posts
  (`on_chat_pane_submitted`, `on_map_pane_symbol_selected`, ... the Textual handler
  name), in a thread worker, or as an async worker if it is a coroutine function.
- `backend.stop()` when the app shuts down.
An exception from a backend call is shown as a one-line notification.
"""

from __future__ import annotations

import asyncio
import inspect
import signal
from functools import partial
from pathlib import Path
from typing import Any, Iterable

from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.screen import ModalScreen, Screen
from textual.widget import Widget
from textual.widgets import Footer
from textual.worker import Worker, WorkerState

from .messages import BackendRequest, ThemeChanged
from .panes.chat import ChatPane
from .panes.map import MapPane
from .panes.memory import MemoryPane
from .panes.timeline import TimelinePane
from .themes import DEFAULT_THEME, load_themes

MIN_COLUMN = 20
MIN_CHAT = 40
PANE_ACTIONS = frozenset({"focus_pane", "toggle_maximize", "resize", "resize_height"})


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
        Binding("f11,ctrl+g", "toggle_maximize", "Maximize"),
        Binding("ctrl+left,alt+left", "resize(-4)", "Narrow"),
        Binding("ctrl+right,alt+right", "resize(4)", "Widen"),
        Binding("alt+up", "resize_height(-10)", "Shorter", show=False),
        Binding("alt+down", "resize_height(10)", "Taller", show=False),
    ]
    # app.tcss sets the same starting sizes; watchers run only on change
    map_width: reactive[int] = reactive(32, init=False)
    side_width: reactive[int] = reactive(58, init=False)
    memory_share: reactive[int] = reactive(50, init=False)  # percent of the side column for memory

    def __init__(self, backend: Any = None, *, theme: str | None = None, quit_on_sigterm: bool = False,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        self.backend = backend
        self.quit_on_sigterm = quit_on_sigterm  # the real command: a SIGTERM quits as ctrl+q does
        themes, self.theme_problems = load_themes()
        self.workstation_themes = sorted(themes)
        for item in themes.values():
            self.register_theme(item)
        wanted = theme or DEFAULT_THEME
        if wanted not in self.available_themes:
            self.theme_problems.append(f"theme {wanted!r} is not installed; using {DEFAULT_THEME}")
            wanted = DEFAULT_THEME
        self.theme = wanted

    def compose(self) -> ComposeResult:
        with Horizontal(id="columns"):
            yield MapPane(id="map", classes="column")
            yield ChatPane(id="chat", classes="column")
            with Vertical(id="side-column", classes="column"):
                yield MemoryPane(id="memory")
                yield TimelinePane(id="timeline")
        yield Footer()

    def on_mount(self) -> None:
        if self.quit_on_sigterm:
            asyncio.get_running_loop().add_signal_handler(
                signal.SIGTERM, partial(self.exit, return_code=128 + signal.SIGTERM))
        for problem in self.theme_problems:
            self.notify(problem, severity="warning", timeout=8)
        self.theme_changed_signal.subscribe(self, lambda theme: self.post_message(ThemeChanged(theme.name)))
        # focusing restyles the focus chain: do it after the first frame is on screen
        self.call_after_refresh(self._initial_focus)
        if hasattr(self.backend, "start"):
            # after the first frame: the backend's imports would otherwise compete with it for the GIL
            self.call_after_refresh(self.run_worker, partial(self.backend.start, self), thread=True,
                                    group="backend", exit_on_error=False, name="backend.start")

    def _initial_focus(self) -> None:
        if self.screen.focused is None:  # a key may have chosen a pane already
            self.chat.prompt.focus()

    def on_unmount(self) -> None:
        if hasattr(self.backend, "stop"):
            self.backend.stop()

    # ----------------------------------------------------------------- panes
    @property
    def chat(self) -> ChatPane:
        return self.query_one(ChatPane)

    @property
    def map(self) -> MapPane:
        return self.query_one(MapPane)

    @property
    def memory(self) -> MemoryPane:
        return self.query_one(MemoryPane)

    @property
    def timeline(self) -> TimelinePane:
        return self.query_one(TimelinePane)

    def pane_of(self, widget: Widget | None) -> Widget | None:
        for node in [widget, *(widget.ancestors if widget else [])]:
            if isinstance(node, (ChatPane, MapPane, MemoryPane, TimelinePane)):
                return node
        return None

    # --------------------------------------------------------------- backend
    @on(BackendRequest)
    def _forward(self, request: BackendRequest) -> None:
        handler = getattr(self.backend, request.handler_name, None)
        if handler is None:
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
        turn_id = message.event.turn_id
        if turn_id and self.chat.transcript.has_turn(turn_id):
            self.chat.scroll_to_turn(turn_id)

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
        if column.id == "map":
            self.map_width = self._clamp_side(self.map_width + delta, self.side_width)
        elif column.id == "side-column":
            self.side_width = self._clamp_side(self.side_width + delta, self.map_width)
        else:  # the chat grows by taking from both sides
            half = delta // 2
            self.map_width = self._clamp_side(self.map_width - half, self.side_width)
            self.side_width = self._clamp_side(self.side_width - (delta - half), self.map_width)

    def action_resize_height(self, delta: int) -> None:
        pane = self.pane_of(self.screen.focused)
        if isinstance(pane, (MemoryPane, TimelinePane)):
            sign = 1 if isinstance(pane, MemoryPane) else -1
            self.memory_share = max(20, min(80, self.memory_share + sign * delta))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # the panes' keys do nothing (and leave the footer) while another screen covers them
        return not (action in PANE_ACTIONS and self.screen is not self.screen_stack[0])

    def action_open_screen(self, name: str) -> None:
        """Show the sessions or reflection screen over the main layout, one at a time."""
        if isinstance(self.screen, ModalScreen) or getattr(self.screen, "SCREEN_NAME", None) == name:
            return
        while len(self.screen_stack) > 1:  # sessions / reflection / replay: replace, never stack up
            self.pop_screen()
        if name == "sessions":
            from .screens.sessions import SessionsScreen  # screens load on first use, after first paint

            self.push_screen(SessionsScreen())
        elif name == "reflection":
            from .screens.reflection import ReflectionScreen

            self.push_screen(ReflectionScreen())

    def _clamp_side(self, width: int, other: int) -> int:
        return max(MIN_COLUMN, min(width, self.size.width - other - MIN_CHAT))

    def watch_map_width(self, width: int) -> None:
        self.map.styles.width = width

    def watch_side_width(self, width: int) -> None:
        self.query_one("#side-column").styles.width = width

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
        yield SystemCommand("Sessions", "List sessions: resume, replay, compact, archive, restore, export",
                            partial(self.action_open_screen, "sessions"))
        yield SystemCommand("Reflection", "Reflection queries as tables; context size and tool usage plots",
                            partial(self.action_open_screen, "reflection"))
        for name in self.workstation_themes:
            yield SystemCommand(f"Theme: {name}", f"Switch to the {name} theme",
                                partial(setattr, self, "theme", name))
        if screen is self.screen_stack[0]:
            for pane in (self.chat, self.map, self.memory, self.timeline):
                for title, help_text, callback in pane.palette_commands():
                    yield SystemCommand(title, help_text, callback)
