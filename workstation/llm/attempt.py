"""One HTTP attempt: the request (key, cache breakpoints or cache key) built, the call run in a worker
thread, its chunks consumed in the caller's thread (cancel, watchdog) and assembled into a Completion."""

from __future__ import annotations

import os
import queue
import threading
import time
from typing import Any, Callable, Optional

from .. import scrub
from ..providers import CACHE_TTLS, ModelSpec, cache_style, with_cache_breakpoints
from .client import load_litellm
from .errors import LLMCancelled, LLMError, map_exception
from .result import Completion
from .stream import Accumulator, fold_response, stream_was_truncated
from .usage import usage_cost, count_tokens, output_limit

_POLL_S = 0.05  # how often the consumer loop checks `cancel` / the watchdog
# Chunks of a stream that carry no output token: the role, finish and usage chunks, a tool call's or a
# content block's start and stop, Anthropic's pings.
STREAM_SLACK_CHUNKS = 1_024


def stream_budget(spec: ModelSpec) -> tuple[int, int]:
    """(output tokens, chunks) one streamed answer of ``spec`` may take. An honest provider spends at least
    one output token on every chunk that carries text or arguments, so a stream of more chunks than the
    model's output limit (plus the structural ones) is not the model answering: whoever sends it would
    otherwise hold the turn for as long as it likes (litellm costs 1-4 ms a chunk, so 10 MB of arguments
    in 7-character chunks take minutes even though the arguments are refused past MAX_TOOL_ARGS_CHARS)."""
    tokens = spec.max_output_tokens or output_limit(spec.model)
    return tokens, tokens + STREAM_SLACK_CHUNKS


def _resolve_api_key(spec: ModelSpec) -> Optional[str]:
    if spec.api_key_env:
        value = os.environ.get(spec.api_key_env, "")
        if not value:
            raise LLMError(f"environment variable {spec.api_key_env} (API key for {spec.model}) is not set",
                           kind="config", model=spec.model)
        scrub.register(value)
        return value
    if spec.api_base and spec.model.startswith("openai/"):
        # An OpenAI-compatible server at a custom URL without api_key_env: most local servers need no
        # key, but the OpenAI SDK refuses to send a request without one (litellm then reports a
        # misleading 500 "Missing credentials"), and falling back to OPENAI_API_KEY would send the
        # user's real OpenAI key to that URL.  Use api_key_env="OPENAI_API_KEY" to send it on purpose.
        return "no-key-required"
    return None  # litellm reads the provider's usual env var (ANTHROPIC_API_KEY, ...)


def _close_quietly(resp: Any) -> None:
    for target in (resp, getattr(resp, "completion_stream", None), getattr(resp, "response", None)):
        close = getattr(target, "close", None)
        if callable(close):
            try:
                close()
            except Exception:
                pass


def _request(spec: ModelSpec, messages: list[dict], tools: Optional[list[dict]], stream: bool,
             cache_key: Optional[str]) -> dict[str, Any]:
    """litellm.completion's arguments: the spec's extra parameters, the key, the provider's cache rule
    (breakpoints for Claude models, ``prompt_cache_key`` for OpenAI's), no hidden SDK retries."""
    api_key = _resolve_api_key(spec)
    kwargs: dict[str, Any] = dict(spec.extra_params)
    sent, sent_tools = [dict(m) for m in messages], tools
    style = cache_style(spec.model)
    if style == "anthropic":
        if spec.cache_ttl not in CACHE_TTLS:
            raise LLMError(f"cache_ttl {spec.cache_ttl!r} of {spec.model} is not one of {', '.join(CACHE_TTLS)}",
                           kind="config", model=spec.model)
        sent, sent_tools = with_cache_breakpoints(sent, tools, spec.cache_ttl)
    elif style == "openai" and cache_key:
        kwargs["prompt_cache_key"] = cache_key
    kwargs.update(model=spec.model, messages=sent, stream=stream, timeout=spec.timeout_s,
                  max_retries=0,  # the OpenAI SDK would otherwise retry twice on its own
                  drop_params=True)
    if spec.api_base:
        kwargs["api_base"] = spec.api_base
    if api_key:
        kwargs["api_key"] = api_key
    if sent_tools:
        kwargs["tools"] = sent_tools
    if stream:
        kwargs["stream_options"] = {"include_usage": True}
    return kwargs


def run_attempt(spec: ModelSpec, messages: list[dict], tools: Optional[list[dict]], stream: bool,
             on_text: Optional[Callable[[str], None]], cancel: Optional[threading.Event],
             cache_key: Optional[str] = None) -> Completion:
    lit = load_litellm()
    kwargs = _request(spec, messages, tools, stream, cache_key)

    events: "queue.Queue[tuple[str, Any]]" = queue.Queue()
    stop = threading.Event()

    def worker() -> None:
        resp = None
        try:
            resp = lit.completion(**kwargs)
            if not stream:
                events.put(("response", resp))
                return
            for chunk in resp:
                if stop.is_set():
                    break
                events.put(("chunk", chunk))
            events.put(("end", resp))
        except BaseException as e:  # noqa: BLE001 - forwarded to the consumer
            events.put(("error", e))
        finally:
            if stop.is_set() and resp is not None:
                _close_quietly(resp)

    threading.Thread(target=worker, name=f"llm-{spec.model}", daemon=True).start()

    acc = Accumulator()
    # Backup only: litellm's own (httpx) timeout normally fires at timeout_s.  The slack covers
    # litellm's lazy imports on a process's first call, which happen inside lit.completion().
    watchdog_s = max(spec.timeout_s * 1.5, spec.timeout_s + 2.0)
    last_event = time.monotonic()
    tokens, budget = stream_budget(spec) if stream else (0, 0)
    chunks = 0
    try:
        while True:
            if cancel is not None and cancel.is_set():
                raise LLMCancelled(f"request to {spec.model} cancelled", model=spec.model, partial_text=acc.text)
            try:
                kind, payload = events.get(timeout=_POLL_S)
            except queue.Empty:
                if time.monotonic() - last_event > watchdog_s:
                    raise LLMError(f"model {spec.model} timed out after {spec.timeout_s:g}s", kind="timeout",
                                   model=spec.model, retryable=True) from None
                continue
            last_event = time.monotonic()
            if kind == "chunk":
                chunks += 1
                if chunks > budget:
                    raise LLMError(f"stream from {spec.model} went past {budget:,} chunks, more than an answer "
                                   f"within its output limit of {tokens:,} tokens (model.max_output_tokens) "
                                   f"can take: left it", kind="malformed", model=spec.model)
                piece = acc.add_chunk(payload)
                if piece and on_text is not None:
                    on_text(piece)
                if acc.calls and acc.oversized:  # left here: the call is refused whatever follows
                    return _finish(spec, messages, acc, cut=True)
            elif kind == "end":
                if stream_was_truncated(payload):
                    raise LLMError(f"stream from {spec.model} ended without a finish reason (connection dropped?)",
                                   kind="dropped", model=spec.model, retryable=True)
                return _finish(spec, messages, acc)
            elif kind == "response":
                fold_response(acc, payload)
                if acc.text and on_text is not None:
                    on_text(acc.text)
                return _finish(spec, messages, acc)
            elif kind == "error":
                raise map_exception(payload, spec) from None
    finally:
        stop.set()


def _finish(spec: ModelSpec, messages: list[dict], acc: Accumulator, cut: bool = False) -> Completion:
    calls = acc.tool_calls(cut)
    text = acc.text
    estimated = acc.usage is None
    cache_read = cache_creation = hour = 0
    if acc.usage is not None:
        tokens_in, tokens_out, cache_read, cache_creation, hour = acc.usage
    else:
        tokens_in = count_tokens(spec.model, messages=messages)
        tokens_out = count_tokens(spec.model, text=text + "".join(c.name + c.arguments for c in calls))
    cost = usage_cost(spec.model, tokens_in, tokens_out, cache_read, cache_creation, hour)
    return Completion(text=text, tool_calls=calls, model=spec.model, tokens_in=tokens_in, tokens_out=tokens_out,
                      latency_s=0.0, cost_usd=cost,
                      finish_reason=acc.finish_reason, tokens_estimated=estimated, cache_read_tokens=cache_read,
                      cache_creation_tokens=cache_creation, cache_creation_1h_tokens=hour)
