"""The only module that talks to language models (through litellm).

Design notes
------------
* ``litellm`` is imported lazily (it takes ~3 s) and only after
  ``LITELLM_LOCAL_MODEL_COST_MAP=True`` is in the environment, otherwise the
  import tries to download the model price map.  Call :func:`warm_import` from a
  background thread at start-up so the first request does not pay for it.
* :func:`complete` runs the HTTP call and the stream iteration in a daemon
  worker thread and consumes the chunks in the calling thread.  That keeps
  ``cancel`` responsive (checked every 50 ms, even while the server has not
  sent a byte) and lets a watchdog enforce the timeout even if a provider
  client ignores it.  ``on_text`` / ``on_retry`` are always invoked in the
  calling thread.
* Text and tool-call deltas are accumulated here (by tool-call index), never by
  ``litellm.stream_chunk_builder``, which has lost tool calls for some providers.
* Retries (transient errors: 408/409/429/5xx/529, timeouts, connection errors,
  streams cut off mid-way) are done here with exponential backoff; the OpenAI
  SDK's own hidden retries are disabled (``max_retries=0``).  After the retries
  of a model are used up, ``ModelSpec.fallbacks`` are tried in order (for any
  error except cancellation).
* API keys come from the environment variable named in the spec, are registered
  as known secrets (workstation.scrub) and redacted from every error message
  and from litellm's / the OpenAI SDK's log records.
* Prompt caching, one rule per provider (providers.cache_style): Claude models (Anthropic, Bedrock,
  Vertex) get ``cache_control`` breakpoints (providers.with_cache_breakpoints) with the spec's
  ``cache_ttl``; OpenAI models get ``prompt_cache_key`` = the caller's ``cache_key`` (the session);
  others nothing. Usage reports what the cache served and wrote (Completion.cache_*_tokens).
* ``timeout_s`` is an *inactivity* timeout: the time allowed until the response
  starts and between two stream chunks (a long answer that keeps streaming is
  not cut).  A watchdog raises at ``max(1.5 * timeout_s, timeout_s + 2)`` if the
  client-level timeout did not fire.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import importlib
import json
import logging
import queue
import random
import re
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Optional

from . import scrub
from .providers import CACHE_TTLS, ModelSpec, cache_style, shares_endpoint, with_cache_breakpoints

__all__ = [
    "LLMError",
    "LLMCancelled",
    "ToolCall",
    "Completion",
    "ModelSpec",
    "complete",
    "count_tokens",
    "context_window",
    "set_context_window",
    "warm_import",
    "DEFAULT_CONTEXT_WINDOW",
    "CACHE_TTLS",
]

log = logging.getLogger(__name__)

DEFAULT_CONTEXT_WINDOW = 32768
MAX_BACKOFF_S = 30.0  # cap for one backoff sleep (also caps a server's Retry-After)
_POLL_S = 0.05  # how often the consumer loop checks `cancel` / the watchdog
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})


# ============================================================================ errors / data


class LLMError(Exception):
    """A failed model call, with a one-line, user-facing message (secrets scrubbed).

    Attributes: ``kind`` (``timeout``, ``rate_limit``, ``server``, ``connection``,
    ``dropped``, ``auth``, ``not_found``, ``bad_request``, ``context_window``,
    ``malformed``, ``cancelled``, ``config``, ``error``), ``model``, ``status``
    (HTTP status or None) and ``retryable``.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str = "error",
        model: Optional[str] = None,
        status: Optional[int] = None,
        retryable: bool = False,
        retry_after: Optional[float] = None,
    ) -> None:
        message = " ".join(scrub.redact(str(message)).split())  # one line, no secrets
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.model = model
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after

    def __str__(self) -> str:
        return self.message


class LLMCancelled(LLMError):
    """The ``cancel`` event was set.  ``partial_text`` holds what had streamed so far."""

    def __init__(self, message: str = "request cancelled", *, model: Optional[str] = None,
                 partial_text: str = "") -> None:
        super().__init__(message, kind="cancelled", model=model)
        self.partial_text = partial_text


# No tool needs more in one call (a 1 MB file is ~250k tokens); a bigger argument is refused before it
# is parsed, and the conversation keeps a note of it instead of the text (see `kept_arguments`).
MAX_TOOL_ARGS_CHARS = 1_000_000


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as streamed
    cut: bool = False  # the stream was left once the arguments passed MAX_TOOL_ARGS_CHARS (more followed)

    @property
    def oversized(self) -> bool:
        return len(self.arguments or "") > MAX_TOOL_ARGS_CHARS

    def _size(self) -> str:
        return f"{'more than ' if self.cut else ''}{len(self.arguments):,} characters"

    def kept_arguments(self) -> str:
        """What the conversation keeps of the arguments: the text, or a JSON note when it is oversized."""
        if not self.oversized:
            return self.arguments
        return json.dumps({"not_kept": f"{self._size()} of arguments, over the "
                                       f"{MAX_TOOL_ARGS_CHARS:,}-character limit of one call"})

    def parsed_arguments(self) -> dict:
        """The arguments as a dict ('' counts as {}); LLMError on malformed JSON or a non-object."""
        if self.oversized:
            raise LLMError(f"tool-call arguments for {self.name} are {self._size()}, over "
                           f"the limit of {MAX_TOOL_ARGS_CHARS:,}: split the work into smaller calls",
                           kind="malformed")
        raw = self.arguments.strip() if self.arguments else ""
        if not raw:
            return {}
        try:
            value = json.loads(raw)
        except ValueError as e:
            snippet = raw if len(raw) <= 80 else raw[:77] + "..."
            reason = getattr(e, "msg", str(e))
            pos = getattr(e, "pos", None)
            where = f" at char {pos}" if pos is not None else ""
            raise LLMError(f"malformed tool-call arguments for {self.name}: {reason}{where} in {snippet!r}",
                           kind="malformed") from None
        except RecursionError:  # a model (or an attacker steering it) can nest deeper than the parser goes
            raise LLMError(f"malformed tool-call arguments for {self.name}: nested too deeply",
                           kind="malformed") from None
        if not isinstance(value, dict):
            raise LLMError(f"malformed tool-call arguments for {self.name}: expected a JSON object, "
                           f"got {type(value).__name__}", kind="malformed")
        return value


@dataclass
class Completion:
    text: str
    tool_calls: list[ToolCall]
    model: str  # the model string that produced the answer (a fallback's name if one was used)
    tokens_in: int
    tokens_out: int
    latency_s: float  # wall time of the whole complete() call, retries included
    cost_usd: Optional[float]  # None when litellm has no price for the model
    finish_reason: Optional[str]
    attempts: int = 1  # HTTP attempts made, over all models
    tokens_estimated: bool = False  # True when the provider sent no usage and we counted ourselves
    cache_read_tokens: int = 0  # of tokens_in, read from the provider's prompt cache
    cache_creation_tokens: int = 0  # of tokens_in, written to the provider's prompt cache
    cache_creation_1h_tokens: int = 0  # of cache_creation_tokens, written for an hour (billed 2x, not 1.25x)


# ============================================================================ secrets

_REDACTING_FILTER = scrub.RedactingFilter()
# Exact logger names (a logger's filters do not apply to records of its children).
_FILTERED_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "openai", "openai._base_client",
                     "httpx", "httpcore.http11", "httpcore.connection", __name__)


# ============================================================================ litellm import

_litellm_mod: Any = None
_import_lock = threading.Lock()


def _litellm() -> Any:
    global _litellm_mod
    if _litellm_mod is None:
        with _import_lock:
            if _litellm_mod is None:
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                import litellm  # lazy: litellm, ~3 s  # noqa: PLC0415

                _configure_litellm(litellm)
                _litellm_mod = litellm
    return _litellm_mod


def _configure_litellm(litellm: Any) -> None:
    litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banners printed to stdout
    litellm.disable_hf_tokenizer_download = True  # token_counter must never download tokenizers
    if hasattr(litellm, "telemetry"):
        litellm.telemetry = False
    # litellm attaches its own StreamHandler (stdout/stderr) to its loggers; in a TUI that garbles
    # the screen.  Drop it: records propagate to the application's logging setup instead.  Keep
    # litellm's DEBUG flood out unless LITELLM_LOG asks for it.
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
        lg = logging.getLogger(name)
        for h in list(lg.handlers):
            if type(h).__name__ == "LevelRoutingStreamHandler" or isinstance(h, logging.StreamHandler):
                lg.removeHandler(h)
        lg.propagate = True
        if not os.environ.get("LITELLM_LOG"):
            lg.setLevel(logging.WARNING)
    for name in _FILTERED_LOGGERS:
        lg = logging.getLogger(name)
        if _REDACTING_FILTER not in lg.filters:
            lg.addFilter(_REDACTING_FILTER)


_warmed = False

# Modules litellm / the OpenAI SDK import lazily on the first completion (~1 s) and on the first
# completion *with tools* (litellm's MCP hook imports the whole `mcp` package, ~1.3 s).
_PREWARM_MODULES = (
    "openai.resources",
    "litellm.responses.mcp.chat_completions_handler",
    "litellm.llms.openai.openai",
    "litellm.litellm_core_utils.streaming_handler",
    "litellm.proxy.openai_files_endpoints.common_utils",
)


def warm_import() -> None:
    """Import and configure litellm, pre-import what the first completion would import lazily and
    load the default tokenizer (~4-5 s in total; call from a background thread at app start)."""
    global _warmed
    lit = _litellm()
    if _warmed:
        return
    _warmed = True
    for name in _PREWARM_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # only an optimisation; module layout differs across litellm versions
            pass
    try:
        lit.token_counter(model="gpt-4o", text="warm up")
    except Exception:
        pass


# ============================================================================ tokens / context


def _flatten_for_estimate(messages: Optional[list[dict]]) -> str:
    parts: list[str] = []
    for m in messages or []:
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif content is not None:
            parts.append(json.dumps(content, default=str))
        if m.get("tool_calls"):
            parts.append(json.dumps(m["tool_calls"], default=str))
        parts.append(str(m.get("role", "")))
    return "\n".join(parts)


def count_tokens(model: str, messages: Optional[list[dict]] = None, text: Optional[str] = None) -> int:
    """Tokens in ``messages`` plus ``text`` for ``model``, via ``litellm.token_counter`` (offline:
    tiktoken files bundled with litellm; HF tokenizer downloads are disabled, so e.g. llama models
    are counted with cl100k).  Only if the counter raises do we fall back to ``len(chars) // 4``."""
    if not messages and not text:
        return 0
    try:
        lit = _litellm()
        total = 0
        if messages:
            total += int(lit.token_counter(model=model, messages=messages))
        if text:
            total += int(lit.token_counter(model=model, text=text))
        return total
    except Exception as e:  # documented fallback: rough chars/4 estimate
        log.debug("token_counter failed for %s (%s); using len//4 estimate", model, type(e).__name__)
        return (len(_flatten_for_estimate(messages)) + len(text or "")) // 4


_ctx_overrides: dict[str, int] = {}
_ctx_cache: dict[str, int] = {}
_ctx_lock = threading.Lock()


def set_context_window(model: str, tokens: Optional[int]) -> None:
    """Override the context window of ``model`` (e.g. from user config); ``None`` removes the override."""
    with _ctx_lock:
        if tokens is None:
            _ctx_overrides.pop(model, None)
        else:
            _ctx_overrides[model] = int(tokens)


def context_window(model: str) -> int:
    """Max input tokens of ``model``: override, else litellm's model info (``max_input_tokens``, then
    ``max_tokens``), else DEFAULT_CONTEXT_WINDOW (32768).  Cached per model."""
    with _ctx_lock:
        if model in _ctx_overrides:
            return _ctx_overrides[model]
        if model in _ctx_cache:
            return _ctx_cache[model]
    n: Optional[int] = None
    try:
        info = _litellm().get_model_info(model)
        n = info.get("max_input_tokens") or info.get("max_tokens")
    except Exception:
        n = None
    result = int(n) if n else DEFAULT_CONTEXT_WINDOW
    with _ctx_lock:
        _ctx_cache[model] = result
    return result


def _cost(model: str, tokens_in: int, tokens_out: int, cache_read: int = 0, cache_creation: int = 0,
          cache_creation_1h: int = 0) -> Optional[float]:
    """The call's cost from litellm's bundled price map (cached input priced as such, 1-hour writes at
    their own price); None when it has no price for the model."""
    try:
        lit = _litellm()
        extra: dict[str, Any] = {}
        if cache_creation_1h:  # only a usage object carries the split of the writes by lifetime
            from litellm.types.utils import CacheCreationTokenDetails, PromptTokensDetailsWrapper  # lazy: litellm

            split = CacheCreationTokenDetails(ephemeral_5m_input_tokens=cache_creation - cache_creation_1h,
                                              ephemeral_1h_input_tokens=cache_creation_1h)
            extra["usage_object"] = lit.Usage(
                prompt_tokens=tokens_in, completion_tokens=tokens_out, total_tokens=tokens_in + tokens_out,
                cache_read_input_tokens=cache_read, cache_creation_input_tokens=cache_creation,
                prompt_tokens_details=PromptTokensDetailsWrapper(cached_tokens=cache_read,
                                                                 cache_creation_tokens=cache_creation,
                                                                 cache_creation_token_details=split))
        p, c = lit.cost_per_token(model=model, prompt_tokens=tokens_in, completion_tokens=tokens_out,
                                  cache_read_input_tokens=cache_read, cache_creation_input_tokens=cache_creation,
                                  **extra)
        return float(p) + float(c)
    except Exception:  # an unknown model, or a litellm without these arguments: no price rather than a guess
        return None


# ============================================================================ stream accumulation


def _is_json_object(s: str) -> bool:
    try:
        return isinstance(json.loads(s), dict)
    except (ValueError, RecursionError):
        return False


class _ToolCallBuilder:
    """One call's name and arguments from its deltas. Arguments are kept as parts (joined when read), so
    a long argument streamed in small pieces costs linear time, and the whole text is parsed to check
    for a provider re-sending complete arguments only once its size has doubled since the last check."""

    __slots__ = ("id", "name", "_parts", "size", "_checked")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self._parts: list[str] = []
        self.size = 0
        self._checked = 0  # size of the arguments when they were last found not a whole JSON object

    @property
    def arguments(self) -> str:
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def _set(self, args: str) -> None:
        self._parts, self.size = [args], len(args)

    def add(self, tc_id: Optional[str], name: Optional[str], args: Optional[str]) -> None:
        if tc_id and not self.id:
            self.id = tc_id
        if name:
            if not self.name or name.startswith(self.name):
                self.name = name  # first time, or a repeated / cumulative name
            elif name != self.name:
                self.name += name  # name streamed in pieces
        if not args:
            return
        if not self.size:
            self._set(args)
        elif len(args) > self.size and args.startswith(self.arguments) and _is_json_object(args):
            self._set(args)  # provider re-sent the cumulative arguments
        elif (args.lstrip().startswith("{") and self._parts[-1].rstrip().endswith("}")
              and self.size >= 2 * self._checked and _is_json_object(args)):
            if _is_json_object(self.arguments):
                self._set(args)  # provider re-sent complete arguments after a complete object
                return
            self._checked = self.size
            self._append(args)
        else:
            self._append(args)

    def _append(self, args: str) -> None:
        self._parts.append(args)
        self.size += len(args)


class _Accumulator:
    def __init__(self) -> None:
        self.text_parts: list[str] = []
        self.calls: dict[int, _ToolCallBuilder] = {}
        self._id_to_index: dict[str, int] = {}
        self._remap: dict[int, int] = {}  # provider index -> slot (only differs for index reuse)
        self._last: Optional[int] = None
        self.finish_reason: Optional[str] = None
        self.usage: Optional[tuple[int, int, int, int, int]] = None  # prompt, completion, cache read, written, 1h

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    def _index_for(self, index: Optional[int], tc_id: Optional[str]) -> int:
        """Map a delta's (index, id) to our slot.  Normal providers: slot == index.  Robust to deltas
        without an index (continuation of the latest call, or a new call when an id is given) and
        to providers that reuse one index for several calls with different ids."""
        if tc_id and tc_id in self._id_to_index:
            slot = self._id_to_index[tc_id]
            if index is not None:
                self._remap[index] = slot
        elif index is None:
            slot = (max(self.calls, default=-1) + 1) if (tc_id or self._last is None) else self._last
        else:
            slot = self._remap.get(index, index)
            if tc_id:
                known = self.calls.get(slot)
                if known is not None and known.id and known.id != tc_id:
                    slot = max(self.calls) + 1
                self._remap[index] = slot
        if tc_id:
            self._id_to_index[tc_id] = slot
        self._last = slot
        return slot

    def add_tool_delta(self, index: Optional[int], tc_id: Optional[str], name: Optional[str],
                       args: Optional[str]) -> None:
        i = self._index_for(index, tc_id)
        self.calls.setdefault(i, _ToolCallBuilder()).add(tc_id, name, args)

    def add_chunk(self, chunk: Any) -> str:
        """Fold one litellm stream chunk in; returns the new text (for on_text)."""
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = _usage_of(usage) or self.usage
        choices = getattr(chunk, "choices", None) or []
        if not choices:
            return ""
        choice = choices[0]
        if getattr(choice, "finish_reason", None):
            self.finish_reason = choice.finish_reason
        delta = getattr(choice, "delta", None)
        if delta is None:
            return ""
        for tc in getattr(delta, "tool_calls", None) or []:
            fn = _get(tc, "function")
            self.add_tool_delta(_get(tc, "index"), _get(tc, "id"), _get(fn, "name"), _get(fn, "arguments"))
        fc = getattr(delta, "function_call", None)  # legacy single function_call deltas
        if fc is not None and (_get(fc, "name") or _get(fc, "arguments")):
            self.add_tool_delta(0, None, _get(fc, "name"), _get(fc, "arguments"))
        content = getattr(delta, "content", None)
        if content:
            self.text_parts.append(content)
            return content
        return ""

    @property
    def oversized(self) -> bool:
        """Whether a call's arguments passed MAX_TOOL_ARGS_CHARS: it will be refused, so reading on is waste
        (and a stream of megabytes in small chunks would keep the turn busy for minutes)."""
        return any(b.size > MAX_TOOL_ARGS_CHARS for b in self.calls.values())

    def tool_calls(self, cut: bool = False) -> list[ToolCall]:
        out = []
        for i in sorted(self.calls):
            b = self.calls[i]
            if not (b.name or b.size):
                continue
            out.append(ToolCall(id=b.id or f"call_{i}_{uuid.uuid4().hex[:12]}", name=b.name, arguments=b.arguments,
                                cut=cut and b.size > MAX_TOOL_ARGS_CHARS))
        return out


def _get(obj: Any, key: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


# ============================================================================ error mapping

_PREFIX_RE = re.compile(r"^\s*(?:litellm\.)?[A-Za-z]*(?:Error|Exception|Timeout)\s*(?::|-)\s*")
_CUT_MARKERS = (" Original exception:", " Received Model Group=", " Available Model Group Fallbacks=",
                " LiteLLM Retried:", "\nTraceback", " Error_str:")


def _clean_detail(text: str) -> str:
    """Provider message without litellm's 'litellm.XError: XError: OpenAIException - ' wrapping."""
    s = str(text or "")
    for marker in _CUT_MARKERS:
        if marker in s:
            s = s.split(marker, 1)[0]
    for _ in range(6):
        new = _PREFIX_RE.sub("", s, count=1)
        if new == s:
            break
        s = new
    s = s.strip()
    if len(s) > 3 and s[0] == "b" and s[1] in "'\"" and s.endswith(s[1]):  # a body litellm printed as bytes
        s = s[2:-1]
    if s.startswith("{"):
        try:
            body = json.loads(s)
            err = body.get("error", body)
            if isinstance(err, dict) and err.get("message"):
                s = str(err["message"])
            elif isinstance(err, str):
                s = err
        except ValueError:
            pass
    s = " ".join(scrub.redact(s).split())
    return s if len(s) <= 200 else s[:197] + "..."


def _retry_after(e: BaseException) -> Optional[float]:
    for holder in (getattr(e, "response", None), e):
        headers = getattr(holder, "headers", None) or getattr(holder, "litellm_response_headers", None)
        if not headers:
            continue
        try:
            value = headers.get("retry-after") or headers.get("Retry-After")
        except Exception:
            continue
        if value is None:
            continue
        try:
            return max(0.0, float(value))
        except (TypeError, ValueError):
            return None
    return None


def _map_exception(e: BaseException, spec: ModelSpec) -> LLMError:
    """Any exception from litellm / the transport -> one-line LLMError (never contains the key)."""
    if isinstance(e, LLMError):
        return e
    model = spec.model
    name = type(e).__name__
    mro = {c.__name__ for c in type(e).__mro__}
    status = getattr(e, "status_code", None)
    try:
        status = int(status) if status is not None else None
    except (TypeError, ValueError):
        status = None
    raw = str(e)
    detail = _clean_detail(raw)
    low = raw.lower()

    def err(msg: str, kind: str, retryable: bool, st: Optional[int] = status) -> LLMError:
        return LLMError(msg, kind=kind, model=model, status=st, retryable=retryable, retry_after=_retry_after(e))

    if "Timeout" in mro or "APITimeoutError" in mro or "TimeoutException" in mro or "timed out" in low:
        return err(f"model {model} timed out after {spec.timeout_s:g}s", "timeout", True, None)
    if ("MidStreamFallbackError" in mro or "RemoteProtocolError" in mro or "incomplete chunked read" in low
            or "peer closed connection" in low):
        return err(f"stream from {model} was cut off mid-response ({detail})", "dropped", True, None)
    if "RateLimitError" in mro or status == 429:
        return err(f"rate limited (429) by {model}: {detail}", "rate_limit", True, 429)
    if "ContextWindowExceededError" in mro:
        return err(f"prompt too long for the context window of {model}: {detail}", "context_window", False)
    if ("AuthenticationError" in mro or status == 401 or "missing credentials" in low
            or "api_key client option must be set" in low):
        return err(f"authentication failed for {model}: {detail}", "auth", False, status or 401)
    if "PermissionDeniedError" in mro or status == 403:
        return err(f"permission denied (403) for {model}: {detail}", "auth", False)
    if "NotFoundError" in mro or status == 404:
        return err(f"model or endpoint not found (404) for {model}: {detail}", "not_found", False)
    if ("APIConnectionError" in mro or "ConnectError" in mro or "ConnectionError" in mro
            or detail.lower().rstrip(".") == "connection error"):
        # litellm reports a refused connection as InternalServerError(500, "Connection error.")
        where = f" at {spec.api_base}" if spec.api_base else ""
        return err(f"could not connect to {model}{where}: {detail or name}", "connection", True, None)
    if status is not None and status in _RETRYABLE_STATUS:
        return err(f"server error ({status}) from {model}: {detail}", "server", True)
    if "BadRequestError" in mro or "UnprocessableEntityError" in mro or status in (400, 413, 422):
        return err(f"request rejected ({status or 400}) by {model}: {detail}", "bad_request", False)
    if {"InternalServerError", "ServiceUnavailableError", "BadGatewayError"} & mro or (status or 0) >= 500:
        return err(f"server error ({status or 500}) from {model}: {detail}", "server", True)
    return err(f"{model} call failed: {name}: {detail}", "error", False)


# ============================================================================ one attempt


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


def _stream_was_truncated(resp: Any) -> bool:
    """litellm's CustomStreamWrapper synthesizes finish_reason='stop' (and a usage chunk) when a
    stream ends without one, so a body that simply stopped early looks complete.  Its private
    ``received_finish_reason`` tells the truth; if the attribute is missing we trust the stream."""
    missing = object()
    received = getattr(resp, "received_finish_reason", missing)
    if received is missing:
        return False
    return received is None and getattr(resp, "intermittent_finish_reason", None) is None


def _attempt(spec: ModelSpec, messages: list[dict], tools: Optional[list[dict]], stream: bool,
             on_text: Optional[Callable[[str], None]], cancel: Optional[threading.Event],
             cache_key: Optional[str] = None) -> Completion:
    lit = _litellm()
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

    acc = _Accumulator()
    # Backup only: litellm's own (httpx) timeout normally fires at timeout_s.  The slack covers
    # litellm's lazy imports on a process's first call, which happen inside lit.completion().
    watchdog_s = max(spec.timeout_s * 1.5, spec.timeout_s + 2.0)
    last_event = time.monotonic()
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
                piece = acc.add_chunk(payload)
                if piece and on_text is not None:
                    on_text(piece)
                if acc.calls and acc.oversized:  # left here: the call is refused whatever follows
                    return _finish(spec, messages, acc, cut=True)
            elif kind == "end":
                if _stream_was_truncated(payload):
                    raise LLMError(f"stream from {spec.model} ended without a finish reason (connection dropped?)",
                                   kind="dropped", model=spec.model, retryable=True)
                return _finish(spec, messages, acc)
            elif kind == "response":
                _fold_response(acc, payload)
                if acc.text and on_text is not None:
                    on_text(acc.text)
                return _finish(spec, messages, acc)
            elif kind == "error":
                raise _map_exception(payload, spec) from None
    finally:
        stop.set()


def _fold_response(acc: _Accumulator, resp: Any) -> None:
    choices = getattr(resp, "choices", None) or []
    if choices:
        choice = choices[0]
        acc.finish_reason = getattr(choice, "finish_reason", None)
        msg = getattr(choice, "message", None)
        if msg is not None:
            if getattr(msg, "content", None):
                acc.text_parts.append(msg.content)
            for i, tc in enumerate(getattr(msg, "tool_calls", None) or []):
                fn = _get(tc, "function")
                acc.add_tool_delta(i, _get(tc, "id"), _get(fn, "name"), _get(fn, "arguments"))
    usage = getattr(resp, "usage", None)
    if usage is not None:
        acc.usage = _usage_of(usage) or acc.usage


def _usage_of(usage: Any) -> Optional[tuple[int, int, int, int, int]]:
    """(prompt, completion, cache read, cache creation, of it for 1 hour) tokens of a provider's usage, as
    litellm maps it: Anthropic's cache_read_input_tokens / cache_creation_input_tokens (the 1-hour share in
    prompt_tokens_details.cache_creation_token_details, from Anthropic's cache_creation split), OpenAI's
    prompt_tokens_details.cached_tokens. None when the usage names no token counts."""
    pt, ct = _get(usage, "prompt_tokens"), _get(usage, "completion_tokens")
    if pt is None and ct is None:
        return None
    details = _get(usage, "prompt_tokens_details")
    read = _get(usage, "cache_read_input_tokens")
    if not read:
        read = _get(details, "cached_tokens")
    created = _get(usage, "cache_creation_input_tokens")
    hour = _get(_get(details, "cache_creation_token_details"), "ephemeral_1h_input_tokens")
    if hour is None:
        hour = _get(_get(usage, "cache_creation"), "ephemeral_1h_input_tokens")
    created = int(created or 0)
    return int(pt or 0), int(ct or 0), int(read or 0), created, min(int(hour or 0), created)


def _finish(spec: ModelSpec, messages: list[dict], acc: _Accumulator, cut: bool = False) -> Completion:
    calls = acc.tool_calls(cut)
    text = acc.text
    estimated = acc.usage is None
    cache_read = cache_creation = hour = 0
    if acc.usage is not None:
        tokens_in, tokens_out, cache_read, cache_creation, hour = acc.usage
    else:
        tokens_in = count_tokens(spec.model, messages=messages)
        tokens_out = count_tokens(spec.model, text=text + "".join(c.name + c.arguments for c in calls))
    cost = _cost(spec.model, tokens_in, tokens_out, cache_read, cache_creation, hour)
    return Completion(text=text, tool_calls=calls, model=spec.model, tokens_in=tokens_in, tokens_out=tokens_out,
                      latency_s=0.0, cost_usd=cost,
                      finish_reason=acc.finish_reason, tokens_estimated=estimated, cache_read_tokens=cache_read,
                      cache_creation_tokens=cache_creation, cache_creation_1h_tokens=hour)


# ============================================================================ public entry


def _chain(spec: ModelSpec) -> list[ModelSpec]:
    out = [spec]
    for fb in spec.fallbacks:
        if isinstance(fb, ModelSpec):
            out.append(fb)
            continue
        # The endpoint and key variable belong to a provider: another provider's fallback uses its own
        # defaults (its usual key variable), never this one's key or base URL.
        same = shares_endpoint(spec.model, fb)
        out.append(ModelSpec(model=fb, api_base=spec.api_base if same else None,
                             api_key_env=spec.api_key_env if same else None,
                             timeout_s=spec.timeout_s, max_retries=spec.max_retries,
                             backoff_s=spec.backoff_s, extra_params=dict(spec.extra_params),
                             cache_ttl=spec.cache_ttl))
    return out


def _backoff_delay(spec: ModelSpec, retry_index: int, error: LLMError) -> float:
    delay = spec.backoff_s * (2 ** retry_index) * random.uniform(0.8, 1.2)
    if error.retry_after is not None:
        delay = max(delay, error.retry_after)
    return max(0.0, min(delay, MAX_BACKOFF_S))


def complete(
    spec: ModelSpec,
    messages: list[dict],
    tools: Optional[list[dict]] = None,
    *,
    stream: bool = True,
    on_text: Optional[Callable[[str], None]] = None,
    cancel: Optional[threading.Event] = None,
    on_retry: Optional[Callable[[str], None]] = None,
    cache_key: Optional[str] = None,
) -> Completion:
    """Call the model (streaming by default) and return the complete answer.

    ``cache_key`` names the conversation (the session id) for providers whose prompt cache is routed by
    a key (OpenAI's ``prompt_cache_key``); Claude models get cache breakpoints whatever it is.

    ``on_text(fragment)`` receives text as it streams (non-streaming: once, the whole text).
    ``on_retry(reason)`` is called before each retry / fallback; text already delivered through
    ``on_text`` belonged to the abandoned attempt and should be discarded by the caller (the next
    attempt streams from scratch).  Raises ``LLMCancelled`` when ``cancel`` is set, ``LLMError``
    when every attempt of every model failed -- never returns a truncated answer.
    """
    started = time.monotonic()
    attempts = 0
    failures: list[LLMError] = []
    chain = _chain(spec)
    for position, current in enumerate(chain):
        error: Optional[LLMError] = None
        for retry_index in range(max(0, current.max_retries) + 1):
            if cancel is not None and cancel.is_set():
                raise LLMCancelled(f"request to {current.model} cancelled", model=current.model)
            attempts += 1
            try:
                result = _attempt(current, messages, tools, stream, on_text, cancel, cache_key)
            except LLMCancelled:
                raise
            except LLMError as e:
                error = e
            else:
                result.latency_s = time.monotonic() - started
                result.attempts = attempts
                return result
            if not error.retryable or retry_index >= current.max_retries:
                break
            delay = _backoff_delay(current, retry_index, error)
            reason = f"{error}; retrying in {delay:.1f}s (attempt {retry_index + 2}/{current.max_retries + 1})"
            log.warning("%s", reason)
            if on_retry is not None:
                on_retry(reason)
            if cancel is not None:
                if cancel.wait(delay):
                    raise LLMCancelled(f"request to {current.model} cancelled", model=current.model)
            else:
                time.sleep(delay)
        assert error is not None
        failures.append(error)
        if position + 1 < len(chain):
            reason = f"{error}; falling back to {chain[position + 1].model}"
            log.warning("%s", reason)
            if on_retry is not None:
                on_retry(reason)
    if len(failures) == 1:
        raise failures[0]
    last = failures[-1]
    raise LLMError("all models failed: " + "; ".join(str(f) for f in failures), kind=last.kind,
                   model=last.model, status=last.status, retryable=last.retryable)
