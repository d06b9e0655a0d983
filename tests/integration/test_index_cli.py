"""Smoke tests of the knowledge-map commands, their --json output and their errors."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from support.kmap_helpers import open_map, write
from workstation import tokens
from workstation.cli import main


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    write(tmp_path, {
        "app/__init__.py": "",
        "app/core.py": '"""Core logic."""\n\n\ndef compute(x):\n    return x * 2\n\n\nclass Runner:\n'
                       '    def run(self):\n        return compute(1)\n',
        "app/cli.py": "from app.core import compute\n\n\ndef main():\n    print(compute(3))\n",
        "README.md": "# Demo project\n",
    })
    return tmp_path


def run(repo: Path, *args: str):
    result = CliRunner().invoke(main, ["-C", str(repo), *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_index_json(repo: Path):
    data = json.loads(run(repo, "index", "--json"))
    assert (data["files"], data["indexed"], data["skipped"]) == (4, 4, {})
    assert data["symbols"] == 4 and data["seconds"] >= 0
    again = json.loads(run(repo, "index", "--json"))
    assert (again["indexed"], again["unchanged"]) == (0, 4)
    text = run(repo, "index")
    assert text.startswith("4 files, 4 symbols in ") and "skipped 0" in text


def test_map_json(repo: Path):
    data = json.loads(run(repo, "map", "app/core.py", "--json"))
    assert data["path"] == "app/core.py" and data["purpose"] == "Core logic."
    assert [(s["qualname"], s["start_line"], s["end_line"]) for s in data["symbols"]] == [
        ("compute", 4, 5), ("Runner", 8, 10), ("Runner.run", 9, 10)]
    assert data["dependants"] == ["app/cli.py"]
    repo_map = json.loads(run(repo, "map", "--tokens", "60", "--json"))
    assert repo_map["budget"] == 60 and 0 < repo_map["tokens"] <= 60
    assert tokens.count(repo_map["text"]) == repo_map["tokens"]
    assert run(repo, "map", "--tokens", "60").rstrip("\n") == repo_map["text"]


def test_find_and_impact_json(repo: Path):
    found = json.loads(run(repo, "find", "comput", "--json"))
    assert found["hits"][0]["name"] == "compute" and found["hits"][0]["match"] == "prefix"
    assert found["tiers"] == ["names"]
    impact = json.loads(run(repo, "impact", "compute", "--json"))
    assert [(h["path"], h["line"], h["enclosing"]) for h in impact["hits"]] == [
        ("app/cli.py", 5, "main"), ("app/core.py", 10, "Runner.run")]
    text = run(repo, "impact", "compute")
    assert "app/cli.py:5 in main (call) -> app/core.py:compute [import]" in text
    assert text.rstrip().endswith("2 references to compute")
    nothing = run(repo, "find", "qqqzzz")
    assert "nothing matches 'qqqzzz'" in nothing and "note: tier one only" in nothing


def test_errors_are_one_line(repo: Path):
    proc = subprocess.run([sys.executable, "-m", "workstation", "-C", str(repo), "map", "nope.py"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr == "error: nope.py is not in the knowledge map (no such file, or ignored)\n"
    outside = CliRunner().invoke(main, ["-C", str(repo), "map", "/etc/passwd"])
    assert outside.exit_code != 0 and "outside the workspace" in str(outside.exception)
    for args in (["map", "app/core.py", "--tokens", "0"], ["map", "--tokens", "-5"]):
        proc = subprocess.run([sys.executable, "-m", "workstation", "-C", str(repo), *args],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 1 and proc.stdout == ""
        assert proc.stderr == f"error: token budget must be a whole number of at least 1, got {args[-1]}\n"
    proc = subprocess.run([sys.executable, "-m", "workstation", "-C", str(repo), "impact", "NoSuchThing"],
                          capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == "error: no symbol NoSuchThing in the knowledge map\n"


def test_a_warm_index_loads_no_pydantic_and_no_pathspec_without_patterns(repo: Path):
    """What a warm `workstation index` must not pay for (benchmarks/bench_commands.py --index): pydantic
    (the config is msgspec's; ~70 ms) nor, in a tree without ignore patterns, pathspec (~15 ms). The
    process ends by os._exit (workstation.process.finish), after its exit handlers: one reports."""
    code = ("import atexit, sys\n"
            "atexit.register(lambda: print('loaded:', [m for m in ('pydantic', 'pathspec') if m in sys.modules]))\n"
            f"sys.argv = ['workstation', '-C', {str(repo)!r}, 'index']\n"
            "from workstation.cli import entry\n"
            "entry()\n")
    for _ in range(2):  # the first index, then the warm one
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        assert proc.stdout.splitlines()[-1] == "loaded: []", proc.stdout
    (repo / ".gitignore").write_text("build/\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.splitlines()[-1] == "loaded: ['pathspec']", proc.stdout  # the check can fail


def test_impact_marks_name_only_matches_after_real_references(tmp_path: Path):
    write(tmp_path, {"a/core.py": "def run():\n    return 1\n", "b/core.py": "def run():\n    return 2\n",
                     "c.py": "from a.core import run\n\nrun()\n", "aa.py": "def go(job):\n    return job.run()\n"})
    lines = run(tmp_path, "impact", "run").splitlines()
    assert lines == ["c.py:3 at top level (call) -> a/core.py:run [import]",
                     "aa.py:2 in go (call) [name-only]",
                     "2 references to run"]


def test_file_map_takes_a_budget(repo: Path):
    with open_map(repo) as km:
        small, large = km.file_map("app/core.py", 10), km.file_map("app/core.py", 4000)
        assert small.budget == 10 and large.budget == 4000
        assert tokens.count(large.render()) <= 4000 and len(large.render()) >= len(small.render())


def _as_in_a_terminal() -> None:
    """Ctrl-C reaches a command run from a terminal; a test suite started in the background (`cmd &` in a
    script) ignores SIGINT, and the command would inherit that, never stop, and hang the test."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_watch_prints_reindex_events_until_interrupted(repo: Path):
    import time

    proc = subprocess.Popen([sys.executable, "-m", "workstation", "-C", str(repo), "watch"], preexec_fn=_as_in_a_terminal,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()
        assert first.startswith(f"watching {repo}: 4 files, 4 symbols"), first + proc.stderr.read()
        time.sleep(0.3)
        (repo / "app/core.py").write_text("def compute(x):\n    return x\n")
        lines = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any("indexed app/core.py" in line for line in lines):
            lines.append(proc.stdout.readline())
        assert any("indexed app/core.py" in line for line in lines), lines
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert out.strip().endswith("stopped")



def test_watch_json_prints_one_object_per_line_per_event(repo: Path):
    import time

    proc = subprocess.Popen([sys.executable, "-m", "workstation", "-C", str(repo), "watch", "--json"], preexec_fn=_as_in_a_terminal,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    events = []
    try:
        first = proc.stdout.readline()
        assert first.endswith("}\n"), first + proc.stderr.read()
        assert json.loads(first) == {"event": "watching", "root": str(repo), "files": 4, "symbols": 4,
                                     "references": 4, "skipped": {}}
        time.sleep(0.3)
        (repo / "app/core.py").write_text("def compute(x):\n    return x\n")
        (repo / "README.md").unlink()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and {"app/core.py", "README.md"} - {e.get("path") for e in events}:
            events.append(json.loads(proc.stdout.readline()))
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    events += [json.loads(line) for line in out.splitlines()]
    assert {(e["event"], e.get("path")) for e in events} >= {("indexed", "app/core.py"), ("removed", "README.md")}
    changed = next(e for e in events if e.get("path") == "app/core.py")
    assert set(changed) == {"event", "path", "time", "refresh_ms"} and changed["refresh_ms"] >= 0
    assert events[-1] == {"event": "stopped"}

# Text the bulk loader once took for NULL (`\N`) or for field and row ends (tabs, newlines).
ODD_JS = ('import x, {"a\x1fb" as y} from \'\\N\';\nimport t from "\t";\n\n'
          'class K {\n  "\\N"() { return f(); }\n  "tab\there"() {}\n}\n\n'
          'export function f(a = "\\N", b = \'"\') { return x(a, b); }\n')


def test_odd_text_round_trips_through_every_command(tmp_path: Path):
    write(tmp_path, {
        "native/a.c": '#include "\\N"\n#include "tab\there.h"\n\nint main(void) { return 0; }\n',
        "web/odd.js": ODD_JS,
        "odd\tdir/\\N.txt": 'Reads\t\\N and "quotes"\n',
    })
    report = json.loads(run(tmp_path, "index", "--json"))
    assert (report["files"], report["skipped"]) == (3, {})
    assert run(tmp_path, "index").startswith("3 files")  # the next command is not stuck retrying a write

    c_map = json.loads(run(tmp_path, "map", "native/a.c", "--json"))
    assert [d["module"] for d in c_map["dependencies"]] == ["\\N", "tab\there.h"]
    js_map = json.loads(run(tmp_path, "map", "web/odd.js", "--json"))
    assert [d["module"] for d in js_map["dependencies"]] == ["\\N", "\t"]
    assert [(s["qualname"], s["signature"]) for s in js_map["symbols"]] == [
        ("K", "class K"), ("K.\\N", '"\\N"()'), ("K.tab\there", '"tab here"()'),
        ("f", 'function f(a = "\\N", b = \'"\')')]
    text_map = json.loads(run(tmp_path, "map", "odd\tdir/\\N.txt", "--json"))
    assert text_map["purpose"] == 'Reads\t\\N and "quotes"'

    found = json.loads(run(tmp_path, "find", "\\N", "--json"))
    assert ("K.\\N", "exact") in {(h["name"], h["match"]) for h in found["hits"]}
    impact = json.loads(run(tmp_path, "impact", "f", "--json"))
    assert [(h["path"], h["enclosing"]) for h in impact["hits"]] == [("web/odd.js", "K.\\N")]
    assert "web/odd.js:5 in K.\\N (call)" in run(tmp_path, "impact", "f")


def test_import_names_round_trip(tmp_path: Path):
    from workstation.index import storage

    write(tmp_path, {"web/odd.js": ODD_JS})
    with open_map(tmp_path) as km:
        km.index_all()
        rows = km.db.call(storage.unresolved_deps, ["\\N", "\t"], [])
    assert sorted((module, list(names)) for _p, _l, module, names, _line in rows) == [
        ("\t", ["default"]), ("\\N", ["default", '"a\x1fb"'])]
