"""Plain data the panes display: what the core hands down to the TUI.

No textual import here, so an adapter in the core's process can build these
cheaply. Every pane method that takes one of these also takes a mapping with
the same keys (`coerce`), e.g. a DuckDB row fetched as a dict.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, TypeVar

T = TypeVar("T")

# Roles a transcript turn may have; anything else is refused.
TURN_ROLES = frozenset(
    {"user", "assistant", "tool", "system", "command", "notice", "error", "compaction", "redaction"}
)
FRESHNESS_STATES = frozenset({"fresh", "stale", "indexing", "deleted", "unknown"})
MEMORY_TIERS = ("stm", "ltm", "episodic")


@dataclass(slots=True)
class Turn:
    """One turn of a conversation as the transcript shows it.

    role: user | assistant (markdown) | tool (a call and its result) | system |
    command (a slash command's output, shown verbatim) | notice | error |
    compaction (marker: `text` says what was compacted, `result` holds the
    summary) | redaction (marker: `text` is the marker the model saw).
    A tool turn's `text` is the call in one short line (its tool's label) and
    `outcome` what it came to; a user turn's `number` is its turn number
    (sessions.turns, what /rewind takes); `taken_back` says what took a turn
    back (a rewind, an undo), and the transcript dims it.
    """

    role: str
    text: str = ""
    id: str = ""  # the record id in the session log; used to jump to a turn
    ts: float | None = None  # epoch seconds
    tokens: int | None = None
    tool: str = ""  # role=tool: tool name
    args: Any = None  # role=tool: arguments (dict or str)
    result: str = ""  # role=tool: result text; role=compaction: the summary
    ok: bool = True  # role=tool: outcome
    diff: str = ""  # role=tool: the unified diff of what the call changed (shown coloured when expanded)
    outcome: str = ""  # role=tool: what the call came to, in a few words ("+3 −1", "exit 1: …")
    number: int | None = None  # role=user: the turn's number (sessions.turns), None for a slash command
    taken_back: str = ""  # what took this turn back ("taken back by /rewind 3"); "" while it stands

    def __post_init__(self) -> None:
        if self.role not in TURN_ROLES:
            raise ValueError(f"turn role {self.role!r} is not one of {', '.join(sorted(TURN_ROLES))}")


@dataclass(slots=True)
class MapEntry:
    """A folder or file in the knowledge map; `path` is workspace-relative with '/'."""

    path: str
    kind: str = "file"  # "dir" | "file"
    purpose: str = ""
    lines: int | None = None
    language: str = ""
    freshness: str = "fresh"

    def __post_init__(self) -> None:
        if self.kind not in ("dir", "file"):
            raise ValueError(f"map entry {self.path!r}: kind {self.kind!r} is not 'dir' or 'file'")
        if self.freshness not in FRESHNESS_STATES:
            raise ValueError(f"map entry {self.path!r}: freshness {self.freshness!r} is unknown")

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1] or self.path


@dataclass(slots=True)
class SymbolEntry:
    """A symbol of a file; `parent` names the enclosing symbol (a method's class)."""

    name: str
    kind: str
    start: int  # 1-indexed, inclusive
    end: int
    parent: str = ""
    signature: str = ""


@dataclass(slots=True)
class MemoryEntry:
    """A key and value in STM or LTM."""

    key: str
    value: Any = None
    namespace: str = ""
    updated: str = ""  # preformatted by the caller (it knows the time zone rules)


@dataclass(slots=True)
class TimelineEvent:
    """An episodic event. Keys of a mapping that are not fields land in `details`."""

    ts: float  # epoch seconds
    type: str
    name: str = ""
    duration_ms: float | None = None
    tokens: int | None = None
    id: str = ""
    turn_id: str = ""  # the transcript turn this event belongs to, for jumps
    session: str = ""
    details: dict = field(default_factory=dict)
    flow: str = ""  # a sub-agent's events: its flow (`task-3fa2c1`, nested `task-3fa2c1/task-09be77`); "": the agent's

    @property
    def depth(self) -> int:
        """How deep the flow nests: 0 for the agent's own events, 1 for its sub-agents', 2 for theirs."""
        return 0 if self.flow in ("", "main") else self.flow.count("/") + 1


@dataclass(slots=True, frozen=True)
class SlashCommand:
    name: str  # with the slash: "/read"
    usage: str = ""  # "FILE 10-40"
    help: str = ""


def coerce(cls: type[T], item: T | Mapping[str, Any]) -> T:
    """Accept an instance of `cls` or a mapping of its fields; name bad keys."""
    if isinstance(item, cls):
        return item
    if not isinstance(item, Mapping):
        raise TypeError(f"expected {cls.__name__} or a mapping, got {type(item).__name__}")
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    known = {k: v for k, v in item.items() if k in names}
    extra = {k: v for k, v in item.items() if k not in names}
    if extra:
        if cls is TimelineEvent:
            known["details"] = {**extra, **known.get("details", {})}
        else:
            raise ValueError(f"{cls.__name__}: unknown field {sorted(extra)[0]!r}")
    return cls(**known)


def coerce_all(cls: type[T], items) -> list[T]:
    return [coerce(cls, item) for item in items]


def human_count(n: int | float | None) -> str:
    """12 → '12', 12345 → '12.3k', 1_200_000 → '1.2M'."""
    if n is None:
        return ""
    n = float(n)
    for limit, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(n) >= limit:
            return f"{n / limit:.1f}".rstrip("0").rstrip(".") + suffix
    return f"{n:.0f}"


def human_duration(ms: float | None) -> str:
    if ms is None:
        return ""
    if ms < 1:
        return f"{ms * 1000:.0f}µs"
    if ms < 1000:
        return f"{ms:.0f}ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    return f"{int(ms // 60_000)}m{int(ms % 60_000 // 1000):02d}s"
