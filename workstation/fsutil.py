"""Filesystem primitives every module shares: confinement to a root, atomic replace."""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import secrets
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
    real = _resolved(joined, path)
    if real != root_real and root_real not in real.parents:
        raise OutsideWorkspace(f"{path} is outside the workspace {root_real}")
    rel = real.relative_to(root_real).as_posix()
    if inside(real, root_real, [root_real / STATE_DIRNAME, *private]):
        raise StateFolder(f"{path} is in the workspace's state folder (config, databases, session logs): "
                          "refused")
    return real, rel


def _resolved(joined: Path, path: str) -> Path:
    """`joined` with every link resolved. A link swapped for a folder between realpath's lstat and its readlink
    fails with EINVAL: resolved again, and after three tries refused in one line."""
    for _ in range(3):
        try:
            return Path(os.path.realpath(joined))
        except OSError as err:
            if err.errno != errno.EINVAL:
                raise WorkstationError(f"{path}: cannot resolve its path ({err.strerror})") from None
    raise WorkstationError(f"{path}: a link on its path keeps changing while it is resolved; nothing was done")


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
                 sync_dir: bool = True, durable: bool = True) -> None:
    """Replace `path` with `data` so a crash leaves either the old or the new file.

    The temporary file goes beside `path`, or with `staging` (a private folder, such as the state
    folder's tmp/) in that folder when it is on the same filesystem, so a process killed mid-write
    leaves nothing in the workspace; `sweep_staging` removes what it left in `staging`. On another
    filesystem the temporary file goes beside `path` and a note in `staging` names it, for the sweep.
    sync_dir=False leaves the rename to be made durable by the caller's next fsync (a checkpoint blob:
    the log record naming it follows at once). The folder is opened once and the temporary file made and
    renamed in it by descriptor; a workspace file is written with `replace_beneath` instead, which also
    opens that folder without following a link. durable=False writes no fsync at all: for a cache its
    reader rebuilds when a crash leaves it empty or torn (an fsync under load can take seconds).
    """
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _replace_at(folder, path.name, data, mode, staging, path, durable)
        if sync_dir and durable:
            _fsync_folder(folder)  # make the rename itself durable
    finally:
        os.close(folder)


# ------------------------------------------------------------------ workspace paths, never through a link
class LinkOnTheWay(WorkstationError):
    """A link (or something not a folder) stands where a folder of a workspace path was, or a link where its
    file was: nothing is read or written through it (`open_folder_beneath`)."""


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _parts(rel: str) -> list[str]:
    parts = rel.split("/")
    if "\x00" in rel or any(part in ("", ".", "..") for part in parts):
        raise WorkstationError(f"{rel!r} is not a path inside the workspace")
    return parts


def open_folder_beneath(root: Path, rel: str, *, create: bool = False) -> tuple[int, str]:
    """(a descriptor of the folder holding `rel`'s last part, that part's name), `rel` a workspace-relative
    path walked from `root` one folder at a time, each opened with O_NOFOLLOW from the one before (openat):
    a link at any folder of the path, there now or swapped in while we walk, is refused (LinkOnTheWay), never
    followed. What is done at the descriptor stays where the walk ended, whatever is renamed or linked
    meanwhile: no check-then-write. `create` makes missing folders on the way (mkdirat, then the same open).
    FileNotFoundError when a folder is missing and `create` is false. The caller closes the descriptor."""
    parts = _parts(rel)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for depth, part in enumerate(parts[:-1], start=1):
            try:
                inner = _open_folder_at(fd, part, create)
            except OSError as err:
                if err.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                what = "a link" if _is_link_at(fd, part) else "not a folder"
                raise LinkOnTheWay(f"{'/'.join(parts[:depth])} is {what} (on the way to {rel}): never written or "
                                   "read through; nothing was changed there") from None
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]


def _open_folder_at(fd: int, name: str, create: bool) -> int:
    try:
        return os.open(name, _FOLDER, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise
    try:
        os.mkdir(name, 0o777, dir_fd=fd)
    except FileExistsError:
        pass  # made meanwhile, or a dangling link: the open says which
    return os.open(name, _FOLDER, dir_fd=fd)


def _is_link_at(fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def lstat_beneath(root: Path, rel: str) -> os.stat_result | None:
    """What stands at `rel` (a link is not followed), None when nothing does; LinkOnTheWay for a link among
    its folders."""
    try:
        folder, name = open_folder_beneath(root, rel)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        return os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    finally:
        os.close(folder)


def open_beneath(root: Path, rel: str, flags: int = os.O_RDONLY) -> int:
    """A descriptor of the regular file at `rel`, with no link followed at any part of the path (a link there
    is LinkOnTheWay); opened non-blocking so a FIFO cannot hang the open, then blocking again. OSError
    (EINVAL, NOT_REGULAR) for anything but a regular file; FileNotFoundError when nothing is there."""
    folder, name = open_folder_beneath(root, rel)
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise LinkOnTheWay(f"{rel} is a link: never written or read through") from None
        raise
    finally:
        os.close(folder)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, NOT_REGULAR, rel)
    os.set_blocking(fd, True)
    return fd


def read_beneath(root: Path, rel: str) -> bytes | None:
    """The bytes of the regular file at `rel` (`open_beneath`), None when nothing is there."""
    try:
        fd = open_beneath(root, rel)
    except (FileNotFoundError, NotADirectoryError):
        return None
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def replace_beneath(root: Path, rel: str, data: bytes, mode: int | None = None, *, staging: Path | None = None,
                    create: bool = False) -> None:
    """`atomic_write` of the workspace file `rel`, its folder opened by `open_folder_beneath` (`create`: its
    missing folders made): the new file is renamed into that folder's descriptor, so a folder of the path
    swapped for a link at any moment sends nothing outside. A link or a file with other names (hard links)
    standing at `rel` is replaced, never written through."""
    folder, name = open_folder_beneath(root, rel, create=create)
    try:
        _replace_at(folder, name, data, mode, staging, root / rel)
        _fsync_folder(folder)
    finally:
        os.close(folder)


def unlink_beneath(root: Path, rel: str) -> bool:
    """Remove the entry at `rel` (a link itself, never what it names), made durable; False: nothing there."""
    try:
        folder, name = open_folder_beneath(root, rel)
    except (FileNotFoundError, NotADirectoryError):
        return False
    try:
        os.unlink(name, dir_fd=folder)
        _fsync_folder(folder)
        return True
    except FileNotFoundError:
        return False
    finally:
        os.close(folder)


def rename_beneath(root: Path, src: str, dst: str, *, staging: Path | None = None) -> None:
    """Move the workspace file `src` to `dst` (its missing folders made), both folders opened by
    `open_folder_beneath`; FileExistsError when something stands at `dst`. Across filesystems (EXDEV), the
    file is copied by `replace_beneath` and `src` removed."""
    source, src_name = open_folder_beneath(root, src)
    try:
        target, dst_name = open_folder_beneath(root, dst, create=True)
        try:
            try:
                _rename_no_replace(source, src_name, target, dst_name, dst)
            except OSError as err:
                if err.errno != errno.EXDEV:
                    raise
                fd = os.open(src_name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=source)
                with os.fdopen(fd, "rb") as fh:
                    mode = os.fstat(fh.fileno()).st_mode & 0o7777
                    data = fh.read()
                _replace_at(target, dst_name, data, mode, staging, root / dst)
                os.unlink(src_name, dir_fd=source)
            _fsync_folder(target)
            _fsync_folder(source)
        finally:
            os.close(target)
    finally:
        os.close(source)


_RENAME_NOREPLACE = 1


def _rename_no_replace(source: int, src_name: str, target: int, dst_name: str, dst: str) -> None:
    """renameat2(RENAME_NOREPLACE): FileExistsError, never a replace, when something stands at `dst_name`, decided
    by the kernel in the rename itself. Where there is no renameat2 (not Linux, an old libc, a filesystem without
    it), a look first, then renameat."""
    renameat2 = _libc_renameat2()
    if renameat2 is not None:
        if renameat2(source, os.fsencode(src_name), target, os.fsencode(dst_name), _RENAME_NOREPLACE) == 0:
            return
        import ctypes  # lazy: loaded by _libc_renameat2 already

        code = ctypes.get_errno()
        if code == errno.EEXIST:
            raise FileExistsError(code, "exists", dst)
        if code not in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
            raise OSError(code, os.strerror(code), dst)
    try:
        os.stat(dst_name, dir_fd=target, follow_symlinks=False)
        raise FileExistsError(errno.EEXIST, "exists", dst)
    except FileNotFoundError:
        pass
    os.rename(src_name, dst_name, src_dir_fd=source, dst_dir_fd=target)


@functools.cache
def _libc_renameat2():
    import ctypes  # lazy: only a move needs it

    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


def fsync_dir(directory: Path) -> None:
    """Make the entries of `directory` (a rename, a new file) durable; a filesystem that cannot fsync
    a directory is taken at its word."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _fsync_folder(fd)
    finally:
        os.close(fd)


def _fsync_folder(fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise


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


def _same_filesystem(a: int, b: int) -> bool:
    """Whether a rename can go from folder `a` to folder `b` (descriptors)."""
    pair = (os.stat(a).st_dev, os.stat(b).st_dev)
    return pair[0] == pair[1] and pair not in _CROSSING


def _note_temp(staging: Path) -> Path:
    """A note in `staging` that will name a temporary file made outside it (written before that file)."""
    fd, note = tempfile.mkstemp(prefix=f"{os.getpid()}-", suffix=".note", dir=staging)
    os.close(fd)
    return Path(note)


def _replace_at(folder: int, name: str, data: bytes, mode: int | None, staging: Path | None, shown: Path,
                durable: bool = True) -> None:
    """Replace the entry `name` of the open `folder` with a new file holding `data`: written and fsynced under
    a temporary name, then renamed over it (renameat). The temporary file is made in `staging` when a rename
    can cross from there, else in `folder` itself (named first by a note in `staging`, for the sweep).
    `mode`: None keeps that of the regular file there now (0o644 for anything else). `shown` names the file
    in the note."""
    if mode is None:
        try:
            st = os.stat(name, dir_fd=folder, follow_symlinks=False)
            mode = st.st_mode & 0o7777 if stat.S_ISREG(st.st_mode) else 0o644
        except FileNotFoundError:
            mode = 0o644
    if staging is None:
        _write_and_rename(folder, f".{name}.{_token()}.tmp", folder, name, data, mode, durable)
        return
    staging.mkdir(parents=True, exist_ok=True)
    spare = os.open(staging, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if _same_filesystem(spare, folder):
            try:
                _write_and_rename(spare, f"{os.getpid()}-{_token()}.tmp", folder, name, data, mode, durable)
                return
            except OSError as err:
                if err.errno != errno.EXDEV:
                    raise
                # one device, two mounts (a bind mount): rename cannot cross them
                _CROSSING.add((os.stat(spare).st_dev, os.stat(folder).st_dev))
    finally:
        os.close(spare)
    note = _note_temp(staging)  # named by the note, written first: a kill between the two leaves no unnamed file
    try:
        temp = f".{name}.ws-{note.stem}.tmp"
        note.write_text(str(shown.parent / temp))
        _write_and_rename(folder, temp, folder, name, data, mode, durable)
    finally:
        note.unlink(missing_ok=True)


def _token() -> str:
    return secrets.token_hex(6)


def _write_and_rename(where: int, temp: str, folder: int, name: str, data: bytes, mode: int,
                      durable: bool = True) -> None:
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=where)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
            os.fchmod(fh.fileno(), mode)
        os.rename(temp, name, src_dir_fd=where, dst_dir_fd=folder)
    except BaseException:
        try:
            os.unlink(temp, dir_fd=where)
        except FileNotFoundError:
            pass
        raise


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
