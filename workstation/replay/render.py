"""An episode as text: one line per step, and the state at a step (`workstation replay --print`)."""

from __future__ import annotations

import json

from ..sessions.plan import MARKS
from .episode import Episode, ReplayState, clip, read_text


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(seconds, 60)
    return f"{int(minutes):02d}:{secs:04.1f}"


def render_steps(episode: Episode, upto: int | None = None) -> str:
    """The episode step by step, one line each (up to step index `upto`)."""
    last = len(episode.steps) - 1 if upto is None else episode.check_index(upto)
    width = len(str(len(episode.steps)))
    return "\n".join(f"{s.number:>{width}}  {_elapsed(s.offset_s)}  {s.label()}" for s in episode.steps[: last + 1])


def render_state(episode: Episode, state: ReplayState) -> str:
    ctx = state.context
    mem = state.memory
    lines = [f"state at step {state.step.number} of {len(episode.steps)} ({state.step.kind}, {state.step.id}, "
             f"{state.step.record.ts or '?'})"]
    if state.request is not None:
        lines.append(f"  this model call was sent {len(state.request.messages)} messages, "
                     f"{state.request.tokens:,} tokens of conversation"
                     + (f" ({recorded:,} tokens in all, as recorded)"
                        if isinstance(recorded := getattr(state.step.record, "context_tokens", None), int) else ""))
    summary = (f"; turns {state.covered.describe()} summarized by compact record {ctx.summary_id}"
               if ctx.summary_id else "; no compaction in effect")
    lines.append(f"  model context: {len(ctx.messages)} messages, {ctx.tokens:,} tokens, {state.turns} turns"
                 + summary)
    for red in ctx.redactions:
        lines.append(f"    {red.marker}")
    lines.append(f"  decisions: {len(mem.decisions)}")
    lines += [f"    [D:{d['id']}] step {d['step']}: {clip(d['decision'], 100)} (reused {d['reused']}x)"
              for d in mem.decisions]
    if mem.pins:
        lines.append("  pins: " + "; ".join(clip(p, 60) for p in mem.pins))
    if mem.files_read:
        lines.append("  files read: " + ", ".join(
            f"{p} ({', '.join(read_text(x) for x in v)})"
            for p, v in sorted(mem.files_read.items())))
    if mem.files_edited:
        lines.append("  files edited: " + ", ".join(f"{p} ({n}x)" for p, n in sorted(mem.files_edited.items())))
    if mem.plan is not None:
        lines.append(f"  plan: {sum(t['status'] == 'done' for t in mem.plan)} of {len(mem.plan)} done")
        lines += [f"    {MARKS.get(t['status'], '[?]')} {clip(t['text'], 100)}" for t in mem.plan]
    for tier, entries in (("stm", mem.stm), ("ltm", mem.ltm)):
        if entries:
            lines.append(f"  {tier}: " + ", ".join(f"{e['key']}={clip(json.dumps(e['value']), 40)}" for e in entries))
    kinds: dict[str, int] = {}
    for event in state.timeline:
        kinds[event["type"]] = kinds.get(event["type"], 0) + 1
    lines.append(f"  timeline: {len(state.timeline)} events (" + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
                 + ")")
    return "\n".join(lines)
