"""The composition root: one typed object per workspace that the CLI, the app, the sidecar and the MCP
server build once and pass down (config, paths, database, knowledge map, memory, model specs)."""

from __future__ import annotations

import os
import warnings
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable

from . import config as config_mod
from .config import Config
from .fsutil import sweep_staging
from .paths import Paths
from .providers import spec_for

if TYPE_CHECKING:
    from .hooks import Hooks
    from .skills import Catalog
    from .index.map import KnowledgeMap
    from .llm import ModelSpec
    from .lsp import LanguageServers
    from .memory import Memory
    from .store import Database


class Workspace:
    """Config, paths, database, knowledge map and memory of one workspace root.

    `model` overrides the configured model name for this run (`--model`), `overrides` any config
    (tests, the verifier). The configuration is read and validated at construction (a bad config
    raises ConfigError there), unless `lazy`: then on first use, so that a command that needs no
    workspace (`--help`) never reads one. Config warnings go to `on_warning` as they are found
    and stay in `warnings`. Everything heavy (DuckDB, tree-sitter, litellm) opens on first use.
    """

    def __init__(self, root: str | os.PathLike = ".", *, model: str | None = None,
                 overrides: dict[str, Any] | None = None, lazy: bool = False,
                 on_warning: Callable[[str], None] | None = None):
        self.requested_root = str(root)
        self.requested_model = model
        self._overrides = dict(overrides or {})
        if model:
            self._overrides["model"] = {**self._overrides.get("model", {}), "name": model}
        self._on_warning = on_warning
        self.warnings: list[str] = []
        self._loaded: tuple[Config, Paths] | None = None
        if not lazy:
            self.load()

    def load(self) -> "Workspace":
        """Read and validate the configuration now (idempotent); creates the state folder."""
        if self._loaded is None:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                config, paths = config_mod.load(self.requested_root, self._overrides or None)
                paths.ensure()  # may set aside state that came with the repository: one warning
            for warning in caught:
                self.warnings.append(str(warning.message))
                if self._on_warning is not None:
                    self._on_warning(str(warning.message))
            sweep_staging(paths.staging)  # what writers killed mid-write left (a live writer's stays)
            self._loaded = (config, paths)
        return self

    def with_model(self, model: str | None) -> "Workspace":
        """This workspace, or an unopened copy of it on another model (a command's own --model)."""
        if not model or model == self.requested_model:
            return self
        return Workspace(self.requested_root, model=model, overrides=self._overrides, lazy=True,
                         on_warning=self._on_warning)

    def with_overrides(self, overrides: dict[str, dict[str, Any]]) -> "Workspace":
        """An unopened copy of this workspace with `overrides` (section -> keys) over its configuration: a
        headless run's --max-turns and --max-budget-usd."""
        merged = {**self._overrides}
        for section, values in overrides.items():
            merged[section] = {**merged.get(section, {}), **values}
        return Workspace(self.requested_root, model=self.requested_model, overrides=merged, lazy=True,
                         on_warning=self._on_warning)

    @property
    def config(self) -> Config:
        return self.load()._loaded[0]  # type: ignore[index]

    @property
    def paths(self) -> Paths:
        return self.load()._loaded[1]  # type: ignore[index]

    @property
    def root(self):
        return self.paths.root

    @cached_property
    def db(self) -> "Database":
        from .store import Database  # lazy: the store, ~5 ms, for commands that never open it

        return Database(self.paths)

    @cached_property
    def kmap(self) -> "KnowledgeMap":
        from .index.map import KnowledgeMap  # lazy: the indexer and pathspec, ~12 ms after the store

        kmap = KnowledgeMap(self.db, self.paths, self.config)
        for problem in kmap.rules.problems:
            self.warnings.append(problem)
            if self._on_warning is not None:
                self._on_warning(problem)
        return kmap

    @cached_property
    def lsp(self) -> "LanguageServers":
        """The workspace's language servers (workstation.lsp): each starts on first use, all stop at close."""
        from .lsp import LanguageServers  # lazy: nothing starts until a file of a language is edited or queried
        from .sandbox import Policy  # lazy: the sandbox's probes, only once a server starts

        return LanguageServers(self.root, self.config.lsp,
                               Policy.for_workspace(self.paths, self.config.agent, self.config.model.api_key_env),
                               trusted=self.paths.trusted)

    @cached_property
    def hooks(self) -> "Hooks":
        """The hooks in force here (workstation.hooks): the user's, and the workspace's once it is trusted."""
        from .hooks import Hooks  # lazy: read once, only by what runs an agent

        found = Hooks.load(self.paths, claude=self.config.hooks.claude, limit_s=self.config.hooks.timeout_s)
        for problem in found.problems:
            self.warnings.append(problem)
            if self._on_warning is not None:
                self._on_warning(problem)
        return found

    @cached_property
    def skills(self) -> "Catalog":
        """The skills and custom commands in force here (workstation.skills)."""
        from .skills import discover  # lazy: read once, only by what runs an agent

        found = discover(self.paths, claude=self.config.skills.claude)
        for problem in found.problems:
            self.warnings.append(problem)
            if self._on_warning is not None:
                self._on_warning(problem)
        return found

    def memory(self, session: str = "", flow: str = "main") -> "Memory":
        """The memory of one execution; stm and ltm reads are recorded as memory hits and misses."""
        from .memory import Memory  # lazy: the memory package, ~12 ms

        return Memory(self.db, session=session, flow=flow, record_lookups=("stm", "ltm"),
                      team_authors=tuple(self.config.team.accept_authors))

    def model_spec(self, name: str | None = None) -> "ModelSpec | None":
        """The configured model (or `name`) as an llm.ModelSpec, None if unset (providers.spec_for:
        the configured endpoint and key go only to the same provider)."""
        return spec_for(self.config.model, name, cache_ttl=self.config.agent.cache_ttl)

    def close(self) -> None:
        servers = self.__dict__.pop("lsp", None)
        if servers is not None:
            servers.close()
        if "db" in self.__dict__:
            self.db.close()
            del self.__dict__["db"]
            self.__dict__.pop("kmap", None)

    def __enter__(self) -> "Workspace":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
