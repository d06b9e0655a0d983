"""Git, when the workspace is a repository: the status line's branch and dirty count, what changed
among given paths, and a commit of exactly those paths. Never a push, never the state folder.

git runs as a subprocess with a time limit (never through the agent's run_command), and never with
a configuration that could run a program on our behalf: the repository's own `.git/config` is
writable by anything that ran in the workspace, so every call pins the settings that start
programs (fsmonitor, hooks, signing, pager, editor, automatic gc, external diff and textconv) and
refuses to start at all when the repository's config defines a filter driver (a `clean`, `smudge`
or `process` command, which `git status` and `git add` would run). Settings from the user's global
and system config are the user's own and stay in force, except the pinned ones. Pathspecs are
literal (a file named `:(exclude)x` is that file) and the environment's GIT_DIR-style variables
are dropped, so we always act on the workspace's repository.

A subprocess rather than a library: libgit2 bindings ignore the user's config (identity, excludes,
LFS), and GitPython runs the same git binary with less control over these settings.

A workspace may be a folder inside a larger repository: paths in and out are relative to the
workspace root; the dirty count covers the workspace only.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import WorkstationError
from .paths import absolute_path_env, find_program

TIMEOUT_S = 10.0  # one git call; a commit of a huge tree may take a while, a status never should
COMMIT_TIMEOUT_S = 60.0

# Settings that would start a program, pinned on every call (command-line config wins over every file).
_PINNED = ("core.fsmonitor=false", "core.hooksPath=/dev/null", "commit.gpgSign=false", "tag.gpgSign=false",
           "gc.auto=0", "maintenance.auto=false", "core.pager=cat", "core.editor=true", "sequence.editor=true",
           "diff.external=")
# Repository-config keys that run a program we cannot pin off (their names are free): refused.
_FILTER_COMMANDS = ("clean", "smudge", "process")
_LOCAL_SCOPES = ("local", "worktree")
# Environment kept for git: the user's identity and choice of config files; GIT_DIR and the like go.
_KEEP_ENV = ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
             "GIT_COMMITTER_DATE", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM")


class GitError(WorkstationError):
    """A git call failed, timed out, or was refused; one line says which and why."""


@dataclass(frozen=True)
class GitStatus:
    """What the status line shows: `main ±3`."""

    branch: str  # "main", "detached at 1a2b3c4", "main (no commits yet)"
    dirty: int | None  # changed, added, deleted and untracked paths in the workspace; None: not counted
    problem: str = ""  # why the count is missing (a config that would run a program, a timeout...)
    elapsed_ms: float = 0.0

    @property
    def label(self) -> str:
        if self.dirty is None:
            return f"{self.branch} ?"
        return f"{self.branch} ±{self.dirty}" if self.dirty else self.branch


@dataclass(frozen=True)
class Change:
    path: str  # workspace-relative, '/' separators
    code: str  # porcelain XY: "M ", " M", "??", " D", "A "...

    @property
    def new(self) -> bool:
        return self.code == "??" or self.code.startswith("A")

    @property
    def deleted(self) -> bool:
        return "D" in self.code


@dataclass
class Commit:
    sha: str  # abbreviated
    branch: str
    message: str
    paths: list[str] = field(default_factory=list)

    @property
    def summary(self) -> str:
        return self.message.splitlines()[0] if self.message else ""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in _KEEP_ENV}
    env.update(PATH=absolute_path_env(), GIT_TERMINAL_PROMPT="0", GIT_EDITOR="true", GIT_PAGER="cat", GIT_SEQUENCE_EDITOR="true",
               GIT_OPTIONAL_LOCKS="0", LC_ALL="C", LANGUAGE="C")
    return env


def _git(cwd: Path, *args: str, timeout: float | None = None, stdin: bytes | None = None,
         check: bool = True) -> subprocess.CompletedProcess:
    timeout = TIMEOUT_S if timeout is None else timeout
    git = find_program("git")  # never a `git` a relative PATH entry finds in the repository
    if git is None:
        raise GitError("git is not installed (no git on PATH)")
    command = [git, "--no-pager", "--literal-pathspecs"]
    for setting in _PINNED:
        command += ["-c", setting]
    command += list(args)
    try:
        proc = subprocess.run(command, cwd=cwd, env=_env(), input=stdin, capture_output=True, timeout=timeout,
                              stdin=None if stdin is not None else subprocess.DEVNULL)
    except FileNotFoundError:
        raise GitError("git is not installed (no git on PATH)") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} took longer than {timeout:g}s and was stopped") from None
    if check and proc.returncode != 0:
        raise GitError(f"git {args[0]} failed: {_last_line(proc.stderr) or f'exit {proc.returncode}'}")
    return proc


def _last_line(data: bytes) -> str:
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    # git says the cause first ("fatal: ...") and hints after; the fatal line names the problem
    for line in lines:
        if line.startswith(("fatal:", "error:")):
            return line
    return lines[-1] if lines else ""


class Repo:
    """The repository holding a workspace root (`find`), seen from that root."""

    def __init__(self, root: Path, top: Path, prefix: str):
        self.root = root  # the workspace root (a real path)
        self.top = top  # the repository's top level
        self.prefix = prefix  # the workspace root relative to the top level: "" or "sub/dir/"

    def __repr__(self) -> str:
        return f"Repo({self.top}, prefix={self.prefix!r})"

    @classmethod
    def find(cls, root: str | os.PathLike) -> "Repo | None":
        """The repository the workspace root is in; None when it is in none (or git is missing)."""
        real = Path(os.path.realpath(root))
        try:
            proc = _git(real, "rev-parse", "--show-toplevel", "--show-prefix", check=False)
        except GitError:
            return None
        lines = proc.stdout.decode("utf-8", "surrogateescape").splitlines()
        if proc.returncode != 0 or not lines:
            return None
        prefix = lines[1] if len(lines) > 1 else ""
        return cls(real, Path(lines[0]), prefix)

    # ------------------------------------------------------------------ reading
    def _top_path(self, rel: str) -> str:
        return self.prefix + rel

    def _workspace_path(self, top_rel: str) -> str | None:
        return top_rel[len(self.prefix):] if top_rel.startswith(self.prefix) else None

    def program_in_config(self) -> str | None:
        """The first key of the repository's own config that would run a program we cannot pin off."""
        proc = _git(self.top, "config", "--list", "--show-scope", "-z", check=False)
        if proc.returncode not in (0, 1):  # 1: no config at all
            raise GitError(f"git config failed: {_last_line(proc.stderr)}")
        fields = proc.stdout.decode("utf-8", "replace").split("\0")  # scope, key\nvalue, scope, key\nvalue...
        for scope, setting in zip(fields[0::2], fields[1::2]):
            key = setting.split("\n", 1)[0].lower()
            if scope in _LOCAL_SCOPES and key.startswith("filter.") and key.rsplit(".", 1)[-1] in _FILTER_COMMANDS:
                return key
        return None

    def _refuse_programs(self) -> None:
        key = self.program_in_config()
        if key is not None:
            raise GitError(f"the repository's .git/config sets {key}, a command git would run on our behalf: "
                           "refused (run git yourself, or remove that setting)")

    def branch(self) -> str:
        proc = _git(self.top, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
        if proc.returncode == 0:
            name = proc.stdout.decode("utf-8", "replace").strip()
            if _git(self.top, "rev-parse", "--verify", "--quiet", "HEAD", check=False).returncode != 0:
                return f"{name} (no commits yet)"
            return name
        sha = _git(self.top, "rev-parse", "--short", "HEAD", check=False).stdout.decode().strip()
        return f"detached at {sha}" if sha else "detached"

    def status(self) -> GitStatus:
        """Branch and how many paths in the workspace differ from HEAD (untracked ones included), from
        two git calls. Never raises: a problem is reported in `problem`, with what could not be known
        left out."""
        started = time.perf_counter()
        try:
            self._refuse_programs()
            proc = _git(self.root, "status", "--porcelain=v2", "--branch", "-z", "--untracked-files=normal",
                        "--ignore-submodules=all", "--", ".")
        except GitError as err:
            try:
                branch = self.branch()  # reads refs only: runs nothing
            except GitError:
                branch = "?"
            return GitStatus(branch, None, str(err), _ms(started))
        branch, dirty = _parse_v2(proc.stdout)
        return GitStatus(branch, dirty, "", _ms(started))

    def changes(self, paths: list[str]) -> list[Change]:
        """Which of these workspace paths differ from HEAD (new, modified, deleted), in their order;
        ignored files and paths outside the workspace are not changes."""
        wanted = [p for p in dict.fromkeys(paths) if p and not p.startswith("../")]
        if not wanted:
            return []
        self._refuse_programs()
        found: dict[str, str] = {}
        for chunk in _chunks(wanted, 500):
            proc = _git(self.top, "status", "--porcelain=v1", "-z", "--untracked-files=all",
                        "--ignore-submodules=all", "--", *[self._top_path(p) for p in chunk])
            for code, top_rel in _entries_v1(proc.stdout):
                rel = self._workspace_path(top_rel)
                if rel is not None:
                    found.setdefault(rel, code)
        return [Change(p, found[p]) for p in wanted if p in found]

    def has_head(self) -> bool:
        return _git(self.top, "rev-parse", "--verify", "--quiet", "HEAD", check=False).returncode == 0

    def diff(self, changes: list[Change], limit: int = 12_000) -> str:
        """The changes as a unified diff against HEAD (new files shown whole), cut at `limit` characters:
        what a model reads to write the commit message. Touches neither the index nor the files."""
        tracked = [c.path for c in changes if c.code != "??"]
        parts: list[str] = []
        if tracked and self.has_head():
            proc = _git(self.top, "diff", "--no-ext-diff", "--no-textconv", "--no-color", "HEAD", "--",
                        *[self._top_path(p) for p in tracked])
            parts.append(proc.stdout.decode("utf-8", "replace"))
        for change in changes:
            if change.code == "??" or (change.new and not self.has_head()):
                try:
                    text = (self.root / change.path).read_bytes()[:limit].decode("utf-8", "replace")
                except OSError as err:
                    text = f"(unreadable: {err.strerror})"
                body = "".join(f"+{line}\n" for line in text.splitlines())
                parts.append(f"new file {change.path}\n{body}")
        whole = "\n".join(p for p in parts if p)
        if len(whole) > limit:
            whole = whole[:limit] + f"\n[... {len(whole) - limit:,} more characters of diff]"
        return whole

    # ------------------------------------------------------------------ writing
    def commit(self, paths: list[str], message: str) -> Commit:
        """Commit exactly these workspace paths (their working-tree state: new, changed or deleted) with
        `message`; whatever else is staged stays staged and out of the commit. Hooks do not run."""
        if not message.strip():
            raise GitError("empty commit message")
        self._refuse_programs()
        tops = [self._top_path(p) for p in paths]
        _git(self.top, "add", "--all", "--", *tops, timeout=COMMIT_TIMEOUT_S)
        _git(self.top, "commit", "--quiet", "--no-verify", "--file=-", "--", *tops, stdin=message.encode("utf-8"),
             timeout=COMMIT_TIMEOUT_S)
        sha = _git(self.top, "rev-parse", "--short", "HEAD").stdout.decode().strip()
        return Commit(sha, self.branch(), message, list(paths))


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def _parse_v2(out: bytes) -> tuple[str, int]:
    """(branch, paths) of `git status --porcelain=v2 --branch -z` output (a rename counts once)."""
    count = 0
    head = oid = ""
    fields = out.split(b"\0")
    i = 0
    while i < len(fields):
        entry = fields[i]
        i += 1
        if entry.startswith(b"# branch.head "):
            head = entry[14:].decode("utf-8", "replace")
        elif entry.startswith(b"# branch.oid "):
            oid = entry[13:].decode("utf-8", "replace")
        elif entry[:1] in (b"1", b"u", b"?"):
            count += 1
        elif entry[:1] == b"2":
            count += 1
            i += 1  # the original path of a rename or copy
    if head == "(detached)":
        branch = f"detached at {oid[:7]}"
    elif oid == "(initial)":
        branch = f"{head} (no commits yet)"
    else:
        branch = head or "?"
    return branch, count


def _entries_v1(out: bytes) -> list[tuple[str, str]]:
    """(XY, path) of `git status --porcelain=v1 -z` output; a rename gives its new path and its old one."""
    entries: list[tuple[str, str]] = []
    fields = out.split(b"\0")
    i = 0
    while i < len(fields):
        entry = fields[i]
        i += 1
        if len(entry) < 4:
            continue
        code, path = entry[:2].decode(), entry[3:].decode("utf-8", "surrogateescape")
        entries.append((code, path))
        if code[0] in "RC" and i < len(fields):
            entries.append((" D", fields[i].decode("utf-8", "surrogateescape")))  # the rename's source is gone
            i += 1
    return entries


def status(root: str | os.PathLike) -> GitStatus | None:
    """Branch and dirty count of the workspace at `root`; None when it is not in a repository."""
    repo = Repo.find(root)
    return None if repo is None else repo.status()
