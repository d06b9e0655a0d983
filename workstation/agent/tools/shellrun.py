"""run_command: shell commands in the workspace, in an OS sandbox, allow-listed or approved by the user.

The sandbox (`workstation.sandbox`) decides what a command can touch; the allow-list (`allowlist.py`)
only decides which commands run without asking, and it does so only where a full sandbox holds: with
none, every command asks, and the approval says why in one line.
"""

from __future__ import annotations

import dataclasses
import os
import select
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ... import sandbox as _sandbox
from ...errors import WorkstationError
from ...sandbox.allowlist import SHELL_SYNTAX, WRAPPERS, allowed, check, program_of, split  # noqa: F401 (re-exported)
from ..approval import ApprovalRequest, Approver, ask

# What git reads from `.git/config` on `status`/`diff`/`log` that would run a program: off for allow-listed
# git commands, whatever the config says (the sandbox keeps .git read-only to commands; this also covers a
# config written some other way). A filter driver (`filter.x.clean`) cannot be turned off so, and still
# runs, in the sandbox.
GIT_SAFE_CONFIG = (("core.fsmonitor", "false"), ("core.hooksPath", "/dev/null"),
                   ("log.showSignature", "false"), ("core.pager", "cat"))
GIT_SAFE_FLAGS = {"diff": ["--no-ext-diff", "--no-textconv"], "log": ["--no-ext-diff", "--no-textconv"],
                  "show": ["--no-ext-diff", "--no-textconv"]}


@dataclass
class CommandResult:
    command: str
    exit_code: int | None  # None: timed out
    output: str
    truncated: bool
    duration_s: float
    approved_by: str  # 'allow-list' | 'user' | 'auto' (permission mode auto)
    sandbox: str = "none"  # 'bwrap' | 'seatbelt' | 'landlock' | 'none'


def _tokens(command: str) -> list[str] | None:
    """argv if `command` is a plain command line with no shell syntax, else None."""
    return split(command)


def _git_safe(env: dict[str, str]) -> dict[str, str]:
    given = env.get("GIT_CONFIG_COUNT", "")
    count = int(given) if given.isdigit() else 0
    env = dict(env)
    for i, (key, value) in enumerate(GIT_SAFE_CONFIG, start=count):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    env["GIT_CONFIG_COUNT"] = str(count + len(GIT_SAFE_CONFIG))
    return env


class CommandDenied(WorkstationError):
    """The command needed approval and did not get it."""


class CommandCancelled(WorkstationError):
    """The user stopped the turn while the command ran; its process group was killed."""


def run_command(command: str, cwd: Path, *, allow: list[str], approve: Approver | None,
                timeout_s: float, max_output_chars: int,
                cancel: threading.Event | None = None,
                sandbox: _sandbox.Policy | None = None, unasked: str = "") -> CommandResult:
    """Run `command` in `cwd`, in the sandbox `sandbox` describes (by default: `cwd` as the workspace,
    its `.workstation` hidden, no network), once the allow-list or the user approves it. `unasked` (why:
    permission mode auto) runs it without asking, with no network, where a full sandbox holds, and refuses it
    where none does. `cancel` (the turn's stop event) kills the command's whole process group within ~50 ms
    of being set."""
    command = command.strip()
    if not command:
        raise WorkstationError("run_command needs a command")
    policy = sandbox or _sandbox.Policy(cwd)
    if unasked and policy.network:
        policy = dataclasses.replace(policy, network=False)  # auto never reaches the network
    state = _sandbox.status(policy)
    reason = check(command, allow, policy.root, policy.private()) if state.full else state.line
    if unasked:
        if not state.full:
            raise CommandDenied(f"not run: {unasked}, and {state.line}")
        approved_by = "auto"
    elif reason is None:
        approved_by = "allow-list"
    else:
        refusal = ask(approve, ApprovalRequest("command", command, reason))
        if refusal is not None:
            raise CommandDenied(refusal)
        approved_by = "user"
    argv = _tokens(command)
    env = policy.env(dict(os.environ))
    if approved_by in ("allow-list", "auto") and argv and program_of(argv) == "git":
        env = _git_safe(env)
        if len(argv) > 1 and argv[1] in GIT_SAFE_FLAGS:
            argv = argv[:2] + GIT_SAFE_FLAGS[argv[1]] + argv[2:]
    start = time.monotonic()
    put_back: list[str] = []  # what the command changed of policy.protected where no sandbox keeps it out
    with _sandbox.sandboxed(argv if argv is not None else ["/bin/sh", "-c", command], policy, Path(cwd),
                            env, put_back) as (cmd, cmd_env, state):
        try:
            proc = subprocess.Popen(
                cmd, cwd=cwd, env=cmd_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # so a timeout kills the whole process group
            )
        except OSError as err:
            raise WorkstationError(f"cannot run {command!r}: {err.strerror or err}") from None
        pipe = proc.stdout
        assert pipe is not None  # stdout=PIPE
        output = _CappedOutput(max_output_chars)
        stop = threading.Event()
        reader = threading.Thread(target=output.drain, args=(pipe.fileno(), stop), daemon=True,
                                  name="run_command output")
        reader.start()
        code = _wait(proc, timeout_s, cancel)
        # The rest of the output; a process left running in the background (`setsid x &`) may hold
        # the pipe open for as long as it likes: the command is over when its own process is.
        reader.join(OUTPUT_GRACE_S)
        held_open = reader.is_alive()
        stop.set()
        reader.join()
        pipe.close()
    text, truncated = output.text()
    if cancel is not None and cancel.is_set() and code is None:
        raise CommandCancelled(f"stopped by the user after {time.monotonic() - start:.1f}s: {command!r}")
    if code is None:
        text += f"\n[timed out after {timeout_s:g}s]"
    elif held_open:
        text += "\n[a process it started still runs in the background: its later output is not shown]"
    if put_back:
        shown = "; ".join(put_back[:8]) + (f" and {len(put_back) - 8} more" if len(put_back) > 8 else "")
        text += f"\n[.git and workstation's config after the command (commands may not change what git runs): {shown}]"
    return CommandResult(command, code, text, truncated, time.monotonic() - start, approved_by,
                         state.backend or "none")


def _wait(proc: subprocess.Popen, timeout_s: float, cancel: threading.Event | None) -> int | None:
    """The exit code, or None once the process group was killed (time limit, or `cancel` set)."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        try:
            return proc.wait(timeout=max(0.0, min(left, 0.05)))
        except subprocess.TimeoutExpired:
            if left <= 0 or (cancel is not None and cancel.is_set()):
                break
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the group ended on its own between the last check and the kill
    proc.wait()
    return None


OUTPUT_GRACE_S = 0.5  # after the command exits, how long its output may take to arrive


class _CappedOutput:
    """A command's output as it streams in: only the first and the last `limit // 2` bytes are kept,
    so a command printing gigabytes costs no memory."""

    def __init__(self, limit: int) -> None:
        self.half = max(1, limit // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def drain(self, fd: int, stop: threading.Event) -> None:
        while True:
            if not select.select([fd], [], [], 0.05)[0]:
                if stop.is_set():
                    return
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return
            self.total += len(chunk)
            room = self.half - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            self.tail += chunk
            if len(self.tail) > 4 * self.half:  # trim now and then, not on every chunk
                del self.tail[:-self.half]

    def text(self) -> tuple[str, bool]:
        tail = self.tail[-self.half:]
        cut = self.total - len(self.head) - len(tail)
        head_text = self.head.decode("utf-8", errors="replace")
        tail_text = bytes(tail).decode("utf-8", errors="replace")
        if cut <= 0:
            return head_text + tail_text, False
        return f"{head_text}\n[... {cut} bytes cut ...]\n{tail_text}", True
