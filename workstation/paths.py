"""Every filesystem location workstation uses, derived in one place."""

from __future__ import annotations

import datetime
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import shutil
import socket
import stat
import struct
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from .errors import WorkstationError

STATE_DIRNAME = ".workstation"

# the state folder's own folders: each must be a real folder of ours, never a link (a cloned repository
# can ship a `.workstation/` whose `sessions -> ~/somewhere` would get our files written there)
STATE_FOLDERS = ("sessions", "sessions/archive", "sessions/.locks", "checkpoints", "tmp", "mcp", "exports")
# what the workspace's own `.workstation/` holds even when state_dir moves the rest
CONFIG_FILES = ("config.toml", "instructions.md", "ignore")
# folders of the home the sandbox hides from commands (agent.sandbox_hide's default): keys and other agents' sessions
DEFAULT_HIDE = ("~/.ssh", "~/.gnupg", "~/.aws", "~/.azure", "~/.kube", "~/.docker", "~/.config/gcloud",
                "~/.config/gh", "~/.netrc", "~/.git-credentials", "~/.pypirc", "~/.npmrc",
                # other coding agents' keys and sessions: Codex, Claude Code, Copilot, Gemini CLI, opencode, aider
                "~/.codex", "~/.claude", "~/.claude.json", "~/.config/claude", "~/.config/github-copilot",
                "~/.copilot", "~/.gemini", "~/.local/share/opencode", "~/.config/opencode", "~/.aider")
# who made a state folder, and where (`origin`): written when this user first opens it on this machine
ORIGIN_FILE = "origin.json"
# where state that came with a cloned repository is set aside, never read (`claim`)
SHIPPED_DIRNAME = "came-with-repository"


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


# ---------------------------------------------------------------- programs

def absolute_path_env(value: str | None = None) -> str:
    """`value` (default: our PATH) with only its absolute entries: a relative one ("", ".", "bin") is looked
    up from the current folder, which is a repository's, so a program it plants there would run as ours."""
    value = os.environ.get("PATH", os.defpath) if value is None else value
    return os.pathsep.join(entry for entry in value.split(os.pathsep) if os.path.isabs(entry))


def find_program(name: str) -> str | None:
    """The absolute path of program `name` found through the absolute entries of PATH only, or None."""
    return shutil.which(name, path=absolute_path_env())


# ---------------------------------------------------------------- whose state folder it is

def _machine() -> bytes:
    """This machine's own random id (systemd's machine-id, never published), else its host name."""
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            with open(path, "rb") as fh:
                if found := fh.read(256).strip():
                    return found
        except OSError:
            continue
    return socket.gethostname().encode()


def _signature(body: dict) -> str:
    """The origin's fields signed with this machine's id: a repository's author, who does not know it, cannot
    make a folder that passes for one this user made here (and the id itself never leaves the machine)."""
    fields = json.dumps({k: body.get(k) for k in ("id", "uid", "made")}, sort_keys=True)
    return hmac.new(_machine(), fields.encode(), hashlib.sha256).hexdigest()


def origin(folder: Path) -> str | None:
    """The id of state folder `folder` when this user made it on this machine (its ORIGIN_FILE signed
    with this machine's id), else None: absent, unreadable, another user's or machine's, or copied in."""
    try:
        fd = os.open(folder / ORIGIN_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            body = json.loads(fh.read(4096))
    except (OSError, ValueError):
        return None
    if not isinstance(body, dict) or not isinstance(body.get("id"), str) or not isinstance(body.get("mac"), str):
        return None
    if body.get("uid") != os.geteuid():
        return None
    return body["id"] if hmac.compare_digest(body["mac"], _signature(body)) else None


def _write_origin(folder: Path) -> str:
    made = secrets.token_hex(16)
    body: dict[str, object] = {"id": made, "uid": os.geteuid(), "host": socket.gethostname(),
            "made": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    body["mac"] = _signature(body)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".origin-")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(body, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, folder / ORIGIN_FILE)
    except BaseException:
        with _quiet():
            os.unlink(tmp)
        raise
    return made


class _quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, *_) -> bool:
        return kind is not None and issubclass(kind, OSError)


MAX_GIT_INDEX = 256 << 20  # of git's index read: a monorepo's is tens of MB


def git_tracked(root: Path, prefix: str) -> list[str]:
    """The paths under `prefix` (a folder, relative to `root`) that git's index holds, read from the index
    file itself (no git runs in a folder not yet trusted); [] where there is no index or it cannot be read."""
    git = root / ".git"
    try:
        if git.is_file():  # a worktree or submodule: "gitdir: PATH"
            pointer = git.read_text(errors="replace").strip()
            git = (root / pointer.removeprefix("gitdir:").strip()) if pointer.startswith("gitdir:") else git
        fd = os.open(git / "index", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return []  # a FIFO would hang the read, a device never end
            data = fh.read(MAX_GIT_INDEX)
    except OSError:
        return []
    want = (prefix.rstrip("/") + "/").encode()
    found: list[str] = []
    try:
        if data[:4] != b"DIRC":
            return []
        version, count = struct.unpack(">II", data[4:12])
        pos, previous = 12, b""
        for _ in range(count):
            start = pos
            flags = struct.unpack(">H", data[pos + 60:pos + 62])[0]
            pos += 62 + (2 if version >= 3 and flags & 0x4000 else 0)
            if version == 4:  # the name is the previous one less N bytes, plus what follows
                byte = data[pos]
                pos += 1
                strip = byte & 0x7F
                while byte & 0x80:
                    byte = data[pos]
                    pos += 1
                    strip = ((strip + 1) << 7) | (byte & 0x7F)
                end = data.index(b"\0", pos)
                name = previous[:len(previous) - strip] + data[pos:end]
                pos = end + 1
            else:
                end = data.index(b"\0", pos)
                name = data[pos:end]
                pos = start + ((end - start + 8) & ~7)
            previous = name
            if name.startswith(want):
                found.append(name.decode("utf-8", "replace"))
    except (struct.error, IndexError, ValueError):
        pass  # a torn or unknown index: what was read so far
    return found


# ---------------------------------------------------------------- the paths

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
    def sessions_summary(self) -> Path:
        """The sessions list's summary of every live log (sessions.catalog), a cache the logs can rebuild."""
        return self.state / "sessions.summary"

    @property
    def memory_db(self) -> Path:
        return self.state / "memory.duckdb"

    @property
    def owner_lock(self) -> Path:
        return self.state / "owner.lock"

    @property
    def owner_socket(self) -> Path:
        """The database owner's socket (store.broker binds a path too long for an address through its folder)."""
        return self.state / "owner.sock"

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
        self.claim()
        return self

    def claim(self) -> str | None:
        """Make the state folder this user's on this machine (its ORIGIN_FILE), setting aside into
        SHIPPED_DIRNAME whatever state it held that is not theirs (sessions, checkpoints, memory, the index a
        cloned repository brought), named in one warning; the id of the folder. A folder without an origin
        (made before origins were kept) is taken as the user's unless git tracks state in it: what a
        repository ships is in its index, what we write is ignored (.gitignore `*`)."""
        if (found := origin(self.state)) is not None:
            return found
        fd = os.open(self.state, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # one process sets aside and signs; the others find it done
            found = origin(self.state)
            if found is not None:
                return found
            keep = {*CONFIG_FILES, ".gitignore", ORIGIN_FILE, SHIPPED_DIRNAME}
            shipped = os.path.lexists(self.state / ORIGIN_FILE)  # someone else's origin: nothing here is ours
            if not shipped:
                rel = os.path.relpath(self.state, self.root)
                tracked = [] if rel.startswith("..") else git_tracked(self.root, rel)
                shipped = any(name.split("/")[rel.count("/") + 1] not in keep for name in tracked)
            moved: list[str] = []
            if shipped:
                aside = self.state / SHIPPED_DIRNAME / datetime.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
                for entry in sorted(os.listdir(self.state)):
                    if entry in keep or entry.startswith(".origin-"):
                        continue
                    aside.mkdir(parents=True, exist_ok=True)
                    with _quiet():
                        os.rename(self.state / entry, aside / entry)
                        moved.append(entry)
            made = _write_origin(self.state)
            self.sessions.mkdir(exist_ok=True)
        finally:
            os.close(fd)
        if moved:
            warnings.warn(f"state folder {self.state} came with the repository (not made by you here): set aside "
                          f"{', '.join(moved)} into {aside}, never read; its sessions, checkpoints, memory and "
                          "index are not yours", stacklevel=3)
        return made
