"""The session host: the one way every front end (the app, `workstation chat`, ACP) runs the agent.

A front end says what it is and what it can do; the host does the rest, the same for all of them:

* **Assembly**: workspace -> toolset (the workspace's MCP servers, `mcp.client.open_toolset`, started once
  per workspace) -> session -> agent (`Host.session`, a `HostedSession`).
* **The one-turn lock**: one turn at a time per workspace (`Host.turn`); a turn in another session of the
  same workspace waits for it.
* **Cancel**: `HostedSession.cancel` stops the running turn (the model call, a running command, a question
  waiting for its answer).
* **Approvals**: the front end's approver (agent.approval.Approver) is the agent's.
* **Permission modes** (agent.modes): `HostedSession.mode`, `set_mode`, `cycle_mode`; a turn in plan mode
  ends with `TurnResult.plan`, which the front end's user approves (`approve_plan`, maybe edited) or rejects.
* **The compaction policy**: a front end whose process exits after the turn (`exits_after_turn`: `chat`)
  compacts before the request on the agent's thread, since a background compaction would be cancelled at
  exit; one that stays (the app, ACP) may compact in the background. Either way the guard compacts
  before any request that would not fit (agent.loop `_guard`).
* **A typed event stream**: what a turn does reaches the front end as `Event`s (the dataclasses below),
  through `HostedSession.run(text, sink)` and the subscribers of `HostedSession.subscribe`.

After codex-rs (`protocol.rs`: `Op` in, `EventMsg` out) and crush (`internal/app`: one app wires the agent,
a typed broker feeds the TUI and its server).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Union

from .agent.loop import Agent, AgentEvents, TurnResult
from .agent.modes import plan_approved
from .errors import WorkstationError

if TYPE_CHECKING:
    from .agent.approval import Approver
    from .agent.tools import Toolset, ToolResult
    from .mcp.client import McpToolset
    from .runtime import Workspace
    from .sessions.log import Session
    from .sessions.records import Record


# --------------------------------------------------------------------------- events
@dataclass(frozen=True)
class TextFragment:
    """A fragment of the reply as it streams."""

    text: str


@dataclass(frozen=True)
class Retry:
    """The text streamed so far is void: a retry follows (the log says why)."""

    why: str


@dataclass(frozen=True)
class ToolStarted:
    """A tool call starts running: `what` names it for a status line (`read_lines(a.py 1-40)`)."""

    what: str


@dataclass(frozen=True)
class ToolFinished:
    name: str
    arguments: dict
    result: ToolResult


@dataclass(frozen=True)
class RecordWritten:
    """A record the turn (or its compaction) wrote to the session log, as written."""

    record: "Record"
    parent_call: str | None = None  # a sub-agent's record: the task call it is of


@dataclass(frozen=True)
class Notice:
    """One line for the user (a trimmed context, a compaction, a commit); it is a record too."""

    line: str


@dataclass(frozen=True)
class Step:
    """A model call is about to be sent: its context size in the window."""

    step: int
    tokens: int
    window: int


@dataclass(frozen=True)
class Activity:
    """What the agent does now, other than running a tool: ("model", name), ("idle", "")."""

    kind: str
    what: str


@dataclass(frozen=True)
class Plan:
    """The agent wrote its whole plan: [{text, status}] (sessions.plan)."""

    items: list


@dataclass(frozen=True)
class TurnFinished:
    result: TurnResult


Event = Union[TextFragment, Retry, ToolStarted, ToolFinished, RecordWritten, Notice, Step, Activity, Plan,
              TurnFinished]
Sink = Callable[[Event], None]


def agent_events(sink: Sink, *, stream: bool = True) -> AgentEvents:
    """The loop's callbacks (agent.loop.AgentEvents) as events to `sink`. `stream` False: the reply is not
    streamed (its text comes with the record)."""

    def activity(kind: str, what: str) -> None:
        sink(ToolStarted(what) if kind == "tool" else Activity(kind, what))

    return AgentEvents(
        on_text=(lambda text: sink(TextFragment(text))) if stream else None,
        on_retry=lambda why: sink(Retry(why)),
        on_tool=lambda name, args, result: sink(ToolFinished(name, args, result)),
        on_step=lambda step, tokens, window: sink(Step(step, tokens, window)),
        on_notice=lambda line: sink(Notice(line)),
        on_record=lambda record, parent_call=None: sink(RecordWritten(record, parent_call)),
        on_activity=activity,
        on_plan=lambda items: sink(Plan(items)))


# --------------------------------------------------------------------------- the host
class Host:
    """One workspace's agents: its toolset, its one-turn lock and its compaction policy."""

    def __init__(self, ws: Workspace, toolset: McpToolset | None = None, *, exits_after_turn: bool = False):
        self.ws = ws
        self.toolset = toolset
        self.compaction = "sync" if exits_after_turn else "background"
        self.turn = threading.Lock()  # one turn at a time in this workspace

    @classmethod
    def open(cls, ws: Workspace, *, exits_after_turn: bool = False,
             on_notice: Callable[[str], None] | None = None) -> Host:
        """A host whose toolset is the workspace's MCP servers, started now (each that fails: a line to
        `on_notice`); `close` stops them."""
        from .mcp.client import open_toolset  # lazy: the MCP SDK, only with servers configured

        return cls(ws, open_toolset(ws, on_notice=on_notice), exits_after_turn=exits_after_turn)

    def session(self, session: Session, *, approve: Approver | None = None, model: str | None = None,
                toolset: Toolset | None = None, cancel: threading.Event | None = None) -> HostedSession:
        """`session` run by an agent of this host (`toolset`: one of the session's own, else the host's;
        `cancel`: the front end's stop, when it outlives the session, else one of the session's own)."""
        agent = Agent(self.ws, session, approve=approve, model=model, toolset=toolset or self.toolset,
                      compaction=self.compaction)
        return HostedSession(self, agent, cancel or threading.Event())

    def close(self) -> None:
        """Stop the MCP servers (after every agent of the host closed: no call of theirs may be running)."""
        toolset, self.toolset = self.toolset, None
        if toolset is not None:
            toolset.close()


@dataclass
class HostedSession:
    """One session and its agent under a host: turns one at a time, cancel, the event stream."""

    host: Host
    agent: Agent
    cancel: threading.Event = field(default_factory=threading.Event)
    _subscribers: list[Sink] = field(default_factory=list)

    @property
    def session(self) -> Session:
        return self.agent.session

    @property
    def slug(self) -> str:
        return self.agent.session.slug

    def subscribe(self, sink: Sink) -> Callable[[], None]:
        """`sink` hears every event of every turn from now on; returns what unsubscribes it."""
        self._subscribers.append(sink)
        return lambda: self._subscribers.remove(sink) if sink in self._subscribers else None

    def publish(self, event: Event) -> None:
        for sink in list(self._subscribers):
            sink(event)

    def run(self, text: str, sink: Sink | None = None, *, stream: bool = True,
            locked: bool = False) -> TurnResult:
        """One user turn under the host's one-turn lock (`locked`: the caller holds it); `sink` and the
        subscribers hear its events, the last one TurnFinished. WorkstationError when it is refused before it
        begins (no model, an empty message)."""

        def both(event: Event) -> None:
            if sink is not None:
                sink(event)
            self.publish(event)

        lock = _Held() if locked else self.host.turn
        with lock:
            result = self.agent.run(text, agent_events(both, stream=stream), cancel=self.cancel)
        both(TurnFinished(result))
        return result

    def stop(self) -> None:
        """Stop the running turn, as Escape does."""
        self.cancel.set()

    def notify(self, message: str, kind: str) -> None:
        """The front end calls its user back (`kind`: Claude Code's notification_type, idle_prompt or
        permission_prompt): the Notification hooks hear it."""
        self.agent.notify(message, kind)

    # ------------------------------------------------------------------ permission modes (agent.modes)
    @property
    def mode(self) -> str:
        """The permission mode: ask, edits, plan or auto."""
        return self.agent.mode

    def set_mode(self, mode: str) -> str:
        """Switch the permission mode (ours, or Claude Code's name for it); WorkstationError for neither. It
        holds from the next tool call on; the model is told at its next turn. Returns the mode (ours)."""
        return self.agent.set_mode(mode)

    def cycle_mode(self) -> str:
        """The next mode (Shift+Tab in the app)."""
        return self.agent.permissions.cycle()

    def approve_plan(self, plan: str, sink: Sink | None = None, *, edited: bool = False,
                     stream: bool = True, locked: bool = False) -> TurnResult:
        """The user approved the plan a turn in plan mode ended with (`edited`: as they changed it): back to
        the mode before plan, and a turn that carries it out (`locked`: the caller holds the one-turn lock)."""
        if not plan.strip():
            raise WorkstationError("an empty plan: nothing to approve")
        self.agent.permissions.leave_plan()
        return self.run(plan_approved(plan, edited), sink, stream=stream, locked=locked)

    def reject_plan(self, *, locked: bool = False) -> str:
        """The user rejected the plan: the mode stays plan, nothing changed, and the model hears so with the
        user's next message. Returns the mode."""
        with _Held() if locked else self.host.turn:
            self.agent.session.system("[The user rejected your plan: nothing was changed; you are still in plan "
                                      "mode. Their next message says what to do instead.]",
                                      update={"plan": "rejected"})
        return self.mode

    def close(self, *, remove_if_empty: bool = True) -> None:
        """Close the agent (its memory; a background compaction stops); an empty session leaves no file."""
        self.agent.close()
        if remove_if_empty:
            self.agent.session.remove_if_empty()


class _Held:
    """The lock a caller already holds."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
