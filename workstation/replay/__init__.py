"""Replaying a recorded episode: a session log stepped through as the agent lived it, and verified.

    episode = Episode.load(paths, "2025-01-31-fix-the-loader")     # live or archived, by slug
    episode = Episode.load("sessions/demo-request-id.jsonl")       # or any session log file
    state = episode.state_at(12)     # transcript, model context, compaction, timeline, memory at step 12
    player = Player(episode, clock=time.monotonic)                 # step / back / seek / play(speed) / tick()
    report = verify(episode, workspace)                            # workstation.replay.verify: re-run today

One job per module: `episode` (the data: steps and the state at each, from the
log alone), `player` (moving through it in time), `render` (as text) and
`verify` (the only part that needs the agent's tools, the index and the store;
import it from `workstation.replay.verify`). No textual import here: the TUI's
replay screen drives a `Player` from a timer.
"""

from .episode import (MAX_PAUSE_S, Episode, MemoryView, ReplayError, ReplayState, Step, call_label,
                      memory_at)
from .player import Player
from .render import render_state, render_steps

__all__ = ["MAX_PAUSE_S", "Episode", "MemoryView", "Player", "ReplayError", "ReplayState", "Step", "call_label",
           "memory_at", "render_state", "render_steps"]
