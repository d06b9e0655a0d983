"""How `workstation mcp` serves stdio: `initialize` and `tools/list` answered before the SDK has loaded.

The SDK (`mcp` and `mcp_types`, their pydantic models: ~1.5 s to import, seconds more under load) is
needed for calls; a client's handshake (`initialize`, `notifications/initialized`, `tools/list`, `ping`)
needs only what the service knows. So the wire is read at once, the SDK loads on a thread, and an
ordinary handshake request that arrives meanwhile is answered here (`early_answer`). Every line read
before the SDK took over is then given to it, in order, as if it had read them itself, so its state is
the state of a connection that saw the handshake; its answers to the requests answered here are checked
against ours (a difference is logged: tests keep them equal) and not sent twice.

As the SDK's own stdio does, fds 0 and 1 point at the null device and at stderr while serving (the wire
is served from private duplicates), so a tool's stray output or a child's read never touches the wire.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import threading
from typing import TYPE_CHECKING, Any, cast

from .. import __version__

if TYPE_CHECKING:
    from anyio import AsyncFile

    from .server import Service

log = logging.getLogger(__name__)

# mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS: the versions an `initialize` negotiates (tests check they agree);
# the SDK answers a version it does not know with the newest of them
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
_READ_BYTES = 1 << 16


def initialize_result(service: "Service", requested: str) -> dict[str, Any]:
    """What the SDK answers `initialize` with for this service."""
    from .server import INSTRUCTIONS  # lazy: the server module loads the agent's tools; the handshake must not wait

    return {"capabilities": {"resources": {"listChanged": False, "subscribe": False}, "tools": {"listChanged": False}},
            "instructions": INSTRUCTIONS,
            "protocolVersion": requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1],
            "serverInfo": {"name": "workstation", "version": __version__}}


def early_answer(service: "Service", message: Any, initialized: bool) -> dict[str, Any] | None:
    """The result of a handshake request the SDK would take as it is, None for anything else."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or type(message.get("id")) not in (int, str):
        return None
    method, params = message.get("method"), message.get("params")
    if method == "initialize" and not initialized and isinstance(params, dict):
        info = params.get("clientInfo")
        if (params.get("protocolVersion") in HANDSHAKE_VERSIONS and isinstance(params.get("capabilities"), dict)
                and isinstance(info, dict) and isinstance(info.get("name"), str)
                and isinstance(info.get("version"), str)):
            return initialize_result(service, params["protocolVersion"])
    if initialized and params in (None, {}):
        if method == "tools/list":
            return {"tools": service.tool_list()}
        if method == "ping":
            return {}
    return None


def _private(fd: int) -> int:
    """A close-on-exec duplicate of fd above the standard three."""
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)


def serve_stdio(service: "Service") -> None:
    """Serve one client on stdin/stdout until it disconnects."""
    wire_in, wire_out = _private(0), _private(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    try:
        asyncio.run(_serve(service, wire_in, wire_out))
    finally:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)


def _load_sdk() -> None:
    import mcp.server.lowlevel  # noqa: F401  # lazy: the SDK (~0.7 s), on a thread while the handshake is answered
    import mcp.server.stdio  # noqa: F401  # lazy: as above


async def _serve(service: "Service", wire_in: int, wire_out: int) -> None:
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[bytes | None] = asyncio.Queue()
    threading.Thread(target=_read, args=(wire_in, loop, lines), name="mcp-stdin", daemon=True).start()
    loading = asyncio.ensure_future(asyncio.to_thread(_load_sdk))
    held: list[bytes | None] = []  # every line read before the SDK took over, for the SDK in order
    answered: dict[Any, dict] = {}  # id -> our result, for the requests answered here
    pending: asyncio.Future | None = None
    initialized = False
    while not loading.done():
        if pending is None:
            pending = asyncio.ensure_future(lines.get())
        await asyncio.wait({pending, loading}, return_when=asyncio.FIRST_COMPLETED)
        if not pending.done():
            break
        line, pending = pending.result(), None
        held.append(line)
        if line is None:
            break
        try:
            message = json.loads(line)
        except ValueError:
            break
        result = early_answer(service, message, initialized)
        if result is None:
            if isinstance(message, dict) and message.get("method") == "notifications/initialized" and initialized:
                continue
            break
        initialized = True
        answered[message["id"]] = result
        await asyncio.to_thread(_write_all, wire_out, _line({"jsonrpc": "2.0", "id": message["id"], "result": result}))
    await loading

    from mcp.server.stdio import stdio_server  # lazy: loaded above, on the thread

    server = service.mcp_server()
    # the two stand in for anyio's AsyncFile: the SDK reads lines and writes text, nothing more
    stdin = cast("AsyncFile[str]", _Lines(held, pending, lines))
    stdout = cast("AsyncFile[str]", _Checked(wire_out, answered))
    async with stdio_server(stdin=stdin, stdout=stdout) as (read, write):
        await server.run(read, write, server.create_initialization_options())


def _line(message: dict) -> bytes:
    return (json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read(fd: int, loop: asyncio.AbstractEventLoop, lines: asyncio.Queue) -> None:
    """The wire's lines to the loop, then None at its end."""
    rest = b""
    try:
        while data := os.read(fd, _READ_BYTES):
            *whole, rest = (rest + data).split(b"\n")
            for line in whole:
                loop.call_soon_threadsafe(lines.put_nowait, line)
    except OSError as err:
        log.warning("reading stdin failed (%s): serving stops", err.strerror or err)
    try:
        if rest:
            loop.call_soon_threadsafe(lines.put_nowait, rest)
        loop.call_soon_threadsafe(lines.put_nowait, None)
    except RuntimeError:  # the loop is closed: serving is over
        pass


class _Lines:
    """The SDK's stdin (an async iterator of text lines): what was read before it took over, then the wire."""

    def __init__(self, held: list[bytes | None], pending: asyncio.Future | None, lines: asyncio.Queue):
        self.held, self.pending, self.lines = held, pending, lines

    def __aiter__(self) -> "_Lines":
        return self

    async def __anext__(self) -> str:
        if self.held:
            line = self.held.pop(0)
        elif self.pending is not None:
            pending, self.pending = self.pending, None
            line = await pending
        else:
            line = await self.lines.get()
        if line is None:
            self.held = [None]  # the end stays the end
            raise StopAsyncIteration
        return line.decode("utf-8", "replace") + "\n"


class _Checked:
    """The SDK's stdout: its lines to the wire, but for its answers to requests answered early, which are
    compared with ours and dropped."""

    def __init__(self, fd: int, answered: dict[Any, dict]):
        self.fd, self.answered = fd, answered

    async def write(self, text: str) -> None:
        if self.answered:
            message = json.loads(text)
            ident = message.get("id") if isinstance(message, dict) and "method" not in message else None
            if ident in self.answered:
                ours = self.answered.pop(ident)
                if message.get("result") != ours:
                    log.warning("the early answer to request %r differs from the SDK's: %s", ident,
                                json.dumps(message)[:300])
                return
        await asyncio.to_thread(_write_all, self.fd, text.encode())

    async def flush(self) -> None:
        return None
