"""Text we did not write, made safe to print on a terminal.

A transcript, a file or a model reply can hold escape sequences that a terminal obeys: OSC 52 sets the
clipboard (`curl … | sh` pasted later), OSC 0 the window title, CSI 2J clears the screen, a lone
carriage return overwrites what was printed. `safe` keeps printable text, newlines and tabs and shows
every other C0 and C1 control visibly (ESC as `^[`, BEL as `^G`, DEL as `^?`, a C1 control as `<U+009B>`),
so the sequence is readable and nothing is obeyed. JSON output never goes through it: it stays exact
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


def _shown(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\r\n":
        return "\n"  # a Windows line end is a line end
    code = ord(char)
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    return f"<U+{code:04X}>"


def safe(text: str) -> str:
    """`text` with every control but newline and tab shown, never obeyed (see the module docstring)."""
    return _CONTROL.sub(_shown, text) if _CONTROL.search(text) else text


def escape_unencodable(*streams: Any) -> None:
    """Make each text stream write what its encoding cannot hold as a backslash escape, not raise."""
    for stream in streams:
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
