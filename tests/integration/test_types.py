"""The type check of the core: mypy over the packages [tool.mypy] lists in pyproject.toml, which must stay clean.

Packages join the list as they become clean; the test also holds the list to modules that exist, so a move
cannot quietly drop one from the check."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_listed_core_packages_type_check():
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["files"]
    assert listed and all((ROOT / name).exists() for name in listed), [n for n in listed if not (ROOT / n).exists()]
    assert not any(name.startswith(("workstation/tui", "workstation/cli")) for name in listed)  # the core only
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary"], cwd=ROOT, capture_output=True,
                          text=True, timeout=280)
    assert done.returncode == 0 and done.stdout == "", done.stdout[-4000:] + done.stderr[-2000:]
