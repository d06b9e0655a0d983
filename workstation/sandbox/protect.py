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
  `kept` looks at what git runs (the git folders' config, hooks, info/, as `GUARDED` says) and the files
  that configure us (`paths.CONFIG_FILES`) before the command and after it, and undoes what could make
  git run a program, never deleting anything (see "the put-back" below). A process the command leaves
  running could still write later: the next command names what changed since, and leaves it.
"""

from __future__ import annotations

import errno
import filecmp
import fnmatch
import functools
import itertools
import os
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..fsutil import GitFolder, StateFolder, confine, folded, inside
from ..paths import CONFIG_FILES, STATE_DIRNAME, user_dir

GIT_NAMES = (".git", "git~1")  # a path part so named (folded: any case, HFS+ and NTFS spellings) is git's
# what git runs or obeys, inside a git folder: its config files, hooks and info/ (attributes naming filters),
# also those of submodules (modules/NAME/) and worktrees (worktrees/NAME/); never objects, refs or logs
GUARDED_FILES = ("config", "config.worktree", "commondir", "gitdir")
GUARDED_FOLDERS = ("hooks", "info")
UNGUARDED = ("objects", "refs", "logs", "lfs")
GUARD_MAX_BYTES = 4 << 20  # a guarded file up to this is kept in memory, a larger one copied (KEEP_MAX_BYTES)


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

    def git_folder(self, path: Path) -> Path | None:
        """The git folder `path` is in, or None; a linked worktree's or a submodule's own folder
        (`worktrees/NAME`, `modules/NAME`) for what is inside one."""
        for git in self.git():
            if git in path.parents:
                parts = path.relative_to(git).parts
                if parts[0] in ("worktrees", "modules") and len(parts) > 2:
                    return git / parts[0] / parts[1]
                return git
        return None

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


    def guarded(self) -> list[Path]:
        """The paths `kept` watches where no sandbox keeps commands out: each guarded path of the git folders
        (`GUARDED_FILES`, `GUARDED_FOLDERS`), a `.git` that is a `gitdir:` pointer or a link, and our config files."""
        found = [self.root / STATE_DIRNAME / name for name in CONFIG_FILES]
        dot_git = self.root / ".git"
        if os.path.lexists(dot_git) and (dot_git.is_symlink() or not dot_git.is_dir()):
            found.append(dot_git)  # a `gitdir:` pointer: where git looks for its config
        for git in self.git():
            if git.is_dir() and not git.is_symlink():
                found += [git / name for name in GUARDED_FILES]
                found += list(_walk(git))
        return list(dict.fromkeys(found))


def _walk(git: Path) -> Iterator[Path]:
    """The guarded files under one git folder, links not followed."""
    for top, dirs, files in os.walk(git):
        rel = Path(top).relative_to(git).parts
        dirs[:] = [d for d in dirs if d not in UNGUARDED]
        under = any(part in GUARDED_FOLDERS for part in rel)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(top, d))]:  # a link: never walked
            if under or name in GUARDED_FILES or name in GUARDED_FOLDERS:
                yield Path(top, name)


# ------------------------------------------------------------------------------------------------ the put-back
# Where no sandbox keeps a command out of `.git` and the state folder (Landlock, none), `kept` looks at every
# guarded path before the command and after it. Who changed a path meanwhile, the command or the user in another
# terminal, cannot be told unprivileged (fanotify hides other processes' pids), so it judges what it finds:
# - what cannot make git run a program or read its config from elsewhere stays as found, whoever wrote it
#   (`_harmless`: a remote added to .git/config, an exclude line, a sample hook, a worktree's own pointers);
# - our config.toml stays as found and is named: trust pins its gated settings (trust.py), so a changed one
#   applies only once the user trusts the folder again;
# - anything else that changed is put back as it was; what stood there is moved, never deleted, to the
#   `put-back/` folder of the user's config home (out of a Landlocked command's reach) and named, so a user's
#   edit made meanwhile is one `mv` away;
# - a file removed is put back, unless the git folder it belongs to went whole (`git worktree remove`);
# - a `.git` folder moved away (`.git` made a link to it) is moved back first;
# - what it could not keep (`KEEP_MAX_BYTES`, not a file) and that changed is left as found and named.
# A process the command leaves running may still write after it ends: at the next command, what changed in the
# git folders since is named, and left as found: that process or the user changed it, and which cannot be told.

# what `workstation sandbox` says where the put-back stands in for the sandbox
AFTER_NOTE = ("no sandbox here keeps commands out of .git: after each command, what could make git run a program "
              "(hooks, program keys of its config, info/attributes) is put back, what stood there moved to "
              "the put-back folder of your config home (the command's output names it); a process a command "
              "leaves running can still change .git after that: the next command names what changed, and leaves it as "
              "found (you may have made the change yourself); a sandbox with bubblewrap keeps .git read-only")
PINNED_BY_TRUST = ("config.toml",)  # our config files whose every reaching setting trust pins by digest
HARMLESS_INFO = ("exclude", "sparse-checkout", "refs", "packs")  # info/ files that name no program
# .git/config keys that run nothing and send git nowhere else for config or hooks (fnmatch, lower case)
HARMLESS_GIT_KEYS = (
    "core.repositoryformatversion", "core.filemode", "core.bare", "core.logallrefupdates", "core.ignorecase",
    "core.precomposeunicode", "core.symlinks", "core.autocrlf", "core.eol",
    "remote.*.url", "remote.*.pushurl", "remote.*.fetch", "remote.*.push", "remote.*.tagopt", "remote.*.prune",
    "remote.*.mirror", "branch.*.remote", "branch.*.merge", "branch.*.rebase", "branch.*.pushremote",
    "branch.*.description", "user.name", "user.email", "init.defaultbranch", "pull.rebase", "pull.ff",
    "push.default", "fetch.prune", "submodule.*.url", "submodule.*.active", "gc.auto", "rerere.enabled")
KEEP_MAX_BYTES = 64 << 20  # large guarded files (past GUARD_MAX_BYTES) are copied aside up to this much in all
PUT_BACK_DIRNAME = "put-back"  # in paths.user_dir(): what the put-back moved out of the way
_last: dict[Path, dict[Path, "Seen"]] = {}  # root -> its guarded paths as the last put-back left them
_last_lock = threading.Lock()


@dataclass(frozen=True)
class Seen:
    """One guarded path as found: absent, a file (its bytes, or a large one's copy), a link, or other."""

    kind: str  # "absent" | "file" | "link" | "other"
    mode: int = 0
    data: bytes | str | None = None  # a file's bytes up to GUARD_MAX_BYTES; a link's target
    stamp: tuple = ()  # (size, mtime_ns, ctime_ns, inode): unchanged when equal
    copy: Path | None = None  # a large file's copy, made before the command

    @property
    def keepable(self) -> bool:
        return self.kind in ("absent", "link") or (self.kind == "file" and (self.data is not None or
                                                                             self.copy is not None))


ABSENT = Seen("absent")


def _seen(path: Path, keep: Path | None = None, budget: list[int] | None = None) -> Seen:
    """`path` as it is now; a large file is copied into `keep` while `budget` (bytes) lasts."""
    try:
        st = os.lstat(path)
    except OSError:
        return ABSENT
    stamp = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    if stat.S_ISLNK(st.st_mode):
        try:
            return Seen("link", st.st_mode, os.readlink(path), stamp)
        except OSError:  # gone since
            return ABSENT
    if not stat.S_ISREG(st.st_mode):
        return Seen("other", st.st_mode, None, stamp)
    if st.st_size <= GUARD_MAX_BYTES:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as f:
                return Seen("file", st.st_mode, f.read(), stamp)
        except OSError:
            return Seen("file", st.st_mode, None, stamp)
    copy = None
    if keep is not None and budget is not None and budget[0] >= st.st_size:
        copy = keep / f"large-{len(os.listdir(keep))}"
        try:
            shutil.copyfile(path, copy, follow_symlinks=False)
            budget[0] -= st.st_size
        except OSError:
            copy = None
    return Seen("file", st.st_mode, None, stamp, copy)


def _same(was: Seen, now: Seen, path: Path) -> bool:
    if was.kind != now.kind or was.mode != now.mode:
        return False
    if was.kind in ("absent", "link"):
        return was.data == now.data
    if was.data is not None and now.data is not None:
        return was.data == now.data
    if was.stamp == now.stamp:
        return True
    if was.copy is not None and now.data is None and was.stamp[0] == now.stamp[0]:  # a large file touched
        try:
            return filecmp.cmp(was.copy, path, shallow=False)
        except OSError:
            return False
    return False


@contextmanager
def kept(protected: Protected, put_back: list[str]) -> Iterator[None]:
    """Run the body (a command under Landlock or no sandbox), then undo what it changed of the guarded paths
    that could make git run a program or steer workstation, as the block above says; each path it put back,
    moved or left as found is named in `put_back` (relative to the root)."""
    root = protected.root
    keep = Path(tempfile.mkdtemp(prefix="workstation-keep-"))  # outside the workspace: no command writes it
    try:
        budget = [KEEP_MAX_BYTES]
        repository = _folder_id(root / ".git")
        before = {path: _seen(path, keep, budget) for path in protected.guarded()}
        with _last_lock:
            last = _last.get(root)
        if last is not None:  # what a process a command left running may have written since it ended
            before.update(_PutBack(protected, keep, put_back, since=True).settle(last, None, before))
        try:
            yield
        finally:
            # the state each path was judged in, not one read again: what a process writes after the judgment
            # differs from it at the next command
            settled = _PutBack(protected, keep, put_back).settle(before, repository)
            with _last_lock:
                _last[root] = {path: Seen(seen.kind, seen.mode, seen.data, seen.stamp)
                               for path, seen in settled.items() if protected.git_folder(path) is not None}
    finally:
        shutil.rmtree(keep, ignore_errors=True)


def _folder_id(path: Path) -> tuple[int, int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


class _PutBack:
    """One put-back: after a command (`since` False), or at the next one of what changed since (`since`)."""

    def __init__(self, protected: Protected, scratch: Path, said: list[str], since: bool = False) -> None:
        self.protected, self.root, self.scratch, self.said, self.since = protected, protected.root, scratch, said, since
        self.aside: Path | None = None

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() if self.root in path.parents else str(path)

    def settle(self, before: dict[Path, Seen], repository: tuple[int, int] | None,
               found: dict[Path, Seen] | None = None) -> dict[Path, Seen]:
        """Judge each guarded path (as `found` has it, else as read now) against `before`; the state each was
        left in."""
        if repository is not None:
            try:
                self._repository(repository)
            except OSError as err:
                self.said.append(f"NOT moved back .git (the repository's folder): {err.strerror or err}")
        paths = sorted(set(before) | set(found or self.protected.guarded()))
        if self.since:
            paths = [p for p in paths if self.protected.git_folder(p) is not None]
        settled: dict[Path, Seen] = {}
        for path in paths:  # sorted: a folder before what it holds, so a link put away is not followed after
            was = before.get(path, ABSENT)
            now = found[path] if found is not None and path in found else _seen(path)
            settled[path] = now
            if _same(was, now, path):
                continue
            try:
                settled[path] = self._one(path, was, now)
            except (OSError, ValueError) as err:  # said, not raised: the command's own result still stands
                self.said.append(f"NOT put back {self.rel(path)}: {getattr(err, 'strerror', None) or err}")
        if self.aside is not None:
            self.said.insert(0, f"what stood in their place is in {self.aside}/")
        return settled

    def _one(self, path: Path, was: Seen, now: Seen) -> Seen:
        """Put `path` back (`was`, returned) or leave it as found (`now`, returned), saying which."""
        rel, when = self.rel(path), (" (changed after the last command ended: by a process it left running, "
                                     "or by you)" if self.since else "")
        if now.kind == "absent":
            if self.since:
                return now  # removed between commands: the user's to remove
            owner = self.protected.git_folder(path)
            if owner is not None and not (os.path.isdir(owner) and not os.path.islink(owner)):
                return now  # its whole git folder went (a worktree removed): one file of it alone is inconsistent
        elif _harmless(self.protected, path, was, now, self.scratch):
            if path.parent.name == STATE_DIRNAME:
                self.said.append(f"left as found {rel} (changed while the command ran, by it or by you; its "
                                 "trust-gated settings apply only once you run `workstation trust`)")
            return now
        if self.since:  # you, or a process the command left running: who cannot be told, so it is yours
            self.said.append(f"left as found {rel}{when}: it can make git run a program, look at it")
            return now
        if not was.keepable:
            self.said.append(f"left as found {rel}{when} (changed; too large to keep, or not a file)")
            return now
        self._put(path, was)
        self.said.append(f"put back {rel}{when}")
        return was

    def _put(self, path: Path, was: Seen) -> None:
        """`path` as it `was`. Each folder on the way is opened from the root without following a link (a
        process the command left may swap one for a link meanwhile); a link or file standing where one of them
        was, and what is at `path` now, is moved aside, never deleted."""
        fd = self._folder(path.parent)
        try:
            if _lexists(path.name, fd):
                self._move_aside(path, fd)
            if was.kind == "link":
                assert isinstance(was.data, str)
                os.symlink(was.data, path.name, dir_fd=fd)
            elif was.kind == "file":
                tmp = f".{path.name}.put-back-{os.getpid()}"
                out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                              stat.S_IMODE(was.mode), dir_fd=fd)
                try:
                    with os.fdopen(out, "wb") as f:
                        if isinstance(was.data, bytes):
                            f.write(was.data)
                        else:
                            assert was.copy is not None
                            with open(was.copy, "rb") as src:
                                shutil.copyfileobj(src, f)
                        os.fchmod(f.fileno(), stat.S_IMODE(was.mode))
                        f.flush()
                        os.fsync(f.fileno())
                    os.rename(tmp, path.name, src_dir_fd=fd, dst_dir_fd=fd)
                except BaseException:
                    with suppress(OSError):
                        os.unlink(tmp, dir_fd=fd)
                    raise
        finally:
            os.close(fd)

    def _folder(self, folder: Path) -> int:
        """An fd of `folder` (inside the root), each part opened without following a link; a part missing is
        made, a link or file standing where a part was is moved aside first."""
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for i, part in enumerate(folder.relative_to(self.root).parts):
                try:
                    st = os.stat(part, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    st = None
                if st is not None and not stat.S_ISDIR(st.st_mode):
                    self._move_aside(self.root.joinpath(*folder.relative_to(self.root).parts[:i + 1]), fd)
                    st = None
                if st is None:
                    os.mkdir(part, 0o755, dir_fd=fd)
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = inner
            return fd
        except BaseException:
            os.close(fd)
            raise

    def _move_aside(self, path: Path, parent_fd: int | None = None) -> None:
        """Move `path` (in the folder `parent_fd` is open on, else opened here) to the put-back folder: out of
        every command's reach under Landlock (the user's config home), so no link planted there redirects it."""
        if parent_fd is None:
            fd = self._folder(path.parent)
            try:
                return self._move_aside(path, fd)
            finally:
                os.close(fd)
        if self.aside is None:
            self.aside = _aside_folder(self.root)
        dest = self.aside / self.rel(path).lstrip("/")
        n = 1
        while os.path.lexists(dest) or any(os.path.lexists(d) and not os.path.isdir(d) for d in dest.parents):
            n += 1  # a link moved aside where a folder was must not take what that folder held
            dest = self.aside / f"~{n}" / self.rel(path).lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(path.name, dest, src_dir_fd=parent_fd)
        except OSError as err:
            if err.errno != errno.EXDEV:
                raise
            st = os.stat(path.name, dir_fd=parent_fd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(path.name, dir_fd=parent_fd), dest)
            elif stat.S_ISDIR(st.st_mode):
                shutil.copytree(f"/proc/self/fd/{parent_fd}/{path.name}", dest, symlinks=True)
                shutil.rmtree(path.name, dir_fd=parent_fd)
                return
            else:
                src = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent_fd)
                with os.fdopen(src, "rb") as f, open(dest, "xb") as out:
                    shutil.copyfileobj(f, out)
                os.chmod(dest, stat.S_IMODE(st.st_mode))
            os.unlink(path.name, dir_fd=parent_fd)

    def _repository(self, repository: tuple[int, int]) -> None:
        """`.git` was this folder: when it is no longer (moved, a link to it put in its place), move it back."""
        dot_git = self.root / ".git"
        if _folder_id(dot_git) == repository:
            return
        candidates = [Path(os.path.realpath(dot_git))] if os.path.lexists(dot_git) else []
        with os.scandir(self.root) as entries:
            candidates += [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]
        found = next((c for c in candidates if c != dot_git and self.root in c.parents
                      and _folder_id(c) == repository), None)
        if found is not None:
            if os.path.lexists(dot_git):
                self._move_aside(dot_git)
            fd = self._folder(found.parent)
            try:
                os.rename(found.name, dot_git, src_dir_fd=fd)
            finally:
                os.close(fd)
            self.said.append(f"moved back .git (the repository's folder, found at {self.rel(found)})")
        elif os.path.lexists(dot_git) and (os.path.islink(dot_git) or not os.path.isdir(dot_git)):
            self._move_aside(dot_git)
            self.said.append(".git: the repository's folder is gone; the link or file in its place was moved aside")
        else:
            self.said.append(".git: the repository's folder is gone (moved or removed by the command), left as found")


def _lexists(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _aside_folder(root: Path) -> Path:
    """A new folder for what one put-back moves out of the way: in the user's config home (paths.user_dir), out
    of reach of a command under Landlock, named after the workspace and the time."""
    base = user_dir() / PUT_BACK_DIRNAME
    base.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    for n in itertools.count(1):
        folder = base / f"{root.name or 'root'}-{stamp}-{n}"
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            continue
        return folder
    raise AssertionError("unreachable")


def _harmless(protected: Protected, path: Path, was: Seen, now: Seen, scratch: Path) -> bool:
    """Whether `path` as found (`now`, changed from `was`) can neither make git run a program nor send it
    elsewhere for its config or hooks, nor steer workstation beyond what trust allows."""
    if path.parent == protected.root / STATE_DIRNAME:
        return path.name in PINNED_BY_TRUST
    git = protected.git_folder(path)
    if git is None or path == protected.root / ".git" or now.kind != "file":
        return False
    parts = path.relative_to(git).parts
    if "hooks" in parts:  # git never runs a sample, but users enable one by renaming it: only git's own
        return path.name.endswith(".sample") and now.data is not None and now.data == _git_sample(path.name)
    if "info" in parts:
        return len(parts) >= 2 and parts[-2] == "info" and path.name in HARMLESS_INFO
    if path.name == "gitdir":  # a worktree's: where its checkout is
        return True
    if path.name == "commondir" and isinstance(now.data, bytes):  # a worktree's: must name this git folder
        common = Path(os.path.realpath(git / now.data.decode(errors="replace").strip()))
        return parts == ("commondir",) and git.parent.name == "worktrees" and common == git.parent.parent.resolve()
    if path.name in ("config", "config.worktree") and isinstance(now.data, bytes):
        return _harmless_config(was.data if was.kind == "file" else b"", now.data, scratch)
    return False


@functools.lru_cache(maxsize=None)
def _git_sample(name: str) -> bytes | None:
    """The sample hook `name` as git's own templates have it (what `git init` copies), or None."""
    try:
        exec_path = subprocess.run(["git", "--exec-path"], capture_output=True, text=True, timeout=10,
                                   stdin=subprocess.DEVNULL).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        exec_path = ""
    folders = [Path(exec_path).parents[1] / "share" / "git-core" / "templates"] if exec_path.count("/") >= 2 else []
    for folder in [*folders, Path("/usr/share/git-core/templates")]:
        try:
            return (folder / "hooks" / name).read_bytes()
        except OSError:
            continue
    return None


def _harmless_config(was: bytes | str | None, now: bytes, scratch: Path) -> bool:
    """Whether every key that differs between two git config files is one of `HARMLESS_GIT_KEYS`."""
    if not isinstance(was, bytes):
        return False
    entries = [_git_config(data, scratch) for data in (was, now)]
    if entries[0] is None or entries[1] is None:
        return False  # git could not read one: judged harmful
    changed = {key for key in set(entries[0]) | set(entries[1]) if entries[0].get(key) != entries[1].get(key)}
    return all(any(fnmatch.fnmatchcase(key.lower(), p) for p in HARMLESS_GIT_KEYS) for key in changed)


def _git_config(data: bytes, scratch: Path) -> dict[str, list[str]] | None:
    """The entries of a git config file as git reads it (includes not followed); None if git cannot."""
    fd, name = tempfile.mkstemp(dir=scratch, prefix="config-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(scratch), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CEILING_DIRECTORIES": str(scratch.parent), "LC_ALL": "C"}
    try:
        done = subprocess.run(["git", "config", "--file", name, "--no-includes", "--list", "-z"], cwd=scratch,
                              env=env, capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    out: dict[str, list[str]] = {}
    for item in done.stdout.split(b"\0"):
        if item:
            key, _, value = item.partition(b"\n")
            out.setdefault(key.decode(errors="replace"), []).append(value.decode(errors="replace"))
    return out
