"""Every filesystem location workstation uses, derived in one place."""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .errors import WorkstationError

STATE_DIRNAME = ".workstation"


def user_dir() -> Path:
    """User-level directory (config, themes); WORKSTATION_HOME overrides it."""
    env = os.environ.get("WORKSTATION_HOME")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(Path.home(), ".config")
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
    def sessions(self) -> Path:
        return self.state / "sessions"

    @property
    def archive(self) -> Path:
        return self.sessions / "archive"

    def ensure(self) -> "Paths":
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
