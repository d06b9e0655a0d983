"""What the model knows of the session's changing context, and the updates that tell it the rest.

A provider's prompt cache serves a request's longest prefix seen before, so a request must only ever
grow at its end. The head of every request (the base prompt, pinned instructions, the decision log,
project instructions and the map excerpt) is therefore written once per *epoch*, as an `epoch`
record of the session log: at the session's first request, and again after each compaction (whose
summary changes the head anyway). Anything that changes meanwhile (a decision logged here or by
another session, a pin, an instruction file changed on disk or newly in effect, the map excerpt of a
new user message, an undo) reaches the model as an *update*: a `system` record with `update`, sent
as a user message at its place in the log (sessions.modelview.assemble), never as an edit of what was
sent before.

`State` is what the model has been told; `known(view, epoch)` folds the epoch's state and every
update after it; `difference(known, now)` is the update to append, or None; `sync` writes whichever
is due. Rolling redaction is frozen per epoch and happens within one only when it pays
(`paying_redactions`). `cache_break` names why a request's prefix was not cached, when it was not.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Callable

from ..config import Config
from ..providers import cache_ttl_seconds
from ..sessions.modelview import current_epoch, due_redactions, epoch_redactions, redaction_targets, seen
from ..sessions.log import LogView, Session, ts_seconds
from ..sessions.records import Assistant, Epoch, Record, Rewind, System
from ..sessions.turns import count as count_turns

REDACTION_MARKER_TOKENS = 40  # about what a "[REDACTED: ...]" marker costs in place of the output


@dataclass
class State:
    decisions: dict[str, str] = field(default_factory=dict)  # id -> the line shown
    pins: list[str] = field(default_factory=list)
    instructions: dict[str, str] = field(default_factory=dict)  # path -> digest of the block shown
    excerpt: str = ""
    redacted: list[str] = field(default_factory=list)  # tool records shown as markers (frozen per epoch)

    def as_record(self) -> dict:
        return {"decisions": self.decisions, "pins": self.pins, "instructions": self.instructions,
                "excerpt": self.excerpt, "redacted": self.redacted}

    @classmethod
    def from_record(cls, data: dict | None) -> "State":
        data = data if isinstance(data, dict) else {}

        def typed(key: str, kind: type, default):
            value = data.get(key)
            return value if isinstance(value, kind) else default

        return cls({str(k): str(v) for k, v in typed("decisions", dict, {}).items()},
                   [str(p) for p in typed("pins", list, [])],
                   {str(k): str(v) for k, v in typed("instructions", dict, {}).items()},
                   str(typed("excerpt", str, "")), [str(r) for r in typed("redacted", list, [])])


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def known(view: LogView, epoch: Epoch) -> State:
    """What the model has been told in this epoch: the epoch's state, then every update after it."""
    state = State.from_record(epoch.state)
    after = False
    for record in view.records:
        if record is epoch or record.id == epoch.id:
            after = True
            continue
        if after and isinstance(record, System) and record.update is not None and \
                not record.sidechain:  # what a sub-agent was told (agent/subagent.py) is its own
            told = record.update
            state.decisions.update({str(k): str(v) for k, v in (told.get("decisions") or {}).items()})
            for pin in told.get("pins_added") or ():
                state.pins.append(str(pin))
            for pin in told.get("pins_removed") or ():
                if pin in state.pins:
                    state.pins.remove(pin)
            for path, value in (told.get("instructions") or {}).items():
                if value:
                    state.instructions[path] = str(value)
                else:
                    state.instructions.pop(path, None)
            if isinstance(told.get("excerpt"), str):
                state.excerpt = told["excerpt"]
    return state


@dataclass
class Update:
    text: str  # what the model reads
    data: dict  # what it changes in State (the record's `update`)


def difference(before: State, now: State, blocks: dict[str, str]) -> Update | None:
    """The update that brings the model from `before` to `now`; None when nothing changed.
    `blocks`: path -> the instruction block now in effect (its text, for the paths that changed)."""
    parts: list[str] = []
    data: dict = {}
    new_decisions = {k: v for k, v in now.decisions.items() if k not in before.decisions}
    if new_decisions:
        data["decisions"] = new_decisions
        parts.append("Decisions logged since (follow these too; cite [D:<id>] when you apply one):\n"
                     + "\n".join(new_decisions.values()))
    added = [p for p in now.pins if p not in before.pins]
    removed = [p for p in before.pins if p not in now.pins]
    if added:
        data["pins_added"] = added
        parts.append("Pinned instructions added (always follow):\n" + "\n".join(f"- {p}" for p in added))
    if removed:
        data["pins_removed"] = removed
        parts.append("Pinned instructions withdrawn (no longer in force):\n" + "\n".join(f"- {p}" for p in removed))
    changed = {p: d for p, d in now.instructions.items() if before.instructions.get(p) != d}
    gone = [p for p in before.instructions if p not in now.instructions]
    if changed or gone:
        data["instructions"] = {**changed, **{p: "" for p in gone}}
        text = "Project instructions changed; these replace what you were shown of them before:"
        for path in changed:
            text += "\n\n" + blocks.get(path, f"--- {path} ---")
        if gone:
            text += "\n\nNo longer in effect: " + ", ".join(gone)
        parts.append(text)
    if now.excerpt != before.excerpt and now.excerpt:
        data["excerpt"] = now.excerpt
        parts.append(excerpt_update(before.excerpt, now.excerpt))
    if not parts:
        return None
    return Update("\n\n".join(parts), data)


def excerpt_update(before: str, now: str) -> str:
    """The map excerpt as it now stands, or, when most of it was shown already, only its new lines."""
    old = set(before.splitlines())
    lines = now.splitlines()
    fresh = [line for line in lines if line not in old]
    if not before or len(fresh) * 2 > len(lines):
        return now
    # the first line of the excerpt names what it is; keep a file's header above its changed lines
    shown: list[str] = []
    header = ""
    for line in lines:
        if line and not line.startswith((" ", "\t")) and line.endswith(":"):
            header = line
        if line in old:
            continue
        if header and header not in shown and header != line:
            shown.append(header)
        shown.append(line)
    return "Knowledge map, changed lines (the rest as shown before):\n" + "\n".join(shown)



def redaction_pays(freed: int, after: int, horizon: float, model: str) -> bool:
    """Whether hiding `freed` tokens of old tool output mid-epoch costs less than keeping them: keeping, each
    of the `horizon` requests until the next compaction reads them from the cache; hiding, the `after`
    tokens that follow them are no longer a cached prefix and are written to the cache again once. Priced
    from the model's cache prices (litellm's price map), else Anthropic's multipliers (read 0.1, write 1.25)."""
    from ..pricing import UNIT, rates  # lazy: the price map, only when a redaction is weighed

    price = rates(model) or UNIT
    return freed * price.cache_read * horizon > after * (price.cache_write - price.cache_read)


def sync(session: Session, view: LogView, config: Config, now: State, blocks: dict[str, str],
         head: Callable[[State], str], *, tools: str, model: str, window: int,
         wrote: Callable[[Record], Record], schemas: list[dict] | None = None) -> bool:
    """Before a request: write a new epoch (its head, `head(now)`, once) when the log has none for the summary
    in force, else the update that tells the model what changed since (and a redaction, if it pays). `view` is
    the whole log, `now` what the model should know; `wrote` hears of every record written; `schemas`, the
    tools sent (`tools` is their digest), go on the epoch record, so any process can rebuild the request's
    cached prefix from the log (sessions.modelview.as_sent). True when an epoch began."""
    model_view = seen(view)
    epoch = current_epoch(model_view)
    if epoch is None:
        now.redacted = due_redactions(view, config)
        compact = model_view.last_compact()
        wrote(session.append("epoch", system=head(now), excerpt=now.excerpt, state=now.as_record(), tools=tools,
                             tool_schemas=schemas, summary=compact.id if compact else None, model=model))
        return True
    if due := paying_redactions(model_view, epoch, config, window, model):
        session.append("redaction", targets=redaction_targets(model_view, due), at_turn=count_turns(view.records),
                       epoch=epoch.id)
    update = difference(known(model_view, epoch), now, blocks)
    if update is not None:
        wrote(session.system(update.text, update=update.data))
    return False


def paying_redactions(view: LogView, epoch: Epoch, config: Config, window: int, model: str) -> list[str]:
    """Rolling redaction within an epoch: the outputs now due, but only when hiding them pays
    (redaction_pays), the horizon being the requests until the token guard compacts at this epoch's
    growth per request; otherwise they wait for the next epoch. `view` is the model's view."""
    hidden = epoch_redactions(view, epoch)
    turns = view.turns
    at = {t.id: n for n, t in enumerate(turns)}
    due = [i for i in due_redactions(view, config) if i not in hidden and i in at]
    start = next((n for n, r in enumerate(view.records) if r is epoch), 0)
    sizes = [int(r.context_tokens or 0) for r in view.records[start:] if isinstance(r, Assistant)]
    if not due or not sizes:  # nothing sent in this epoch yet: nothing cached to lose
        return []
    freed = sum(int(turns[at[i]].tokens or 0) - REDACTION_MARKER_TOKENS for i in due)
    after = sum(int(t.tokens or 0) for t in turns[min(at[i] for i in due):])
    growth = (sizes[-1] - sizes[0]) / (len(sizes) - 1) if len(sizes) > 1 else 0
    guard = config.memory.compact_token_ratio * window
    horizon = max(1.0, (guard - sizes[-1]) / growth) if growth > 0 else 1.0
    return due if redaction_pays(freed, after, horizon, model) else []


def cache_ttl_s(config: Config) -> float:
    """How long the provider keeps a cached prefix unused (agent.cache_ttl)."""
    return cache_ttl_seconds(config.agent.cache_ttl)


def cache_break(view: LogView, messages: list[dict], last: list[dict] | None, model: str, last_model: str | None,
                started_epoch: bool, *, tools: str, ttl_s: float) -> str | None:
    """Why a request's prefix is not (all) in the provider's cache, for the status line and the figures; None
    when it extends the previous request within the cache's lifetime. `last` and `last_model`: the previous
    request's messages and model in this process (None after a restart: not compared)."""
    at, previous = next(((i, r) for i, r in reversed(list(enumerate(view.records)))
                         if isinstance(r, Assistant) and r.model and not r.sidechain), (0, None))
    if previous is None:
        return "first request"
    since = view.records[at + 1:]
    if any(isinstance(r, Rewind) and r.conversation for r in since):
        return "rewind"
    if started_epoch:  # a new summary (a compaction, maybe landed during the previous request), or a new head
        epochs = [r for r in view.records if isinstance(r, Epoch)]
        before = epochs[-2].summary if len(epochs) > 1 else None
        return "compaction" if epochs and epochs[-1].summary != before else "system changed"
    if last_model is not None and model != last_model:
        return "model switch"
    epoch = current_epoch(seen(view))
    if epoch is not None and epoch.tools != tools:
        return "tools changed"
    if last is not None and last != messages[: len(last)]:
        return "history changed"
    if time.time() - (ts_seconds(previous.ts) or time.time()) > ttl_s:
        return "idle past TTL"
    return None
