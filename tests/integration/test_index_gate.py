"""The staleness gate of a fresh process (`workstation find`, `map`): when nothing changed since a check that
found the map and the disk agreeing, it walks the tree and reads no row of the map to compare (issue 31)."""

from __future__ import annotations

import pytest

from support.kmap_helpers import open_map, write
from workstation.index import freshness, storage
from workstation.store import Database


@pytest.fixture
def reads(monkeypatch) -> list:
    """The `paths` argument of every storage.index_state the gate runs (None: every row)."""
    monkeypatch.setattr(freshness, "RACY_WINDOW_NS", 0)  # no write here is racy: the test need not wait 2 s
    seen: list = []
    real = Database.call

    def counted(self, fn, *args, **kwargs):
        if fn is storage.index_state:
            seen.append(args[0] if args else None)
        return real(self, fn, *args, **kwargs)

    monkeypatch.setattr(Database, "call", counted)
    return seen


def test_a_new_process_gate_reads_no_row_until_something_changes(tmp_path, reads):
    write(tmp_path, {"pkg/a.py": "def alpha():\n    pass\n", "pkg/b.py": "def beta():\n    pass\n",
                     "logo.bin": b"\x00\x01binary"})
    with open_map(tmp_path) as km:
        km.index_all()
    with open_map(tmp_path) as km:  # each `with`: what a new process sees
        km.ensure_fresh()  # compares every row (the index just wrote the map), and notes the agreement
    assert reads[-1] is None
    reads.clear()
    with open_map(tmp_path) as km:
        assert km.find("alpha").hits[0].path == "pkg/a.py"
        assert km.index_all().indexed == 0
    assert reads == []

    (tmp_path / "pkg" / "b.py").write_text("def gamma():\n    pass\n\n\n")  # a change: compared, re-parsed
    with open_map(tmp_path) as km:
        assert km.find("gamma").hits[0].path == "pkg/b.py"
    assert reads == [None]
    (tmp_path / "pkg" / "a.py").unlink()
    with open_map(tmp_path) as km:
        assert not [h for h in km.find("alpha").hits if h.match == "exact"]


def test_a_change_to_the_map_alone_is_no_agreement(tmp_path, reads):
    """The note holds the database's own signature: a map written since (a file dropped from it, a new
    database) is compared again, and what is on disk comes back."""
    write(tmp_path, {"pkg/a.py": "def alpha():\n    pass\n"})
    with open_map(tmp_path) as km:
        km.index_all()
    with open_map(tmp_path) as km:
        km.ensure_fresh()
        km.remove_file("pkg/a.py")  # still on disk: back at the next refresh
    reads.clear()
    with open_map(tmp_path) as km:
        assert km.find("alpha").hits[0].path == "pkg/a.py"
    assert reads and reads[0] is None
    for name in ("index.duckdb", "index.duckdb.wal"):
        (km.paths.state / name).unlink(missing_ok=True)
    with open_map(tmp_path) as km:
        assert km.find("alpha").hits[0].path == "pkg/a.py"
