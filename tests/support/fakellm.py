"""A scripted model server for tests: OpenAI chat completions and Anthropic Messages (the standard
library, and workstation.tokens to count tokens for the cache accounting).

Usage::

    from support.fakellm import Reply, ScriptedLLM

    with ScriptedLLM([Reply(text="hello"), Reply(tool_calls=[("read_file", {"path": "a.py"})])]) as llm:
        spec = ModelSpec("openai/test-model", api_base=llm.url, api_key_env="WS_TEST_KEY")
        ...
        assert llm.requests[0]["messages"][-1]["content"] == "hi"

Each POST /v1/chat/completions (OpenAI) or POST .../messages (Anthropic: point litellm's
``anthropic/...`` models at ``api_base=llm.url``) consumes the next queued ``Reply`` (or calls the
responder function given instead of a list, with the request in OpenAI chat shape on both endpoints:
fake_anthropic.to_chat_body).  When nothing is left the server
answers ``500 script exhausted`` so a test that makes one call too many fails
loudly instead of hanging.

Supported:

* ``stream: true``  -> SSE in OpenAI format: a role chunk, the text split over
  several chunks, every tool call split over several chunks (id/name first,
  arguments in pieces), a finish chunk, a usage chunk (always sent, whatever
  ``stream_options`` says) and ``data: [DONE]``.  The body uses chunked transfer
  encoding, so ``drop_stream_after`` (abort after N chunks) looks to the
  client exactly like a connection lost mid-stream (``clean_eof=True`` instead
  ends the body normally after N chunks, without finish chunk or ``[DONE]``).
* ``stream: false`` -> one ``chat.completion`` JSON object.
* ``status`` != 200 -> an OpenAI-style error JSON with that status (429 also sends
  ``Retry-After: 0`` unless ``retry_after`` is given).
* ``delay_s`` sleeps before answering (for client timeouts),
  ``chunk_delay_s`` sleeps between stream chunks (for cancellation / slow streams).
* GET /v1/models lists ``model_ids``.

The Anthropic endpoint answers the same scripting in Anthropic's format (fake_anthropic): streaming
events (message_start ... message_stop; ``drop_stream_after`` counts events), a ``message`` object
otherwise, ``{"type": "error", ...}`` bodies for ``status`` != 200 (529 is ``overloaded_error``).

Prompt caches, as the providers bill them (fake_cache has the rules and the token counting):

* Anthropic, always: breakpoints are the ``cache_control`` markers; the longest live prefix ending at a
  breakpoint, or at one of the 20 blocks before it, is read; each breakpoint's prefix of at least
  ``min_cache_tokens`` (1,024) is written with its TTL (5 min, or 1 h), refreshed on a hit. Usage:
  ``input_tokens`` (uncached), ``cache_read_input_tokens``, ``cache_creation_input_tokens`` and its
  ``cache_creation`` split by TTL. Markers the API refuses (more than 4, a longer TTL after a shorter)
  get a 400.
* OpenAI, with ``ScriptedLLM(cache=True)``: a request of at least 1,024 tokens gets the longest prefix
  an earlier request of the same model and ``prompt_cache_key`` sent, in 128-token steps, as
  ``usage.prompt_tokens_details.cached_tokens``; prompt and completion tokens are counted with the
  tokenizer. Without ``cache=True`` the usage is the old rough estimate (len // 4).
* Time moves only by ``llm.advance(seconds)`` (``llm.clock``); a ``Reply.usage`` or
  ``Reply.cached_tokens`` replaces the accounted figures (the cache state is still kept).

Everything the server received is recorded: ``requests`` (JSON bodies of the chat calls, in order, in
OpenAI chat shape), ``anthropic_requests`` (the raw Messages bodies), ``usages`` (the usage object of
each answer sent) and ``request_log`` (method, path, headers looked up in any case, raw body).
``exchanges`` pairs them: one ``{"request": body, "usage": usage}`` per chat call, in the order received,
``usage`` None until (unless) it is answered; with requests in flight at once (a background compaction
beside the agent's step) ``usages`` is in the order answered, ``exchanges`` keeps each with its request.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence, Union

from support import fake_anthropic as anthropic
from support.fake_cache import AnthropicPromptCache, CacheError, Clock, OpenAIPrefixCache, count_tokens

__all__ = ["Reply", "ScriptedLLM", "RecordedRequest"]


@dataclass
class Reply:
    """One scripted answer to one chat-completions request."""

    text: str = ""
    # (name, arguments): a dict is JSON-encoded; a str is sent verbatim (use it for malformed JSON).
    tool_calls: Sequence[tuple[str, Union[dict, str]]] = ()
    status: int = 200
    delay_s: float = 0
    drop_stream_after: Optional[int] = None  # abort the connection after N SSE chunks were sent
    usage: Optional[tuple[int, int]] = None  # (prompt_tokens, completion_tokens); default: rough estimate
    cached_tokens: Optional[int] = None  # usage.prompt_tokens_details.cached_tokens (OpenAI's prompt cache)
    # --- less common knobs ---
    finish_reason: Optional[str] = None  # default: "tool_calls" if tool_calls else "stop"
    error_message: Optional[str] = None  # message of the error JSON when status != 200
    retry_after: Optional[float] = None  # Retry-After header for error replies (429 default: 0)
    chunk_delay_s: float = 0  # sleep between SSE chunks
    # with drop_stream_after: end the HTTP body *properly* after N chunks (no finish chunk, no [DONE])
    # instead of aborting the connection -- a truncation only the SSE content can reveal.
    clean_eof: bool = False
    # How tool calls are streamed: "split" (OpenAI: id+name first, then argument pieces),
    # "whole" (each call complete in one chunk), "repeat_final" (split, then one more chunk
    # re-sending the complete arguments, as some providers do), "no_index" (split, but the
    # deltas carry no "index"; the first delta of each call carries its id).
    tool_call_style: str = "split"
    text_chunk_size: int = 4  # characters of text per content chunk
    args_chunk_size: int = 7  # characters of tool arguments per tool-call chunk
    model: Optional[str] = None  # "model" field of the response; default: the requested model


class Headers(dict):
    """Request headers, looked up whatever their case (clients differ: "Authorization", "authorization")."""

    def __init__(self, items: Any = ()) -> None:
        super().__init__((str(k).lower(), v) for k, v in dict(items).items())

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(key.lower())

    def __contains__(self, key: object) -> bool:
        return super().__contains__(str(key).lower())

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key.lower(), default)


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: Headers
    body: Any  # parsed JSON (or None / raw text)


Responder = Callable[[dict], Optional[Reply]]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            return  # client hung up (timeout, cancel, keep-alive reset): expected in tests
        super().handle_error(request, client_address)


class ScriptedLLM:
    """Context manager running the fake server on 127.0.0.1:<random port>."""

    def __init__(
        self,
        script: Union[Sequence[Reply], Responder, None] = None,
        *,
        model_ids: Sequence[str] = ("test-model",),
        cache: bool = False,
        min_cache_tokens: int = 1024,
        clock: Optional[Clock] = None,
        port: int = 0,  # 0: any free port
    ) -> None:
        self._port = port
        self._lock = threading.Lock()
        self._queue: deque[Reply] = deque()
        self._responder: Optional[Responder] = None
        if callable(script):
            self._responder = script
        elif script is not None:
            self._queue.extend(script)
        self.model_ids = list(model_ids)
        self.requests: list[dict] = []
        self.request_log: list[RecordedRequest] = []
        self.anthropic_requests: list[dict] = []
        self.usages: list[dict] = []
        self.exchanges: list[dict] = []
        self.clock = clock or Clock()
        self.openai_cache: Optional[OpenAIPrefixCache] = OpenAIPrefixCache(self.clock) if cache else None
        self.anthropic_cache = AnthropicPromptCache(self.clock, min_tokens=min_cache_tokens)
        self._server: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None

    # ------------------------------------------------------------------ control
    def push(self, *replies: Reply) -> None:
        """Queue more replies (consumed before the responder function, if any)."""
        with self._lock:
            self._queue.extend(replies)

    def advance(self, seconds: float) -> None:
        """Let `seconds` pass for the prompt caches."""
        self.clock.advance(seconds)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("ScriptedLLM is not running (use it as a context manager or call start())")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "ScriptedLLM":
        if self._server is not None:
            return self
        handler = _make_handler(self)
        server = _Server(("127.0.0.1", self._port), handler)
        self._server = server
        # stop() waits for the loop's next poll: at 10 ms a test's server costs it nothing it can feel
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01},
                                        name="ScriptedLLM", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None

    close = stop

    def __enter__(self) -> "ScriptedLLM":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ internals
    def _next_reply(self, body: dict) -> Optional[Reply]:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            responder = self._responder
        if responder is not None:
            return responder(body)
        return None

    def _record(self, rec: RecordedRequest, is_chat: bool, chat_body: Optional[dict] = None) -> Optional[dict]:
        """Record a request; the exchange of a chat call (its usage is filled in when answered)."""
        with self._lock:
            self.request_log.append(rec)
            if chat_body is not None:
                self.anthropic_requests.append(rec.body)
                self.requests.append(chat_body)
            elif is_chat:
                self.requests.append(rec.body if isinstance(rec.body, dict) else {"_raw": rec.body})
            else:
                return None
            exchange = {"request": self.requests[-1], "usage": None}
            self.exchanges.append(exchange)
            return exchange

    def _sent(self, usage: dict, exchange: Optional[dict] = None) -> dict:
        with self._lock:
            self.usages.append(usage)
            if exchange is not None:
                exchange["usage"] = usage
        return usage


# ---------------------------------------------------------------------- payloads
def _split(s: str, n: int) -> list[str]:
    n = max(1, n)
    return [s[i:i + n] for i in range(0, len(s), n)] or [""]


def _args_text(args: Union[dict, str]) -> str:
    return args if isinstance(args, str) else json.dumps(args)


def _output_text(reply: Reply) -> str:
    return reply.text + "".join(n + _args_text(a) for n, a in reply.tool_calls)


def _estimate_usage(body: dict, reply: Reply) -> tuple[int, int]:
    if reply.usage is not None:
        return reply.usage
    prompt = json.dumps(body.get("messages", []))
    return max(1, len(prompt) // 4), max(1, len(_output_text(reply)) // 4)


def _finish_reason(reply: Reply) -> str:
    if reply.finish_reason is not None:
        return reply.finish_reason
    return "tool_calls" if reply.tool_calls else "stop"


def _call_id(i: int) -> str:
    return f"call_{i}_{uuid.uuid4().hex[:8]}"


def _stream_chunks(body: dict, reply: Reply, usage: dict) -> Iterator[dict]:
    """The SSE chunks, made as they are sent (a stream of megabytes in small chunks starts at once)."""
    if reply.tool_call_style not in ("split", "whole", "repeat_final", "no_index"):
        raise ValueError(f"unknown tool_call_style {reply.tool_call_style!r}")
    return _chunks(body, reply, usage)


def _chunks(body: dict, reply: Reply, usage: dict) -> Iterator[dict]:
    cid = "chatcmpl-" + uuid.uuid4().hex[:12]
    created = int(time.time())
    model = reply.model or body.get("model", "test-model")

    def chunk(delta: dict, finish: Optional[str] = None) -> dict:
        return {
            "id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }

    yield chunk({"role": "assistant", "content": ""})
    if reply.text:
        for piece in _split(reply.text, reply.text_chunk_size):
            yield chunk({"content": piece})
    style = reply.tool_call_style
    for i, (name, args) in enumerate(reply.tool_calls):
        text_args = _args_text(args)
        head: dict[str, Any] = {"index": i, "id": _call_id(i), "type": "function",
                                "function": {"name": name, "arguments": text_args if style == "whole" else ""}}
        if style == "no_index":
            del head["index"]
        yield chunk({"tool_calls": [head]})
        if style == "whole":
            continue
        for piece in _split(text_args, reply.args_chunk_size):
            delta: dict[str, Any] = {"function": {"arguments": piece}}
            if style != "no_index":
                delta["index"] = i
            yield chunk({"tool_calls": [delta]})
        if style == "repeat_final":
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": text_args}}]})
    yield chunk({}, _finish_reason(reply))
    yield {
        "id": cid, "object": "chat.completion.chunk", "created": created, "model": model, "choices": [],
        "usage": usage,
    }


def _usage(body: dict, reply: Reply, cache: Optional[OpenAIPrefixCache]) -> dict:
    """The usage of one answer: scripted, else accounted by `cache` (tokenizer counts), else estimated."""
    cached = reply.cached_tokens
    if cache is not None:
        p, accounted = cache.account(body)
        c = max(1, count_tokens(_output_text(reply)))
        if reply.usage is not None:
            p, c = reply.usage
        cached = accounted if cached is None else cached
    else:
        p, c = _estimate_usage(body, reply)
    usage: dict[str, Any] = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return usage


def _full_response(body: dict, reply: Reply, usage: dict) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": _call_id(i), "type": "function", "function": {"name": n, "arguments": _args_text(a)}}
            for i, (n, a) in enumerate(reply.tool_calls)
        ]
    return {
        "id": "chatcmpl-" + uuid.uuid4().hex[:12], "object": "chat.completion", "created": int(time.time()),
        "model": reply.model or body.get("model", "test-model"),
        "choices": [{"index": 0, "message": message, "finish_reason": _finish_reason(reply), "logprobs": None}],
        "usage": usage,
    }


_ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 429: "rate_limit_exceeded", 500: "server_error", 502: "server_error",
    503: "server_error", 504: "server_error",
}


def _error_body(status: int, message: str) -> dict:
    return {"error": {"message": message, "type": _ERROR_TYPES.get(status, "server_error"),
                      "param": None, "code": str(status)}}


# ---------------------------------------------------------------------- handler
def _make_handler(owner: ScriptedLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "ScriptedLLM/1.0"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        # -- helpers
        def _send_json(self, status: int, payload: dict, headers: Optional[dict] = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def _write_chunk(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def _abort(self) -> None:
            """Cut the connection without finishing the chunked body."""
            self.close_connection = True
            try:
                self.wfile.flush()
                self.connection.shutdown(2)  # socket.SHUT_RDWR
            except OSError:
                pass

        # -- routes
        def do_GET(self) -> None:
            owner._record(RecordedRequest("GET", self.path, Headers(self.headers.items()), None), is_chat=False)
            if self.path.rstrip("/").endswith("/models"):
                self._send_json(200, {"object": "list", "data": [
                    {"id": m, "object": "model", "created": 0, "owned_by": "scripted"} for m in owner.model_ids]})
            else:
                self._send_json(404, _error_body(404, f"no route GET {self.path}"))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body: Any = json.loads(raw or b"{}")
            except ValueError:
                body = raw.decode("utf-8", "replace")
            path = self.path.rstrip("/")
            is_chat, is_messages = path.endswith("/chat/completions"), path.endswith("/messages")
            fail = self._anthropic_error if is_messages else self._openai_error
            chat_body = None
            if is_messages and isinstance(body, dict):
                try:
                    chat_body = anthropic.to_chat_body(body)
                except (AttributeError, KeyError, TypeError) as e:
                    chat_body = {"_unreadable": f"{type(e).__name__}: {e}"}
            self._exchange = owner._record(RecordedRequest("POST", self.path, Headers(self.headers.items()), body),
                                           is_chat=is_chat or is_messages, chat_body=chat_body)
            if not (is_chat or is_messages):
                self._send_json(404, _error_body(404, f"no route POST {self.path}"))
                return
            if not isinstance(body, dict) or (chat_body is not None and "_unreadable" in chat_body):
                fail(400, "request body is not a JSON object" if not isinstance(body, dict)
                     else f"malformed Messages request: {chat_body['_unreadable']}")
                return
            try:
                reply = owner._next_reply(chat_body if is_messages else body)
            except Exception as e:  # a broken responder should fail the test visibly
                fail(500, f"scripted responder raised {type(e).__name__}: {e}")
                return
            if reply is None:
                fail(500, "script exhausted: no scripted reply left for this request")
                return
            if reply.delay_s:
                time.sleep(reply.delay_s)
            if reply.status != 200:
                headers = {}
                retry_after = reply.retry_after
                if retry_after is None and reply.status == 429:
                    retry_after = 0
                if retry_after is not None:
                    headers["Retry-After"] = f"{retry_after:g}"
                fail(reply.status, reply.error_message or f"scripted error {reply.status}", headers)
                return
            try:
                if is_messages:
                    self._answer_messages(body, reply)
                    return
                usage = owner._sent(_usage(body, reply, owner.openai_cache), self._exchange)
                if body.get("stream"):
                    chunks = _stream_chunks(body, reply, usage)
                    self._stream((b"data: " + json.dumps(ch).encode() + b"\n\n" for ch in chunks), reply,
                                 done=b"data: [DONE]\n\n")
                else:
                    self._send_json(200, _full_response(body, reply, usage))
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # client went away (timeout / cancel)

        def _openai_error(self, status: int, message: str, headers: Optional[dict] = None) -> None:
            self._send_json(status, _error_body(status, message), headers)

        def _anthropic_error(self, status: int, message: str, headers: Optional[dict] = None) -> None:
            self._send_json(status, anthropic.error_body(status, message), headers)

        def _answer_messages(self, body: dict, reply: Reply) -> None:
            try:
                accounted = owner.anthropic_cache.account(body)
            except CacheError as e:
                self._anthropic_error(400, str(e))
                return
            output = reply.usage[1] if reply.usage is not None else max(1, count_tokens(_output_text(reply)))
            usage = accounted.as_usage(output)
            if reply.usage is not None or reply.cached_tokens is not None:  # scripted figures win
                read = reply.cached_tokens or 0
                created = 0 if reply.usage is not None else accounted.cache_creation_input_tokens
                total = reply.usage[0] if reply.usage is not None else accounted.total
                usage.update(input_tokens=max(0, total - read - created), cache_read_input_tokens=read)
                if reply.usage is not None:
                    usage.update(cache_creation_input_tokens=0,
                                 cache_creation={"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0})
            owner._sent(usage, self._exchange)
            model = reply.model or body.get("model", "test-model")
            calls = [(anthropic.tool_id(i), n, _args_text(a)) for i, (n, a) in enumerate(reply.tool_calls)]
            stop = anthropic.stop_reason(_finish_reason(reply))
            if not body.get("stream"):
                self._send_json(200, anthropic.message(model, reply.text, calls, stop, usage))
                return
            stream = anthropic.events(model, reply.text, calls, stop, usage, text_chunk=reply.text_chunk_size,
                                      args_chunk=reply.args_chunk_size, whole_args=reply.tool_call_style == "whole")
            self._stream([anthropic.sse(name, data) for name, data in stream], reply, done=None)

        def _stream(self, payloads: Iterable[bytes], reply: Reply, done: Optional[bytes]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            sent = 0
            for payload in payloads:
                if reply.drop_stream_after is not None and sent >= reply.drop_stream_after:
                    if reply.clean_eof:
                        self._write_chunk(b"")
                    else:
                        self._abort()
                    return
                if reply.chunk_delay_s and sent:
                    time.sleep(reply.chunk_delay_s)
                self._write_chunk(payload)
                sent += 1
            if reply.drop_stream_after is not None and sent >= reply.drop_stream_after:
                self._abort()
                return
            if done is not None:
                self._write_chunk(done)
            self._write_chunk(b"")  # terminating zero-length chunk

    return Handler
