"""The ACP agent: an editor's sessions are ordinary sessions of ours, each run by an agent.loop.Agent.

Built as every front end builds its agent, by the session host (workstation.host, as tui.backend and
`workstation chat`): a `runtime.Workspace` per folder (the session's `cwd`; its config as trust allows:
workstation.trust), its host (the workspace's MCP servers, started once per folder, and its one-turn
lock), a `sessions.Session` and an `Agent` on them. So a
session started in an editor is in the app's sessions screen, search, replay, compaction and undo, and
an editor can load any session of ours, imported ones included (the ACP session id is the slug).

What each request does:

    initialize       protocol version 1, loadSession, session/list; prompts of text and resource links
    session/new      a new session in the folder; its modes and slash commands follow; the editor's own
                     stdio MCP servers start for the session, beside the folder's, and ask before each call;
                     kept when the agent process ends, a session in which nothing was said for a day
                     expires (removed when a later `workstation acp` opens the folder)
    session/load     the session's whole conversation replayed as updates (acp.records), its plan among them;
                     one not there (expired, archived) is -32002 "resource not found": editors start anew
    session/prompt   one agent turn, on a worker thread: text streams as agent_message_chunk, each tool
                     call is a tool_call, in_progress while it runs, then a tool_call_update with its
                     result and diffs; a prompt
                     starting with `/` is a slash command (commands.slash), its answer one message
    session/cancel   stops the turn as Escape does (the model call, a running command, a pending question)
    session/set_mode the permission modes (agent.modes; Claude Code's names accepted too): ask (an edit and a
                     command off agent.command_allow ask the editor), edits (edits apply; such commands ask),
                     plan (read-only; the turn ends with a plan the editor approves or rejects through
                     session/request_permission: approval goes back to the mode before plan, sends
                     current_mode_update, and carries the plan out in the same prompt; an editor that
                     offers form elicitation (ACP's unstable elicitation/create) gets a third option, to
                     edit the plan in a form whose one text field holds it, then carry out what it sent
                     back; one without it rejects and says what to change in its next prompt), auto (nothing asks:
                     commands run in the sandbox with no network, what cannot is refused)
    session/list     the folder's live sessions, newest first

A command the allow-list covers runs without asking (agent.tools.shellrun); any other, an edit in mode ask, and a call
to an MCP tool that asks, is a session/request_permission with allow once, allow for this session (that exact
command line, remembered in memory only) and reject. One turn runs at a time per folder; a prompt to
another session of the same folder waits for it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote, urlparse

from acp import RequestError, helpers, run_agent
from acp.schema import (AvailableCommand, AvailableCommandInput, ElicitationFormSessionMode,
                        ElicitationSchema, ElicitationStringPropertySchema, EmbeddedResourceContentBlock,
                        InitializeResponse, ListSessionsResponse, LoadSessionResponse,
                        McpServerStdio, NewSessionResponse, PermissionOption, PromptResponse,
                        ResourceContentBlock, SessionInfo, SessionMode,
                        SessionModeState, SetSessionModeResponse, TextContentBlock, TextResourceContents,
                        StopReason, ToolCallUpdate, UnstructuredCommandInput)

from ..errors import ConfigError, WorkstationError
from ..sessions.records import Assistant, Record, Tool
from .records import Mapper
from .start import STDIO_LIMIT, initialize_result, renders_forms  # noqa: F401  (STDIO_LIMIT: tests)

if TYPE_CHECKING:
    from ..agent.approval import ApprovalRequest
    from ..agent.loop import Agent
    from ..agent.tools import Toolset
    from ..host import Event, Host
    from ..mcp.client import McpClients
    from ..paths import Paths
    from ..runtime import Workspace
    from ..sessions.log import Session

log = logging.getLogger(__name__)

MODE_NAMES = {"ask": "Ask", "edits": "Accept edits", "plan": "Plan", "auto": "Auto (sandboxed)"}
APPROVE_PLAN, EDIT_PLAN, KEEP_PLANNING = "approve-plan", "edit-plan", "keep-planning"
# slash commands that move the chat to another session: an editor starts a new thread for that
ELSEWHERE = {"/new": "start a new thread in your editor", "/clear": "start a new thread in your editor",
             "/archive": "archive it with `workstation session archive`",
             "/fork": "fork it with `workstation session fork`"}
SEND_TIMEOUT_S = 60.0  # an update the editor does not read for this long: it is gone, the turn stops
ALLOW_ONCE, ALLOW_SESSION, REJECT = "allow", "allow-session", "reject"
# the protocol's error codes (ACP's schema): bad params; a session that is not there ("resource not found":
# an editor loading a session gone starts a new one); anything else we refuse, its message saying why
# (ACP's -32000 is "authentication required": never ours, no authentication is offered)
INVALID_PARAMS, NOT_FOUND, REFUSED = -32602, -32002, -32603
EMPTY_KEPT_S = 24 * 3600  # a session in which nothing was said is kept this long for an editor to come back to


def _error(err: Exception, code: int = REFUSED) -> RequestError:
    """A refusal the editor shows: one line naming the problem."""
    lines = err.lines if isinstance(err, ConfigError) else [str(err)]
    return RequestError(code, "; ".join(lines))


def _not_found(slug: str, message: str) -> RequestError:
    return RequestError(NOT_FOUND, message, {"uri": slug})


@dataclass
class Place:
    """One folder's workspace and its session host (MCP servers, one-turn lock), shared by its sessions."""

    ws: "Workspace"
    host: "Host"
    notices: list[str]  # what the config and the MCP servers said at opening (an untrusted folder's)

    @property
    def toolset(self) -> "Toolset":
        assert self.host.toolset is not None  # opened with the place, closed only with the server
        return self.host.toolset

    @property
    def turn(self) -> threading.Lock:
        return self.host.turn


class Live:
    """One open ACP session: its agent, how its records map, its mode, its cancel."""

    def __init__(self, server: "Server", place: Place, session: "Session", toolset: Toolset | None = None,
                 own: McpClients | None = None):
        self.server = server
        self.place = place
        self.slug = session.slug
        self.toolset = toolset or place.toolset  # the folder's tools, and the editor's MCP servers' if it gave any
        self.own = own  # mcp.client.McpClients of the editor's servers: they stop with the session
        self.mapper = Mapper(place.ws.root, self.toolset)
        self.allowed: set[tuple[str, str]] = set()  # (action, subject) the user allowed for this session
        self.running = False
        self.gone = False  # an update could not be sent: the editor is gone
        self.notices: list[str] = []  # what starting the editor's MCP servers said
        # built as the app and `workstation chat` build theirs (workstation.host): the folder's host, an approver
        self.hosted = place.host.session(session, approve=self.approve, toolset=self.toolset)
        self.cancel = self.hosted.cancel

    @property
    def agent(self) -> "Agent":
        return self.hosted.agent

    def send(self, update: Any) -> None:
        """One update to the editor, from the turn's thread, in order; a client gone stops the turn (and
        what the turn says while it stops goes nowhere)."""
        if self.gone:
            return
        if not self.server.send(self.slug, update):
            self.gone = True
            self.cancel.set()

    def say(self, text: str) -> None:
        self.send(helpers.update_agent_message_text(text))

    def approve(self, request: "ApprovalRequest") -> bool:
        """The agent's approver (agent.approval): the mode, this session's allowances, else the editor."""
        key = (request.action, request.subject)
        if key in self.allowed:
            return True
        kind: Literal["execute", "edit", "other"] = (
            "execute" if request.action == "command" else "edit" if request.action == "edit" else "other")
        call = ToolCallUpdate(tool_call_id=self.agent.ctx.turn.call_id or "approval", title=request.subject,
                              kind=kind, status="pending",
                              content=[helpers.tool_content(helpers.text_block(request.question()))])
        options = [PermissionOption(option_id=ALLOW_ONCE, name="Allow once", kind="allow_once"),
                   PermissionOption(option_id=ALLOW_SESSION, name="Allow this exact one for the session",
                                    kind="allow_always"),
                   PermissionOption(option_id=REJECT, name="Reject", kind="reject_once")]
        answer = self.server.ask(self.slug, call, options, self.cancel)
        if answer == ALLOW_SESSION:
            self.allowed.add(key)
        return answer in (ALLOW_ONCE, ALLOW_SESSION)

    def turn(self, text: str) -> StopReason:
        """One prompt on the turn's thread; its stop reason."""
        from .. import host  # lazy: the agent stack, loaded by the first session already

        with self.place.turn:
            if self.cancel.is_set():
                return "cancelled"
            if text.lstrip().startswith("/") and not self._custom(text):
                return self.slash(text.strip())

            waiting: list[tuple[str, str]] = []  # the step's calls not yet run: the loop runs them in order
            tasks: set[str] = set()  # task calls running: the activity heard meanwhile is their sub-agents'

            def recorded(record: Record) -> None:
                if record.sidechain:  # a sub-agent's own steps: the editor sees its task and summary
                    return
                for update in self.mapper.updates(record, streamed=True):
                    self.send(update)
                if isinstance(record, Assistant):
                    waiting[:] = [(c.id, c.name) for c in record.tool_calls or ()]
                elif isinstance(record, Tool):
                    tasks.discard(record.tool_call_id)

            # a notice (retrying, a trimmed context, a compaction...) is a record: `recorded` says it, as a load does
            def heard(event: "Event") -> None:
                if isinstance(event, host.TextFragment):
                    self.say(event.text)
                elif isinstance(event, host.RecordWritten):
                    recorded(event.record)
                elif isinstance(event, host.Retry):
                    self.say("\n\n[the text above is void]\n")
                elif isinstance(event, host.ToolStarted) and waiting and not tasks:  # the next call starts running
                    call_id, name = waiting.pop(0)
                    if name == "task":
                        tasks.add(call_id)
                    self.send(helpers.update_tool_call(call_id, status="in_progress"))

            result = self.hosted.run(text, heard, locked=True)
            if result.plan and not self.cancel.is_set():
                result = self._plan(result.plan, heard) or result
        if self.cancel.is_set():
            return "cancelled"
        if result.error and "agent.max_steps" in result.error:
            return "max_turn_requests"
        return "end_turn"

    @property
    def mode(self) -> str:
        return self.hosted.mode

    def _plan(self, plan: str, heard) -> Any:
        """The plan a turn in plan mode ended with, to the editor: approved, the mode goes back to the one
        before plan (current_mode_update) and a turn carries it out (its result); rejected, None."""
        call = ToolCallUpdate(tool_call_id=f"plan-{self.agent.step}", title="Approve the plan?", kind="switch_mode",
                              status="pending", content=[helpers.tool_content(helpers.text_block(plan))])
        options = [PermissionOption(option_id=APPROVE_PLAN, name="Approve: carry it out", kind="allow_once"),
                   PermissionOption(option_id=KEEP_PLANNING, name="Reject: keep planning", kind="reject_once")]
        if self.server.forms:  # last: a client choosing the first "allow" option still approves as it is
            options.append(PermissionOption(option_id=EDIT_PLAN, name="Edit it, then carry it out",
                                            kind="allow_once"))
        picked = self.server.ask(self.slug, call, options, self.cancel)
        edited = self.server.edit_text(self.slug, "Edit the plan; the agent carries out what you send back.",
                                       "plan", plan, self.cancel) if picked == EDIT_PLAN else None
        if picked not in (APPROVE_PLAN, EDIT_PLAN) or (picked == EDIT_PLAN and not (edited or "").strip()):
            if not self.cancel.is_set():  # rejected, or the form declined, cancelled or sent back empty
                self.hosted.reject_plan(locked=True)
            return None
        self.agent.permissions.leave_plan()
        self.send(helpers.update_current_mode(self.mode))
        if edited is not None and edited.strip() != plan.strip():
            return self.hosted.approve_plan(edited, heard, edited=True, locked=True)
        return self.hosted.approve_plan(plan, heard, locked=True)

    def _custom(self, text: str) -> bool:
        from ..commands import slash  # lazy: the agent stack, loaded already

        return slash.is_custom(self.agent, text)

    def slash(self, line: str) -> StopReason:
        from ..commands import slash  # lazy: the agent stack, loaded already

        name = line.split()[0]
        if name in ELSEWHERE:
            self.say(f"{name} is not served over ACP: {ELSEWHERE[name]} (this session stays as it is)")
            return "end_turn"
        out = slash.run(self.agent, line)
        self.say(out.text if out.ok else f"error: {out.text}")
        return "end_turn"

    def modes(self) -> SessionModeState:
        from ..agent.modes import DESCRIPTIONS, MODES  # lazy: the agent stack, loaded by the session already

        return SessionModeState(current_mode_id=self.mode, available_modes=[
            SessionMode(id=mode, name=MODE_NAMES[mode], description=DESCRIPTIONS[mode]) for mode in MODES])


class Server:
    """The ACP agent (the SDK's `acp.Agent` protocol); `default` is the -C workspace."""

    def __init__(self, default: "Workspace"):
        self.default = default
        self.places: dict[Path, Place] = {}
        self.lives: dict[str, Live] = {}
        self.conn: Any = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.forms = False  # the client renders form elicitations (a plan is edited in one)
        self._opening = threading.Lock()
        self._tasks: set[asyncio.Task] = set()
        self._warming = False

    def on_connect(self, conn: Any) -> None:
        self.conn = conn
        self.loop = asyncio.get_running_loop()

    # ------------------------------------------------------------------ from the turn's thread
    def send(self, slug: str, update: Any) -> bool:
        future = None
        try:
            loop = self.loop
            if loop is None:
                raise RuntimeError("no editor connected")
            future = asyncio.run_coroutine_threadsafe(self.conn.session_update(session_id=slug, update=update), loop)
            future.result(timeout=SEND_TIMEOUT_S)
            return True
        except Exception as err:  # the editor is gone or stopped reading: nobody sees the turn
            if future is not None:
                future.cancel()
            log.warning("session %s: an update could not be sent (%s); the turn stops", slug, err or type(err).__name__)
            return False

    def ask(self, slug: str, call: ToolCallUpdate, options: list, cancel: threading.Event) -> str | None:
        """The option the user picked; None when the turn was cancelled or the editor did not answer."""
        try:
            loop = self.loop
            if loop is None:
                raise RuntimeError("no editor connected")
            future = asyncio.run_coroutine_threadsafe(
                self.conn.request_permission(session_id=slug, tool_call=call, options=options), loop)
        except RuntimeError:  # the loop is closed (the editor is gone), or was never there
            return None
        while True:
            try:
                response = future.result(timeout=0.05)
                break
            except TimeoutError:
                if cancel.is_set():
                    future.cancel()
                    return None
            except Exception as err:  # the editor is gone or refused the request
                log.warning("session %s: the permission request failed (%s)", slug, err or type(err).__name__)
                return None
        outcome = response.outcome
        return getattr(outcome, "option_id", None) if outcome.outcome == "selected" else None

    def edit_text(self, slug: str, message: str, name: str, text: str, cancel: threading.Event) -> str | None:
        """`text` edited by the user in the client's form (elicitation/create, one string field `name`);
        None when they declined or cancelled, the turn was cancelled, or the client failed."""
        form = ElicitationFormSessionMode(session_id=slug, requested_schema=ElicitationSchema(
            properties={name: ElicitationStringPropertySchema(type="string", title=name.capitalize(), default=text)},
            required=[name]))
        try:
            loop = self.loop
            if loop is None:
                raise RuntimeError("no editor connected")
            future = asyncio.run_coroutine_threadsafe(self.conn.create_elicitation(message=message, mode=form), loop)
        except RuntimeError:
            return None
        while True:
            try:
                response = future.result(timeout=0.05)
                break
            except TimeoutError:
                if cancel.is_set():
                    future.cancel()
                    return None
            except Exception as err:  # the editor is gone or refused the request
                log.warning("session %s: the form request failed (%s)", slug, err or type(err).__name__)
                return None
        value = (getattr(response, "content", None) or {}).get(name) if response.action == "accept" else None
        return value if isinstance(value, str) else None

    # ------------------------------------------------------------------ folders and sessions
    def _place(self, cwd: str) -> Place:
        """The folder's workspace and MCP servers, opened on first use (on a worker thread: they take time)."""
        from ..host import Host  # lazy: the agent stack and the MCP SDK, not for --help
        from ..runtime import Workspace  # lazy: loaded by the command already

        if not cwd or not os.path.isabs(cwd):
            raise RequestError(INVALID_PARAMS, f"cwd must be an absolute path, not {cwd!r}")
        if not os.path.isdir(cwd):
            raise RequestError(INVALID_PARAMS, f"cwd: no such folder: {cwd}")
        root = Path(os.path.realpath(cwd))
        with self._opening:
            if root in self.places:
                return self.places[root]
            notices: list[str] = []

            def said(line: str) -> None:
                notices.append(line)
                log.warning("%s", line)

            try:
                if Path(os.path.realpath(self.default.requested_root)) == root:
                    ws = self.default.load()  # its warnings went to stderr as the command line loaded it
                    notices.extend(ws.warnings)
                else:
                    ws = Workspace(root, model=self.default.requested_model, lazy=True, on_warning=said).load()
                host = Host.open(ws, on_notice=said)  # the process stays: compaction may run in the background
            except WorkstationError as err:
                raise _error(err) from None
            place = self.places[root] = Place(ws, host, notices)
            expire_empty(ws.paths)
            return place

    def _open(self, place: Place, slug: str | None, servers: list | None = None) -> Live:
        """The live session `slug` of the folder (opened now if need be), or a new one. The ACP session id
        is the slug: one open in another folder of this server is refused, and a new one never takes it."""
        from ..sessions.log import Session  # lazy: with the agent stack

        known = self.lives.get(slug) if slug is not None else None
        if known is not None:
            if known.place is not place:
                raise RequestError(INVALID_PARAMS, f"session {slug} is open for {known.place.ws.root} in this "
                                                   "server")
            return known
        try:
            if slug is not None:
                session = _existing(place, slug)
            else:
                taken = []
                session = Session.create(place.ws.paths, title="acp")
                while session.slug in self.lives:  # another folder's open session has this name
                    taken.append(session)
                    session = Session.create(place.ws.paths, title="acp")
                for empty in taken:
                    empty.remove_if_empty()
            toolset, own, notices = editor_servers(place, servers or [])
        except WorkstationError as err:
            raise _error(err) from None
        try:
            live = Live(self, place, session, toolset, own)
        except BaseException:
            if own is not None:
                own.close()
            if slug is None:
                session.remove_if_empty()
            raise
        live.notices = notices
        self.lives[session.slug] = live
        return live

    def _live(self, slug: str) -> Live:
        live = self.lives.get(slug)
        if live is None:
            raise _not_found(slug, f"no open session {slug!r}: load it first (session/load)")
        return live

    def _later(self, live: Live) -> None:
        """After the response that names the session: its slash commands, and what the folder's opening
        said (an untrusted workspace's ignored settings, an MCP server that failed)."""
        async def announce() -> None:
            await self.conn.session_update(session_id=live.slug, update=commands_update(live.agent))
            for line in [*live.place.notices, *live.notices]:
                await self.conn.session_update(session_id=live.slug,
                                               update=helpers.update_agent_message_text(f"[{line}]\n"))

        task = asyncio.create_task(announce())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self._warm(live.place.ws)

    def _warm(self, ws: "Workspace") -> None:
        """litellm (~4-5 s) loads on a thread once the first session is answered, while the user writes the first
        prompt: not before, where it would slow `initialize` and `session/new` (one interpreter lock)."""
        if self._warming or not ws.config.model.name:
            return
        self._warming = True
        from .. import llm  # lazy: the model client

        threading.Thread(target=llm.warm_import, name="litellm-import", daemon=True).start()

    # ------------------------------------------------------------------ the protocol
    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kwargs: Any) -> InitializeResponse:
        # acp.start answers the first one early, and notes there whether the client renders forms
        if client_capabilities is not None:
            self.forms = renders_forms(client_capabilities.model_dump(by_alias=True))
        return InitializeResponse.model_validate(initialize_result())

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kwargs: Any) -> NewSessionResponse:
        place = await asyncio.to_thread(self._place, cwd)
        live = await asyncio.to_thread(self._open, place, None, mcp_servers)
        self._later(live)
        return NewSessionResponse(session_id=live.slug, modes=live.modes())

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None,
                           **kwargs: Any) -> LoadSessionResponse:
        place = await asyncio.to_thread(self._place, cwd)
        live = await asyncio.to_thread(self._open, place, session_id, mcp_servers)
        records = (await asyncio.to_thread(live.agent.session.read)).records
        for update in live.mapper.history(records):  # the plan too: the last one replayed is the one in force
            await self.conn.session_update(session_id=live.slug, update=update)
        self._later(live)
        return LoadSessionResponse(modes=live.modes())

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None,
                            **kwargs: Any) -> ListSessionsResponse:
        from ..sessions.catalog import list_sessions  # lazy: the sessions stack

        place = await asyncio.to_thread(self._place, cwd or str(self.default.root))
        found = await asyncio.to_thread(list_sessions, place.ws.paths)
        return ListSessionsResponse(sessions=[
            SessionInfo(session_id=info.slug, cwd=str(place.ws.root), title=info.title or None,
                        updated_at=info.last_activity) for info in found])

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> SetSessionModeResponse:
        live = self._live(session_id)
        try:
            live.hosted.set_mode(mode_id)  # ours, or Claude Code's names for them (acceptEdits, ...)
        except WorkstationError as err:
            raise RequestError(INVALID_PARAMS, f"no mode {mode_id!r}: {str(err).split(': ', 1)[-1]}") from None
        return SetSessionModeResponse()

    async def prompt(self, prompt: list, session_id: str, **kwargs: Any) -> PromptResponse:
        live = self._live(session_id)
        text = prompt_text(prompt, live.place.ws.root)
        if live.running:
            raise RequestError(REFUSED, "a turn is already running in this session: cancel it first")
        live.running = True
        live.cancel.clear()
        try:
            stop = await asyncio.to_thread(live.turn, text)
        except WorkstationError as err:  # refused before it began: no model, an empty message
            raise _error(err) from None
        finally:
            live.running = False
        return PromptResponse(stop_reason=stop)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        live = self.lives.get(session_id)
        if live is not None:
            live.cancel.set()

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None  # no methods offered: the model's key comes from the user's config and environment

    # ------------------------------------------------------------------ the end
    def close(self) -> None:
        """Stop every turn, close the agents, the MCP servers, the stores. A session in which nothing was said
        stays (an editor's `session/new`, then `session/load` by a new agent process, is its ordinary flow),
        until it expires (`expire_empty`)."""
        for live in self.lives.values():
            live.cancel.set()
        for live in list(self.lives.values()):
            with live.place.turn:  # the turn's thread ends its turn first
                live.hosted.close(remove_if_empty=False)  # kept until it expires (expire_empty)
                if live.own is not None:
                    live.own.close()
        self.lives.clear()
        for place in self.places.values():
            place.host.close()
            if place.ws is not self.default:
                place.ws.close()
        self.places.clear()


def _existing(place: Place, slug: str) -> "Session":
    """The folder's session `slug`, for session/load: a name that cannot be one is bad params, a session
    that is not there (never was, expired, archived) is "resource not found"."""
    from ..sessions.log import Session, SessionArchived, SessionError, check_slug  # lazy: with the agent stack

    try:
        check_slug(slug)
    except SessionError as err:
        raise _error(err, INVALID_PARAMS) from None
    try:
        return Session.open(place.ws.paths, slug)
    except SessionArchived as err:
        raise _not_found(slug, str(err)) from None
    except SessionError as err:
        raise _not_found(slug, f"{err} in {place.ws.root}") from None


def expire_empty(paths: "Paths", kept_s: float = EMPTY_KEPT_S) -> list[str]:
    """Remove the sessions of a folder in which nothing was said and nothing written for `kept_s` (an editor's
    new thread never used); the slugs removed. A session in use is younger: its file changes with each record."""
    import time  # lazy: only when a folder opens

    from ..sessions.log import SUFFIX, Session, live_slugs  # lazy: with the agent stack

    removed = []
    cutoff = time.time() - kept_s
    for slug in live_slugs(paths):
        path = paths.sessions / f"{slug}{SUFFIX}"
        try:
            info = os.lstat(path)
        except OSError:
            continue
        # an empty session is a small file (nothing, or the `command` records of slash commands)
        if info.st_mtime < cutoff and info.st_size < 65536:
            try:
                if Session(paths, slug).remove_if_empty():
                    removed.append(slug)
            except WorkstationError as err:
                log.warning("could not check whether session %s is empty: %s", slug, err)
    return removed


def editor_servers(place: Place, servers: list) -> tuple[Toolset, McpClients | None, list[str]]:
    """The session's toolset when the editor gave MCP servers of its own (stdio ones: the protocol's
    must), started as the configured ones are (mcp.client) and untrusted: each call asks. (toolset, the
    clients to stop with the session, one line per server left out or not started); the folder's toolset
    when it gave none."""
    from ..agent import tools  # lazy: with the agent stack
    from ..config import McpServerConfig  # lazy: loaded with the workspace already
    from ..mcp.client import McpClients  # lazy: the MCP SDK

    configs: dict[str, McpServerConfig] = {}
    notices: list[str] = []
    for server in servers:
        name = re.sub(r"[^A-Za-z0-9-]+", "-", str(getattr(server, "name", ""))).strip("-")[:32] or "editor"
        if not isinstance(server, McpServerStdio):
            notices.append(f"MCP server {name} from the editor left out: only stdio servers are supported")
        elif name in place.ws.config.mcp.servers or name in configs:
            notices.append(f"MCP server {name} from the editor left out: a server of that name is configured")
        else:
            configs[name] = McpServerConfig(command=server.command, args=list(server.args),
                                            env={e.name: e.value for e in server.env})
    if not configs:
        return place.toolset, None, notices
    clients = McpClients(configs, root=place.ws.root, log_dir=place.ws.paths.state / "mcp")
    try:
        notices += clients.start()
        mine = [t for name, t in place.toolset.tools.items() if name not in tools.TOOLS]
        return tools.Toolset(extra=[*mine, *clients.tools()]), clients, notices
    except BaseException:
        clients.close()
        raise


def commands_update(agent: "Agent | None" = None) -> Any:
    """The slash commands an editor offers: the built-in ones served here, and the custom ones (skills)."""
    from ..commands import slash  # lazy: the agent stack

    offered = []
    custom = slash.custom_help(agent.ctx.services.skills) if agent is not None else []
    for usage, text in [*slash.HELP.items(), *custom]:
        name, *rest = usage.split()
        if name in ELSEWHERE:
            continue
        offered.append(AvailableCommand(name=name.lstrip("/"), description=text, input=AvailableCommandInput(
            UnstructuredCommandInput(hint=" ".join(rest))) if rest else None))
    return helpers.update_available_commands(offered)


def prompt_text(blocks: list, root: Path) -> str:
    """The user's message from a prompt's content blocks: text as is, a linked file by its path, an embedded
    file's text fenced under its path; images and audio are refused (not offered at initialize)."""
    parts = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, ResourceContentBlock):
            parts.append(_where(block.uri, root))
        elif isinstance(block, EmbeddedResourceContentBlock) and isinstance(block.resource, TextResourceContents):
            parts.append(f"\n{_where(block.resource.uri, root)}:\n```\n{block.resource.text}\n```\n")
        else:
            raise RequestError(INVALID_PARAMS, f"{getattr(block, 'type', 'this')} content is not supported: send "
                                               "text or a file")
    return "".join(parts)


def _where(uri: str, root: Path) -> str:
    """`pkg/core.py` for a file:// uri inside the workspace, the uri itself otherwise."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return uri
    path = Path(unquote(parsed.path))
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


# ---------------------------------------------------------------------- serving
async def serve(ws: "Workspace", transport: Any) -> None:
    """Serve ACP over `transport` (acp.start's, which may have answered `initialize` already) until the editor
    closes it."""
    server = Server(ws)
    server.forms = getattr(transport, "forms", False)  # from an `initialize` acp.start answered
    try:
        # the SDK's Agent protocol lists every method of the protocol; its router looks each up with getattr
        # and answers "method not found" for those a Server leaves out (fork, resume, config options)
        await run_agent(server, transport)  # type: ignore[arg-type]
    finally:
        await asyncio.to_thread(server.close)  # off the loop: a turn's thread may still send to it
