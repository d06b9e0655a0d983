"""How a workstation process ends: SIGTERM as a clean exit, and the last steps of an exit once litellm is
loaded. Shared by the console script (workstation.entry) and the command line (workstation.cli)."""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from typing import NoReturn


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

    What a normal exit does for us runs here (non-daemon threads joined, exit handlers: the database
    closes, buffers flush), and os._exit skips the rest of Python's finalization, for two reasons:
    once litellm is loaded, its HTTP clients' __del__ hooks import modules and can deadlock against a
    daemon thread caught mid-import (seen: 1 sidecar exit in 5 hung); and once DuckDB is loaded,
    tearing its modules down and the last garbage collection cost 25-70 ms of every command.
    """
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    if "litellm" not in sys.modules and "duckdb" not in sys.modules:
        sys.exit(code)  # nothing slow or hazardous to skip
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


def alive(pid: int) -> bool:
    """Whether process `pid` exists (one of another user's counts: it cannot be signalled, but it runs)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
