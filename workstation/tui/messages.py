"""App-wide messages.

Messages up: every message that asks the core for something subclasses
`BackendRequest`; the app forwards each one to the backend method named like
a Textual handler (`ChatPane.Submitted` -> `backend.on_chat_pane_submitted(msg)`),
run in a thread worker so the backend may block. `seam.Backend` names every
one of those methods, and a test holds the live backend to it. Data comes back
down by the backend calling pane methods through `app.call_from_thread`.

Requests are dataclasses (as Posting's messages are): the payload is typed and
shows in the repr. `eq=False` keeps messages compared by identity, as Textual
expects of messages in its queues.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


class BackendRequest(Message):
    """Base of every message that the backend should serve."""


@dataclass(eq=False)
class ThemeChanged(BackendRequest):
    """The user picked a theme; the backend may persist it as `ui.theme`."""

    theme: str


@dataclass(eq=False)
class NewSessionRequested(BackendRequest):
    """Leave the current session as it is and start a new one (the palette's "New session")."""


@dataclass(eq=False)
class ResumeSessionRequested(BackendRequest):
    """Put the chat on session `slug` (the launch's offer to continue the last session, taken)."""

    slug: str


@dataclass(eq=False)
class ModeCycleRequested(BackendRequest):
    """Shift+Tab: the next permission mode (agent.modes: ask, edits, plan, auto)."""


@dataclass(eq=False)
class PlanAnswered(BackendRequest):
    """The user's answer to a plan a turn in plan mode ended with: `verdict` approve (with `plan`, as the user
    may have edited it: `edited`) or reject."""

    verdict: str
    plan: str = ""
    edited: bool = False
