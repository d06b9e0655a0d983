"""A refresh writes its batches on a thread of its own while it parses on: every row lands once, in the
order handed over, and a failed write stops the refresh with its own error, leaving no temp file."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

import duckdb
import pytest

from support.kmap_helpers import open_map, write
from workstation.index import map as map_mod


def _repo(root: Path, n: int = 40) -> None:
    write(root, {f"pkg/m{i:03}.py": "".join(f"def f{i}_{j}(x):\n    return g{j}(x) + {j}\n\n" for j in range(20))
                 for i in range(n)})


def _rows(index_db: Path) -> tuple:
    con = duckdb.connect(str(index_db), read_only=True)
    try:
        return (con.execute("SELECT path, name, qualname, start_line FROM symbols ORDER BY ALL").fetchall(),
                con.execute("SELECT path, name, line, enclosing, kind FROM refs ORDER BY ALL").fetchall(),
                con.execute("SELECT path, module, line FROM deps ORDER BY ALL").fetchall(),
                con.execute("SELECT path, sha256, line_count FROM files ORDER BY ALL").fetchall())
    finally:
        con.close()


def _spy_flush(monkeypatch, before) -> None:
    """Every batch write runs `before()` first (in the thread that writes it)."""
    real = map_mod.KnowledgeMap._flush

    def flush(self, batch, names):
        before()
        return real(self, batch, names)

    monkeypatch.setattr(map_mod.KnowledgeMap, "_flush", flush)


def test_batches_written_by_the_writer_thread_match_one_batch(tmp_path: Path, monkeypatch):
    one, many = tmp_path / "one", tmp_path / "many"
    _repo(one)
    _repo(many)
    with open_map(one, workers=1) as km:
        km.index_all()
    expected = _rows(km.paths.index_db)
    threads = set()
    monkeypatch.setattr(map_mod, "FLUSH_BYTES", 1)  # a batch per file
    _spy_flush(monkeypatch, lambda: threads.add(threading.current_thread().name))
    with open_map(many, workers=1) as km:
        report = km.index_all()
    assert _rows(km.paths.index_db) == expected
    assert len(expected[0]) == 40 * 20 and report.files == 40 and report.timings["write"] > 0
    assert "ws-kmap-writer" in threads  # the batches before the last went through the thread


def test_a_failed_write_stops_the_refresh_with_its_error(tmp_path: Path, monkeypatch):
    spool_parent = tmp_path / "tmp"
    spool_parent.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool_parent))
    root = tmp_path / "repo"
    _repo(root)
    calls = []

    def fail_third():
        calls.append(1)
        if len(calls) == 3:
            raise OSError("disk full")

    monkeypatch.setattr(map_mod, "FLUSH_BYTES", 1)
    _spy_flush(monkeypatch, fail_third)
    with open_map(root, workers=1) as km:
        with pytest.raises(OSError, match="disk full"):
            km.index_all()
        assert len(calls) < 10  # it stopped soon after, not at the end of the run
        monkeypatch.undo()
        assert km.index_all().files == 40  # the next refresh writes everything
    assert list(spool_parent.iterdir()) == []  # the spool folder went too
    assert not any(t.name == "ws-kmap-writer" for t in threading.enumerate())
