"""Worker processes hand their rows over in spool files: every row lands once, the files are cleaned up."""

from __future__ import annotations

import tempfile
from pathlib import Path

import duckdb

from support.kmap_helpers import open_map, write
from workstation.index import indexer
from workstation.index import map as map_mod


def _repo(root: Path, n: int = 120) -> None:
    write(root, {f"pkg/m{i:03}.py": "".join(f"def f{i}_{j}(x):\n    return g{j}(x) + {j}\n\n" for j in range(30))
                 for i in range(n)})


def _rows(index_db: Path) -> tuple:
    con = duckdb.connect(str(index_db), read_only=True)
    try:
        return (con.execute("SELECT path, count(*) FROM symbols GROUP BY path ORDER BY path").fetchall(),
                con.execute("SELECT path, name, line, enclosing, kind FROM refs ORDER BY ALL").fetchall(),
                con.execute("SELECT count(*) FROM files").fetchone()[0])
    finally:
        con.close()


def test_spooled_rows_match_an_in_process_index(tmp_path: Path, monkeypatch):
    spool_parent = tmp_path / "tmp"
    spool_parent.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool_parent))
    pooled_root, plain_root = tmp_path / "pooled", tmp_path / "plain"
    _repo(pooled_root)
    _repo(plain_root)
    # a write after every chunk: a batch must never split a chunk's file rows from its spooled rows
    monkeypatch.setattr(map_mod, "FLUSH_BYTES", 1)
    calls = []
    real_run = indexer.run

    def spy(*args, **kwargs):
        for item in real_run(*args, **kwargs):
            calls.append(item[0])
            yield item

    monkeypatch.setattr(indexer, "run", spy)
    with open_map(pooled_root, workers=2) as km:
        report = km.index_all()
    pooled = _rows(km.paths.index_db)
    assert report.files == 120 and calls.count(indexer.SPOOLED) >= 2  # the pool ran and spooled
    with open_map(plain_root, workers=1) as km:
        km.index_all()
    plain = _rows(km.paths.index_db)
    assert pooled == plain
    assert pooled[2] == 120 and len(pooled[0]) == 120 and len(pooled[1]) == 120 * 30 * 2
    assert [p for p in spool_parent.iterdir() if p.name.startswith("ws-")] == []  # spool folder and files gone


def test_run_without_a_spool_sends_rows_inline(tmp_path: Path):
    _repo(tmp_path, 60)
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.py"))
    tasks = [(n, rel, str(tmp_path / rel), None) for n, rel in enumerate(files, start=1)]
    results = list(indexer.run(tasks, frozenset(files), 1_000_000, 2, [1] * len(tasks)))
    assert {r[0] for r in results} == {"indexed"} and all(r[4] for r in results)
