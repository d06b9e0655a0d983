"""The type check of the core: scripts/check runs mypy over the packages [tool.mypy] lists in pyproject.toml.

The list holds every module of the core (all but the app, the command line and their entry points) and only
modules that exist, so neither a new package nor a move can quietly leave the check."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOT_CORE = {"tui", "cli", "entry.py", "__main__.py"}  # textual, rich and click live there (see the import layers)


def _listed() -> list[str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["files"]


def test_every_core_module_is_in_the_type_check():
    package = ROOT / "workstation"
    core = sorted(p.relative_to(ROOT).as_posix() for p in package.iterdir()
                  if p.name not in NOT_CORE and (p.suffix == ".py" or (p / "__init__.py").is_file()))
    assert core and not set(core) - set(_listed()), sorted(set(core) - set(_listed()))


def test_the_listed_core_packages_exist_and_are_the_core():
    listed = _listed()
    assert listed and all((ROOT / name).exists() for name in listed), [n for n in listed if not (ROOT / n).exists()]
    assert not any(name.startswith(("workstation/tui", "workstation/cli")) for name in listed)  # the core only
