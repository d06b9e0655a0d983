"""Shared fixtures: keep a developer's own config and network out of every test."""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture(autouse=True)
def _isolated_user(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("wshome")
    monkeypatch.setenv("WORKSTATION_HOME", str(home))
    monkeypatch.delenv("WORKSTATION_MODEL", raising=False)
    yield


from conftest_llm import llm_spec, scripted_llm  # noqa: E402,F401  (shared fixtures)


@pytest.fixture
def paths(tmp_path):
    """Paths of a fresh workspace in tmp_path."""
    from workstation.paths import Paths

    return Paths.for_root(tmp_path)


@pytest.fixture
def db(paths):
    """The workspace database of `paths`, closed after the test."""
    from workstation.store import Database

    database = Database(paths)
    yield database
    database.close()


@pytest.fixture
def cli(ws, capsys, monkeypatch):
    """Run the real command line in this process on the test module's `ws` folder: (exit code, stdout,
    stderr)."""
    from workstation.cli import main
    from workstation.cli.common import run_main

    def run(*args: str) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "argv", ["workstation", "-C", str(ws), *args])
        try:
            run_main(main)
            code = 0
        except SystemExit as exc:
            code = exc.code
        out = capsys.readouterr()
        return code, out.out, out.err

    return run
