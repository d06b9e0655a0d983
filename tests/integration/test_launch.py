"""The console script's fast path to the app must agree with the command line."""

import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.pty_support import Terminal
from workstation.entry import COMMANDS, app_arguments
from workstation.paths import Paths


def test_fast_path_knows_every_command():
    from workstation.cli import main

    assert COMMANDS == frozenset(main.list_commands(None))  # type: ignore[arg-type]


def test_each_command_loads_its_own_module_alone():
    """The command line imports a command's module when that command runs: MODULES names the module of
    each (what its COMMANDS holds), and `--version` or `find` load no other command's module nor the config."""
    import importlib

    from workstation.cli import MODULES

    for name, module in MODULES.items():
        assert name in [c.name for c in importlib.import_module(f"workstation.cli.{module}").COMMANDS]
    probe = ("import sys\nsys.argv = ['workstation'] + sys.argv[1:]\nfrom workstation.cli import entry\n"
             "import atexit\natexit.register(lambda: print(sorted(m for m in sys.modules if m.startswith("
             "('workstation.cli.', 'workstation.config', 'workstation.runtime'))), file=sys.stderr))\nentry()")
    version = subprocess.run([sys.executable, "-c", probe, "--version"], capture_output=True, text=True, timeout=60)
    assert version.stdout.strip() == "workstation, version 0.1.0"
    assert version.stderr.strip() == "['workstation.cli.common']", version.stderr
    helped = subprocess.run([sys.executable, "-c", probe, "find", "--help"], capture_output=True, text=True,
                            timeout=60)
    assert "QUERY" in helped.stdout and "'workstation.cli.session_cmds'" not in helped.stderr, helped.stderr
    assert "'workstation.cli.index_cmds'" in helped.stderr, helped.stderr


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
    main, terminal = pty.openpty()  # the app's output is a terminal: the workspace is what is wrong
    try:
        proc = subprocess.run([sys.executable, "-c", "import sys; from workstation.entry import entry; "
                               f"sys.argv = ['workstation', {str(missing)!r}]; entry()"],
                              stdin=subprocess.DEVNULL, stdout=terminal, stderr=subprocess.PIPE, text=True,
                              timeout=60)
    finally:
        os.close(terminal)
        os.close(main)
    assert proc.returncode == 1
    assert proc.stderr == f"error: workspace {missing} is not a directory\n"


WORKSTATION = str(Path(sys.executable).with_name("workstation"))


@pytest.mark.parametrize("argv", [[], ["ui"]])
def test_the_app_refuses_an_output_that_is_not_a_terminal(tmp_path, argv):
    """Issue 22: the app drawn into a pipe spun at ~55% CPU and once outlived SIGTERM. One line, code 1;
    a command still works piped."""
    (tmp_path / "main.py").write_text("def main():\n    return 1\n")
    started = time.monotonic()
    proc = subprocess.run([WORKSTATION, "-C", str(tmp_path), *argv], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == ("error: the app needs a terminal, and its output is not one (the commands, "
                           "`workstation --help`, work piped)\n")
    assert time.monotonic() - started < 30
    if not argv:  # the fast path refuses before it opens the workspace
        assert not Paths.for_root(tmp_path).state.exists()
    piped = subprocess.run([WORKSTATION, "-C", str(tmp_path), "map", "main.py"], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=60)
    assert piped.returncode == 0 and "main" in piped.stdout


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


def test_sigterm_ends_the_app_even_when_its_shutdown_hangs(tmp_path):
    """Issue 22: the app once ignored SIGTERM for 10 minutes. Here a thread that never ends (as a stuck worker
    would) keeps the clean exit from finishing: the process still ends, SIGTERM_GRACE_S after the signal."""
    from workstation.tui.app import SIGTERM_GRACE_S

    (tmp_path / "main.py").write_text("def main():\n    return 1\n")
    script = ("import sys, threading, time; threading.Thread(target=time.sleep, args=(3600,)).start(); "
              "from workstation.entry import entry; sys.argv = ['workstation', sys.argv[1]]; entry()")
    with Terminal([sys.executable, "-c", script, str(tmp_path)], tmp_path) as term:
        term.wait_for(b"Ask, or / for commands", b"session ")
        started = time.monotonic()
        term.signal(signal.SIGTERM)
        assert term.wait_exit(SIGTERM_GRACE_S + 20) == 128 + signal.SIGTERM
        assert time.monotonic() - started >= SIGTERM_GRACE_S - 0.5  # the clean quit had its chance first


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


def test_the_command_line_reference_is_what_help_says():
    """docs/cli.md is every command's --help (python -m workstation.cli.helpdoc writes it)."""
    from workstation.cli import helpdoc

    assert helpdoc.DOC_FILE.read_text() == helpdoc.markdown(), "run: python -m workstation.cli.helpdoc"


def test_version_loads_nothing_but_the_package():
    """`workstation --version` (the console script and `python -m workstation`) prints click's line without
    importing click or the command line (issue 31: within 2x a bare `python -c pass`)."""
    probe = ("import sys\nsys.argv = ['workstation', '--version']\nfrom workstation.entry import entry\nentry()\n"
             "print(sorted(m for m in sys.modules if m == 'click' or m.startswith('workstation.')), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.stdout == "workstation, version 0.1.0\n"
    assert done.stderr.strip() == "['workstation.entry', 'workstation.errors']", done.stderr
    module = subprocess.run([sys.executable, "-m", "workstation", "--version"], capture_output=True, text=True,
                            timeout=60)
    assert module.stdout == "workstation, version 0.1.0\n" and module.returncode == 0
