"""The staleness gate: no query ever answers from a file that changed on disk."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from support.kmap_helpers import age, db_paths, db_symbols, open_map, write
from workstation.index.freshness import RACY_WINDOW_NS, Indexed, plan
from workstation.index.indexer import Scan
from workstation.index.storage import dep_targets as _deps_target

BASE = {
    "app/main.py": """\
        from app.util import helper


        def main():
            return helper(1)
        """,
    "app/util.py": """\
        def helper(x):
            return x + 1
        """,
    "app/__init__.py": "",
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    write(tmp_path, BASE)
    for path in tmp_path.rglob("*.py"):
        age(path)
    return tmp_path


def test_edit_is_seen_by_every_query(repo: Path):
    with open_map(repo) as km:
        km.index_all()
        (repo / "app/util.py").write_text(
            "def helper(x):\n    return x + 1\n\n\ndef fresh_one():\n    return helper(2)\n")
        assert [h.name for h in km.find("fresh_one").hits] == ["fresh_one"]
        assert [s.name for s in km.symbols("app/util.py")] == ["helper", "fresh_one"]
        assert "fresh_one" in km.file_map("app/util.py").render()
        assert [(h.path, h.line) for h in km.impact("helper")] == [("app/main.py", 5), ("app/util.py", 6)]
        (repo / "app/util.py").write_text("def helper(x):\n    return x\n\n\ndef renamed_fn():\n    return 3\n")
        assert "renamed_fn" in km.repo_map(4000)
        assert "fresh_one" not in km.repo_map(4000)
        (repo / "app/extra.py").write_text('"""An extra module."""\n')
        files = {f.path: f for f in km.files()}
        assert files["app/extra.py"].purpose == "An extra module."


def test_old_rows_are_replaced_not_added(repo: Path):
    with open_map(repo) as km:
        km.index_all()
        for n in range(3):
            (repo / "app/util.py").write_text(f"def helper(x):\n    return x + {n}\n")
            km.ensure_fresh()
        assert db_symbols(km, "app/util.py") == [("helper", "function", 1, 2)]


def test_delete_drops_out(repo: Path):
    with open_map(repo) as km:
        km.index_all()
        (repo / "app/util.py").unlink()
        assert km.freshness("app/util.py") == "deleted"
        assert "app/util.py" in db_paths(km)  # freshness() only reports
        assert km.find("helper").hits == [] or all(h.path != "app/util.py" for h in km.find("helper").hits)
        assert "app/util.py" not in db_paths(km)
        assert km.db.call(_deps_target, "app/main.py") == [None]  # the import no longer resolves


def test_rename_moves_symbols(repo: Path):
    with open_map(repo) as km:
        km.index_all()
        os.rename(repo / "app/util.py", repo / "app/tools.py")
        hits = km.find("helper").hits
        assert [(h.path, h.name) for h in hits] == [("app/tools.py", "helper")]
        assert db_paths(km) == {"app/main.py", "app/tools.py", "app/__init__.py"}


def test_folder_delete_and_rename(repo: Path):
    with open_map(repo) as km:
        km.index_all()
        shutil.move(repo / "app", repo / "core")
        assert db_paths(km) == {"app/main.py", "app/util.py", "app/__init__.py"}
        km.ensure_fresh(["app", "core"])  # the watcher's scoped refresh of both folders
        assert db_paths(km) == {"core/main.py", "core/util.py", "core/__init__.py"}
        shutil.rmtree(repo / "core")
        assert km.files() == []


def test_same_size_same_mtime_rewrite_is_caught(repo: Path):
    target = repo / "app/util.py"
    with open_map(repo) as km:
        km.index_all()
        before = target.stat()
        original = target.read_text()
        rewritten = original.replace("helper", "zipper")
        assert len(rewritten) == len(original)
        target.write_text(rewritten)
        os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))  # back to the old mtime
        after = target.stat()
        same = ("st_size", "st_mtime_ns", "st_ino")
        assert [getattr(after, k) for k in same] == [getattr(before, k) for k in same]
        assert km.freshness("app/util.py") == "stale"
        assert [h.name for h in km.find("zipper").hits] == ["zipper"]
        assert km.freshness("app/util.py") == "fresh"


def test_rewrite_right_after_indexing_is_caught(tmp_path: Path):
    # no ageing: the file is written, indexed and rewritten within the same moment
    write(tmp_path, {"a.py": "def one(): pass\n"})
    with open_map(tmp_path) as km:
        km.index_all()
        (tmp_path / "a.py").write_text("def two(): pass\n")
        assert [h.name for h in km.find("two").hits] == ["two"]


def test_racy_signature_forces_a_hash():
    now = 1_700_000_000 * 10**9
    sig = (10, now - RACY_WINDOW_NS // 2, now - RACY_WINDOW_NS // 2, 7)
    found = Scan(files={"a.py": ("/r/a.py", sig)})
    racy = plan(found, {"a.py": Indexed(sig, "abc", now)}, {}, {})
    assert [c[0] for c in racy.check] == ["a.py"] and racy.check[0][2] == "abc"
    settled = plan(found, {"a.py": Indexed(sig, "abc", now + 3 * RACY_WINDOW_NS)}, {}, {})
    assert settled.check == [] and settled.unchanged == 1


def test_unchanged_files_are_not_read(repo: Path, monkeypatch):
    from workstation.index import freshness, indexer

    # ageing the files set their ctime to now: shrink the racy window instead of sleeping 2 s
    monkeypatch.setattr(freshness, "RACY_WINDOW_NS", 50_000_000)
    time.sleep(0.1)
    with open_map(repo) as km:
        km.index_all()

        calls = []
        real = indexer.index_file
        monkeypatch.setattr(indexer, "index_file", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
        change = km.ensure_fresh()
        assert change.empty and calls == [] and change.unchanged == 3
        (repo / "app/main.py").write_text("def main():\n    return 0\n")
        km.ensure_fresh()
        assert calls == ["app/main.py"]


def test_new_module_resolves_waiting_imports(tmp_path: Path):
    write(tmp_path, {"a.py": "from lib import tool\n\ntool()\n"})
    with open_map(tmp_path) as km:
        km.index_all()
        assert km.db.call(_deps_target, "a.py") == [None]
        write(tmp_path, {"lib.py": "def tool():\n    pass\n"})
        fm = km.file_map("a.py")
        assert km.db.call(_deps_target, "a.py") == ["lib.py"]
        assert fm.dependencies == [{"module": "lib", "target": "lib.py", "line": 1}]


def test_freshness_states(repo: Path):
    with open_map(repo) as km:
        km.index_all()
        assert km.freshness("app/main.py") == "fresh"
        (repo / "app/main.py").write_text("x = 1\n")
        assert km.freshness("app/main.py") == "stale"
        (repo / "app/new.py").write_text("y = 2\n")
        assert km.freshness("app/new.py") == "stale"  # on disk, not indexed yet
        km.ensure_fresh()
        assert km.freshness("app/main.py") == "fresh" and km.freshness("app/new.py") == "fresh"
