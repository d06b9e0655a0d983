"""A uid of its own for the tests that judge what another user can do (the sandbox's limits, the link races,
the put-back, team memory): a uid with no passwd entry and no process, a folder it owns, an interpreter it can
run. Each skips, saying why, where the machine cannot give one (not root, no /proc, every uid taken)."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import pytest

PROJECT = Path(__file__).resolve().parents[2]
TESTS = PROJECT / "tests"


def free_uid() -> int | None:
    """A uid with no passwd entry and no process on this machine."""
    import pwd

    used = {p.pw_uid for p in pwd.getpwall()}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                used.add(os.stat(f"/proc/{name}").st_uid)
            except OSError:
                continue
    return next((uid for uid in range(61_000, 65_000) if uid not in used), None)


def as_uid(uid: int) -> Callable[[], None]:
    """A preexec_fn that drops to `uid` (and its group, no supplementary groups) before exec."""
    def drop() -> None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    return drop


def python_for(uid: int, env: dict[str, str]) -> tuple[str | None, str]:
    """An interpreter of this Python version the uid can run with the project importable (the test's own may sit
    in a folder only root reaches, as pyenv's under /root): (path, "") or (None, why not)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    tried = []
    for candidate in dict.fromkeys([sys.executable, os.path.realpath(sys.executable), f"/usr/bin/{version}",
                                    f"/usr/local/bin/{version}"]):
        if not os.path.exists(candidate):
            continue
        tried.append(candidate)
        try:
            probe = subprocess.run([candidate, "-c", "import workstation.agent.tools.shellrun"], env=env, cwd="/",
                                   preexec_fn=as_uid(uid), capture_output=True, text=True, timeout=60)
        except PermissionError:  # a folder on its path the uid cannot search
            continue
        if probe.returncode == 0:
            return candidate, ""
    return None, f"no {version} that uid {uid} can run with the project importable (tried {', '.join(tried)})"


def other_uid(as_this_user: str = "the other tests run as this user") -> int:
    """A free uid, or the test skips: `as_this_user` says what covers the case when no other uid can be taken."""
    if not hasattr(os, "setuid") or not Path("/proc").is_dir():
        pytest.skip("needs Linux's /proc and setuid")
    if os.geteuid() != 0:
        pytest.skip(f"not root: no other uid can be taken ({as_this_user})")
    uid = free_uid()
    if uid is None:
        pytest.skip("no free uid in 61000-64999 to run as")
    return uid


@contextmanager
def uid_folder(uid: int, prefix: str) -> Iterator[Path]:
    """A fresh folder owned by `uid` (outside the test's tmp_path, which only root may reach), removed after;
    the test skips if some folder above it is not searchable by others."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        os.chown(base, uid, uid)
        for parent in base.parents:
            if parent.stat().st_mode & 0o001 == 0:
                pytest.skip(f"uid {uid} cannot reach {base} ({parent} is not searchable by others)")
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def uid_env(base: Path, *path: str, **extra: str) -> dict[str, str]:
    """The whole environment of a process run as another uid in `base`: its home there, `path` and the project
    importable (with this venv's packages)."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(base), "LANG": "C.UTF-8",
            "WORKSTATION_HOME": str(base / "user-home"),
            "PYTHONPATH": os.pathsep.join([*path, str(PROJECT), *site.getsitepackages()]), **extra}


def uid_python(uid: int, env: dict[str, str]) -> str:
    """python_for(uid, env), or the test skips saying why."""
    python, why = python_for(uid, env)
    if python is None:
        pytest.skip(why)
    return python
