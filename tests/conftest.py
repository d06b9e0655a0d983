"""Shared fixtures: keep a developer's own config and network out of every test."""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# The slow tiers (`pytest -m "not slow"` is the inner loop; the README's test command runs them all): each
# folder ("dir/"), file, or test of a file ("file::test") with what makes it slow. They were two thirds of
# the inner loop's time (--durations), mostly processes paying the app's and litellm's start-up per test.
SLOW = {
    "integration/test_agent_checkpoint_faults.py": "kill -9 trials",
    "integration/test_sessions_faults.py": "kill -9 trials",
    "integration/test_multiprocess.py": "processes sharing a workspace, the owner killed",
    "integration/test_sessions_sidecar.py": "the sidecar process",
    "integration/test_agent_lsp.py": "language servers",
    "integration/test_team.py": "PostgreSQL",
    "tui/": "the whole app under Pilot per test (its snapshots, the live agent, the sidecar, PostgreSQL)",
    "integration/test_acp.py": "the ACP server as a process",
    "integration/test_mcp_server.py": "MCP servers as processes",
    "integration/test_mcp_client.py": "MCP servers as processes",
    "integration/test_trust_attacks.py": "every headless command as a process",
    "integration/test_planted_links.py": "index and chat as processes",
    "integration/test_compaction_guard.py": "whole sessions through the app, chat and ACP",
    "integration/test_launch.py": "the app in a terminal",
    "integration/test_link_races.py": "races, as an unprivileged uid",
    "integration/test_sandbox.py": "sandboxed processes, as an unprivileged uid",
    "integration/test_sandbox_limits.py": "fork bombs and memory hogs in the sandbox",
    "integration/test_httpx_scenario.py": "the long benchmarks' scenario",
    "integration/test_bench_long.py": "the long benchmark",
    "integration/test_memory_cli.py::test_damage_inside_the_store_is_found_before_anything_writes_to_it":
        "the command line as processes",
    "integration/test_memory_cli.py::test_a_store_held_by_another_program_is_named_not_a_lock_trace":
        "the command line as processes",
    "integration/test_sessions_compaction.py::test_forced_compaction_says_so_when_another_process_is_compacting":
        "another process compacting",
    "integration/test_sessions_archive.py::test_a_gzip_bomb_or_deep_metadata_is_refused_in_bounded_memory":
        "bounded memory in a child process",
    "integration/test_agent_report.py::test_chat_runs_one_headless_turn": "chat as a process",
    "integration/test_import_cli.py::test_a_lone_surrogate_in_an_imported_transcript_prints_escaped_from_every_command":
        "every command as a process",
    "integration/test_import_bulk.py::test_workers_write_what_one_process_writes_and_the_next_import_reads_nothing":
        "worker processes",
}
# Files that share one xdist worker: each starts servers too heavy for two to run at once on two cores.
GROUPS = {
    "integration/test_team.py": "postgres",
    "integration/test_agent_lsp.py": "language-servers",
    "tui/test_tui_chat.py": "language-servers",
}
TESTS = os.path.dirname(os.path.abspath(__file__))


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    """Mark the slow tiers (before `-m` picks), and keep each file on one worker (`--dist loadgroup`: its
    module fixtures are built once), the grouped files on one between them. Then the slow files go first
    (with `--no-loadscope-reorder`, xdist hands out files in this order): a long file started last would
    leave the other worker idle at the end."""
    for item in items:
        where = _where(item)
        if (where in SLOW or f"{where}::{item.name.partition('[')[0]}" in SLOW
                or where.partition("/")[0] + "/" in SLOW):
            item.add_marker(pytest.mark.slow)
        item.add_marker(pytest.mark.xdist_group(GROUPS.get(where, where)))
    yield
    slow = {_where(item) for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: _where(item) not in slow)


def _where(item) -> str:
    return os.path.relpath(str(item.path), TESTS).replace(os.sep, "/")


@pytest.fixture(autouse=True)
def _isolated_user(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("wshome")
    monkeypatch.setenv("WORKSTATION_HOME", str(home))
    monkeypatch.delenv("WORKSTATION_MODEL", raising=False)
    yield


from support.conftest_llm import llm_spec, scripted_llm  # noqa: E402,F401  (shared fixtures)


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
def cli(root, capsys, monkeypatch):
    """Run the real command line in this process on the test module's `root` folder: (exit code, stdout,
    stderr)."""
    from workstation.cli import main
    from workstation.cli.common import run_main

    def run(*args: str) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "argv", ["workstation", "-C", str(root), *args])
        try:
            run_main(main)
            code = 0
        except SystemExit as exc:
            code = exc.code
        out = capsys.readouterr()
        return code, out.out, out.err

    return run
