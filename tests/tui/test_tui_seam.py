"""The typed seam between the app and the core: every request a pane can send is named and served."""

from __future__ import annotations

import ast
import inspect
import time
import typing
from pathlib import Path

from tui_support import RecordingBackend, settle, started
from workstation.tui import seam
from workstation.tui.app import WorkstationApp
from workstation.tui.backend import LiveBackend
from workstation.tui.messages import BackendRequest
from workstation.tui.panes.chat import ChatPane
from workstation.tui.panes.map import MapPane
from workstation.tui.panes.timeline import TimelinePane

TUI = Path(__file__).resolve().parents[2] / "workstation" / "tui"


def test_every_request_a_pane_can_send_is_in_the_protocol_and_nothing_else_is():
    requests = {cls.handler_name: cls for cls in seam.request_classes()}
    assert len(requests) >= 12  # chat, map, memory, sessions, theme, new session
    assert sorted(requests) == seam.handler_names()
    # each protocol method takes exactly the request it is named after
    for name, cls in requests.items():
        hints = typing.get_type_hints(getattr(seam.Backend, name), vars(seam) | {
            "ChatPane": ChatPane, "MapPane": MapPane, **_pane_namespace()})
        assert hints["request"] is cls, name


def _pane_namespace() -> dict:
    from workstation.tui.panes.memory import MemoryPane
    from workstation.tui.screens.sessions import SessionsScreen

    return {"MemoryPane": MemoryPane, "SessionsScreen": SessionsScreen}


def test_the_live_backend_serves_every_request_with_the_protocol_signature():
    backend = LiveBackend("/nonexistent")
    assert isinstance(backend, seam.Backend)
    for cls in seam.request_classes():
        handler = getattr(LiveBackend, cls.handler_name, None)
        assert callable(handler), f"LiveBackend has no {cls.handler_name} for {cls.__qualname__}"
        assert list(inspect.signature(handler).parameters) == ["self", "request"], cls.handler_name
    assert backend.workspace is None and backend.session_slug is None  # nothing open before start


def test_requests_are_typed_dataclasses():
    for cls in seam.request_classes():
        assert "__dataclass_fields__" in vars(cls), cls.__qualname__
        for field, kind in typing.get_type_hints(cls).items():
            assert kind is not typing.Any or field == "value", (cls.__qualname__, field)  # a memory value is any JSON
    request = MapPane.SymbolSelected("a.py", "f", 3, 9)
    assert (request.path, request.name, request.start, request.end) == ("a.py", "f", 3, 9)
    assert request != MapPane.SymbolSelected("a.py", "f", 3, 9)  # messages compare by identity


def test_a_timeline_selection_is_the_apps_to_serve_not_the_backends():
    assert not issubclass(TimelinePane.EventSelected, BackendRequest)
    assert hasattr(WorkstationApp, "_jump_to_turn")


class PartialBackend(RecordingBackend):
    """Serves everything but file selection (as a stale backend would)."""

    on_map_pane_file_selected = None


async def test_a_request_nothing_serves_is_reported_not_dropped():
    backend = PartialBackend()
    app = WorkstationApp(backend)
    async with started(app) as pilot:
        app.map.post_message(MapPane.FileSelected("src/a.py"))
        app.chat.post_message(ChatPane.Submitted("still served"))
        expected = ("MapPane.FileSelected was not served: the backend has no on_map_pane_file_selected", "error")
        deadline = time.monotonic() + 30  # a loaded machine delivers the notice late, not never
        while True:
            await settle(pilot)
            said = [(n.message, n.severity) for n in app._notifications]
            if expected in said or time.monotonic() > deadline:
                break
        assert expected in said
        assert [m.text for m in backend.named("on_chat_pane_submitted")] == ["still served"]
    bare = WorkstationApp()
    async with started(bare) as pilot:
        bare.map.post_message(MapPane.FileSelected("src/a.py"))
        await settle(pilot)
        assert any(n.message == "MapPane.FileSelected was not served: this app has no backend"
                   for n in bare._notifications)


def test_screens_and_panes_never_reach_into_the_backend():
    """The app hands screens what they need; no getattr chains up to app.backend."""
    offenders = []
    for path in sorted((TUI / "screens").glob("*.py")) + sorted((TUI / "panes").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "backend":
                offenders.append(f"{path.name}:{node.lineno} .backend")
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr" and node.args \
                    and isinstance(node.args[0], ast.Call) and getattr(node.args[0].func, "id", None) == "getattr":
                offenders.append(f"{path.name}:{node.lineno} getattr(getattr(...))")
    assert offenders == []
