"""The console script. `workstation [PATH]` opens the app without loading click and the
command modules (~80 ms of first paint); everything else goes to the command line."""

from __future__ import annotations

import signal
import sys
from typing import NoReturn

# Names the click group knows; tests/test_launch.py checks this against workstation.cli.main.
COMMANDS = frozenset({"chat", "find", "impact", "import", "index", "map", "memory", "reflect", "replay", "report",
                      "session", "sidecar", "ui", "watch"})


def app_arguments(argv: list[str]) -> dict | None:
    """The app's arguments when argv only opens the app (`[-C P] [--model M] [PATH] ...`), else None."""
    args: dict = {"root": ".", "model": None, "session": None, "sidecar": True}
    path = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-C", "--model", "--session"):
            if i + 1 >= len(argv):
                return None
            args[{"-C": "root", "--model": "model", "--session": "session"}[arg]] = argv[i + 1]
            i += 2
        elif arg == "--no-sidecar":
            args["sidecar"] = False
            i += 1
        elif arg.startswith("-") or arg in COMMANDS or path is not None:
            return None  # --help, --version, a command, anything unusual: the command line decides
        else:
            path = arg
            i += 1
    if path is not None:
        args["root"] = path
    return args


def exit_on_sigterm() -> None:
    """SIGTERM ends the process as an exit, not a kill: `finally` blocks and exit handlers run,
    so memory buffers flush and the database closes cleanly. (The app replaces this with a
    quit of its own while it runs, so the terminal is restored too.)"""
    def terminate(signum, _frame):
        raise SystemExit(128 + signum)

    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, terminate)


def finish(code: object) -> NoReturn:
    """End the process with `code` (a SystemExit code) once everything of ours is closed.

    Once litellm is loaded, Python's own finalization runs its HTTP clients' __del__ hooks, which
    import modules and can deadlock against a daemon thread caught mid-import (seen: 1 sidecar exit
    in 5 hung). So what a normal exit does for us runs here (non-daemon threads joined, exit
    handlers: the database closes, buffers flush), and os._exit skips the rest.
    """
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    if "litellm" not in sys.modules:
        sys.exit(code)
    import atexit
    import os
    import threading

    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed pipe: nothing left to say
    os._exit(code)


def entry() -> None:
    exit_on_sigterm()
    try:
        _open_app_or_command_line()
    except SystemExit as exc:
        finish(exc.code)
    finish(0)


def _open_app_or_command_line() -> None:
    args = app_arguments(sys.argv[1:])
    if args is None:
        from .cli.common import run_main
        from .cli import main

        run_main(main)
        return
    from .errors import ConfigError, WorkstationError
    from .tui.launch import run_app

    root = args.pop("root")
    try:
        code = run_app(root, **args)
    except ConfigError as err:
        for line in err.lines:
            print(f"error: {line}", file=sys.stderr)
        sys.exit(2)
    except WorkstationError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(code)
