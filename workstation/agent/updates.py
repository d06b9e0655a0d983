"""What the model knows of the session's changing context, and the updates that tell it the rest.

A provider's prompt cache serves a request's longest prefix seen before, so a request must only ever
grow at its end. The head of every request (the base prompt, pinned instructions, the decision log,
project instructions and the map excerpt) is therefore written once per *epoch*, as an `epoch`
record of the session log: at the session's first request, and again after each compaction (whose
summary changes the head anyway). Anything that changes meanwhile (a decision logged here or by
another session, a pin, an instruction file changed on disk or newly in effect, the map excerpt of a
new user message, an undo) reaches the model as an *update*: a `system` record with `update`, sent
as a user message at its place in the log (sessions.context.assemble), never as an edit of what was
sent before.

`State` is what the model has been told; `known(view, epoch)` folds the epoch's state and every
update after it; `difference(known, now)` is the update to append, or None.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from ..sessions.log import LogView


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


def current_epoch(view: LogView) -> dict | None:
    """The epoch the next request belongs to: the newest `epoch` record, if it was written for the
    summary now in force (a compaction since starts a new epoch). `view` is the model's view
    (sessions.context.seen)."""
    compact = view.last_compact()
    summary = compact["id"] if compact else None
    for record in reversed(view.records):
        if record["type"] == "epoch":
            return record if record.get("summary") == summary else None
    return None


def known(view: LogView, epoch: dict) -> State:
    """What the model has been told in this epoch: the epoch's state, then every update after it."""
    state = State.from_record(epoch.get("state"))
    after = False
    for record in view.records:
        if record is epoch or record.get("id") == epoch.get("id"):
            after = True
            continue
        if after and record["type"] == "system" and isinstance(record.get("update"), dict):
            told = record["update"]
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
    from ..importers.pricing import prices

    entry = prices(model) or {}
    base = entry.get("input_cost_per_token") or 1.0
    read = entry.get("cache_read_input_token_cost") or 0.1 * base
    write = entry.get("cache_creation_input_token_cost") or 1.25 * base
    return freed * read * horizon > after * (write - read)
