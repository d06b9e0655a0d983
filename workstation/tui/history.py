"""The chat's history features, for the live backend: the /rewind picker, marking what an undo or rewind
took back, the launch's offer to continue the last session, and an approval's "Always".

Each runs on a backend worker thread (never the UI's) and reaches the panes through `backend.ui`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import WorkstationError
from .viewdata import Turn

if TYPE_CHECKING:
    from ..agent.approval import ApprovalRequest
    from .backend import LiveBackend


def pick_rewind(backend: LiveBackend) -> None:
    """`/rewind` with no number: the session's turns in a picker; the one chosen is rewound to as
    `/rewind N [files|conversation]` would be (escape: nothing happens)."""
    from ..sessions.turns import summaries  # lazy: the sessions stack, +32 ms; off the first paint
    from .panes.chat import ChatPane  # lazy: the backend loads no widget at import (module docstring)
    from .screens.rewind import RewindScreen  # lazy: as above

    turns = summaries(backend.agent.session.read().records)
    if not turns:
        backend.ui(backend.app.chat.add_turn, Turn("error", "/rewind: this session has no turn to go back to yet"))
        return

    def chosen(choice: tuple[int, str] | None) -> None:
        if choice is None:
            return
        number, what = choice
        args = f"{number}" + ("" if what == "both" else f" {what}")
        backend.app.post_message(ChatPane.CommandSubmitted("/rewind", args, f"/rewind {args}"))

    backend.show_screen(lambda: RewindScreen(turns), chosen)


def show_taken_back(backend: LiveBackend) -> None:
    """After an undo or rewind: the turns it took back dimmed in place, with what took them back (the
    slash-command lines stay), and the plan the model now sees."""
    from ..sessions import plan  # lazy: the sessions stack, +35 ms; off the first paint
    from ..sessions.modelview import seen  # lazy: as above
    from ..sessions.turns import taken_back  # lazy: as above

    view = backend.agent.session.read()
    marks = {rid: mark.describe() for rid, mark in taken_back(view.records).items()}
    backend.ui(backend.app.chat.mark_taken_back, marks)
    items = plan.current(seen(view).records) or []
    backend.ui(backend.app.chat.set_plan, items if any(item["status"] != "done" for item in items) else [])


def offer_last(backend: LiveBackend) -> None:
    """A launch on a new session offers, in one key, to continue the last session that holds a turn."""
    from ..sessions.catalog import last_session  # lazy: the sessions stack, +40 ms; off the first paint

    last = last_session(backend.ws.paths, exclude=backend.agent.session.slug)
    if last is None:
        return
    when = (last.last_activity or "")[:16].replace("T", " ")
    title = f" “{last.title[:60]}”" if last.title else ""
    backend.ui(backend.app.chat.add_turn, Turn("notice", f"ctrl+r continues your last session, {last.slug}{title} "
                                          f"({last.turns} turn{'s' if last.turns != 1 else ''}, {when} UTC); "
                                          "F6 lists them all"))
    backend.ui(backend.app.offer_resume, last.slug)


def always_pattern(root: str, request: ApprovalRequest) -> str | None:
    """The allow-list entry "Always" would add for this request (its command's words), or None when it
    is not offered: not a command the allow-list could cover, or a workspace the user does not trust
    (there the allow-list of its own config does not apply either)."""
    import shlex  # lazy: stdlib, only when a command asks

    from .. import config as config_mod  # lazy: loaded by the workspace already
    from ..sandbox.allowlist import Pattern, split  # lazy: as above

    if request.action != "command" or request.reason != "not on agent.command_allow":
        return None  # no sandbox, or an argument the allow-list refuses: ask each time
    argv = split(request.subject)
    if not argv or not config_mod.inspect(root)[0].trusted:
        return None
    entry = shlex.join(argv)
    try:
        Pattern.parse(entry)
    except ValueError:
        return None
    return entry

def allow_always(backend: LiveBackend, entry: str) -> None:
    """Keep `entry` allowed in this trusted workspace (the user's trust record) and from now on."""
    from .. import config as config_mod  # lazy: loaded by the workspace already
    from .. import trust  # lazy: as above

    try:
        trust.allow_always(config_mod.inspect(backend.root)[0].root, entry)
    except WorkstationError as err:
        backend.warn(str(err))
        return
    allow = backend.agent.ctx.services.allow
    if entry not in allow:
        allow.append(entry)
    backend.ui(backend.app.notify, f"always allowed here: {entry} (`workstation trust --revoke` forgets it)",
             timeout=8)
