"""Configuration: TOML files validated strictly, workspace over user over defaults.

Precedence (highest first): environment (WORKSTATION_MODEL), the workspace's
`.workstation/config.toml`, the user's `config.toml`, the defaults below.
"""

from __future__ import annotations

import os
import re
import tomllib
import warnings
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import ConfigError
from .paths import Paths
from .sandbox import DEFAULT_HIDE


class _Section(BaseModel):
    # nan and inf pass every `gt`/`le` bound silently, so no setting may be one
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


DAY_S = 86_400.0  # no time limit in the config may exceed a day: a bigger one is a typo, not a wish


class ModelConfig(_Section):
    name: str = ""  # any litellm model string; "" means no model configured
    api_base: str = ""
    api_key_env: str = ""  # name of the env var holding the key; the key itself never goes in config
    fallbacks: list[str] = Field(default_factory=list)
    timeout_s: float = Field(60.0, gt=0, le=DAY_S)
    max_retries: int = Field(2, ge=0, le=10)
    context_window: int = Field(0, ge=0, le=100_000_000)  # 0: ask litellm


class IndexConfig(_Section):
    max_file_bytes: int = Field(1_000_000, gt=0, le=1 << 30)
    workers: int = Field(0, ge=0, le=256)  # 0: one per core
    ignore: list[str] = Field(default_factory=list)  # extra gitignore-style patterns
    describe_with_model: bool = False  # opt-in: LLM-written purposes when a model is set

    @field_validator("ignore")
    @classmethod
    def _ignore_patterns(cls, patterns: list[str]) -> list[str]:
        from pathspec import GitIgnoreSpec  # lazy: pathspec, ~12 ms, only when index.ignore is set

        for number, pattern in enumerate(patterns, start=1):
            try:
                GitIgnoreSpec.from_lines([pattern])
            except Exception as err:  # pathspec raises its own error types and ValueError/TypeError
                raise ValueError(f"entry {number}: {pattern!r} is not a gitignore pattern ({err})") from None
        return patterns


class MemoryConfig(_Section):
    compact_threshold: int = Field(60, ge=2, le=1_000_000)
    keep_recent: int = Field(40, ge=1)
    compact_model: str = ""
    compact_fallback_model: str = ""
    compact_token_ratio: float = Field(0.8, gt=0, le=1)
    redact_every: int = Field(10, ge=1, le=1_000_000)
    redact_min_chars: int = Field(2000, ge=1, le=1 << 30)

    @model_validator(mode="after")
    def _knobs(self) -> "MemoryConfig":
        if self.keep_recent >= self.compact_threshold:
            raise ValueError(
                f"keep_recent ({self.keep_recent}) must be below compact_threshold "
                f"({self.compact_threshold}), or compaction can never reclaim anything"
            )
        return self

    @property
    def reclaim_warning(self) -> str | None:
        gap = self.compact_threshold - self.keep_recent
        if gap < max(5, self.compact_threshold // 5):
            return (
                f"memory.keep_recent ({self.keep_recent}) is close to compact_threshold "
                f"({self.compact_threshold}): each compaction reclaims only {gap} turns"
            )
        return None


class AgentConfig(_Section):
    # argv patterns that run without asking, where a full sandbox holds (README: "Commands")
    command_allow: list[str] = Field(
        default_factory=lambda: ["git status", "git diff", "git log", "ls", "pytest", "python -m pytest",
                                 "python3 -m pytest"]
    )
    command_network: bool = Field(False, strict=True)  # commands may reach the network
    sandbox: Literal["auto", "bwrap", "landlock", "seatbelt", "off"] = "auto"  # "off": every command asks
    sandbox_hide: list[str] = Field(default_factory=lambda: list(DEFAULT_HIDE))  # hidden from commands
    command_timeout_s: float = Field(120.0, gt=0, le=DAY_S)
    max_output_chars: int = Field(20_000, gt=0, le=1 << 30)
    max_steps: int = Field(30, ge=1, le=100_000)
    auto_commit: bool = Field(False, strict=True)  # commit the files each turn changed (git repositories only; never pushes)

    @field_validator("command_allow")
    @classmethod
    def _patterns(cls, entries: list[str]) -> list[str]:
        from .sandbox.allowlist import Pattern  # lazy: ~1.5 ms at every config load, only when command_allow is set

        for number, entry in enumerate(entries, start=1):
            try:
                Pattern.parse(entry)
            except ValueError as err:
                raise ValueError(f"entry {number}: {err}") from None
        return entries

    @field_validator("sandbox_hide")
    @classmethod
    def _hidden(cls, paths: list[str]) -> list[str]:
        for number, path in enumerate(paths, start=1):
            if not path.startswith(("/", "~")) or "\x00" in path:
                raise ValueError(f"entry {number}: {path!r} is not an absolute path (or one starting with ~)")
        return paths


class UIConfig(_Section):
    theme: str = "workstation-dark"


class ImportConfig(_Section):
    # agents whose sessions of this workspace the sidecar keeps importing as they are written
    watch: list[Literal["claude-code", "codex"]] = Field(default_factory=list)


class WorkspaceConfig(_Section):
    state_dir: str = ""  # where databases and sessions live; default <root>/.workstation

    @field_validator("state_dir")
    @classmethod
    def _state_dir(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("contains a NUL character")
        return value


_SERVER_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_)){0,31}$")  # no "__": it separates NAME__tool
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")  # ${VAR}: a value read from our environment at start
_SECRET_NAME = re.compile(r"(?:^|[_-])(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|AUTH|AUTHORIZATION)$|API_?KEY",
                          re.IGNORECASE)


class McpServerConfig(_Section):
    """One MCP server whose tools the agent may call (as NAME__tool): a stdio command or an HTTP url.

    A stdio server gets only the environment named here (plus PATH, HOME and the like), never ours
    whole; values may read ours as ${VAR}. A secret (an env variable or header whose name looks
    secret) must be such a reference: keys never go in config files."""

    command: str = ""  # the program of a stdio server
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str = ""  # a streamable HTTP server
    headers: dict[str, str] = Field(default_factory=dict)
    trusted: bool = False  # its calls run without asking
    trusted_tools: list[str] = Field(default_factory=list)  # these (the server's own names) run without asking
    startup_timeout_s: float = Field(30.0, gt=0)
    timeout_s: float = Field(60.0, gt=0)  # one tool call

    @model_validator(mode="after")
    def _transport(self) -> "McpServerConfig":
        if bool(self.command) == bool(self.url):
            raise ValueError("give either command (a stdio server) or url (a streamable HTTP server)")
        if self.url and not re.match(r"^https?://[^\s/]+", self.url):
            raise ValueError(f"url must be http://... or https://..., got {self.url!r}")
        if self.url and (self.args or self.env):
            raise ValueError("args and env are for a stdio server (command), not a url")
        if self.command and self.headers:
            raise ValueError("headers are for a url server, not a stdio command")
        for what, values in (("env", self.env), ("headers", self.headers)):
            for key, value in values.items():
                if what == "env" and not _ENV_NAME.match(key):
                    raise ValueError(f"env: {key!r} is not an environment variable name")
                if _SECRET_NAME.search(key) and value and not _ENV_REF.search(value):
                    raise ValueError(f"{what}.{key} looks secret: keep the value in an environment variable "
                                     f"and write \"${{VAR}}\" here")
        return self


class McpConfig(_Section):
    servers: dict[str, McpServerConfig] = Field(default_factory=dict)

    @field_validator("servers", mode="before")
    @classmethod
    def _names(cls, servers: Any) -> Any:
        for name in servers if isinstance(servers, dict) else ():
            if not _SERVER_NAME.match(str(name)):
                raise ValueError(f"server name {name!r}: use letters, digits, '-' or single '_' (at most 32)")
        return servers


class Config(_Section):
    model: ModelConfig = Field(default_factory=ModelConfig)
    index: IndexConfig = Field(default_factory=IndexConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    ui: UIConfig = Field(default_factory=UIConfig)
    workspace: WorkspaceConfig = Field(default_factory=WorkspaceConfig)
    import_: ImportConfig = Field(default_factory=ImportConfig, alias="import")  # [import] in the file
    mcp: McpConfig = Field(default_factory=McpConfig)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as err:
        raise ConfigError([f"{path}: not valid TOML: {err}"]) from None
    except UnicodeDecodeError as err:
        raise ConfigError([f"{path}: not UTF-8 text (byte {err.object[err.start]:#04x} at offset {err.start})"]) from None
    except RecursionError:
        raise ConfigError([f"{path}: not valid TOML: arrays or tables nested too deeply"]) from None
    except OSError as err:
        raise ConfigError([f"{path}: cannot read: {err.strerror}"]) from None


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def validate(data: dict[str, Any], source: str = "config") -> Config:
    try:
        return Config.model_validate(data)
    except ValidationError as err:
        lines = []
        for problem in err.errors():
            key = ".".join(str(p) for p in problem["loc"]) or "(top level)"
            msg = problem["msg"].removeprefix("Value error, ")
            if problem["type"] == "extra_forbidden":
                msg = "unknown key"
            lines.append(f"{source}: {key}: {msg}")
        raise ConfigError(lines) from None


def load(root: str | os.PathLike, overrides: dict[str, Any] | None = None) -> tuple[Config, Paths]:
    """Load and validate configuration for a workspace; returns it with its paths."""
    probe = Paths.for_root(root)
    data: dict[str, Any] = {}
    sources = []
    for path in (probe.user_config_file, probe.config_file):
        layer = _read_toml(path)
        if layer:
            sources.append(str(path))
            # validate each layer alone so an error names the file it is in
            validate(_merge(data, layer), str(path))
            data = _merge(data, layer)
    if env_model := os.environ.get("WORKSTATION_MODEL"):
        data = _merge(data, {"model": {"name": env_model}})
    if overrides:
        data = _merge(data, overrides)
    config = validate(data, " + ".join(sources) or "config")
    if warning := config.memory.reclaim_warning:
        warnings.warn(warning, stacklevel=2)
    paths = Paths.for_root(probe.root, config.workspace.state_dir or None)
    return config, paths
