"""Linux without user namespaces (bubblewrap cannot start): Landlock, a partial sandbox.

Landlock (kernel 5.13+) lets a process give up rights for itself and every process it starts. Here it
confines writes to the workspace, the private temporary folder and a few devices, denies TCP (ABI 4+,
kernel 6.7+; UDP is not covered) and, from ABI 6 (kernel 6.12+), abstract Unix sockets and signals to
processes outside. It grants by hierarchy and has no "deny beneath": a writable workspace means a
writable `.git`, and a readable filesystem a readable state folder. So it is `partial`: the allow-list
runs nothing on its own and every command asks, but what the user approves still runs confined, and
what could make git run a program (the policy's `protected` field) is put back after each command
(`protect.kept`, through `sandboxed`).
Processes a command leaves behind are not ended with workstation (only the command itself is).
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from . import Status

NAME = "landlock"
HELPER = Path(__file__).with_name("_landlock_exec.py")
DEVICES = ["/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/random", "/dev/urandom"]


def available() -> "tuple[int] | str":
    if not sys.platform.startswith("linux"):
        return "Landlock is Linux only"
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(ctypes.c_long(444), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return f"Landlock is not enabled in this kernel ({os.strerror(ctypes.get_errno())})"
    return (abi,)


def holds(probe: dict, network: bool) -> dict[str, bool]:
    return {"writes inside the workspace": probe["write_workspace"], "a private temporary folder": probe["write_tmp"],
            "no writes outside": not probe["write_outside"], "no network": network or not probe["network"]}


def status(found: tuple[int], network: bool):
    net = "network allowed" if network else "no TCP"
    return Status("landlock", False,
                  f"partial sandbox: Landlock (ABI {found[0]}): writes only in the workspace and a private "
                  f"temporary folder, {net}; .git is put back after each command and the state folder is not "
                  "hidden, so every command asks",
                  {"found": found})


@contextmanager
def wrap(found: tuple[int], argv: list[str], policy, cwd: Path, tmp: Path,
         env: dict[str, str]) -> Iterator[tuple[list[str], dict[str, str]]]:
    spec = {"write": [str(policy.root), str(tmp), "/dev/pts", "/dev/shm"], "write_files": DEVICES,
            "net": policy.network}
    cmd = [sys.executable, "-I", "-S", str(HELPER), json.dumps(spec), "--", *argv]
    yield cmd, {**env, "TMPDIR": str(tmp)}
