"""The one size rule of compaction: how big the next request will be as sent, before anything is trimmed.

The agent (before every request), its sub-agents and the sidecar (between passes) decide with the same
numbers. A request is what agent.prompt.build sends: the tool schemas, the epoch's head (its system
message, then the summary in force) and the turns since, each message counted as its text plus
MESSAGE_OVERHEAD. From the log alone (the epoch record holds the head and the tool schemas as sent), so a
process that never sent the request, the sidecar, measures it as the agent would.

Compaction is due once that size passes `memory.compact_token_ratio` of the window; the request no longer
fits once it passes the window less the room kept for the reply (`budget`). Where the ratio sits above the
budget (small windows), the agent compacts before it would trim, whatever the ratio says.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from .modelview import as_sent, assemble, current_epoch, seen
from .log import LogView, TokenCounter, default_counter
from .records import Epoch

if TYPE_CHECKING:
    from ..config import Config

MESSAGE_OVERHEAD = 4  # tokens a chat message costs beyond its text (role and separators)
REPLY_RESERVE_MAX = 4096


def reply_reserve(window: int) -> int:
    """Tokens of the window kept for the model's reply."""
    return min(REPLY_RESERVE_MAX, max(256, window // 4))


def budget(window: int) -> int:
    """The most a request may hold in a `window`: beyond it, turns are trimmed (agent.prompt.build)."""
    return window - reply_reserve(window)


def due_at(config: Config, window: int) -> float:
    """The request size from which a compaction is due: memory.compact_token_ratio of the window."""
    return config.memory.compact_token_ratio * window


def message_tokens(message: dict, count: Callable[[str], int]) -> int:
    """One message of a request: its text, its tool calls' names and arguments, and MESSAGE_OVERHEAD."""
    total = count(str(message.get("content") or "")) + MESSAGE_OVERHEAD
    for call in message.get("tool_calls") or ():
        total += count(call["function"]["name"] + call["function"]["arguments"])
    return total


def epoch_for(view: LogView) -> Epoch | None:
    """The epoch the next request's head comes from: the one in force, else (a compaction came since and no
    request was sent after it) the newest, whose system message the next epoch will mostly repeat."""
    model_view = seen(view)
    epoch = current_epoch(model_view)
    if epoch is None:
        epoch = next((r for r in reversed(model_view.records) if isinstance(r, Epoch)), None)
    return epoch


@dataclass(frozen=True)
class RequestSize:
    tools: int  # the tool schemas
    head: int  # the epoch's system message and the summary in force
    turns: int  # everything after the head

    @property
    def total(self) -> int:
        return self.tools + self.head + self.turns


def request_size(view: LogView, config: Config, *, counter: TokenCounter | None = None) -> RequestSize:
    """The next request as sent, untrimmed: tool schemas, head (summary included) and turns (see the module
    docstring). A log without an epoch (nothing sent yet, or an imported session) counts its turns and the
    summary in force only."""
    counter = counter or default_counter()
    epoch = epoch_for(view)
    if epoch is None:
        ctxview = assemble(view, config, counter=counter)
        head_len = 1 if ctxview.summary_id else 0
        return RequestSize(0, sum(message_tokens(m, counter) for m in ctxview.messages[:head_len]),
                           sum(message_tokens(m, counter) for m in ctxview.messages[head_len:]))
    _, head, body = as_sent(view, config, epoch=epoch, counter=counter)
    schemas = epoch.tool_schemas
    return RequestSize(counter(json.dumps(schemas)) if schemas else 0, sum(message_tokens(m, counter) for m in head),
                       sum(message_tokens(m, counter) for m in body))


def limit(config: Config, window: int) -> float:
    """The size at which a compaction is due: the ratio of the window, or the budget when that is lower (a
    request is never trimmed while a compaction could make it fit)."""
    return min(due_at(config, window), budget(window))
