"""How `workstation acp` starts: `initialize` answered before the SDK has loaded.

The SDK (`acp`, its pydantic schema: ~0.8 s to import, seconds on a loaded machine) is needed from
`session/new` on; an editor's first request, `initialize`, needs only what this module knows. So the
transport (acp.wire) starts at once, the server module (and with it the SDK) loads on a thread, and an
ordinary `initialize` that arrives meanwhile is answered here with `initialize_result()`, the one
definition of our answer (the server's `initialize` answers the same for one that comes later). Any
other message, and an `initialize` this module would not vouch for, waits for the SDK, in order.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from typing import TYPE_CHECKING, Any

from .. import __version__
from .wire import StdioTransport

if TYPE_CHECKING:
    from ..runtime import Workspace

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1  # acp.PROTOCOL_VERSION, the one version the SDK speaks (tests check they agree)
STDIO_LIMIT = 50 * 1024 * 1024  # bytes of one message (the SDK's default: prompts may embed files)


def initialize_result() -> dict[str, Any]:
    """Our answer to `initialize`, as the SDK writes it (camelCase, what we set): protocol version 1 whatever
    the client asked (the spec's rule), sessions loaded and listed, prompts of text and resource links."""
    return {"protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {"loadSession": True, "promptCapabilities": {"embeddedContext": True},
                                  "sessionCapabilities": {"list": {}}},
            "agentInfo": {"name": "workstation", "title": "workstation", "version": __version__}}


def renders_forms(capabilities: Any) -> bool:
    """Whether a client's `clientCapabilities` (as JSON) say it renders form elicitations (a plan is edited
    in one; the protocol marks elicitation unstable)."""
    elicitation = capabilities.get("elicitation") if isinstance(capabilities, dict) else None
    return isinstance(elicitation, dict) and elicitation.get("form") is not None


def ordinary_initialize(message: dict[str, Any]) -> bool:
    """Whether `message` is an `initialize` request the SDK would accept as it is: only such are answered
    early (anything odd waits for the SDK and gets its answer, errors included)."""
    if message.get("method") != "initialize" or "id" not in message:
        return False
    params = message.get("params")
    if not isinstance(params, dict):
        return False
    version = params.get("protocolVersion")
    info = params.get("clientInfo")
    return (type(version) is int and 0 <= version <= 65535
            and isinstance(params.get("clientCapabilities", {}), (dict, type(None)))
            and (info is None or (isinstance(info, dict) and isinstance(info.get("name"), str)
                                  and isinstance(info.get("version"), str))))


class EarlyTransport:
    """The transport the SDK gets: what arrived while it loaded first, in order, then the transport's own."""

    def __init__(self, transport: StdioTransport):
        self.transport = transport
        self.held: list[dict[str, Any] | None] = []  # read while the SDK loaded, not answered here
        self.pending: asyncio.Task | None = None  # a receive begun while the SDK loaded
        self.forms = False  # the `initialize` answered here: the client renders form elicitations

    async def handshake(self, loading: asyncio.Future) -> None:
        """Until `loading` is done: answer an ordinary first `initialize`; stop at anything else."""
        answered = False
        while not loading.done():
            if self.pending is None:
                self.pending = asyncio.ensure_future(self.transport.receive())
            await asyncio.wait({self.pending, loading}, return_when=asyncio.FIRST_COMPLETED)
            if not self.pending.done():
                return
            message, self.pending = self.pending.result(), None
            if message is not None and not answered and ordinary_initialize(message):
                await self.transport.send({"jsonrpc": "2.0", "id": message["id"], "result": initialize_result()})
                self.forms = renders_forms((message.get("params") or {}).get("clientCapabilities"))
                answered = True
                continue
            self.held.append(message)
            return

    async def receive(self) -> dict[str, Any] | None:
        if self.held:
            return self.held.pop(0)
        if self.pending is not None:
            pending, self.pending = self.pending, None
            return await pending
        return await self.transport.receive()

    async def send(self, message: dict[str, Any]) -> None:
        await self.transport.send(message)

    async def close(self) -> None:
        await self.transport.close()


class _OneLine(logging.Formatter):
    """A log record in one line: an exception by its type and message, never a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        text = f"workstation acp: {record.getMessage()}"
        if record.exc_info and record.exc_info[1] is not None:
            err = record.exc_info[1]
            text += f" ({type(err).__name__}: {err})"
        return " ".join(text.split())


def serve_stdio(ws: "Workspace") -> None:
    """Serve ACP on stdin/stdout until the editor closes stdin; every line of stderr is one line."""
    handler = logging.StreamHandler()
    handler.setFormatter(_OneLine())
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
    asyncio.run(_serve(ws))


async def _serve(ws: "Workspace") -> None:
    transport = await StdioTransport(
        STDIO_LIMIT, lambda why: log.warning("ignored a line that is not a JSON-RPC message: %s", why)).start()
    loading = asyncio.ensure_future(asyncio.to_thread(importlib.import_module, f"{__package__}.server"))
    early = EarlyTransport(transport)
    await early.handshake(loading)
    server = await loading
    await server.serve(ws, early)
