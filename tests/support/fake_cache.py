"""The prompt-cache accounting of the fake providers (tests/support/fakellm.py): pure bookkeeping, no I/O.

Both caches count tokens with a real tokenizer, cl100k (workstation.tokens), over a canonical
serialization of the request: each item (a tool schema, a message, a content block) is written as JSON
with sorted keys and no spaces, its `cache_control` markers left out (a marker is where a prefix ends,
not part of it), and tokenized alone; the request's tokens are the items' tokens in order (tools, then
system, then messages). Tokenizing item by item keeps a shared prefix of items a shared prefix of
tokens. The figures are deterministic; they are not the provider's own tokenizer's counts.

Time is a `Clock` that moves only when a test says so (`advance`), so TTLs are tested without waiting.

OpenAI (`OpenAIPrefixCache`), as documented for automatic prompt caching: a request of at least
`min_tokens` (1,024) tokens is served the longest prefix that an earlier request of the same model and
the same `prompt_cache_key` (requests without a key share one pool) already sent, in whole steps of
`step` (128) tokens, and only when that prefix is itself at least `min_tokens` long; reported as
`usage.prompt_tokens_details.cached_tokens`. Every 128-token boundary of a request of at least
`min_tokens` is remembered for `ttl_s` (10 minutes), refreshed whenever it is served again.

Anthropic (`AnthropicPromptCache`), as documented for prompt caching:
* Blocks in order: each tool schema, each system block (a string system is one block), each content
  block of each message (a string content is one block). A `cache_control` on a tool, a block, or a
  block nested in a `tool_result` marks the end of a prefix: a *breakpoint*. At most 4 (more: error),
  and a breakpoint with a longer TTL may not follow one with a shorter TTL (error), as the API answers.
* A prefix is identified by the exact bytes of every block up to and including its last one (and the
  model). For each breakpoint the service checks the prefix ending there and those ending at each of the
  `lookback` (20) blocks before it, nearest first, for a live cache entry; the longest prefix found over
  all breakpoints is read from the cache (`cache_read_input_tokens`) and its entry's TTL refreshed.
* Then each breakpoint's prefix of at least `min_tokens` (1,024 by default; set per server) becomes an
  entry with that breakpoint's TTL (5 minutes, or 1 hour for `"ttl": "1h"`); the tokens between the
  read prefix (or the previous breakpoint) and a breakpoint past it are written
  (`cache_creation_input_tokens`, split by TTL in `cache_creation.ephemeral_5m_input_tokens` and
  `ephemeral_1h_input_tokens`). Entries are only ever made at breakpoints; a shorter prefix is never
  written and so never read (no error: the usage just shows no cache).
* `input_tokens` is the rest: total - read - written.
* Not modelled: a top-level `cache_control` (automatic caching), other request fields (tool_choice,
  thinking) in the prefix's identity, and any leniency of the real service about equivalent JSON (a
  string content and the same text as one text block are different bytes here).
"""

from __future__ import annotations

import hashlib
import json
import threading
from array import array
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Optional

__all__ = ["Clock", "OpenAIPrefixCache", "AnthropicPromptCache", "AnthropicUsage", "CacheError",
           "canonical", "count_tokens", "anthropic_blocks", "openai_items"]

TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


class CacheError(ValueError):
    """A request the real API would refuse (HTTP 400) for its cache markers."""


class Clock:
    """Seconds that pass only when `advance` says so."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = float(start)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += float(seconds)


def canonical(item: Any) -> str:
    """`item` as JSON with sorted keys and no spaces, every `cache_control` key left out."""
    return json.dumps(_without_markers(item), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _without_markers(item: Any) -> Any:
    if isinstance(item, dict):
        return {k: _without_markers(v) for k, v in item.items() if k != "cache_control"}
    if isinstance(item, list):
        return [_without_markers(v) for v in item]
    return item


@lru_cache(maxsize=8192)
def _encode(text: str) -> tuple[int, ...]:
    from workstation.tokens import encoding  # lazy: builds the encoding once

    return tuple(encoding().encode_ordinary(text))


def count_tokens(text: str) -> int:
    return len(_encode(text)) if text else 0


# --------------------------------------------------------------------------- OpenAI


def openai_items(body: dict) -> list[str]:
    """The request as canonical items: each tool, then each message."""
    return [canonical(t) for t in body.get("tools") or ()] + [canonical(m) for m in body.get("messages") or ()]


class OpenAIPrefixCache:
    def __init__(self, clock: Callable[[], float], *, min_tokens: int = 1024, step: int = 128,
                 ttl_s: float = 600.0) -> None:
        self.clock, self.min_tokens, self.step, self.ttl_s = clock, min_tokens, step, ttl_s
        self._pools: dict[tuple[str, Optional[str]], dict[bytes, float]] = {}
        self._lock = threading.Lock()

    def account(self, body: dict) -> tuple[int, int]:
        """(prompt tokens, cached tokens) of this request; remembers its prefixes."""
        tokens: list[int] = []
        for item in openai_items(body):
            tokens.extend(_encode(item))
        total = len(tokens)
        if total < self.min_tokens:
            return total, 0
        digests = []
        h = hashlib.sha256()
        for start in range(0, total - total % self.step, self.step):
            h.update(array("I", tokens[start:start + self.step]).tobytes())
            digests.append(h.copy().digest())
        key = (str(body.get("model", "")), body.get("prompt_cache_key"))
        now = self.clock()
        with self._lock:
            pool = self._pools.setdefault(key, {})
            cached = 0
            for n, digest in enumerate(digests, start=1):
                if pool.get(digest, -1.0) <= now:
                    break
                cached = n * self.step
            if cached < self.min_tokens:
                cached = 0
            for digest in digests:
                pool[digest] = now + self.ttl_s
        return total, cached


# --------------------------------------------------------------------------- Anthropic


@dataclass
class AnthropicUsage:
    input_tokens: int  # neither read from nor written to the cache
    cache_read_input_tokens: int
    cache_creation_5m: int
    cache_creation_1h: int

    @property
    def cache_creation_input_tokens(self) -> int:
        return self.cache_creation_5m + self.cache_creation_1h

    @property
    def total(self) -> int:
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens

    def as_usage(self, output_tokens: int) -> dict:
        return {"input_tokens": self.input_tokens, "output_tokens": output_tokens,
                "cache_read_input_tokens": self.cache_read_input_tokens,
                "cache_creation_input_tokens": self.cache_creation_input_tokens,
                "cache_creation": {"ephemeral_5m_input_tokens": self.cache_creation_5m,
                                   "ephemeral_1h_input_tokens": self.cache_creation_1h}}


def _marker(block: Any) -> Optional[dict]:
    """The cache_control of a block, or of the last block nested in its content that has one."""
    if not isinstance(block, dict):
        return None
    found = block.get("cache_control") if isinstance(block.get("cache_control"), dict) else None
    content = block.get("content")
    if isinstance(content, list):
        for inner in content:
            if isinstance(inner, dict) and isinstance(inner.get("cache_control"), dict):
                found = inner["cache_control"]
    return found


def anthropic_blocks(body: dict) -> list[tuple[str, Optional[dict]]]:
    """(canonical text, cache_control or None) of every block, in cache order: tools, system, messages."""
    out: list[tuple[str, Optional[dict]]] = []
    for tool in body.get("tools") or ():
        out.append((canonical({"tool": tool}), _marker(tool)))
    system = body.get("system")
    if isinstance(system, str) and system:
        out.append((canonical({"system": {"type": "text", "text": system}}), None))
    elif isinstance(system, list):
        out.extend((canonical({"system": b}), _marker(b)) for b in system)
    for message in body.get("messages") or ():
        role, content = message.get("role"), message.get("content")
        if isinstance(content, str):
            out.append((canonical({"role": role, "content": content}), None))
        else:
            out.extend((canonical({"role": role, "block": b}), _marker(b)) for b in content or ())
    return out


@dataclass
class _Entry:
    expires: float
    ttl_s: float


class AnthropicPromptCache:
    def __init__(self, clock: Callable[[], float], *, min_tokens: int = 1024, lookback: int = 20) -> None:
        self.clock, self.min_tokens, self.lookback = clock, min_tokens, lookback
        self._pools: dict[str, dict[bytes, _Entry]] = {}
        self._lock = threading.Lock()

    def account(self, body: dict) -> AnthropicUsage:
        """The usage of this request (CacheError for markers the API refuses); updates the cache."""
        blocks = anthropic_blocks(body)
        ends: list[int] = []  # tokens up to and including block i
        digests: list[bytes] = []
        h = hashlib.sha256()
        running = 0
        for text, _ in blocks:
            running += count_tokens(text)
            ends.append(running)
            h.update(text.encode() + b"\x00")
            digests.append(h.copy().digest())
        points = [(i, _ttl_of(marker)) for i, (_, marker) in enumerate(blocks) if marker is not None]
        if len(points) > 4:
            raise CacheError(f"A maximum of 4 blocks with cache_control may be provided. Found {len(points)}.")
        for (_, earlier), (_, later) in zip(points, points[1:]):
            if later > earlier:
                raise CacheError("a cache_control block with a longer ttl must come before any with a shorter ttl")
        now = self.clock()
        with self._lock:
            pool = self._pools.setdefault(str(body.get("model", "")), {})
            read_at = -1
            for i, _ in points:
                for j in range(i, max(-1, i - self.lookback - 1), -1):
                    entry = pool.get(digests[j])
                    if entry is not None and entry.expires > now:
                        read_at = max(read_at, j)
                        break
            if read_at >= 0:
                hit = pool[digests[read_at]]
                hit.expires = now + hit.ttl_s
            read = ends[read_at] if read_at >= 0 else 0
            covered, written = read, {300.0: 0, 3600.0: 0}
            for i, ttl in points:
                if ends[i] < self.min_tokens:
                    continue
                if ends[i] > covered:
                    written[ttl] += ends[i] - covered
                    covered = ends[i]
                known = pool.get(digests[i])
                ttl = max(ttl, known.ttl_s if known is not None and known.expires > now else 0.0)
                pool[digests[i]] = _Entry(now + ttl, ttl)
        return AnthropicUsage(input_tokens=running - covered, cache_read_input_tokens=read,
                              cache_creation_5m=written[300.0], cache_creation_1h=written[3600.0])


def _ttl_of(marker: dict) -> float:
    ttl = marker.get("ttl", "5m")
    if ttl not in TTL_SECONDS:
        raise CacheError(f"cache_control.ttl: expected '5m' or '1h', got {ttl!r}")
    return TTL_SECONDS[ttl]
