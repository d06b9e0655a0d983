"""App-wide messages.

Messages up: every pane message that asks the core for something subclasses
`BackendRequest`; the app forwards each one to the backend method named like
a Textual handler (`ChatPane.Submitted` -> `backend.on_chat_pane_submitted(msg)`),
run in a thread worker so the backend may block. Data comes back down by the
backend calling pane methods through `app.call_from_thread`.
"""

from __future__ import annotations

from textual.message import Message


class BackendRequest(Message):
    """Base of every pane message that the backend should serve."""


class ThemeChanged(BackendRequest):
    """The user picked a theme; the backend may persist it as `ui.theme`."""

    def __init__(self, theme: str) -> None:
        super().__init__()
        self.theme = theme

