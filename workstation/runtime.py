"""The core services of one workspace, assembled once for the CLI, the TUI and the agent."""

from __future__ import annotations

import os
import warnings
from functools import cached_property
from typing import Any

from . import config as config_mod


class Workspace:
    """Config, paths, database, knowledge map and memory of one workspace root.

    Everything heavy (DuckDB, tree-sitter, litellm) is opened on first use.
    `model` overrides the configured model name for this run (`--model`).
    """

    def __init__(self, root: str | os.PathLike = ".", *, model: str | None = None,
                 overrides: dict[str, Any] | None = None):
        overrides = dict(overrides or {})
        if model:
            overrides["model"] = {**overrides.get("model", {}), "name": model}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.config, self.paths = config_mod.load(root, overrides or None)
        self.warnings = [str(w.message) for w in caught]  # for the UI to show (the CLI prints them)
        self.paths.ensure()
        self.root = self.paths.root

    @cached_property
    def db(self):
        from .store import Database

        return Database(self.paths)

    @cached_property
    def kmap(self):
        from .index.map import KnowledgeMap

        return KnowledgeMap(self.db, self.paths, self.config)

    def memory(self, session: str = "", flow: str = "main"):
        """The memory of one execution; stm and ltm reads are recorded as memory hits and misses."""
        from .memory import Memory

        return Memory(self.db, session=session, flow=flow, record_lookups=("stm", "ltm"))

    def model_spec(self, name: str | None = None):
        """The configured model (or `name`) as an llm.ModelSpec, None if unset (providers.spec_for:
        the configured endpoint and key go only to the same provider)."""
        from .providers import spec_for

        return spec_for(self.config.model, name)

    def close(self) -> None:
        if "db" in self.__dict__:
            self.db.close()

    def __enter__(self) -> "Workspace":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
