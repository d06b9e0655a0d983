"""The agent as an MCP client: the tools of the servers in `[mcp.servers.NAME]`, offered to its model
as `NAME__tool`.

The agent loop is synchronous; the SDK is asyncio. So the client sessions live on one event loop in a
background thread (`McpClients`), each server in a task of its own that owns its connection from start
to stop (anyio's scopes must open and close in one task), and a call from the agent's thread is a
coroutine sent to that loop and waited for in short polls: past the server's `timeout_s`, or when the
turn's stop is set, the call is cancelled and the agent reads one line saying so.

* Start: every server at once, each given its `startup_timeout_s`; one that fails to start, or does
  not answer in time, is one line (`start()` returns them) and the rest work.
* A stdio server gets only the environment its config names (values may read ours as `${VAR}`) plus
  what the SDK passes to any server (PATH, HOME, USER, LOGNAME, SHELL, TERM): never our API keys.
  Its stderr goes to `<state>/mcp/NAME.log`, not to the terminal (the app owns it); the last line
  of it explains a failed start.
* Each tool is a `Tool` like the built-in ones, with effect COMMAND (what a server's tool does is
  the server's say, and its hints are not evidence), no replay verification, and its own time
  keeping. A call asks the agent's approver (`ApprovalRequest(action="tool")`) unless the server
  is `trusted` or the tool is in its `trusted_tools`; no approver means no.
* `close()` stops every server (stdin closed, then SIGTERM and SIGKILL to its process group, as the
  SDK does) and the loop: no process outlives the agent that started it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import re
import threading
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from .. import __version__, scrub
from ..agent.approval import ApprovalRequest, ask
from ..agent.tools import COMMAND, Invocation, Tool, ToolResult, Toolset, cap
from ..config import McpServerConfig
from ..fsutil import open_state

if TYPE_CHECKING:
    from ..runtime import Workspace

SEPARATOR = "__"  # NAME__tool; server names cannot contain it (config.McpConfig)
MAX_TOOL_NAME = 64  # what OpenAI-style function names allow
_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_POLL_S = 0.05
_CLOSE_WAIT_S = 10.0  # the SDK's stop of a stdio server takes at most ~6 s (stdin, SIGTERM, SIGKILL)
_LOG_MAX_BYTES = 1_000_000
_SUBJECT_CHARS = 300


class McpStartError(Exception):
    """A server that cannot be started as configured (one line)."""


@dataclass(frozen=True)
class RemoteTool:
    name: str  # the server's own name for it
    qualified: str  # NAME__tool: the name the model calls
    description: str
    schema: dict


@dataclass
class ServerStatus:
    """One configured server as the agent sees it (for /help, the palette, `workstation mcp --check`)."""

    name: str
    transport: str  # "stdio" | "http"
    state: str = "starting"  # "starting" | "ready" | "failed" | "stopped"
    error: str = ""
    tools: list[RemoteTool] = field(default_factory=list)
    trusted: bool = False
    trusted_tools: tuple[str, ...] = ()

    def asks(self, tool: str) -> bool:
        """Whether a call of `tool` (the server's name for it) needs the user's approval."""
        return not (self.trusted or tool in self.trusted_tools)

    def line(self) -> str:
        if self.state == "ready":
            trust = ", trusted" if self.trusted else ""
            return f"MCP {self.name} ({self.transport}{trust}): {len(self.tools)} tools"
        return f"MCP {self.name} ({self.transport}): {self.state}" + (f": {self.error}" if self.error else "")

    def to_dict(self) -> dict:
        return {"name": self.name, "transport": self.transport, "state": self.state, "error": self.error or None,
                "trusted": self.trusted,
                "tools": [{"name": t.qualified, "server_name": t.name, "description": t.description,
                           "asks": self.asks(t.name)} for t in self.tools]}


# --------------------------------------------------------------------------- the sessions
class McpClients:
    """Client sessions to the configured servers on a background event loop; see the module docstring."""

    def __init__(self, servers: Mapping[str, McpServerConfig], *, root: Path, log_dir: Path):
        self.configs = dict(servers)
        self.root = root
        self.log_dir = log_dir
        self.status = {name: ServerStatus(name, "stdio" if cfg.command else "http", trusted=cfg.trusted,
                                          trusted_tools=tuple(cfg.trusted_tools))
                       for name, cfg in self.configs.items()}
        self._clients: dict[str, Any] = {}  # name -> mcp.Client, while ready
        self._stops: dict[str, asyncio.Event] = {}
        self._ready: dict[str, threading.Event] = {name: threading.Event() for name in self.configs}
        self._done: dict[str, threading.Event] = {}  # set once a server's task has unwound (its process stopped)
        self._runs: dict[str, concurrent.futures.Future] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._lock = threading.Lock()  # state changes: a start that times out races the server getting ready

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> list[str]:
        """Start every server and wait until each is ready or out of time; one line per server that is not."""
        if not self.configs or self._loop is not None:
            return []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, daemon=True, name="mcp-clients")
        self._thread.start()
        for name, cfg in self.configs.items():
            self._runs[name] = asyncio.run_coroutine_threadsafe(self._serve(name, cfg), self._loop)
        started = time.monotonic()
        for name, cfg in self.configs.items():
            if not self._ready[name].wait(max(0.0, cfg.startup_timeout_s - (time.monotonic() - started))):
                self._fail(name, f"did not start within {cfg.startup_timeout_s:g}s (mcp.servers.{name}."
                                 "startup_timeout_s)")
                self._runs[name].cancel()  # the task unwinds: the SDK stops the process it started
        return [status.line() for status in self.status.values() if status.state != "ready"]

    def close(self) -> None:
        """Stop every server and the loop (idempotent)."""
        if self._closed or self._loop is None:
            self._closed = True
            return
        self._closed = True
        loop = self._loop
        for name, run in self._runs.items():
            stop = self._stops.get(name)
            if self.status[name].state == "ready" and stop is not None:
                loop.call_soon_threadsafe(stop.set)
            else:
                run.cancel()
        # Wait for the tasks themselves, not their futures: a cancelled future is done at once, while its
        # task is still stopping the server's process (the loop must not stop under it).
        deadline = time.monotonic() + _CLOSE_WAIT_S
        for done in list(self._done.values()):
            done.wait(max(0.0, deadline - time.monotonic()))
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(_CLOSE_WAIT_S)
        for status in self.status.values():
            if status.state in ("ready", "starting"):
                status.state = "stopped"

    def _run_loop(self) -> None:
        loop = self._loop
        assert loop is not None
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def _fail(self, name: str, error: str) -> None:
        status = self.status[name]
        with self._lock:
            if status.state == "starting":  # the first reason stands (a time-out, then its cancellation)
                status.state, status.error = "failed", error
        self._ready[name].set()

    # ------------------------------------------------------------------ one server, in the loop
    async def _serve(self, name: str, cfg: McpServerConfig) -> None:
        from mcp import Client  # lazy: the mcp SDK, ~0.9 s, and it loads click
        from mcp.types import Implementation  # lazy: the mcp SDK, and it loads click

        stop = self._stops[name] = asyncio.Event()
        done = self._done[name] = threading.Event()
        log, offset = None, 0
        try:
            async with AsyncExitStack() as stack:
                if cfg.command:
                    log, offset = self._open_log(name)
                    stack.callback(log.close)
                    transport = self._stdio(cfg, log)
                else:
                    transport = await self._http(cfg, stack)
                client = await stack.enter_async_context(
                    Client(transport, client_info=Implementation(name="workstation", version=__version__)))
                listing = await _list_tools(client)
                with self._lock:
                    if self.status[name].state != "starting":
                        return  # start() gave up on it meanwhile: its cancellation is on its way
                    self.status[name].tools = _declare(name, listing)
                    self._clients[name] = client
                    self.status[name].state = "ready"
                self._ready[name].set()
                await stop.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as err:  # an ExceptionGroup from the SDK's task groups, too
            why = describe(err, cfg)
            tail = _last_line(self.log_dir / f"{name}.log", offset) if log is not None else ""
            if tail and tail not in why:
                why += f" (its stderr: {tail})"
            status = self.status[name]
            if status.state == "ready":  # it ran, then its connection broke
                status.state, status.error = "failed", f"stopped: {why}"
            self._fail(name, why)
        finally:
            self._clients.pop(name, None)
            self._ready[name].set()
            done.set()

    def _open_log(self, name: str):
        self.log_dir.mkdir(parents=True, exist_ok=True)
        path = self.log_dir / f"{name}.log"
        try:
            if os.lstat(path).st_size > _LOG_MAX_BYTES:
                path.unlink()  # a server's own chatter, kept for the last start or so
        except FileNotFoundError:
            pass  # no log yet
        log = os.fdopen(open_state(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "a", encoding="utf-8",
                        errors="replace")
        return log, log.tell()

    def _stdio(self, cfg: McpServerConfig, log):
        from mcp.client.stdio import StdioServerParameters, stdio_client  # lazy: the mcp SDK, and click

        env = {key: expand(value, f"env.{key}") for key, value in cfg.env.items()}
        params = StdioServerParameters(command=cfg.command, args=list(cfg.args), env=env, cwd=str(self.root))
        return stdio_client(params, errlog=log)

    async def _http(self, cfg: McpServerConfig, stack: AsyncExitStack):
        from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client  # lazy: mcp SDK

        headers = {key: expand(value, f"headers.{key}") for key, value in cfg.headers.items()}
        http = await stack.enter_async_context(create_mcp_http_client(headers=headers or None))
        return streamable_http_client(cfg.url, http_client=http)

    # ------------------------------------------------------------------ calls, from the agent's thread
    def call(self, server: str, tool: str, arguments: dict, *, cancel: threading.Event | None = None,
             label: str = "") -> ToolResult:
        """One call of a server's tool; errors, time-outs and stops come back as failed results."""
        label = label or f"{server}{SEPARATOR}{tool}"
        client = self._clients.get(server)
        status = self.status.get(server)
        if client is None or status is None or status.state != "ready" or self._loop is None:
            why = status.error if status is not None and status.error else "not running"
            return ToolResult(f"error: MCP server {server} is unavailable: {why}", ok=False,
                              data={"outcome": "error"})
        timeout = self.configs[server].timeout_s
        future = asyncio.run_coroutine_threadsafe(client.call_tool(tool, arguments), self._loop)
        deadline = time.monotonic() + timeout
        while True:
            try:
                result = future.result(timeout=_POLL_S)
                break
            except concurrent.futures.TimeoutError:
                if cancel is not None and cancel.is_set():
                    future.cancel()
                    return ToolResult(f"error: {label} stopped by the user", ok=False, data={"outcome": "cancelled"})
                if time.monotonic() > deadline:
                    future.cancel()
                    return ToolResult(f"error: MCP server {server} did not answer {tool} within {timeout:g}s "
                                      f"(mcp.servers.{server}.timeout_s)", ok=False, data={"outcome": "timeout"})
            except concurrent.futures.CancelledError:
                return ToolResult(f"error: {label} was cancelled", ok=False, data={"outcome": "cancelled"})
            except Exception as err:
                return ToolResult(f"error: MCP server {server}: {describe(err)}", ok=False, data={"outcome": "error"})
        text = cap(result_text(result))
        return ToolResult(text, ok=not result.is_error, data={"outcome": "error" if result.is_error else "ok"})

    # ------------------------------------------------------------------ as the agent's tools
    def tools(self) -> list[Tool]:
        """A `Tool` per tool of every server that started."""
        out = []
        for status in self.status.values():
            if status.state != "ready":
                continue
            for remote in status.tools:
                out.append(Tool(remote.qualified, f"{remote.description}\n(a tool of the MCP server {status.name})",
                                remote.schema, self._runner(status, remote), COMMAND, time_limit_s=None))
        return out

    def _runner(self, status: ServerStatus, remote: RemoteTool) -> Callable[..., ToolResult]:
        def run(inv: Invocation, /, **arguments: Any) -> ToolResult:
            permissions = inv.services.permissions
            verdict = permissions.decide(COMMAND, remote.qualified) if permissions is not None else None
            if verdict is not None and verdict.unasked and status.asks(remote.name):
                # an MCP server runs outside the sandbox: auto never asks, so what would ask is refused
                return ToolResult(f"error: not run: {verdict.reason}, and the MCP server {status.name} runs "
                                  f"outside it (trust it with mcp.servers.{status.name}.trusted, or switch "
                                  "mode)", ok=False, data={"outcome": "denied"})
            if status.asks(remote.name):
                subject = f"{remote.qualified} {json.dumps(arguments, ensure_ascii=False, default=str)}"
                if len(subject) > _SUBJECT_CHARS:
                    subject = subject[:_SUBJECT_CHARS] + "…"
                refusal = ask(inv.services.approve, ApprovalRequest(
                    "tool", scrub.mask(subject),
                    f"the MCP server {status.name} is not trusted: mcp.servers.{status.name}.trusted or trusted_tools"))
                if refusal is not None:
                    return ToolResult(f"error: {refusal}", ok=False, data={"outcome": "denied"})
            return self.call(status.name, remote.name, arguments, cancel=inv.turn.cancel, label=remote.qualified)

        return run


async def _list_tools(client) -> list:
    tools, cursor = [], None
    for _ in range(100):  # a server that pages forever cannot hang the start
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _declare(server: str, listing: list) -> list[RemoteTool]:
    """The server's tools under names a model accepts: NAME__tool, other characters as '_', at most 64."""
    out, seen = [], set()
    for tool in listing:
        qualified = (server + SEPARATOR + _BAD_NAME_CHARS.sub("_", tool.name))[:MAX_TOOL_NAME]
        if qualified in seen:
            continue  # two names that differ only in characters a model cannot call: the first wins
        seen.add(qualified)
        schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
        if schema.get("type") != "object":
            schema = {"type": "object", "properties": {}}
        description = " ".join((tool.description or tool.title or tool.name).split())
        out.append(RemoteTool(tool.name, qualified, cap(description, 2000), schema))
    return out


# --------------------------------------------------------------------------- text
def expand(value: str, where: str) -> str:
    """`${VAR}` in a config value read from our environment; unset is an error (a server started without
    the key it needs fails later and less clearly)."""
    def one(match: re.Match) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise McpStartError(f"{where} reads ${{{name}}}, which is not set")
        return os.environ[name]

    return _ENV_REF.sub(one, value)


def result_text(result) -> str:
    """A CallToolResult as the text the model reads: text blocks as they are, other content named."""
    parts = []
    for block in result.content or ():
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if text is not None else f"[binary resource {resource.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}" + (f": {block.description}" if block.description else "") + "]")
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {getattr(block, 'mime_type', '')}, {len(block.data) * 3 // 4:,} bytes: not shown]")
        else:
            parts.append(f"[{kind or 'unknown'} content: not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return "\n".join(parts) or "(no output)"


def describe(err: BaseException, cfg: McpServerConfig | None = None) -> str:
    """One line for what went wrong: the first real error inside any exception group."""
    leaf = _leaf(err)
    if isinstance(leaf, McpStartError):
        return str(leaf)
    if isinstance(leaf, FileNotFoundError) and cfg is not None and cfg.command:
        return f"cannot run {cfg.command!r}: no such program"
    if isinstance(leaf, OSError) and leaf.strerror:
        what = f"cannot run {cfg.command!r}" if cfg is not None and cfg.command else "connection failed"
        return f"{what}: {leaf.strerror}"
    kind = type(leaf).__name__
    text = " ".join(str(leaf).split())
    if "Connect" in kind and cfg is not None and cfg.url:
        return f"cannot connect to {cfg.url}" + (f": {text}" if text else "")
    if kind in ("McpError", "MCPError"):
        return text or "the server answered with an error"
    return scrub.redact(f"{kind}: {text}" if text else kind)[:300]


def _leaf(err: BaseException) -> BaseException:
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        real = [e for e in err.exceptions if not isinstance(e, asyncio.CancelledError)]
        err = (real or list(err.exceptions))[0]
    return err


def _last_line(path: Path, offset: int) -> str:
    """The last line a server wrote to its stderr log since `offset`, clipped."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read()[-4096:]
    except OSError:
        return ""
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    return scrub.redact(lines[-1])[:200] if lines else ""


# --------------------------------------------------------------------------- for the agent, /help and the UI
class McpToolset(Toolset):
    """The agent's built-in tools plus the tools of the configured MCP servers that started.
    `close()` stops the servers: call it when the agent (or the app) closes."""

    def __init__(self, clients: McpClients | None = None):
        self.clients = clients
        super().__init__(extra=clients.tools() if clients is not None else ())

    def servers(self) -> list[ServerStatus]:
        """Every configured server with its state and tools (for /help and the command palette)."""
        return list(self.clients.status.values()) if self.clients is not None else []

    def help_lines(self) -> list[str]:
        """/help's MCP section: each server's state, and its tools with what they do."""
        lines = []
        for status in self.servers():
            lines.append(status.line())
            width = max((len(t.qualified) for t in status.tools), default=0)
            for tool in status.tools:
                first = tool.description.split(". ")[0][:80]
                trusted = "" if status.asks(tool.name) else "  (trusted)"
                lines.append(f"  {tool.qualified:<{width}}  {first}{trusted}")
        return lines

    def close(self) -> None:
        if self.clients is not None:
            self.clients.close()

    def __enter__(self) -> "McpToolset":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_toolset(workspace: "Workspace", on_notice: Callable[[str], None] | None = None) -> McpToolset:
    """The toolset of an agent of `workspace`: its MCP servers started (each that fails is one line to
    `on_notice`). With no server configured nothing is started and the SDK is never imported."""
    servers = workspace.config.mcp.servers
    if not servers:
        return McpToolset()
    clients = McpClients(servers, root=workspace.root, log_dir=workspace.paths.state / "mcp")
    try:
        notices = clients.start()
        toolset = McpToolset(clients)
    except BaseException:
        clients.close()
        raise
    for line in notices:
        if on_notice is not None:
            on_notice(line)
    return toolset


def servers_of(toolset: Toolset | None) -> list[ServerStatus]:
    """The MCP servers behind an agent's toolset (none for a plain Toolset)."""
    return toolset.servers() if isinstance(toolset, McpToolset) else []
