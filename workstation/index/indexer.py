"""Walking the workspace and turning files into knowledge-map rows.

`scan` walks with os.scandir and decides what the walk alone can: ignored
paths (silently left out), files too large (from stat), symlinks that loop or
lead outside the root, folders that cannot be read. `index_file` reads one
file and decides the rest (binary, invalid UTF-8, unreadable), hashes it and
parses it; it runs in worker processes for big batches, so it returns plain
tuples and pre-formatted TSV text (see storage.py) that pickle cheaply.
Nothing here raises for a bad file: every failure is a skip with a reason.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import hashlib
import os
import stat as statmod
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Collection, Iterator

from .. import scrub
from .ignore import IgnoreRules, Sig
from .languages import detect
from .storage import deps_tsv, refs_tsv, symbols_tsv

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.context import ForkServerContext

    from .parse import Import

SKIP_REASONS = ("binary", "too_large", "unreadable", "symlink_loop", "invalid_utf8", "outside_root", "private",
                "secrets")
SECRETS_DETAIL = "an .env-style file: its values are secrets, kept out of the map"
PRIVATE_DETAIL = "symlink into .git or the state folder (config, databases, session logs): never indexed"
BINARY_SNIFF_BYTES = 8192  # git's heuristic: a NUL byte in the first 8 KB means binary

def stat_sig(st: os.stat_result) -> Sig:
    ino = st.st_ino
    if ino >= 1 << 63:  # some filesystems use all 64 bits; BIGINT is signed
        ino -= 1 << 64
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, ino)


@dataclass
class Scan:
    """What the walk found: files to consider and paths skipped by the walk itself."""

    files: dict[str, tuple[str, Sig]] = field(default_factory=dict)  # relpath -> (path to read, sig)
    skipped: dict[str, tuple[str, str]] = field(default_factory=dict)  # relpath -> (reason, detail)


BAD_NAME = "file name is not valid UTF-8"


def unencodable(rel: str) -> str | None:
    """A printable stand-in for a path that is not valid UTF-8 (None if it is valid)."""
    try:
        rel.encode("utf-8")
        return None
    except UnicodeEncodeError:
        return os.fsencode(rel).decode("utf-8", "backslashreplace")


def _inside(real: str, root: str) -> bool:
    return real == root or real.startswith(root + "/")


def _symlink(entry_path: str, rel: str, root: str, chain: tuple[str, ...], rules: IgnoreRules,
             max_bytes: int, out: Scan, stack: list) -> None:
    """Follow one symlink found by the walk: a file is indexed under the link's path,
    a folder is walked unless it leads back into the folders above it."""
    try:
        st = os.stat(entry_path)
    except OSError as err:
        if rules.ignored_here(rel, False):
            return
        if err.errno == errno.ELOOP:
            out.skipped[rel] = ("symlink_loop", "symlink chain loops")
        elif err.errno == errno.ENOENT:
            out.skipped[rel] = ("unreadable", "broken symlink")
        else:
            out.skipped[rel] = ("unreadable", err.strerror or str(err))
        return
    is_dir = statmod.S_ISDIR(st.st_mode)
    if rules.ignored_here(rel, is_dir):
        return
    real = os.path.realpath(entry_path)
    if not _inside(real, root):
        out.skipped[rel] = ("outside_root", f"symlink to {real}")
        return
    if rules.is_private(real):  # what the file tools refuse, the map does not hold either
        out.skipped[rel] = ("private", PRIVATE_DETAIL)
        return
    if is_dir:
        if any(_inside(seen, real) for seen in chain):
            out.skipped[rel] = ("symlink_loop", f"symlink to a folder above it ({os.path.relpath(real, root)})")
        else:
            stack.append((rel, entry_path, chain + (real,)))
    elif statmod.S_ISREG(st.st_mode):
        _add_file(rel, entry_path, st, max_bytes, out)
    else:
        out.skipped[rel] = ("unreadable", "not a regular file")


def _add_file(rel: str, path: str, st: os.stat_result, max_bytes: int, out: Scan) -> None:
    if scrub.is_env_file(rel):
        out.skipped[rel] = ("secrets", SECRETS_DETAIL)
    elif st.st_size > max_bytes:
        out.skipped[rel] = ("too_large", f"{st.st_size} bytes, limit {max_bytes}")
    else:
        out.files[rel] = (path, stat_sig(st))


def scan(root: Path, rules: IgnoreRules, max_bytes: int, under: str = "") -> Scan:
    """Walk `root` (or only its folder `under`), leaving out ignored paths."""
    root_s = str(root)
    out = Scan()
    start = os.path.join(root_s, under) if under else root_s
    stack: list[tuple[str, str, tuple[str, ...]]] = [(under, start, (os.path.realpath(start),))]
    while stack:
        rel_dir, abs_dir, chain = stack.pop()
        try:
            with os.scandir(abs_dir) as entries:
                listing = list(entries)
        except OSError as err:
            if rel_dir and err.errno != errno.ENOENT:
                out.skipped[rel_dir] = ("unreadable", err.strerror or str(err))
            continue
        gitignore = None  # the folder's .gitignore by stat signature: read again only when that changed
        for entry in listing:
            if entry.name == ".gitignore":
                try:
                    gitignore = stat_sig(entry.stat())
                except OSError:
                    pass  # gone or unreadable: as good as absent
        rules.saw_gitignore(rel_dir, gitignore)
        for entry in listing:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if not entry.name.isascii() and (shown := unencodable(rel)):
                if not rules.ignored_here(rel, entry.is_dir(follow_symlinks=False)):
                    out.skipped[shown] = ("invalid_utf8", BAD_NAME)
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    if not rules.ignored_here(rel, True):
                        stack.append((rel, entry.path, chain + (chain[-1] + "/" + entry.name,)))
                elif entry.is_file(follow_symlinks=False):
                    if not rules.ignored_here(rel, False):
                        _add_file(rel, entry.path, entry.stat(follow_symlinks=False), max_bytes, out)
                elif entry.is_symlink():
                    _symlink(entry.path, rel, root_s, chain, rules, max_bytes, out, stack)
                elif not rules.ignored_here(rel, False):
                    out.skipped[rel] = ("unreadable", "not a regular file")
            except OSError as err:  # vanished or unreadable between listing and stat
                if err.errno != errno.ENOENT and not rules.ignored_here(rel, False):
                    out.skipped[rel] = ("unreadable", err.strerror or str(err))
    return out


def probe(root: Path, rules: IgnoreRules, rel: str, max_bytes: int) -> tuple:
    """What is at one path now, decided as `scan` would.

    Returns ('file', read_path, sig), ('skip', reason, detail), ('dir',),
    ('ignored',) or ('absent',).
    """
    if rules.ignored(rel):
        return ("ignored",)
    path = os.path.join(str(root), rel)
    try:
        lst = os.lstat(path)
    except OSError as err:
        if err.errno in (errno.ENOENT, errno.ENOTDIR):
            return ("absent",)
        return ("skip", "unreadable", err.strerror or str(err))
    parent = os.path.dirname(path)
    real_parent = os.path.realpath(parent)
    if not _inside(real_parent, str(root)):
        return ("ignored",)  # below a symlink that leads out: the link itself is the skipped path
    if statmod.S_ISLNK(lst.st_mode):
        out = Scan()
        stack: list = []
        chain = tuple(_ancestors(real_parent, str(root)))
        _symlink(path, rel, str(root), chain, rules, max_bytes, out, stack)
        if stack:
            return ("dir",)
        if rel in out.files:
            return ("file",) + out.files[rel]
        if rel in out.skipped:
            return ("skip",) + out.skipped[rel]
        return ("ignored",)
    if statmod.S_ISDIR(lst.st_mode):
        return ("ignored",) if rules.ignored(rel, True) else ("dir",)
    if not statmod.S_ISREG(lst.st_mode):
        return ("skip", "unreadable", "not a regular file")
    if lst.st_size > max_bytes:
        return ("skip", "too_large", f"{lst.st_size} bytes, limit {max_bytes}")
    return ("file", path, stat_sig(lst))


def _ancestors(real: str, root: str) -> Iterator[str]:
    while True:
        yield real
        if real == root or not _inside(real, root):
            return
        real = os.path.dirname(real)


# ---------------------------------------------------------------------------------------
# Reading and parsing one file (runs in worker processes)

_worker_known: frozenset[str] = frozenset()
_worker_max_bytes = 0
_worker_spool: str | None = None
_worker_chunks = 0


def _init_worker(known: frozenset[str], max_bytes: int, spool: str | None = None) -> None:
    global _worker_known, _worker_max_bytes, _worker_spool
    _worker_known, _worker_max_bytes, _worker_spool = known, max_bytes, spool


def text_purpose(text: str) -> str:
    """Purpose of a file the parser does not understand: its first meaningful line."""
    for raw in text.splitlines()[:50]:
        line = raw.strip().lstrip("#=*-/;!> ").strip()
        if len(line) >= 3 and any(ch.isalpha() for ch in line):
            return line[:200]
    return ""


def resolve_target(imp: Import, importer: str, language: str | None, known: Collection[str]) -> str | None:
    """Where an import points inside the repository, if anywhere (never raises)."""
    if language is None:
        return None
    from .parse import resolve_import  # lazy: the parser package, +38 ms on a warm `workstation index`, which parses nothing

    try:
        return resolve_import(imp, importer, language, known)
    except Exception:  # a resolver bug must not lose the file's other rows
        return None


def index_file(fid: int, rel: str, path: str, expected_sha: str | None, *,
               known: Collection[str], max_bytes: int, parse: bool = True) -> tuple:
    """Read, check, hash and parse one file (`parse=False`: record it without symbols).

    Returns one of
      ('indexed', fid, file_row, symbols_tsv, refs_tsv, deps_tsv, n_symbols)
      ('same', fid, rel, sig, sha256, indexed_at_ns)   content hash equals expected_sha
      ('skipped', fid, rel, reason, detail, sig)
      ('gone', fid, rel)
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO must not block us
    except OSError as err:
        if err.errno in (errno.ENOENT, errno.ENOTDIR):
            return ("gone", fid, rel)
        if err.errno == errno.ELOOP:
            return ("skipped", fid, rel, "symlink_loop", "symlink chain loops", None)
        return ("skipped", fid, rel, "unreadable", err.strerror or str(err), None)
    try:
        st = os.fstat(fd)
        sig = stat_sig(st)
        if not statmod.S_ISREG(st.st_mode):
            return ("skipped", fid, rel, "unreadable", "not a regular file", sig)
        if st.st_nlink > 1:  # another of its names may be outside the workspace: the file tools refuse it too
            return ("skipped", fid, rel, "hard_link", f"{st.st_nlink} names (hard links)", sig)
        if st.st_size > max_bytes:
            return ("skipped", fid, rel, "too_large", f"{st.st_size} bytes, limit {max_bytes}", sig)
        indexed_at = time.time_ns()  # taken before reading: a later write shows up as racy
        head = os.read(fd, BINARY_SNIFF_BYTES)
        nul = head.find(b"\x00")
        if nul >= 0:  # decided without reading the rest (images, archives...)
            return ("skipped", fid, rel, "binary", f"NUL byte at offset {nul}", sig)
        chunks = [head]
        remaining = max_bytes + 1 - len(head)
        while remaining > 0 and head:
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        data = b"".join(chunks)
    except OSError as err:
        return ("skipped", fid, rel, "unreadable", err.strerror or str(err), None)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        return ("skipped", fid, rel, "too_large", f"over {max_bytes} bytes", sig)
    sha = hashlib.sha256(data).hexdigest()
    if sha == expected_sha:
        return ("same", fid, rel, sig, sha, indexed_at)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        return ("skipped", fid, rel, "invalid_utf8", f"invalid UTF-8 at byte {err.start}", sig)

    from . import parse as parser  # lazy: the parser package, +38 ms on a warm `workstation index`, which parses nothing

    language, kind = detect(rel)
    if parse:
        result = parser.parse_rows(rel, data, language)  # never raises; a syntax error yields what parses
    else:
        result = parser.ParseResult(language, "", [], [], [], parser.line_count(data), True)
    language = result.language if language is not None else None
    purpose = result.purpose or ("" if language else text_purpose(text))
    symbols = result.symbols
    # A key written in the file (a settings module) stays in the file, not in the map on disk. Of a
    # file's text only its purpose and signatures reach the map as written, so the prefilter reads
    # those alone (a few % of the text), joined by newlines, which every detector's anchors (^, $, \b,
    # \s) take as a boundary: when no line of `exposed` matches, no field can, and mask changes none.
    # A value given to a secret-looking name (`API_KEY = "…"`) is masked too, whatever its format.
    exposed = "\n".join([purpose, *[s.signature for s in symbols]])
    if scrub.may_hold_key(exposed) or any(value in text or value in exposed for value in scrub.known()) \
            or scrub.assigns_secret(exposed):
        purpose = scrub.mask_assigned(purpose)
        symbols = [replace(s, signature=scrub.mask_assigned(s.signature)) for s in symbols]
    deps = [(imp, resolve_target(imp, rel, language, known)) for imp in result.imports]
    key = str(fid)
    row = (rel, language, kind, sig[0], sig[1], sig[2], sig[3], sha, result.line_count,
           purpose, "source", bool(result.has_errors), indexed_at, parser.parser_version(language))
    return ("indexed", fid, row, symbols_tsv(key, symbols), refs_tsv(key, result.references),
            deps_tsv(key, deps), len(symbols))


# ---------------------------------------------------------------------------------------
# Many files: a process pool for big batches, this process for small ones

POOL_MIN_FILES = 48
POOL_MIN_BYTES = 4 << 20
IN_FLIGHT = 2  # chunks sent ahead per worker: it never idles while the caller writes a batch


TSV_TABLES = ("symbols", "refs", "deps")
SPOOLED = "spooled"  # run() yields (SPOOLED, {table: file}, bytes, n): rows of the n results that follow


def _work_chunk(tasks: list[tuple]) -> tuple[list[tuple], dict[str, str], int]:
    """Index a chunk; with a spool folder, its rows go to files there rather than back through
    the pipe (most of a cold index's bytes: the database owner reads them straight from disk)."""
    global _worker_chunks
    results = [index_file(*task, known=_worker_known, max_bytes=_worker_max_bytes) for task in tasks]
    if _worker_spool is None:
        return results, {}, 0
    texts: dict[str, list[str]] = {table: [] for table in TSV_TABLES}
    for result in results:
        if result[0] == "indexed":
            for table, text in zip(TSV_TABLES, result[3:6]):
                if text:
                    texts[table].append(text)
    _worker_chunks += 1
    files: dict[str, str] = {}
    written = 0
    try:
        for table, parts in texts.items():
            if parts:
                path = os.path.join(_worker_spool, f"{os.getpid()}-{_worker_chunks}-{table}.tsv")
                with open(path, "w", encoding="utf-8") as fh:
                    written += fh.write("".join(parts))
                files[table] = path
    except OSError:  # a full disk, say: send the rows through the pipe after all
        for path in files.values():
            with contextlib.suppress(OSError):
                os.unlink(path)
        return results, {}, 0
    results = [r[:3] + ("", "", "") + r[6:] if r[0] == "indexed" else r for r in results]
    return results, files, written


def _serve(conn: Connection) -> None:
    """A worker process: take the run's setup (see `Pool`), then index the chunks it is sent until it is
    sent None."""
    # A parse allocates millions of short-lived objects and no cycles (a tree's nodes go when their
    # file's walk ends): the collector runs ~20x less often, and after the first chunk no longer scans
    # the modules that chunk imported (2% of a cold index's CPU).
    gc.set_threshold(20_000, 50, 100)
    from . import parse  # noqa: F401  # lazy: a worker parses, so now, while its caller still walks and plans

    try:
        setup = conn.recv()
    except (EOFError, OSError):
        return
    if setup is None:  # the pool was not needed after all
        return
    known, max_bytes, spool, prefilter, secrets = setup
    scrub.use_prefilter(prefilter)  # rather than import the detectors to build it (~0.1 s a worker)
    for value in secrets:  # values the caller holds as secrets (registered, not only in the environment)
        scrub.register(value)
    _init_worker(known, max_bytes, spool)
    frozen = False
    while True:
        try:
            chunk = conn.recv()
        except (EOFError, OSError):
            return
        if chunk is None:
            return
        conn.send(_work_chunk(chunk))
        if not frozen:
            gc.freeze()
            frozen = True


class _Worker:
    def __init__(self, ctx: ForkServerContext):
        self.conn, child = ctx.Pipe()
        # nothing big in the arguments: the parent writes them before start() returns, and stays blocked
        # while they fill the pipe until the child reads them (the setup travels later, see Pool)
        self.proc = ctx.Process(target=_serve, args=(child,), daemon=True, name="ws-kmap-worker")
        self.proc.start()
        child.close()
        self.inflight: deque[list[tuple]] = deque()  # sent, answered in this order

    def send(self, message: object) -> None:  # anything picklable: a setup, a chunk, None (stop)
        try:
            self.conn.send(message)
        except OSError:
            pass  # it died: its sentinel fires and its chunks are retried

    def give(self, chunk: list[tuple]) -> None:
        self.inflight.append(chunk)
        self.send(chunk)

    def stop(self) -> None:
        self.send(None)
        self.join()

    def join(self) -> None:
        self.proc.join(timeout=2)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.conn.close()


class Pool:
    """The worker processes of one `run`, which may be started before the work is known (a first index
    starts them right after its walk: their start and imports, ~0.1 s each, run while it plans). Each is
    sent the run's setup (the paths known, the limits, the spool folder, the secret prefilter and values)
    when the run begins; `close()` stops them, used or not."""

    def __init__(self, workers: int):
        import multiprocessing  # lazy: multiprocessing, +9 ms on refreshes that start no pool (most)

        # No forkserver preload: Python 3.11's forkserver imports preloads before it applies our
        # sys.path, so a `workstation` folder in the current directory would shadow this package.
        self.ctx = multiprocessing.get_context("forkserver")
        _start_fork_server()
        self.workers = [_Worker(self.ctx) for _ in range(max(1, workers))]
        # the prefilter the setup hands over imports the detectors (~0.1 s): beside the workers' start
        self._prefilter = threading.Thread(target=scrub.prefilter_source, name="ws-kmap-prefilter", daemon=True)
        self._prefilter.start()

    def setup(self, known: frozenset[str], max_bytes: int, spool: str | None) -> tuple:
        """What every worker of this pool is sent first (see _serve)."""
        self._prefilter.join()
        return (known, max_bytes, spool, scrub.prefilter_source(), scrub.known())

    def replace(self, n: int, setup: tuple) -> _Worker:
        """A new worker in place of worker `n` (which died), sent `setup`."""
        self.workers[n].stop()
        worker = self.workers[n] = _Worker(self.ctx)
        worker.send(setup)
        return worker

    def close(self) -> None:
        for worker in self.workers:  # all told first: they exit side by side
            worker.send(None)
        for worker in self.workers:
            worker.join()


def wants_pool(files: int, size: int, workers: int) -> bool:
    """Whether `run` gives `files` files of `size` bytes in all to worker processes."""
    return workers > 1 and (files >= POOL_MIN_FILES or size >= POOL_MIN_BYTES)


def run(tasks: list[tuple], known: frozenset[str], max_bytes: int, workers: int,
        sizes: list[int] | None = None, spool: str | None = None, pool: Pool | None = None) -> Iterator[tuple]:
    """Index `tasks` ((fid, rel, path, expected_sha) each), yielding results as they finish.

    Big batches go to `workers` processes (forkserver: they never inherit this
    process's threads, DuckDB's or the database owner's), fed chunk by chunk;
    to those of `pool` if one is given (the caller closes it; one run a pool).
    With a `spool` folder the workers write their chunks' rows to files there:
    the results of such a chunk come after a (SPOOLED, {table: file}, bytes, n)
    item (n: how many results follow) and carry no rows themselves. The
    caller owns the files, and must write a chunk's files with all n results.
    A worker killed mid-chunk (a parser crash) is replaced and its chunk is
    retried in halves until the file responsible is alone; that file is
    indexed without symbols. As with any multiprocessing code, a script that
    calls this must guard its entry point with `if __name__ == "__main__":`.
    """
    total_bytes = sum(sizes) if sizes else 0
    if not wants_pool(len(tasks), total_bytes, workers):
        for task in tasks:
            yield index_file(*task, known=known, max_bytes=max_bytes)
        return
    from multiprocessing.connection import wait  # lazy: multiprocessing, +9 ms on refreshes that start no pool

    if sizes:  # biggest first so no worker is left with a huge file at the end
        order = sorted(range(len(tasks)), key=sizes.__getitem__, reverse=True)
        tasks = [tasks[i] for i in order]
    size = max(1, min(16, len(tasks) // (workers * 16)))
    queue = deque(tasks[i:i + size] for i in range(0, len(tasks), size))
    own = pool is None
    if pool is None:
        pool = Pool(min(workers, len(queue)))
    setup = pool.setup(known, max_bytes, spool)
    live = pool.workers  # pool.replace swaps a dead worker for a new one in this list

    def feed(worker: _Worker) -> None:
        while queue and len(worker.inflight) < IN_FLIGHT:
            worker.give(queue.popleft())

    try:
        for worker in live:
            worker.send(setup)
            feed(worker)
        while True:
            busy = [w for w in live if w.inflight]
            if not busy:
                break
            ready = set(wait([w.conn for w in busy] + [w.proc.sentinel for w in busy]))
            for n, worker in enumerate(live):
                if not worker.inflight or not ({worker.conn, worker.proc.sentinel} & ready):
                    continue
                try:
                    results = worker.conn.recv() if worker.conn.poll() else None
                except (EOFError, OSError):
                    results = None
                if results is not None:
                    worker.inflight.popleft()
                    feed(worker)  # before yielding: the caller may write for a while
                    results, files, written = results
                    if files:
                        yield (SPOOLED, files, written, len(results))
                    yield from results
                    continue
                # The worker died in its oldest chunk; the ones behind it were not started.
                lost = worker.inflight.popleft()
                queue.extendleft(reversed(worker.inflight))
                worker.inflight.clear()
                if len(lost) == 1:  # this file alone kills the parser: keep it, without symbols
                    yield index_file(*lost[0], known=known, max_bytes=max_bytes, parse=False)
                else:
                    half = len(lost) // 2
                    queue.extendleft([lost[half:], lost[:half]])
                feed(pool.replace(n, setup))
    finally:
        if own:
            pool.close()


_helpers_lock = threading.Lock()


def _start_fork_server() -> None:
    """Start multiprocessing's fork server (and its resource tracker) with a real stderr.

    Inside the TUI, sys.stderr is Textual's capture, whose fileno() is -1: the resource
    tracker hands that number to its child and fails with "bad value(s) in fds_to_keep".
    """
    from multiprocessing import forkserver  # lazy: multiprocessing, +9 ms (see run)

    with _helpers_lock:
        try:
            usable = sys.stderr is not None and sys.stderr.fileno() >= 0
        except (AttributeError, OSError, ValueError):
            usable = False
        if usable:
            forkserver.ensure_running()
            return
        captured = sys.stderr
        with open(os.devnull, "w") as devnull:
            # process-wide for a moment: a print from another thread meanwhile is lost, not misplaced
            sys.stderr = devnull
            try:
                forkserver.ensure_running()
            finally:
                sys.stderr = captured


ProgressFn = Callable[[int, int, str], None]


def default_workers(configured: int) -> int:
    """Worker processes for cold indexing: the configured number, else one per usable core."""
    if configured > 0:
        return configured
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)
