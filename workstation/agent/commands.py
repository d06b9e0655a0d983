"""run_command: shell commands in the workspace, allow-listed or approved by the user."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import WorkstationError

# Commands that run another command: an allow-list entry never covers them implicitly,
# or `env rm -rf /` would pass as `env`.
WRAPPERS = frozenset({
    "sh", "bash", "zsh", "dash", "fish", "env", "xargs", "sudo", "doas", "nohup", "timeout",
    "nice", "ionice", "exec", "eval", "command", "builtin", "time", "watch", "find", "python", "python3",
    "perl", "ruby", "node", "su", "chroot", "setsid", "stdbuf", "strace",
})
SHELL_SYNTAX = set("|&;<>()$`\\\n*?[]{}~!#")


@dataclass
class CommandResult:
    command: str
    exit_code: int | None  # None: timed out
    output: str
    truncated: bool
    duration_s: float
    approved_by: str  # 'allow-list' | 'user'


def _tokens(command: str) -> list[str] | None:
    """argv if `command` is a plain command line with no shell syntax, else None."""
    if any(ch in SHELL_SYNTAX for ch in command):
        return None
    try:
        return shlex.split(command)
    except ValueError:
        return None


def allowed(command: str, allow: list[str]) -> bool:
    """True when the allow-list covers `command` without asking the user."""
    argv = _tokens(command)
    if not argv:
        return False
    for entry in allow:
        prefix = _tokens(entry)
        if not prefix:
            continue
        if Path(argv[0]).name in WRAPPERS or Path(prefix[0]).name in WRAPPERS:
            # a wrapper is only ever allowed by an entry naming the whole command exactly
            if argv == prefix:
                return True
            continue
        if argv[: len(prefix)] == prefix:
            return True
    return False


def run_command(command: str, cwd: Path, *, allow: list[str], approve: Callable[[str], bool] | None,
                timeout_s: float, max_output_chars: int) -> CommandResult:
    command = command.strip()
    if not command:
        raise WorkstationError("run_command needs a command")
    if allowed(command, allow):
        approved_by = "allow-list"
    elif approve is not None and approve(command):
        approved_by = "user"
    else:
        raise WorkstationError(f"command not approved: {command!r} (not on agent.command_allow)")
    argv = _tokens(command)
    start = time.monotonic()
    proc = subprocess.Popen(
        argv if argv is not None else ["/bin/sh", "-c", command],
        cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True,  # so a timeout kills the whole process group
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        code = None
    text = out.decode("utf-8", errors="replace")
    truncated = len(text) > max_output_chars
    if truncated:
        half = max_output_chars // 2
        text = f"{text[:half]}\n[... {len(text) - 2 * half} chars cut ...]\n{text[-half:]}"
    if code is None:
        text += f"\n[timed out after {timeout_s:g}s]"
    return CommandResult(command, code, text, truncated, time.monotonic() - start, approved_by)
