"""What the status line's git figures cost: `workstation.git.Repo.status()` (branch and dirty count) on a
generated repository. Prints figures, asserts nothing.

    .venv/bin/python benchmarks/bench_git.py [--files 5000] [--runs 20]

Builds a repository of N small files in nested folders (committed), changes 10 and adds 5, then times
`Repo.find` once and `status()` `--runs` times (two git processes each: the config check, then
`git status --porcelain=v2 --branch`). Target: the median under 50 ms at 5,000 files, so the app can
refresh it after every turn and every few seconds without a thread of its own.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workstation.git import Repo  # noqa: E402
import results  # noqa: E402  (benchmarks/results.py, beside this script)

TARGET_MS = 50.0


def make_repo(root: Path, files: int) -> None:
    for n in range(files):
        path = root / f"pkg{n % 40}" / f"sub{n % 7}" / f"mod_{n}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"def f{n}():\n    return {n}\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "files"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True)
    for n in range(10):
        (root / f"pkg{n % 40}" / f"sub{n % 7}" / f"mod_{n}.py").write_text("changed\n")
    for n in range(5):
        (root / f"new_{n}.py").write_text("new\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    run = results.Run("bench_git", vars(args))
    with tempfile.TemporaryDirectory(prefix="ws-bench-git-") as tmp:
        root = Path(tmp)
        make_repo(root, args.files)
        started = time.perf_counter()
        repo = Repo.find(root)
        find_ms = (time.perf_counter() - started) * 1000
        status = repo.status()  # warm the filesystem cache and git's index stat data once
        times = []
        for _ in range(args.runs):
            started = time.perf_counter()
            status = repo.status()
            times.append((time.perf_counter() - started) * 1000)
        median = statistics.median(times)
        print(f"repository: {args.files:,} files, status says {status.label!r} (expected 'main ±15')")
        print(f"Repo.find: {find_ms:.1f} ms (once per workspace)")
        print(f"status(): median {median:.1f} ms, min {min(times):.1f} ms, max {max(times):.1f} ms over "
              f"{args.runs} runs; target < {TARGET_MS:.0f} ms: {'met' if median < TARGET_MS else 'NOT met'}")
        print(f"machine load (1-min average): {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        run.add("Repo.find", find_ms, "ms")
        run.add("status() median", median, "ms")
        run.add("status() max", max(times), "ms")
    run.save()


if __name__ == "__main__":
    main()
