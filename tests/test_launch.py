"""The console script's fast path to the app must agree with the command line."""

import subprocess
import sys

import pytest

from workstation.launch import COMMANDS, app_arguments


def test_fast_path_knows_every_command():
    from workstation.cli import main

    assert COMMANDS == frozenset(main.commands)


@pytest.mark.parametrize("argv,expected", [
    ([], {"root": "."}),
    (["proj"], {"root": "proj"}),
    (["-C", "proj"], {"root": "proj"}),
    (["--model", "openai/x", "proj", "--no-sidecar"], {"root": "proj", "model": "openai/x", "sidecar": False}),
    (["proj", "--session", "s1"], {"root": "proj", "session": "s1"}),
])
def test_app_launches_take_the_fast_path(argv, expected):
    args = app_arguments(argv)
    assert args == {"root": ".", "model": None, "session": None, "sidecar": True, **expected}


@pytest.mark.parametrize("argv", [["index"], ["-C", "proj", "map"], ["--help"], ["--version"], ["a", "b"],
                                  ["-C"], ["ui", "proj"], ["--bogus"]])
def test_everything_else_goes_to_the_command_line(argv):
    assert app_arguments(argv) is None


def test_bad_workspace_is_one_line(tmp_path):
    missing = tmp_path / "nope"
    proc = subprocess.run([sys.executable, "-c", "import sys; from workstation.launch import entry; "
                           f"sys.argv = ['workstation', {str(missing)!r}]; entry()"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr == f"error: workspace {missing} is not a directory\n"
