"""Replay a recorded episode in the TUI: `workstation replay SLUG` (`run(episode)`), or the sessions screen.

`ReplayScreen(episode)` shows the chat, memory and timeline panes as the agent
saw them at one step of a `workstation.replay.Episode`, with a recall panel
(decisions, pins, files read and edited) and a status bar (step i/N, speed,
play state, the step's label). A `Player` does the stepping; this screen owns
its clock and timer.

Keys: right / n step, left / p back, home / end first / last step, space play
or pause, + / - speed, escape or q close. The replay is read-only: nothing the
panes ask for reaches the backend.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from textual import on
from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Static

from ...replay import Episode, Player
from ...replay.episode import read_text
from ..layout import side_width
from ..messages import BackendRequest
from ..panes.bar import StatusBar
from ..panes.chat import ChatPane
from ..panes.memory import MemoryPane
from ..panes.timeline import TimelinePane
from ..themes import DEFAULT_THEME, load_themes


SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
MIN_TICK_S = 0.01
RECALL_ITEMS = 12  # decisions / files listed before "… n more"


class ReplayMemoryPane(MemoryPane):
    """The memory pane, read-only: a replay shows what memory held, it does not write it."""

    def _edit(self, *args: Any, **kwargs: Any) -> None:
        self.notify("a replay is read-only: memory cannot be edited here", severity="warning")


def _clock_text(seconds: float) -> str:
    minutes, secs = divmod(max(0.0, seconds), 60)
    return f"{int(minutes):02d}:{secs:04.1f}"


def _speed_text(speed: float) -> str:
    return f"{speed:g}×"


def recall_text(memory: Any) -> str:
    """Decisions, pins and files of a replay.MemoryView, a few lines each."""

    def more(items: list, render: Callable[[Any], str]) -> list[str]:
        lines = [render(item) for item in items[:RECALL_ITEMS]]
        if len(items) > RECALL_ITEMS:
            lines.append(f"… {len(items) - RECALL_ITEMS} more")
        return lines

    lines: list[str] = []
    if memory.decisions:
        lines.append(f"Decisions ({len(memory.decisions)})")
        lines += more(memory.decisions, lambda d: f"• [D:{d['id']}] step {d['step']}: {d['decision']}"
                                                  + (f" (reused {d['reused']}×)" if d["reused"] else ""))
    if memory.pins:
        lines.append(f"Pinned ({len(memory.pins)})")
        lines += more(memory.pins, lambda p: f"• {p}")
    if memory.files_read:
        lines.append(f"Files read ({len(memory.files_read)})")
        lines += more(sorted(memory.files_read.items()),
                      lambda item: f"• {item[0]}: " + ", ".join(read_text(r) for r in item[1]))
    if memory.files_edited:
        lines.append(f"Files edited ({len(memory.files_edited)})")
        lines += more(sorted(memory.files_edited.items()), lambda item: f"• {item[0]}: {item[1]}×")
    return "\n".join(lines) or "nothing recalled yet at this step"


class ReplayScreen(Screen):
    SCREEN_NAME = "replay"
    BINDINGS = [
        # priority: the panes' own keys (transcript space, table arrows) must not swallow the player's
        Binding("right,n", "step(1)", "Step", priority=True),
        Binding("left,p", "step(-1)", "Back", priority=True),
        Binding("space", "toggle_play", "Play/pause", priority=True),
        Binding("plus,equals_sign", "speed(1)", "Faster", priority=True),
        Binding("minus", "speed(-1)", "Slower", priority=True),
        Binding("home", "first", "First", priority=True),
        Binding("end", "last", "Last", priority=True),
        Binding("escape,q", "close", "Close", priority=True),
    ]
    DEFAULT_CSS = """
    ReplayScreen {
        background: $background;
        #replay-title { height: 1; padding: 0 1; background: $panel; color: $text-primary; text-style: bold; }
        #replay-columns { height: 1fr; }
        #replay-chat { width: 1fr; }
        #replay-memory { height: 1fr; }
        #replay-timeline { height: 2fr; }
        #replay-recall {
            height: auto;
            max-height: 12;
            border: round $border-blurred;
            border-title-color: $text-muted;
            background: $surface;
        }
        #replay-recall-text { padding: 0 1; color: $text; }
        #prompt, #command-hints, #memory-filter { display: none; }
        #replay-status, #chat-status { width: 1fr; }
        #replay-status { height: 1; color: $text; }
    }
    """

    def __init__(self, episode: Episode, *, clock: Callable[[], float] = time.monotonic, start: int = 0,
                 speed: float = 1.0) -> None:
        super().__init__()
        self.episode = episode
        self.player = Player(episode, clock=clock, start=start)
        self.player.speed = float(speed)
        self._timer: Timer | None = None
        self._shown: int | None = None  # the step the panes show

    def compose(self) -> ComposeResult:
        ep = self.episode
        where = Path(ep.source).name if ep.source.endswith(".jsonl") else ep.source  # a file, or live / archived
        yield Static(f"Replay · {ep.name} · {len(ep.steps)} steps · {ep.length_text()} · {where}",
                     id="replay-title", markup=False)
        with Horizontal(id="replay-columns"):
            yield ChatPane(id="replay-chat")
            with Vertical(id="replay-side"):
                yield ReplayMemoryPane(id="replay-memory")
                with VerticalScroll(id="replay-recall"):
                    yield Static("", id="replay-recall-text", markup=False)
                yield TimelinePane(id="replay-timeline")
        yield StatusBar(id="replay-status")
        yield Footer()

    def on_resize(self, event: events.Resize) -> None:
        self._layout(event.size.width)

    def _layout(self, total: int) -> None:
        side = self.query_one("#replay-side")
        width = side_width(total)
        side.styles.width = width
        side.display = width > 0

    def on_mount(self) -> None:
        self._layout(self.app.size.width)
        self.query_one("#replay-recall").border_title = "Recall"
        for problem in self.episode.problems:
            self.notify(f"unreadable {problem}", severity="warning", timeout=8)
        self.show_step()
        self.chat.transcript.focus()

    # ---------------------------------------------------------------- panes
    @property
    def chat(self) -> ChatPane:
        return self.query_one("#replay-chat", ChatPane)

    @property
    def memory(self) -> MemoryPane:
        return self.query_one("#replay-memory", MemoryPane)

    @property
    def timeline(self) -> TimelinePane:
        return self.query_one("#replay-timeline", TimelinePane)

    @property
    def status(self) -> StatusBar:
        return self.query_one("#replay-status", StatusBar)

    @property
    def position(self) -> int:
        return self.player.position

    # ---------------------------------------------------------------- drawing
    def show_step(self) -> None:
        """Bring every pane to the player's position (appending when it moved one step forward)."""
        player, episode = self.player, self.episode
        index = player.position
        state = player.state()
        if self._shown is not None and index == self._shown + 1:
            self.chat.add_turns(episode.transcript_of(index))
            events = episode.events_of(index)
            self.timeline.append_events(events)
            self.memory.append_events(events)
        elif index != self._shown:
            self.chat.set_turns(state.transcript)
            self.timeline.set_events(state.timeline)
            self.memory.set_events(state.timeline)
        self._shown = index
        if self.chat.transcript.has_turn(state.step.id):
            self.chat.transcript.select(state.step.id)
        memory = state.memory
        self.memory.set_entries("stm", memory.stm)
        self.memory.set_entries("ltm", memory.ltm)
        self.query_one("#replay-recall-text", Static).update(recall_text(memory))
        context = state.context
        self.chat.set_context(context.tokens, self.episode.config.model.context_window or 0)
        summary = (f" · turns {state.covered.describe()} summarized (compact {context.summary_id})"
                   if context.summary_id else "")
        redacted = f" · {len(context.redactions)} outputs redacted" if context.redactions else ""
        self.chat.set_status(f"model context: {len(context.messages)} messages{summary}{redacted}")
        self.chat.border_title = f"Chat · step {state.step.number}"
        self._update_status()

    def _update_status(self) -> None:
        player = self.player
        step = player.step_now
        total = len(self.episode.steps)
        mode = "▶ playing" if player.playing else ("■ end" if player.at_end else "❚❚ paused")
        # the label goes last: a long one is cut at the edge, the player's state never is
        self.status.set(left=f"step {step.number}/{total} · {mode} · {_speed_text(player.speed)} · "
                             f"{_clock_text(step.offset_s)}/{_clock_text(self.episode.steps[-1].offset_s)} · "
                             f"{step.label().strip()}")

    # ---------------------------------------------------------------- playback
    def _moved(self, changed: bool) -> None:
        if changed:
            self.show_step()
        else:
            self._update_status()
        self._schedule()

    def action_step(self, n: int) -> None:
        self._moved(self.player.step(n) if n > 0 else self.player.back(-n))

    def action_first(self) -> None:
        self._moved(self.player.seek(0))

    def action_last(self) -> None:
        self._moved(self.player.seek(len(self.episode.steps) - 1))

    def seek(self, index: int) -> None:
        """To step `index` (0-based); ReplayError outside the episode."""
        self._moved(self.player.seek(index))

    def action_toggle_play(self) -> None:
        player = self.player
        before = player.position
        player.toggle()
        self._moved(player.position != before)  # play at the end starts over

    def action_speed(self, direction: int) -> None:
        player = self.player
        faster = [s for s in SPEEDS if s > player.speed]
        slower = [s for s in SPEEDS if s < player.speed]
        if direction > 0 and faster:
            speed = faster[0]
        elif direction < 0 and slower:
            speed = slower[-1]
        else:
            return
        if player.playing:
            player.play(speed)  # re-anchors the clock at the new speed
        else:
            player.speed = speed
        self._moved(False)

    def tick(self) -> None:
        """Advance playback to wherever the player's clock says it is (the timer calls this)."""
        self._timer = None
        self._moved(self.player.tick())

    def _schedule(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        due = self.player.due_in()
        if due is not None:
            self._timer = self.set_timer(max(due, MIN_TICK_S), self.tick)

    def action_close(self) -> None:
        self.player.pause()
        self._schedule()
        self.dismiss()

    # ---------------------------------------------------------------- read-only
    @on(TimelinePane.EventSelected)
    def _jump(self, message: TimelinePane.EventSelected) -> None:
        turn_id = message.event.turn_id
        if turn_id and self.chat.transcript.has_turn(turn_id):
            self.chat.scroll_to_turn(turn_id)

    @on(BackendRequest)
    def _keep_out_of_the_backend(self, message: BackendRequest) -> None:
        message.stop()  # the live backend serves the live session, never a replay


def register_themes(app: App, wanted: str | None) -> list[str]:
    """Register the workstation themes on `app` and pick `wanted` (else the default); returns problems."""
    themes, problems = load_themes()
    for item in themes.values():
        app.register_theme(item)
    name = wanted or DEFAULT_THEME
    if name not in app.available_themes:
        problems.append(f"theme {name!r} is not installed; using {DEFAULT_THEME}")
        name = DEFAULT_THEME
    app.theme = name
    return problems


class ReplayApp(App):
    """`workstation replay SLUG`: one replay screen; closing it quits."""

    CSS_PATH = Path(__file__).parent.parent / "app.tcss"
    TITLE = "workstation replay"

    def __init__(self, episode: Episode, *, theme: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.episode = episode
        self.theme_problems = register_themes(self, theme or episode.config.ui.theme)

    def on_mount(self) -> None:
        for problem in self.theme_problems:
            self.notify(problem, severity="warning", timeout=8)
        self.push_screen(ReplayScreen(self.episode), lambda _: self.exit())


def run(episode: Episode) -> None:
    """Open a Textual app on a loaded `workstation.replay.Episode` until the user closes it."""
    ReplayApp(episode).run()
