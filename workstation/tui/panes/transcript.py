"""A virtualized transcript: thousands of turns in one Line API widget.

Nothing is a widget per turn. Each turn is rendered to Strips only when it is
on (or near) the screen, cached per (turn, width, expanded). Turns never
rendered carry an estimated height; when one is rendered its exact height
replaces the estimate, and if it lies above the top line on screen the scroll
position moves by the difference so the text being read does not jump.
Appending costs O(1): the estimate, a prefix sum and, when following the end,
a render of the tail on the next frame.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_right
from functools import partial
from itertools import accumulate

from rich.segment import Segment
from textual import events
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..viewdata import Turn, coerce
from . import turn_render
from .turn_render import EXPANDABLE, TurnStyles, estimate_height, foreground_only, render_turn

_GUTTER = 1


class Transcript(ScrollView, can_focus=True):
    """The conversation so far. Turn data goes in through `set_turns`/`append`."""

    BINDINGS = [
        Binding("up,k", "select_previous", "Prev turn", show=False),
        Binding("down,j", "select_next", "Next turn", show=False),
        Binding("enter,space", "toggle_turn", "Expand/collapse"),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Latest", show=False),
        Binding("pageup", "page_up", show=False),
        Binding("pagedown", "page_down", show=False),
    ]
    COMPONENT_CLASSES = {
        "transcript--user", "transcript--assistant", "transcript--meta", "transcript--tool",
        "transcript--tool-error", "transcript--marker", "transcript--redaction",
        "transcript--error", "transcript--notice", "transcript--cursor", "transcript--code",
        "transcript--added", "transcript--removed",
    }
    DEFAULT_CSS = """
    Transcript {
        background: $surface;
        color: $foreground;
        overflow-x: hidden;
        overflow-y: scroll;
        scrollbar-size-vertical: 1;
        & > .transcript--user { color: $text-primary; text-style: bold; }
        & > .transcript--assistant { color: $text-secondary; text-style: bold; }
        & > .transcript--meta { color: $text-muted; }
        & > .transcript--tool { color: $text-muted; }
        & > .transcript--tool-error { color: $text-error; }
        & > .transcript--marker { color: $text-accent; text-style: bold; }
        & > .transcript--redaction { color: $text-warning; text-style: italic; }
        & > .transcript--error { color: $text-error; text-style: bold; }
        & > .transcript--notice { color: $text-muted; text-style: italic; }
        & > .transcript--code { color: $text-accent; text-style: bold; }
        & > .transcript--added { color: $text-success; }
        & > .transcript--removed { color: $text-error; }
        & > .transcript--cursor { color: $text-muted; }
        &:focus > .transcript--cursor { color: $accent; }
    }
    """

    class TurnActivated(Message):
        """Enter on a turn; `turn.role == "redaction"` asks for the original text."""

        def __init__(self, transcript: "Transcript", index: int, turn: Turn) -> None:
            super().__init__()
            self.transcript = transcript
            self.index = index
            self.turn = turn

        @property
        def control(self) -> "Transcript":
            return self.transcript

    def __init__(self, *, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._turns: list[Turn] = []
        self._ids: dict[str, int] = {}
        self._heights: list[int] = []
        self._exact = bytearray()  # 1 where _heights[i] was measured at _width
        self._offsets: list[int] = [0]  # _offsets[i] = first line of turn i
        self._expanded: set[int] = set()
        self._strips: LRUCache[tuple[int, int, bool], list[Strip]] = LRUCache(1024)
        self._width = 0  # width turns are laid out at (without the gutter)
        self._follow = True  # keep the newest turn in view
        self._adjusting = False  # scroll changes made by the layout, not the user
        self._styles: TurnStyles | None = None
        self._signature: tuple | None = None  # the colours the cached strips were drawn with
        self._warming = False
        self.cursor = -1  # selected turn, -1 for none

    # ----------------------------------------------------------------- data in
    @property
    def turns(self) -> list[Turn]:
        return self._turns

    def __len__(self) -> int:
        return len(self._turns)

    def set_turns(self, turns) -> None:
        """Replace every turn (Turn objects or mappings of Turn fields)."""
        self._turns = []
        self._ids.clear()
        self._heights = []
        self._offsets = [0]
        self._exact = bytearray()
        self._expanded.clear()
        self._strips.clear()
        self.cursor = -1
        self._follow = True
        self.extend(turns)

    def append(self, turn) -> int:
        """Add one turn at the end; returns its index."""
        self.extend([turn])
        return len(self._turns) - 1

    def extend(self, turns) -> None:
        new = [coerce(Turn, t) for t in turns]
        if not new:
            return
        start = len(self._turns)
        self._turns.extend(new)
        for i, turn in enumerate(new, start):
            if turn.id:
                self._ids[turn.id] = i
            self._heights.append(self._estimate(turn, False))
        self._exact.extend(bytes(len(new)))
        self._offsets.extend(accumulate(self._heights[start:], initial=self._offsets[start]))
        del self._offsets[start + 1]  # accumulate repeats the start offset
        self._update_virtual_size()
        self.refresh()

    def insert(self, index: int, turns) -> None:
        """Put turns before turn `index` (at the end when it is past the last): a record another process
        appended, in its place in the log."""
        if index >= len(self._turns):
            self.extend(turns)
            return
        new = [coerce(Turn, t) for t in turns]
        if not new:
            return
        n = len(new)
        self._turns[index:index] = new
        self._heights[index:index] = [self._estimate(turn, False) for turn in new]
        self._exact[index:index] = bytes(n)
        self._expanded = {i + n if i >= index else i for i in self._expanded}
        self._ids.clear()
        for i, turn in enumerate(self._turns):  # later turns of one id win, as in extend
            if turn.id:
                self._ids[turn.id] = i
        self._strips.clear()  # keyed by index: every turn from `index` on moved
        if self.cursor >= index:
            self.cursor += n
        self._rebuild_offsets(index)
        self._update_virtual_size()
        self.refresh()

    def update_turn(self, key: int | str, turn) -> None:
        """Replace a turn in place, by index or id (a tool result arriving later)."""
        i = self.index_of(key)
        new = coerce(Turn, turn)
        old_id = self._turns[i].id
        if old_id and self._ids.get(old_id) == i:
            del self._ids[old_id]
        self._turns[i] = new
        if new.id:
            self._ids[new.id] = i
        self._invalidate_turn(i)

    def mark_taken_back(self, marks: dict[str, str]) -> None:
        """Say of each turn with an id what took it back (`marks`: id -> "taken back by /rewind 3"); a
        turn not among them stands (its mark goes)."""
        changed = []
        for turn_id, i in self._ids.items():
            mark = marks.get(turn_id, "")
            if self._turns[i].taken_back != mark:
                self._turns[i] = dataclasses.replace(self._turns[i], taken_back=mark)
                changed.append(i)
        for i in changed:
            for expanded in (False, True):
                self._strips.discard((i, self._width, expanded))
            self._exact[i] = 0
            self._heights[i] = self._estimate(self._turns[i], i in self._expanded)
        if changed:
            self._rebuild_offsets(min(changed))
            self._update_virtual_size()
            self.refresh()

    def has_turn(self, turn_id: str) -> bool:
        return turn_id in self._ids

    def index_of(self, key: int | str) -> int:
        if isinstance(key, str):
            if key not in self._ids:
                raise KeyError(f"no turn with id {key!r}")
            return self._ids[key]
        if not -len(self._turns) <= key < len(self._turns):
            raise IndexError(f"turn {key} is out of range (0-{len(self._turns) - 1})")
        return key % len(self._turns)

    def is_expanded(self, index: int) -> bool:
        return index in self._expanded

    def set_expanded(self, key: int | str, expanded: bool) -> None:
        i = self.index_of(key)
        if self._turns[i].role not in EXPANDABLE or (i in self._expanded) == expanded:
            return
        if expanded:
            self._expanded.add(i)
        else:
            self._expanded.discard(i)
        self._invalidate_turn(i)

    def select(self, key: int | str, *, top: bool = False) -> None:
        """Move the cursor to a turn and scroll it into view (`top`: to the top line)."""
        i = self.index_of(key)
        old, self.cursor = self.cursor, i
        self._refresh_turn(old)
        self._refresh_turn(i)
        self._scroll_to_turn(i, top=top)

    def line_of(self, index: int) -> int:
        """First virtual line of a turn (estimated until the turn has been rendered)."""
        return self._offsets[index]

    def turn_at_line(self, y: int) -> int | None:
        if not self._turns or y < 0 or y >= self._offsets[-1]:
            return None
        return bisect_right(self._offsets, y) - 1

    # -------------------------------------------------------------- layout
    def _estimate(self, turn: Turn, expanded: bool) -> int:
        return estimate_height(turn, expanded, self._width)

    def _rebuild_offsets(self, start: int = 0) -> None:
        del self._offsets[start + 1:]
        self._offsets.extend(accumulate(self._heights[start:], initial=self._offsets[start]))
        del self._offsets[start + 1]

    def _update_virtual_size(self) -> None:
        self.virtual_size = Size(self._width + _GUTTER, self._offsets[-1])

    def _invalidate_turn(self, i: int) -> None:
        for expanded in (False, True):
            self._strips.discard((i, self._width, expanded))
        self._exact[i] = 0
        self._heights[i] = self._estimate(self._turns[i], i in self._expanded)
        self._rebuild_offsets(i)
        self._update_virtual_size()
        self.refresh()

    def _refresh_turn(self, i: int) -> None:
        if 0 <= i < len(self._turns):
            self.refresh_lines(self._offsets[i], self._heights[i])

    def _measure(self, i: int) -> int:
        height = len(self._render_turn(i))
        if not self._exact[i] or self._heights[i] != height:
            self._exact[i] = 1
            delta = height - self._heights[i]
            self._heights[i] = height
            return delta
        return 0

    def _layout_visible(self) -> None:
        """Render what is on screen (and a screen either side) so heights are exact there."""
        if not self._turns or not self._width:
            return
        view = self.scrollable_content_region.height or self.size.height
        self._adjusting = True
        try:
            if self._follow:
                self._measure_tail(view)
                self._scroll_end_now()
                return
            for _ in range(3):  # converge: a changed height can bring new turns into view
                top = round(self.scroll_y)
                anchor = self.turn_at_line(min(top, self._offsets[-1] - 1))
                first = self.turn_at_line(max(0, top - view)) or 0
                above = 0
                changed = first
                found = False
                i, y = first, self._offsets[first]
                while i < len(self._turns) and y < top + 2 * view:
                    if not self._exact[i]:
                        delta = self._measure(i)
                        if delta:
                            if not found:
                                changed, found = i, True
                            if anchor is not None and i < anchor:
                                above += delta
                    y += self._heights[i]
                    i += 1
                if not found:
                    return
                self._rebuild_offsets(changed)
                self._update_virtual_size()
                if above:
                    self.scroll_to(y=top + above, animate=False, immediate=True)
        finally:
            self._adjusting = False

    def _measure_tail(self, lines: int) -> None:
        i, seen, first_changed = len(self._turns) - 1, 0, None
        while i >= 0 and seen < lines:
            if not self._exact[i] and self._measure(i):
                first_changed = i
            seen += self._heights[i]
            i -= 1
        if first_changed is not None:
            self._rebuild_offsets(i + 1)
            self._update_virtual_size()

    def _scroll_end_now(self) -> None:
        self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True)

    def _scroll_to_turn(self, i: int, *, top: bool) -> None:
        self._follow = False
        # measure the turn and what follows it so the target line is exact
        view = self.scrollable_content_region.height or self.size.height or 24
        j, seen, changed = i, 0, None
        while j < len(self._turns) and seen < view:
            if self._measure(j) and changed is None:
                changed = j
            seen += self._heights[j]
            j += 1
        if changed is not None:
            self._rebuild_offsets(changed)
            self._update_virtual_size()
        start, height = self._offsets[i], self._heights[i]
        scroll = round(self.scroll_y)
        if top or start < scroll:
            target = start
        elif start + height > scroll + view:
            target = min(start, start + height - view)
        else:
            return
        self._adjusting = True
        try:
            self.scroll_to(y=target, animate=False, immediate=True)
        finally:
            self._adjusting = False
        self._follow = self.scroll_y >= self.max_scroll_y and i == len(self._turns) - 1

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if not self._adjusting:
            self._follow = round(new) >= self.max_scroll_y

    def on_resize(self, event: events.Resize) -> None:
        width = max(1, self.scrollable_content_region.width - _GUTTER)
        if width == self._width:
            return
        anchor = self.turn_at_line(round(self.scroll_y))
        self._width = width
        self._strips.clear()
        self._heights = [self._estimate(t, i in self._expanded) for i, t in enumerate(self._turns)]
        self._exact = bytearray(len(self._turns))
        self._rebuild_offsets()
        self._update_virtual_size()
        if not self._follow and anchor is not None:
            self._scroll_to_turn(anchor, top=True)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = None  # re-read on the next frame; strips go only if colours changed

    # ------------------------------------------------------------ rendering
    def render_lines(self, crop: Region) -> list[Strip]:
        signature = (self.rich_style, self._turn_styles(), self.app.current_theme.dark)
        if signature != self._signature:  # a theme change, not a mere focus change
            self._signature = signature
            self._strips.clear()
        self._layout_visible()
        strips = super().render_lines(crop)
        if not self._warming and (missing := turn_render.wanted()):
            self._warming = True  # load after this frame is on screen, not during it
            self.call_after_refresh(self._warm, missing)
        return strips

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style
        line = round(self.scroll_y) + y
        i = self.turn_at_line(line)
        if i is None or not self._width:  # not laid out yet
            return Strip.blank(width, base)
        strips = self._render_turn(i)
        k = line - self._offsets[i]
        body = strips[k] if k < len(strips) else Strip.blank(self._width, base)
        if i == self.cursor:
            gutter = Strip([Segment("▌", self.get_component_rich_style("transcript--cursor"))], 1)
        else:
            gutter = Strip.blank(_GUTTER, base)
        return Strip.join([gutter, body]).crop_extend(0, width, base)

    def _render_turn(self, i: int) -> list[Strip]:
        expanded = i in self._expanded
        key = (i, self._width, expanded)
        cached = self._strips.get(key)
        if cached is not None:
            return cached
        base = self.rich_style
        console = self.app.console
        options = console.options.update(width=self._width, highlight=False, markup=False)
        renderable = render_turn(self._turns[i], expanded, self._width, self._turn_styles(),
                                 self.app.current_theme.dark)
        lines = console.render_lines(renderable, options, style=base, pad=True)
        strips = [Strip(line, self._width) for line in lines] or [Strip.blank(self._width, base)]
        self._strips[key] = strips
        return strips

    def _turn_styles(self) -> TurnStyles:
        if self._styles is None:
            get = self.get_component_rich_style
            self._styles = TurnStyles(*(foreground_only(get(f"transcript--{name.replace('_', '-')}"))
                                        for name in TurnStyles._fields))
        return self._styles

    @property
    def warming(self) -> bool:
        """True while markdown or a lexer loads; the visible turns render again after."""
        return self._warming

    def _warm(self, names: set[str]) -> None:
        self.run_worker(partial(self._warm_in_thread, names), thread=True,
                        group="transcript-warm", name="load markdown and lexers")

    def _warm_in_thread(self, names: set[str]) -> None:
        try:
            for name in sorted(names, key=lambda n: n != turn_render.MARKDOWN):
                turn_render.warm(name)
        finally:
            self.app.call_from_thread(self._warmed)

    def _warmed(self) -> None:
        self._warming = False
        # markdown may change heights: keep them as estimates, re-measure what is seen
        self._strips.clear()
        self._exact = bytearray(len(self._turns))
        self.refresh()

    # -------------------------------------------------------------- actions
    def action_select_previous(self) -> None:
        if self._turns:
            self.select(len(self._turns) - 1 if self.cursor < 0 else max(0, self.cursor - 1))

    def action_select_next(self) -> None:
        if self._turns:
            self.select(min(len(self._turns) - 1, self.cursor + 1))

    def action_toggle_turn(self) -> None:
        if not 0 <= self.cursor < len(self._turns):
            return
        turn = self._turns[self.cursor]
        self.set_expanded(self.cursor, self.cursor not in self._expanded)
        self._scroll_to_turn(self.cursor, top=False)
        self.post_message(self.TurnActivated(self, self.cursor, turn))

    def action_first(self) -> None:
        if self._turns:
            self.select(0, top=True)

    def action_last(self) -> None:
        if self._turns:
            old, self.cursor = self.cursor, -1
            self._refresh_turn(old)
        self._follow = True
        self.refresh()

    def action_page_up(self) -> None:
        self.scroll_page_up(animate=False)

    def action_page_down(self) -> None:
        self.scroll_page_down(animate=False)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None:
            i = self.turn_at_line(round(self.scroll_y) + offset.y)
            if i is not None:
                self.select(i)

