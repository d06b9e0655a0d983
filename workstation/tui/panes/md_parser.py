"""The markdown parser of the chat (the transcript's Rich markdown and the reply being streamed).

CommonMark reads `__init__.py` as **init**.py and `self.__dict__` as self.**dict**: a double
underscore that follows a space or punctuation opens strong emphasis. In a coding agent's chat
a word wrapped in double underscores is nearly always a Python name, so one inline rule, tried
before emphasis, keeps `__name__` (letters, digits and underscores only, not inside a word) as
the text it is. Bold written with underscores around more than one word (`__two words__`) is
still bold, as is anything written with asterisks.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.rules_inline import StateInline

_DUNDER = re.compile(r"__[A-Za-z0-9][A-Za-z0-9_]*?__(?![A-Za-z0-9])")


def _dunder(state: StateInline, silent: bool) -> bool:
    src, pos = state.src, state.pos
    if not src.startswith("__", pos) or (pos and (src[pos - 1].isalnum() or src[pos - 1] == "_")):
        return False
    found = _DUNDER.match(src, pos)
    if found is None:
        return False
    if not silent:
        state.push("text", "", 0).content = found.group(0)
    state.pos = found.end()
    return True


def with_names_kept(parser: MarkdownIt) -> MarkdownIt:
    """`parser` with the rule that keeps `__name__` as text (see the module docstring)."""
    parser.inline.ruler.before("emphasis", "dunder_name", _dunder)
    return parser


def rich_parser() -> MarkdownIt:
    """What Rich's Markdown parses with (commonmark, strikethrough, tables), names kept."""
    from markdown_it import MarkdownIt  # lazy: markdown-it, loaded with the markdown it parses

    return with_names_kept(MarkdownIt().enable("strikethrough").enable("table"))


def textual_parser() -> MarkdownIt:
    """What Textual's Markdown widget parses with ("gfm-like"), names kept: its `parser_factory`."""
    from markdown_it import MarkdownIt  # lazy: markdown-it, loaded with the markdown it parses

    return with_names_kept(MarkdownIt("gfm-like"))
