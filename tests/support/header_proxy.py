"""A reverse proxy on 127.0.0.1 that adds headers to every HTTP request (the bearer token `workstation mcp
--http` needs), for clients that cannot send one: the MCP conformance suite's server scenarios.

Byte-level, so streams (SSE) pass as they come: each request's head is rewritten (the headers added, a Host
or Origin naming the proxy renamed to the server, as any reverse proxy does; `Connection: close`, so each
connection carries one request and no body needs framing), then bytes are piped both ways until either
side ends. A Host or Origin naming anything else passes unchanged: the server judges it.
"""

from __future__ import annotations

import asyncio
import threading

_HEAD_LIMIT = 64 * 1024


class HeaderProxy:
    def __init__(self, upstream_port: int, headers: dict[str, str]):
        self.upstream_port = upstream_port
        self.headers = headers
        self.port = 0
        self.requests = 0
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name="header-proxy", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def __enter__(self) -> "HeaderProxy":
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("the header proxy did not start")
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0,
                                                                    limit=_HEAD_LIMIT))  # readuntil's bound
        self.port = server.sockets[0].getsockname()[1]
        self._started.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            for task in asyncio.all_tasks(self._loop):
                task.cancel()
            self._loop.run_until_complete(asyncio.sleep(0))
            self._loop.close()

    def _rewrite(self, head: bytes) -> bytes:
        request, *lines = head.decode("latin-1").split("\r\n")
        ours = {f"127.0.0.1:{self.port}": f"127.0.0.1:{self.upstream_port}",
                f"localhost:{self.port}": f"localhost:{self.upstream_port}"}
        kept = []
        for line in lines:
            name, _, value = line.partition(":")
            key, value = name.strip().lower(), value.strip()
            if key in ("connection", "keep-alive", "proxy-connection") or key in {h.lower() for h in self.headers}:
                continue
            if key == "host":
                value = ours.get(value, value)
            elif key == "origin":
                for mine, theirs in ours.items():
                    if value == f"http://{mine}":
                        value = f"http://{theirs}"
            kept.append(f"{name.strip()}: {value}")
        kept += [f"{name}: {value}" for name, value in self.headers.items()] + ["Connection: close"]
        return ("\r\n".join([request, *kept]) + "\r\n\r\n").encode("latin-1")

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        upstream_w = None
        try:
            head = await client_r.readuntil(b"\r\n\r\n")
            self.requests += 1
            upstream_r, upstream_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
            upstream_w.write(self._rewrite(head[:-4]))
            await asyncio.gather(_pipe(client_r, upstream_w), _pipe(upstream_r, client_w))
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            for writer in (client_w, upstream_w):
                if writer is not None:
                    writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()
