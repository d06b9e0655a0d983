"""The console script's fast path to the app must agree with the command line."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pty_support import Terminal
from workstation.launch import COMMANDS, app_arguments
from workstation.paths import Paths


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


WORKSTATION = str(Path(sys.executable).with_name("workstation"))


def _children(pid: int) -> dict[int, str]:
    """Child processes of pid: {pid: command line}."""
    kids = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                kids[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError, IndexError):
            continue
    return kids


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sigterm_quits_the_app_cleanly(tmp_path):
    """SIGTERM to `workstation PATH` quits as ctrl+q does: sidecar stopped, terminal given back, code 143."""
    (tmp_path / "main.py").write_text("def main():\n    return 1\n")
    with Terminal([WORKSTATION, str(tmp_path)], tmp_path) as term:
        term.wait_for(b"Ask, or / for commands", b"session ")  # the workspace is open
        deadline = time.monotonic() + 30
        while not (sidecars := [p for p, cmd in _children(term.pid).items() if " sidecar " in cmd]):
            assert time.monotonic() < deadline, "the sidecar never started"
            time.sleep(0.05)
        before = len(term.raw)
        term.signal(signal.SIGTERM)
        assert term.wait_exit(30) == 128 + signal.SIGTERM
    assert b"\x1b[?1049l" in term.raw[before:]  # it left the alternate screen: the terminal is usable
    assert not _alive(sidecars[0])
    assert not Paths.for_root(tmp_path).owner_socket.exists()  # the database closed at exit


def test_sigterm_ends_a_command_through_its_exit_handlers(tmp_path):
    """`workstation watch` owns the database; SIGTERM closes it as an exit would (socket removed)."""
    (tmp_path / "main.py").write_text("def main():\n    return 1\n")
    proc = subprocess.Popen([WORKSTATION, "-C", str(tmp_path), "watch"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("watching ")
        assert Paths.for_root(tmp_path).owner_socket.exists()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 128 + signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
    assert proc.stderr.read() == ""
    assert not Paths.for_root(tmp_path).owner_socket.exists()
