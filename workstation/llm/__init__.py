"""The only package that talks to language models (through litellm).

Modules: ``retry`` (:func:`complete`: retries, backoff, fallbacks), ``attempt`` (one HTTP attempt: the request
with its key and cache rule, the worker thread, cancel and watchdog), ``stream`` (chunks folded into one
answer), ``usage`` (tokens, context windows, cost), ``errors`` (LLMError and the mapping of litellm's
exceptions), ``result`` (ToolCall, Completion), ``client`` (litellm's lazy import and configuration).

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

from ..providers import CACHE_TTLS, ModelSpec  # noqa: E402
from .client import warm_import  # noqa: E402
from .errors import LLMCancelled, LLMError  # noqa: E402
from .result import MAX_TOOL_ARGS_CHARS, Completion, ToolCall  # noqa: E402
from .retry import MAX_BACKOFF_S, complete, model_chain  # noqa: E402
from .usage import DEFAULT_CONTEXT_WINDOW, context_window, count_tokens, set_context_window  # noqa: E402

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
    "MAX_TOOL_ARGS_CHARS",
    "MAX_BACKOFF_S",
    "model_chain",
]
