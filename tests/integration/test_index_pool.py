"""The worker pool survives a worker that dies mid-batch: no file is lost."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from workstation.index import indexer


def _children_of(pid: int) -> list[int]:
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(entry))
    return kids


def test_killed_worker_loses_no_file(tmp_path: Path):
    files = {}
    for i in range(120):
        rel = f"m{i:03}.py"
        (tmp_path / rel).write_text("".join(f"def f{i}_{j}(x):\n    return g(x) + {j}\n\n" for j in range(200)))
        files[rel] = str(tmp_path / rel)
    tasks = [(n, rel, path, None) for n, (rel, path) in enumerate(sorted(files.items()), start=1)]
    killed = threading.Event()

    def kill_one_worker():
        from multiprocessing import forkserver

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            server = getattr(forkserver._forkserver, "_forkserver_pid", None)
            workers = _children_of(server) if server else []
            if workers:
                os.kill(workers[0], signal.SIGKILL)
                killed.set()
                return
            time.sleep(0.005)

    killer = threading.Thread(target=kill_one_worker)
    killer.start()
    results = list(indexer.run(tasks, frozenset(files), 1_000_000, 2, [1] * len(tasks)))
    killer.join()
    assert killed.is_set()
    assert sorted(r[2][0] for r in results) == sorted(files)  # every file came back, indexed
    assert {r[0] for r in results} == {"indexed"}
    assert all(r[6] == 200 for r in results)  # with its symbols: only a culprit file loses them


def test_workers_never_import_a_workstation_folder_in_the_cwd(tmp_path: Path):
    """Python 3.11's forkserver puts the current directory first on its path: a folder
    named `workstation` there must not replace this package in the workers."""
    import json
    import subprocess
    import sys

    repo, decoy = tmp_path / "repo", tmp_path / "cwd"
    for i in range(indexer.POOL_MIN_FILES + 2):
        (repo / "pkg").mkdir(parents=True, exist_ok=True)
        (repo / "pkg" / f"m{i}.py").write_text(f"def f{i}():\n    return {i}\n")
    marker = tmp_path / "decoy-imported"
    (decoy / "workstation" / "index").mkdir(parents=True)
    for rel in ("workstation/__init__.py", "workstation/index/__init__.py", "workstation/index/indexer.py"):
        (decoy / rel).write_text(f"open({str(marker)!r}, 'w').close()\nraise SystemExit('decoy')\n")
    script = Path(sys.executable).parent / "workstation"
    proc = subprocess.run([str(script), "-C", str(repo), "index", "--json"], cwd=decoy,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["symbols"] == indexer.POOL_MIN_FILES + 2
    assert not marker.exists()


def test_the_pool_starts_when_stderr_has_no_file_descriptor(tmp_path: Path):
    """Inside the TUI, sys.stderr is Textual's capture (fileno() == -1); multiprocessing's
    resource tracker passes that number to its child and fails unless the pool starts it."""
    import json
    import subprocess
    import sys

    for i in range(indexer.POOL_MIN_FILES + 2):
        (tmp_path / f"m{i}.py").write_text(f"def f{i}():\n    return {i}\n")
    script = f"""
import io, json, sys
from workstation.index import indexer

class Capture(io.StringIO):
    def fileno(self):
        return -1

if __name__ == "__main__":
    files = sorted(p for p in __import__("os").listdir({str(tmp_path)!r}))
    tasks = [(n, rel, {str(tmp_path)!r} + "/" + rel, None) for n, rel in enumerate(files, start=1)]
    sys.stderr = Capture()
    try:
        results = list(indexer.run(tasks, frozenset(files), 1_000_000, 2, [1] * len(tasks)))
    finally:
        sys.stderr = sys.__stderr__  # so a traceback reaches the test
    print(json.dumps(sorted(r[0] for r in results)))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == ["indexed"] * (indexer.POOL_MIN_FILES + 2)


def test_workers_mask_what_their_caller_would(tmp_path: Path, monkeypatch):
    """Workers are handed the secret prefilter and the values their caller holds as secrets: a key format
    and a value registered only in the caller (not in the environment) are masked in what the map keeps."""
    from support.kmap_helpers import open_map, write
    from workstation import scrub

    github = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"
    registered = "only-the-caller-knows-this-1234"
    monkeypatch.setattr(scrub, "_registered", set())
    scrub.register(registered)
    files = {f"pkg/m{i:03}.py": f"def f{i}(x):\n    return x\n" for i in range(indexer.POOL_MIN_FILES + 2)}
    files["pkg/keys.py"] = (f'def connect(token="{github}"):\n    return token\n\n'
                            f'def login(secret="{registered}"):\n    return secret\n')
    write(tmp_path, files)
    pools = []
    real_pool = indexer.Pool

    def spy(*args, **kwargs):
        pools.append(real_pool(*args, **kwargs))
        return pools[-1]

    monkeypatch.setattr(indexer, "Pool", spy)
    with open_map(tmp_path, workers=2) as km:
        km.index_all()
        signatures = {s.qualname: s.signature for s in km.symbols("pkg/keys.py")}
    assert pools  # the workers parsed the files
    assert signatures == {"connect": 'def connect(token="***")', "login": 'def login(secret="***")'}


def test_a_process_handed_the_prefilter_answers_alike_without_importing_the_detectors():
    """The index's worker processes get may_hold_key's pattern from their parent (use_prefilter) rather
    than import detect-secrets to build it (~0.1 s each): same answers, and no detector imported."""
    import json
    import subprocess
    import sys

    from workstation import scrub

    key = "ghp_" + "A1b2C3d4E5" * 3 + "abcdef"
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo\n-----END RSA PRIVATE KEY-----"
    texts = [key, "AKIAIOSFODNN7EXAMPLE", pem, f"x = '{key}'", "def f(x, y=2)", "plain words", "é" * 9]
    script = (
        "import json, sys\n"
        "from workstation import scrub\n"
        "data = json.load(sys.stdin)\n"
        "scrub.use_prefilter(data['source'])\n"
        "answers = [scrub.may_hold_key(t) for t in data['texts']]\n"
        "print(json.dumps([answers, sorted(m for m in sys.modules if m.startswith('detect_secrets'))]))\n")
    done = subprocess.run([sys.executable, "-c", script], input=json.dumps(
        {"source": scrub.prefilter_source(), "texts": texts}), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    answers, imported = json.loads(done.stdout)
    assert answers == [scrub.may_hold_key(t) for t in texts]
    assert answers == [True] * 4 + [False] * 3
    assert imported == []
