"""A program on a pseudo-terminal, driven as a person would: read what it draws, type, signal.

Used by the tests that start the real console script and by benchmarks/bench_tui.py.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import termios
import time
from pathlib import Path

_ESCAPES = re.compile(rb"\x1b\[[0-9;?<>=$]*[a-zA-Z~]|\x1b\][^\x07]*\x07|\x1b[()][0-9A-Za-z]")


class Terminal:
    def __init__(self, argv: list[str], cwd: Path | str, size: tuple[int, int] = (160, 48),
                 env: dict[str, str] | None = None) -> None:
        columns, lines = size
        environment = dict(env if env is not None else os.environ, TERM="xterm-256color",
                           COLUMNS=str(columns), LINES=str(lines))
        self.started = time.perf_counter()
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: become the program
            try:
                os.chdir(cwd)
                os.execvpe(argv[0], argv, environment)
            finally:
                os._exit(127)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
        self.raw = b""  # everything the program wrote
        self.text = b""  # the same without escape sequences
        self.status: int | None = None

    def _read(self, timeout: float) -> int:
        """Read what is there, waiting up to `timeout`: bytes read, or -1 once the terminal is closed."""
        if not select.select([self.fd], [], [], timeout)[0]:
            return 0
        try:
            chunk = os.read(self.fd, 1 << 20)
        except OSError:
            return -1
        self.raw += chunk
        self.text += _ESCAPES.sub(b"", chunk)
        return len(chunk) or -1

    def mark(self) -> int:
        """Where the drawn text ends now: `wait_for(..., since=mark)` looks only at what is drawn later."""
        while self._read(0) > 0:  # what the program has written so far counts as before the mark
            pass
        return len(self.text)

    def wait_for(self, *needles: bytes, timeout: float = 30.0, since: int = 0) -> float:
        """Seconds from the spawn until every needle has been drawn (after `since`, a `mark()`);
        raises on timeout or exit."""
        deadline = time.monotonic() + timeout
        while not all(n in self.text[since:] for n in needles):
            if time.monotonic() > deadline or self._read(0.01) < 0:
                missing = [n for n in needles if n not in self.text[since:]]
                raise TimeoutError(f"never drew {missing} (last output: {self.text[-300:]!r})")
        return time.perf_counter() - self.started

    def resize(self, columns: int, lines: int) -> None:
        """Resize the terminal as a window manager would (the kernel sends the program SIGWINCH)."""
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))

    def send(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def wait_exit(self, timeout: float = 30.0) -> int:
        """The exit code (negative: killed by that signal), reading output meanwhile; kills on timeout."""
        deadline = time.monotonic() + timeout
        while self.status is None:
            if self._read(0.05) < 0:
                time.sleep(0.02)  # the terminal is closed: the program is on its way out
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
            elif time.monotonic() > deadline:
                self.close()
                raise TimeoutError(f"still running after {timeout:.0f} s")
        while self._read(0) > 0:  # what it wrote last
            pass
        return self.status

    def close(self) -> None:
        """Kill the program if it still runs and release the terminal."""
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                self.status = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
            except (ProcessLookupError, ChildProcessError):
                pass
        try:
            os.close(self.fd)
        except OSError:
            pass

    def __enter__(self) -> "Terminal":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
