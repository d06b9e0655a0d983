"""`KnowledgeMap`: the one object the CLI, the agent and the TUI use for the knowledge map.

Every question goes through the staleness gate first (`ensure_fresh`), so
no answer ever comes from a file that changed on disk: changed files are
re-indexed on the spot, deleted ones dropped, before the query runs.

    km = KnowledgeMap(db, paths, config)
    km.index_all()                  # walk, parse what changed, report
    km.file_map("pkg/mod.py")       # FileMap: skeleton with line ranges, purpose, deps
    km.repo_map(tokens=1024)        # ranked repository map that fits the budget
    km.find("parse config")         # FindResult: tier one (names), tier two (model)
    km.impact("load")               # [ImpactHit]: every reference, file:line, enclosing symbol
    km.files(); km.symbols(path)    # for the TUI tree; km.skipped(): what is left out and why
    km.freshness(path)              # 'fresh' | 'stale' | 'deleted', without fixing anything
    km.add_listener(fn)             # fn(MapChange) after every refresh that changed something
    km.describe_files(limit)        # background, opt-in: model-written purposes, with progress and cost

A KnowledgeMap is safe to share between threads (the watcher and a query
thread); refreshes are serialised. Several processes may share one
workspace: the database broker serialises their writes, and every write
replaces a file's rows whole, so racing re-indexes of a file agree.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import shutil
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, AbstractSet, Callable, TypeVar, cast

from ..errors import WorkstationError
from ..fsutil import atomic_write
from ..paths import STATE_DIRNAME
from ..store.broker import readonly
from . import indexer, storage
from .batches import Batch, BatchWriter
from .freshness import Indexed, Plan, agreement, is_racy, plan
from .ignore import IgnoreRules
from .versions import parser_version

if TYPE_CHECKING:
    from ..config import Config
    from . import describe as describe_mod
    from .query import FindResult, ImpactHit
    from .repomap import FileMap
    from ..paths import Paths
    from ..store import Database

T = TypeVar("T")
FLUSH_BYTES = 8 << 20  # write every ~8 MB of rows: the database works while workers parse
IGNORE_FILE = f"{STATE_DIRNAME}/ignore"


@dataclass
class IndexReport:
    """Outcome of `index_all`: the map's totals now and what this run did."""

    files: int
    symbols: int
    references: int
    indexed: int  # files parsed by this run
    unchanged: int
    removed: int
    skipped: dict[str, int]  # reason -> files, everything the map holds as skipped
    skipped_files: list[dict]  # {'path', 'reason', 'detail'}
    seconds: float
    timings: dict[str, float] = field(default_factory=dict)  # seconds: scan, parse, write (during the parse)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class MapChange:
    """What one refresh changed; listeners (the TUI, `workstation watch`) receive it."""

    indexed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    unchanged: int = 0
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)  # seconds: scan, parse, write (during the parse)

    @property
    def empty(self) -> bool:
        return not (self.indexed or self.removed or self.skipped)


@dataclass(frozen=True)
class FileInfo:
    path: str
    language: str | None
    kind: str
    size: int
    line_count: int
    purpose: str
    purpose_source: str
    symbols: int
    has_errors: bool


@dataclass(frozen=True)
class SymbolInfo:
    name: str
    qualname: str
    kind: str
    parent: str | None
    signature: str
    start_line: int
    end_line: int


class KnowledgeMap:
    """The knowledge map of one workspace; see the module docstring."""

    def __init__(self, db: Database, paths: Paths, config: Config):
        self.db = db
        self.paths = paths
        self.config = config
        self.root = paths.root
        self.max_bytes = config.index.max_file_bytes
        self.workers = indexer.default_workers(config.index.workers)
        self.rules = IgnoreRules(paths.root, paths.state, config.index.ignore, user_file=paths.trusted)
        self._lock = threading.RLock()
        self._skip_sigs: dict[str, tuple] = {}  # signatures at which files were found unindexable
        self._known: frozenset[str] | None = None  # indexed paths, for resolving imports (a snapshot:
        # the resolver caches its path index by the object's identity)
        self._listeners: list[Callable[[MapChange], None]] = []
        self._caches: dict[str, tuple[tuple[int, int], object]] = {}  # name -> (fingerprint, value): see cached

    # ------------------------------------------------------------------ what the map holds now
    # These read the database as it is, without the staleness gate: callers that need fresh
    # answers run `ensure_fresh` first, and `indexed_sha` before and after a read tells which
    # content an answer came from.
    def indexed_sha(self, relpath: str) -> str | None:
        """The content hash the map holds for one file (None: not in the map)."""
        return self.db.call(_indexed_sha, self.relpath(relpath))

    def known_paths(self, relpaths: list[str]) -> list[str]:
        """Those of `relpaths` (repo-relative) that the map holds as indexed files, in path order."""
        return self.db.call(_known_paths, list(relpaths)) if relpaths else []

    def symbol_files(self, names: list[str]) -> list[tuple[str, str]]:
        """(name, path) of every symbol defined under one of `names` (exact name or qualified name),
        ordered by name then path."""
        return self.db.call(_symbol_files, list(names)) if names else []

    def model_purposes(self) -> list[tuple[str, str, str]]:
        """(path, sha256, purpose) of every file whose purpose a model wrote, by path."""
        return self.db.call(_model_purposes)

    def set_model_purposes(self, rows: list[tuple[str, str, str]]) -> None:
        """Take model-written purposes ((path, sha256, purpose), as `model_purposes` gives them, from
        another map of the same files): each lands where the file here has that very content."""
        from . import describe  # lazy: describe and query, +11 ms on every `workstation index`

        self.db.call(describe.adopt_purposes, [tuple(r) for r in rows])

    # ------------------------------------------------------------------ listeners
    def add_listener(self, fn: Callable[[MapChange], None]) -> None:
        """Call `fn(MapChange)` after every refresh that changed the map (from any thread)."""
        self._listeners.append(fn)

    def remove_listener(self, fn: Callable[[MapChange], None]) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    # ------------------------------------------------------------------ paths
    def relpath(self, path: str) -> str:
        """A user-given path as a repo-relative '/' path; refuses paths outside the root."""
        if not path or "\x00" in path:
            raise WorkstationError(f"invalid path {path!r}")
        root = str(self.root)
        joined = path if os.path.isabs(path) else os.path.join(root, path)
        norm = os.path.normpath(joined)
        if norm == root:
            return ""
        if not norm.startswith(root + os.sep):
            raise WorkstationError(f"{path} is outside the workspace {root}")
        return norm[len(root) + 1:].replace(os.sep, "/")

    # ------------------------------------------------------------------ indexing
    def index_all(self, progress: indexer.ProgressFn | None = None, force: bool = False) -> IndexReport:
        """Bring the whole map up to date (re-parse everything with `force`) and report."""
        started = time.perf_counter()
        with self._lock:
            done = self._refresh_all(progress, force)
            if force:  # model-written purposes of content that is gone, or that are no description, go
                self.db.call(storage.prune_purposes)
            totals = self.db.call(storage.totals)
            skipped_rows = self.db.call(_skipped_rows)
        return IndexReport(
            files=totals["files"], symbols=totals["symbols"], references=totals["references"],
            indexed=len(done.indexed),
            unchanged=done.unchanged, removed=len(done.removed), skipped=totals["skipped"],
            skipped_files=[{"path": p, "reason": r, "detail": d} for p, r, d in skipped_rows],
            seconds=time.perf_counter() - started, timings=done.timings)

    def ensure_fresh(self, paths: list[str] | None = None) -> MapChange:
        """The staleness gate: re-index whatever changed (everything, or just `paths`)."""
        with self._lock:
            if paths is None:
                return self._refresh_all(None, False)
            return self._refresh_paths([self.relpath(p) for p in paths])

    def reindex_file(self, relpath: str) -> MapChange:
        """Parse one file again now, whatever its signature says."""
        rel = self.relpath(relpath)
        with self._lock:
            return self._refresh_paths([rel], force=True)

    def remove_file(self, relpath: str) -> None:
        """Drop a file from the map with its symbols, references and imports (for a file the
        caller deleted; one still on disk comes back at the next refresh)."""
        rel = self.relpath(relpath)
        with self._lock:
            batch = Batch()
            batch.removed.append(rel)
            self._flush(batch, [])
            if self._known is not None:
                self._known = self._known - {rel}
            self._resolve_again(set(), {rel})
            self._notify(MapChange(removed=[rel]))

    def freshness(self, relpath: str) -> str:
        """'fresh', 'stale' or 'deleted' for one path, without changing anything."""
        rel = self.relpath(relpath)
        files, skipped = self.db.call(storage.index_state, [rel])
        found = indexer.probe(self.root, self.rules, rel, self.max_bytes)
        if found[0] in ("absent", "ignored", "dir"):
            return "deleted"
        if files:
            _, size, mtime, ctime, inode, sha, indexed_at, language, version = files[0]
            if found[0] != "file" or version != parser_version(language):
                return "stale"
            sig = found[2]
            if sig == (size, mtime, ctime, inode) and not is_racy(sig, indexed_at):
                return "fresh"
            return "fresh" if _sha_of(found[1]) == sha else "stale"
        if skipped:
            if found[0] == "skip":
                return "fresh" if skipped[0][1:] == found[1:] else "stale"
            return "fresh" if self._skip_sigs.get(rel) == found[2] else "stale"
        return "stale"  # on disk, not in the map yet

    # ------------------------------------------------------------------ refresh internals
    def _refresh_all(self, progress: indexer.ProgressFn | None, force: bool) -> MapChange:
        started = time.perf_counter()
        self.rules.reload(gitignores=False)  # the walk reads each .gitignore that changed
        found = indexer.scan(self.root, self.rules, self.max_bytes)
        # No database file yet: nothing is indexed or skipped, and every file found is parsed. The
        # database opens at the first write then (~0.2 s of a first index, beside the parse), and the
        # worker processes start now. (A process that creates it meanwhile loses nothing: each write
        # replaces its files' rows whole.)
        first = not self.paths.index_db.exists()
        if not (first or force) and self._agreed(found):
            # nothing changed since a walk that found the map agreeing with the disk: no row to read
            return MapChange(unchanged=len(found.files), timings={"scan": time.perf_counter() - started})
        pool = self._pool_ahead(found) if first or force else None
        try:
            files, skipped = ([], []) if first else self.db.call(storage.index_state)
            indexed = _indexed(files)
            was_skipped = {r[0]: (r[1], r[2]) for r in skipped}
            todo = plan(found, indexed, was_skipped, self._skip_sigs, force=force)
            scanned = time.perf_counter() - started
            change = self._apply(todo, indexed, was_skipped, set(found.files), progress, pool)
        finally:
            if pool is not None:
                pool.close()
        change.timings["scan"] = scanned
        self._note_agreement(found)
        return change

    def _db_files(self) -> tuple[Path, ...]:
        return self.paths.index_db, self.paths.index_db.with_name(self.paths.index_db.name + ".wal")

    def _agreed(self, found: indexer.Scan) -> bool:
        """Whether the last full check noted this very walk, the map unchanged since (freshness.agreement)."""
        digest = agreement(found, self._db_files())
        if digest is None:
            return False
        try:
            return self.paths.index_checked.read_text(encoding="ascii") == digest
        except (OSError, UnicodeDecodeError):
            return False  # none yet, or unreadable: the full check below writes it again

    def _note_agreement(self, found: indexer.Scan) -> None:
        """After a full check (the map now agrees with `found`), note it for the next process's gate."""
        digest = agreement(found, self._db_files())
        if digest is None or not self.paths.state.is_dir():
            return
        try:
            atomic_write(self.paths.index_checked, digest.encode("ascii"), sync_dir=False)
        except OSError:
            pass  # a read-only state folder: every gate compares with the database, as before the note

    def _pool_ahead(self, found: indexer.Scan) -> indexer.Pool | None:
        """The worker processes, started before the plan when every file found is going to be parsed and
        they will be needed: they start and import while this process reads the database and plans."""
        sizes = [sig[0] for _path, sig in found.files.values()]
        if not indexer.wants_pool(len(sizes), sum(sizes), self.workers):
            return None
        return indexer.Pool(self.workers)

    def _refresh_paths(self, rels: list[str], force: bool = False) -> MapChange:
        found = indexer.Scan()
        folders = []
        if any(not rel or posixpath.basename(rel) == ".gitignore" or rel == IGNORE_FILE for rel in rels):
            return self._refresh_all(None, force)  # ignore rules changed: anything may be in or out now
        valid, unnamable = [], set()
        for rel in rels:
            shown = indexer.unencodable(rel)
            if shown is None:
                valid.append(rel)
                continue
            unnamable.add(shown)  # the database cannot hold this name: at most a skip row
            if not self.rules.ignored(rel) and os.path.lexists(self.root / rel):
                found.skipped[shown] = ("invalid_utf8", indexer.BAD_NAME)
        rels = valid
        for rel in rels:
            what = indexer.probe(self.root, self.rules, rel, self.max_bytes)
            if what[0] == "file":
                found.files[rel] = (what[1], what[2])
            elif what[0] == "skip":
                found.skipped[rel] = (what[1], what[2])
            elif what[0] == "dir":
                sub = indexer.scan(self.root, self.rules, self.max_bytes, under=rel)
                found.files.update(sub.files)
                found.skipped.update(sub.skipped)
                folders.append(rel)
            else:
                folders.append(rel)  # gone or ignored: whatever the map holds under it goes too
        scope = set(rels) | unnamable | set(found.files) | set(found.skipped)
        if folders:
            scope.update(self.db.call(storage.paths_under, folders))
        files, skipped = self.db.call(storage.index_state, sorted(scope))
        indexed = _indexed(files)
        was_skipped = {r[0]: (r[1], r[2]) for r in skipped}
        todo = plan(found, indexed, was_skipped, self._skip_sigs, scope=scope, force=force)
        known = self._known_paths() - set(todo.remove) | set(found.files)
        return self._apply(todo, indexed, was_skipped, known, None)

    def _known_paths(self) -> frozenset[str]:
        if self._known is None:
            self._known = frozenset(self.db.call(_all_paths))
        return self._known

    def _apply(self, todo: Plan, before: dict[str, Indexed], was_skipped: dict[str, tuple[str, str]],
               known: AbstractSet[str], progress: indexer.ProgressFn | None, pool: indexer.Pool | None = None) -> MapChange:
        started = time.perf_counter()
        change = MapChange()
        change.removed.extend(todo.remove)
        change.skipped.extend(todo.skip)
        change.unchanged = todo.unchanged
        if todo.empty:
            if self._known != known:
                self._known = frozenset(known)
            return change
        names = [c[0] for c in todo.check]
        tasks = [(i, rel, path, sha) for i, (rel, path, sha, _size) in enumerate(todo.check, start=1)]
        sizes = [c[3] for c in todo.check]
        batch = Batch()
        batch.removed.extend(todo.remove)
        batch.skipped.extend((rel, reason, detail) for rel, (reason, detail) in todo.skip.items())
        for rel in todo.skip:
            self._skip_sigs.pop(rel, None)
        restamps: list[tuple] = []
        total, done = len(tasks), 0
        frozen = frozenset(known)
        spool = tempfile.mkdtemp(prefix="ws-kmap-")  # worker processes write rows here
        writer = BatchWriter(self._flush, names)
        try:
            pending = 0  # results still to come whose rows are in a spooled file of this batch
            for result in indexer.run(tasks, frozen, self.max_bytes, self.workers, sizes, spool, pool):
                if result[0] == indexer.SPOOLED:
                    _, files, size, pending = result
                    batch.add_spooled(files, size)
                    continue
                pending = max(0, pending - 1)
                status = result[0]
                if status == "indexed":
                    _, _fid, row, symbols, refs, deps, _n = result
                    batch.add_indexed(row, symbols, refs, deps)
                    change.indexed.append(row[0])
                    self._skip_sigs.pop(row[0], None)
                elif status == "same":
                    _, _fid, rel, sig, sha, indexed_at = result
                    restamps.append((rel, sha, *sig, indexed_at))
                elif status == "skipped":
                    _, _fid, rel, reason, detail, sig = result
                    if sig is not None:
                        self._skip_sigs[rel] = sig
                    if was_skipped.get(rel) == (reason, detail) and rel not in before:
                        change.unchanged += 1  # skipped again for the same reason: nothing to write
                    else:
                        batch.skipped.append((rel, reason, detail))
                        change.skipped.append(rel)
                else:  # gone between the walk and the read
                    rel = result[2]
                    if rel in before:
                        batch.removed.append(rel)
                        change.removed.append(rel)
                if batch.bytes >= FLUSH_BYTES and not pending:  # never between a file's row and its rows
                    writer.put(batch)
                    batch = Batch()
                done += 1
                if progress is not None:
                    progress(done, total, names[result[1] - 1])
            parsed = time.perf_counter() - started
            writing = writer.finish(batch)
            tail = time.perf_counter() - started - parsed  # the writes left when the last file was parsed
        finally:
            writer.close()  # before the spool goes: the writer may be reading it
            shutil.rmtree(spool, ignore_errors=True)  # our own temp folder; nothing else to do if it fails
        if restamps:
            self.db.call(storage.restamp, restamps)
            change.unchanged += len(restamps)
        gone = {rel for rel in change.removed + change.skipped if rel in before}
        self._known = frozenset(known - gone)
        added = {rel for rel in change.indexed if rel not in before}
        if before:  # a first index resolved every import against the complete file list
            self._resolve_again(added, gone)
        change.seconds = time.perf_counter() - started
        change.timings.update(parse=parsed, write=writing, resolve=change.seconds - parsed - tail)
        if not change.empty:
            self._caches.clear()
            self._notify(change)
        return change

    def _flush(self, batch: Batch, names: list[str]) -> float:
        """Write a batch; returns the seconds it took."""
        if batch.empty:
            return 0.0
        started = time.perf_counter()
        tsv = {table: "".join(parts) for table, parts in batch.tsv.items() if parts}
        spooled = {table: files for table, files in batch.spooled.items() if files}
        self.db.call(storage.write_index, names, batch.files, tsv, batch.skipped, batch.removed, spooled)
        for files in spooled.values():
            for path in files:
                with contextlib.suppress(OSError):  # the spool folder goes at the end anyway
                    os.unlink(path)
        return time.perf_counter() - started

    def _resolve_again(self, added: set[str], gone: set[str]) -> None:
        """Imports that may point elsewhere now that files appeared or disappeared."""
        if not added and not gone:
            return
        from .parse import Import  # lazy: the parser package, +38 ms on a warm `workstation index`, which parses nothing

        hints = set()
        for rel in added:
            stem = posixpath.splitext(posixpath.basename(rel))[0]
            hints.add(stem)
            parent = posixpath.basename(posixpath.dirname(rel))
            if parent:
                hints.add(parent)
        rows = self.db.call(storage.unresolved_deps, sorted(hints), sorted(gone))
        known = self._known_paths()
        updates = []
        for path, language, module, names, line in rows:
            imp = Import(module, tuple(names), line)
            target = indexer.resolve_target(imp, path, language, known)
            updates.append((path, module, line, target))
        self.db.call(storage.set_dep_targets, updates)

    def _notify(self, change: MapChange) -> None:
        for fn in list(self._listeners):
            fn(change)

    # ------------------------------------------------------------------ cache keyed on content
    def cached(self, name: str, build: Callable[[], T]) -> T:
        """A value derived from the whole map, rebuilt when any file's content changed. A name is
        always built by the same kind of `build` (each caller's own name), so a hit is a T."""
        key: tuple[int, int] = self.db.call(_fingerprint)
        hit = self._caches.get(name)
        if hit is not None and hit[0] == key:
            return cast(T, hit[1])
        value = build()
        self._caches[name] = (key, value)
        return value

    # ------------------------------------------------------------------ TUI tree
    def files(self) -> list[FileInfo]:
        """Every indexed file, by path (fresh)."""
        self.ensure_fresh()
        return [FileInfo(*row) for row in self.db.call(_file_infos)]

    def symbols(self, relpath: str) -> list[SymbolInfo]:
        """The symbols of one file in source order (fresh)."""
        rel = self.relpath(relpath)
        self.ensure_fresh([rel])
        return [SymbolInfo(*row) for row in self.db.call(_symbols_of, rel)]

    def skipped(self) -> list[dict]:
        """Files the map leaves out, with the reason (fresh)."""
        self.ensure_fresh()
        return [{"path": p, "reason": r, "detail": d} for p, r, d in self.db.call(_skipped_rows)]

    # ------------------------------------------------------------------ answers
    def file_map(self, relpath: str, tokens: int | None = None) -> FileMap:
        """The knowledge map of one file (see repomap.FileMap)."""
        from . import repomap  # lazy: repomap and tokens, +9 ms on every `workstation index`

        rel = self.relpath(relpath)
        self.ensure_fresh()  # the whole tree: imports and dependants depend on other files too
        return repomap.file_map(self, rel, tokens)

    def repo_map(self, tokens: int = 1024) -> str:
        """A map of the repository ranked by PageRank that never exceeds `tokens`."""
        from . import repomap  # lazy: repomap and tokens, +9 ms on every `workstation index`

        self.ensure_fresh()
        return repomap.repo_map(self, tokens)

    def find(self, query: str, limit: int = 20) -> FindResult:
        """Two-tier search over paths and symbols (see query.FindResult)."""
        from . import query as query_mod  # lazy: query, +8 ms on every `workstation index`

        self.ensure_fresh()
        return query_mod.find(self, query, limit)

    def impact(self, symbol: str) -> list[ImpactHit]:
        """Every call site and reference of `symbol` (see query.ImpactHit)."""
        from . import query as query_mod  # lazy: query, +8 ms on every `workstation index`

        self.ensure_fresh()
        return query_mod.impact(self, symbol)

    def describe_files(self, limit: int = 20, cancel: threading.Event | None = None,
                       progress: Callable[[describe_mod.DescribeReport], None] | None = None
                       ) -> describe_mod.DescribeReport:
        """Ask the configured model for one-line purposes of up to `limit` files that have none, when
        index.describe_with_model allows it (background use; see describe.DescribeReport: files done of
        total, tokens, cost). `progress(report)` after every file."""
        from . import describe  # lazy: describe and query, +11 ms on every `workstation index`

        return describe.describe_files(self, limit, cancel, progress)

    def describe_missing(self, limit: int = 20, cancel: threading.Event | None = None) -> int:
        """`describe_files` answered with how many files got a purpose (the app's older call)."""
        from . import describe  # lazy: describe and query, +11 ms on every `workstation index`

        return describe.describe_missing(self, limit, cancel)


def _indexed(rows: list[tuple]) -> dict[str, Indexed]:
    """index_state's file rows as the planner wants them."""
    return {r[0]: Indexed(tuple(r[1:5]), r[5], r[6], r[8] != parser_version(r[7])) for r in rows}


def _sha_of(path: str) -> str | None:

    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


# ---------------------------------------------------------------------------------------
# Read-only queries run by the database owner

@readonly
def _all_paths(con) -> list[str]:
    return [r[0] for r in con.execute("SELECT path FROM kmap.files").fetchall()]


@readonly
def _indexed_sha(con, path: str) -> str | None:
    row = con.execute("SELECT sha256 FROM kmap.files WHERE path = ?", [path]).fetchone()
    return row[0] if row else None


@readonly
def _known_paths(con, paths: list[str]) -> list[str]:
    return [r[0] for r in con.execute(
        "SELECT path FROM kmap.files WHERE path IN (SELECT unnest($1::VARCHAR[])) ORDER BY path", [paths]).fetchall()]


@readonly
def _symbol_files(con, names: list[str]) -> list[tuple[str, str]]:
    rows = con.execute(
        """SELECT DISTINCT n.name, s.path FROM (SELECT unnest($1::VARCHAR[]) AS name) n
           JOIN kmap.symbols s ON s.name = n.name OR s.qualname = n.name
           ORDER BY n.name, s.path""", [names]).fetchall()
    return [(r[0], r[1]) for r in rows]


@readonly
def _model_purposes(con) -> list[tuple[str, str, str]]:
    return [tuple(r) for r in con.execute(
        "SELECT path, sha256, purpose FROM kmap.files WHERE purpose_source = 'model' ORDER BY path").fetchall()]


@readonly
def _skipped_rows(con) -> list[tuple]:
    return con.execute("SELECT path, reason, detail FROM kmap.skipped ORDER BY path").fetchall()


@readonly
def _fingerprint(con) -> tuple[int, int]:
    return con.execute(
        "SELECT count(*), coalesce(bit_xor(hash(path || sha256)), 0) FROM kmap.files").fetchone()


@readonly
def _file_infos(con) -> list[tuple]:
    return con.execute(
        """SELECT f.path, f.language, f.kind, f.size, f.line_count, f.purpose, f.purpose_source,
                  coalesce(s.n, 0), f.has_errors
           FROM kmap.files f LEFT JOIN (SELECT path, count(*) AS n FROM kmap.symbols GROUP BY path) s
           USING (path) ORDER BY f.path""").fetchall()


@readonly
def _symbols_of(con, path: str) -> list[tuple]:
    return con.execute(
        """SELECT name, qualname, kind, parent, signature, start_line, end_line FROM kmap.symbols
           WHERE path = ? ORDER BY start_line, end_line DESC, qualname""", [path]).fetchall()
