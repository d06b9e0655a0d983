"""The search manifest (sessions.textindex.Manifest): a search over a history in which no log changed needs
neither a sync through the store nor, without hits, the store at all; any change, and whatever happens to
the manifest, and the hits are those of reading every log."""

from __future__ import annotations

import pytest

from workstation.config import Config
from workstation.sessions import textindex
from workstation.sessions.archive import archive
from workstation.sessions.catalog import search
from workstation.sessions.log import Session
from workstation.store.broker import Database


def _hits(paths, text, db=None):
    return [(h.slug, h.state, h.record_id, h.type, h.turn, h.snippet, h.taken_back)
            for h in search(paths, text, db=db)]


def _history(paths) -> None:
    for n in range(3):
        session = Session.create(paths, f"2025-01-0{n + 1}-work")
        session.user(f"look at the Loader in module_{n}.py")
        session.assistant(f"module_{n}.py holds class Loader{n}")


@pytest.fixture
def store_calls(monkeypatch):
    """The names of the store functions called (what each search asked the store)."""
    called: list[str] = []
    real = Database.call

    def call(self, fn, *args, **kwargs):
        called.append(fn.__name__)
        return real(self, fn, *args, **kwargs)

    monkeypatch.setattr(Database, "call", call)
    return called


def test_an_unchanged_history_is_searched_without_a_sync(paths, db, store_calls):
    _history(paths)
    first = _hits(paths, "loader", db)
    assert first == _hits(paths, "loader") and len(first) == 6
    assert "index_snapshot" in store_calls
    store_calls.clear()
    assert _hits(paths, "loader", db) == first
    assert store_calls == ["index_hits"]  # what describes the hits; no sync, no snapshot
    store_calls.clear()
    assert _hits(paths, "nowhere to be found", db) == []
    assert store_calls == []  # no hits: the store is not asked anything
    (paths.sessions / "Not.A-Session.jsonl").write_text("{}\n")  # no session's name: no log, nothing to sync
    assert _hits(paths, "nowhere to be found", db) == [] and store_calls == []
    assert _hits(paths, "loader", db) == first


def test_every_change_is_searched_as_the_logs_say(paths, db, store_calls):
    _history(paths)
    _hits(paths, "loader", db)
    Session.open(paths, "2025-01-02-work").user("and the LOADER tests")  # an append
    assert _hits(paths, "loader", db) == _hits(paths, "loader") and len(_hits(paths, "loader", db)) == 7
    Session.create(paths, "2025-01-09-new").user("a new loader")  # a new session
    assert _hits(paths, "loader", db) == _hits(paths, "loader")
    archive(paths, "2025-01-01-work", config=Config())  # a session moves
    assert {h[1] for h in _hits(paths, "loader", db)} == {"live", "archived"}
    assert _hits(paths, "loader", db) == _hits(paths, "loader")
    (paths.sessions / "2025-01-09-new.jsonl").unlink()  # and one is gone
    assert _hits(paths, "loader", db) == _hits(paths, "loader")


def test_a_torn_foreign_or_stale_manifest_changes_no_hit(paths, db):
    _history(paths)
    truth = _hits(paths, "loader")
    manifest = paths.state / "search.manifest"
    _hits(paths, "loader", db)
    saved = manifest.read_bytes()
    for planted in (saved[: len(saved) // 2], b'{"version": 99}', b"[]", saved.replace(b'"live"', b'"gone"')):
        manifest.write_bytes(planted)
        assert _hits(paths, "loader", db) == truth
    # the store lost a session's rows while the manifest still names its pieces: searched again through it
    db.call(textindex.index_drop, str(paths.state), ["2025-01-02-work"])
    manifest.write_bytes(saved)
    assert _hits(paths, "loader", db) == truth
    # a store made anew beside an old manifest (its heap rewritten from the logs)
    db.close()
    paths.index_db.unlink()
    fresh = Database(paths)
    try:
        manifest.write_bytes(saved)
        assert _hits(paths, "loader", fresh) == truth
        assert _hits(paths, "no such text", fresh) == []
    finally:
        fresh.close()
