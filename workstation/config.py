"""Configuration: TOML files validated strictly, workspace over user over defaults.

Precedence (highest first): environment (WORKSTATION_MODEL), the workspace's
`.workstation/config.toml`, the user's `config.toml`, the defaults below.
"""

from __future__ import annotations

import os
import tomllib
import warnings
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import ConfigError
from .paths import Paths
from .sandbox import DEFAULT_HIDE


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ModelConfig(_Section):
    name: str = ""  # any litellm model string; "" means no model configured
    api_base: str = ""
    api_key_env: str = ""  # name of the env var holding the key; the key itself never goes in config
    fallbacks: list[str] = Field(default_factory=list)
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(2, ge=0, le=10)
    context_window: int = Field(0, ge=0)  # 0: ask litellm


class IndexConfig(_Section):
    max_file_bytes: int = Field(1_000_000, gt=0)
    workers: int = Field(0, ge=0)  # 0: one per core
    ignore: list[str] = Field(default_factory=list)  # extra gitignore-style patterns
    describe_with_model: bool = True  # LLM-written purposes when a model is set


class MemoryConfig(_Section):
    compact_threshold: int = Field(60, ge=2)
    keep_recent: int = Field(40, ge=1)
    compact_model: str = ""
    compact_fallback_model: str = ""
    compact_token_ratio: float = Field(0.8, gt=0, le=1)
    redact_every: int = Field(10, ge=1)
    redact_min_chars: int = Field(2000, ge=1)

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
        default_factory=lambda: ["git status", "git diff", "git log", "ls", "pytest", "python -m pytest"]
    )
    command_network: bool = Field(False, strict=True)  # commands may reach the network
    sandbox: Literal["auto", "bwrap", "landlock", "seatbelt", "off"] = "auto"  # "off": every command asks
    sandbox_hide: list[str] = Field(default_factory=lambda: list(DEFAULT_HIDE))  # hidden from commands
    command_timeout_s: float = Field(120.0, gt=0)
    max_output_chars: int = Field(20_000, gt=0)
    max_steps: int = Field(30, ge=1)

    @field_validator("command_allow")
    @classmethod
    def _patterns(cls, entries: list[str]) -> list[str]:
        from .agent.allowlist import Pattern

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


class WorkspaceConfig(_Section):
    state_dir: str = ""  # where databases and sessions live; default <root>/.workstation


class Config(_Section):
    model: ModelConfig = Field(default_factory=ModelConfig)
    index: IndexConfig = Field(default_factory=IndexConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    ui: UIConfig = Field(default_factory=UIConfig)
    workspace: WorkspaceConfig = Field(default_factory=WorkspaceConfig)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as err:
        raise ConfigError([f"{path}: not valid TOML: {err}"]) from None
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
