"""The agent's tool-calling loop, per the code-memory seed.

A user turn: query memory for the files and symbols the task names, through
the staleness gate (memoryfirst.py); then steps until the model answers
without tools. Each step assembles the context to a budget, calls the model
(workstation.llm: streaming, retries, fallbacks, cancel) and runs the tools
it asked for: reads go through the map first (file_meta), then ranges
(read_lines); a range read again while unchanged and still in context is
answered from memory; edits (replace_lines) are refused on stale reads and
re-index the file at once; decisions are logged and shown in every later
context, and each later answer citing one counts as a reuse.

Context of each model call, in order: the epoch's head (the system prompt,
pinned instructions, the decision log, the project's instruction files
(AGENTS.md, CLAUDE.md: see instructions.py) and a map excerpt, as they stood
when the epoch began); the newest compact summary; the turns, with the context
updates written since among them (updates.py: a request only grows at its end,
so the provider's prompt cache serves the one before it). Before each request
the guard (`_guard`) measures it as it will be sent (sessions.requestsize) and
compacts first when that passes memory.compact_token_ratio of the window: on
this thread when the request would not fit otherwise or the process exits
after the turn ("sync"), else in the background. Only when no compaction can
help are the oldest turns left out of the request (never out of the log), as a
sticky cut (agent.prompt.Cut); if even the head and the latest message cannot
fit, the turn stops with one clear line and no request is sent. The head and its updates are kept in step
with the log, and the request built from it, by contextsync.py.

Every operation lands in the episodic log (each model call and tool call as
an operation: op_start, then the model_call or tool_call event that ends it),
and the session log records carry what `workstation report` needs
(context_tokens, base_tokens, served_from, memory, file_tokens, reused) so a
log alone can be reported on. Known secret values (configured API keys) are
masked in every record the loop writes.
"""

from __future__ import annotations

import contextvars
import copy
import dataclasses
import functools
import json
import re
import secrets
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol

from .. import llm, scrub
from ..errors import WorkstationError
from ..memory.decisions import decision_exists
from ..memory.episodic import ERROR, MEMORY_HIT, MEMORY_MISS, MODEL_CALL, TURN
from ..sandbox import Policy
from ..sessions.compaction import AutoCompactor, Conversation
from ..sessions.modelview import seen
from ..sessions.records import Assistant, Compact, Record, System
from ..sessions.log import new_record_id
from ..sessions.recall import recall
from ..sessions.requestsize import budget as window_budget, epoch_for, request_size
from ..sessions.turns import starts_turn
from ..tokens import count
from . import budget, memoryfirst, tools, updates
from ..hooks import HOOK, Hooks, Outcome
from ..hooks import tool_input as hook_input, tool_names as hook_names
from .approval import ApprovalRequest, Approver
from .checkpoints import Checkpoints, Restored
from .commit import auto_commit
from .prompt import MESSAGE_OVERHEAD, ContextOverflow, Request
from .contextsync import ContextSync, NoEpoch
from .tools import toolcall
from .tools.fileio import ReadLedger
from .grants import Grant
from .instructions import ProjectInstructions
from .modes import Permissions, briefing, from_claude, last_noted, noted
from .tools import ToolResult
from .tools.base import RangeMemory
from .tools.task import at_once, groups

if TYPE_CHECKING:
    from pathlib import Path

    from ..config import Config
    from ..memory import Memory
    from ..runtime import Workspace
    from ..sessions.log import Session
    from ..skills import Command

# the id of the tool call whose work runs in this context (each call of a step's, in its own thread): a
# sub-agent names the task call that started it (subagent.delegate)
MAX_GUARD_COMPACTIONS = 3  # compactions in a row before one request, while each lands and it still does not fit
_RUNNING_CALL: contextvars.ContextVar[str] = contextvars.ContextVar("ws_running_call", default="")


def running_call() -> str:
    """The id of the tool call this code runs for ("" outside one)."""
    return _RUNNING_CALL.get()


SYSTEM_PROMPT = """You are a careful coding agent working in the repository at {root}.
Keep your context small and your edits surgical:
- Never read a file blind: file_meta gives its map (every symbol with its line range) for a few percent \
of the file's tokens. Then read_lines just the range you need, and replace_lines exactly that range.
- find, impact and grep locate code and call sites without reading whole files.
- When you settle a naming, pattern or design convention, call log_decision once. The decision log below \
is shown in every context: follow it, and cite [D:<id>] in your reply whenever you apply a decision.
- recall(record_id) fetches a redacted tool output back; recall(turn=N), a whole turn a summary stands for.
- run_command needs the user's approval unless the allow-list covers the command.
- Reply without tool calls when the task is done."""


def base_tokens(root: Path | str) -> int:
    """The head every request starts with as the code is now (the system prompt and the tool schemas): what
    `workstation report` counts for a log that did not record `base_tokens` (costs.report.build)."""
    return count(SYSTEM_PROMPT.format(root=root)) + MESSAGE_OVERHEAD + count(json.dumps(tools.schemas()))

NO_MODEL = ("no model configured: set [model] name in ~/.config/workstation/config.toml, WORKSTATION_MODEL, or "
            "--model (e.g. openai/gpt-4o-mini); slash commands work without one (/help)")
_CITED = re.compile(r"\[D:(d[0-9a-f]{12})\]")
COMPACTION_MODES = ("background", "sync", "off")
LIFECYCLE = frozenset({"SessionStart", "UserPromptSubmit", "Stop"})  # a session's hooks, not a sub-agent's


class NoModel(WorkstationError):
    """No model is configured."""


@dataclass
class TurnResult:
    session: str = ""
    text: str = ""
    steps: int = 0
    tool_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    context_tokens: int = 0  # of the last request
    trimmed: int = 0  # most turns left out of one request to fit the window
    error: str | None = None
    stopped: str | None = None  # a limit stopped the turn: "max_steps" (agent.max_steps), "budget" (max_budget_usd)
    plan: str | None = None  # the plan a turn in plan mode ended with, for the user to approve (agent.modes)


class RecordSink(Protocol):
    """Hears a record as written; `parent_call` is the task call a sub-agent's record is of (its innermost)."""

    def __call__(self, record: Record, parent_call: str | None = None) -> None: ...


@dataclass
class AgentEvents:
    """Callbacks for a UI; each runs on the agent's thread (post to the UI from there)."""

    on_text: Callable[[str], None] | None = None  # a streamed fragment of the reply
    on_retry: Callable[[str], None] | None = None  # text streamed so far is void; a retry follows
    on_tool: Callable[[str, dict, ToolResult], None] | None = None
    on_step: Callable[[int, int, int], None] | None = None  # (step, context tokens, window)
    on_notice: Callable[[str], None] | None = None  # one line for the user (trimmed context, compaction), logged too
    on_record: "RecordSink | None" = None  # every record the turn (or its compaction) wrote, as written
    # what the agent is doing now, for a status line: ("model", model name) while waiting for a reply,
    # ("tool", "read_lines(a.py 1-40)") while a tool or command runs, ("idle", "") when the turn is over
    on_activity: Callable[[str, str], None] | None = None
    on_plan: Callable[[list], None] | None = None  # the agent wrote its whole plan: [{text, status}] (sessions.plan)


class Agent:
    """One agent bound to a workspace (runtime.Workspace) and a session (sessions.Session)."""

    def __init__(self, workspace: "Workspace", session: "Session", *, approve: Approver | None = None,
                 model: str | None = None, compaction: str = "background", toolset: tools.Toolset | None = None,
                 memory: "Memory | None" = None):
        if compaction not in COMPACTION_MODES:
            raise ValueError(f"compaction must be one of {COMPACTION_MODES}")
        self.ws = workspace
        self.toolset = toolset or tools.Toolset()
        self.session = session
        self.config = workspace.config
        self.model_name = model or self.config.model.name
        self.compaction = compaction
        self.memory = memory or workspace.memory(session.slug)  # a sub-agent's: its own flow (agent/subagent.py)
        self.kmap = workspace.kmap
        agent_cfg = self.config.agent
        self.ranges = RangeMemory()
        self.hooks: Hooks = getattr(workspace, "hooks", None) or Hooks([], root=workspace.root)
        self._hook_allowed = ""  # the call a PreToolUse hook allowed: it runs without asking
        self._started = False  # SessionStart ran (the first turn of this agent)
        self._stop_continued = False  # a Stop hook asked for more in this turn already
        self._last_request_tokens = 0  # the previous request's size: its prefix is in the provider's cache
        self.lifecycle_hooks = True  # SessionStart, UserPromptSubmit and Stop fire (not in a sub-agent)
        self.grant: Grant | None = None  # what the running turn's custom command lets run unasked (grants.py)
        if approve is not None:
            approve = self._approver(approve)
        # what the agent may do without asking (agent.modes); a sub-agent shares its parent's
        self.permissions = Permissions(agent_cfg.permission_mode)
        self.ctx = tools.tool_context(
            self.kmap, Policy.for_workspace(workspace.paths, agent_cfg, self.config.model.api_key_env),
            staging=workspace.paths.staging, lsp=workspace.lsp, memory=self.memory, recall=self._recall,
            session=session.slug, ranges=self.ranges, approve=approve, allow=list(agent_cfg.command_allow),
            command_timeout_s=agent_cfg.command_timeout_s, max_output_chars=agent_cfg.max_output_chars,
            delegate=self._delegate, skills=getattr(workspace, "skills", None), permissions=self.permissions)
        # what a file held before the turn's first change to it (checkpoints.py): /undo, /rewind, /diff
        self.checkpoints = Checkpoints(workspace.paths, session, private=(workspace.paths.state,))
        self._turn_id = ""  # the id of the user message of the newest turn (set below, then by each run)
        self.ctx.services.checkpoint = lambda rels: self.checkpoints.take(self._turn_id, rels, resolved=True)
        self.ctx.services.intend = lambda rel, after: self.checkpoints.intend(self._turn_id, rel, after)
        self.user_ctx = self.ctx.for_user()  # slash commands: the user's reads, not the model's
        records = session.read().records
        self._turn_id = next((r.id for r in reversed(records) if starts_turn(r)), "")
        # the mode the user last chose in this session goes on (an editor's next agent process loads it)
        if (chosen := last_noted(records)) is not None:
            self.permissions.set(chosen)
        def mode_changed(mode: str) -> None:
            self._notice(noted(mode), "mode")

        self.permissions.on_change = mode_changed
        self.step = sum(1 for r in records if isinstance(r, Assistant))
        self._call_ids = {c.id for r in records if isinstance(r, Assistant) for c in r.tool_calls or ()}
        self._new_epoch = False  # an epoch began since the previous request (its cause goes on the next answer)
        self._compactor: threading.Thread | None = None
        self._closing = threading.Event()  # stops a background compaction's model call at close()
        self._auto = AutoCompactor(self.memory.episodic)  # backs off from a session whose compaction failed
        self._closed = False
        self._lifecycle = threading.Lock()  # close() never joins a compactor not yet started
        self._events = AgentEvents()  # the running turn's callbacks
        self._running = False  # a turn is running (undo and rewind wait for it to end)
        self.instructions = ProjectInstructions(workspace.paths)
        self.context_sync = ContextSync(session, self.config, base=SYSTEM_PROMPT.format(root=workspace.root),
                                        toolset=self.toolset, memory=self.memory, kmap=self.kmap,
                                        instructions=self.instructions, ctx=self.ctx, wrote=self._wrote)

    # ------------------------------------------------------------------ public
    def close(self) -> None:
        with self._lifecycle:
            if self._closed:
                return
            self._closed = True
            compactor = self._compactor
        if self._started:  # the session this agent started ends (SessionStart ran at its first turn)
            self._hook("SessionEnd", self._events, reason="exit")
        self.ctx.services.reindex()
        if compactor is not None:
            self._closing.set()
            compactor.join()
        self.memory.close()

    def model_spec(self):
        """The llm.ModelSpec to call; NoModel when none is configured."""
        spec = self.ws.model_spec(self.model_name) if self.model_name else None
        if spec is None:
            raise NoModel(NO_MODEL)
        return spec

    def set_model(self, name: str) -> None:
        self.model_name = name.strip()

    @property
    def running(self) -> bool:
        """A turn is running: what the session's log gains meanwhile is the turn's as much as anyone's."""
        return self._running

    @property
    def mode(self) -> str:
        """The permission mode (agent.modes)."""
        return self.permissions.mode

    def set_mode(self, mode: str) -> str:
        """Switch the permission mode (ours or Claude Code's name; WorkstationError for neither); the model is
        told at its next turn. Returns ours."""
        return self.permissions.set(from_claude(mode))

    def configured_window(self) -> int:
        """model.context_window when it describes the model in use (0: ask litellm)."""
        cfg = self.config.model
        return cfg.context_window if cfg.context_window and self.model_name == cfg.name else 0

    def context_window(self, model: str) -> int:
        return self.configured_window() or llm.context_window(model)

    def expand_command(self, line: str) -> str | None:
        """The message a custom slash command line (workstation.skills: `/NAME ARGS`) sends; None when the
        line is no custom command (a built-in one goes to commands.slash)."""
        found = self._custom_command(line)
        return found[0].expand(found[1]) if found is not None else None

    def _custom_command(self, line: str) -> "tuple[Command, str] | None":
        name, _, rest = line.strip().partition(" ")
        catalog = self.ctx.services.skills
        command = catalog.commands.get(name[1:]) if catalog is not None and name.startswith("/") else None
        return (command, rest) if command is not None else None

    def pins(self) -> list[str]:
        return [r.content for r in self.session.read().records if isinstance(r, System) and r.pin]

    def pin(self, text: str) -> None:
        """An instruction re-injected into every later context (the log keeps it; compaction cannot drop it)."""
        if not text.strip():
            raise WorkstationError("nothing to pin: /pin TEXT")
        self.session.system(scrub.mask(text.strip()), pin=True)

    def run(self, text: str, events: AgentEvents | None = None,
            cancel: threading.Event | None = None) -> TurnResult:
        """One user turn: model calls and their tool calls until the model answers without tools."""
        if not text or not text.strip():
            raise WorkstationError("empty message")
        spec = self.model_spec()
        grant = None
        if (custom := self._custom_command(text)) is not None:  # /NAME ARGS sends its body
            command, arguments = custom
            text = command.expand(arguments)
            grant = Grant(f"/{command.name}", command.allowed_tools) if command.allowed_tools else None
        text = scrub.mask(text)  # before memory-first: its lookups of the words in it are logged too
        self.ctx.turn.env_files = scrub.env_files_named(text)  # the .env files the model may open this turn
        events = events or AgentEvents()
        self._events = events
        result = TurnResult(session=self.session.slug)
        started = self._session_start(events)
        prompt = self._hook("UserPromptSubmit", events, prompt=text)
        if prompt.blocked or prompt.stop:
            why = prompt.stop_reason if prompt.stop else prompt.reason
            result.error = self._notice(f"a UserPromptSubmit hook refused the message: {why}", "hook")
            self._events = AgentEvents()
            return result
        turn = memoryfirst.query(self.kmap, text)
        self.context_sync.new_turn(turn)
        # what this message's lookups found reaches the model before the message (or in a new epoch's head)
        self._new_epoch = self._sync_context(self.context_window(spec.model))
        user = self._wrote(self.session.user(text, memory=turn.summary()))
        self._turn_id = user.id
        # the mode changed since the model last heard (a sub-agent's parent heard it: its own is in its role)
        if self.lifecycle_hooks and (mode := self.permissions.untold()) is not None:
            self._wrote(self.session.system(briefing(mode), update={"mode": mode}))
        for event, said in (("SessionStart", started), ("UserPromptSubmit", prompt.context_text)):
            if said:  # what the hooks add reaches the model after the message, as a context update
                self._wrote(self.session.system(f"[{event} hook]\n{said}", update={"hook": event}))
        self.memory.record(TURN, "user", chars=len(text), turn_id=user.id)
        for lookup in turn.lookups:
            self.memory.record(MEMORY_HIT if lookup.hit else MEMORY_MISS, lookup.key, tier="kmap",
                               kind=lookup.kind, files=lookup.files, reason=lookup.reason or None)
        self.ctx.turn.cancel = cancel  # a command the model runs is killed when the user stops the turn
        self._stop_continued = False  # a Stop hook asked for more in this turn already
        self._running = True
        self.grant = grant
        try:
            for _ in range(self.config.agent.max_steps):
                if cancel is not None and cancel.is_set():
                    result.error = self._notice("cancelled", "cancelled")
                    break
                self.step += 1
                self.memory.step = self.step
                self.ctx.turn.step = self.step
                if self._step(spec, result, events, cancel, llm):
                    break
            else:
                result.stopped = "max_steps"
                result.error = self._notice(
                    f"stopped after {self.config.agent.max_steps} steps (agent.max_steps); "
                    "send 'continue' to go on", "error")
            if self.config.agent.auto_commit and result.error is None:
                self._auto_commit(user.id, text, events, cancel)
        finally:
            self._running = False
            self.grant = None
            self.ctx.turn.cancel = None
            self.memory.episodic.fence()  # the turn's events are visible to the TUI and reflection
            if events.on_activity:
                events.on_activity("idle", "")
            self._events = AgentEvents()
        return result

    def _auto_commit(self, since: str, request: str, events: AgentEvents, cancel) -> None:
        """agent.auto_commit: what this turn changed, committed (never pushed); one line for the user."""
        self.ctx.services.reindex()
        line = auto_commit(self.ws, self.session, since, model=self.model_name, request=request, cancel=cancel)
        if line:
            self._tell(line, "commit", events)

    def _wrote(self, record: Record) -> Record:
        """Tell the UI about a record the turn wrote (it needs the ids to jump to turns); returns it."""
        if self._events.on_record:
            self._events.on_record(record)
        return record

    # ------------------------------------------------------------------ one step
    def _step(self, spec, result: TurnResult, events: AgentEvents, cancel, llm) -> bool:
        """One model call and its tools; True when the turn is over."""
        window = self.context_window(spec.model)
        try:
            request = self._prepare(window, spec.model, events)
        except ContextOverflow as err:
            self.memory.record(ERROR, "context", ok=False, error=str(err))
            result.error = self._notice(str(err), "error")
            return True
        result.steps += 1
        result.context_tokens = request.tokens
        result.trimmed = max(result.trimmed, request.trimmed)
        if request.newly_trimmed:  # said once per cut: the requests after it leave out the same
            self._tell(f"context trimmed to fit {window:,} tokens: {request.trimmed} older messages left out of "
                       "this request and the next ones until a compaction (the log keeps them; /compact "
                       "summarizes them)", "trimmed", events)
        cache_break = self.context_sync.cache_break(spec.model, request.messages, self._new_epoch)
        self._new_epoch = False
        cached = self._last_request_tokens if cache_break is None else 0
        self._last_request_tokens = request.tokens
        verdict = budget.check(self.session.read().records, self.config.agent.max_budget_usd, spec.model,
                               request.tokens, cached)
        if verdict is not None and verdict.over:  # before the request: a budget is never passed, only met
            result.stopped = "budget"
            result.error = self._notice(verdict.line(), "budget")
            return True
        if cache_break in ("model switch", "tools changed"):
            self._tell(f"{cache_break}: this request starts without the provider's prompt cache", "cache", events)
        if events.on_step:
            events.on_step(self.step, request.tokens, request.window)
        self.ranges.new_request(request.visible_calls)
        completion = failure = None
        # an operation whose end event is the model_call: a crash mid-call leaves its op_start unpaired
        if events.on_activity:
            events.on_activity("model", spec.model)
        reply_id = new_record_id()  # the end event names the record the reply becomes (the timeline's jump)
        with self.memory.operation(MODEL_CALL, spec.model, model=spec.model, context_tokens=request.tokens,
                                   turn_id=reply_id) as op:
            streamed = scrub.StreamMasker(events.on_text) if events.on_text else None
            try:
                completion = llm.complete(spec, request.messages, tools=self.toolset.schemas(), on_text=streamed,
                                          on_retry=lambda why: self._retrying(why, events), cancel=cancel,
                                          cache_key=self.session.slug)
            except llm.LLMCancelled:
                op.set(ok=False, error="cancelled")
            except llm.LLMError as err:
                failure = err
                op.set(ok=False, error=str(err), kind=err.kind)
            else:
                op.name = completion.model  # the end event names the model that answered (maybe a fallback)
                op.set(tokens_in=completion.tokens_in, tokens_out=completion.tokens_out,
                       cost_usd=completion.cost_usd, model=completion.model, attempts=completion.attempts,
                       fallback_from=spec.model if completion.model != spec.model else None,
                       cache_read_tokens=completion.cache_read_tokens or None,
                       cache_creation_tokens=completion.cache_creation_tokens or None,
                       cache_creation_1h_tokens=completion.cache_creation_1h_tokens or None,
                       cache_break=cache_break)
            if streamed:
                streamed.flush()  # what was held back in case a key was arriving, masked
        if failure is not None:
            message = str(failure)
            if failure.kind in ("connection", "auth", "config", "not_found"):
                message += " (check [model] in ~/.config/workstation/config.toml, or /model NAME)"
            result.error = self._notice(message, "error")
            return True
        if completion is None:
            result.error = self._notice("cancelled", "cancelled")
            return True
        result.tokens_in += completion.tokens_in
        result.tokens_out += completion.tokens_out
        asked = [toolcall.parse(c) for c in completion.tool_calls]  # each call's arguments parsed once
        for each in asked:
            toolcall.register_env_writes(each)
        calls = [{"id": self._unique_call_id(c.id), "name": c.name, "arguments": scrub.mask(c.kept_arguments())}
                 for c in completion.tool_calls]
        reused = self._note_reuse(completion.text)
        text = scrub.mask(completion.text)
        record = self._wrote(self.session.assistant(
            text, id=reply_id, tool_calls=calls, model=completion.model, finish_reason=completion.finish_reason,
            latency_ms=round(completion.latency_s * 1000, 1), tokens_in=completion.tokens_in,
            tokens_out=completion.tokens_out, cost_usd=completion.cost_usd, context_tokens=request.tokens,
            cache_read_tokens=completion.cache_read_tokens or None,
            cache_creation_tokens=completion.cache_creation_tokens or None,
            cache_creation_1h_tokens=completion.cache_creation_1h_tokens or None,
            base_tokens=request.base_tokens, trimmed=request.trimmed or None, reused=reused or None,
            cache_break=cache_break, left_out=request.cut.record() if request.cut else None))
        self.memory.record(TURN, "assistant", chars=len(text), turn_id=record.id)
        if not calls:
            result.text = text
            if self.permissions.mode == "plan" and text.strip():  # the plan the user approves, edits or rejects
                result.plan = text
            stop = self._hook("Stop", events, stop_hook_active=self._stop_continued,
                              last_assistant_message=text)
            if stop.blocked and not stop.stop and not self._stop_continued:  # the hook asks for more, once a turn
                self._stop_continued = True
                self._wrote(self.session.system(f"[Stop hook] {stop.reason}", update={"hook": "Stop"}))
                return False
            return True
        index = 0
        self.ctx.turn.lsp_batches = (toolcall.batches(self.toolset, [c["id"] for c in calls], asked)
                                     if self.ctx.services.lsp else {})
        try:
            for group in groups(calls):  # consecutive task calls run at once, any other call alone
                if cancel is not None and cancel.is_set():
                    for skipped in calls[index:]:  # every call needs a result, or the next request is invalid
                        self._wrote(self.session.tool(skipped["id"], skipped["name"], "[not run: the user cancelled]",
                                                      ok=False))
                    self.ctx.services.reindex()
                    result.error = self._notice("cancelled", "cancelled")
                    return True
                result.tool_calls += len(group)
                runs = at_once([functools.partial(self._execute, calls[i]["id"], asked[i], events) for i in group],
                               self.config.agent.max_subagents)
                for done in runs:  # recorded in the order the model asked
                    self._record(*done, events)
                index = group[-1] + 1
        finally:
            self.ctx.turn.lsp_batches = {}
        self.ctx.services.reindex()  # the step's edits are in the map before the next request is assembled
        return False

    # ------------------------------------------------------------------ context (agent.contextsync)
    def _sync_context(self, window: int) -> bool:
        """Bring the log's context up to date before a request (ContextSync.sync); True when an epoch began."""
        return self.context_sync.sync(window, self.model_name)

    def _request(self, window: int, model: str) -> Request:
        """The next request, from the log alone (ContextSync.request)."""
        return self.context_sync.request(window, model)

    def instructions_in_effect(self) -> list:
        """The project instruction files the next request carries (agent.instructions.Instruction; `shown`
        False: named only, over the budget), for the UI and /instructions."""
        # (the configured window, else none: litellm would say, but that import costs seconds)
        return self.context_sync.instructions_in_effect(self.configured_window())

    # ------------------------------------------------------------------ compaction
    def compaction_config(self) -> Config | None:
        """The config compaction runs with: memory.compact_model, else the chat model."""
        if self.config.memory.compact_model or not self.model_name:
            return self.config if self.config.memory.compact_model else None
        cfg = copy.deepcopy(self.config)
        cfg.memory.compact_model = self.model_name
        return cfg

    def _prepare(self, window: int, model: str, events: AgentEvents) -> Request:
        """The next request: the context synced with the log, a compaction first when one is due (`_guard`),
        then the request built from the log."""
        self._new_epoch = self._sync_context(window) or self._new_epoch
        if self._guard(window, events):
            self._new_epoch = self._sync_context(window) or self._new_epoch
        for attempt in (1, 2, 3):
            try:
                return self._request(window, model)
            except NoEpoch:  # a background compaction landed after the sync: its summary needs an epoch
                if attempt == 3:
                    raise
                self._new_epoch = self._sync_context(window) or self._new_epoch
        raise AssertionError("unreachable")

    def _guard(self, window: int, events: AgentEvents) -> bool:
        """Compact before the request when a compaction is due (sessions.requestsize: the request as it will be
        sent passes memory.compact_token_ratio of the window, or the turn threshold is reached). It runs on
        this thread when the request would not fit otherwise (no request is trimmed while a compaction could
        make it fit) or in "sync" mode (a process that exits after the turn), else in the background. True
        when a compaction may have landed (the context needs a sync)."""
        if self.compaction == "off":
            return False
        cfg = self.compaction_config()
        if cfg is None:
            return False
        fits = self._fits(window)
        waited = False
        compactor = self._compactor
        if compactor is not None and compactor.is_alive():
            if fits:
                return False
            compactor.join()  # its summary is what lets the request fit
            waited = True
            fits = self._fits(window)
        if not self._auto.due(self.session, cfg, window):
            return waited
        if self.compaction == "sync" or not fits:
            for _ in range(MAX_GUARD_COMPACTIONS):
                last = self.session.read().last_compact()
                self._compact(cfg, window, events)
                # a compaction that folded only what a cut-short conversation showed (sessions.compaction,
                # shown_part) may leave the request too big: the next folds the rest, before any trim
                landed = self.session.read().last_compact()
                if landed is None or landed is last or (last is not None and landed.id == last.id):
                    break
                if self._fits(window) or not self._auto.due(self.session, cfg, window):
                    break
            return True
        with self._lifecycle:
            if not self._closed:
                self._compactor = threading.Thread(target=self._compact, args=(cfg, window, events), daemon=True,
                                                   name=f"compact-{self.session.slug}")
                self._compactor.start()
        return waited

    def _fits(self, window: int) -> bool:
        """Whether the next request, as it will be sent, fits the window untrimmed (sessions.requestsize)."""
        size = request_size(self.session.read(), self.config, counter=self.session.counter)
        return size.total <= window_budget(window)

    def next_request_size(self) -> tuple[int, bool]:
        """(tokens, measured) of the next request as the guard measures it (sessions.requestsize), for a front
        end's gauge before anything is sent. Before the session's first request (no epoch: its head is not
        built yet) the tool schemas and the system prompt are counted with the turns, `measured` False."""
        view = self.session.read()
        size = request_size(view, self.config, counter=self.session.counter).total
        if epoch_for(view) is not None:
            return size, True
        return size + self.context_sync.tool_schema_tokens() + self.context_sync.count(self.context_sync.base), False

    def conversation(self) -> Conversation | None:
        """What the chat model was last sent, grown to now (the same bytes with what followed at the end): a
        compaction by that model reads it from the provider's cache (sessions.compaction.Conversation).
        None before the session's first request."""
        if not self.model_name or updates.current_epoch(seen(self.session.read())) is None:
            return None
        window = self.context_window(self.model_name)
        try:  # never a trim at the front: a request the guard found too big (or one grown meanwhile, while
            # this runs in the background) leaves its newest messages out, the ones the compaction keeps
            request = self.context_sync.request(window, self.model_name, for_compaction=True)
        except ContextOverflow:
            return None
        return Conversation(self.model_name, request.messages, self.toolset.schemas(), self.session.slug,
                            cut_short=request.newly_trimmed > 0)

    def _compact(self, cfg: Config, window: int, events: AgentEvents) -> None:
        if self.refused_compaction("auto", "", events):
            return
        outcome = self._auto.run(self.session, cfg, window, cancel=self._closing, conversation=self.conversation)
        # a failure is in the episodic log (compaction, ok=false) and the compactor backs off; telling the
        # user on every turn helps no one: /compact, asked for, reports its failure
        if outcome is not None and outcome.ok:
            if events.on_record and outcome.record is not None:
                events.on_record(outcome.record)
            if events.on_notice:
                events.on_notice(outcome.describe())
            self.compacted("auto", outcome.record, events)

    def refused_compaction(self, trigger: str, focus: str, events: AgentEvents | None = None) -> str:
        """PreCompact (`trigger`: auto or manual): why a hook refused the compaction ("" when none did).
        `events`: the callbacks to tell, by default the running turn's (none when idle)."""
        if not self.hooks:
            return ""
        events = self._events if events is None else events
        pre = self._hook("PreCompact", events, match=(trigger,), trigger=trigger, custom_instructions=focus)
        return (pre.stop_reason or pre.reason or "refused by a PreCompact hook") if pre.blocked or pre.stop else ""

    def compacted(self, trigger: str, record: Record | None, events: AgentEvents | None = None) -> None:
        """PostCompact, then SessionStart with source compact: what the latter adds reaches the next request, as
        a context update after the summary. `events` as for refused_compaction."""
        if not self.hooks:
            return
        events = self._events if events is None else events
        self._hook("PostCompact", events, match=(trigger,), trigger=trigger,
                   compact_summary=record.summary if isinstance(record, Compact) else "")
        said = self._hook("SessionStart", events, match=("compact",), source="compact").context_text
        if said:
            self._wrote(self.session.system(f"[SessionStart hook]\n{said}", update={"hook": "SessionStart"}))

    # ------------------------------------------------------------------ tools
    def _unique_call_id(self, call_id: str) -> str:
        """Providers that number calls per response (call_0...) would pair results with old calls."""
        if not call_id or call_id in self._call_ids:
            call_id = f"call_{secrets.token_hex(6)}"
        self._call_ids.add(call_id)
        return call_id

    def _delegate(self, prompt: str, write: bool) -> ToolResult:
        """The task tool: a sub-agent of this agent."""
        from .subagent import delegate  # lazy: it subclasses Agent (an import circle at module level)

        return delegate(self, prompt, write)

    def _execute(self, call_id: str, asked: toolcall.Asked, events: AgentEvents
                 ) -> tuple[str, llm.ToolCall, dict | None, ToolResult, tools.Meaning, str, float]:
        """Run one tool call inside its episodic operation; what `_record` writes of it."""
        started = time.perf_counter()
        record_id = new_record_id()  # the tool_call event names the record its result becomes
        before = (lambda name, args: self._pre_tool(call_id, name, args, events)) if self.hooks else None
        running = _RUNNING_CALL.set(call_id)
        try:
            args, result, meaning = toolcall.run(self.toolset, self.ctx, self.memory, call_id, asked, record_id,
                                                 events.on_activity, before=before)
        finally:
            _RUNNING_CALL.reset(running)
        if self.hooks and args is not None and not result.data.get("hook_refused"):
            self._post_tool(call_id, asked.name, args, result, events)
        return call_id, asked.call, args, result, meaning, record_id, started

    # ------------------------------------------------------------------ hooks (workstation.hooks)
    def _hook(self, event: str, events: AgentEvents, *, match: tuple[str, ...] = (), **fields) -> Outcome:
        """Run `event`'s hooks with Claude Code's common fields and `fields`; what they said for the user is
        a notice, each run an episodic event (the timeline's)."""
        if not self.hooks or (event in LIFECYCLE and not self.lifecycle_hooks):
            return Outcome()
        payload = {"session_id": self.session.slug, "transcript_path": str(self.session.path),
                   "cwd": str(self.ws.root), "permission_mode": self.permissions.claude_name, **fields}
        outcome = self.hooks.run(event, payload, match=match)
        for run in outcome.runs:
            self.memory.record(HOOK, event, ok=run.get("outcome") in ("ok", "blocked", "stopped"),
                               duration_ms=run.get("duration_ms"), **{k: v for k, v in run.items()
                                                                       if k not in ("event", "duration_ms")})
        for line in outcome.messages:
            self._tell(line, "hook", events)
        return outcome

    def notify(self, message: str, kind: str) -> None:
        """The Notification hooks (`kind`: Claude Code's notification_type: permission_prompt, idle_prompt)."""
        self._hook("Notification", self._events, match=(kind,), message=message, notification_type=kind)

    def _session_start(self, events: AgentEvents) -> str:
        """SessionStart, at this agent's first turn: `resume` when the session has turns already. Its context."""
        if self._started or not self.hooks:
            return ""
        self._started = True
        source = "resume" if any(starts_turn(r) for r in self.session.read().records) else "startup"
        return self._hook("SessionStart", events, match=(source,), source=source).context_text

    def _pre_tool(self, call_id: str, name: str, args: dict, events: AgentEvents) -> ToolResult | None:
        """PreToolUse: a refusal (the tool never runs; the model reads why), or None to run it."""
        outcome = self._hook("PreToolUse", events, match=hook_names(name), tool_name=hook_names(name)[0],
                             workstation_tool=name, tool_input=hook_input(name, args, self.ws.root),
                             tool_use_id=call_id)
        if outcome.blocked or outcome.stop:
            why = outcome.reason or outcome.stop_reason
            return ToolResult(f"error: a PreToolUse hook refused this call: {why}", ok=False,
                              data={"outcome": "denied", "hook_refused": True})
        self._hook_allowed = call_id if outcome.permission == "allow" else ""
        return None

    def _post_tool(self, call_id: str, name: str, args: dict, result: ToolResult, events: AgentEvents) -> None:
        """PostToolUse (PostToolUseFailure for a failed call): what the hooks say reaches the model with the
        result."""
        event = "PostToolUse" if result.ok else "PostToolUseFailure"
        fields = {"tool_response": {"output": result.text, "ok": result.ok}} if result.ok else {"error": result.text}
        outcome = self._hook(event, events, match=hook_names(name), tool_name=hook_names(name)[0],
                             workstation_tool=name, tool_input=hook_input(name, args, self.ws.root),
                             tool_use_id=call_id, **fields)
        said = [f"[{event} hook] {outcome.reason}"] if outcome.blocked else []
        if outcome.context_text:
            said.append(f"[{event} hook] {outcome.context_text}")
        if said:
            result.text = "\n\n".join([result.text, *said])

    def _approver(self, ask: Approver) -> Approver:
        """The approver with the hooks and the running custom command's allowed-tools before it: a call a
        PreToolUse hook allowed or the command covers runs without asking, and PermissionRequest hooks may
        answer for the user."""
        def approve(request: ApprovalRequest) -> bool:
            if self._hook_allowed and self._hook_allowed == self.ctx.turn.call_id:
                return True
            if self.grant is not None and self.grant.covers(request, self.ctx.services.policy):
                return True  # the running custom command's allowed-tools
            name = request.tool_name
            outcome = self._hook("PermissionRequest", self._events, match=hook_names(name),
                                 tool_name=hook_names(name)[0], workstation_tool=name,
                                 tool_input={"command": request.subject, "description": request.reason})
            if outcome.permission in ("allow", "deny"):
                return outcome.permission == "allow"
            what = {"command": "run", "edit": "make the edit"}.get(request.action, "call")
            self.notify(f"workstation needs your permission to {what} {request.subject}", "permission_prompt")
            return ask(request)

        return approve

    def _record(self, call_id: str, call: llm.ToolCall, args: dict | None, result: ToolResult, meaning: tools.Meaning,
                record_id: str, started: float, events: AgentEvents) -> None:
        """The session record of a call `_execute` ran, and what the UI hears of it."""
        result.data.setdefault("duration_ms", round((time.perf_counter() - started) * 1000, 3))
        self._wrote(toolcall.record(self.session, call_id, call.name, result, record_id))
        for edit in meaning.edits:  # what the model read of an edited file is out of date
            self.ranges.forget(edit.path)
        if events.on_tool:
            events.on_tool(call.name, args or {}, result)
        if meaning.plan is not None and events.on_plan:
            events.on_plan([dataclasses.asdict(t) for t in meaning.plan])

    def _note_reuse(self, text: str) -> list[str]:
        """Decisions an answer cites as [D:id]: each one that exists is a reuse, once per answer."""
        reused = []
        for decision_id in dict.fromkeys(_CITED.findall(text or "")):
            if self.memory.db.call(decision_exists, decision_id):
                self.memory.mark_decision_reused(decision_id, self.step)
                reused.append(decision_id)
        return reused

    def undo(self) -> Restored:
        """Restore the files the newest turn that changed any changed (checkpoints.Checkpoints.undo)."""
        self.require_idle("/undo")
        return self._after_restore(self.checkpoints.undo())

    def rewind(self, number: int, *, files: bool = True, conversation: bool = True) -> Restored:
        """Back to before user turn `number` (checkpoints.Checkpoints.rewind)."""
        self.require_idle("/rewind")
        return self._after_restore(self.checkpoints.rewind(number, files=files, conversation=conversation))

    def require_idle(self, what: str) -> None:
        """WorkstationError naming `what` while a turn runs (it would change what the turn works on)."""
        if self._running:
            raise WorkstationError(f"{what} waits for the turn to end: stop it first (Escape)")

    def _after_restore(self, done: Restored) -> Restored:
        for rel in done.files:  # the map and the model's reads follow the restored files
            self.ctx.services.edited(rel)
            self.ranges.forget(rel)
        self.ctx.services.reindex()
        if done.conversation:  # what the model read in the turns it no longer sees, it must read again
            self.ctx.services.ledger = ReadLedger()
            self.ranges.clear()
        return done

    def _recall(self, key: str) -> str:
        return recall(self.session, key)  # a record id, or a turn number

    def _notice(self, text: str, kind: str) -> str:
        """A one-line notice in the log for the user (kept out of the model's context); returns it."""
        line = " ".join(scrub.redact(text).split())
        self._wrote(self.session.system(f"[{line}]", notice=kind))
        return line

    def _tell(self, text: str, kind: str, events: AgentEvents) -> None:
        """A notice logged (a chat shows it from `on_record`, live and resumed alike) and said to `on_notice`."""
        line = self._notice(text, kind)
        if events.on_notice:
            events.on_notice(line)

    def _retrying(self, why: str, events: AgentEvents) -> None:
        if events.on_retry:  # what streamed is void; then the log says why
            events.on_retry(why)
        self._notice(f"retrying: {why}", "retry")
