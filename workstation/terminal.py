"""Text we did not write, made safe to print on a terminal.

A transcript, a file or a model reply can hold escape sequences that a terminal obeys: OSC 52 sets the
clipboard (`curl … | sh` pasted later), OSC 0 the window title, CSI 2J clears the screen, a lone
carriage return overwrites what was printed. `safe` keeps printable text, newlines and tabs and shows
every other C0 and C1 control visibly (ESC as `^[`, BEL as `^G`, DEL as `^?`, a C1 control as `<U+009B>`),
so the sequence is readable and nothing is obeyed (`safe(..., colours=True)` keeps the SGR sequences that
only set colours, for a command's output in the app). JSON output never goes through it: it stays exact
(the JSON encoder escapes controls itself).

What cannot be encoded for the terminal at all (a lone surrogate such as `\ud800`, legal in JSON and so in
an imported transcript; a character the locale's encoding lacks) is written as its escape (`\ud800`) by
the output streams themselves (`escape_unencodable`, set once as the command line starts): text, tables
and JSON alike, where in JSON the escape is the same character written exactly.
"""

from __future__ import annotations

import re
from typing import Any

_CONTROL = re.compile(r"\r\n|[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_OR_SGR = re.compile(r"\x1b\[[0-9;]{0,48}m|\r\n|[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# SGR parameters kept with colours=True: reset, bold, dim, italic, underline and their resets, the 8/16
# colours and default colours; 38 and 48 (256 and RGB colours) are checked with their arguments. Blink
# (5, 6), reverse (7) and conceal (8, which would hide text the model reads from the user) are not kept.
_SGR_KEPT = frozenset({0, 1, 2, 3, 4, 22, 23, 24, 39, 49, *range(30, 38), *range(40, 48), *range(90, 98),
                       *range(100, 108)})


def _colour_only(sequence: str) -> bool:
    params = [int(p) if p else 0 for p in sequence[2:-1].split(";")]
    i = 0
    while i < len(params):
        if params[i] in (38, 48):
            if params[i + 1:i + 2] == [5] and len(params) > i + 2 and params[i + 2] < 256:
                i += 3
            elif params[i + 1:i + 2] == [2] and len(params) > i + 4 and max(params[i + 2:i + 5]) < 256:
                i += 5
            else:
                return False
        elif params[i] in _SGR_KEPT:
            i += 1
        else:
            return False
    return True


def _shown(match: re.Match[str]) -> str:
    char = match.group()
    if len(char) > 2:  # an SGR sequence (colours=True)
        return char if _colour_only(char) else "^[" + char[1:]
    if char == "\r\n":
        return "\n"  # a Windows line end is a line end
    code = ord(char)
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    return f"<U+{code:04X}>"


def safe(text: str, *, colours: bool = False) -> str:
    """`text` with every control but newline and tab shown, never obeyed (see the module docstring).
    colours=True keeps SGR sequences that only set colours and bold/dim/italic/underline (a command's
    coloured output, which the app shows as colours); every other sequence is shown as before."""
    pattern = _CONTROL_OR_SGR if colours else _CONTROL
    return pattern.sub(_shown, text) if _CONTROL.search(text) else text


def escape_unencodable(*streams: Any) -> None:
    """Make each text stream write what its encoding cannot hold as a backslash escape, not raise."""
    for stream in streams:
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


# Terminals that show OSC 9 as a desktop notification (iTerm2, WezTerm, Ghostty, kitty); any other gets the bell,
# which every terminal (and tmux, which passes no OSC 9 through) turns into whatever its user chose.
OSC9_PROGRAMS = frozenset({"iTerm.app", "WezTerm", "ghostty"})


def attention(message: str, environ: dict[str, str]) -> str:
    """What to write to the terminal to call its user (a finished turn, a pending approval): OSC 9 with
    `message` where the terminal shows it as a notification, else the bell."""
    inside_tmux = bool(environ.get("TMUX"))
    osc9 = environ.get("TERM_PROGRAM") in OSC9_PROGRAMS or bool(environ.get("KITTY_WINDOW_ID"))
    if osc9 and not inside_tmux:
        text = re.sub(r"[\x00-\x1f\x7f-\x9f]", " ", message)[:200]  # no sequence of its own, no line break
        return f"\x1b]9;{text}\x07"
    return "\a"
