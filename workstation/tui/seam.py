"""The seam between the app and the core: what the app asks of a backend.

`Backend` names every request a pane or screen can send (one `on_*` method per
`BackendRequest` subclass, named as Textual names handlers), plus the two
facts the screens are handed when they open (the workspace and the session the
chat is on), and the agents' toolset, whose MCP servers and tools the command
palette lists (a backend without one may leave it out: the app reads it with a
default). The app forwards each request to its method in a thread worker and
reports a request nothing serves; `tests/tui/test_tui_seam.py` holds
`LiveBackend` and this protocol to the requests the panes define.

Screens never reach into the backend: the app passes them what they need.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from . import panes, screens
from .messages import (BackendRequest, ModeCycleRequested, NewSessionRequested, PlanAnswered, ResumeSessionRequested,
                       ThemeChanged)

if TYPE_CHECKING:
    from ..agent.tools import Toolset
    from ..runtime import Workspace
    from .app import WorkstationApp
    from .panes.chat import ChatPane
    from .panes.map import MapPane
    from .panes.memory import MemoryPane
    from .screens.sessions import SessionsScreen


@runtime_checkable
class Backend(Protocol):
    """Serves the panes' requests from the core. Every method but the two properties may block."""

    @property
    def workspace(self) -> Workspace | None:
        """The open workspace (None until `start` has opened it): the sessions and reflection screens work on it."""

    @property
    def session_slug(self) -> str | None:
        """The session the chat is on (None before one is open)."""

    toolset: Toolset | None  # the agents' tools, MCP servers' included (None until they started)

    def start(self, app: WorkstationApp) -> None:
        """Once the first frame is on screen: open the workspace, fill the panes, start watchers."""

    def stop(self) -> None:
        """When the app closes: stop what `start` started; never raises."""

    # chat
    def on_chat_pane_submitted(self, request: ChatPane.Submitted) -> None: ...

    def on_chat_pane_command_submitted(self, request: ChatPane.CommandSubmitted) -> None: ...

    def on_chat_pane_cancel_requested(self, request: ChatPane.CancelRequested) -> None: ...

    def on_chat_pane_original_requested(self, request: ChatPane.OriginalRequested) -> None: ...

    def on_new_session_requested(self, request: NewSessionRequested) -> None: ...

    def on_resume_session_requested(self, request: ResumeSessionRequested) -> None: ...

    # permission modes (agent.modes): shift+tab, and the answer to a plan
    def on_mode_cycle_requested(self, request: ModeCycleRequested) -> None: ...

    def on_plan_answered(self, request: PlanAnswered) -> None: ...

    # knowledge map
    def on_map_pane_children_requested(self, request: MapPane.ChildrenRequested) -> None: ...

    def on_map_pane_symbols_requested(self, request: MapPane.SymbolsRequested) -> None: ...

    def on_map_pane_file_selected(self, request: MapPane.FileSelected) -> None: ...

    def on_map_pane_symbol_selected(self, request: MapPane.SymbolSelected) -> None: ...

    # memory, sessions, settings
    def on_memory_pane_edit_requested(self, request: MemoryPane.EditRequested) -> None: ...

    def on_sessions_screen_resume_requested(self, request: SessionsScreen.ResumeRequested) -> None: ...

    def on_theme_changed(self, request: ThemeChanged) -> None: ...


def request_classes() -> list[type[BackendRequest]]:
    """Every BackendRequest the app's panes and screens define (their modules imported first)."""
    for package in (panes, screens):
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            importlib.import_module(info.name)
    found: list[type[BackendRequest]] = []
    todo = list(BackendRequest.__subclasses__())
    while todo:
        cls = todo.pop()
        if cls.__module__.startswith(__package__ + "."):  # not a test's own subclass
            found.append(cls)
        todo.extend(cls.__subclasses__())
    return sorted(found, key=lambda c: c.handler_name)


def handler_names() -> list[str]:
    """The `on_*` methods `Backend` declares."""
    return sorted(name for name in vars(Backend) if name.startswith("on_"))
