"""Workspace trust: what a workspace's own `.workstation/` may decide before the user trusts the folder.

A workspace's `.workstation/config.toml`, `instructions.md` and `ignore` may come with a cloned
repository. Until the user trusts the folder (`workstation trust PATH`), only the SAFE keys of its
config apply: look, limits, compaction knobs and index exclusions that only narrow. Everything else
(programs to run, MCP servers, models, the allow-list and the sandbox, the state folder, watched agent
sessions, index patterns that re-include with `!`) is left out, as are its `instructions.md` (which
would pose as the user's own) and its `ignore` file. NEVER keys (model endpoints and key names) are
left out even then: they come from the user's own config and environment only, so a repository can
never send the user's key to an endpoint of its choosing.

The trust record lives in the user's config home (paths.user_dir()/trust.json, never in a repository):
the folder's real path, the id of its `.workstation/` (paths.origin: made by this user on this machine,
so another repository put at the same path, or a re-clone, is not the folder trusted) and a digest of
everything trust gates as it was when trusted: the trust-gated settings and the contents of
`instructions.md` and `ignore`. A change to any of them (a `git pull` bringing an MCP server or new
instructions) no longer matches and asks again. The record is written atomically; a record that cannot
be read is an error naming it, never a silent "trusted".

What trust never gates, and says so in its notice: the repository's `AGENTS.md` and `CLAUDE.md` reach the
model in every folder, framed as the repository's (agent.instructions), never as the user's word.

A trusted folder's record also keeps the commands the user chose to always allow there (`allow`: the
approval dialog's "Always"), added to its `agent.command_allow` while it stays trusted; revoking the
trust forgets them. Only the user's own answer writes them: the record is outside every workspace.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import WorkstationError
from .fsutil import atomic_write
from .paths import STATE_DIRNAME, Paths, git_tracked, origin, user_dir

# Keys a workspace's config may set before it is trusted (section -> keys). Any key not named here is
# trust-gated, so a new key is gated until someone argues it safe here.
SAFE: dict[str, frozenset[str]] = {
    "model": frozenset({"timeout_s", "max_retries", "context_window"}),
    "index": frozenset({"max_file_bytes", "workers", "ignore"}),  # ignore: entries that narrow (no "!")
    "memory": frozenset({"compact_threshold", "keep_recent", "compact_token_ratio", "redact_every",
                         "redact_min_chars"}),
    "agent": frozenset({"command_timeout_s", "max_output_chars", "max_steps", "cache_ttl",  # cost, not reach
                        "permission_mode"}),  # only ever lowered (config._lowered)
    "ui": frozenset({"theme"}),
    "lsp": frozenset({"timeout_s", "max_errors", "max_chars"}),  # cost and length, not reach (enabled is gated)
}
# Keys a workspace's config never sets, trusted or not: endpoints and the names of key variables.
NEVER: dict[str, frozenset[str]] = {
    "model": frozenset({"api_base", "api_key_env"}),
    "team": frozenset({"accept_authors"}),  # whose memory steers the agent: the user's word only
    "hooks": frozenset({"claude", "timeout_s"}),  # which programs run at every event, and for how long
    "skills": frozenset({"claude"}),  # which instructions the model may load
}
# The workspace's own files that pose as the user's (instructions), hide files (ignore) or run programs at
# the agent's events (hooks: workstation.hooks; Claude Code's settings, read with hooks.claude).
FILES = (f"{STATE_DIRNAME}/instructions.md", f"{STATE_DIRNAME}/ignore", f"{STATE_DIRNAME}/hooks.json",
         ".claude/settings.json", ".claude/settings.local.json")
RECORD_VERSION = 2  # 2: entries pin the folder's id and the files' contents (a version 1 entry asks again)
# The workspace's folders of skills and custom commands (workstation.skills): instructions the model may load,
# every file of them pinned as FILES are (a new or changed skill asks again).
FOLDERS = (f"{STATE_DIRNAME}/skills", f"{STATE_DIRNAME}/commands", ".claude/skills", ".claude/commands")
MAX_FOLDER_FILES = 2000
REPOSITORY_FILES = ("AGENTS.md", "CLAUDE.md")  # read untrusted, as the repository's (agent.instructions)


def record_file() -> Path:
    return user_dir() / "trust.json"


@dataclass
class Split:
    """A workspace config's keys as trust sees them (each a nested dict like the file's)."""

    safe: dict[str, Any] = field(default_factory=dict)
    gated: dict[str, Any] = field(default_factory=dict)
    never: dict[str, Any] = field(default_factory=dict)
    ignore: list | None = None  # index.ignore as written (its order matters: a later line wins)

    def applied(self, trusted: bool, user_ignore: list) -> dict[str, Any]:
        """What of the workspace's config applies over the user's. Untrusted, its narrowing index.ignore
        entries come after the user's own instead of replacing them (an empty list must not re-include
        what the user left out); trusted, its keys apply as written, endpoints and key names excepted."""
        layer = {section: dict(body) for section, body in self.safe.items()}
        if trusted:
            for section, body in self.gated.items():
                layer[section] = {**layer.get(section, {}), **body} if isinstance(body, dict) else body
            if self.ignore is not None:
                layer.setdefault("index", {})["ignore"] = list(self.ignore)
        elif "ignore" in layer.get("index", {}):
            layer["index"]["ignore"] = [*user_ignore, *layer["index"]["ignore"]]
        return layer


def _put(into: dict, section: str, key: str, value: Any) -> None:
    into.setdefault(section, {})[key] = value


def split(layer: dict[str, Any]) -> Split:
    """`layer` (a parsed workspace config.toml) split into what applies untrusted, what needs trust and
    what never applies."""
    out = Split()
    for section, body in layer.items():
        if not isinstance(body, dict):
            out.gated[section] = body  # a top-level value: validation names it
            continue
        for key, value in body.items():
            if key in NEVER.get(section, ()):
                _put(out.never, section, key, value)
            elif (section, key) == ("index", "ignore") and isinstance(value, list):
                out.ignore = value
                narrow = [p for p in value if not (isinstance(p, str) and p.startswith("!"))]
                widen = [p for p in value if p not in narrow]
                _put(out.safe, section, key, narrow)
                if widen:
                    _put(out.gated, section, key, widen)
            elif key in SAFE.get(section, ()):
                _put(out.safe, section, key, value)
            else:
                _put(out.gated, section, key, value)
    return out


def dotted(tree: dict[str, Any]) -> list[str]:
    """The keys of a nested dict as `section.key` (a table of servers as `mcp.servers.NAME`)."""
    names = []
    for section, body in tree.items():
        if not isinstance(body, dict):
            names.append(section)
            continue
        for key, value in body.items():
            if section == "mcp" and key == "servers" and isinstance(value, dict) and value:
                names.extend(f"mcp.servers.{name}" for name in value)
            else:
                names.append(f"{section}.{key}")
    return names


def digest(gated: dict[str, Any], files: dict[str, str] | None = None) -> str:
    """What a trust record pins: the trust-gated settings and the gated files' contents (`contents`),
    canonical."""
    pinned = {"config": gated, "files": files or {}}
    text = json.dumps(pinned, sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def contents(root: Path) -> dict[str, str]:
    """The gated files of `root` (FILES) that exist: path -> the sha256 of what is in them now (a file that
    cannot be read counts by its error, so that it can never match what was trusted). In a git work tree, a
    file git does not track is the user's own (`.workstation/.gitignore` ignores it; a pull cannot bring
    one without tracking it): it is pinned as such, so the user edits it without trusting again."""
    found: dict[str, str] = {}
    present = [rel for rel in FILES if os.path.lexists(root / rel)] + _folder_files(root)
    git = bool(present) and os.path.isdir(root / ".git")
    tracked = {*git_tracked(root, STATE_DIRNAME), *git_tracked(root, ".claude")} if git else set()
    for rel in present:
        path = root / rel
        if git and rel not in tracked:
            found[rel] = "yours: not tracked by git"
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as fh:
                found[rel] = hashlib.sha256(fh.read()).hexdigest()
        except OSError as err:
            found[rel] = f"unreadable: {err.strerror}"
    return found


def _folder_files(root: Path) -> list[str]:
    """The files of FOLDERS under `root` (relative paths), no link followed; past MAX_FOLDER_FILES the rest
    count as one entry, so that adding files can never go unseen."""
    found: list[str] = []
    for rel in FOLDERS:
        base = root / rel
        if base.is_symlink() or not base.is_dir():
            continue
        for folder, dirs, names in os.walk(base, followlinks=False):
            dirs.sort()
            found += [os.path.relpath(os.path.join(folder, name), root) for name in sorted(names)]
    return found if len(found) <= MAX_FOLDER_FILES else [*found[:MAX_FOLDER_FILES], f"{len(found)} files"]


def shown(rel: str) -> str:
    """How a pinned file is named to the user: a skill's or command's file by its folder."""
    return next((folder for folder in FOLDERS if rel.startswith(folder + "/")), rel)


def identity(root: Path) -> str | None:
    """The id of `root`'s own `.workstation/` when this user made it here (paths.origin), else None."""
    return origin(root / STATE_DIRNAME)


# ---------------------------------------------------------------- the record

def _read() -> dict[str, dict[str, Any]]:
    path = record_file()
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read().decode("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        raise WorkstationError(f"trust record {path} cannot be read ({err}): fix or remove it") from None
    if not isinstance(data, dict) or not isinstance(data.get("workspaces"), dict):
        raise WorkstationError(f"trust record {path} is not a trust record: fix or remove it")
    return {k: v for k, v in data["workspaces"].items() if isinstance(v, dict)}


def _write(entries: dict[str, dict[str, Any]]) -> None:
    path = record_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"version": RECORD_VERSION, "workspaces": entries}, indent=1, sort_keys=True)
        atomic_write(path, body.encode() + b"\n", 0o600)
    except OSError as err:
        raise WorkstationError(f"trust record {path} cannot be written: {err.strerror}") from None


def entries() -> dict[str, dict[str, Any]]:
    """Every trusted folder: real path -> {"digest", "at"}."""
    return _read()


def recorded(root: Path) -> str | None:
    """The digest the user trusted `root` with, or None."""
    entry = _read().get(str(root))
    value = entry.get("digest") if entry else None
    return value if isinstance(value, str) else None


def grant(root: Path, pinned: str) -> None:
    """Trust `root` as it is now (`pinned`: decide's digest), and as the folder it is: its `.workstation/`
    is made this user's first (paths.Paths.claim) if it is not yet."""
    folder = identity(root)
    if folder is None:
        folder = Paths(root, root / STATE_DIRNAME).ensure().claim()
    found = _read()
    kept = found.get(str(root), {}).get("allow")  # the user's own always-allowed commands stay theirs
    found[str(root)] = {"digest": pinned, "id": folder, "at": datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="seconds"), **({"allow": kept} if isinstance(kept, list) else {})}
    _write(found)


def always_allowed(root: Path) -> list[str]:
    """The commands the user chose to always allow in `root` (the caller applies them only while trusted)."""
    entry = _read().get(str(root))
    allow = entry.get("allow") if entry else None
    return [a for a in allow if isinstance(a, str)] if isinstance(allow, list) else []


def allow_always(root: Path, pattern: str) -> None:
    """Keep `pattern` (an allow-list entry) as always allowed in trusted folder `root`."""
    found = _read()
    entry = found.get(str(root))
    if entry is None:
        raise WorkstationError(f"{root} is not trusted: a command is always allowed only in a trusted folder")
    allow = [a for a in entry.get("allow") or () if isinstance(a, str)]
    if pattern not in allow:
        entry["allow"] = [*allow, pattern]
        _write(found)


def revoke(root: Path) -> bool:
    found = _read()
    if found.pop(str(root), None) is None:
        return False
    _write(found)
    return True


# ---------------------------------------------------------------- the verdict

@dataclass(frozen=True)
class Trust:
    """What trust decided for one workspace: whether it is trusted, and what was left out."""

    root: Path
    trusted: bool
    digest: str
    changed: bool = False  # trusted once, with other settings or files
    replaced: bool = False  # trusted once, but this is another folder at the same path (or a re-clone)
    ignored: tuple[str, ...] = ()  # trust-gated keys and files left out (untrusted)
    never: tuple[str, ...] = ()  # endpoint and key settings left out (always)
    steering: tuple[str, ...] = ()  # the repository's AGENTS.md, CLAUDE.md: read untrusted, as the repository's
    invalid: tuple[str, ...] = ()  # problems of keys left out because they do not validate (untrusted)
    held: tuple[str, ...] = ()  # budgets above the user's own, held at theirs (config.BUDGETS)

    def notice(self) -> str | None:
        """One line naming what was left out and how to trust the folder; None when nothing was."""
        parts = []
        if self.ignored or self.invalid:
            why = ("not the folder you trusted (made anew since)" if self.replaced else
                   "changed since you trusted it" if self.changed else "not trusted")
            left = [f"ignored {', '.join(self.ignored)}"] if self.ignored else []
            left += [f"ignored as invalid: {'; '.join(self.invalid)}"] if self.invalid else []
            todo = (f"review them and run `workstation trust {self.root}` to apply them" if self.ignored else
                    "fix them in its .workstation/config.toml")
            parts.append(f"workspace {self.root} is {why}: {'; '.join(left)} ({todo})")
            if self.steering:
                parts.append(f"its {' and '.join(self.steering)} still reach the model, as the repository's "
                             "instructions, not yours")
        if self.held:
            parts.append(f"kept your own limits over the workspace's: {', '.join(self.held)}")
        if self.never:
            parts.append(f"ignored {', '.join(self.never)} from the workspace config: model endpoints, key "
                         "names and accepted team authors come only from your own config and environment")
        return "; ".join(parts) or None


def decide(root: Path, layer: dict[str, Any]) -> tuple[Trust, Split]:
    """The trust verdict on workspace `root` whose config.toml parsed to `layer`: trusted when the record
    pins this very folder (its id) with these settings and files."""
    parts = split(layer)
    files = contents(root)
    pinned = digest(parts.gated, files)
    entry = _read().get(str(root)) or {}
    known, known_id = (value if isinstance(value := entry.get(k), str) else None for k in ("digest", "id"))
    here = identity(root) if known is not None else None
    replaced = known_id is not None and known_id != here
    trusted = known == pinned and known_id is not None and not replaced
    ignored: list[str] = []
    if not trusted:
        ignored = dotted(parts.gated)
        ignored += list(dict.fromkeys(shown(rel) for rel in files))
    steering = () if trusted else tuple(n for n in REPOSITORY_FILES if os.path.isfile(root / n))
    return Trust(root, trusted, pinned, changed=known is not None and not trusted, replaced=replaced,
                 ignored=tuple(ignored), never=tuple(dotted(parts.never)), steering=steering), parts
