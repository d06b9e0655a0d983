"""Stdio framing for `workstation acp`, hardened: every line the editor sends is checked before the SDK reads it.

The SDK (`acp`) reads newline-delimited JSON-RPC; a line that is not JSON it logs with a traceback and
drops, and a JSON value that is not an object stops its reader. Here each line is parsed first: a message
goes on to the SDK unchanged; anything else gets one JSON-RPC error on stdout (-32700 for a line that is
not JSON, -32600 for JSON that is not a request, a response or a notification), with the request's id
when it has one, and one line on stderr; serving goes on.
"""

from __future__ import annotations

import asyncio
import json
from typing import Callable

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
_SHOWN = 80  # characters of a bad line quoted back


def problem(line: bytes) -> tuple[int, str, object] | None:
    """(code, message, id) of what is wrong with one line, None when it is a JSON-RPC message."""
    try:
        message = json.loads(line)
    except ValueError as err:
        text = line.decode("utf-8", "replace")
        shown = text if len(text) <= _SHOWN else text[:_SHOWN] + "…"
        return PARSE_ERROR, f"Parse error: not JSON ({err}): {shown!r}", None
    if not isinstance(message, dict):
        return INVALID_REQUEST, f"Invalid Request: a JSON-RPC message is an object, not {type(message).__name__}", None
    ident = message.get("id")
    if ident is not None and not isinstance(ident, (str, int)):
        return INVALID_REQUEST, "Invalid Request: id must be a string or a number", None
    if "method" in message and not isinstance(message["method"], str):
        return INVALID_REQUEST, "Invalid Request: method must be a string", ident
    if "method" not in message and "id" not in message:
        return INVALID_REQUEST, "Invalid Request: neither a method nor an id", None
    return None


def error_line(code: int, message: str, ident: object) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}},
                       separators=(",", ":")) + "\n").encode()


async def _read_line(reader: asyncio.StreamReader) -> bytes:
    chunks: list[bytes] = []
    while True:
        try:
            chunks.append(await reader.readuntil(b"\n"))
            return b"".join(chunks)
        except asyncio.LimitOverrunError as exc:  # a line longer than the buffer: read it in pieces
            chunks.append(await reader.readexactly(exc.consumed))
        except asyncio.IncompleteReadError as exc:  # the last line, without a newline
            chunks.append(exc.partial)
            return b"".join(chunks)


async def checked(raw: asyncio.StreamReader, writer: asyncio.StreamWriter, limit: int,
                  on_bad: Callable[[str], None]) -> tuple[asyncio.StreamReader, asyncio.Task]:
    """A reader the SDK can read, fed with the good lines of `raw`; the bad ones are answered on `writer`
    (one whole line per write: the SDK's writes, also whole lines, never interleave with it)."""
    out = asyncio.StreamReader(limit=limit)

    async def pump() -> None:
        try:
            while line := await _read_line(raw):
                line = line.strip()
                if not line:
                    continue
                found = problem(line)
                if found is None:
                    out.feed_data(line + b"\n")
                    continue
                code, message, ident = found
                on_bad(message)
                writer.write(error_line(code, message, ident))
                await writer.drain()
        finally:
            out.feed_eof()

    return out, asyncio.create_task(pump(), name="acp-wire")
