"""Session logs shared with the team (`share = [..., "sessions"]`, off by default), and read back.

A live session log travels as its lines, keyed by origin, slug and line number: a push sends the
complete lines past the count already sent for that slug (a torn last line waits for its end), so a
log only ever grows on the server. `session list --team` and `session search --team` read the pulled
copies locally (replica table team.session_lines), offline too.
"""

from __future__ import annotations

import contextlib
import csv
import os
from typing import TYPE_CHECKING, Callable

from ..sessions.log import SUFFIX, live_slugs
from ..store.broker import readonly
from . import replica

if TYPE_CHECKING:
    from .sync import Team

MAX_SEARCH_HITS = 200


@readonly
def _sent(con) -> dict[str, int]:
    return {kind.split(":", 1)[1]: mark for kind, mark in
            con.execute("SELECT kind, mark FROM team.pushed WHERE kind LIKE 'session:%'").fetchall()}


def _export(path: str, stamp: tuple[str, str], slug: str, log: str, skip: int) -> int:
    """The complete lines of `log` after the first `skip`, as CSV rows (project, origin, slug, line, text);
    how many."""
    n = 0
    with open(log, "rb") as src, open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        for number, raw in enumerate(src, start=1):
            if not raw.endswith(b"\n"):
                break  # still being written
            if number <= skip:
                continue
            writer.writerow([*stamp, slug, number, raw[:-1].decode("utf-8", "replace").replace("\0", "")])
            n += 1
    return n


def push(team: Team, con, copy_in: Callable[..., int]) -> tuple[int, int]:
    """Every live log's new lines to the server through `copy_in` (sync.copy_in); (rows the server took,
    rows sent)."""
    sent_before = team.db.call(_sent)
    taken = sent = 0
    for slug in live_slugs(team.paths):
        log = str(team.paths.sessions / f"{slug}{SUFFIX}")
        path = team._tmp("lines")
        try:
            skip = sent_before.get(slug, 0)
            try:
                n = _export(path, (team.team.project, team.origin), slug, log, skip)
            except FileNotFoundError:  # archived meanwhile
                continue
            if not n:
                continue
            taken += copy_in(con, team.team.project, team.origin, "session_lines", path)
            sent += n
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        team.db.call(replica.mark_pushed, f"session:{slug}", skip + n, n)
    return taken, sent


@readonly
def team_sessions(con) -> list[dict]:
    """Teammates' sessions pulled: origin, author, slug, lines."""
    cur = con.execute("""SELECT origin, author, slug, count(*) AS lines, max(line) AS last_line
                         FROM team.session_lines GROUP BY ALL ORDER BY author, origin, slug""")
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row)) for row in cur.fetchall()]


@readonly
def team_search(con, text: str, limit: int = MAX_SEARCH_HITS) -> list[dict]:
    """Lines of teammates' sessions holding `text` (case-insensitive), with author and origin."""
    cur = con.execute("""SELECT author, origin, slug, line, text FROM team.session_lines
                         WHERE contains(lower(text), lower(?)) ORDER BY author, origin, slug, line LIMIT ?""",
                      [text, int(limit)])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row)) for row in cur.fetchall()]
