"""Trusting a test's workspace as `workstation trust` does (workstation.trust), for tests whose workspace
config sets trust-gated keys (MCP servers, the allow-list, the sandbox, models)."""

from __future__ import annotations

import os
from pathlib import Path


def trust(root: str | os.PathLike, home: str | os.PathLike | None = None) -> None:
    """Record trust in `root` as it is now, in the user config home `home` (default: this process's); a
    folder not made yet is made, and trusted as it is with no config of its own (trust pins the folder's
    own id, paths.origin, so it must exist)."""
    from workstation import config as config_mod
    from workstation import trust as trust_mod

    before = os.environ.get("WORKSTATION_HOME")
    if home is not None:
        os.environ["WORKSTATION_HOME"] = str(home)
    try:
        Path(root).mkdir(parents=True, exist_ok=True)
        verdict, _ = config_mod.inspect(Path(root))
        trust_mod.grant(verdict.root, verdict.digest)
    finally:
        if home is not None:
            if before is None:
                os.environ.pop("WORKSTATION_HOME", None)
            else:
                os.environ["WORKSTATION_HOME"] = before


def user_config(text: str, home: str | os.PathLike) -> Path:
    """Give this process (and the processes it starts) a user config home of its own, `home`, whose
    config.toml holds `text`: where a model's endpoint and key variable come from, since a workspace's
    config never names them (workstation.trust). For benchmarks and demos; tests get a home from conftest."""
    os.environ["WORKSTATION_HOME"] = str(home)
    Path(home).mkdir(parents=True, exist_ok=True)
    path = Path(home) / "config.toml"
    path.write_text(text)
    return path
