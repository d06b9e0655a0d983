"""What neither a tool nor a command may write, whatever runs it: `Protected`, the `protected` field of
every sandbox `Policy`, defined here once.

- The workspace's `.git` (and the folder a `.git` file points to inside the workspace), and for the file
  tools any path part named `.git` in any spelling: a rewritten `.git/config` (core.fsmonitor, a filter,
  core.pager) or a hook runs any program the next time anyone, or an allow-listed command, runs git.
- The state folders (`<root>/.workstation`, a moved `workspace.state_dir`): config, databases, session
  logs. Commands may not even read them.

Who reads it:
- the file tools' writes, through `Protected.confine_write` (every WRITE tool, checkpoints, undo);
- bubblewrap mounts the git folders read-only and the state folders empty; Seatbelt denies them;
- Landlock cannot carve a folder out of a writable workspace and no sandbox confines nothing, so there
  `kept` holds what git runs (the git folders' config, hooks, info/, as `GUARDED` says) and the files
  that configure us (`paths.CONFIG_FILES`) as they were before the command, and puts back whatever the
  command changed, added or removed when it ends. A process it leaves running could still write later.
"""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..fsutil import GitFolder, StateFolder, confine, folded, inside
from ..paths import CONFIG_FILES, STATE_DIRNAME

GIT_NAMES = (".git", "git~1")  # a path part so named (folded: any case, HFS+ and NTFS spellings) is git's
# what git runs or obeys, inside a git folder: its config files, hooks and info/ (attributes naming filters),
# also those of submodules (modules/NAME/) and worktrees (worktrees/NAME/); never objects, refs or logs
GUARDED_FILES = ("config", "config.worktree", "commondir", "gitdir")
GUARDED_FOLDERS = ("hooks", "info")
UNGUARDED = ("objects", "refs", "logs", "lfs")
GUARD_MAX_BYTES = 4 << 20  # a guarded file larger than this is not kept (a hook is a script, a config a page)


@dataclass(frozen=True)
class Protected:
    """The paths no tool and no command may write in the workspace `root`; see the module docstring."""

    root: Path
    state: tuple[Path, ...] = ()  # <root>/.workstation is always one

    def __post_init__(self) -> None:
        root = Path(os.path.realpath(self.root))
        object.__setattr__(self, "root", root)
        state = [root / STATE_DIRNAME, *(Path(os.path.realpath(p)) for p in self.state)]
        object.__setattr__(self, "state", tuple(dict.fromkeys(state)))

    def git(self) -> tuple[Path, ...]:
        """`<root>/.git`, and where `.git` is a file (`gitdir: ...`), the folder it points to when that is
        inside the workspace (outside, it is out of reach already). Read at each call: a repository may
        be made or moved while we run."""
        dot_git = self.root / ".git"
        out = [dot_git]
        if dot_git.is_file():
            try:
                first = dot_git.read_text(errors="replace").splitlines()[0]
            except (OSError, IndexError):
                return tuple(out)
            if first.startswith("gitdir:"):
                target = Path(os.path.realpath(self.root / first.removeprefix("gitdir:").strip()))
                if self.root in target.parents and target.exists():
                    out.append(target)
        return tuple(out)

    def confine_write(self, path: str) -> tuple[Path, str]:
        """`fsutil.confine` (inside the root, never in a state folder, through links too), and never in a git
        folder. Refused: any part of the real path named `.git` in any case (`.GIT/` is `.git/` on a
        case-insensitive filesystem), with the characters HFS+ ignores or the trailing dots and spaces NTFS
        drops, or `git~1`; anything that is one of the git folders by file identity, however spelled; and
        the state folder's name so spelled (`.WORKSTATION/` is the state folder once checked out elsewhere).
        Returns the real path and the workspace-relative one."""
        real, rel = confine(self.root, path, self.state)
        parts = [folded(part) for part in rel.split("/")]
        if parts[0] == STATE_DIRNAME:
            raise StateFolder(f"{path} is in the workspace's state folder (config, databases, session logs): "
                              "refused")
        if any(part in GIT_NAMES for part in parts) or inside(real, self.root, list(self.git())):
            raise GitFolder(f"{path} is in a .git folder: the agent may read it but never write it")
        return real, rel

    def guarded(self) -> dict[Path, bytes | str | tuple | None]:
        """What `kept` holds for a backend that cannot keep commands out: each guarded path of the git
        folders and each config file of ours, with its bytes (a link: its target; absent: None; `_content`)."""
        found: dict[Path, bytes | str | tuple | None] = {self.root / STATE_DIRNAME / name: None for name in CONFIG_FILES}
        dot_git = self.root / ".git"
        if os.path.lexists(dot_git) and (dot_git.is_symlink() or not dot_git.is_dir()):
            found[dot_git] = None  # a `gitdir:` pointer: where git looks for its config
        for git in self.git():
            if git.is_dir() and not git.is_symlink():
                for name in GUARDED_FILES:
                    found[git / name] = None
                for path in _walk(git):
                    found[path] = None
        for path in found:
            found[path] = _content(path)
        return found


def _walk(git: Path) -> Iterator[Path]:
    """The guarded files under one git folder, links not followed."""
    for top, dirs, files in os.walk(git):
        rel = Path(top).relative_to(git).parts
        dirs[:] = [d for d in dirs if d not in UNGUARDED]
        under = any(part in GUARDED_FOLDERS for part in rel)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(top, d))]:  # a link: never walked
            if under or name in GUARDED_FILES or name in GUARDED_FOLDERS:
                yield Path(top, name)


def _content(path: Path) -> bytes | str | tuple | None:
    """bytes; a link's target; None: absent; a tuple: present but not kept (too large, not a file)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return os.readlink(path)
    if not stat.S_ISREG(st.st_mode) or st.st_size > GUARD_MAX_BYTES:
        return (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino)
    try:
        return path.read_bytes()
    except OSError as err:
        return (st.st_mode, st.st_size, st.st_mtime_ns, err.errno)


@contextmanager
def kept(protected: Protected, put_back: list[str]) -> Iterator[None]:
    """Run the body (a command under Landlock or no sandbox), then put every guarded path it changed back
    as it was, naming each (relative to the root) in `put_back`. Modes are kept too (a hook's exec bit)."""
    before = protected.guarded()
    modes = {p: _mode(p) for p, v in before.items() if isinstance(v, bytes)}
    try:
        yield
    finally:
        after = protected.guarded()
        for path in sorted(set(before) | set(after)):
            was, now = before.get(path), after.get(path)
            if was == now and (not isinstance(was, bytes) or _mode(path) == modes.get(path)):
                continue
            rel = path.relative_to(protected.root).as_posix() if protected.root in path.parents else str(path)
            try:
                _restore(protected.root, path, was, modes.get(path))
            except OSError as err:  # said, not raised: the command's own result still stands
                put_back.append(f"{rel} (NOT put back: {err.strerror or err})")
            else:
                put_back.append(rel)


def _mode(path: Path) -> int | None:
    try:
        return os.lstat(path).st_mode
    except OSError:
        return None


def _restore(root: Path, path: Path, was: bytes | str | tuple | None, mode: int | None) -> None:
    """`path` as it `was`: removed when it was absent or not kept (a changed file too large to keep goes
    rather than stays changed), else written back; a link or a file standing where one of its folders
    was (`.git` made a `gitdir:` pointer, `hooks` a link) is removed first."""
    import shutil  # lazy: only when a command changed something it may not

    from ..fsutil import atomic_write  # lazy: as above

    for folder in reversed(path.parents):
        if folder == root or root not in folder.parents:
            continue
        if os.path.lexists(folder) and (os.path.islink(folder) or not os.path.isdir(folder)):
            os.unlink(folder)
    if os.path.islink(path) or (os.path.lexists(path) and not os.path.isdir(path)):
        os.unlink(path)
    elif os.path.isdir(path):  # a folder made where a guarded file was: it goes, with what it holds
        shutil.rmtree(path)
    if was is None or isinstance(was, tuple):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(was, str):
        os.symlink(was, path)
    else:
        atomic_write(path, was, stat.S_IMODE(mode) if mode is not None else 0o644)
