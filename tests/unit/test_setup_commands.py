"""The README's set-up commands install the lock, CI runs exactly the README's test command, and the lock pins
every dependency pyproject.toml names."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    setup = ROOT.joinpath("README.md").read_text().split("## Set-up", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```\n(.*?)```", setup, re.S) if "pip install" in block]


def test_both_readme_commands_install_the_lock_and_ci_runs_the_test_command() -> None:
    launch, test = readme_commands()
    assert "pip install -q -c requirements.lock -e . " in launch
    assert "pip install -q -c requirements.lock -e '.[test]' " in test
    ci = ROOT.joinpath(".ci", "run").read_text().strip().splitlines()
    assert ci[-2:] == [test, "scripts/check"]  # the test command, then the check step (types, contracts, lint)


def test_the_lock_pins_every_dependency_with_one_version() -> None:
    pins = {}
    for line in ROOT.joinpath("requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert re.fullmatch(r"[0-9][0-9A-Za-z.!]*", version), line  # no ranges, no local builds, no URLs
            pins[canonicalize_name(name)] = version
    project = tomllib.loads(ROOT.joinpath("pyproject.toml").read_text())["project"]
    named = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["test"]]
    assert [str(r) for r in named if canonicalize_name(r.name) not in pins] == []
    assert "workstation" not in pins  # the project itself is installed from the clone
    for req in named:  # each pin is one pyproject.toml allows
        assert req.specifier.contains(pins[canonicalize_name(req.name)], prereleases=True), str(req)
