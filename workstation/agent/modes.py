"""Permission modes (agent.permission_mode): what the agent may do without asking, decided in one place.

A tool declares once what its calls mean (`Tool.effect`: agent.tools.base); `decide(mode, effect)` turns that
and the session's mode into one verdict, which `tools.call` applies before any tool runs (every caller's:
the loop's, a sub-agent's, an MCP server's tool), so no tool, wrapper or front end decides on its own:

| mode    | WRITE (edits)             | COMMAND (run_command, MCP tools)                   | the rest |
|---------|---------------------------|----------------------------------------------------|----------|
| `ask`   | asks                      | asks unless allow-listed / the server trusted      | runs     |
| `edits` | runs (checkpointed)       | asks unless allow-listed / the server trusted      | runs     |
| `plan`  | refused (the model reads why) | refused                                        | runs     |
| `auto`  | runs (checkpointed)       | runs without asking inside the sandbox, network off; what cannot run there (no full sandbox, an untrusted MCP server) is refused, never asked | runs |

In `plan` the model looks, then ends its turn with a plan as its reply; the user approves it (the mode goes back
to the one before `plan` and the plan is carried out), edits it (the same, with the user's text) or rejects it
(the mode stays). "The rest" (QUERY, MEMORY: the agent's own notes and todo list, DELEGATE: a sub-agent, whose
own calls meet the same verdicts, since it shares its parent's `Permissions`) runs in every mode.

Claude Code's names for the same modes travel in hook payloads (`permission_mode`) and ACP's session modes.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Callable

from ..config import PERMISSION_MODES
from ..errors import WorkstationError
from ..sessions.records import Record, System
from .tools.base import COMMAND, WRITE

MODES = ("ask", "edits", "plan", "auto")  # the order Shift+Tab cycles them
CLAUDE_NAMES = {"ask": "default", "edits": "acceptEdits", "plan": "plan", "auto": "bypassPermissions"}
DESCRIPTIONS = {
    "ask": "edits and commands ask first",
    "edits": "edits apply (undo with /undo); commands ask unless allow-listed",
    "plan": "read-only: the agent looks and ends with a plan you approve, edit or reject",
    "auto": "everything runs without asking, inside the sandbox, with no network",
}
assert set(MODES) == set(PERMISSION_MODES)

# verdicts
RUN = "run"  # runs as the tool's own rules say (an allow-list, a trusted server)
ASK = "ask"  # the user is asked first, whatever the tool's own rules say
UNASKED = "unasked"  # runs without asking where the sandbox holds it; refused (never asked) where not
REFUSE = "refuse"


@dataclass(frozen=True)
class Verdict:
    kind: str
    reason: str = ""  # why it asks or is refused, one line the user or the model reads

    @property
    def refused(self) -> bool:
        return self.kind == REFUSE

    @property
    def asks(self) -> bool:
        return self.kind == ASK

    @property
    def unasked(self) -> bool:
        return self.kind == UNASKED


def decide(mode: str, effect: str, name: str = "") -> Verdict:
    """What a call of a tool with `effect` (agent.tools.base) may do in permission mode `mode`."""
    if effect == WRITE:
        if mode == "plan":
            return Verdict(REFUSE, f"{name or 'this tool'} is refused: plan mode is read-only (nothing is "
                                   "written until the user approves your plan); finish looking, then reply with "
                                   "your plan as your answer")
        if mode == "ask":
            return Verdict(ASK, "permission mode ask: every edit asks")
        return Verdict(RUN)
    if effect == COMMAND:
        if mode == "plan":
            return Verdict(REFUSE, f"{name or 'this tool'} is refused: plan mode runs nothing (no commands, no "
                                   "MCP tools) until the user approves your plan; reply with your plan")
        if mode == "auto":
            return Verdict(UNASKED, "permission mode auto runs only what the sandbox holds, never asking")
        return Verdict(RUN)
    return Verdict(RUN)


def check(mode: str) -> str:
    """`mode` when it is one; WorkstationError naming the modes otherwise."""
    if mode not in MODES:
        raise WorkstationError(f"unknown permission mode {mode!r}: one of {', '.join(MODES)}")
    return mode


def from_claude(name: str) -> str:
    """Ours for a mode named either way (ours, or Claude Code's / ACP's: acceptEdits, bypassPermissions...)."""
    for ours, theirs in CLAUDE_NAMES.items():
        if name in (ours, theirs):
            return ours
    return check(name)


class Permissions:
    """One session's permission mode, shared by its agent and sub-agents (and read by its tools' calls).

    `previous` is the mode before `plan`, the one an approved plan goes back to. `changed` is the mode the
    model has not been told yet (the loop tells it at the next turn, as a context update)."""

    def __init__(self, mode: str = "edits", on_change: Callable[[str], None] | None = None):
        self.on_change = on_change  # told each new mode (the agent keeps it in the session's log)
        self._lock = threading.Lock()
        self._mode = check(mode)
        self.previous = "edits" if mode == "plan" else mode
        self.told = "edits"  # what the model was told last (the system prompt describes the default)

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def claude_name(self) -> str:
        return CLAUDE_NAMES[self._mode]

    def set(self, mode: str) -> str:
        """Switch to `mode` (WorkstationError for a name that is none); returns it."""
        mode = check(mode)
        with self._lock:
            changed = mode != self._mode
            if mode == "plan" and changed:
                self.previous = self._mode
            self._mode = mode
        if changed and self.on_change is not None:
            self.on_change(mode)
        return mode

    def cycle(self) -> str:
        """The next mode in MODES' order (Shift+Tab)."""
        return self.set(MODES[(MODES.index(self._mode) + 1) % len(MODES)])

    def leave_plan(self) -> str:
        """Back to the mode before `plan` (an approved plan); returns it."""
        return self.set(self.previous if self.previous != "plan" else "edits")

    def decide(self, effect: str, name: str = "") -> Verdict:
        return decide(self._mode, effect, name)

    def untold(self) -> str | None:
        """The mode when the model has not been told it yet (then it counts as told)."""
        with self._lock:
            if self.told == self._mode:
                return None
            self.told = self._mode
            return self._mode


_NOTED = re.compile(r"^\[permission mode: (ask|edits|plan|auto)\]$")


def noted(mode: str) -> str:
    """The session log's notice of a mode the user chose: a session loaded later (another agent process of an
    editor's, a resumed chat) goes on in it."""
    return f"permission mode: {mode}"


def last_noted(records: list[Record]) -> str | None:
    """The mode the session's log says the user chose last (None: none)."""
    for record in reversed(records):
        if isinstance(record, System) and record.notice == "mode" and not record.sidechain:
            found = _NOTED.match(record.content)
            if found:
                return found.group(1)
    return None


def briefing(mode: str) -> str:
    """What the model reads when the mode changes (a context update at the next turn)."""
    if mode == "plan":
        return ("[permission mode: plan] You are in plan mode: you may read, search and think, but nothing that "
                "writes files or runs commands or MCP tools (such calls are refused). When you know enough, "
                "reply, without tool calls, with your plan: the steps, the files and what changes in each. The "
                "user will approve, edit or reject it; nothing changes until they approve.")
    return f"[permission mode: {mode}] {DESCRIPTIONS[mode]}."


def plan_approved(plan: str, edited: bool) -> str:
    """The message that carries out an approved plan."""
    said = "approved this plan, as they edited it" if edited else "approved your plan"
    return f"The user {said}. Carry it out now.\n\n{plan.strip()}"
