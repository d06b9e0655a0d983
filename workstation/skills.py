"""Skills and custom slash commands, in the formats people already write them.

A skill is a folder holding a `SKILL.md` (the agentskills format: YAML front matter with `name` and
`description`, then the instructions). Only its name and description are in the model's head; the `skill`
tool loads its body, and any file of its folder, when the model decides the description fits the task.
A custom command is a markdown file `NAME.md` (Claude Code's format: optional front matter with
`description`, `argument-hint` and `allowed-tools`: what its turn runs without asking, agent.grants); `/NAME
ARGS` sends its body as the user's message, `$ARGUMENTS` replaced by ARGS and `$1`, `$2`... by its words.

Where they come from, in order (a later one of the same name is left out, named once): the user's config
home (`skills/`, `commands/` in paths.user_dir()); the workspace's `.workstation/skills/` and
`.workstation/commands/`, once the folder is trusted (workstation.trust: a repository's instructions steer
the model); with `skills.claude = true` in the user's own config, `~/.claude/skills` and `~/.claude/commands`,
and the workspace's `.claude/skills` and `.claude/commands` once trusted.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .paths import Paths, user_dir

NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")  # agentskills: lowercase, digits, hyphens, <= 64
COMMAND_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
MAX_DESCRIPTION = 1024
MAX_FILE = 256 * 1024  # a SKILL.md, a command or a skill's file read: bigger ones are refused, never read whole


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    folder: Path
    source: str  # where it was found: user, workspace, claude (~/.claude), claude-workspace

    def body(self) -> str:
        return split_front_matter(_read(self.folder / "SKILL.md"))[1].strip()

    def files(self) -> list[str]:
        """The other files of its folder (relative paths), which `skill(name, file)` reads."""
        found = []
        for base, dirs, names in os.walk(self.folder, followlinks=False):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(names):
                rel = os.path.relpath(os.path.join(base, name), self.folder)
                if rel != "SKILL.md" and not name.startswith("."):
                    found.append(rel)
        return found[:200]

    def file(self, rel: str) -> str:
        """One file of the skill's folder, never outside it and never through a link."""
        target = (self.folder / rel).resolve()
        if rel.startswith("/") or ".." in Path(rel).parts or not target.is_relative_to(self.folder.resolve()):
            raise ValueError(f"{rel}: not a file of skill {self.name}")
        if rel not in self.files():
            raise ValueError(f"{rel}: skill {self.name} has no such file (its files: {', '.join(self.files()) or 'none'})")
        return _read(self.folder / rel)


@dataclass(frozen=True)
class Command:
    name: str
    description: str
    argument_hint: str
    allowed_tools: tuple[str, ...]  # the rules of its `allowed-tools`: what its turn runs without asking
    template: str
    source: str

    def expand(self, arguments: str) -> str:
        """The message `/NAME ARGUMENTS` sends: $ARGUMENTS, then $1..$9, replaced."""
        words = arguments.split()
        text = self.template.replace("$ARGUMENTS", arguments.strip())
        return re.sub(r"\$([1-9])", lambda m: words[int(m.group(1)) - 1] if int(m.group(1)) <= len(words) else "",
                      text).strip()


@dataclass
class Catalog:
    skills: dict[str, Skill] = field(default_factory=dict)
    commands: dict[str, Command] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def head_section(self) -> str:
        """What the model's head says of the skills (their names and descriptions only)."""
        if not self.skills:
            return ""
        lines = [f"- {s.name}: {s.description}" for s in self.skills.values()]
        return "\n".join(["Skills (call skill(name) to load one when its description fits the task; never "
                          "otherwise):", *lines])


def _read(path: Path) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(MAX_FILE + 1)
    if len(data) > MAX_FILE:
        raise ValueError(f"{path} is over {MAX_FILE // 1024} KB")
    return data.decode("utf-8", "replace")


def split_front_matter(text: str) -> tuple[dict, str]:
    """(front matter, body) of a markdown file; ({}, text) when it has none. ValueError when it is not YAML
    or not a mapping."""
    if not text.startswith("---"):
        return {}, text
    end = re.search(r"^---\s*$", text[3:], re.MULTILINE)
    if end is None:
        return {}, text
    import yaml  # lazy: PyYAML, only when a skill or command exists

    try:
        data = yaml.safe_load(text[3:3 + end.start()]) or {}
    except yaml.YAMLError as err:
        raise ValueError(f"front matter is not YAML: {str(err).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ValueError("front matter is not a mapping of keys")
    return data, text[3 + end.end():]


def _places(paths: Paths, claude: bool) -> list[tuple[str, Path]]:
    home = user_dir()
    places = [("user", home)]
    if claude:
        places.append(("claude", Path.home() / ".claude"))
    if paths.trusted:
        places.append(("workspace", paths.state))
        if claude:
            places.append(("claude-workspace", paths.root / ".claude"))
    return places


def discover(paths: Paths, *, claude: bool = False) -> Catalog:
    """Every skill and command in force here (see the module docstring)."""
    catalog = Catalog()
    for source, base in _places(paths, claude):
        for folder in _entries(base / "skills", dirs=True):
            _add_skill(catalog, folder, source)
        for file in _entries(base / "commands", dirs=False):
            _add_command(catalog, file, source)
    return catalog


def _entries(folder: Path, *, dirs: bool) -> list[Path]:
    try:
        names = sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for name in names:
        path = folder / name
        if name.startswith(".") or path.is_symlink():
            continue
        if dirs and path.is_dir() and (path / "SKILL.md").is_file():
            found.append(path)
        elif not dirs and name.endswith(".md") and path.is_file():
            found.append(path)
    return found


def _add_skill(catalog: Catalog, folder: Path, source: str) -> None:
    try:
        meta, _ = split_front_matter(_read(folder / "SKILL.md"))
    except (OSError, ValueError) as err:
        catalog.problems.append(f"skill {folder} left out: {err}")
        return
    name, description = meta.get("name", folder.name), meta.get("description")
    if not isinstance(name, str) or not NAME.match(name):
        catalog.problems.append(f"skill {folder} left out: name {name!r} is not lowercase letters, digits and hyphens")
        return
    if not isinstance(description, str) or not description.strip():
        catalog.problems.append(f"skill {folder} left out: its front matter has no description")
        return
    if name in catalog.skills:
        catalog.problems.append(f"skill {folder} left out: {name} is defined already ({catalog.skills[name].folder})")
        return
    catalog.skills[name] = Skill(name, " ".join(description.split())[:MAX_DESCRIPTION], folder, source)


def _add_command(catalog: Catalog, file: Path, source: str) -> None:
    name = file.stem
    if not COMMAND_NAME.match(name):
        catalog.problems.append(f"command {file} left out: {name!r} is not a command name")
        return
    try:
        meta, body = split_front_matter(_read(file))
    except (OSError, ValueError) as err:
        catalog.problems.append(f"command {file} left out: {err}")
        return
    if name in catalog.commands:
        catalog.problems.append(f"command {file} left out: /{name} is defined already")
        return
    tools = tool_rules(meta.get("allowed-tools"))
    description = meta.get("description")
    first = next((line.strip() for line in body.splitlines() if line.strip()), "")
    catalog.commands[name] = Command(
        name, " ".join(str(description).split()) if description else first[:80],
        str(meta.get("argument-hint") or ""), tools, body.strip(), source)


def tool_rules(value: object) -> tuple[str, ...]:
    """The rules of an `allowed-tools` field, as Claude Code reads it: a YAML list, or one string of rules
    separated by commas or spaces, where a rule's parentheses may hold spaces (`Read, Bash(git add *)`)."""
    if isinstance(value, str):
        return tuple(r.strip() for r in re.findall(r"[^\s,(]+(?:\([^)]*\))?", value) if r.strip())
    if isinstance(value, list):
        return tuple(str(v).strip() for v in value if isinstance(v, str) and v.strip())
    return ()
