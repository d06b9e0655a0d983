"""Every filesystem location workstation uses, derived in one place."""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .errors import WorkstationError

STATE_DIRNAME = ".workstation"

# the state folder's own folders: each must be a real folder of ours, never a link (a cloned repository
# can ship a `.workstation/` whose `sessions -> ~/somewhere` would get our files written there)
STATE_FOLDERS = ("sessions", "sessions/archive", "sessions/.locks", "checkpoints", "tmp", "mcp", "exports")
# what the workspace's own `.workstation/` holds even when state_dir moves the rest
CONFIG_FILES = ("config.toml", "instructions.md", "ignore")


class PlantedLink(WorkstationError):
    """A link (or another non-regular entry) where workstation keeps its state: never followed, never removed."""


def _refuse(path: Path, what: str) -> PlantedLink:
    return PlantedLink(f"{path} is {what}; workstation never writes through it: move it aside "
                       "(the folder may have come with a cloned repository)")


def check_entry(path: Path, folder: bool) -> None:
    """`path`, if it exists, is a real folder (folder=True) owned by us, or not a link; PlantedLink if not.
    Checked with lstat, so nothing a link names is touched."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as err:
        raise WorkstationError(f"{path} cannot be checked: {err.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(path, f"a symbolic link to {os.readlink(path)}")
    if folder and not stat.S_ISDIR(st.st_mode):
        raise _refuse(path, "not a folder")
    if folder and hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        raise _refuse(path, f"a folder owned by another user (uid {st.st_uid})")


def user_dir() -> Path:
    """User-level directory (config, themes); WORKSTATION_HOME overrides it."""
    env = os.environ.get("WORKSTATION_HOME")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(Path.home(), ".config")
    return Path(base) / "workstation"


def user_cache_dir() -> Path:
    """User-level cache (derived files, safe to delete): WORKSTATION_HOME/cache when set, else the XDG cache."""
    env = os.environ.get("WORKSTATION_HOME")
    if env:
        return Path(env).expanduser() / "cache"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "workstation"


def _check_state_dir(root: Path, state: Path) -> None:
    """A moved state folder may live anywhere except where it would swallow the workspace or git."""
    real = Path(os.path.realpath(state))
    if real == root or root.is_relative_to(real):
        raise WorkstationError(
            f"workspace.state_dir {state} holds the workspace itself: use a folder inside it or elsewhere"
        )
    if real.is_relative_to(root / ".git"):
        raise WorkstationError(f"workspace.state_dir {state} is inside .git: use a folder outside it")


def _no_links_in(folder: Path, sockets: tuple[str, ...] = ()) -> bool:
    """PlantedLink if an entry of `folder` is a link, or neither a regular file nor a folder (a FIFO would
    hang whatever opens it; a socket only where `sockets` names one); False if there is no such folder (or
    a file is there). Every entry is looked at, so a state file added later is covered too; the entry types
    come with the listing (no stat per entry), so a folder of many sessions costs one scan."""
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return False  # a file where a folder goes: ensure's mkdir names it
    for entry in entries:
        if entry.is_symlink():
            raise _refuse(Path(entry.path), f"a symbolic link to {os.readlink(entry.path)}")
        if entry.is_file(follow_symlinks=False) or entry.is_dir(follow_symlinks=False):
            continue
        if entry.name in sockets and stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
            continue
        raise _refuse(Path(entry.path), "neither a regular file nor a folder (a FIFO or a device)")
    return True


_LOGS_SCANNED: set[Path] = set()  # state folders whose session logs check_state scanned in this process


@dataclass(frozen=True)
class Paths:
    root: Path  # workspace root, a resolved real path
    state: Path  # per-workspace state: databases, sessions
    # the user trusts this folder (workstation.trust): its own instructions.md and ignore file are read
    trusted: bool = False

    @classmethod
    def for_root(cls, root: str | os.PathLike, state_dir: str | None = None, *, trusted: bool = False) -> "Paths":
        real = Path(os.path.realpath(os.path.expanduser(str(root))))
        if not real.is_dir():
            raise WorkstationError(f"workspace {root} is not a directory")
        state = Path(state_dir).expanduser() if state_dir else real / STATE_DIRNAME
        if not state.is_absolute():
            state = real / state
        if state_dir:
            _check_state_dir(real, state)
        # the config files are read before anything is written: their folder and they are checked now
        check_entry(real / STATE_DIRNAME, folder=True)
        for name in CONFIG_FILES:
            check_entry(real / STATE_DIRNAME / name, folder=False)
        return cls(real, state, trusted)

    # configuration lives beside the default state folder even when state_dir moves
    @property
    def config_file(self) -> Path:
        return self.root / STATE_DIRNAME / "config.toml"

    @property
    def ignore_file(self) -> Path:
        return self.root / STATE_DIRNAME / "ignore"

    @property
    def user_config_file(self) -> Path:
        return user_dir() / "config.toml"

    @property
    def index_db(self) -> Path:
        return self.state / "index.duckdb"

    @property
    def index_checked(self) -> Path:
        """The staleness gate's note of the last walk that found the map and the disk agreeing."""
        return self.state / "index.checked"

    @property
    def memory_db(self) -> Path:
        return self.state / "memory.duckdb"

    @property
    def owner_lock(self) -> Path:
        return self.state / "owner.lock"

    @property
    def owner_socket(self) -> Path:
        sock = self.state / "owner.sock"
        if len(str(sock)) < 100:  # AF_UNIX paths are capped at ~107 bytes
            return sock
        digest = hashlib.sha256(str(self.state).encode()).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / f"workstation-{digest}.sock"

    @property
    def staging(self) -> Path:
        """Where atomic writes stage their temporary files (fsutil.atomic_write); swept at each start."""
        return self.state / "tmp"

    @property
    def sessions(self) -> Path:
        return self.state / "sessions"

    @property
    def archive(self) -> Path:
        return self.sessions / "archive"

    def check_state(self) -> None:
        """No link anywhere workstation keeps state, and no FIFO or device: the state folder, each entry
        in it (owner.lock, owner.sock, the databases and their WAL files, the search heaps, sidecar.log),
        the folders below it (STATE_FOLDERS) and the session logs. PlantedLink names the first one found.
        A state_dir the user set may itself be a link (the user's own choice); what is in it may not."""
        check_entry(self.root / STATE_DIRNAME, folder=True)
        if self.state == self.root / STATE_DIRNAME:
            check_entry(self.state, folder=True)
        if not _no_links_in(self.state, sockets=("owner.sock",)):
            return
        for name in STATE_FOLDERS:
            check_entry(self.state / name, folder=True)
        _no_links_in(self.state / "checkpoints")  # its blob folders (at most 256)
        if self.state in _LOGS_SCANNED:  # once per process: a log is opened with O_NOFOLLOW anyway
            return  # (fsutil.open_state), and a scan per new session made a bulk import quadratic
        _no_links_in(self.sessions)  # the logs
        _no_links_in(self.archive)
        _LOGS_SCANNED.add(self.state)

    def ensure(self) -> "Paths":
        self.check_state()
        try:
            self.state.mkdir(parents=True, exist_ok=True)
            self.sessions.mkdir(exist_ok=True)
        except FileExistsError as err:
            raise WorkstationError(f"state folder {self.state}: {err.filename} exists and is not a folder") from None
        except OSError as err:
            raise WorkstationError(f"state folder {self.state} cannot be created: {err.strerror}") from None
        gitignore = self.state / ".gitignore"
        if not gitignore.exists():
            gitignore.write_text("*\n")
        return self
