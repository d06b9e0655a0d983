"""What a tool call runs with, by how long each part lives (as codex's `ToolInvocation`: a session, a turn, a
call):

* `Services`: the agent's (or one MCP client's, or the verifier's) for as long as it lives: the workspace,
  its map and memory, the sandbox policy, the read ledger, the checkpoints, the language servers...;
* `Turn`: what one turn of it changes as it goes: the step, the stop event, the .env files the user named,
  the map the model was shown, the edits of the running response checked together;
* `Invocation`: one call, resolved once before anything runs (`resolve`): its tool, its parsed arguments and
  the paths a WRITE call will change, each confined once (`Target`). The middleware of `tools.call` (the
  .env guard, the checkpoint, the language-server check, the bounded run) and the tool itself read those
  paths there, so nothing works out a path from the raw arguments a second time: a link swapped between the
  checkpoint and the write cannot make one file checkpointed and another written.

`ToolContext` is the pair (services, turn) that calls run in; `tool_context` is the one factory of it, for
the agent, the MCP server and replay's verifier.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ... import scrub
from ...errors import WorkstationError
from ...sandbox import Policy
from ...tokens import count
from ..approval import Approver
from .base import WRITE, RangeMemory, Tool, ToolResult
from .fileio import ReadLedger

if TYPE_CHECKING:
    from ...index.map import KnowledgeMap
    from ...lsp import LanguageServers
    from ...memory import Memory
    from ...skills import Catalog
    from ..modes import Permissions

EXACT_TOKENS_MAX = 1 << 20  # characters of a file whose whole-file token count is exact


def _nothing_to_recall(key: str) -> str:
    raise WorkstationError("nothing to recall here: no session log")


@dataclass
class Services:
    """The long-lived part: one agent's (a sub-agent shares its parent's checkpoints, write lock and mode), one
    MCP client's, or the verifier's."""

    kmap: "KnowledgeMap"
    policy: Policy  # what a command may touch and what no tool may write (its `protected` field)
    memory: "Memory | None" = None
    recall: Callable[[str], str] = _nothing_to_recall  # session record id -> the original text of that record
    session: str = ""  # the session's slug ("": none)
    ledger: ReadLedger = field(default_factory=ReadLedger)
    ranges: RangeMemory | None = None  # the model's reads still in its context (None: slash commands)
    approve: Approver | None = None  # asks the user; None: nobody to ask (refused)
    allow: list[str] = field(default_factory=list)
    command_timeout_s: float = 120.0
    max_output_chars: int = 20_000
    staging: Path | None = None  # temporary files of atomic writes (the state folder's tmp/); None: beside
    # keeps what the paths a WRITE call changes hold before it runs, given their confined (workspace-relative)
    # paths (the agent's checkpoints); None: nothing kept
    checkpoint: Callable[[list[str]], None] | None = None
    # told, just before a WRITE call changes a file, what it will hold (its sha256, None: gone), so that a
    # kill between the change and the call's record leaves the new bytes known to undo; None: not told
    intend: Callable[[str, str | None], None] | None = None
    # runs a sub-agent for the task tool: (prompt, write) -> its summary (agent/subagent.py); None: none here
    delegate: Callable[[str, bool], ToolResult] | None = None
    # held by every WRITE call: an agent's sub-agents share their parent's, so their edits never interleave
    write_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    lsp: "LanguageServers | None" = None  # the workspace's language servers (edits checked); None: none
    skills: "Catalog | None" = None  # the skills the `skill` tool loads (workstation.skills); None: none
    # the session's permission mode (agent.modes), shared with its sub-agents; None: `edits` (an MCP client's
    # calls, replay's)
    permissions: "Permissions | None" = None
    token_cache: dict[str, int] = field(default_factory=dict, repr=False)  # sha -> tokens (file_tokens)
    _unindexed: set[str] = field(default_factory=set, repr=False)  # edited, not re-indexed yet
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def root(self) -> Path:
        return self.policy.root

    @property
    def private(self) -> tuple[Path, ...]:
        """The state folders: no tool reads or writes them (`Policy.private`)."""
        return self.policy.private()

    def confine_write(self, path: str) -> tuple[Path, str]:
        """Where a tool may write `path`: (real path, workspace-relative path), else one line why not
        (`sandbox.Protected.confine_write`: never outside, never a state folder, never `.git`)."""
        return self.policy.confine_write(path)

    def edited(self, rel: str) -> None:
        with self._lock:
            self._unindexed.add(rel)

    def reindex(self) -> None:
        """Re-index the files edited since the last call. Runs before any tool reads the map and when
        a step ends, so a burst of edits to one file costs one parse, and nothing ever sees the map
        without them."""
        with self._lock:
            edited = sorted(self._unindexed)
            self._unindexed.clear()  # in place: the user's services (slash commands) share the set
        for rel in edited:
            self.kmap.reindex_file(rel)

    def file_tokens(self, sha: str, text: Callable[[], str], size: int | None = None) -> int:
        """Tokens of a whole file (by content hash): what a naive full read would have cost. Past
        EXACT_TOKENS_MAX characters (or `size` bytes) the figure is estimated at 4 characters a token:
        counting a 100 MB file took over a minute, for a number only the report's baseline uses."""
        with self._lock:
            cached = self.token_cache.get(sha)
        if cached is None:
            if size is not None and size > EXACT_TOKENS_MAX:
                cached = (size + 3) // 4
            else:
                whole = text()
                cached = (len(whole) + 3) // 4 if len(whole) > EXACT_TOKENS_MAX else count(whole)
            with self._lock:
                self.token_cache[sha] = cached
        return cached


@dataclass
class Turn:
    """What a turn changes as it goes (for an MCP client: one call)."""

    step: int | None = None
    cancel: threading.Event | None = None  # the turn's stop event: a running tool is abandoned when set
    # the .env-style files the user named this turn (scrub.is_env_file): only those reach the model;
    # None: any (the user's own slash commands)
    env_files: frozenset[str] | None = frozenset()
    # the map excerpt the model has been shown (the epoch's, with the updates since): a file_meta whose map it
    # shows whole and unchanged points there instead of sending the symbols again; "": none (slash commands,
    # MCP, replay)
    head_map: str = ""
    # the edits of the response running now that are checked together, by call id (tools.lspcheck.batches)
    lsp_batches: dict[str, Any] = field(default_factory=dict, repr=False)
    call_id: str = ""  # the call started last: what an approval asked now is about (the ACP client's question)

    def open_env(self, rel: str, text: str | None = None) -> None:
        """Refuse an .env-style file the user did not name in this turn; register the values of one that
        is read or written (`text`), so that no log, event or export keeps them."""
        if not scrub.is_env_file(rel):
            return
        named = self.env_files
        if named is not None and rel not in named and rel.rsplit("/", 1)[-1] not in named:
            raise WorkstationError(f"{rel} is an .env-style file (its values are secrets): the agent opens one "
                                   "only when the user names it in the message")
        if text:
            scrub.register_env_values(text)


@dataclass(frozen=True)
class ToolContext:
    """Where calls run: an agent's services and its turn."""

    services: Services
    turn: Turn = field(default_factory=Turn)

    def for_user(self) -> "ToolContext":
        """The context of the user's own calls (slash commands): their reads are not the model's, so they get a
        read ledger of their own and no memory of ranges in the model's context; no permission mode either
        (that is what the agent may do, not the user), no checkpoint, and any .env file they name."""
        return ToolContext(dataclasses.replace(self.services, ledger=ReadLedger(), approve=None, ranges=None,
                                               checkpoint=None, intend=None, delegate=None, permissions=None),
                           Turn(env_files=None))


def tool_context(kmap: "KnowledgeMap", policy: Policy, *, staging: Path | None = None,
                 lsp: "LanguageServers | None" = None, turn: Turn | None = None, **services: Any) -> ToolContext:
    """The one factory of a `ToolContext`: the agent's, an MCP client's and the verifier's are built here, each
    with the services it has (`Services`' fields: memory, recall, session, ledger, ranges...) and its turn (a
    new one when not given)."""
    return ToolContext(Services(kmap, policy, staging=staging, lsp=lsp, **services), turn or Turn())


@dataclass(frozen=True)
class Target:
    """A path a WRITE call names, confined once: (real, rel), or why it is refused (the tool says so when it
    comes to it)."""

    given: str
    real: Path | None
    rel: str | None
    refused: WorkstationError | None = None


def confined(services: Services, paths: list[str]) -> tuple[Target, ...]:
    out = []
    for path in dict.fromkeys(paths):
        try:
            real, rel = services.confine_write(path)
        except WorkstationError as err:
            out.append(Target(path, None, None, err))
        else:
            out.append(Target(path, real, rel))
    return tuple(out)


@dataclass(frozen=True)
class Invocation:
    """One call, resolved once (see the module docstring): what its tool's `run` gets first."""

    services: Services
    turn: Turn
    tool: Tool
    call_id: str
    args: Mapping[str, Any]
    targets: tuple[Target, ...] = ()  # a WRITE call's paths (`Tool.writes`), confined

    @property
    def rels(self) -> list[str]:
        """The workspace-relative paths the call may change (those not refused)."""
        return [t.rel for t in self.targets if t.rel is not None]

    def target(self, path: str) -> tuple[Path, str]:
        """(real, rel) of a path the call writes, as resolved before anything ran; one line why not."""
        for target in self.targets:
            if target.given == path:
                if target.refused is not None:
                    raise target.refused
                assert target.real is not None and target.rel is not None
                return target.real, target.rel
        return self.services.confine_write(path)  # a path its declaration does not name (none today)


def resolve(ctx: ToolContext, tool: Tool, args: Mapping[str, Any], call_id: str = "") -> Invocation:
    """The call `tool(args)` resolved once: a WRITE call's paths confined (see the module docstring)."""
    targets = confined(ctx.services, tool.writes(args)) if tool.effect == WRITE else ()
    return Invocation(ctx.services, ctx.turn, tool, call_id, args, targets)
