"""The staleness gate: decide which indexed files can no longer be trusted.

As git's index does, a file is compared by its stat signature first (size,
mtime_ns, ctime_ns, inode) and only a file whose signature changed is read and
hashed; a changed hash means re-parse, an equal one only a new signature.

Racy clean: a write landing in the same timestamp tick as (or just after) our
read leaves the signature unchanged while the content differs. Kernel file
times are coarse (a clock tick, a whole second on some filesystems), so a file
whose mtime is within RACY_WINDOW_NS of when it was indexed is hashed on every
check until it is old enough to trust its signature again.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from .ignore import Sig
from .indexer import Scan
from .versions import PARSER_VERSIONS

RACY_WINDOW_NS = 2_000_000_000  # covers 1-2 s timestamp granularity (FAT, HFS+, some NFS)


def is_racy(sig: Sig, indexed_at_ns: int) -> bool:
    return sig[1] >= indexed_at_ns - RACY_WINDOW_NS or sig[2] >= indexed_at_ns - RACY_WINDOW_NS


@dataclass
class Indexed:
    """What the database holds about one file, for comparison with the disk."""

    sig: Sig
    sha256: str
    indexed_at_ns: int
    outdated: bool = False  # parsed by an older version of the parser: parse it again


@dataclass
class Plan:
    """What must happen to make the map agree with the disk."""

    check: list[tuple[str, str, str | None, int]] = field(default_factory=list)  # (rel, path, expected sha, size)
    skip: dict[str, tuple[str, str]] = field(default_factory=dict)  # new or changed walk-level skips
    remove: list[str] = field(default_factory=list)  # gone from disk (or now ignored)
    unchanged: int = 0

    @property
    def empty(self) -> bool:
        return not (self.check or self.skip or self.remove)


def plan(scan: Scan, indexed: dict[str, Indexed], skipped: dict[str, tuple[str, str]],
         skip_sigs: dict[str, Sig], scope: set[str] | None = None, force: bool = False) -> Plan:
    """Compare a scan with the database.

    `indexed` and `skipped` are the database's rows (limited to `scope` when the
    scan covered only part of the tree); `skip_sigs` remembers the signatures at
    which files were found unreadable, binary or invalid UTF-8, so an unchanged
    skipped file is not read again. `force` re-parses everything, an outdated parser
    version the files it concerns.
    """
    out = Plan()
    for rel, (path, sig) in scan.files.items():
        known = indexed.get(rel)
        if known is not None:
            again = force or known.outdated
            if not again and known.sig == sig and not is_racy(sig, known.indexed_at_ns):
                out.unchanged += 1
            else:
                out.check.append((rel, path, None if again else known.sha256, sig[0]))
        elif rel in skipped and skip_sigs.get(rel) == sig and not force:
            out.unchanged += 1
        else:
            out.check.append((rel, path, None, sig[0]))
    for rel, decision in scan.skipped.items():
        if skipped.get(rel) != decision or rel in indexed:
            out.skip[rel] = decision
    present = scan.files.keys() | scan.skipped.keys()
    for rel in indexed.keys() | skipped.keys():
        if rel not in present and (scope is None or rel in scope):
            out.remove.append(rel)
    out.remove.sort()
    return out


def agreement(scan: Scan, db_files: tuple[Path, ...]) -> str | None:
    """A digest of a walk that found the map and the disk agreeing, with the signatures of the database's
    files (any write to the map changes them, a new database its inode) and the parser versions: a later walk
    with the same digest needs no comparison with the database (a fresh process's gate skips reading every
    row). None when some file is recent enough to be racy: its signature may not show a write to come."""
    recent = time.time_ns() - RACY_WINDOW_NS
    digest = hashlib.blake2b(repr(sorted(PARSER_VERSIONS.items(), key=repr)).encode(), digest_size=20)
    for rel, (path, sig) in sorted(scan.files.items()):
        if sig[1] >= recent or sig[2] >= recent:
            return None
        digest.update(f"{rel}\0{path}\0{sig}\n".encode("utf-8", "surrogatepass"))
    digest.update(repr(sorted(scan.skipped.items())).encode("utf-8", "surrogatepass"))
    for db_file in db_files:
        try:
            st = os.stat(db_file)
        except FileNotFoundError:
            digest.update(b"absent\n")
            continue
        if st.st_mtime_ns >= recent or st.st_ctime_ns >= recent:
            return None  # a write may follow within the same tick, unseen
        digest.update(f"{st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns}\n".encode())
    return digest.hexdigest()
