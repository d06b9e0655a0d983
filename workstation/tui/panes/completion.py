"""What the prompt completes: a slash command at the start of the line, a file path after `@`.

`@pkg/co` is completed from the indexed paths: to the longest prefix the matching paths share, or,
when they share no more than was typed, to the first one's next folder or its whole name (right
arrow accepts, as for commands). The hints under the prompt list the paths that hold what was
typed anywhere (`@core.py` finds `pkg/core.py`), since a completion can only extend the line.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

from textual.suggester import Suggester

_AT_FILE = re.compile(r"(?:^|\s)@([^\s@]*)$")


def file_token(value: str) -> str | None:
    """The path being typed after an `@` at the end of the line ('' just after the @); None if none is."""
    found = _AT_FILE.search(value)
    return None if found is None else found.group(1)


def complete_path(paths: Sequence[str], typed: str) -> str | None:
    """What `typed` completes to among the sorted `paths` (None: nothing longer matches)."""
    start = bisect.bisect_left(paths, typed)
    end = bisect.bisect_left(paths, typed + "\U0010ffff", start)
    if start == end:
        return None
    first, last = paths[start], paths[end - 1]
    shared = len(typed)
    while shared < min(len(first), len(last)) and first[shared] == last[shared]:
        shared += 1
    if shared > len(typed):
        return first[:shared]
    slash = first.find("/", len(typed))
    return first if slash < 0 else first[: slash + 1]


def path_hints(paths: Sequence[str], typed: str, limit: int) -> list[str]:
    """Up to `limit` paths for the hints: those starting with `typed`, then those holding it elsewhere."""
    lowered = typed.casefold()
    starting = [p for p in paths if p.casefold().startswith(lowered)]
    if len(starting) >= limit:
        return starting[:limit]
    holding = [p for p in paths if lowered in p.casefold() and not p.casefold().startswith(lowered)]
    return (starting + holding)[:limit]


class PromptSuggester(Suggester):
    """Slash commands (case-insensitive) and `@` paths, for the chat's prompt."""

    def __init__(self, commands: Sequence[str] = (), paths: Sequence[str] = ()) -> None:
        super().__init__(use_cache=False, case_sensitive=True)  # the paths change as files do
        self.commands = list(commands)
        self.paths = sorted(paths)

    async def get_suggestion(self, value: str) -> str | None:
        if value.startswith("/") and " " not in value:
            typed = value.casefold()
            return next((c for c in self.commands if c.casefold().startswith(typed)), None)
        typed = file_token(value)
        if typed is None:
            return None
        completed = complete_path(self.paths, typed)
        return None if completed is None else value[: len(value) - len(typed)] + completed
