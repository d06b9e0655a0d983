"""Hostile import sources (issue 19, item 11), judged by effect: a FIFO where a session file goes must not hang
`import` (a path, a folder, --from claude-code, --from codex), and one huge line must not take memory many
times its size: it is named and left out, and the rest of the file imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from workstation.importers.base import MAX_LINE_BYTES

FIX = Path(__file__).parents[1] / "fixtures" / "import"
WORKSTATION = str(Path(sys.executable).with_name("workstation"))


def _run(ws: Path, *args: str, env: dict | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([WORKSTATION, "-C", str(ws), "import", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


def test_a_fifo_never_hangs_an_import(tmp_path):
    from workstation.importers.claude_code import project_dir_name

    ws = tmp_path / "ws"
    ws.mkdir()
    folder = tmp_path / "drop"
    folder.mkdir()
    os.mkfifo(folder / "session.jsonl")
    claude = tmp_path / "claude"
    projects = claude / "projects" / project_dir_name(str(ws.resolve()))
    projects.mkdir(parents=True)
    os.mkfifo(projects / "9f1c2d3e-0000-4000-8000-00000000abcd.jsonl")
    codex = tmp_path / "codex"
    (codex / "sessions" / "2025" / "11" / "02").mkdir(parents=True)
    os.mkfifo(codex / "sessions" / "2025" / "11" / "02" / "rollout-2025-11-02T08-00-00-0199bbbb.jsonl")
    attempts, through = 0, []
    for label, args, env in (("a FIFO named", (str(folder / "session.jsonl"),), None),
                             ("a FIFO in a folder", (str(folder),), None),
                             ("--from claude-code", ("--from", "claude-code"), {"CLAUDE_CONFIG_DIR": str(claude)}),
                             ("--from codex", ("--from", "codex"), {"CODEX_HOME": str(codex)})):
        attempts += 1
        try:
            done = _run(ws, *args, env=env, timeout=20)
        except subprocess.TimeoutExpired:
            through.append(label)
            continue
        assert "Traceback" not in done.stderr, done.stderr
        if label == "a FIFO named":  # named: one line says why it was not read (listed ones are skipped)
            assert "not a regular file" in done.stdout + done.stderr, (done.stdout, done.stderr)
    print(f"FIFO imports: {attempts} attempts, {len(through)} hung {through}")
    assert through == []


def test_one_huge_line_is_named_and_left_out_without_taking_memory_many_times_its_size(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    lines = (FIX / "claude_session.jsonl").read_text().splitlines()
    huge = json.loads(lines[1])
    huge["uuid"] = "00000000-0000-4000-8000-0000000000ff"
    huge["message"] = {"role": "user", "content": "x" * (MAX_LINE_BYTES + (64 << 20))}
    source = tmp_path / "huge.jsonl"
    with open(source, "w") as fh:
        fh.write(lines[0] + "\n" + json.dumps(huge) + "\n" + "\n".join(lines[1:]) + "\n")
    size = source.stat().st_size
    code = ("import resource, subprocess, sys\n"
            "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
            "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
            "sys.stdout.write(done.stdout + done.stderr)")
    done = subprocess.run([sys.executable, "-c", code, WORKSTATION, "-C", str(ws), "import", str(source)],
                          capture_output=True, text=True, timeout=300)
    first, _, said = done.stdout.partition("\n")
    returncode, peak_kb = (int(x) for x in first.split())
    peak = peak_kb * 1024 if sys.platform.startswith("linux") else peak_kb
    print(f"a {size >> 20} MB file with one {len(huge['message']['content']) >> 20} MB line: peak {peak >> 20} MB "
          f"({peak / size:.1f}x its size)")
    assert "Traceback" not in said, said
    assert returncode == 0 and "+16 records" in said, said  # the rest imports
    assert f"line 2: {len(json.dumps(huge)) >> 20} MB, longer than" in said and "left out" in said, said
    assert peak < 2.5 * size, f"peak {peak >> 20} MB for a {size >> 20} MB file"
