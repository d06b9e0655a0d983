"""Work that must not grow with the number of sessions, counted rather than timed.

Each operation runs on a history of N and of 4N sessions while the folder entries listed (os.listdir,
os.scandir) and the files opened are counted. An operation about one session (showing, resuming, undoing
it, importing one more, marking the hits of a search) does the same work at both sizes; an operation about
all of them (listing, a sidecar's pass, a search's scan) grows linearly, never as N x N. Last round's
regressions were of that kind: a temp-file sweep of the whole sessions folder for every session a search
hit or a sidecar pass looked at, and a scan of every log for every session an import created."""

from __future__ import annotations

import builtins
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from workstation.agent.checkpoints import Checkpoints
from workstation.config import Config
from workstation.fsutil import sha256_bytes
from workstation.importers.bulk import import_many
from workstation.importers.engine import SUMMARY_MIN, Importer
from workstation.paths import Paths
from workstation.sessions.catalog import info_dict, list_sessions, load, search
from workstation.sessions.log import Session
from workstation.sidecar import Sidecar
from workstation.store import Database

FIX = Path(__file__).parents[1] / "fixtures" / "import"
CLAUDE_ID = "9f1c2d3e-0000-4000-8000-00000000abcd"
N = 40


@dataclass
class Work:
    listed: int = 0  # folder entries returned by listings
    opened: int = 0  # files opened
    listings: int = 0  # folders listed
    files: list = field(default_factory=list)  # the files opened

    @property
    def total(self) -> int:
        return self.listed + self.opened


@contextmanager
def counting():
    """Count the folder entries listed and the files opened inside the block (this process)."""
    work = Work()
    real_listdir, real_scandir, real_open, real_os_open = os.listdir, os.scandir, builtins.open, os.open

    def listdir(path="."):
        names = real_listdir(path)
        work.listed += len(names)
        work.listings += 1
        return names

    def scandir(path="."):
        entries = list(real_scandir(path))
        work.listed += len(entries)
        work.listings += 1
        return _Entries(entries)

    def opened(*args, **kwargs):
        work.opened += 1
        work.files.append(str(args[0]))
        return real_open(*args, **kwargs)

    def os_open(*args, **kwargs):
        work.opened += 1
        work.files.append(str(args[0]))
        return real_os_open(*args, **kwargs)

    os.listdir, os.scandir, builtins.open, os.open = listdir, scandir, opened, os_open
    try:
        yield work
    finally:
        os.listdir, os.scandir, builtins.open, os.open = real_listdir, real_scandir, real_open, real_os_open


class _Entries(list):
    """os.scandir's result as a context manager too."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def close(self):
        pass


def history(root: Path, n: int) -> Paths:
    """A workspace with n small live sessions, each with one turn that mentions `needle-<i>`."""
    root.mkdir()
    paths = Paths.for_root(root).ensure()
    for i in range(n):
        session = Session.create(paths, f"2025-01-01-session-{i}", sync=False)
        session.user(f"look at needle-{i} in app.py")
        session.assistant(f"needle-{i} is fine")
    return paths


def _source(folder: Path, i: int) -> Path:
    sid = f"{i:08x}{CLAUDE_ID[8:]}"
    path = folder / f"{sid}.jsonl"
    folder.mkdir(exist_ok=True)
    path.write_text((FIX / "claude_session.jsonl").read_text().replace(CLAUDE_ID, sid))
    return path


@pytest.fixture
def sizes(tmp_path):
    """The workspaces of N and 4N sessions (and their databases, closed after the test)."""
    made: list[tuple[Paths, Database]] = []
    for n in (N, 4 * N):
        paths = history(tmp_path / f"ws{n}", n)
        made.append((paths, Database(paths)))
    yield made
    for _, db in made:
        db.close()


def per_session(work_n: Work, work_4n: Work) -> None:
    """The work of an operation on one session: the same at N and 4N sessions (a listing of the sessions
    folder alone would add 3N entries)."""
    assert work_4n.total - work_n.total < N // 2, (work_n, work_4n)


def linear(work_n: Work, work_4n: Work) -> None:
    """The work of an operation on all sessions: 4N sessions cost about 4 times N, not 16."""
    assert work_4n.total <= 5 * work_n.total + 50, (work_n, work_4n)


def test_showing_and_resuming_a_session_does_not_look_at_the_others(sizes):
    works = []
    for paths, _ in sizes:
        with counting() as work:
            load(paths, "2025-01-01-session-3")
            Session.open(paths, "2025-01-01-session-3").read()
        works.append(work)
    per_session(*works)


def test_undo_does_not_look_at_the_other_sessions(sizes):
    works = []
    for paths, _ in sizes:
        (paths.root / "app.py").write_text("one\n")
        session = Session.open(paths, "2025-01-01-session-5")
        turn = session.user("change app.py")["id"]
        checkpoints = Checkpoints(paths, session)
        checkpoints.take(turn, ["app.py"])
        checkpoints.intend(turn, "app.py", sha256_bytes(b"two\n"))
        (paths.root / "app.py").write_text("two\n")
        with counting() as work:
            Checkpoints(paths, Session.open(paths, "2025-01-01-session-5")).undo()
        assert (paths.root / "app.py").read_text() == "one\n"
        works.append(work)
    per_session(*works)


def test_importing_one_more_session_does_not_look_at_the_others(sizes, tmp_path):
    works = []
    for k, (paths, db) in enumerate(sizes):
        importer = Importer(paths, db)
        importer.import_file(_source(tmp_path / f"src{k}", 0))  # the importer's first file opens what it needs
        source = _source(tmp_path / f"src{k}", 1)
        with counting() as work:
            importer.import_file(source)
        works.append(work)
    per_session(*works)


def test_marking_a_searchs_hits_costs_the_same_at_every_history_size(sizes):
    """A search scans everything once (linear); its hits' marks read only the sessions hit."""
    few, many = [], []
    for paths, db in sizes:
        search(paths, "needle-1", db=db)  # the index brought up to date first: that is not the search
        with counting() as one:
            hits = search(paths, "needle-1", db=db)
        with counting() as twenty:
            hits_20 = search(paths, "needle-", limit=20, db=db)
        assert len(hits) >= 1 and len(hits_20) == 20
        few.append(one)
        many.append(twenty)
    linear(*few)  # the scan is about every session
    # what twenty hits add to one hit (reading the twenty sessions hit to mark what a rewind took back) is
    # the same at 4N sessions as at N
    added_n = many[0].total - few[0].total
    added_4n = many[1].total - few[1].total
    assert added_4n - added_n < N // 2, (few, many)


def test_listing_and_a_sidecar_pass_grow_linearly(sizes):
    listing, passes = [], []
    for paths, _ in sizes:
        with counting() as work:
            assert len(list_sessions(paths)) in (N, 4 * N)
        listing.append(work)
        sidecar = Sidecar(paths, Config(), window_tokens=0)
        with counting() as work:
            sidecar.run_once()
        passes.append(work)
    linear(*listing)
    linear(*passes)


def test_listing_again_reads_only_the_logs_changed_since(sizes):
    """The list's summary (sessions.catalog): a second list opens the summary and the one log appended to
    since, not every log; what it says is what the logs say."""
    works = []
    for paths, _ in sizes:
        list_sessions(paths)  # the summary made
        Session.open(paths, "2025-01-01-session-7").user("one more look at needle-7")
        with counting() as work:
            infos = list_sessions(paths)
        assert next(i for i in infos if i.slug == "2025-01-01-session-7").turns == 2
        works.append(work)
    assert works[0].opened == works[1].opened, works
    linear(*works)  # the folder is listed (and each log's identity looked at): about all of them


def test_a_search_after_many_appends_asks_the_store_the_same_number_of_times(sizes, monkeypatch):
    """Logs that grew (a sidecar pass appends a redaction to many) are synced with a fixed number of calls
    to the store, not one or more each."""
    calls = []
    real = Database.call

    def call(self, fn, *args, **kwargs):
        calls.append(fn.__name__)
        return real(self, fn, *args, **kwargs)

    counts = []
    for paths, db in sizes:
        search(paths, "needle-1", db=db)  # the index and its manifest made
        n = len(list(paths.sessions.glob("*.jsonl")))
        for i in range(0, n, 4):
            Session.open(paths, f"2025-01-01-session-{i}").assistant(f"more about needle-{i}")
        monkeypatch.setattr(Database, "call", call)
        calls.clear()
        assert len(search(paths, "more about needle-", limit=1000, db=db)) == n // 4
        monkeypatch.setattr(Database, "call", real)
        counts.append(len(calls))
    assert counts[0] == counts[1], counts


def test_a_search_or_a_list_of_an_unchanged_history_lists_each_folder_once_and_opens_no_log(sizes):
    """With nothing changed since the last search and list, a search that finds nothing and a list make the
    same listings and open the same files at N and 4N sessions (the manifest, the summary: no log); only the
    entries listed grow, once each."""
    searches, lists = [], []
    for paths, db in sizes:
        search(paths, "needle-1", db=db)
        list_sessions(paths)
        with counting() as found_nothing:
            assert search(paths, "nowhere at all", db=db) == []
        with counting() as listed:
            assert len(list_sessions(paths)) in (N, 4 * N)
        searches.append(found_nothing)
        lists.append(listed)
    for small, large in (searches, lists):
        assert (small.listings, small.opened) == (large.listings, large.opened), (small, large)
        assert small.opened <= 3, small  # the state files, no log
        linear(small, large)


def test_a_list_right_after_an_import_reads_no_log_and_says_what_the_logs_say(sizes, tmp_path):
    """An import writes the list's summary lines of the sessions it creates (sessions.catalog): the first list
    after it opens no log, new or old, and says what a list rebuilt from the logs says."""
    paths, db = sizes[0]
    list_sessions(paths)  # the history's summary made
    sources = [_source(tmp_path / "src", i) for i in range(SUMMARY_MIN + 4)]
    import_many(Importer(paths, db), [(s, None) for s in sources], workers=1)
    with counting() as work:
        after_import = [info_dict(i) for i in list_sessions(paths)]
    logs = [f for f in work.files if f.endswith(".jsonl")]
    assert logs == [] and work.opened <= 3, work
    assert len(after_import) == N + len(sources)
    paths.sessions_summary.unlink()
    assert after_import == [info_dict(i) for i in list_sessions(paths)]  # rebuilt from every log
