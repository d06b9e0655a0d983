"""`workstation mcp`: workstation's own tools served to other agents (Claude Code, Codex, opencode...)
over MCP, on stdio or on streamable HTTP bound to 127.0.0.1.

What is served is whatever the tool registry (agent.tools) holds, chosen by effect, never by name:
tools that look (QUERY), write memory (MEMORY) and edit files (WRITE); with `--read-only`, QUERY only.
COMMAND tools (run_command) are never served: a command needs the user's approval unless the
allow-list covers it, nobody can be asked here, and the client agent has its own shell with its own
approvals, which serving ours would go around.

A client gets what the agent gets, the same way: each call runs through `agent.tools.toolcall.execute`, the
one function the agent loop and `replay --verify` run calls through, so:
* the same tools and confinement (the workspace's sandbox policy: never outside it, never its state
  folders or `.git`), argument checks, time limit and errors as results;
* hash guards per client session: each has its own ReadLedger, so an edit needs that client's own
  read of the file (read_lines or file_meta) of the content now on disk;
* secrets masked (`scrub.mask`) in every result before it is returned or logged, and in the
  arguments before they are logged.

Over HTTP every request must carry `Authorization: Bearer <token>`, a random token made at each start
(printed with the URL, and kept 0600 in the state folder as `mcp-http-PORT.token`); any other request
gets 401 (compared in constant time), so another user of the machine cannot reach the workspace
through the port.

A client session is the stdio connection (one client per process), an HTTP session (its
Mcp-Session-Id, which the server issued), or, for the stateless 2026 protocol over HTTP, the TCP
connection the request came on: never the name a request claims, which any client could copy to
borrow another's reads for the hash guard.
Its first call creates a session log named for the client (`2025-01-31-mcp-claude-code`, made unique),
and every call is written twice, as the agent's calls are:
* to the episodic log: an operation (op_start, then the tool_call event with the arguments, outcome
  and `via: "mcp"`), with the events of what the call meant (files read, maps served, edits, memory
  lookups) inside it, fenced at once so the timeline and `reflect` see it;
* to the session log: an assistant record holding the call (`client` names who made it) and the
  tool record with its result, written together. This is what replay, `report`, search, export and
  the app's transcript read: with it they show a Claude Code session's work through workstation as
  they show the agent's own, and the tool_call event's `turn_id` lets the timeline jump to it.
"""

from __future__ import annotations

import hmac
import json
import re
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import anyio

from .. import __version__, scrub
from ..agent import tools
from ..agent.tools import toolcall
from ..agent.tools.fileio import ReadLedger
from ..agent.tools import MEMORY, QUERY, WRITE, Invocation, Tool, ToolResult
from ..errors import WorkstationError
from ..sandbox import Policy
from ..sessions.recall import recall
from ..sessions.log import Session, new_record_id

if TYPE_CHECKING:
    from ..memory import Memory
    from ..runtime import Workspace

SERVED = (QUERY, MEMORY, WRITE)  # never COMMAND: see the module docstring
READ_ONLY = (QUERY,)
MAX_DEPTH = 32  # nesting of a call's arguments; deeper is refused before anything walks it
IDLE_S = 3600.0  # an HTTP client session unused this long is closed (its memory flushed)
_SURROGATE = re.compile("[\ud800-\udfff]")

INSTRUCTIONS = """workstation: a live knowledge map and memory of this repository.
Read surgically: file_meta gives a file's map (symbols with their line ranges) for a few percent of its \
tokens; then read_lines only the range you need. find, impact and grep locate code and call sites \
without reading files. An edit (replace_lines) needs your own earlier read of the file (read_lines or \
file_meta) in this session, of the content now on disk. Decisions and memory persist across sessions."""


FRONTIER_URI = "workstation://frontier"  # the newest session's frontier ("where are we")
FRONTIER_TEMPLATE = "workstation://sessions/{slug}/frontier"
_FRONTIER_OF = re.compile(r"^workstation://sessions/([^/]+)/frontier$")


def frontier_text(workspace: "Workspace", slug: str | None = None, *, exclude: str | None = None) -> tuple[str, str]:
    """(slug, its frontier as markdown: sessions.frontier) of session `slug`, or of the workspace's session
    written to last that holds a turn (not `exclude`, the asking client's own)."""
    from ..sessions.catalog import last_session, load  # lazy: the catalog, only when a frontier is asked for
    from ..sessions.frontier import frontier  # lazy: as the catalog above

    if not slug:
        info = last_session(workspace.paths, exclude=exclude)
        if info is None:
            raise WorkstationError("no session of this workspace has a turn yet")
        slug = info.slug
    view, _where = load(workspace.paths, slug)
    return slug, f"# Session {slug}\n\n" + frontier(view).render()


def frontier_tool(workspace: "Workspace") -> Tool:
    """The `frontier` tool: where a session of the workspace stands, for another agent asking "where are we"."""
    def run(inv: Invocation, session: Any = None) -> ToolResult:
        if session is not None and not isinstance(session, str):
            raise WorkstationError("session must be a session's name (a string)")
        slug, text = frontier_text(workspace, session, exclude=inv.services.session)
        return ToolResult(scrub.mask(text), data={"session": slug})

    return Tool("frontier", "Where the work of a workstation session stands, from its log alone: the user's messages "
                "in their words, the plan and its step in progress, decisions, pins and instructions in force, the "
                "files changed and their state, the last failing command, open questions. Without `session`, the "
                "session written to last.", {"type": "object", "properties": {"session": {"type": "string"}},
                                              "required": []}, run, QUERY)


def served_tools(read_only: bool = False) -> dict[str, Tool]:
    """The registry's tools a client may call, by effect."""
    effects = READ_ONLY if read_only else SERVED
    return {name: tool for name, tool in tools.TOOLS.items() if tool.effect in effects}


# --------------------------------------------------------------------------- one client
@dataclass
class ClientState:
    """One client session: its read ledger, and (from its first call) its session log and memory."""

    key: str
    name: str  # the client's own name (clientInfo.name)
    version: str
    transport: str
    ledger: ReadLedger = field(default_factory=ReadLedger)
    file_tokens: dict[str, int] = field(default_factory=dict)
    session: "Session | None" = None
    memory: "Memory | None" = None
    calls: int = 0
    last_used: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def recall(self, record_id: str) -> str:
        if self.session is None:
            raise WorkstationError("nothing to recall: this client has no session yet")
        return recall(self.session, record_id)  # a record id, or a turn number

    def close(self) -> None:
        if self.memory is not None:
            self.memory.close()


class Service:
    """The served tools, the client sessions, and what a call does (`call`); the MCP transport adapts it."""

    def __init__(self, workspace: "Workspace", *, read_only: bool = False, transport: str = "stdio"):
        self.ws = workspace
        self.read_only = read_only
        self.transport = transport
        self.tools = served_tools(read_only)
        self.tools["frontier"] = frontier_tool(workspace)  # this server's own: the agent has /frontier
        # what a client's calls may write: the workspace's policy, as the agent's (its `protected` field)
        self.policy = Policy.for_workspace(workspace.paths, workspace.config.agent, workspace.config.model.api_key_env)
        self._clients: dict[str, ClientState] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ clients
    def client(self, key: str, name: str = "", version: str = "") -> ClientState:
        """The state of a client session, made on its first call; idle HTTP sessions are let go."""
        now = time.monotonic()
        with self._lock:
            idle = [k for k, c in self._clients.items() if k != key and now - c.last_used > IDLE_S]
            gone = [self._clients.pop(k) for k in idle]
            state = self._clients.get(key)
            if state is None:
                state = self._clients[key] = ClientState(key, name or "mcp-client", version, self.transport)
            state.last_used = now
        for old in gone:
            old.close()
        return state

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for state in clients:
            state.close()

    def _open(self, state: ClientState) -> tuple["Session", "Memory"]:
        """The client's session log and memory, created with its first call."""
        with state.lock:
            if state.session is None:
                state.name, state.version = _text(state.name), _text(state.version)
                session = Session.create(self.ws.paths, title=f"mcp {state.name}")
                version = f" {state.version}" if state.version else ""
                session.system(scrub.mask(f"[MCP client {state.name}{version} over {state.transport}]"), notice="mcp")
                state.memory = self.ws.memory(session.slug)
                state.session = session
            return state.session, state.memory  # type: ignore[return-value]

    # ------------------------------------------------------------------ a call
    def call(self, state: ClientState, name: str, arguments: Any, cancel: threading.Event | None = None) -> ToolResult:
        """Run one call for a client, record it (episodic operation, session log) and return its result,
        masked. Never raises for anything a client can send."""
        session, memory = self._open(state)
        name = _text(name)[:100]
        malformed = arguments is not None and (not isinstance(arguments, dict) or _depth(arguments) > MAX_DEPTH)
        args = {} if malformed or arguments is None else _clean(arguments)
        refused = self._refusal(name, arguments)
        logged = ({"raw": f"(not logged: not a JSON object of at most {MAX_DEPTH} levels)"} if malformed
                  else tools.logged_args(args))
        call_id, record_id = f"mcp_{secrets.token_hex(6)}", new_record_id()
        with state.lock:
            state.calls += 1
            step = state.calls
        memory.step = step
        # the client's services (its ledger, its token counts) and a turn of one call; nobody to ask
        ctx = tools.tool_context(self.ws.kmap, self.policy, lsp=self.ws.lsp, turn=tools.Turn(step=step, cancel=cancel),
                                 memory=memory, recall=state.recall, session=session.slug, ledger=state.ledger,
                                 token_cache=state.file_tokens)
        result, _meaning = toolcall.execute(ctx, name, args, available=self.tools, memory=memory, call_id=call_id,
                                            record_id=record_id, logged=logged, refused=refused, contain=True,
                                            via="mcp", client=state.name)
        ctx.services.reindex()  # an edit is in the map before the next call of any client reads it
        with state.lock:  # the call and its result side by side, whatever other calls of this client do
            session.assistant("", tool_calls=[{"id": call_id, "name": name,
                                               "arguments": _arguments_json(args, logged)}],
                              via="mcp", client=state.name)
            toolcall.record(session, call_id, name, result, record_id)
        memory.episodic.fence()  # visible to the timeline and to `reflect` in other processes now
        return result

    def _refusal(self, name: str, arguments: Any) -> ToolResult | None:
        if name not in self.tools:
            known = tools.get(name)
            if known is not None:
                why = ("this server is read-only (--read-only)" if self.read_only and known.effect in SERVED
                       else "commands are not served over MCP: nobody here can approve them")
                return ToolResult(f"error: {name} is not offered: {why}", ok=False, data={"outcome": "denied"})
            return ToolResult(f"error: unknown tool {name!r}; tools: {', '.join(self.tools)}", ok=False,
                              data={"outcome": "error"})
        if arguments is not None and not isinstance(arguments, dict):
            return ToolResult("error: arguments must be a JSON object", ok=False, data={"outcome": "malformed"})
        if _depth(arguments or {}) > MAX_DEPTH:
            return ToolResult(f"error: the arguments of {name} are nested deeper than {MAX_DEPTH} levels",
                              ok=False, data={"outcome": "malformed"})
        return None  # paths (outside, the state folder, .git): the tools' own check, through the services' policy

    # ------------------------------------------------------------------ the MCP side
    def tool_list(self) -> list[dict[str, Any]]:
        """The served tools as MCP declares them (name, description, input schema, hints from the effect)."""
        return [{"name": t.name, "description": t.description, "inputSchema": t.parameters,
                 "annotations": {"readOnlyHint": t.effect == QUERY, "destructiveHint": t.effect == WRITE,
                                 "openWorldHint": False}}
                for t in self.tools.values()]

    def mcp_server(self):
        """The SDK's low-level Server with this service's handlers."""
        import mcp.types as types  # lazy: the mcp SDK, ~0.9 s, and it loads click
        from mcp.server.lowlevel import Server  # lazy: the mcp SDK, ~0.9 s, and it loads click

        listed = types.ListToolsResult.model_validate({"tools": self.tool_list()})

        async def list_tools(ctx, params) -> types.ListToolsResult:
            return listed

        async def call_tool(ctx, params) -> types.CallToolResult:
            state = self.client(*_client_identity(ctx, self.transport))
            cancel = threading.Event()
            try:
                result = await anyio.to_thread.run_sync(self.call, state, params.name, params.arguments, cancel,
                                                        abandon_on_cancel=True)
            except anyio.get_cancelled_exc_class():
                cancel.set()  # the client cancelled: the tool stops at its next check; the call is still logged
                raise
            return types.CallToolResult(content=[types.TextContent(type="text", text=result.text)],
                                        is_error=not result.ok)

        async def list_resources(ctx, params) -> types.ListResourcesResult:
            return types.ListResourcesResult(resources=[types.Resource(
                uri=FRONTIER_URI, name="frontier", title="Where are we",
                description="Where the work of the session written to last stands (the frontier, from its log)",
                mime_type="text/markdown")])

        async def list_templates(ctx, params) -> types.ListResourceTemplatesResult:
            return types.ListResourceTemplatesResult(resource_templates=[types.ResourceTemplate(
                uri_template=FRONTIER_TEMPLATE, name="session-frontier", title="Where a session stands",
                description="The frontier of one session of this workspace, by its name", mime_type="text/markdown")])

        async def read_resource(ctx, params) -> types.ReadResourceResult:
            from mcp.shared.exceptions import MCPError  # lazy: with the SDK above

            uri = str(params.uri)
            found = _FRONTIER_OF.match(uri)
            if uri != FRONTIER_URI and found is None:
                raise MCPError(-32002, f"no resource {uri[:200]!r}: this server has {FRONTIER_URI} and "
                                       f"{FRONTIER_TEMPLATE}")
            state = self.client(*_client_identity(ctx, self.transport))
            try:
                _slug, text = await anyio.to_thread.run_sync(
                    lambda: frontier_text(self.ws, found.group(1) if found else None,
                                          exclude=state.session.slug if state.session else None))
            except WorkstationError as err:
                raise MCPError(-32002, str(err)) from None
            return types.ReadResourceResult(contents=[types.TextResourceContents(
                uri=uri, mime_type="text/markdown", text=scrub.mask(text))])

        return Server("workstation", version=__version__, instructions=INSTRUCTIONS, on_list_tools=list_tools,
                      on_call_tool=call_tool, on_list_resources=list_resources,
                      on_list_resource_templates=list_templates, on_read_resource=read_resource)


def _client_identity(ctx, transport: str) -> tuple[str, str, str]:
    """(key, name, version) of the client session a request belongs to; see the module docstring."""
    params = getattr(ctx.session, "client_params", None)
    info = getattr(params, "client_info", None)
    name = str(getattr(info, "name", "") or "")[:100]
    version = str(getattr(info, "version", "") or "")[:40]
    headers = getattr(getattr(ctx, "request", None), "headers", None)
    session_id = headers.get("mcp-session-id") if headers is not None else None
    if session_id:
        return f"http:{session_id}", name, version
    if transport == "stdio":
        return "stdio", name, version
    peer = getattr(getattr(ctx, "request", None), "client", None)
    if peer is not None:  # a stateless request: its connection, never the name it claims
        return f"conn:{peer.host}:{peer.port}", name, version
    return f"request:{secrets.token_hex(8)}", name, version  # nothing to tie it to: a ledger of its own


def _depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deeply `value` nests (lists and objects), counted without recursion and no further than limit+1."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            level += 1
            deepest = max(deepest, level)
            if level > limit:
                return level
            stack.extend((child, level) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _text(value: Any) -> str:
    """A string that can be written anywhere: lone surrogates (valid in JSON escapes) become U+FFFD."""
    text = str(value)
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def _clean(value: Any) -> Any:
    """`value` with every string (keys too) made writable by `_text`; called on at most MAX_DEPTH levels."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, dict):
        return {_text(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _arguments_json(args: dict, logged: dict) -> str:
    """The call's arguments as the session log keeps them: whole (a replay re-applies an edit), masked;
    malformed arguments (args empty) as the note in `logged`."""
    return scrub.mask(json.dumps(args or logged, ensure_ascii=False, default=str))


# --------------------------------------------------------------------------- transports
class BearerAuth:
    """ASGI middleware: an HTTP request without `Authorization: Bearer <token>` gets 401."""

    def __init__(self, app, token: str):
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            given = b""
            for key, value in scope.get("headers") or ():
                if key.lower() == b"authorization":
                    given = value
            if not hmac.compare_digest(given, self._expected):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                        (b"www-authenticate", b'Bearer realm="workstation"')]})
                await send({"type": "http.response.body",
                            "body": b"401: send the token workstation mcp --http printed (Authorization: Bearer ...)\n"})
                return
        await self.app(scope, receive, send)


def _own_origin(port: int):
    """The SDK's DNS-rebinding check for a server on 127.0.0.1:`port`: a local Host, and an `Origin`, when a
    request has one (a browser's), of this server only, never another local port: a page served there (any
    local web server, a dev server the agent started) must not drive the workspace through the user's
    browser, even with a token it got hold of."""
    from mcp.server.transport_security import TransportSecuritySettings  # lazy: with the SDK

    return TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                     allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
                                     allowed_origins=[f"http://127.0.0.1:{port}", f"http://localhost:{port}"])


def serve_http(service: Service, port: int, on_ready: Callable[[str, str, str], None] | None = None) -> None:
    """Serve streamable HTTP on 127.0.0.1:port (0: a free port) until interrupted, to requests carrying this
    start's bearer token; on_ready gets the URL, the token and the file the token is kept in (0600)."""
    import uvicorn  # lazy: uvicorn (and click), +120 ms; only --http

    from ..fsutil import atomic_write  # lazy: as uvicorn, only --http writes a token file

    token = secrets.token_urlsafe(32)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(128)
    except OSError as err:
        sock.close()
        raise WorkstationError(f"cannot listen on 127.0.0.1:{port}: {err.strerror or err}") from None
    bound = sock.getsockname()[1]
    url = f"http://127.0.0.1:{bound}/mcp"
    app = BearerAuth(service.mcp_server().streamable_http_app(host="127.0.0.1", transport_security=_own_origin(bound)),
                     token)
    token_file = service.ws.paths.state / f"mcp-http-{bound}.token"
    try:
        atomic_write(token_file, token.encode() + b"\n", 0o600)  # a planted link is replaced, not followed
    except OSError as err:
        sock.close()
        raise WorkstationError(f"cannot write the token file {token_file}: {err.strerror or err}") from None
    try:
        if on_ready is not None:
            on_ready(url, token, str(token_file))
        uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)).run(
            sockets=[sock])
    finally:
        sock.close()
        try:
            if token_file.read_text().strip() == token:
                token_file.unlink()
        except OSError:
            pass
