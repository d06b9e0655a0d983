"""The errors of a model call, and the mapping of whatever litellm or the transport raised to one of them."""

from __future__ import annotations

import json
import re
from typing import Optional

from .. import scrub
from ..providers import ModelSpec

_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})


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


def map_exception(e: BaseException, spec: ModelSpec) -> LLMError:
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
