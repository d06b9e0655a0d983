"""A command's colours in the app (issue 19): the SGR colour sequences of run_command output are shown as
colours in the expanded tool call; every other escape in it (a clipboard write, a title, a screen clear, a
hidden-text or blinking SGR) is still shown as text, never obeyed."""

from __future__ import annotations

import os

from rich.console import Console
from rich.style import Style

from workstation.terminal import safe
from workstation.tui.panes.turn_render import TurnStyles, render_turn
from workstation.tui.viewdata import Turn

OUTPUT = ("\x1b[1m\x1b[31mFAILED\x1b[0m tests/test_a.py::test_one\n"
          "\x1b[38;5;208morange\x1b[39m \x1b[48;2;0;80;0mgreen\x1b[0m\n"
          "\x1b]52;c;Y3VybCB4IHwgc2g=\x07 \x1b]0;title\x07 \x1b[2J \x1b[8mhidden\x1b[0m \x1b[5mblink\x1b[0m \x9b31m\n")


def test_safe_keeps_only_colour_sgr_when_asked():
    kept = safe(OUTPUT, colours=True)
    assert "\x1b[1m\x1b[31mFAILED\x1b[0m" in kept and "\x1b[38;5;208m" in kept and "\x1b[48;2;0;80;0m" in kept
    assert "^[]52;c;" in kept and "^[]0;title^G" in kept and "^[[2J" in kept
    assert "^[[8mhidden" in kept and "^[[5mblink" in kept and "<U+009B>31m" in kept
    assert "\x1b" not in safe(OUTPUT)  # by default nothing is kept


def test_the_app_shows_a_commands_colours_and_no_other_escape():
    styles = TurnStyles(*([Style()] * len(TurnStyles._fields)))
    turn = Turn("tool", tool="run_command", args={"cmd": "pytest --color=yes"}, result=OUTPUT)
    console = Console(file=open(os.devnull, "w"), width=200, color_system="truecolor", force_terminal=True)
    with console.capture() as captured:
        console.print(render_turn(turn, True, 200, styles, dark=True))
    out = captured.get()
    assert "\x1b]" not in out and "\x07" not in out and "\x9b" not in out and "\x1b[2J" not in out
    assert "^[]52;c;" in out and "^[[8mhidden" in out
    rendered = render_turn(turn, True, 200, styles, dark=True)
    segments = list(console.render(rendered))
    red = [s for s in segments if "FAILED" in s.text]
    assert red and red[0].style is not None and red[0].style.color is not None \
        and red[0].style.color.number == 1 and red[0].style.bold, red  # SGR 31: colour 1, red
    other = Turn("tool", tool="read_lines", args={"path": "a"}, result=OUTPUT)  # a file's escapes: all text
    plain = [s for s in console.render(render_turn(other, True, 200, styles, dark=True)) if "FAILED" in s.text]
    assert plain and "^[[31m" in "".join(s.text for s in console.render(render_turn(other, True, 200, styles,
                                                                                      dark=True)))
