"""File maps and repository maps: within budget, always, and ranked by references."""

from __future__ import annotations

import shutil
import sysconfig
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.kmap_helpers import open_map, write
from workstation import tokens
from workstation.index.repomap import pagerank

STDLIB = Path(sysconfig.get_paths()["stdlib"])


@pytest.fixture(scope="module")
def stdlib_repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("maprepo")
    shutil.copytree(STDLIB / "json", root / "json", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(STDLIB / "email", root / "email", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("subprocess.py", "argparse.py"):
        shutil.copy(STDLIB / name, root / name)
    shutil.copy(STDLIB / "logging" / "__init__.py", root / "logging_init.py")
    write(root, {"dense.py": "".join(
        f"def function_number_{i}(argument_{i}, other=None):\n    value = argument_{i} * 2\n"
        f"    if other:\n        return other\n    return value\n" for i in range(400))})
    with open_map(root) as km:
        km.index_all()
        yield root, km


@pytest.mark.parametrize("rel", ["subprocess.py", "argparse.py", "logging_init.py", "dense.py"])
def test_file_map_of_a_2000_line_file_costs_at_most_two_percent(stdlib_repo, rel):
    root, km = stdlib_repo
    text = (root / rel).read_text()
    lines = text.count("\n")
    assert lines >= 1800
    fm = km.file_map(rel)
    file_tokens = tokens.count(text)
    cost = tokens.count(fm.render())
    print(f"\n{rel}: {lines} lines, {file_tokens} tokens; map {cost} tokens "
          f"({100 * cost / file_tokens:.2f}%), {len(fm.symbols) - fm.omitted} of {len(fm.symbols)} symbols")
    assert cost <= 0.02 * file_tokens
    assert cost == fm.tokens
    assert fm.render().startswith(f"{rel} (python, ")
    assert fm.symbols and fm.omitted < len(fm.symbols)  # it shows a skeleton, not just a header


def test_file_map_lists_line_ranges_purpose_and_dependencies(tmp_path: Path):
    write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/core.py": '"""Core helpers."""\nimport os\nfrom pkg.util import helper\n\n\nclass Engine:\n'
                       '    def start(self):\n        return helper()\n',
        "pkg/util.py": "def helper():\n    return 1\n",
        "main.py": "from pkg.core import Engine\n\nEngine().start()\n",
    })
    with open_map(tmp_path) as km:
        fm = km.file_map("pkg/core.py")
        assert fm.render().splitlines() == [
            "pkg/core.py (python, 8 lines): Core helpers.",
            "imports: pkg/util.py, os",
            "used by: main.py",
            "6-8 class Engine",
            "  7-8 def start(self)",
        ]
        assert fm.dependencies == [{"module": "os", "target": None, "line": 2},
                                   {"module": "pkg.util", "target": "pkg/util.py", "line": 3}]


def test_a_file_map_that_fits_its_budget_whole_is_never_cut(tmp_path: Path):
    """The fit keeps room for a "(+N more symbols)" line and counts line by line: neither may cut a map
    whose whole text fits (a model told symbols are missing asks again, for the whole map twice)."""
    write(tmp_path, {"mod.py": "".join(f"def function_number_{i}(argument: int) -> int:\n    return {i}\n\n\n"
                                       for i in range(12))})
    with open_map(tmp_path) as km:
        whole = km.file_map("mod.py", tokens=4096)
        size = tokens.count(whole.render())
        assert whole.omitted == 0 and size > 16
        for budget in range(size, size + 9):  # the whole fits: at its size, and within the room once kept
            fm = km.file_map("mod.py", tokens=budget)
            assert fm.omitted == 0 and fm.render() == whole.render(), budget
        cut = km.file_map("mod.py", tokens=size - 1)  # one token short: cut, and it says so
        assert cut.omitted > 0 and cut.render().endswith("more symbols)")
        assert tokens.count(cut.render()) <= size - 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(budget=st.integers(min_value=1, max_value=3000))  # 0 is an error (test_index_cli)
def test_repo_map_never_exceeds_its_budget(stdlib_repo, budget):
    _root, km = stdlib_repo
    text = km.repo_map(budget)
    used = tokens.count(text)
    assert used <= budget
    if budget >= 300:
        assert used >= 0.7 * budget  # and it uses what it is given


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(budget=st.integers(min_value=1, max_value=600))
def test_file_map_never_exceeds_an_explicit_budget(stdlib_repo, budget):
    _root, km = stdlib_repo
    assert tokens.count(km.file_map("argparse.py", tokens=budget).render()) <= budget


def test_repo_map_ranks_the_most_referenced_file_first(tmp_path: Path):
    files = {
        "core/__init__.py": "",
        "core/engine.py": "def compute_everything(x):\n    return x\n\n\nclass Engine:\n    pass\n",
        "leaf/lonely.py": "def lonely_function():\n    return 0\n",
    }
    for i in range(8):
        files[f"users/user_{i}.py"] = (f"from core.engine import compute_everything\n\n\n"
                                       f"def user_{i}():\n    return compute_everything({i})\n")
    write(tmp_path, files)
    with open_map(tmp_path) as km:
        lines = km.repo_map(30).splitlines()
        assert lines[1:3] == ["core/engine.py:", "  1-2 def compute_everything(x)"]
        full = km.repo_map(2000)
        assert "leaf/lonely.py" in full and "users/user_7.py" in full  # room for all: all shown


def test_pagerank_matches_the_textbook():
    # a 3-cycle is uniform; a star's centre gets the most
    ranks = pagerank(["a", "b", "c"], {("a", "b"): 1, ("b", "c"): 1, ("c", "a"): 1})
    assert all(abs(r - 1 / 3) < 1e-6 for r in ranks.values())
    star = pagerank(["hub", "x", "y", "z"], {("x", "hub"): 1, ("y", "hub"): 1, ("z", "hub"): 1})
    assert max(star, key=star.get) == "hub" and abs(sum(star.values()) - 1) < 1e-9
