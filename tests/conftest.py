"""Shared fixtures: keep a developer's own config and network out of every test."""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# The slow tiers (`pytest -m "not slow"` is the inner loop; the README's test command runs them all), each
# file with what makes it slow.
SLOW = {
    "integration/test_agent_checkpoint_faults.py": "kill -9 trials",
    "integration/test_sessions_faults.py": "kill -9 trials",
    "integration/test_multiprocess.py": "processes sharing a workspace, the owner killed",
    "integration/test_sessions_sidecar.py": "the sidecar process",
    "tui/test_tui_sidecar_live.py": "the sidecar process",
    "integration/test_agent_lsp.py": "language servers",
    "integration/test_team.py": "PostgreSQL",
    "tui/test_tui_snapshots.py": "snapshots",
    "tui/test_tui_screen_snapshots.py": "snapshots",
}
# Files that share one xdist worker: each starts servers too heavy for two to run at once on two cores.
GROUPS = {
    "integration/test_team.py": "postgres",
    "integration/test_agent_lsp.py": "language-servers",
    "tui/test_tui_chat.py": "language-servers",
}
TESTS = os.path.dirname(os.path.abspath(__file__))


def pytest_collection_modifyitems(config, items):
    """Mark the slow tiers, and keep each file on one worker (`--dist loadgroup`: its module fixtures are
    built once), the grouped files on one between them."""
    for item in items:
        where = os.path.relpath(str(item.path), TESTS).replace(os.sep, "/")
        if where in SLOW:
            item.add_marker(pytest.mark.slow)
        item.add_marker(pytest.mark.xdist_group(GROUPS.get(where, where)))


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
