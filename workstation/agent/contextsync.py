"""The agent's side of its context: what the model should know now, kept in step with the session log.

Before each request the loop syncs (`ContextSync.sync`): what the model should know (agent.updates.State:
the decision log, pins, the project instruction files in effect and the map excerpt of the user's message)
is compared with what the log says it was told, and a new epoch or an update is written (agent.updates.sync).
The request is then built from the log alone (`ContextSync.request`, agent.prompt.build), and when its
prefix cannot be in the provider's cache, `cache_break` says why. Token counts of texts and of the tool
schemas are cached here for the agent's lifetime; the map excerpt once per user message (`new_turn`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Callable

from .. import scrub
from ..errors import WorkstationError
from ..sessions.modelview import seen
from ..sessions.records import Assistant, Record
from ..sessions.frontier import frontier_budget, head_frontier
from ..tokens import count
from . import memoryfirst, prompt, tools, updates
from .prompt import Cut, Request
from .instructions import ProjectInstructions, budget_for, section_of
from .tools import ToolContext

if TYPE_CHECKING:
    from ..config import Config
    from ..index.map import KnowledgeMap
    from ..memory import Memory
    from ..sessions.log import Session


class NoEpoch(WorkstationError):
    """No epoch for the summary in force: the context was not synced since the last compaction."""


class ContextSync:
    """One agent's context bookkeeping; `base` is its system prompt, `wrote` tells its UI of a record written."""

    def __init__(self, session: "Session", config: "Config", *, base: str, toolset: tools.Toolset,
                 memory: "Memory", kmap: "KnowledgeMap", instructions: ProjectInstructions, ctx: ToolContext,
                 wrote: Callable[[Record], Record]):
        self.session = session
        self.config = config
        self.base = base
        self.toolset = toolset
        self.memory = memory
        self.kmap = kmap
        self.instructions = instructions
        self.ctx = ctx
        self.wrote = wrote
        self.turn = memoryfirst.TurnMemory()  # what the newest user message's lookups found
        self._excerpt: str | None = None
        self._last_messages: list[dict] | None = None  # the previous request's, to tell why a prefix broke
        self._last_model: str | None = None  # the model of the previous request in this process
        self._decisions_omitted = 0
        self._token_cache: dict[tuple[int, int], int] = {}
        self._tools_tokens: int | None = None
        self.cut: Cut | None = None  # what a trim left out of this epoch's requests (agent.prompt.Cut)

    def new_turn(self, turn: memoryfirst.TurnMemory) -> None:
        """A user message: its lookups, and a map excerpt made afresh for it."""
        self.turn = turn
        self._excerpt = None

    def request(self, window: int, model: str, *, for_compaction: bool = False) -> Request:
        """The next request, from the log alone: the current epoch's head and the turns after it.
        `for_compaction`: the conversation a compaction summarizes instead (prompt.build's `newest_out`):
        the epoch's requests grown at the end, cut from the end if need be; the epoch's cut is left as is."""
        view = self.session.read()
        epoch = updates.current_epoch(model_view := seen(view))
        if epoch is None:
            raise NoEpoch("no epoch in force: _sync_context comes first")  # or a compaction came since
        self.ctx.turn.head_map = updates.known(model_view, epoch).excerpt  # the map file_meta need not repeat
        if self.cut is None or self.cut.epoch != epoch.id:  # another process's cut, from its reply
            at = next(i for i, r in enumerate(model_view.records) if r is epoch)
            self.cut = next((found for r in reversed(model_view.records[at:]) if isinstance(r, Assistant)
                             and (found := Cut.of(r.left_out)) is not None), None)
        request = prompt.build(view, self.config, epoch=epoch, base=self.base, window=window, model=model,
                                tools_tokens=self.tool_schema_tokens(), count=self.count,
                                counter=self.session.counter, cut=self.cut, newest_out=for_compaction)
        if not for_compaction:
            self.cut = request.cut or self.cut
        return request

    def sync(self, window: int, model: str) -> bool:
        """Bring the log's context up to date before a request (agent.updates.sync): a new epoch when the session
        has none for the summary in force, else an update with whatever changed; True when an epoch began."""
        budget = window - prompt.reply_reserve(window)
        view = self.session.read()
        now, blocks = self.state(view, budget)

        def head(state: updates.State) -> str:
            sections = []
            if state.pins:
                sections.append("Pinned instructions (always follow):\n" + "\n".join(f"- {p}" for p in state.pins))
            sections.append(prompt.decision_section(state.decisions, self._decisions_omitted))
            sections.append(section_of(blocks))
            if self.ctx.services.skills is not None:  # names and descriptions only: the skill tool loads the rest
                sections.append(self.ctx.services.skills.head_section())
            sections.append(self.frontier_section(view, budget))
            return prompt.head_text(self.base, sections, state.excerpt)

        return updates.sync(self.session, view, self.config, now, blocks, head, tools=self.tools_digest(),
                            model=model, window=window, wrote=self.wrote,
                            schemas=scrub.mask_data(self.toolset.schemas()))

    def frontier_section(self, view, budget: int) -> str:
        """After a compaction, the head of the epoch it starts carries the frontier (sessions.frontier) as the
        log has it now, whatever the summary kept: the user's words, the plan, the files, the last failure.
        Decisions and pins are the head's own sections. Fixed for the epoch, like the rest of the head."""
        if seen(view).last_compact() is None:
            return ""
        return head_frontier(view, budget=frontier_budget(budget), counter=self.count)

    def state(self, view, budget: int) -> tuple[updates.State, dict[str, str]]:
        """What the model should know now (agent.updates.State), and the instruction blocks in effect."""
        decisions, self._decisions_omitted = prompt.decision_lines(self.memory.decisions(limit=1000),
                                                                   budget // 10, self.count)
        blocks = self.instructions.blocks(self.worked_on(view), budget_for(budget), self.count)
        state = updates.State(decisions={k: scrub.mask(v) for k, v in decisions.items()},
                              pins=prompt.pins_of(view),
                              instructions={p: updates.digest(b) for p, b in blocks.items()},
                              excerpt=self._map_excerpt(min(1024, max(128, budget // 10))))
        return state, blocks

    def _map_excerpt(self, budget: int) -> str:
        """The map excerpt of the files the turn's message named (else the repository map), masked: made once
        per user message, since an update or a new epoch is the only way it reaches the model."""
        if self.turn.files:
            self.kmap.ensure_fresh(self.turn.files)  # the staleness gate; a change re-indexes the file
        if self._excerpt is None:
            self._excerpt = scrub.mask(memoryfirst.excerpt(self.kmap, self.turn.files, budget))
        return self._excerpt

    def tools_digest(self) -> str:
        return updates.digest(json.dumps(self.toolset.schemas(), sort_keys=True))

    def cache_break(self, model: str, messages: list[dict], started_epoch: bool) -> str | None:
        """Why this request's prefix is not (all) in the provider's cache (agent.updates.cache_break)."""
        last, self._last_messages = self._last_messages, messages
        last_model, self._last_model = self._last_model, model
        return updates.cache_break(self.session.read(), messages, last, model, last_model, started_epoch,
                                   tools=self.tools_digest(), ttl_s=updates.cache_ttl_s(self.config))

    def worked_on(self, view) -> list[str]:
        """Files whose folders' instructions apply: the turn's memory lookups found them or a tool touched them."""
        return [*self.turn.files, *self.instructions.note_session(view)]

    def instructions_in_effect(self, window: int) -> list:
        """The project instruction files the next request carries for a `window` (0: unknown, no budget)."""
        budget = budget_for(window - prompt.reply_reserve(window)) if window else budget_for(10 ** 9)
        return self.instructions.fitted(self.worked_on(self.session.read()), budget, self.count)

    def tool_schema_tokens(self) -> int:
        if self._tools_tokens is None:
            self._tools_tokens = self.count(json.dumps(self.toolset.schemas()))
        return self._tools_tokens

    def count(self, text: str) -> int:
        if len(text) < 64:
            return count(text)
        key = (len(text), hash(text))  # not the text itself: tool outputs would pile up in memory
        cached = self._token_cache.get(key)
        if cached is None:
            cached = count(text)
            if len(self._token_cache) > 4096:
                self._token_cache.clear()
            self._token_cache[key] = cached
        return cached
