"""The fake providers' prompt-cache accounting (tests/support/fake_cache.py) against hand-computed cases.

Token counts come from the documented serialization (one canonical JSON item per tool, message or
block, cl100k); each expected figure below is worked out from those counts by the provider's rule."""

from __future__ import annotations

import pytest

from support.fake_cache import (AnthropicPromptCache, CacheError, Clock, OpenAIPrefixCache, anthropic_blocks, canonical,
                        count_tokens, openai_items)

CC = {"type": "ephemeral"}
CC_1H = {"type": "ephemeral", "ttl": "1h"}


def words(tag: str, n: int) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def tokens_of_openai(body: dict) -> int:
    return sum(count_tokens(item) for item in openai_items(body))


# --------------------------------------------------------------------------- OpenAI


def test_openai_counts_items_in_order_and_ignores_markers() -> None:
    body = {"model": "m", "tools": [{"type": "function", "function": {"name": "t"}}], "messages": [user("hi")]}
    assert openai_items(body) == ['{"function":{"name":"t"},"type":"function"}', '{"content":"hi","role":"user"}']
    assert canonical({"b": 1, "a": [{"cache_control": CC, "x": 2}]}) == '{"a":[{"x":2}],"b":1}'


def test_openai_below_1024_tokens_nothing_is_cached() -> None:
    cache = OpenAIPrefixCache(Clock())
    body = {"model": "m", "messages": [user(words("w", 300))]}
    total = tokens_of_openai(body)
    assert 600 < total < 1024
    assert cache.account(body) == (total, 0)
    assert cache.account(body) == (total, 0)  # the same request again: still too short to cache


def test_openai_serves_the_longest_seen_prefix_in_128_token_steps() -> None:
    cache = OpenAIPrefixCache(Clock())
    n = 700
    while True:  # a request whose last partial step is over half a step: 64-token steps would differ
        first = {"model": "m", "messages": [{"role": "system", "content": words("s", n)}, user("task")]}
        total = tokens_of_openai(first)
        if total % 128 > 64:
            break
        n += 7
    assert total > 1024
    assert cache.account(first) == (total, 0)
    assert cache.account(first) == (total, total - total % 128)  # whole 128-token steps only
    longer = {"model": "m", "messages": first["messages"] + [{"role": "assistant", "content": words("a", 400)}]}
    longer_total = tokens_of_openai(longer)
    assert cache.account(longer) == (longer_total, total - total % 128)  # the first request is its prefix
    assert cache.account(longer) == (longer_total, longer_total - longer_total % 128)
    other = {"model": "m", "messages": [{"role": "system", "content": "different " + words("s", 700)}, user("task")]}
    assert cache.account(other)[1] == 0


def test_openai_a_shared_prefix_below_1024_tokens_is_not_served() -> None:
    cache = OpenAIPrefixCache(Clock())
    head = [{"role": "system", "content": words("s", 250)}]
    assert 500 < tokens_of_openai({"messages": head}) < 896
    cache.account({"model": "m", "messages": head + [user(words("x", 900))]})
    assert cache.account({"model": "m", "messages": head + [user(words("y", 900))]})[1] == 0


def test_openai_prompt_cache_key_separates_pools() -> None:
    cache = OpenAIPrefixCache(Clock())
    messages = [{"role": "system", "content": words("s", 900)}]
    total = tokens_of_openai({"messages": messages})
    step = total - total % 128

    def body(key):
        return {"model": "m", "messages": messages, **({"prompt_cache_key": key} if key else {})}

    assert cache.account(body("session-1"))[1] == 0
    assert cache.account(body("session-2"))[1] == 0  # another key: another cache
    assert cache.account(body(None))[1] == 0  # no key: a pool of its own
    assert cache.account(body("session-1"))[1] == step
    assert cache.account({**body("session-1"), "model": "other"})[1] == 0  # per model too


def test_openai_entries_expire_unless_used() -> None:
    clock = Clock()
    cache = OpenAIPrefixCache(clock, ttl_s=600)
    body = {"model": "m", "messages": [{"role": "system", "content": words("s", 900)}]}
    cache.account(body)
    clock.advance(599)
    assert cache.account(body)[1] > 0  # refreshed at 599
    clock.advance(599)
    assert cache.account(body)[1] > 0
    clock.advance(601)
    assert cache.account(body)[1] == 0


# --------------------------------------------------------------------------- Anthropic


SYSTEM = words("s", 1200)  # about 2,400 tokens: over every minimum used here


def ant(system: list[dict], messages: list[dict], tools: list[dict] | None = None, model: str = "claude") -> dict:
    body = {"model": model, "system": system, "messages": messages}
    if tools:
        body["tools"] = tools
    return body


def block_tokens(body: dict) -> list[int]:
    return [count_tokens(text) for text, _ in anthropic_blocks(body)]


def text(t: str, marker: dict | None = None) -> dict:
    return {"type": "text", "text": t, **({"cache_control": marker} if marker else {})}


def usage(u) -> tuple[int, int, int, int]:
    return u.input_tokens, u.cache_read_input_tokens, u.cache_creation_5m, u.cache_creation_1h


def test_anthropic_blocks_in_cache_order() -> None:
    body = ant([text("S", CC)], [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": [text("out", CC)]}, text("note")]}],
        tools=[{"name": "read", "input_schema": {}, "cache_control": CC}])
    blocks = anthropic_blocks(body)
    assert [b[0] for b in blocks] == [
        '{"tool":{"input_schema":{},"name":"read"}}', '{"system":{"text":"S","type":"text"}}',
        '{"block":{"content":[{"text":"out","type":"text"}],"tool_use_id":"t1","type":"tool_result"},"role":"user"}',
        '{"block":{"text":"note","type":"text"},"role":"user"}']
    assert [b[1] for b in blocks] == [CC, CC, CC, None]  # a marker nested in a tool_result marks that block


def test_anthropic_write_then_read_then_grow() -> None:
    cache = AnthropicPromptCache(Clock())
    first = ant([text(SYSTEM, CC)], [{"role": "user", "content": [text("task one", CC)]}])
    s, u1 = block_tokens(first)
    assert usage(cache.account(first)) == (0, 0, s + u1, 0)  # both breakpoints written
    assert usage(cache.account(first)) == (0, s + u1, 0, 0)  # the same bytes: all read
    grown = ant([text(SYSTEM, CC)], [{"role": "user", "content": [text("task one")]},
                                     {"role": "assistant", "content": [text("done, next?")]},
                                     {"role": "user", "content": [text("task two", CC)]}])
    _, _, a, u2 = block_tokens(grown)
    # the breakpoint on "task two" looks back two blocks and finds the prefix ending at "task one"
    assert usage(cache.account(grown)) == (0, s + u1, a + u2, 0)
    assert usage(cache.account(grown)) == (0, s + u1 + a + u2, 0, 0)


def test_anthropic_changed_system_invalidates_everything_after_the_tools() -> None:
    cache = AnthropicPromptCache(Clock())
    tools = [{"name": "read", "description": words("d", 600), "input_schema": {}, "cache_control": CC}]
    first = ant([text(SYSTEM, CC)], [{"role": "user", "content": [text("task", CC)]}], tools)
    t, s, u = block_tokens(first)
    assert usage(cache.account(first)) == (0, 0, t + s + u, 0)
    changed = ant([text(SYSTEM + " plus a decision", CC)], [{"role": "user", "content": [text("task", CC)]}], tools)
    _, s2, _ = block_tokens(changed)
    assert usage(cache.account(changed)) == (0, t, s2 + u, 0)  # only the tools' prefix is left
    other_tools = [{**tools[0], "description": "changed"}]
    again = ant([text(SYSTEM + " plus a decision", CC)], [{"role": "user", "content": [text("task", CC)]}], other_tools)
    assert cache.account(again).cache_read_input_tokens == 0  # a changed tool changes every prefix


def test_anthropic_lookback_reaches_20_blocks() -> None:
    cache = AnthropicPromptCache(Clock())
    cache.account(ant([text(SYSTEM, CC)], [{"role": "user", "content": [text("start", CC)]}]))

    def later(extra: int, second_marker: bool) -> dict:
        blocks = [text("start", CC if second_marker else None)] + [text(f"step {i}") for i in range(extra)]
        blocks[-1] = {**blocks[-1], "cache_control": CC}
        return ant([text(SYSTEM, CC)], [{"role": "user", "content": blocks}])

    near = later(20, False)  # "start" is the 20th block before the last: found
    sizes = block_tokens(near)
    assert cache.account(near).cache_read_input_tokens == sizes[0] + sizes[1]
    cache = AnthropicPromptCache(Clock())
    cache.account(ant([text(SYSTEM, CC)], [{"role": "user", "content": [text("start", CC)]}]))
    far = later(21, False)  # 21 blocks back: out of reach, only the system breakpoint hits
    sizes = block_tokens(far)
    assert usage(cache.account(far)) == (0, sizes[0], sum(sizes[1:]), 0)
    cache = AnthropicPromptCache(Clock())
    cache.account(ant([text(SYSTEM, CC)], [{"role": "user", "content": [text("start", CC)]}]))
    marked = later(21, True)  # a breakpoint kept on the old end finds it exactly
    sizes = block_tokens(marked)
    assert usage(cache.account(marked)) == (0, sizes[0] + sizes[1], sum(sizes[2:]), 0)


def test_anthropic_minimum_cacheable_prefix() -> None:
    short = ant([text(words("s", 250), CC)], [{"role": "user", "content": [text("hi")]}])
    total = sum(block_tokens(short))
    assert 500 < total < 1024
    cache = AnthropicPromptCache(Clock())
    assert usage(cache.account(short)) == (total, 0, 0, 0)  # below the minimum: nothing written, no error
    assert usage(cache.account(short)) == (total, 0, 0, 0)
    body = ant([text(SYSTEM, CC)], [{"role": "user", "content": [text("hi")]}])
    s, u = block_tokens(body)
    assert 1024 < s < 4096
    strict = AnthropicPromptCache(Clock(), min_tokens=4096)
    assert usage(strict.account(body)) == (s + u, 0, 0, 0)
    assert usage(AnthropicPromptCache(Clock(), min_tokens=1024).account(body)) == (u, 0, s, 0)


def test_anthropic_ttl_expires_and_a_hit_refreshes_it() -> None:
    clock = Clock()
    cache = AnthropicPromptCache(clock)
    body = ant([text(SYSTEM, CC)], [{"role": "user", "content": [text("hi")]}])
    s, u = block_tokens(body)
    cache.account(body)
    clock.advance(299)
    assert usage(cache.account(body)) == (u, s, 0, 0)  # read: refreshed for 5 more minutes
    clock.advance(299)
    assert usage(cache.account(body)) == (u, s, 0, 0)  # 598 s after the write, 299 after the hit
    clock.advance(301)
    assert usage(cache.account(body)) == (u, 0, s, 0)  # expired: written again

    # a hit found by looking back (no breakpoint there any more) refreshes that entry too
    clock.advance(1000)
    cache.account(body)  # the system prefix written again
    for k in range(3):  # 897 s later it is still served: each hit gave it 5 more minutes
        clock.advance(299)
        moved = ant([text(SYSTEM)], [{"role": "user", "content": [text(f"hi {k}", CC)]}])
        assert usage(cache.account(moved)) == (0, s, block_tokens(moved)[1], 0)


def test_anthropic_one_hour_breakpoints() -> None:
    clock = Clock()
    cache = AnthropicPromptCache(clock)
    body = ant([text(SYSTEM, CC_1H)], [{"role": "user", "content": [text(words("u", 700), CC)]}])
    s, u = block_tokens(body)
    assert usage(cache.account(body)) == (0, 0, u, s)  # each segment at its breakpoint's ttl
    clock.advance(1800)
    assert usage(cache.account(body)) == (0, s, u, 0)  # the 5-minute entry is gone, the hour is not
    with pytest.raises(CacheError, match="longer ttl"):
        cache.account(ant([text(SYSTEM, CC)], [{"role": "user", "content": [text("x", CC_1H)]}]))


def test_anthropic_at_most_four_breakpoints() -> None:
    cache = AnthropicPromptCache(Clock())
    blocks = [text(f"b{i}", CC) for i in range(4)]
    cache.account(ant([text(SYSTEM, CC)], [{"role": "user", "content": blocks[:3]}]))
    with pytest.raises(CacheError, match="maximum of 4"):
        cache.account(ant([text(SYSTEM, CC)], [{"role": "user", "content": blocks}]))
