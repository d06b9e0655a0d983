"""What a model call returns: the answer's text and tool calls, its usage and cost."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

from .errors import LLMError

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
