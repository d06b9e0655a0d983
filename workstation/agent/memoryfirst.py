"""Memory first: what a turn's task names, looked up in the knowledge map before any file is read.

At the start of each user turn the agent runs the code-memory seed's first
two steps: query memory for the files and symbols the task names, and pass
every match through the staleness gate (`KnowledgeMap.ensure_fresh`: a file
that changed on disk is re-indexed before it is served, so stale facts are
never returned). Each lookup is a memory hit or miss. The maps of the files
found make the map excerpt of every model call of the turn; with none found
the excerpt is the ranked repository map.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import WorkstationError
from ..tokens import count

MAX_FILES = 4  # file maps in one excerpt
MAX_LOOKUPS = 16
_PATHLIKE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.[A-Za-z][A-Za-z0-9]{0,7})(?![\w/-])")
_BACKTICKED = re.compile(r"`([^`\s]{3,80})`")
_IDENT = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*[A-Za-z0-9]\b")


@dataclass
class Lookup:
    key: str
    kind: str  # 'path' | 'symbol'
    hit: bool
    files: list[str] = field(default_factory=list)
    reason: str = ""  # for a miss: 'not in the map' | 'stale: re-indexed'


@dataclass
class TurnMemory:
    """The memory lookups of one turn and the files they found."""

    lookups: list[Lookup] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    @property
    def hits(self) -> int:
        return sum(1 for lk in self.lookups if lk.hit)

    def summary(self) -> dict:
        """The form stored on the user record of the session log."""
        return {"lookups": len(self.lookups), "hits": self.hits, "files": self.files,
                "misses": [lk.key for lk in self.lookups if not lk.hit]}


def candidates(text: str) -> tuple[list[str], list[str]]:
    """(paths, identifiers) a task names: path-like words, and code-like names (snake_case,
    CamelCase, mixedCase or anything in backticks)."""
    paths: list[str] = []
    names: list[str] = []
    for word in _BACKTICKED.findall(text):
        (paths if ("/" in word or _PATHLIKE.fullmatch(word)) else names).append(word.strip("()"))
    paths += [p for p in _PATHLIKE.findall(text) if _looks_like_path(p)]
    for word in _IDENT.findall(_BACKTICKED.sub(" ", _PATHLIKE.sub(" ", text))):
        if "_" in word.strip("_") or (word[0].isupper() and any(c.islower() for c in word)
                                      and any(c.isupper() for c in word[1:])) \
                or (word[0].islower() and any(c.isupper() for c in word)):
            names.append(word)
    names = [n for n in names if re.fullmatch(r"[A-Za-z_][\w.]*", n)]
    return list(dict.fromkeys(paths)), list(dict.fromkeys(names))


def _looks_like_path(word: str) -> bool:
    """A folder in it, or a file extension of two letters or more (or a one-letter one code uses):
    'e.g.' and 'v1.2' are prose, 'src/a.c' and 'setup.py' are paths."""
    if word[0].isdigit():
        return False
    ext = word.rsplit(".", 1)[-1]
    return "/" in word or len(ext) >= 2 or ext in ("c", "h", "m", "r", "s")


def query(kmap, text: str) -> TurnMemory:
    """Look up what `text` names; every answer has passed the staleness gate."""
    change = kmap.ensure_fresh()  # whole map: a stat per file, a re-index only for what changed
    reindexed = set(change.indexed) | set(change.removed)
    paths, names = candidates(text)
    turn = TurnMemory()
    rels: list[str] = []
    for path in paths:
        try:
            rels.append(kmap.relpath(path))
        except WorkstationError:
            continue  # outside the workspace: not something the map could know
    rels = list(dict.fromkeys(r for r in rels if r))[:MAX_LOOKUPS]
    known = set(kmap.known_paths(rels))
    for rel in rels:
        turn.lookups.append(_lookup(rel, "path", [rel] if rel in known else [], reindexed))
    names = names[:max(0, MAX_LOOKUPS - len(turn.lookups))]
    by_name: dict[str, list[str]] = {}
    if names:
        for name, path in kmap.symbol_files(names):
            by_name.setdefault(name, []).append(path)
    for name in names:
        turn.lookups.append(_lookup(name, "symbol", by_name.get(name, []), reindexed))
    for lookup in turn.lookups:
        for rel in lookup.files:
            if rel not in turn.files:
                turn.files.append(rel)
    return turn


def _lookup(key: str, kind: str, files: list[str], reindexed: set[str]) -> Lookup:
    if not files:
        return Lookup(key, kind, False, [], "not in the map")
    if reindexed & set(files):
        return Lookup(key, kind, False, files, "stale: re-indexed")
    return Lookup(key, kind, True, files)


def excerpt(kmap, files: list[str], budget: int) -> str:
    """The map excerpt of a model call: maps of the files the turn named, else the repository map."""
    if budget <= 0:
        return ""
    parts: list[str] = []
    used = 0
    for rel in files[:MAX_FILES]:
        try:
            text = kmap.file_map(rel).render()
        except WorkstationError:
            continue  # deleted since the lookup
        size = count(text)
        if used + size > budget:
            break
        parts.append(text)
        used += size
    if parts:
        return "Knowledge map of the files this task names:\n\n" + "\n\n".join(parts)
    return kmap.repo_map(tokens=budget)  # its first line says what it is
