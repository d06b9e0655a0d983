"""Where Claude Code and Codex keep the sessions of this workspace (`workstation import --from`).

Claude Code: `$CLAUDE_CONFIG_DIR/projects/<encoded cwd>/` (CLAUDE_CONFIG_DIR may list several
folders, comma-separated, as ccusage reads it; unset: `~/.config/claude` and `~/.claude`), where
the encoded cwd is the workspace path with every character that is not a letter or digit turned
into '-'. The encoding is lossy (`/a/b-c` and `/a/b/c` share a folder), so a file counts only if
the cwd it records is the workspace or a folder inside it. Subagent logs sit in
`<session id>/subagents/*.jsonl` beside the session files.

Codex: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl` (unset: `~/.codex`), every project in one
tree: a rollout counts if the cwd of its session_meta is the workspace or inside it.
"""

from __future__ import annotations

import os
from pathlib import Path

from .claude_code import project_dir_name, recorded_cwd
from .codex import session_cwd

SOURCES = ("claude-code", "codex")


def claude_bases() -> list[Path]:
    env = os.environ.get("CLAUDE_CONFIG_DIR", "").strip()
    if env:
        return [Path(p.strip()).expanduser() for p in env.split(",") if p.strip()]
    home = Path.home()
    return [home / ".config" / "claude", home / ".claude"]


def codex_home() -> Path:
    env = os.environ.get("CODEX_HOME", "").strip()
    return Path(env).expanduser() if env else Path.home() / ".codex"


def folders(source: str, root: Path) -> list[Path]:
    """The folders `source` keeps this workspace's sessions in (existing or not)."""
    if source == "claude-code":
        return [base / "projects" / project_dir_name(str(root)) for base in claude_bases()]
    if source == "codex":
        return [codex_home() / "sessions"]
    raise ValueError(f"unknown source {source!r}")


def belongs(cwd: str | None, root: Path) -> bool:
    if not cwd:
        return False
    try:
        real = Path(os.path.realpath(cwd))
    except (OSError, ValueError):
        return False
    return real == root or root in real.parents


def candidates(source: str, root: Path) -> list[Path]:
    """Session files of `source` in its folders (not yet checked for belonging to the workspace)."""
    found: list[Path] = []
    for folder in folders(source, root):
        if not folder.is_dir():
            continue
        if source == "claude-code":
            found += sorted(folder.glob("*.jsonl")) + sorted(folder.glob("*/subagents/*.jsonl"))
        else:
            found += sorted(folder.rglob("rollout-*.jsonl"))
    return found


def cwd_of(source: str, path: Path) -> str | None:
    return recorded_cwd(path) if source == "claude-code" else session_cwd(path)


def sessions(source: str, root: Path) -> list[Path]:
    """The session files of `source` that belong to the workspace at `root`."""
    return [p for p in candidates(source, root) if belongs(cwd_of(source, p), root)]
