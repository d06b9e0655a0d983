"""Temporary git repositories for the tests, isolated from the developer's own git config."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

IDENTITY = {"GIT_AUTHOR_NAME": "Test Author", "GIT_AUTHOR_EMAIL": "author@example.invalid",
            "GIT_COMMITTER_NAME": "Test Committer", "GIT_COMMITTER_EMAIL": "committer@example.invalid"}


@pytest.fixture(autouse=True)
def isolated_git(tmp_path_factory, monkeypatch):
    """No global or system git config (identity from the environment), for every test of the module."""
    home = tmp_path_factory.mktemp("git-home")
    (home / "gitconfig").write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for key, value in IDENTITY.items():
        monkeypatch.setenv(key, value)


def git(cwd: Path, *args: str, check: bool = True) -> str:
    """Run git in a test (setting up or inspecting a repository; the code under test has its own runner)."""
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {proc.stderr}")
    return proc.stdout


def init_repo(root: Path, commit: bool = True) -> Path:
    """`git init` at root (branch main), everything in it committed unless `commit` is False."""
    git(root, "init", "-q", "-b", "main")
    if commit:
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "initial")
    return root


def committed_files(root: Path, rev: str = "HEAD") -> list[str]:
    """Paths the commit `rev` changed."""
    return sorted(git(root, "show", "--name-only", "--format=", rev).split())


def head_message(root: Path) -> str:
    return git(root, "log", "-1", "--format=%B")
