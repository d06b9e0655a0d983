"""How one transcript turn looks: a Rich renderable built from a Turn.

Pure Rich, no widget. Two costs must stay out of the first paint: importing
Rich's markdown (markdown-it, ~50 ms) and building a pygments lexer's regexes
(~100 ms for Python). Until they are loaded, replies show as plain text and code
blocks unhighlighted; what was missing is listed by `wanted()`, and the
transcript loads it with `warm()` in a thread after the frame, then renders again.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from functools import lru_cache
from typing import NamedTuple

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.style import Style
from rich.styled import Styled
from rich.text import Text
from rich.theme import Theme

from ...lsp import block_of
from ...terminal import safe
from ..viewdata import Turn, human_count
from .md_parser import rich_parser

EXPANDABLE = frozenset({"tool", "compaction", "redaction"})
SEPARATED = frozenset({"user", "assistant", "system", "command", "compaction"})  # blank line before
COLOURED = frozenset({"run_command"})  # tools whose result is a program's output, shown with its colours
MAX_EXPANDED_LINES = 400  # an expanded tool result beyond this is cut with a note
INDENT = 2
LABELS = {"user": "you", "assistant": "assistant", "system": "system", "command": "command"}
TAKEN_MARK = "↶"  # before what took a turn back (a rewind, an undo)
TAKEN_STYLE = Style(dim=True)  # a taken-back turn is dimmed whole
OUTCOME_ROOM = 32  # cells a tool line keeps for its outcome before its label is cut

MARKDOWN = "markdown"  # the wanted() name for Rich's markdown module; others are lexers
_ready: set[str] = {"text", ""}
_wanted: set[str] = set()
_lock = threading.Lock()


def foreground_only(style: Style) -> Style:
    """A component's colour and attributes without its background.

    Partial component styles leave `auto`/alpha colours ($text-muted) unresolved,
    and full ones carry the widget background over cursor highlights.
    """
    return Style(color=style.color, bold=style.bold, italic=style.italic, dim=style.dim,
                 underline=style.underline, strike=style.strike, reverse=style.reverse)


class TurnStyles(NamedTuple):
    user: Style
    assistant: Style
    meta: Style
    tool: Style
    tool_error: Style
    marker: Style
    redaction: Style
    error: Style
    notice: Style
    code: Style  # inline code in replies
    added: Style  # a diff's added lines
    removed: Style  # a diff's removed lines


def render_turn(turn: Turn, expanded: bool, width: int, styles: TurnStyles, dark: bool) -> RenderableType:
    # a command's output keeps its colours in the expanded call (terminal.safe keeps colour SGR only)
    coloured = safe(turn.result, colours=True) if turn.role == "tool" and turn.tool in COLOURED else None
    turn = shown(turn)
    role = turn.role
    parts: list[RenderableType] = [Text("")] if role in SEPARATED else []
    if role in LABELS:
        header = Text(LABELS[role], styles.user if role == "user" else styles.assistant)
        if role == "user" and turn.number:
            header.append(f" · turn {turn.number}", styles.user)
        header.append(_meta(turn), styles.meta)
        if turn.taken_back:
            header.append(f"  {TAKEN_MARK} {turn.taken_back}", styles.notice)
        parts.append(header)
        if role == "assistant":
            body: RenderableType = markdown(turn.text, dark, styles.code)
        else:
            body = Text(turn.text, styles.meta if role == "system" else Style())
        parts.append(Padding(body, (0, 0, 0, INDENT)))
    elif role == "tool":
        parts.append(_tool_line(turn, expanded, styles, width))
        if not expanded and (checked := block_of(turn.result)):  # the language server's word on an edit
            parts.append(Padding(_lsp_text(checked, styles), (0, 0, 0, INDENT + 2)))
        if expanded:
            parts.append(Padding(_tool_details(turn, styles.meta, coloured), (0, 0, 0, INDENT + 2)))
            if turn.diff:
                parts.append(Padding(diff_text(turn.diff, styles), (0, 0, 0, INDENT + 2)))
    elif role == "compaction":
        rule = Text(f"━━ ⟲ {turn.text} ", styles.marker, no_wrap=True, overflow="ellipsis")
        rule.append("━" * max(0, width - rule.cell_len - 2) + (" ▾" if expanded else " ▸"))
        parts.append(rule)
        if expanded and turn.result:
            parts.append(Padding(markdown(turn.result, dark, styles.code), (0, 0, 0, INDENT)))
    elif role == "redaction":
        parts.append(Text(f"▒ {turn.text}", styles.redaction))
        if expanded and turn.result:
            parts.append(Padding(Text(_cut(turn.result)), (0, 0, 0, INDENT)))
    elif role == "error":
        parts.append(Text(f"✗ {turn.text}", styles.error))
    else:  # notice
        parts.append(Text(f"· {turn.text}", styles.notice))
    group = Group(*parts)
    return Styled(group, TAKEN_STYLE) if turn.taken_back else group


def shown(turn: Turn) -> Turn:
    """`turn` with every control sequence in its text shown, never obeyed (an OSC 52 in an imported
    transcript would set the clipboard: Rich and Textual strip BEL and CR, not ESC)."""
    fields = {name: safe(value) for name in ("text", "result", "diff", "tool")
              if isinstance(value := getattr(turn, name), str) and safe(value) is not value}
    if isinstance(turn.args, str) and safe(turn.args) is not turn.args:
        fields["args"] = safe(turn.args)
    return dataclasses.replace(turn, **fields) if fields else turn


def estimate_height(turn: Turn, expanded: bool, width: int) -> int:
    """A cheap guess of the rendered height, replaced by the real one once rendered."""
    if turn.role in ("tool", "notice") and not expanded:
        return 1
    width = max(8, width - INDENT) if width else 80
    body = turn.text if not expanded else f"{turn.text}\n{turn.result}\n{turn.diff}"
    lines = body.count("\n") + 1 + len(body) // width
    return lines + (2 if turn.role in SEPARATED else 0)


# ------------------------------------------------------------ markdown + lexers
def markdown(text: str, dark: bool, code: Style | None = None) -> RenderableType:
    if MARKDOWN not in _ready:
        _want(MARKDOWN)
        return Text(text)
    return _markdown_class()(text, code_theme="monokai" if dark else "default", hyperlinks=False,
                             inline_code_style=code)


def _want(name: str) -> None:
    with _lock:
        _wanted.add(name)


def wanted() -> set[str]:
    """What rendering missed since the last call; pass each name to `warm`."""
    with _lock:
        names = _wanted - _ready
        _wanted.clear()
    return names


def warm(name: str) -> None:
    """Load Rich's markdown or build a lexer's tables (thread-safe, idempotent)."""
    if name == MARKDOWN:
        _markdown_class()
    else:
        from pygments.lexers import get_lexer_by_name  # lazy: pygments, +6 ms; warm() loads it after the first frame
        from pygments.util import ClassNotFound  # lazy: pygments; warm() loads it after the first frame

        try:
            get_lexer_by_name(name)  # pygments keeps the built tables on the class
        except ClassNotFound:
            pass  # Syntax shows an unknown language as plain text anyway
    with _lock:
        _ready.add(name)


@lru_cache(maxsize=1)
def _markdown_class():
    from rich.markdown import CodeBlock, Markdown  # lazy: markdown-it, +60 ms; warm() loads it after the first frame
    from rich.syntax import Syntax  # lazy: pygments, +10 ms; warm() loads it after the first frame

    parser = rich_parser()

    class DeferredCodeBlock(CodeBlock):
        def __rich_console__(self, console, options):
            lexer = self.lexer_name
            if lexer not in _ready:
                _want(lexer)
                lexer = "text"
            yield Syntax(str(self.text).rstrip(), lexer, theme=self.theme, word_wrap=True, padding=1)

    class HistoryMarkdown(Markdown):
        elements = {**Markdown.elements, "fence": DeferredCodeBlock, "code_block": DeferredCodeBlock}

        def __init__(self, text: str, *, inline_code_style: Style | None = None, **kwargs) -> None:
            super().__init__("", **kwargs)
            self.markup = text
            self.parsed = parser.parse(text)  # Rich's own parser, `__init__.py` kept as written (md_parser)
            self.inline_code_style = inline_code_style

        def __rich_console__(self, console, options):
            if self.inline_code_style is None:
                yield from super().__rich_console__(console, options)
                return
            # Rich styles inline code from the console theme ("bold cyan on black"): use ours
            with console.use_theme(Theme({"markdown.code": self.inline_code_style})):
                yield from super().__rich_console__(console, options)

    return HistoryMarkdown


# --------------------------------------------------------------------- pieces
def _meta(turn: Turn) -> str:
    bits = []
    if turn.ts is not None:
        bits.append(time.strftime("%H:%M:%S", time.localtime(turn.ts)))
    if turn.tokens is not None:
        bits.append(f"{human_count(turn.tokens)} tok")
    return ("  " + " · ".join(bits)) if bits else ""


def _tool_line(turn: Turn, expanded: bool, styles: TurnStyles, width: int = 0) -> Text:
    """`▸ ✓ edit_file(a.py) → +3 −1`: the call as its tool labels it, then what it came to; the label is
    cut first when the line is too long, so the outcome stays in view."""
    line = Text(no_wrap=True, overflow="ellipsis")
    line.append(f"{'▾' if expanded else '▸'} ", styles.meta)
    line.append("✓ " if turn.ok else "✗ ", styles.tool if turn.ok else styles.tool_error)
    label = turn.text or f"{turn.tool}({safe(args_summary(turn.args))})"
    outcome = turn.outcome or (_first_line(turn.result) if not turn.ok else _result_summary(turn.result))
    taken = f"  {TAKEN_MARK} {turn.taken_back}" if turn.taken_back else ""  # kept whole: the label is cut first
    room = width - line.cell_len - min(len(f" → {outcome}"), OUTCOME_ROOM) - len(taken)
    if width and len(label) > room:  # the arguments go first, then the tool's name stands alone
        label = label[: room - 1] + "…" if room > len(turn.tool) + 4 else turn.tool
    line.append(label, styles.tool)
    line.append(f" → {outcome}", styles.meta if turn.ok else styles.tool_error)
    line.append(taken, styles.notice)
    return line


def _lsp_text(block: str, styles: TurnStyles) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    for line in safe(block).splitlines():
        text.append(line + "\n", styles.tool if line.startswith("lsp: fixed") else styles.tool_error)
    text.rstrip()
    return text


def args_summary(args, limit: int = 60) -> str:
    if args is None:
        return ""
    if isinstance(args, dict):
        text = ", ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in args.items())
    else:
        text = str(args)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _result_summary(result: str) -> str:
    if not result:
        return "no output"
    lines = result.count("\n") + 1
    if lines > 1:
        return f"{lines} lines, {human_count(len(result))} chars"
    return result if len(result) <= 40 else f"{human_count(len(result))} chars"


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0] or "failed"


def diff_text(diff: str, styles: TurnStyles) -> Text:
    """A unified diff coloured: added lines, removed lines, hunk headers; cut like any expanded result."""
    text = Text(no_wrap=False)
    for line in _cut(diff).splitlines():
        if line.startswith(("+++", "---")):
            style = styles.meta
        elif line.startswith("+"):
            style = styles.added
        elif line.startswith("-"):
            style = styles.removed
        elif line.startswith("@@"):
            style = styles.marker
        else:
            style = Style()
        text.append(line + "\n", style)
    text.rstrip()
    return text


def _tool_details(turn: Turn, style: Style, coloured: str | None = None) -> Text:
    """The call's arguments, each on its own line and a text of several lines as it reads (never as
    escaped JSON), then its result; `coloured`: the result with its colour SGR kept (a command's), shown
    as colours. With a diff (shown below, coloured) neither the text an edit wrote nor the diff in its
    result is repeated here."""
    lines = ["arguments:"]
    if isinstance(turn.args, dict):
        for key, value in turn.args.items():
            if isinstance(value, str) and "\n" in value:
                if turn.diff:
                    lines.append(f"  {key}: {value.count(chr(10)) + 1} lines (in the diff below)")
                else:
                    lines.append(f"  {key}:")
                    lines.extend(f"    {line}" for line in _cut(value).splitlines())
            elif isinstance(value, str):
                lines.append(f"  {key}: {value}")
            else:
                lines.append(f"  {key}: {json.dumps(value, ensure_ascii=False, default=str)}")
    elif isinstance(turn.args, list):
        lines.append(json.dumps(turn.args, indent=2, ensure_ascii=False, default=str))
    elif turn.args is not None:
        lines.append(f"  {turn.args}")
    lines.append("result:")
    if coloured is None:
        result = _without_diff(turn.result) if turn.diff else turn.result
        return Text(safe("\n".join(lines + [_cut(result)])), style)
    text = Text(safe("\n".join(lines) + "\n"), style)
    text.append_text(Text.from_ansi(_cut(coloured), style=style))
    return text


def _without_diff(result: str) -> str:
    """An edit's result without the hunks it shows the model (from its first `@@` line on)."""
    kept = []
    for line in result.splitlines():
        if line.startswith("@@"):
            break
        kept.append(line)
    return "\n".join(kept)


def _cut(text: str) -> str:
    lines = text.splitlines()
    if len(lines) <= MAX_EXPANDED_LINES:
        return text
    rest = len(lines) - MAX_EXPANDED_LINES
    return "\n".join(lines[:MAX_EXPANDED_LINES]) + f"\n… {rest} more lines"
