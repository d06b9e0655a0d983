"""Archiving: a durable summary plus the gzip-compressed raw log, moved out of the live folder.

An archived session is two files in sessions/archive/: `<slug>.jsonl.gz` (the
raw log, byte for byte) and `<slug>.meta.json` (listing facts and the newest
summary, so listing needs no decompression). Each step is atomic and the
order is chosen so that an interrupted archive or restore never loses a
turn, and `recover` can tell which way to finish:

    archive: write .gz -> write .meta.json -> unlink the live log
    restore: unlink .meta.json -> write the live log -> unlink .gz

Both run under the session's claim, and archive holds the append lock from
copying to unlinking, so no append can slip in between.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..fsutil import atomic_write, fsync_dir, open_state
from ..paths import Paths
from .log import (CLAIM_WAIT_S, SUFFIX, Claim, LogView, Session, SessionError, fields_problem,
                  check_slug, now_iso, parse_lines)
from .logview import changed_files
from .records import User
from .turns import of_log

if TYPE_CHECKING:
    from ..config import Config
    from ..memory.episodic import Episodic
    from .compaction import CompactResult

GZ_SUFFIX = SUFFIX + ".gz"
META_FORMAT = 2
META_SUFFIX = ".meta.json"
# what listing reads from a .meta.json (meta_for writes it)
_META_FIELDS = ({"turns": int, "covered_turns": int, "size": int, "last_activity": str, "title": str,
                 "problems": list, "changed": list, "partial": bool, "format": int}, ("turns", "covered_turns", "size"))


class UnreadableArchive(SessionError):
    """An archive file that cannot be read (truncated, corrupt, unreadable); it is left as it is."""


def no_warning(line: str) -> None:
    """The default `warn`: callers that have nowhere to show a warning."""


@dataclass
class ArchiveResult:
    slug: str
    path: Path
    compaction: CompactResult | None  # None: the log was already fully summarized (or empty)
    summarized: bool  # the archive holds a summary covering every turn


def gz_path(paths: Paths, slug: str) -> Path:
    return paths.archive / f"{slug}{GZ_SUFFIX}"


def meta_path(paths: Paths, slug: str) -> Path:
    return paths.archive / f"{slug}{META_SUFFIX}"


def archived_slugs(paths: Paths) -> list[str]:
    try:
        names = os.listdir(paths.archive)
    except FileNotFoundError:
        return []
    return sorted(n[: -len(META_SUFFIX)] for n in names if n.endswith(META_SUFFIX) and not n.startswith("."))


def read_meta(paths: Paths, slug: str) -> dict:
    path = meta_path(paths, slug)
    try:
        meta = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise SessionError(f"no archived session named {slug}") from None
    except OSError as err:
        raise UnreadableArchive(f"archive metadata {path} is unreadable: {err.strerror}") from None
    except ValueError as err:
        raise UnreadableArchive(f"archive metadata {path} is unreadable: not valid JSON ({err})") from None
    except RecursionError:
        raise UnreadableArchive(f"archive metadata {path} is unreadable: JSON nested too deeply") from None
    if not isinstance(meta, dict):
        raise UnreadableArchive(f"archive metadata {path} is unreadable: not a JSON object")
    # a null is as good as absent (an empty session has no last activity)
    problem = fields_problem({k: v for k, v in meta.items() if v is not None}, *_META_FIELDS, where="")
    if problem:
        raise UnreadableArchive(f"archive metadata {path} is unreadable: {problem}")
    if meta.get("format", 1) < META_FORMAT:  # counted records as turns: count again from the log itself
        turns, covered = of_log(read_archived(paths, slug))
        meta.update(turns=turns.count, covered_turns=covered.last_turn, partial=covered.partial)
    return meta


def read_archived(paths: Paths, slug: str) -> LogView:
    try:
        return parse_lines(gunzip(gz_path(paths, check_slug(slug))))
    except FileNotFoundError:
        raise SessionError(f"no archived session named {slug}") from None


def meta_for(slug: str, view: LogView, size: int) -> dict:
    """Format 2: `turns` and `covered_turns` count turns as sessions.turns defines them (format 1 counted
    every user, assistant, tool and system record; read_meta recounts those from the log)."""
    compact = view.last_compact()
    turns, covered = of_log(view)
    first_user = next((t.content for t in view.turns if isinstance(t, User)), "")
    return {"format": META_FORMAT, "slug": slug, "archived_at": now_iso(), "turns": turns.count,
            "records": len(view.records), "covered_turns": covered.last_turn, "partial": covered.partial,
            "size": size,
            "last_activity": view.last_activity, "title": " ".join(first_user.split())[:80],
            "problems": [str(p) for p in view.problems], "compact": compact.as_dict() if compact else None,
            "changed": changed_files(view.records)}


def archive(paths: Paths, slug: str, config: Config, *, episodic: Episodic | None = None) -> ArchiveResult:
    """Summarize the whole session (if a compact model answers), then move it to the archive."""
    from .compaction import compact_now  # lazy: compaction and the model layer, ~15 ms of every search and listing

    session = Session.open(paths, slug)
    result = compact_now(session, config, episodic, keep=0)
    if result.status == "busy":
        raise _busy(slug)
    with Claim(paths, slug, wait=CLAIM_WAIT_S) as claimed:
        if not claimed:
            raise _busy(slug)
        paths.archive.mkdir(parents=True, exist_ok=True)
        with session.locked() as fd:
            size = os.fstat(fd).st_size
            data = os.pread(fd, size, 0) if size else b""
            view = parse_lines(data)
            _atomic_gzip(gz_path(paths, slug), data)
            meta = meta_for(slug, view, size)
            atomic_write(meta_path(paths, slug), json.dumps(meta, ensure_ascii=False, indent=1).encode(), mode=0o600)
            os.unlink(session.path)
            fsync_dir(paths.sessions)
    compaction = None if result.status == "nothing" else result
    return ArchiveResult(slug, gz_path(paths, slug), compaction, meta["covered_turns"] == meta["turns"]
                         and not meta["partial"])


def _busy(slug: str) -> SessionError:
    return SessionError(f"session {slug} is busy (another process is compacting or archiving it)")


def restore(paths: Paths, slug: str) -> Session:
    check_slug(slug)
    with Claim(paths, slug, wait=CLAIM_WAIT_S) as claimed:
        if not claimed:
            raise _busy(slug)
        live = paths.sessions / f"{slug}{SUFFIX}"
        if live.exists():
            raise SessionError(f"a live session named {slug} already exists")
        if not gz_path(paths, slug).exists():
            raise SessionError(f"no archived session named {slug}")
        try:
            data = gunzip(gz_path(paths, slug))
        except UnreadableArchive as err:
            raise UnreadableArchive(f"cannot restore {slug}: {err}") from None
        _unlink(meta_path(paths, slug))  # from here on recover() finishes the restore
        fsync_dir(paths.archive)
        atomic_write(live, data, mode=0o600)
        _unlink(gz_path(paths, slug))
        fsync_dir(paths.archive)
    return Session.open(paths, slug)


def recover(paths: Paths, slug: str | None = None, *, warn: Callable[[str], None] = no_warning) -> list[str]:
    """Finish or undo archives and restores cut short by a crash; returns what was done.

    Sessions whose claim is held by a running process are left alone, and so is
    a session whose archive cannot be read: `warn` gets one line naming the file.
    """
    slugs = [slug] if slug else _interrupted(paths)
    notes = []
    for name in slugs:
        with Claim(paths, name) as claimed:
            if not claimed:
                continue
            try:
                # the temp files of one session are swept by the pass over all (slug None), which lists the
                # folders once: a listing per session looked at made every pass and search quadratic
                note = _recover_one(paths, name, temps=slug is None)
            except UnreadableArchive as err:
                warn(f"skipped {name}, left as it is: {err}")
                continue
            if note:
                notes.append(f"{name}: {note}")
    return notes


def _interrupted(paths: Paths) -> list[str]:
    """The slugs whose files show a move cut short (the states _recover_one acts on, or temp files
    left behind): only these are claimed and looked at, so a pass over thousands of sessions costs
    two folder listings, not a claim and two listings per session."""
    live: set[str] = set()
    gz: set[str] = set()
    meta: set[str] = set()
    temps: set[str] = set()
    for archived, folder in ((False, paths.sessions), (True, paths.archive)):  # a Path per name costs 0.1 s a pass
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            continue
        for name in names:
            if name.startswith("."):
                if name.endswith(".tmp"):
                    temps.add(name[1:].split(".", 1)[0])  # .<slug>.jsonl.<random>.tmp: slugs have no dots
            elif not archived and name.endswith(SUFFIX):
                live.add(name[: -len(SUFFIX)])
            elif archived and name.endswith(GZ_SUFFIX):
                gz.add(name[: -len(GZ_SUFFIX)])
            elif archived and name.endswith(META_SUFFIX):
                meta.add(name[: -len(META_SUFFIX)])
    found = (live & gz) | (gz - meta - live) | (meta - gz) | temps
    valid = []
    for name in sorted(found):
        try:
            valid.append(check_slug(name))
        except SessionError:
            continue  # not ours: a file someone else put there
    return valid


def _all_slugs(paths: Paths) -> list[str]:
    found = set()
    for folder, suffixes in ((paths.sessions, (SUFFIX,)), (paths.archive, (GZ_SUFFIX, META_SUFFIX))):
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            continue
        for name in names:
            for suffix in suffixes:
                if name.endswith(suffix) and not name.startswith("."):
                    found.add(name[: -len(suffix)])
    valid = []
    for name in sorted(found):
        try:
            valid.append(check_slug(name))
        except SessionError:
            continue  # not ours: a file someone else put there
    return valid


def _recover_one(paths: Paths, slug: str, *, temps: bool = True) -> str | None:
    live = paths.sessions / f"{slug}{SUFFIX}"
    gz, meta = gz_path(paths, slug), meta_path(paths, slug)
    if temps:
        _remove_temps(paths, slug)
    has_live, has_gz, has_meta = live.exists(), gz.exists(), meta.exists()
    if has_live and has_gz:
        if has_meta and gunzip(gz) == live.read_bytes():
            _unlink(live)
            fsync_dir(paths.sessions)
            return "finished an interrupted archive"
        # the live log holds every turn: an archive cut short, or a restore past its write
        _unlink(meta)
        _unlink(gz)
        fsync_dir(paths.archive)
        return "kept the live log, dropped an unfinished archive copy"
    if has_gz and not has_meta and not has_live:
        atomic_write(live, gunzip(gz), mode=0o600)
        _unlink(gz)
        fsync_dir(paths.archive)
        return "finished an interrupted restore"
    if has_meta and not has_gz:
        _unlink(meta)
        fsync_dir(paths.archive)
        return "removed archive metadata without its log"
    return None


def _remove_temps(paths: Paths, slug: str) -> None:
    """Temp files of atomic writes a killed process left behind (we hold the claim: none is live)."""
    prefixes: dict[Path, str | tuple[str, ...]] = {paths.sessions: f".{slug}{SUFFIX}.",
                paths.archive: (f".{slug}{GZ_SUFFIX}.", f".{slug}{META_SUFFIX}.")}
    for folder, prefix in prefixes.items():
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            continue
        for name in names:
            if name.startswith(prefix) and name.endswith(".tmp"):
                _unlink(folder / name)


def _atomic_gzip(path: Path, data: bytes) -> None:
    """Compress straight into a temp file beside `path`, then rename it into place."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            with gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as gz:
                for start in range(0, len(data), 1 << 20):
                    gz.write(data[start:start + (1 << 20)])
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        _unlink(Path(tmp))
        raise
    fsync_dir(path.parent)


# A session log compresses 5-20x; a gzip bomb 1000x. Past a floor, a log may expand to at most
# this many times its archive and never past the cap, so a hostile archive costs bounded memory.
MAX_RATIO = 200
RATIO_FLOOR = 64 << 20
MAX_LOG_BYTES = 2 << 30


def expansion_limit(compressed: int) -> int:
    return min(MAX_LOG_BYTES, max(RATIO_FLOOR, compressed * MAX_RATIO))


def gunzip(path: Path) -> bytes:
    """The archived log; FileNotFoundError when it is gone, UnreadableArchive when it cannot be read
    or would expand past `expansion_limit` of its size."""
    try:
        with os.fdopen(open_state(path, os.O_RDONLY), "rb") as raw, gzip.GzipFile(fileobj=raw, mode="rb") as fh:
            limit = expansion_limit(os.fstat(raw.fileno()).st_size)
            chunks, total = [], 0
            while chunk := fh.read(1 << 20):
                total += len(chunk)
                if total > limit:
                    raise UnreadableArchive(
                        f"archive {path} is unreadable: it expands past {limit >> 20} MiB "
                        f"({MAX_RATIO}x its size), not a session log"
                    )
                chunks.append(chunk)
            return b"".join(chunks)
    except FileNotFoundError:
        raise
    except (OSError, EOFError, zlib.error) as err:  # not gzip: OSError; truncated: EOFError; corrupt: zlib
        cause = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise UnreadableArchive(f"archive {path} is unreadable: {cause}") from None


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
