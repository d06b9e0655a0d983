"""Filesystem primitives every module shares: confinement to a root, atomic replace."""

from __future__ import annotations

import hashlib
import errno
import os
import tempfile
from pathlib import Path
from typing import Iterable

from .errors import WorkstationError
from .paths import STATE_DIRNAME


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
    if _inside(real, root_real, [root_real / STATE_DIRNAME, *private]):
        raise StateFolder(f"{path} is in the workspace's state folder (config, databases, session logs): "
                          "refused")
    return real, rel


def _inside(real: Path, root_real: Path, folders: list[Path]) -> bool:
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


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace `path` with `data` so a crash leaves either the old or the new file."""
    directory = path.parent
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
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
