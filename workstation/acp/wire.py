"""Stdio for `workstation acp`, hardened: our own message transport for the SDK's connection.

The SDK's stdio (`acp.stdio_streams`) is asyncio pipes: a regular file as stdin or stdout is refused
with a traceback, a line with no newline is gathered whole whatever its size, a line nested too deeply
for `json` ends its reader, and a JSON value that is not an object stops it. Here (`StdioTransport`, the
SDK's message-level `Transport`):

* stdin is read by a thread with plain `os.read` and stdout written by another with `os.write`, so a
  pipe, a socket, a terminal and a regular file all serve; a slow reader of stdout never blocks the loop.
* A line is gathered up to `limit` bytes: past it the rest of the line is read and dropped, not kept,
  and the line gets one error. At most one parsed message waits for the SDK: memory stays within the
  limit whatever the editor sends.
* Each line is parsed once: a message goes on to the SDK; anything else gets one JSON-RPC error on
  stdout (-32700 for a line that is not JSON, or too long or too deeply nested to read, -32600 for JSON
  that is not a request, a response or a notification), with the request's id when it has one, and one
  line on stderr (`on_bad`); serving goes on.
* At the end of a regular file as stdin, the requests it held are answered before the end is reported
  (a pipe's end is the editor gone: its turns stop at once).
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import select
import stat
import threading
from typing import Any, Callable

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
_SHOWN = 80  # characters of a bad line quoted back
_READ_BYTES = 1 << 16
_WAITING = 1  # parsed messages read ahead of the SDK: the bound on what an editor's flood can hold in memory


def problem(line: bytes) -> tuple[int, str, object] | None:
    """(code, message, id) of what is wrong with one line, None when it is a JSON-RPC message."""
    return _parse(line)[1]


def _parse(line: bytes) -> tuple[dict | None, tuple[int, str, object] | None]:
    """(the message, None), or (None, (code, message, id)) for a line that is not one."""
    try:
        message = json.loads(line)
    except RecursionError:  # valid JSON maybe, but deeper than `json` reads (100,000 `[`)
        return None, (PARSE_ERROR, f"Parse error: nested too deeply to read: {_shown(line)!r}", None)
    except ValueError as err:
        return None, (PARSE_ERROR, f"Parse error: not JSON ({err}): {_shown(line)!r}", None)
    if not isinstance(message, dict):
        return None, (INVALID_REQUEST, "Invalid Request: a JSON-RPC message is an object, not "
                                       f"{type(message).__name__}", None)
    ident = message.get("id")
    if ident is not None and not isinstance(ident, (str, int)):
        return None, (INVALID_REQUEST, "Invalid Request: id must be a string or a number", None)
    if "method" in message and not isinstance(message["method"], str):
        return None, (INVALID_REQUEST, "Invalid Request: method must be a string", ident)
    if "method" not in message and "id" not in message:
        return None, (INVALID_REQUEST, "Invalid Request: neither a method nor an id", None)
    return message, None


def _shown(line: bytes) -> str:
    text = line[:_SHOWN * 4].decode("utf-8", "replace")
    return text if len(text) <= _SHOWN and len(line) <= _SHOWN * 4 else text[:_SHOWN] + "…"


def error_line(code: int, message: str, ident: object) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}},
                       separators=(",", ":")) + "\n").encode()


def _wait(fd: int, writing: bool) -> None:
    """Until a non-blocking fd (the editor may hand us one) is ready."""
    select.select([], [fd], []) if writing else select.select([fd], [], [])


class StdioTransport:
    """JSON-RPC messages over newline-delimited JSON on two file descriptors (the SDK's `Transport`)."""

    def __init__(self, limit: int, on_bad: Callable[[str], None], stdin: int = 0, stdout: int = 1):
        self.limit = limit
        self.on_bad = on_bad
        self.stdin, self.stdout = stdin, stdout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._inbox: asyncio.Queue[tuple[str, Any]] | None = None
        self._room = threading.Semaphore(_WAITING)  # released as the SDK takes what the reader read
        self._outbox: queue.Queue[tuple[bytes, asyncio.Future] | None] = queue.Queue()
        self._writer: threading.Thread | None = None
        self._broken: OSError | None = None  # stdout failed: every later send fails the same way
        self._closed = False
        try:
            self._file = stat.S_ISREG(os.fstat(stdin).st_mode)
        except OSError:
            self._file = False
        self._unanswered: set[Any] = set()  # ids of the editor's requests not answered yet
        self._asked: set[Any] = set()  # ids of our requests to the editor not answered yet
        self._answered = asyncio.Event()

    async def start(self) -> "StdioTransport":
        self._loop = asyncio.get_running_loop()
        self._inbox = asyncio.Queue()
        threading.Thread(target=self._read, name="acp-stdin", daemon=True).start()
        self._writer = threading.Thread(target=self._write, name="acp-stdout", daemon=True)
        self._writer.start()
        return self

    # ------------------------------------------------------------------ the SDK's side
    async def receive(self) -> dict[str, Any] | None:
        assert self._inbox is not None, "start() first"
        while True:
            kind, item = await self._inbox.get()
            self._room.release()
            if kind == "message":
                if "method" in item and "id" in item:
                    self._unanswered.add(item["id"])
                elif "method" not in item:
                    self._asked.discard(item.get("id"))
                return item
            if kind == "bad":
                code, message, ident = item
                self.on_bad(message)
                try:
                    await self._put(error_line(code, message, ident))
                except OSError:
                    pass  # stdout is gone: the end of stdin follows, or the SDK's next send says so
                continue
            if kind == "failed":
                self.on_bad(item)
            if self._file:  # a file's requests are answered, unless one waits for an answer it cannot hold
                while self._unanswered and not self._asked and self._broken is None:
                    self._answered.clear()
                    await self._answered.wait()
            return None

    async def send(self, message: dict[str, Any]) -> None:
        await self._put((json.dumps(message, separators=(",", ":")) + "\n").encode())
        if "method" in message and "id" in message:
            self._asked.add(message["id"])
        elif "method" not in message:
            self._unanswered.discard(message.get("id"))
        self._answered.set()  # the end of a file waits on both

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._outbox.put(None)
        if self._writer is not None:  # what was sent is written before we go
            await asyncio.to_thread(self._writer.join, 10.0)

    async def _put(self, data: bytes) -> None:
        if self._broken is not None:
            raise self._broken
        if self._closed:
            raise ConnectionError("the connection to the editor is closed")
        assert self._loop is not None, "start() first"
        done = self._loop.create_future()
        self._outbox.put((data, done))
        await done

    # ------------------------------------------------------------------ the threads
    def _hand(self, kind: str, item: Any) -> None:
        """One item to the loop, once the SDK has taken the one before (the reader's backpressure)."""
        self._room.acquire()
        assert self._loop is not None and self._inbox is not None
        try:
            self._loop.call_soon_threadsafe(self._inbox.put_nowait, (kind, item))
        except RuntimeError:  # the loop is closed: serving is over
            pass

    def _line(self, line: bytes) -> None:
        line = line.strip()
        if not line:
            return
        message, wrong = _parse(line)
        if wrong is not None:
            self._hand("bad", wrong)
        else:
            self._hand("message", message)

    def _too_long(self, size: int) -> None:
        self._hand("bad", (PARSE_ERROR, f"Parse error: a line of {size:,} bytes is over the {self.limit:,}-byte "
                                        "limit of one message: dropped", None))

    def _read(self) -> None:
        gathered = bytearray()
        dropped = -1  # bytes of an over-long line read and dropped so far; -1: not dropping
        try:
            while True:
                try:
                    data = os.read(self.stdin, _READ_BYTES)
                except BlockingIOError:
                    _wait(self.stdin, writing=False)
                    continue
                if not data:
                    break
                start = 0
                while (end := data.find(b"\n", start)) >= 0:
                    piece = data[start:end]
                    start = end + 1
                    if dropped >= 0:
                        self._too_long(dropped + len(piece))
                        dropped = -1
                    elif len(gathered) + len(piece) > self.limit:
                        self._too_long(len(gathered) + len(piece))
                        gathered = bytearray()
                    else:
                        gathered += piece
                        line, gathered = bytes(gathered), bytearray()
                        self._line(line)
                rest = data[start:]
                if dropped >= 0:
                    dropped += len(rest)
                elif len(gathered) + len(rest) > self.limit:
                    dropped = len(gathered) + len(rest)
                    gathered = bytearray()  # let the memory go now, not at the newline
                else:
                    gathered += rest
            if dropped >= 0:
                self._too_long(dropped)
            elif gathered:
                self._line(bytes(gathered))
            self._hand("end", None)
        except OSError as err:
            self._hand("failed", f"reading stdin failed ({err.strerror or err}): serving stops")

    def _write(self) -> None:
        while (item := self._outbox.get()) is not None:
            data, done = item
            error: OSError | None = self._broken
            view = memoryview(data)
            while error is None and view:
                try:
                    view = view[os.write(self.stdout, view):]
                except BlockingIOError:
                    _wait(self.stdout, writing=True)
                except OSError as err:
                    error = self._broken = err
            self._settle(done, error)

    def _settle(self, done: asyncio.Future, error: OSError | None) -> None:
        def settle() -> None:
            if done.done():
                return
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)
                self._answered.set()

        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(settle)
        except RuntimeError:  # the loop is closed: nobody waits for it
            pass
