"""Stepping through an episode, by hand or in (scaled) real time; the TUI's replay screen drives a
`Player` from a timer."""

from __future__ import annotations

import time
from typing import Callable

from .episode import Episode, ReplayError, ReplayState, Step


class Player:
    """Steps through an episode, by hand or in (scaled) real time.

    The caller owns the clock and the timer: `clock()` returns seconds
    (monotonic); while playing, call `tick()` from a timer (`due_in()` says
    when the next step is due) and redraw when it returns True.
    """

    def __init__(self, episode: Episode, *, clock: Callable[[], float] = time.monotonic, start: int = 0):
        self.episode = episode
        self.clock = clock
        self.position = episode.check_index(start)
        self.speed = 1.0
        self.playing = False
        self._anchor_clock = 0.0
        self._anchor_offset = 0.0
        self._state: ReplayState | None = None

    @property
    def step_now(self) -> Step:
        return self.episode.steps[self.position]

    @property
    def at_end(self) -> bool:
        return self.position == len(self.episode.steps) - 1

    def state(self) -> ReplayState:
        if self._state is None or self._state.index != self.position:
            self._state = self.episode.state_at(self.position)
        return self._state

    def _move(self, index: int) -> bool:
        index = max(0, min(index, len(self.episode.steps) - 1))
        moved = index != self.position
        self.position = index
        if self.playing:
            self._anchor()
        return moved

    def step(self, n: int = 1) -> bool:
        """Forward n steps (clamped at the last); True if the position changed."""
        return self._move(self.position + n)

    def back(self, n: int = 1) -> bool:
        return self._move(self.position - n)

    def seek(self, index: int) -> bool:
        """To step `index` (0-based); a step outside the episode is an error, not a clamp."""
        return self._move(self.episode.check_index(index))

    def play(self, speed: float | None = None) -> None:
        """Play from here at `speed` × real time (from the start again when at the end)."""
        if speed is not None:
            if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not speed > 0 \
                    or speed == float("inf"):
                raise ReplayError(f"speed must be a positive number, got {speed!r}")
            self.speed = float(speed)
        if self.at_end:
            self.position = 0
        self.playing = True
        self._anchor()

    def pause(self) -> None:
        self.playing = False

    def toggle(self, speed: float | None = None) -> None:
        self.pause() if self.playing else self.play(speed)

    def _anchor(self) -> None:
        self._anchor_clock = self.clock()
        self._anchor_offset = self.step_now.offset_s

    def tick(self) -> bool:
        """Advance to wherever the clock says playback is; True if the position changed."""
        if not self.playing:
            return False
        target = self._anchor_offset + (self.clock() - self._anchor_clock) * self.speed
        steps = self.episode.steps
        index = self.position
        while index + 1 < len(steps) and steps[index + 1].offset_s <= target:
            index += 1
        moved = index != self.position
        self.position = index
        if self.at_end:
            self.playing = False
        return moved

    def due_in(self) -> float | None:
        """Seconds of clock time until the next step is due (None when not playing)."""
        if not self.playing or self.at_end:
            return None
        elapsed = (self.clock() - self._anchor_clock) * self.speed
        wait = self.episode.steps[self.position + 1].offset_s - self._anchor_offset - elapsed
        return max(0.0, wait / self.speed)
