"""benchmarks/bench_scale.py's history: every copy of a sample is a session of its own, and its rare word is
rare (a whole run of the benchmark takes minutes: `bench_scale.py --quick` is not part of the suite)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from workstation.importers.bulk import import_many
from workstation.importers.engine import Importer
from workstation.paths import Paths
from workstation.sessions.catalog import search
from workstation.store import Database

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


@pytest.fixture
def bench_scale(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    for name in ("bench_scale", "bench_commands", "results"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return importlib.import_module("bench_scale")


def test_each_copy_is_a_session_and_the_rare_word_is_in_one_sample_of_eight(bench_scale, tmp_path):
    if len(bench_scale.SAMPLES) < 8 or not all(p.is_file() for p in bench_scale.SAMPLES):
        pytest.skip("the shared transcripts are not beside this checkout (../shared/transcripts)")
    kinds = len(bench_scale.SAMPLES)
    files, total = bench_scale.generate(tmp_path / "src", 0, 2 * kinds)
    more, _ = bench_scale.generate(tmp_path / "src", 2 * kinds, kinds)
    assert len(files) == 2 * kinds and total == sum(p.stat().st_size for p in files)
    (tmp_path / "ws").mkdir()
    paths = Paths.for_root(tmp_path / "ws")
    db = Database(paths)
    try:
        done = import_many(Importer(paths, db), [(p, None) for p in files + more], workers=1)
        assert not any(r.error or r.problems for r in done) and all(r.added for r in done)
        assert len(list(paths.sessions.glob("*.jsonl"))) == 3 * kinds
        hits = search(paths, bench_scale.RARE, limit=1000, db=db)
        assert len({h.slug for h in hits}) == 3
        assert search(paths, bench_scale.NOWHERE, db=db) == []
    finally:
        db.close()
