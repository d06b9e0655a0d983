"""The public entry: retries with backoff, then the spec's fallbacks in order."""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Callable, Optional

from ..providers import ModelSpec, shares_endpoint
from .attempt import run_attempt
from .errors import LLMCancelled, LLMError
from .result import Completion

log = logging.getLogger("workstation.llm")

MAX_BACKOFF_S = 30.0  # cap for one backoff sleep (also caps a server's Retry-After)


def model_chain(spec: ModelSpec) -> list[ModelSpec]:
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
    chain = model_chain(spec)
    for position, current in enumerate(chain):
        error: Optional[LLMError] = None
        for retry_index in range(max(0, current.max_retries) + 1):
            if cancel is not None and cancel.is_set():
                raise LLMCancelled(f"request to {current.model} cancelled", model=current.model)
            attempts += 1
            try:
                result = run_attempt(current, messages, tools, stream, on_text, cancel, cache_key)
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
