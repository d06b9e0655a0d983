"""Sub-agents: the task tool's agent with a context of its own, on the same workspace and tools.

A sub-agent is the agent loop itself (`SubAgent` is an `Agent`), given:

* **Its records in the parent's session log**, marked `sidechain: <flow>` (`Sidechain`), the field the
  importers already give a Claude Code subagent's records. Every reader of the conversation leaves them
  out (sessions.log.conversation_turns, turns, updates.known, the plan), so the parent's context never
  holds them; and because they are in the same log, search finds them, replay shows them where they
  happened, and undo knows what the sub-agent left in a file (its tool records carry their `edits`, and
  its changes are checkpointed in the parent's turn: /undo of that turn takes them back too).
* **Its own flow of episodic events**: the flow is the sidechain's name (`task-3fa2c1`; a sub-agent's
  own sub-agent `task-3fa2c1/task-09be77`), and its operations' `parent` is the task call's operation,
  so the timeline nests them under the call and `reflect usage` counts its model calls in the session.
* **The parent's cached prefix**: the same tools in the same order (a refused tool is still offered: a
  different list would start the provider's cache over) and the same head, the parent's epoch system
  message and the summary in force, byte for byte. What the sub-agent should know beyond it (its role,
  decisions logged since, the map excerpt of its task) is one update after the head, then the task.
* **The parent's permissions, never more.** Read-only by default: a call of a tool that writes files,
  memory or runs a command is refused with one line. `write: true` is honored only when the user's
  configuration says so (agent.subagent_writes), and only a parent that may write can grant it; a writer
  edits under the parent's rules (confinement, the read-before-edit hash guard with its own reads, the
  parent's approval and allow-list for commands, the parent's checkpoints). The .env files it may open are
  those the user named, never those a task names. Nesting stops at agent.subagent_depth (default 1: a
  sub-agent starts none).
* **A budget**: agent.subagent_max_steps model calls and agent.subagent_max_tokens tokens (input plus
  output). When either runs out, one more request, with every tool refused, asks for what it found so
  far; the parent gets that, with a first line saying the summary is partial.

Several task calls in one answer run at once, at most agent.max_subagents of them (tools.task.at_once);
their edits are serialized by the parent's write lock (Services.write_lock), and each one's hash guard
refuses an edit of a file another changed since it read it.
"""

from __future__ import annotations

import dataclasses
import secrets
import threading
from typing import TYPE_CHECKING, Any

import msgspec

from ..errors import WorkstationError
from ..sessions.modelview import seen, summary_turn_text
from ..sessions.log import LogView, Session
from ..sessions.records import Assistant, Epoch, Record, System
from . import prompt, tools, updates
from .approval import ApprovalRequest
from .loop import Agent, AgentEvents, TurnResult, running_call
from .tools import DELEGATE, QUERY, ToolContext, ToolResult

if TYPE_CHECKING:
    from .approval import Approver
    from .prompt import Request

ROLE = """You are a sub-agent: the main agent handed you the task in the next message, with a context of your \
own. {access} Budget: {steps} model calls and {tokens:,} tokens. Work only on this task; when it is done, reply \
without tool calls with a summary for the main agent: what you found (paths and line numbers) or changed. The \
summary is all it will see of your work, so keep it complete and short."""
READ_ONLY = ("You may only look: tools that change files, run commands or write memory are refused; say in your "
             "summary what should change instead.")
WRITER = "You may change files where the task asks for it; the user's approval rules for commands still hold."
WRAP_UP = ("[workstation] Your budget for this task is spent ({spent}). Reply now without calling tools: what you "
           "found so far, and what is left undone.")
NO_SUMMARY = "(the sub-agent wrote no summary)"
_IDS = threading.Lock()
_ASKING = threading.Lock()  # sub-agents running at once put one question to the user at a time


class Sidechain:
    """A sub-agent's part of its parent's session log: it appends records marked `sidechain`, and reads only
    its own, unmarked, as if they were a session of their own."""

    def __init__(self, base: Session, flow: str):
        self.base = base
        self.flow = flow

    @property
    def slug(self) -> str:
        return self.base.slug

    @property
    def paths(self):
        return self.base.paths

    @property
    def counter(self):
        return self.base.counter

    def append(self, type: str, **fields: Any) -> Record:
        return self.base.append(type, sidechain=self.flow, **fields)

    def user(self, content: str, **extra: Any) -> Record:
        return self.base.user(content, sidechain=self.flow, **extra)

    def system(self, content: str, **extra: Any) -> Record:
        return self.base.system(content, sidechain=self.flow, **extra)

    def assistant(self, content: str = "", tool_calls=(), **extra: Any) -> Record:
        return self.base.assistant(content, tool_calls, sidechain=self.flow, **extra)

    def tool(self, tool_call_id: str, name: str, content: str, *, ok: bool = True, **extra: Any) -> Record:
        return self.base.tool(tool_call_id, name, content, ok=ok, sidechain=self.flow, **extra)

    def read(self) -> LogView:
        view = self.base.read()
        own = [msgspec.structs.replace(r, sidechain=None) for r in view.records if r.sidechain == self.flow]
        return LogView(own, [], view.size)


class _Guarded(tools.Toolset):
    """The parent's tools, schemas and order unchanged (the provider's cache), each call checked against
    what the sub-agent may do first."""

    def __init__(self, toolset: tools.Toolset, agent: "SubAgent"):
        self.tools = toolset.tools
        self.agent = agent

    def call(self, ctx: ToolContext, name: str, arguments: dict, call_id: str = "") -> ToolResult:
        why = self.agent.refusal(name)
        if why is not None:
            return ToolResult(f"error: {why}", ok=False, data={"outcome": "denied"})
        return super().call(ctx, name, arguments, call_id)


class SubAgent(Agent):
    """The agent loop on a sidechain of the parent's log; see the module docstring."""

    def __init__(self, parent: Agent, flow: str, *, write: bool, head: tuple[Epoch, str | None]):
        base = parent.session.base if isinstance(parent.session, Sidechain) else parent.session
        # a Sidechain is the part of a Session the loop uses with compaction off (append, user, system, assistant,
        # tool, read, slug, paths, counter): a duck, not a subclass, so that it shares its base's one log
        super().__init__(parent.ws, Sidechain(base, flow),  # type: ignore[arg-type]
                         model=parent.model_name, compaction="off",
                         approve=_asking(parent.ctx.services.approve, flow) if write else None,
                         toolset=_Guarded(parent.toolset, self), memory=parent.ws.memory(base.slug, flow=flow))
        cfg = self.config.agent
        self.flow = flow
        self.depth = depth_of(parent) + 1
        self.write = write
        self.epoch, self.summary = head
        self.max_steps = min(cfg.subagent_max_steps, cfg.max_steps)
        self.max_tokens = cfg.subagent_max_tokens
        self.spent: str | None = None  # what ran out, once the budget did
        self.wrapping = False  # the one request after the budget ran out: every tool refused
        self.env_files = parent.ctx.turn.env_files  # the .env files the user named: never those a task names
        self._call_ids = parent._call_ids  # one set for the shared log: replay pairs a result with its call by id
        # the parent's turn keeps what its sub-agents change (/undo), and one edit runs at a time
        mine, parents = self.ctx.services, parent.ctx.services
        mine.checkpoint, mine.intend, mine.write_lock = parents.checkpoint, parents.intend, parents.write_lock
        self.permissions = mine.permissions = parent.permissions  # the parent's mode, as it changes
        self.lifecycle_hooks = False  # its start and stop are SubagentStart/Stop, not a session's (work)

    def refusal(self, name: str) -> str | None:
        """Why this sub-agent may not call `name` now (None: it may)."""
        if self.wrapping:
            return "not run: your budget is spent; reply with your summary now"
        tool = self.toolset.get(name)
        if tool is None or tool.effect in (QUERY, DELEGATE) or self.write:
            return None  # an unknown tool and a task call say why themselves
        return (f"{name} is refused: this sub-agent is read-only (it may look, not change files, run commands "
                "or write memory); say in your summary what should change")

    def work(self, prompt: str, cancel: threading.Event | None, events: AgentEvents) -> ToolResult:
        """Run the task to its summary (a partial one when the budget ran out); the task tool's result."""
        self._hook("SubagentStart", events, agent_id=self.flow, agent_type="task")
        try:
            return self._work(prompt, cancel, events)
        finally:
            self._hook("SubagentStop", events, agent_id=self.flow, agent_type="task", stop_hook_active=False)

    def _work(self, prompt: str, cancel: threading.Event | None, events: AgentEvents) -> ToolResult:
        result = self.run(prompt, events, cancel)
        final, wrap = result, None
        if self.spent and result.error is None:
            self.wrapping = True
            final = wrap = self.run(WRAP_UP.format(spent=self.spent), events, cancel)
        summary = final.text or self._last_words()
        error = result.error or final.error
        runs = [r for r in (result, wrap) if r is not None]
        data: dict[str, Any] = {"flow": self.flow, "write": self.write, "steps": sum(r.steps for r in runs),
                                "tokens_in": sum(r.tokens_in for r in runs),
                                "tokens_out": sum(r.tokens_out for r in runs), "spent": self.spent}
        data = {k: v for k, v in data.items() if v is not None}
        if error is not None:
            text = f"error: the sub-agent stopped: {error}"
            if summary:
                text += f"\nWhat it said before it stopped:\n{summary}"
            outcome = "cancelled" if error == "cancelled" else "error"
            return ToolResult(tools.cap(text), ok=False, data={"outcome": outcome, "subagent": data})
        if self.spent:
            text = (f"[partial: the sub-agent's budget ran out after {self.spent}; this is what it found so far]\n"
                    f"{summary or NO_SUMMARY}")
            return ToolResult(tools.cap(text), data={"outcome": "partial", "subagent": data})
        return ToolResult(tools.cap(summary or NO_SUMMARY), data={"outcome": "ok", "subagent": data})

    def _last_words(self) -> str:
        return next((r.content for r in reversed(self.session.read().records)
                     if isinstance(r, Assistant) and r.content.strip()), "")

    # ------------------------------------------------------------------ the loop's hooks
    def _step(self, spec, result: TurnResult, events: AgentEvents, cancel, llm) -> bool:
        self.ctx.turn.env_files = self.env_files
        if super()._step(spec, result, events, cancel, llm) or self.wrapping:
            return True
        used = result.tokens_in + result.tokens_out
        if result.steps >= self.max_steps:
            self.spent = f"{result.steps} model calls (agent.subagent_max_steps)"
        elif used >= self.max_tokens:
            self.spent = f"{used:,} tokens (agent.subagent_max_tokens)"
        return self.spent is not None

    def _sync_context(self, window: int) -> bool:
        """No epoch of its own: the parent's head, then one update (its role, and what changed since the head
        was written), then anything that changes while it works."""
        budget = window - prompt.reply_reserve(window)
        view = self.session.read()
        now, blocks = self.context_sync.state(view, budget)
        update = updates.difference(updates.known(LogView([self.epoch, *view.records]), self.epoch), now, blocks)
        first = not any(isinstance(r, System) and r.update is not None for r in view.records)
        if first:
            access = WRITER if self.write else READ_ONLY
            role = ROLE.format(access=access, steps=self.max_steps, tokens=self.max_tokens)
            text = role + (f"\n\n{update.text}" if update else "")
            self._wrote(self.session.system(text, update=update.data if update else {}))
        elif update is not None:
            self._wrote(self.session.system(update.text, update=update.data))
        return False

    def _request(self, window: int, model: str) -> "Request":
        told = self.context_sync
        # no compaction of its own (a sidechain): a trim is a sticky cut, as the parent's would be
        request = prompt.build(self.session.read(), self.config, epoch=self.epoch, base=told.base, window=window,
                                model=model, tools_tokens=told.tool_schema_tokens(), count=told.count,
                                counter=self.session.counter, cut=told.cut)
        told.cut = request.cut or told.cut
        if self.summary:  # the parent's head is its system message and the summary in force
            request.messages.insert(1, {"role": "system", "content": self.summary})
            request.tokens += told.count(self.summary) + prompt.MESSAGE_OVERHEAD
        return request

    def _unique_call_id(self, call_id: str) -> str:
        with _IDS:  # sub-agents running at once check and add to the one set
            return super()._unique_call_id(call_id)

    def _auto_commit(self, *args) -> None:
        """The parent's turn commits (agent.auto_commit), sub-agents' changes with it."""


def _asking(approve: "Approver | None", flow: str) -> "Approver | None":
    """The parent's approver, the question naming the sub-agent that asks; one question at a time."""
    if approve is None:
        return None

    def ask(request: ApprovalRequest) -> bool:
        with _ASKING:
            return approve(dataclasses.replace(request, reason=f"{request.reason}; asked by sub-agent {flow}"))

    return ask


def depth_of(agent: Agent) -> int:
    return agent.depth if isinstance(agent, SubAgent) else 0


def head_of(agent: Agent) -> tuple[Epoch, str | None] | None:
    """The head a sub-agent of `agent` starts with: the epoch record and the summary text in force (None: no
    request was sent yet)."""
    if isinstance(agent, SubAgent):
        return agent.epoch, agent.summary
    view = seen(agent.session.read())
    epoch = updates.current_epoch(view)
    if epoch is None:
        return None
    compact = view.last_compact()
    return epoch, summary_turn_text(compact) if compact and epoch.summary == compact.id else None


def delegate(parent: Agent, prompt: str, write: bool) -> ToolResult:
    """The task tool for `parent`: a sub-agent runs `prompt` and its summary is the result."""
    cfg = parent.config.agent
    depth = depth_of(parent)
    if depth >= cfg.subagent_depth:
        why = ("sub-agents are off (agent.subagent_depth = 0)" if not cfg.subagent_depth else
               f"a sub-agent cannot start another beyond depth {cfg.subagent_depth} (agent.subagent_depth): "
               "do this part yourself")
        return ToolResult(f"error: {why}", ok=False, data={"outcome": "denied"})
    if write and not cfg.subagent_writes:
        return ToolResult("error: sub-agents may not write in this workspace (agent.subagent_writes is false): run "
                          "the task read-only and make the changes yourself", ok=False, data={"outcome": "denied"})
    if write and isinstance(parent, SubAgent) and not parent.write:
        return ToolResult("error: a read-only sub-agent cannot start one that writes", ok=False,
                          data={"outcome": "denied"})
    head = head_of(parent)
    if head is None:
        return ToolResult("error: a sub-agent starts from a request's head; none was sent yet", ok=False)
    name = f"task-{secrets.token_hex(3)}"
    flow = f"{parent.flow}/{name}" if isinstance(parent, SubAgent) else name
    cancel = parent.ctx.turn.cancel
    # the parent's UI hears of the sub-agent's records (marked sidechain) and shows what it does on its status line
    shown, recorded = parent._events.on_activity, parent._events.on_record

    def activity(kind: str, what: str) -> None:
        if shown is not None and kind != "idle":
            shown(kind, f"{name}: {what}")

    # ... and which task call each record is of (Claude Code's stream names it: parent_tool_use_id)
    task_call = running_call()
    def heard(record: Record, parent_call: str | None = None) -> None:
        if recorded is not None:
            recorded(record, parent_call=parent_call or task_call)

    child = SubAgent(parent, flow, write=write, head=head)
    try:
        return child.work(prompt, cancel, AgentEvents(on_activity=activity, on_record=heard if recorded is not None else None))
    except WorkstationError as err:
        return ToolResult(f"error: the sub-agent could not run: {err}", ok=False)
    finally:
        child.close()
