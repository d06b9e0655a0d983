"""Attacks on the put-back of `.git` and our config (Landlock and no sandbox; `sandbox/protect.py`), each a
function of a fresh folder and a sandbox mode that returns what got through (empty: held). They run in the
test process (tests/integration/test_putback.py) and as an unprivileged uid of their own (the same file,
through `RUNNER`), so they use nothing but the standard library, git and the package.

Judged by effect: a user's file gone or changed, a user's edit made meanwhile undone, a repository git no
longer recognizes, a hook left in place."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable

from workstation.agent.tools.shellrun import CommandResult, run_command
from workstation.sandbox import Policy

IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_NOSYSTEM": "1"}
HOOK = "#!/bin/sh\ntouch {marker}\n"
CONFIG = "[agent]\nmax_steps = 9\n"


def git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          env={**os.environ, **IDENTITY})
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {done.stderr}")
    return done


def repo(base: Path) -> Path:
    root = base / "ws"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    git(root, "init", "-q")
    git(root, "add", "a.py")
    git(root, "commit", "-q", "-m", "one")
    (root / ".workstation").mkdir()
    (root / ".workstation" / "config.toml").write_text(CONFIG)
    return root


def run(root: Path, mode: str, command: str) -> CommandResult:
    return run_command(command, root, allow=[], approve=lambda req: True, timeout_s=60, max_output_chars=20_000,
                       sandbox=Policy(root, mode=mode))


def while_running(root: Path, mode: str, command: str, meanwhile: Callable[[], None]) -> CommandResult:
    """Run `command` (which waits for `go` after making `started`) while this process, not one the command
    started, does `meanwhile`: the user in their editor or another terminal."""
    def user() -> None:
        deadline = time.monotonic() + 30
        while not (root / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        try:
            meanwhile()
        finally:
            (root / "go").touch()

    helper = threading.Thread(target=user)
    helper.start()
    try:
        return run(root, mode, f"sh -c 'touch started; {command}; "
                               "while [ ! -e go ]; do sleep 0.02; done'")
    finally:
        helper.join()


def _git_works(where: Path) -> str | None:
    done = git(where, "status", "--porcelain", check=False)
    return None if done.returncode == 0 else f"git status in {where.name}: {done.stderr.strip()[:120]}"


# --------------------------------------------------------------------------- a user's file is never deleted
def large_file_touched(base: Path, mode: str) -> list[str]:
    """A user's 5 MB file in .git/hooks, only touched by a command."""
    root = repo(base)
    big = root / ".git" / "hooks" / "recorded.bin"
    data = os.urandom(5 << 20)
    big.write_bytes(data)
    res = run(root, mode, "touch .git/hooks/recorded.bin")
    if not big.exists():
        return [f"the 5 MB file was deleted ({res.output[-200:]})"]
    return [] if big.read_bytes() == data else ["the 5 MB file changed"]


def large_hook_rewritten(base: Path, mode: str) -> list[str]:
    """A user's 5 MB hook that a command rewrites: put back as it was, what the command wrote kept aside."""
    root = repo(base)
    hook = root / ".git" / "hooks" / "pre-push"
    data = b"#!/bin/sh\nexit 0\n" + b"#" * (5 << 20) + b"\n"
    hook.write_bytes(data)
    hook.chmod(0o755)
    res = run(root, mode, f"sh -c 'printf \"#!/bin/sh\\ntouch {base}/pwned\\n\" > .git/hooks/pre-push'")
    if not hook.exists():
        return [f"the user's 5 MB hook was deleted ({res.output[-200:]})"]
    if hook.read_bytes() != data:
        return ["the user's 5 MB hook was left as the command wrote it"]
    return [] if os.access(hook, os.X_OK) else ["the hook lost its exec bit"]


# --------------------------------------------------------------------------- what the user did meanwhile
def user_edits_config_meanwhile(base: Path, mode: str) -> list[str]:
    root = repo(base)
    config = root / ".workstation" / "config.toml"
    mine = "[agent]\nmax_steps = 12\n# mine, saved in my editor while a command ran\n"

    def editor() -> None:  # as editors save: a temporary file renamed over
        tmp = config.with_name(".config.toml.swp")
        tmp.write_text(mine)
        os.replace(tmp, config)

    res = while_running(root, mode, "true", editor)
    return [] if config.read_text() == mine else [f"the user's edit of config.toml was undone ({res.output[-300:]})"]


def user_adds_a_remote_meanwhile(base: Path, mode: str) -> list[str]:
    """`git remote add` in another terminal while a command that plants a hook runs: the remote stays, the
    hook goes."""
    root = repo(base)
    marker = base / "pwned"
    plant = (f"printf \"{HOOK.format(marker=marker)}\" > .git/hooks/pre-commit; "
             "chmod +x .git/hooks/pre-commit").replace("\n", "\\n")
    res = while_running(root, mode, plant,
                        lambda: git(root, "remote", "add", "origin", "https://example.invalid/r.git"))
    through = []
    if git(root, "remote", "get-url", "origin", check=False).returncode != 0:
        through.append(f"the user's `git remote add` was undone ({res.output[-300:]})")
    if (root / ".git" / "hooks" / "pre-commit").exists():
        through.append("the command's hook stayed")
    return through


# --------------------------------------------------------------------------- git's own state stays consistent
def worktree_add(base: Path, mode: str) -> list[str]:
    root = repo(base)
    res = run(root, mode, "git worktree add -q wt -b side")
    if res.exit_code != 0:
        return [f"git worktree add failed in the command: {res.output[-300:]}"]
    return [why for why in (_git_works(root / "wt"), _git_works(root)) if why]


def dot_git_swapped_for_a_link(base: Path, mode: str) -> list[str]:
    root = repo(base)
    marker = base / "pwned"
    res = run(root, mode, "sh -c 'mv .git .git-real && ln -s .git-real .git && "
                          f"printf \"{HOOK.format(marker=marker)}\" > .git-real/hooks/pre-commit && "
                          "chmod +x .git-real/hooks/pre-commit'".replace("\n", "\\n"))
    through = [why for why in [_git_works(root)] if why]
    if (root / ".git").is_symlink() or not (root / ".git" / "HEAD").is_file():
        through.append(f".git is not the repository's folder ({res.output[-300:]})")
    git(root, "commit", "-q", "--allow-empty", "-m", "two", check=False)
    if marker.exists():
        through.append("the hook planted through the link ran")
    return through


def git_init(base: Path, mode: str) -> list[str]:
    """A command that makes the repository (`git init` where there was none) leaves one git recognizes."""
    root = base / "ws"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    res = run(root, mode, "git init -q")
    if res.exit_code != 0:
        return [f"git init failed in the command: {res.output[-300:]}"]
    return [why for why in [_git_works(root)] if why]


# --------------------------------------------------------------------------- after the command
def detached_child_writes_later(base: Path, mode: str) -> list[str]:
    """A process the command leaves running writes a hook after the put-back: the next command names it (and
    leaves it as found, as it would the user's own hook: which wrote it cannot be told)."""
    root = repo(base)
    marker = base / "pwned"
    hook = root / ".git" / "hooks" / "post-checkout"
    body = HOOK.format(marker=marker).replace("\n", "\\n")
    run(root, mode, f"sh -c '(sleep 1; printf \"{body}\" > {hook}; chmod +x {hook}) "
                    "</dev/null >/dev/null 2>&1 &'")
    deadline = time.monotonic() + 20
    while not hook.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    if not hook.exists():
        return ["the detached child did not write (not judged)"]
    res = run(root, mode, "true")
    through = []
    if "left as found .git/hooks/post-checkout" not in res.output:
        through.append(f"the next command did not name it ({res.output[-300:]})")
    return through


SCENARIOS: dict[str, Callable[[Path, str], list[str]]] = {
    f.__name__: f for f in (large_file_touched, large_hook_rewritten, user_edits_config_meanwhile,
                            user_adds_a_remote_meanwhile, worktree_add, dot_git_swapped_for_a_link, git_init,
                            detached_child_writes_later)}

# Run as the unprivileged uid: argv base mode; prints {scenario: what got through} as JSON.
RUNNER = """
import json, sys, tempfile, traceback
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from support import putback_support
from workstation import sandbox
base, mode = Path(sys.argv[1]), sys.argv[2]
state = sandbox.status(sandbox.Policy(base, mode=mode))
if mode != "off" and state.backend != mode:
    print(json.dumps({"unavailable": state.line})); sys.exit(0)
out = {}
for name, scenario in putback_support.SCENARIOS.items():
    folder = Path(tempfile.mkdtemp(dir=base, prefix=name + "-"))
    try:
        out[name] = scenario(folder, mode)
    except Exception:
        out[name] = ["raised: " + traceback.format_exc()[-600:]]
print(json.dumps(out))
"""
