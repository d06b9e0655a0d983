"""macOS: Seatbelt (`sandbox-exec -p PROFILE`), as Codex CLI and Claude Code use it.

Written without a Mac to try it on: the probe every backend passes before use is what makes it safe to
ship. If this profile does not compile, or any rule does not hold (writes outside, `.git`, the state
folder, the network), the status says which and every command asks, as with no sandbox at all.
Later rules win in SBPL: reads and everything else allowed, every write denied, then writes allowed
inside the workspace and the private temporary folder, then `.git`, the state folders and the hidden
paths denied again. What it cannot do that bubblewrap does: give the command its own PID namespace
(processes a command leaves behind are not ended with workstation, only its process group).
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from . import Status

NAME = "seatbelt"
DEVICES = ["/dev/null", "/dev/zero", "/dev/tty", "/dev/dtracehelper", "/dev/random", "/dev/urandom"]


def available() -> "tuple[str] | str":
    exe = shutil.which("sandbox-exec") or ("/usr/bin/sandbox-exec" if os.path.exists("/usr/bin/sandbox-exec")
                                           else None)
    return (exe,) if exe else "no sandbox-exec (macOS only)"


def holds(probe: dict, network: bool) -> dict[str, bool]:
    return {"writes inside the workspace": probe["write_workspace"], "a private temporary folder": probe["write_tmp"],
            "no writes outside": not probe["write_outside"], ".git read-only": not probe["write_git"],
            "state folder hidden": not probe["read_state"], "no network": network or not probe["network"]}


def status(found: tuple[str], network: bool):
    net = "network allowed (agent.command_network)" if network else "no network"
    return Status("seatbelt", True, f"sandbox: Seatbelt (sandbox-exec): writes only in the workspace and a "
                                    f"private temporary folder, .git read-only, state folder hidden, {net}",
                  {"found": found})


def _q(path: Path | str) -> str:
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


def profile(policy, tmp: Path) -> str:
    root = policy.root
    writable = " ".join(f"(subpath {_q(p)})" for p in (root, os.path.realpath(tmp), "/dev/fd"))
    devices = " ".join(f"(literal {_q(d)})" for d in DEVICES)
    lines = ["(version 1)", "(allow default)", "(deny file-write*)",
             f"(allow file-write* {writable} {devices} (regex #\"^/dev/ttys[0-9]+$\"))",
             "(deny file-write* " + " ".join(f"(subpath {_q(g)}) (literal {_q(g)})" for g in policy.protected.git())
             + ")"]
    hidden = [*policy.protected.state, *(h for h in policy.hide if h != root and h not in root.parents)]
    if hidden:
        lines.append("(deny file-read* file-write* " + " ".join(f"(subpath {_q(h)})" for h in hidden) + ")")
    if not policy.network:
        lines.append("(deny network*)")
    return "\n".join(lines) + "\n"


@contextmanager
def wrap(found: tuple[str], argv: list[str], policy, cwd: Path, tmp: Path,
         env: dict[str, str]) -> Iterator[tuple[list[str], dict[str, str]]]:
    yield [found[0], "-p", profile(policy, tmp), *argv], {**env, "TMPDIR": str(tmp)}
