"""Push, pull and status: the syncing process's half (the owner's is replica.py).

A push sends, kind by kind (events, decisions, LTM, session lines: what `team.share` lets leave), the
rows past the local watermark in batches: each batch is COPYed into a temporary table and inserted with
ON CONFLICT DO NOTHING in one transaction that holds the origin's advisory lock; only once the server
committed does the local watermark move. A push cut off anywhere (the server stopped mid-COPY, the
network gone before the commit's answer) leaves the watermark where it was: the next push sends those
rows again, and the server keeps one of each.

A pull copies every other origin's rows past its per-origin watermark (the server's seq) into the
replica; the watermark moves in the same local transaction as the rows. Pull what teammates share,
whatever this workspace shares.

Every failure is one line (TeamError): the server away, refused, older or newer than this client.
"""

from __future__ import annotations

import calendar
import os
import socket
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import TeamConfig
from ..paths import Paths
from ..store.broker import Database
from . import TeamError, replica, server, sessions as session_sync

BATCH_ROWS = 50_000  # rows per COPY: a few MB, one transaction
PULL_ROWS = 100_000


def origin_of(root: Path) -> str:
    """This workspace on this machine: what keys its rows on the server (machine and workspace)."""
    return f"{socket.gethostname()}:{root}"


@dataclass
class Report:
    """What one push or pull did, per kind."""

    action: str
    rows: dict[str, int] = field(default_factory=dict)  # push: rows the server took; pull: rows added
    sent: dict[str, int] = field(default_factory=dict)  # push: rows sent (a re-send counts here only)
    skipped: list[str] = field(default_factory=list)  # pull: one line per row that did not parse (left out)
    seconds: float = 0.0

    def line(self) -> str:
        total = sum(self.rows.values())
        parts = ", ".join(f"{n} {kind}" for kind, n in self.rows.items() if n) or "nothing new"
        verb = "pushed" if self.action == "push" else "pulled"
        return f"{verb} {parts} in {self.seconds:.2f}s" if total else f"{verb} {parts}"


class Team:
    """Sync of one workspace with its team server ([team] in the config)."""

    def __init__(self, db: Database, paths: Paths, team: TeamConfig) -> None:
        if not team.enabled:
            raise TeamError("team sync is off: set [team] url and project in your config")
        self.db, self.paths, self.team = db, paths, team
        self.origin = origin_of(paths.root)
        self.private = list(team.private_namespaces)
        self.deadline: server.Deadline | None = None  # the running command's time limit

    # -- connecting

    def _connect(self, action: str):
        """A connection checked (schema, login, membership) and watched by a new deadline for `action`;
        TeamError with one line for anything that fails."""
        import psycopg  # lazy: psycopg, only where sync runs

        self.deadline = deadline = server.Deadline(f"team {action}", server.TIME_LIMIT_S[action])
        con = server.connect(self.team, deadline)
        try:
            server.check_schema(con, self.team)
            author = server.whoami(con, self.team)
        except psycopg.Error as err:
            self._close(con)
            raise TeamError(self._why(err)) from None
        except BaseException:
            self._close(con)
            raise
        self.db.call(replica.set_me, self.origin, self.team.project, author)
        return con

    def _close(self, con) -> None:
        if self.deadline is not None:
            self.deadline.close()
        con.close()

    def _why(self, err: BaseException) -> str:
        """What went wrong, in one line: the deadline's, when it cut the connection."""
        return self.deadline.line(self.team) if self.deadline is not None and self.deadline.expired else _line(err)

    def _failed(self, action: str, err: BaseException) -> TeamError:
        """One line for a failed push or pull, noted for `team status` and the status line."""
        line = f"team {action} failed: {self._why(err)}; local work goes on and the next {action} catches up"
        self.db.call(replica.note, "last_error", f"{_now()} {line}")
        return TeamError(line)

    def _open(self, action: str):
        try:
            return self._connect(action)
        except TeamError as err:
            raise self._failed(action, err) from None

    def _tmp(self, what: str) -> str:
        folder = self.paths.state / "tmp"
        folder.mkdir(parents=True, exist_ok=True)
        return replica.path_for(folder, what)

    # -- push

    def push(self) -> Report:
        import psycopg  # lazy: psycopg, only where sync runs

        started = time.monotonic()
        report = Report("push")
        con = self._open("push")
        try:
            for kind in server.KINDS:
                if server.SHARE_OF[kind] not in self.team.share:
                    continue
                if kind == "session_lines":
                    taken, sent = session_sync.push(self, con, copy_in)
                else:
                    taken, sent = self._push_kind(con, kind)
                report.rows[kind], report.sent[kind] = taken, sent
        except psycopg.Error as err:
            raise self._failed("push", err) from None
        finally:
            self._close(con)
        report.seconds = time.monotonic() - started
        self.db.call(replica.note, "last_push", _now())
        return report

    def _push_kind(self, con, kind: str) -> tuple[int, int]:
        """Batches past the watermark, each exported (by the owner) while the one before is being COPYed."""
        def export(after: int | None) -> tuple[str, int, int]:
            path = self._tmp("push")
            n, top = self.db.call(replica.export_pending, kind, path, BATCH_ROWS, self.private, after,
                                  (self.team.project, self.origin))
            return path, n, top

        taken = sent = 0
        with ThreadPoolExecutor(1, thread_name_prefix="team-export") as pool:
            coming: Future[tuple[str, int, int]] | None = pool.submit(export, None)
            while coming is not None:
                path, n, top = coming.result()
                coming = pool.submit(export, top) if n == BATCH_ROWS else None
                try:
                    if n == 0:
                        break
                    inserted = copy_in(con, self.team.project, self.origin, kind, path)
                except BaseException:
                    if coming is not None:
                        _unlink(coming.result()[0])
                    raise
                finally:
                    _unlink(path)
                self.db.call(replica.mark_pushed, kind, top, inserted)
                taken, sent = taken + inserted, sent + n
        return taken, sent

    # -- pull

    def pull(self) -> Report:
        import psycopg  # lazy: psycopg, only where sync runs

        started = time.monotonic()
        report = Report("pull")
        con = self._open("pull")
        try:
            for kind in server.KINDS:
                report.rows[kind] = self._pull_kind(con, kind, report.skipped)
        except psycopg.Error as err:
            raise self._failed("pull", err) from None
        finally:
            self._close(con)
        self.db.call(replica.refresh_views)
        report.seconds = time.monotonic() - started
        self.db.call(replica.note, "last_pull", _now())
        return report

    def _pull_kind(self, con, kind: str, skipped: list[str]) -> int:
        total = 0
        while True:
            marks = self.db.call(replica.pull_marks, kind)
            path = self._tmp("pull")
            try:
                copy_out(con, self.team.project, self.origin, kind, marks, path, PULL_ROWS)
                read, added, unfit = self.db.call(replica.apply_pulled, kind, path)
            finally:
                _unlink(path)
            total += added
            skipped += unfit
            if read < PULL_ROWS:
                return total

    # -- status

    def status(self, *, reach: bool = True) -> dict:
        """What is pending, the last sync, the server's reachability in one line."""
        out: dict[str, Any] = {"server": server.where(self.team), "project": self.team.project,
                               "origin": self.origin, "share": list(self.team.share),
                               "pending": self.db.call(replica.pending, self.private),
                               **self.db.call(replica.summary)}
        if reach:
            started = time.monotonic()
            try:
                self._close(self._connect("status"))
                out["reachable"] = True
                out["reach"] = f"reachable in {1000 * (time.monotonic() - started):.0f} ms (schema {server.SCHEMA_VERSION})"
            except TeamError as err:
                out["reachable"] = False
                out["reach"] = str(err)
        return out


def label(state: dict[str, str]) -> str:
    """The status line's team sync state from replica.summary's facts: the last push's time, or a failure
    newer than it."""
    push, error = state.get("last_push", ""), state.get("last_error", "")
    if error and error.split(" ", 1)[0] > push:
        return f"team ✗ {_clock(error)}"
    return f"team ↑{_clock(push)}" if push else "team: not pushed yet"


def _clock(noted: str) -> str:
    """HH:MM of a noted stamp (UTC, _now) in local time, as the app's other times are shown."""
    try:
        utc = calendar.timegm(time.strptime(noted[:20], "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:  # noted by another version: as it stands
        return noted[11:16]
    return time.strftime("%H:%M", time.localtime(utc))


def state_label(db: Database) -> str:
    """label() of the sync state noted in this workspace's replica."""
    return label(db.call(replica.summary)["state"])


def copy_in(con, project: str, origin: str, kind: str, path: str) -> int:
    """One batch (`path`: CSV of project, origin and server.COLUMNS) into the server, in one transaction
    holding the origin's advisory lock (so an origin's rows commit in seq order); returns the rows the
    server took. The batch is COPYed straight into the table; only if some of its rows are there already
    (a batch sent again after a push was cut off) does it go through a temporary table and ON CONFLICT DO
    NOTHING, which costs the server about half as much again."""
    import psycopg  # lazy: psycopg, only where sync runs

    cols = ", ".join(["project", "origin", *(name for name, _ in server.COLUMNS[kind])])
    with con.transaction():
        with con.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"{project}\x1f{origin}\x1f{kind}"])
            try:
                with con.transaction():  # a savepoint: a conflict undoes this attempt only
                    _copy_file(cur, f"COPY workstation.{kind} ({cols}) FROM STDIN (FORMAT csv)", path)
                    return max(cur.rowcount, 0)
            except psycopg.errors.UniqueViolation:
                pass
            types = ", ".join(["project text", "origin text", *(f"{name} {server.bare(sqltype)}"
                                                                  for name, sqltype in server.COLUMNS[kind])])
            cur.execute(f"CREATE TEMP TABLE push_rows ({types}) ON COMMIT DROP")
            _copy_file(cur, f"COPY push_rows ({cols}) FROM STDIN (FORMAT csv)", path)
            cur.execute(f"INSERT INTO workstation.{kind} ({cols}) SELECT {cols} FROM push_rows "
                        "WHERE project = %s AND origin = %s ON CONFLICT DO NOTHING", [project, origin])
            return max(cur.rowcount, 0)


def _copy_file(cur, statement: str, path: str) -> None:
    with cur.copy(statement) as copy, open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            copy.write(chunk)


def copy_out(con, project: str, origin: str, kind: str, marks: dict[str, int], path: str, limit: int) -> None:
    """The other origins' rows past their marks, oldest first, at most `limit`, as CSV into `path`."""
    from psycopg import sql  # lazy: psycopg, only where sync runs

    cols = ", ".join(f"e.{name}" for name, _ in server.COLUMNS[kind])
    query = sql.SQL(
        "COPY (SELECT e.seq, e.origin, e.author, {cols} FROM workstation.{view} e "
        "LEFT JOIN unnest({origins}::text[], {seqs}::bigint[]) AS w(origin, seq) ON w.origin = e.origin "
        "WHERE e.project = {project} AND e.origin <> {me} AND e.seq > coalesce(w.seq, 0) "
        "ORDER BY e.seq LIMIT {limit}) TO STDOUT (FORMAT csv)").format(
        cols=sql.SQL(cols), view=sql.Identifier(f"visible_{kind}"), origins=sql.Literal(list(marks)),
        seqs=sql.Literal(list(marks.values())), project=sql.Literal(project), me=sql.Literal(origin),
        limit=sql.Literal(int(limit)))
    try:
        with con.cursor() as cur, open(path, "wb") as fh:
            with cur.copy(query) as copy:
                for data in copy:
                    fh.write(data)
    finally:
        con.rollback()


def _line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text[:300] or type(err).__name__


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
