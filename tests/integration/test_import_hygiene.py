"""The shape of the code: the core never imports textual, rich or click, and the layers hold.

Every core module imported in a fresh interpreter (the import that pulls a terminal library in is named), as
Harlequin checks its own; and the import-linter contracts of pyproject.toml, which scripts/check runs, must name
every module of the package that is not the app or the command line."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path

import workstation

ROOT = Path(__file__).resolve().parents[2]
FRONT = {"workstation.tui", "workstation.cli", "workstation.entry", "workstation.__main__"}
FORBIDDEN = ("textual", "rich", "click")


def _core_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(workstation.__path__, "workstation."):
        if not any(info.name == f or info.name.startswith(f + ".") for f in FRONT):
            names.append(info.name)
    return sorted(names)


def test_every_core_module_imports_without_a_terminal_library():
    modules = _core_modules()
    assert len(modules) > 50 and "workstation.agent.loop" in modules
    probe = f"""
import importlib, json, sys
found = {{}}
for name in {modules!r}:
    importlib.import_module(name)
    pulled = [m for m in {FORBIDDEN!r} if m in sys.modules]
    if pulled:
        found[name] = pulled
        break
print(json.dumps(found))
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {}, f"the first core module that imports a terminal library: {done.stdout}"


def test_the_contract_names_every_core_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    core = next(c for c in config if c["type"] == "forbidden")
    listed = set(core["source_modules"])
    top = {".".join(name.split(".")[:2]) for name in _core_modules()} - {"workstation.__init__"}
    assert top - listed == set(), "core modules outside the contract that keeps textual, rich and click out"
    assert set(core["forbidden_modules"]) == set(FORBIDDEN)


def test_the_layers_name_every_module_and_package():
    """A module left out of the layers is checked by nothing (sessions/sidecar.py importing the importers went
    unnoticed that way); an import circle anywhere breaks the acyclic contract."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c for c in config if c["type"] == "layers"]
    named = [name.strip() for layer in layers["layers"] for name in layer.split("|")]
    assert len(named) == len(set(named))
    top = {f"workstation.{info.name}" for info in pkgutil.iter_modules(workstation.__path__)}
    assert set(named) == top, f"missing from the layers: {sorted(top - set(named))}; gone: {sorted(set(named) - top)}"
    (acyclic,) = [c for c in config if c["type"] == "acyclic_siblings"]
    # the one circle allowed: an Agent starts a sub-agent, which is an Agent (a lazy import, only when asked)
    assert acyclic["ancestors"] == ["workstation"]
    assert acyclic.get("ignore_imports", []) in ([], ["workstation.agent.loop -> workstation.agent.subagent"])
