"""The session search index: the same hits as reading every log, kept current by reading only
what was appended, rebuilt when missing, right across archive and restore, never doubled."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from workstation.config import Config
from workstation.importers.engine import Importer
from workstation.memory.reflect import run_sql
from workstation.sessions import textindex
from workstation.sessions.archive import archive, restore
from workstation.sessions.catalog import search
from workstation.sessions.log import Session, SessionError

FIX = Path(__file__).parents[1] / "fixtures" / "import"


def _native(paths, slug: str, n: int) -> Session:
    session = Session.create(paths, slug)
    for i in range(n):
        session.user(f"please look at module_{i}.py and the Loader")
        session.assistant(f"Reading module_{i}.py", [{"id": f"c{i}", "name": "read_file",
                                                      "arguments": {"path": f"module_{i}.py"}}])
        session.tool(f"c{i}", "read_file", f"class Loader{i}: pass  # MIXED Case Text {i}")
    return session


def _hits(paths, text, db=None, limit=200):
    return [(h.slug, h.state, h.record_id, h.type, h.turn, h.ts, h.snippet)
            for h in search(paths, text, limit=limit, db=db)]


def _rows(db) -> tuple[int, int]:
    (row,) = run_sql(db, "SELECT count(*), count(DISTINCT slug || ':' || seq) FROM search_records").rows
    return tuple(row)


def test_index_gives_the_same_hits_as_reading_every_log(paths, db, monkeypatch):
    monkeypatch.chdir(paths.root)
    _native(paths, "2025-01-31-native-one", 5)
    _native(paths, "2025-02-01-native-two", 3)
    importer = Importer(paths, db)
    for name in ("claude_session.jsonl", "codex_0.40.jsonl", "demo.aider.chat.history.md"):
        importer.import_file(FIX / name)
    archive(paths, "2025-02-01-native-two", config=Config())
    for needle in ("loader", "MIXED case", "module_2.py", "Fix it", "pytest", "hello", "no such text anywhere",
                   "read_file(", "\u00e9"):
        assert _hits(paths, needle, db) == _hits(paths, needle), needle
    assert _hits(paths, "loader", db, limit=4) == _hits(paths, "loader", limit=4)
    assert {h[1] for h in _hits(paths, "loader", db)} == {"live", "archived"}


def test_appended_records_are_found_and_only_they_are_read(paths, db):
    session = _native(paths, "2025-01-31-native", 2)
    assert len(_hits(paths, "loader", db)) == 4  # each user message and each tool output
    before = run_sql(db, "SELECT records, size FROM search_sessions").rows
    session.user("one more question about the Loader")
    hits = _hits(paths, "loader", db)
    # the index read on from where it stopped and numbers the new message turn 3 (two turns before it)
    assert len(hits) == 5 and hits[-1][3] == "user" and hits[-1][4] == 3
    after = run_sql(db, "SELECT records, size FROM search_sessions").rows
    assert after[0][0] == before[0][0] + 1 and after[0][1] > before[0][1]
    assert _rows(db)[0] == _rows(db)[1] == 7


def test_a_line_being_written_waits_and_a_lost_index_is_rebuilt(paths, db):
    session = _native(paths, "2025-01-31-native", 1)
    with open(session.path, "ab") as fh:
        fh.write(b'{"v":1,"id":"18d4c2a91f0-3fa2c1","ts":"2025-01-31T09:12:03.114Z","type":"user","content":"Loader wai')
    assert len(_hits(paths, "loader", db)) == 2  # the torn line is not a record (yet)
    with open(session.path, "ab") as fh:
        fh.write(b'ting"}\n')
    assert len(_hits(paths, "loader", db)) == 3
    db.call(textindex.index_drop, str(paths.state), ["2025-01-31-native"])  # as if the index were lost
    assert len(_hits(paths, "loader", db)) == 3 and _rows(db) == (4, 4)


def test_archive_restore_and_removal_keep_the_index_right(paths, db):
    _native(paths, "2025-01-31-native", 2)
    _native(paths, "2025-02-02-other", 1)
    assert len(_hits(paths, "loader", db)) == 6
    archive(paths, "2025-01-31-native", config=Config())
    assert [h[1] for h in _hits(paths, "loader", db)].count("archived") == 4
    assert _rows(db)[0] == 9  # the archive holds the bytes that were read: not read again
    restore(paths, "2025-01-31-native")
    assert [h[1] for h in _hits(paths, "loader", db)].count("live") == 6
    assert _rows(db)[0] == 9
    Path(paths.sessions / "2025-02-02-other.jsonl").unlink()
    assert len(_hits(paths, "loader", db)) == 4 and _rows(db)[0] == 6


def test_concurrent_syncs_never_double_a_row(paths, db):
    session = _native(paths, "2025-01-31-native", 1)
    textindex.sync(paths, db)
    for i in range(200):
        session.user(f"question {i} about the Loader")
    errors = []

    def sync() -> None:
        try:
            textindex.sync(paths, db)
        except Exception as err:  # the test fails below with it
            errors.append(err)

    threads = [threading.Thread(target=sync) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and _rows(db) == (203, 203)
    assert len(_hits(paths, "loader", db, limit=1000)) == 202


def test_imported_sessions_are_indexed_as_they_are_written(paths, db):
    Importer(paths, db).import_file(FIX / "claude_session.jsonl")
    (state,) = run_sql(db, "SELECT slug, records, size FROM search_sessions").rows
    log = paths.sessions / f"{state[0]}.jsonl"
    assert state[1:] == [16, log.stat().st_size]  # written with the import, not read back
    assert _hits(paths, "setup.py", db) == _hits(paths, "setup.py")


def _heap_files(paths) -> list[str]:
    return sorted(p.name for p in paths.state.glob("search-*.heap"))


def test_no_match_runs_from_one_record_into_the_next_and_odd_text_comes_back_whole(paths, db):
    session = Session.create(paths, "2025-03-01-odd")
    session.user("the first ends with FOO")
    session.user("bar begins the second")
    session.user("a NUL \x00 inside, a lone surrogate \ud800 and İstanbul")
    assert _hits(paths, "foobar", db) == _hits(paths, "foobar") == []
    assert _hits(paths, "foo\nbar", db) == []
    odd = _hits(paths, "lone surrogate", db)
    assert odd == _hits(paths, "lone surrogate") and len(odd) == 1 and "\ud800" in odd[0][6]
    assert _hits(paths, "nul \x00 inside", db) == _hits(paths, "nul   inside", db) == [odd[0][:6] + (odd[0][6],)]
    session.assistant("Die Straße ist GROSS")
    for needle in ("STRASSE", "straße", "groß"):  # full case folding, as str.casefold
        assert len(_hits(paths, needle, db)) == 1 and _hits(paths, needle, db) == _hits(paths, needle), needle


def test_the_heap_is_rewritten_without_what_nothing_points_to(paths, db):
    _native(paths, "2025-01-31-native", 3)
    _native(paths, "2025-02-01-gone", 3)
    before = _hits(paths, "loader", db)
    (gen,) = run_sql(db, "SELECT gen FROM search_heap").rows[0]
    Path(paths.sessions / "2025-02-01-gone.jsonl").unlink()
    expected = [h for h in before if h[0] != "2025-02-01-gone"]
    assert _hits(paths, "loader", db) == expected  # dropped: its ranges stay until they are worth a rewrite
    size, live = run_sql(db, "SELECT (SELECT size FROM search_heap), (SELECT sum(stop - start) FROM search_pieces)").rows[0]
    assert size > live > 0
    assert db.call(textindex.compact_heap, str(paths.state), min_garbage=0)
    (gen2, size2), = run_sql(db, "SELECT gen, size FROM search_heap").rows
    assert gen2 == gen + 1 and size2 == live and _heap_files(paths) == [f"search-{gen2}.heap"]
    assert (paths.state / f"search-{gen2}.heap").stat().st_size == live
    assert _hits(paths, "loader", db) == expected == _hits(paths, "loader")
    assert not db.call(textindex.compact_heap, str(paths.state), min_garbage=0)  # nothing left to reclaim


def test_a_search_that_meets_a_rewrite_reads_the_new_heap(paths, db):
    _native(paths, "2025-01-31-native", 2)
    _native(paths, "2025-02-01-gone", 2)
    textindex.sync(paths, db)
    Path(paths.sessions / "2025-02-01-gone.jsonl").unlink()
    textindex.sync(paths, db)

    class RewriteAfterListing:  # the owner rewrites the heap between a reader's listing and its open
        calls = 0

        def call(self, fn, *args, **kwargs):
            result = db.call(fn, *args, **kwargs)
            if fn is textindex.index_pieces and not self.calls:
                self.calls += 1
                assert db.call(textindex.compact_heap, str(paths.state), min_garbage=0)
            return result

    hits = textindex.search(paths, RewriteAfterListing(), "loader", 200)
    assert [(h.slug, h.record_id) for h in hits] == [(h[0], h[2]) for h in _hits(paths, "loader", db)]
    assert len(hits) == 4


def test_a_lost_or_short_heap_is_rebuilt_and_a_torn_append_cut_off(paths, db):
    session = _native(paths, "2025-01-31-native", 2)
    expected = _hits(paths, "loader", db)
    (gen, size), = run_sql(db, "SELECT gen, size FROM search_heap").rows
    heap = paths.state / f"search-{gen}.heap"
    with open(heap, "ab") as fh:  # an append whose rows never committed
        fh.write(b"loader garbage\x00" * 10)
    (paths.state / f"search-{gen + 7}.heap").write_bytes(b"a rewrite that crashed")
    session.user("and the Loader again")
    session.tool("c9", "read_file", "class Loader9: pass")  # appended: the torn bytes are cut off first
    assert len(_hits(paths, "loader", db)) == 6 and _heap_files(paths) == [heap.name]
    assert heap.stat().st_size == run_sql(db, "SELECT size FROM search_heap").rows[0][0]
    heap.unlink()
    said = []
    hits = [(h.slug, h.record_id) for h in search(paths, "loader", db=db, warn=said.append)]
    assert len(hits) == 6 and len(said) == 1 and "is rebuilt from the session logs" in said[0]
    assert [h[:6] for h in _hits(paths, "loader", db)][:4] == [h[:6] for h in expected]
    assert _rows(db) == (8, 8)


def test_a_damaged_heap_gives_readable_snippets_not_a_traceback(paths, db):
    _native(paths, "2025-01-31-native", 2)
    textindex.sync(paths, db)
    (gen, size), = run_sql(db, "SELECT gen, size FROM search_heap").rows
    heap = paths.state / f"search-{gen}.heap"
    data = heap.read_bytes()
    split = data.rindex(b"\x00") + 1  # the texts come after the last lowercased one
    heap.write_bytes(data[:split] + b"\xff\xfe" * ((len(data) - split) // 2) + b"\xff" * ((len(data) - split) % 2))
    hits = _hits(paths, "loader", db)
    assert len(hits) == 4 and all("\ufffd" in h[6] for h in hits)


def test_a_batch_read_from_where_the_index_no_longer_stands_is_refused_whole(paths, db):
    grows = _native(paths, "2025-01-31-grows", 1)
    _native(paths, "2025-02-01-steady", 1)
    textindex.sync(paths, db)
    grows.user("one more Loader question")
    stale = {row[0]: row for row in db.call(textindex.index_states, None)}
    log = str(paths.sessions / "2025-01-31-grows.jsonl")
    first, second = textindex._Writes(db, str(paths.state)), textindex._Writes(db, str(paths.state))
    textindex._sync_live(first, "2025-01-31-grows", stale["2025-01-31-grows"], log)
    textindex._sync_live(second, "2025-01-31-grows", stale["2025-01-31-grows"], log)
    _native(paths, "2025-02-02-new", 1)
    textindex._sync_live(second, "2025-02-02-new", None, str(paths.sessions / "2025-02-02-new.jsonl"))
    assert first.flush() == []
    assert second.flush() == ["2025-01-31-grows"]  # the new session in the same batch is stored
    assert _rows(db) == (10, 10)
    assert len(_hits(paths, "loader", db)) == 7 and _hits(paths, "loader", db) == _hits(paths, "loader")


def test_a_link_or_fifo_planted_as_the_heap_is_removed_never_written_through(paths, db, tmp_path):
    """A state folder can come with a cloned repository: a link in it must not make the owner truncate,
    write or read what it names, and a FIFO must not hang a search."""
    precious = tmp_path / "precious.txt"
    precious.write_text("the user's file\n")
    _native(paths, "2025-01-31-native", 2)  # before the links: a new session checks the state folder for them
    (gen,) = run_sql(db, "SELECT gen FROM search_heap").rows[0]
    (paths.state / f"search-{gen}.heap").symlink_to(precious)
    (paths.state / f"search-{gen + 1}.heap").symlink_to(precious)  # where a rewrite would write
    said = []
    hits = search(paths, "loader", db=db, warn=said.append)
    assert len(hits) == 4 and precious.read_text() == "the user's file\n"
    assert any("not a regular file" in line for line in said)
    (now,) = run_sql(db, "SELECT gen FROM search_heap").rows[0]
    assert _heap_files(paths) == [f"search-{now}.heap"] and not any(p.is_symlink() for p in paths.state.iterdir())
    assert db.call(textindex.compact_heap, str(paths.state), min_garbage=0) is False  # nothing to reclaim
    Path(paths.sessions / "2025-01-31-native.jsonl").unlink()
    _native(paths, "2025-02-01-other", 1)
    textindex.sync(paths, db)
    (gen,) = run_sql(db, "SELECT gen FROM search_heap").rows[0]
    os.mkfifo(paths.state / f"search-{gen + 1}.heap")
    assert db.call(textindex.compact_heap, str(paths.state), min_garbage=0)  # the FIFO is replaced, not opened
    assert precious.read_text() == "the user's file\n" and len(_hits(paths, "loader", db)) == 2
    (now,) = run_sql(db, "SELECT gen FROM search_heap").rows[0]
    (paths.state / f"search-{now}.heap").unlink()
    (paths.state / f"search-{now}.heap").mkdir()
    with pytest.raises(SessionError, match="is a folder; move it aside"):
        search(paths, "loader", db=db)
