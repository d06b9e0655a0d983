"""Column widths: shares of the terminal's width with minimums, the chat's first (no textual here).

From 80 columns up the chat keeps at least MIN_CHAT: the app's three columns (`column_widths`) and the
replay screen's two (`side_width`).
"""

from __future__ import annotations

MIN_MAP = 20  # columns, while the terminal has room for them beside the chat's minimum
MIN_SIDE = 24
MIN_CHAT = 40
HIDE_BELOW = 12  # a side column squeezed narrower than this is hidden (terminals under 80 columns)
MAP_SHARE = 0.2  # of the terminal's width, until the user resizes
SIDE_SHARE = 0.3


def column_widths(total: int, map_share: float, side_share: float) -> tuple[int, int, int]:
    """(map, chat, side) widths for a terminal `total` columns wide.

    Each side column takes its share of the width, at least its minimum; the chat
    takes the rest, at least MIN_CHAT: when the sides would leave it less, they
    shrink together, and one left narrower than HIDE_BELOW is hidden (width 0).
    """
    map_w = max(MIN_MAP, round(total * map_share))
    side_w = max(MIN_SIDE, round(total * side_share))
    room = max(0, total - MIN_CHAT)
    if map_w + side_w > room:
        map_w = room * map_w // (map_w + side_w)
        side_w = room - map_w
    map_w = 0 if map_w < HIDE_BELOW else map_w
    side_w = 0 if side_w < HIDE_BELOW else side_w
    return map_w, total - map_w - side_w, side_w


SIDE_WIDTH = 58  # the replay screen's memory, recall and timeline column, while the chat keeps MIN_CHAT beside it


def side_width(total: int) -> int:
    """The replay screen's side column on a screen `total` columns wide: SIDE_WIDTH, less where the chat
    would get under MIN_CHAT (80 columns: 40 and 40), none once it would be narrower than HIDE_BELOW."""
    width = min(SIDE_WIDTH, max(0, total - MIN_CHAT))
    return 0 if width < HIDE_BELOW else width
