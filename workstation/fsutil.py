"""Filesystem primitives every module shares: confinement to a root, atomic replace."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import tempfile
import unicodedata
from pathlib import Path
from typing import Iterable

from .errors import WorkstationError
from .paths import STATE_DIRNAME, PlantedLink
from .process import alive


class OutsideWorkspace(WorkstationError):
    """A path that resolves outside the workspace root."""


class StateFolder(WorkstationError):
    """A path inside the workspace's own state folder (config, databases, session logs)."""


def confine(root: Path, path: str, private: Iterable[Path] = ()) -> tuple[Path, str]:
    """Resolve `path` against `root`, following symlinks; refuse anything outside, and anything inside
    `<root>/.workstation` or another `private` folder (a moved state folder): rewriting config.toml
    would widen the command allow-list or redirect the model.

    Returns the real path and the repo-relative path with '/' separators.
    """
    if not path or "\x00" in path:
        raise WorkstationError(f"invalid path {path!r}")
    root_real = Path(os.path.realpath(root))
    candidate = Path(path)
    if candidate.is_absolute():
        joined = candidate
    else:
        joined = root_real / candidate
    real = Path(os.path.realpath(joined))
    if real != root_real and root_real not in real.parents:
        raise OutsideWorkspace(f"{path} is outside the workspace {root_real}")
    rel = real.relative_to(root_real).as_posix()
    if inside(real, root_real, [root_real / STATE_DIRNAME, *private]):
        raise StateFolder(f"{path} is in the workspace's state folder (config, databases, session logs): "
                          "refused")
    return real, rel


class GitFolder(WorkstationError):
    """A path inside a `.git` folder (or a `.git` file): readable, never writable by the agent
    (`sandbox.Protected.confine_write`)."""


def folded(name: str) -> str:
    """A file name as case-insensitive filesystems compare it: no case, no characters HFS+ ignores, no
    trailing dots or spaces (NTFS)."""
    return "".join(ch for ch in name if unicodedata.category(ch) != "Cf").rstrip(". ").casefold()


def inside(real: Path, root_real: Path, folders: list[Path]) -> bool:
    """Whether `real` is one of `folders` or under one. Compared by real path and by file identity too,
    so a case-insensitive filesystem's `.WORKSTATION/` is caught."""
    wanted = set()
    for folder in folders:
        folder_real = Path(os.path.realpath(folder))
        if real == folder_real or folder_real in real.parents:
            return True
        try:
            st = folder_real.stat()
        except OSError:
            continue  # not created yet: nothing in it to protect
        wanted.add((st.st_dev, st.st_ino))
    for part in (real, *real.parents):
        if part == root_real:
            return False
        try:
            st = part.stat()
        except OSError:
            continue  # the path itself may not exist (yet)
        if (st.st_dev, st.st_ino) in wanted:
            return True
    return False


NOT_REGULAR = "not a regular file (a FIFO, a socket or a device): never read"


def open_regular(path: Path | str, flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """A descriptor of `path` if it is a regular file (following links), opened so that a FIFO cannot hang
    the open; OSError (EINVAL, NOT_REGULAR) if it is not one. For files someone else wrote (an import
    source), which may be a FIFO a read would wait on for ever."""
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, NOT_REGULAR, str(path))
    if flags & os.O_NONBLOCK == 0:
        os.set_blocking(fd, True)
    return fd


def open_state(path: Path | str, flags: int, mode: int = 0o600) -> int:
    """A state file's descriptor (a lock, a session log, a server log), never through a symbolic link and
    only for a regular file: a state folder can come with a cloned repository, and a link planted there
    must not make us truncate or append to what it names. PlantedLink, one line, if it is either."""
    try:
        return open_regular(path, flags | os.O_NOFOLLOW, mode)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise PlantedLink(f"{path} is a symbolic link to {os.readlink(path)}; workstation never writes "
                              "through it: move it aside") from None
        if err.strerror == NOT_REGULAR:
            raise PlantedLink(f"{path} is not a regular file; workstation never writes through it: "
                              "move it aside") from None
        raise


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def atomic_write(path: Path, data: bytes, mode: int | None = None, *, staging: Path | None = None,
                 sync_dir: bool = True) -> None:
    """Replace `path` with `data` so a crash leaves either the old or the new file.

    The temporary file goes beside `path`, or with `staging` (a private folder, such as the state
    folder's tmp/) in that folder when it is on the same filesystem, so a process killed mid-write
    leaves nothing in the workspace; `sweep_staging` removes what it left in `staging`. On another
    filesystem the temporary file goes beside `path` and a note in `staging` names it, for the sweep.
    sync_dir=False leaves the rename to be made durable by the caller's next fsync (a checkpoint blob:
    the log record naming it follows at once).
    """
    directory = path.parent
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o644
    note = None
    where = directory
    if staging is not None:
        staging.mkdir(parents=True, exist_ok=True)
        if _same_filesystem(staging, directory):
            where = staging
        else:
            note = _note_temp(staging)
    try:
        _replace_via(where, path, data, mode, note)
    except OSError as err:
        if err.errno != errno.EXDEV or staging is None or where == directory:
            raise
        # one device, two mounts (a bind mount): rename cannot cross them
        _CROSSING.add((os.stat(staging).st_dev, os.stat(directory).st_dev))
        note = _note_temp(staging)
        _replace_via(directory, path, data, mode, note)
    if sync_dir:
        fsync_dir(directory)  # make the rename itself durable


def fsync_dir(directory: Path) -> None:
    """Make the entries of `directory` (a rename, a new file) durable; a filesystem that cannot fsync
    a directory is taken at its word."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def copy_range(src: int, dst: int, count: int, src_offset: int, dst_offset: int) -> None:
    """Copy `count` bytes between open files, at the given offsets (the kernel copies them where it can:
    copy_file_range on Linux; pread and pwrite elsewhere)."""
    copied = 0
    while copied < count:
        if hasattr(os, "copy_file_range"):
            n = os.copy_file_range(src, dst, count - copied, src_offset + copied, dst_offset + copied)
        else:
            n = os.pwrite(dst, os.pread(src, min(count - copied, 1 << 20), src_offset + copied), dst_offset + copied)
        if n == 0:
            raise OSError(errno.EIO, f"source ended {count - copied} bytes short while it was copied")
        copied += n


_CROSSING: set[tuple[int, int]] = set()  # (staging device, directory device) pairs a rename cannot cross


def _same_filesystem(a: Path, b: Path) -> bool:
    pair = (os.stat(a).st_dev, os.stat(b).st_dev)
    return pair[0] == pair[1] and pair not in _CROSSING


def _note_temp(staging: Path) -> Path:
    """A note in `staging` that will name a temporary file made outside it (written before that file)."""
    fd, note = tempfile.mkstemp(prefix=f"{os.getpid()}-", suffix=".note", dir=staging)
    os.close(fd)
    return Path(note)


def _replace_via(where: Path, path: Path, data: bytes, mode: int, note: Path | None) -> None:
    if note is None:
        prefix = f".{path.name}." if where == path.parent else f"{os.getpid()}-"
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=where)
    else:  # named by the note, which is written first: a kill between the two leaves no unnamed file
        tmp = str(path.parent / f".{path.name}.ws-{note.stem}.tmp")
        note.write_text(tmp)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    finally:
        if note is not None:
            note.unlink(missing_ok=True)


def sweep_staging(staging: Path) -> int:
    """Remove what writers killed mid-write left (`atomic_write(..., staging=)`): their temporary files
    in `staging`, and those its notes name elsewhere. A live writer's files are left alone. Returns how
    many temporary files were removed."""
    try:
        names = os.listdir(staging)
    except FileNotFoundError:
        return 0
    removed = 0
    for name in names:
        pid, _, rest = name.partition("-")
        if not pid.isdigit() or not rest.endswith((".tmp", ".note")) or alive(int(pid)):
            continue
        entry = staging / name
        try:
            if name.endswith(".note"):
                temp = Path(entry.read_text())
                # only what _replace_via names: a dot file of this shape, never anything else
                if temp.name.startswith(".") and f".ws-{pid}-" in temp.name and temp.name.endswith(".tmp"):
                    try:
                        temp.unlink()
                        removed += 1
                    except FileNotFoundError:
                        pass
            else:
                removed += 1
            entry.unlink()
        except FileNotFoundError:
            continue  # another sweeper was first
    return removed
