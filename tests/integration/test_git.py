"""workstation.git on temporary repositories: branch and dirty count, changes among paths, commits of
exactly those paths, and a poisoned .git/config that must never run a program through us."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from support.git_support import committed_files, git, head_message, init_repo, isolated_git  # noqa: F401
from workstation import git as gitmod
from workstation.git import GitError, Repo


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/a.py").write_text("a = 1\n")
    (root / "pkg/b.py").write_text("b = 1\n")
    (root / "README.md").write_text("hello\n")
    return init_repo(root)


def test_not_a_repository(tmp_path):
    assert Repo.find(tmp_path) is None
    assert gitmod.status(tmp_path) is None


def test_branch_and_dirty_count(repo):
    status = gitmod.status(repo)
    assert (status.branch, status.dirty, status.problem) == ("main", 0, "")
    assert status.label == "main"
    (repo / "pkg/a.py").write_text("a = 2\n")  # modified
    (repo / "new.txt").write_text("x\n")  # untracked
    (repo / "README.md").unlink()  # deleted
    git(repo, "mv", "pkg/b.py", "pkg/c.py")  # a staged rename counts once
    status = gitmod.status(repo)
    assert status.dirty == 4 and status.label == "main ±4"
    git(repo, "checkout", "-q", "--detach")
    assert gitmod.status(repo).branch.startswith("detached at ")


def test_a_repository_without_commits(tmp_path):
    root = tmp_path / "fresh"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    init_repo(root, commit=False)
    status = gitmod.status(root)
    assert (status.branch, status.dirty) == ("main (no commits yet)", 1)
    commit = Repo.find(root).commit(["a.txt"], "first file\n")
    assert commit.branch == "main" and committed_files(root) == ["a.txt"]


def test_a_workspace_inside_a_larger_repository_counts_and_commits_its_own_files(repo):
    (repo / "README.md").write_text("changed outside the workspace\n")
    (repo / "pkg/a.py").write_text("a = 3\n")
    sub = Repo.find(repo / "pkg")
    assert sub.prefix == "pkg/" and sub.top == repo
    assert sub.status().dirty == 1
    assert [c.path for c in sub.changes(["a.py", "b.py"])] == ["a.py"]
    commit = sub.commit(["a.py"], "change a\n")
    assert commit.paths == ["a.py"] and committed_files(repo) == ["pkg/a.py"]
    assert git(repo, "status", "--porcelain").strip() == "M README.md"


def test_a_commit_holds_exactly_the_given_paths(repo):
    (repo / "pkg/a.py").write_text("a = 2\n")  # the agent's
    (repo / "pkg/new.py").write_text("new = 1\n")  # the agent's, new
    (repo / "pkg/b.py").unlink()  # the agent's, deleted
    (repo / "README.md").write_text("the user's own edit\n")
    (repo / "staged.txt").write_text("the user staged this\n")
    git(repo, "add", "staged.txt")
    r = Repo.find(repo)
    changes = r.changes(["pkg/a.py", "pkg/new.py", "pkg/b.py", "pkg/untouched.py"])
    assert [(c.path, c.new, c.deleted) for c in changes] == [
        ("pkg/a.py", False, False), ("pkg/new.py", True, False), ("pkg/b.py", False, True)]
    diff = r.diff(changes)
    assert "-a = 1\n+a = 2" in diff and "new file pkg/new.py\n+new = 1" in diff and "-b = 1" in diff
    commit = r.commit([c.path for c in changes], "agent work\n\nthree files\n")
    assert committed_files(repo) == ["pkg/a.py", "pkg/b.py", "pkg/new.py"]
    assert head_message(repo).startswith("agent work\n\nthree files")
    assert commit.summary == "agent work"
    # the user's work is as it was: the edit unstaged, the staged file still staged and uncommitted
    assert sorted(git(repo, "status", "--porcelain").splitlines()) == [" M README.md", "A  staged.txt"]


def test_pathspecs_are_literal(repo):
    (repo / ":(exclude)nothing").write_text("a file with a magic name\n")
    (repo / "pkg/a.py").write_text("a = 2\n")
    r = Repo.find(repo)
    r.commit([":(exclude)nothing"], "only the oddly named file\n")
    assert committed_files(repo) == [":(exclude)nothing"]
    assert r.changes(["pkg/a.py"])[0].path == "pkg/a.py"  # still uncommitted


def test_a_poisoned_config_runs_nothing(repo, tmp_path):
    """fsmonitor, hooks (through core.hooksPath and .git/hooks), signing, the editor and pager: all set to
    write a marker file; status and commit must not start any of them."""
    marker = tmp_path / "pwned"
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\necho \"$0 $*\" >> {marker}\nexit 0\n")
    script.chmod(0o755)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for name in ("pre-commit", "commit-msg", "post-commit", "prepare-commit-msg", "post-index-change",
                 "reference-transaction"):
        for folder in (hooks, repo / ".git/hooks"):
            (folder / name).write_text(script.read_text())
            (folder / name).chmod(0o755)
    for key, value in (("core.fsmonitor", str(script)), ("core.hooksPath", str(hooks)),
                       ("commit.gpgSign", "true"), ("gpg.program", str(script)), ("core.editor", str(script)),
                       ("core.pager", str(script)), ("diff.external", str(script)), ("gc.auto", "1")):
        git(repo, "config", key, value)
    (repo / "pkg/a.py").write_text("a = 2\n")
    r = Repo.find(repo)
    assert r.status().dirty == 1
    assert r.diff(r.changes(["pkg/a.py"]))
    r.commit(["pkg/a.py"], "no program runs\n")
    assert committed_files(repo) == ["pkg/a.py"]
    assert not marker.exists(), marker.read_text()


def test_a_filter_driver_in_the_repositorys_config_is_refused(repo, tmp_path):
    marker = tmp_path / "pwned"
    git(repo, "config", "filter.evil.clean", f"sh -c 'touch {marker}; cat'")
    (repo / ".gitattributes").write_text("*.py filter=evil\n")
    (repo / "pkg/a.py").write_text("a = 2\n")
    r = Repo.find(repo)
    status = r.status()
    assert status.dirty is None and "filter.evil.clean" in status.problem and status.branch == "main"
    assert status.label == "main ?"
    with pytest.raises(GitError, match=r"sets filter\.evil\.clean, a command git would run on our behalf: refused"):
        r.commit(["pkg/a.py"], "x\n")
    with pytest.raises(GitError, match="filter.evil.clean"):
        r.changes(["pkg/a.py"])
    assert not marker.exists()
    assert git(repo, "log", "--format=%s").splitlines() == ["initial"]


def test_the_environment_cannot_point_git_elsewhere(repo, tmp_path, monkeypatch):
    other = tmp_path / "other"
    other.mkdir()
    (other / "x").write_text("x\n")
    init_repo(other)
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    (repo / "pkg/a.py").write_text("a = 2\n")
    r = Repo.find(repo)
    assert r.top == repo
    r.commit(["pkg/a.py"], "in the workspace's own repository\n")
    monkeypatch.delenv("GIT_DIR")
    monkeypatch.delenv("GIT_WORK_TREE")
    assert committed_files(repo) == ["pkg/a.py"]
    assert git(other, "log", "--format=%s").splitlines() == ["initial"]


def test_failures_are_one_line(repo, monkeypatch):
    r = Repo.find(repo)
    with pytest.raises(GitError, match="empty commit message"):
        r.commit(["pkg/a.py"], "  \n")
    (repo / ".git/index.lock").write_text("")  # another git is running
    (repo / "pkg/a.py").write_text("a = 2\n")
    with pytest.raises(GitError) as err:
        r.commit(["pkg/a.py"], "x\n")
    assert "\n" not in str(err.value) and "index.lock" in str(err.value)
    os.unlink(repo / ".git/index.lock")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert Repo.find(repo) is None
    with pytest.raises(GitError, match="git is not installed"):
        r.commit(["pkg/a.py"], "x\n")
    assert r.status().problem == "git is not installed (no git on PATH)"


def test_a_git_past_its_time_limit_is_stopped_and_reported(repo, monkeypatch, tmp_path):
    r = Repo.find(repo)
    # a git that takes 5 s before it starts: the limit decides, not a race between a fast git and a tiny limit
    slow = tmp_path / "slowbin"
    slow.mkdir()
    (slow / "git").write_text(f'#!/bin/sh\nsleep 5\nexec {shutil.which("git")} "$@"\n')
    (slow / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{slow}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(gitmod, "TIMEOUT_S", 0.5)
    started = time.monotonic()
    status = r.status()
    assert status.dirty is None and status.problem.startswith("git ") and "and was stopped" in status.problem, status
    assert time.monotonic() - started < 4  # stopped at its limit, not waited for
