"""benchmarks/results.py: a run's figures land beside the last run's, and the change is printed against
the newest run of the same parameters, or the committed reference."""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


@pytest.fixture
def results():
    spec = importlib.util.spec_from_file_location("bench_results", BENCHMARKS / "results.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def _run(results, root: Path, params: dict, figures: dict[str, tuple[float, str]]) -> tuple[Path, str]:
    run = results.Run("bench_x", params, root=root)
    for label, (value, unit) in figures.items():
        run.add(label, value, unit)
    out = io.StringIO()
    return run.save(out), out.getvalue()


def test_a_run_is_written_and_the_next_prints_each_change(results, tmp_path):
    first, said = _run(results, tmp_path, {"n": 1}, {"search": (2.0, "s"), "import": (30.0, "MB/s")})
    assert "no earlier run with these parameters" in said
    data = json.loads(first.read_text())
    assert data["params"] == {"n": 1} and data["figures"]["search"] == {"value": 2.0, "unit": "s", "better": "lower"}
    assert data["figures"]["import"]["better"] == "higher" and data["machine"]["cores"]

    second, said = _run(results, tmp_path, {"n": 1}, {"search": (1.0, "s"), "import": (27.0, "MB/s"),
                                                       "list": (5.0, "ms")})
    assert second != first and second.parent == first.parent
    lines = {line.split()[0]: line for line in said.splitlines()[2:]}
    assert "-50.0% better (was 2)" in lines["search"]
    assert "-10.0% WORSE (was 30)" in lines["import"]
    assert lines["list"].rstrip().endswith("new")
    assert f"vs {first.stem}" in said

    # other parameters: another series, nothing to compare with
    _, said = _run(results, tmp_path, {"n": 2}, {"search": (9.0, "s")})
    assert "no earlier run with these parameters" in said


def test_a_fresh_clone_compares_with_the_committed_reference(results, tmp_path):
    made, _ = _run(results, tmp_path, {"n": 1}, {"search": (2.0, "s")})
    reference = results.promote("bench_x", made.stem, root=tmp_path)
    assert json.loads(reference.read_text())["figures"]["search"]["value"] == 2.0
    made.unlink()  # a fresh clone holds the reference alone
    _, said = _run(results, tmp_path, {"n": 1}, {"search": (3.0, "s")})
    assert f"vs reference {made.stem}" in said and "+50.0% WORSE (was 2)" in said
    # with a local run since, both columns
    _, said = _run(results, tmp_path, {"n": 1}, {"search": (3.0, "s")})
    line = next(line for line in said.splitlines() if line.split()[:1] == ["search"])
    assert "same" in line and "+50.0% WORSE (was 2)" in line


def test_local_runs_stay_out_of_git_and_the_reference_does_not():
    def ignored(path: str) -> bool:
        return subprocess.run(["git", "-C", str(BENCHMARKS.parent), "check-ignore", "-q", "--no-index", path]).returncode == 0

    assert ignored("benchmarks/results/bench_scale/20261128T101500Z.json")
    assert not ignored("benchmarks/results/bench_scale/reference.json")


def test_a_figure_outside_a_run_is_dropped_and_a_bad_direction_refused(results, tmp_path):
    assert results.add("anything", 1.0, "s") == 1.0  # a helper used outside any benchmark run
    run = results.Run("bench_x", {}, root=tmp_path)
    results.add("helper figure", 4.0, "ms")
    assert run.figures["helper figure"]["value"] == 4.0
    with pytest.raises(ValueError):
        run.add("x", 1.0, "s", better="sideways")
