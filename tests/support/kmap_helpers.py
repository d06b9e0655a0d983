"""Shared helpers of the knowledge-map tests: workspaces on disk and maps over them."""

from __future__ import annotations

import contextlib
import os
import textwrap
from pathlib import Path

from workstation import config as config_mod
from workstation.index import map as map_mod
from workstation.index.map import KnowledgeMap
from workstation.store import Database


def write(root: Path, files: dict[str, str | bytes], *, aged: bool = False) -> None:
    """Write `files` under root; `aged`: their mtimes moved out of the racy window, as a checkout's."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(textwrap.dedent(content))
        if aged:
            age(path)


@contextlib.contextmanager
def open_map(root: Path, **index_config):
    """A KnowledgeMap over `root` with its own database; `index_config` overrides [index]."""
    overrides = {"index": index_config} if index_config else None
    cfg, paths = config_mod.load(root, overrides)
    db = Database(paths)
    try:
        yield KnowledgeMap(db, paths, cfg)
    finally:
        db.close()


def db_symbols(km: KnowledgeMap, rel: str) -> list[tuple]:
    """(qualname, kind, start, end) the database holds for `rel`, read without the staleness gate."""
    rows = km.db.call(map_mod._symbols_of, rel)
    return [(qualname, kind, start, end) for _n, qualname, kind, _p, _s, start, end in rows]


def db_paths(km: KnowledgeMap) -> set[str]:
    """Indexed paths, read without the staleness gate."""
    return set(km.db.call(map_mod._all_paths))


def age(path: Path, seconds: float = 10.0) -> None:
    """Move a file's mtime into the past, out of the racy window."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - int(seconds * 1e9)))
