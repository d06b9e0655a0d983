"""The put-back of `.git` and our config where no sandbox keeps commands out of them (Landlock, none): it
undoes what the command did that could make git run something, never a user's change made meanwhile, never
deletes a user's file, and leaves git's own state consistent (issue 29). Each attack of
`putback_support.SCENARIOS` runs under Landlock and with no sandbox, in this process and as an unprivileged uid
of its own; judged by effect (files on disk, git's answers)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from support import putback_support
from support.putback_support import SCENARIOS, git, repo, run
from support.uid import TESTS, as_uid, other_uid, uid_env, uid_folder, uid_python
from workstation import sandbox
from workstation.paths import user_dir
from workstation.sandbox import Policy, protect

MODES = ["landlock", "off"]


def _available(mode: str, where: Path) -> None:
    state = sandbox.status(Policy(where, mode=mode))
    if mode != "off" and state.backend != mode:
        pytest.skip(state.line)


@pytest.fixture(autouse=True)
def _git_env(monkeypatch, tmp_path):
    (tmp_path / "gitconfig").write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    for key, value in putback_support.IDENTITY.items():
        monkeypatch.setenv(key, value)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_the_put_back_holds(tmp_path, mode, scenario):
    _available(mode, tmp_path)
    assert SCENARIOS[scenario](tmp_path, mode) == []


@pytest.mark.parametrize("mode", MODES)
def test_what_is_put_back_is_kept_aside_and_named(tmp_path, mode):
    """Nothing the put-back replaces or removes is lost: it is moved to put-back/ in the user's config home
    (out of a Landlocked command's reach), named."""
    _available(mode, tmp_path)
    root = repo(tmp_path)
    res = run(root, mode, "sh -c 'printf \"#!/bin/sh\\nexit 1\\n\" > .git/hooks/pre-commit; "
                          "echo \"[core] fsmonitor = x\" >> .git/config'")
    assert not (root / ".git" / "hooks" / "pre-commit").exists()
    assert "fsmonitor" not in (root / ".git" / "config").read_text()
    [aside] = (user_dir() / "put-back").iterdir()
    kept = sorted(p.relative_to(aside).as_posix() for p in aside.rglob("*") if p.is_file())
    assert kept == [".git/config", ".git/hooks/pre-commit"], kept
    assert "fsmonitor = x" in (aside / ".git" / "config").read_text()
    assert f"{aside}/" in res.output and "put back .git/hooks/pre-commit" in res.output


@pytest.mark.parametrize("mode", MODES)
def test_a_file_too_large_to_keep_is_left_as_found_and_named(tmp_path, mode, monkeypatch):
    """Past what the put-back keeps (`KEEP_MAX_BYTES`), a changed file is left as found, never deleted."""
    _available(mode, tmp_path)
    monkeypatch.setattr(protect, "GUARD_MAX_BYTES", 1 << 20)
    monkeypatch.setattr(protect, "KEEP_MAX_BYTES", 1 << 20)
    root = repo(tmp_path)
    big = root / ".git" / "hooks" / "recorded.bin"
    big.write_bytes(b"x" * (2 << 20))
    res = run(root, mode, "sh -c 'echo more >> .git/hooks/recorded.bin'")
    assert big.read_bytes() == b"x" * (2 << 20) + b"more\n"
    assert ".git/hooks/recorded.bin" in res.output and "too large to keep" in res.output


@pytest.mark.parametrize("mode", MODES)
def test_benign_changes_of_a_command_stay(tmp_path, mode):
    """What runs nothing stays as the command left it: a remote, an exclude line; a sample hook only as git
    ships it (users enable one by renaming it)."""
    _available(mode, tmp_path)
    root = repo(tmp_path)
    sample = root / ".git" / "hooks" / "pre-commit.sample"
    shipped = sample.read_bytes()
    res = run(root, mode, "sh -c 'git remote add up https://example.invalid/u.git && echo \"*.log\" >> "
                          ".git/info/exclude && rm .git/hooks/pre-commit.sample && git init -q'")
    assert git(root, "remote", "get-url", "up").stdout.strip() == "https://example.invalid/u.git", res.output
    assert "*.log" in (root / ".git" / "info" / "exclude").read_text()
    assert "put back" not in res.output and sample.read_bytes() == shipped
    run(root, mode, "sh -c 'echo \"touch pwned\" >> .git/hooks/pre-commit.sample'")
    assert sample.read_bytes() == shipped


@pytest.mark.parametrize("mode", MODES)
def test_a_command_removing_a_hook_of_the_users_gets_it_back(tmp_path, mode):
    _available(mode, tmp_path)
    root = repo(tmp_path)
    hook = root / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o755)
    run(root, mode, "rm -rf .git/hooks")
    assert hook.read_text() == "#!/bin/sh\nexit 0\n" and os.access(hook, os.X_OK)


@pytest.mark.parametrize("mode", MODES)
def test_the_put_back_as_an_unprivileged_user(mode, capsys):
    """Every scenario again as a uid of its own (no passwd entry, no other process), set before exec."""
    uid = other_uid()
    with uid_folder(uid, "ws-putback-") as base:
        (base / "gitconfig").write_text("")
        os.chown(base / "gitconfig", uid, uid)
        env = uid_env(base, GIT_CONFIG_GLOBAL=str(base / "gitconfig"))
        python = uid_python(uid, env)
        done = subprocess.run([python, "-c", putback_support.RUNNER, str(base), mode, str(TESTS)], env=env, cwd=base,
                              preexec_fn=as_uid(uid), capture_output=True, text=True, timeout=280)
        assert done.returncode == 0, done.stderr[-2000:]
        found = json.loads(done.stdout.strip().splitlines()[-1])
    if "unavailable" in found:
        pytest.skip(f"{mode} is not available to uid {uid}: {found['unavailable']}")
    through = {name: why for name, why in found.items() if why}
    with capsys.disabled():
        print(f"\nput-back as uid {uid} under {mode}: {len(found)} attacks, {len(through)} got through")
    assert set(found) == set(SCENARIOS)
    assert through == {}


HARMFUL_KEYS = {"core.fsmonitor": "touch {m}", "core.hooksPath": ".", "include.path": "../evil.cfg",
                "filter.x.clean": "touch {m}", "core.sshCommand": "touch {m}", "remote.origin.uploadpack": "touch {m}",
                "diff.x.textconv": "touch {m}", "core.pager": "touch {m}", "core.worktree": "/tmp"}


@pytest.mark.parametrize("mode", MODES)
def test_config_keys_that_run_a_program_are_put_back_plain_ones_stay(tmp_path, mode):
    """One command sets every key of `HARMFUL_KEYS` and adds a remote: .git/config is put back whole (the
    remote with it; what the command left is kept aside); a remote added alone stays (test_benign_...)."""
    _available(mode, tmp_path)
    root = repo(tmp_path)
    before = (root / ".git" / "config").read_bytes()
    marker = tmp_path / "pwned"
    sets = " && ".join(f"git config {key} '{value.format(m=marker)}'" for key, value in HARMFUL_KEYS.items())
    res = run(root, mode, f"sh -c \"{sets} && git remote add up https://example.invalid/u.git\"")
    assert res.exit_code == 0, res.output
    assert (root / ".git" / "config").read_bytes() == before, res.output
    assert "put back .git/config" in res.output
    for key in HARMFUL_KEYS:
        single = run(root, mode, f"git config {key} 'touch {marker}'")
        assert (root / ".git" / "config").read_bytes() == before, (key, single.output)


@pytest.mark.parametrize("mode", MODES)
def test_between_commands_the_users_changes_stay_and_a_hook_is_named(tmp_path, mode):
    """The next command's look at .git: the user's `git remote add`, a sample hook they removed and a hook they
    wrote stay as they are (nothing tells them from a process a command left running); the hook is named."""
    _available(mode, tmp_path)
    root = repo(tmp_path)
    run(root, mode, "true")
    git(root, "remote", "add", "origin", "https://example.invalid/r.git")
    (root / ".git" / "hooks" / "pre-push.sample").unlink()
    (root / ".git" / "hooks" / "pre-push").write_text("#!/bin/sh\nexit 1\n")
    res = run(root, mode, "true")
    assert git(root, "remote", "get-url", "origin").stdout.strip() == "https://example.invalid/r.git"
    assert not (root / ".git" / "hooks" / "pre-push.sample").exists()
    assert (root / ".git" / "hooks" / "pre-push").read_text() == "#!/bin/sh\nexit 1\n"
    assert "left as found .git/hooks/pre-push (changed after the last command ended" in res.output, res.output
    assert ".git/config" not in res.output and "pre-push.sample" not in res.output


@pytest.mark.parametrize("mode", MODES)
def test_a_worktree_added_then_removed_by_commands_leaves_no_half_folder(tmp_path, mode):
    _available(mode, tmp_path)
    root = repo(tmp_path)
    assert run(root, mode, "git worktree add -q wt -b side").exit_code == 0
    res = run(root, mode, "git worktree remove wt")
    assert res.exit_code == 0, res.output
    assert not (root / ".git" / "worktrees" / "wt").exists(), res.output
    assert git(root, "worktree", "list", "--porcelain").stdout.count("worktree ") == 1
    assert "put back" not in res.output
