"""Links planted in a shipped `.workstation/` (issue 19, item 4), judged by effect: for every name the state
folder holds, a link to a file or folder outside the workspace with known content is planted, then
`workstation index` and a `chat` turn that writes a file run. Nothing outside the workspace may change (no
truncated file, no file written into a linked folder), and each command ends in one line naming the link and
asking the user to move it aside, never a traceback (workstation.paths.check_state, fsutil.open_state)."""

from __future__ import annotations

import errno
import hashlib
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from support.agent_support import MODEL, write_repo
from support.conftest_llm import FAKE_API_KEY, TEST_KEY_ENV
from support.fakellm import Reply, ScriptedLLM
from support.files import snapshot
from workstation.fsutil import open_state
from workstation.paths import PlantedLink

WORKSTATION = str(Path(sys.executable).with_name("workstation"))
NOTES = "the user's notes: must survive\n"

# (name under .workstation/, planted as a link to a folder?)
PLANTED = [
    ("owner.lock", False), ("owner.sock", False), ("memory.duckdb", False), ("memory.duckdb.wal", False),
    ("index.duckdb", False), ("index.duckdb.wal", False), ("search-0.heap", False), ("sidecar.log", False),
    (".gitignore", False), ("config.toml", False), ("instructions.md", False), ("ignore", False),
    ("sessions", True), ("sessions/archive", True), ("sessions/.locks", True), ("checkpoints", True),
    ("checkpoints/BLOB", True), ("tmp", True), ("mcp", True), ("exports", True),
    ("", True),  # "": the .workstation folder itself
]


def plant(tmp_path: Path, name: str, folder: bool) -> tuple[Path, Path, Path]:
    """(the repository, the outside folder holding the link's target, the link)."""
    root = write_repo(tmp_path / "repo")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text(NOTES)
    (outside / "dir").mkdir()
    (outside / "dir" / "keep.txt").write_text(NOTES)
    if name == "checkpoints/BLOB":  # the folder the chat turn's checkpoint of pkg/__init__.py goes to
        name = "checkpoints/" + hashlib.sha256((root / "pkg/__init__.py").read_bytes()).hexdigest()[:2]
    link = root / ".workstation" / name if name else root / ".workstation"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside / "dir" if folder else outside / "notes.txt")
    return root, outside, link


def run(root: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "WORKSTATION_HOME": str(home), TEST_KEY_ENV: FAKE_API_KEY,
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("WORKSTATION_MODEL", None)
    return subprocess.run([WORKSTATION, "-C", str(root), *args], capture_output=True, text=True, timeout=int(os.environ.get("PLANT_TIMEOUT", 120)),
                          env=env, stdin=subprocess.DEVNULL)


def test_no_planted_link_in_the_state_folder_is_followed(tmp_path: Path):
    attempts, through = 0, []
    for i, (name, folder) in enumerate(PLANTED):
        case = tmp_path / f"case{i}"
        case.mkdir()
        root, outside, link = plant(case, name, folder)
        before = snapshot(outside)
        home = case / "home"
        home.mkdir()
        with ScriptedLLM() as llm:
            (home / "config.toml").write_text(
                f'[model]\nname = "{MODEL}"\napi_base = "{llm.url}"\napi_key_env = "{TEST_KEY_ENV}"\n'
                "max_retries = 0\ntimeout_s = 10\n")
            llm.push(Reply(tool_calls=[("write_file", {"path": "pkg/__init__.py", "content": "X = 1\n"})]),
                     Reply(text="done"))
            for command in (("index",), ("chat", "rewrite pkg/__init__.py")):
                attempts += 1
                done = run(root, home, *command)
                label = f"{link.relative_to(root)} on {command[0]}"
                lines = done.stderr.strip().splitlines()
                if snapshot(outside) != before or not link.is_symlink():
                    through.append(label)
                assert "Traceback" not in done.stderr, (label, done.stderr)
                assert done.returncode != 0, (label, done.stdout, done.stderr)
                # one line naming the link and what to do, after any trust notice
                assert str(link) in lines[-1] and "move it aside" in lines[-1], (label, done.stderr)
            assert llm.request_log == [], name  # refused before anything was asked of the model
    print(f"planted links: {attempts} attempts ({len(PLANTED)} names x index and chat), "
          f"{len(through)} got through {through}")
    assert through == []


def test_open_state_refuses_a_link_and_a_fifo_and_keeps_a_regular_file_blocking(tmp_path: Path):
    """The open every state file goes through: a link planted after the folder was checked is refused
    too, and so is a FIFO, without hanging."""
    target = tmp_path / "notes.txt"
    target.write_text(NOTES)
    link = tmp_path / "owner.lock"
    link.symlink_to(target)
    with pytest.raises(PlantedLink, match="owner.lock is a symbolic link.*move it aside"):
        open_state(link, os.O_RDWR | os.O_CREAT)
    assert target.read_text() == NOTES
    fifo = tmp_path / "fifo.lock"
    os.mkfifo(fifo)
    result: list = []
    worker = threading.Thread(target=lambda: result.append(_try(fifo)), daemon=True)
    worker.start()
    worker.join(5)
    assert result and isinstance(result[0], PlantedLink), result
    fd = open_state(tmp_path / "real.lock", os.O_RDWR | os.O_CREAT)
    try:
        assert os.get_blocking(fd)
        os.write(fd, b"1")
    finally:
        os.close(fd)
    assert (tmp_path / "real.lock").read_bytes() == b"1"
    with pytest.raises(OSError) as err:
        open_state(tmp_path / "missing" / "x", os.O_RDONLY)
    assert err.value.errno == errno.ENOENT


def _try(path: Path):
    try:
        os.close(open_state(path, os.O_RDONLY))
    except Exception as err:  # the test inspects what was raised
        return err
    return None


# ---------------------------------------------------------------- a planted session (issue 19, items 9 and 11)

def _planted_home(case: Path) -> Path:
    home = case / "home"
    home.mkdir()
    return home


def _session_log(path: Path, records: list[dict]) -> None:
    from workstation.sessions.log import json_line

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(json_line({"v": 1, "ts": "2026-01-01T00:00:00Z", "tokens": 1, **r})
                              for r in records))


def _undo_records(rel: str, before: str, now: str) -> list[dict]:
    """A session whose turn 1 changed `rel` from `before` to `now` (sha256s): its undo restores `before`."""
    return [{"id": "u1", "type": "user", "content": "change it"},
            {"id": "c1", "type": "checkpoint", "turn": "u1", "path": rel, "existed": True, "before": before,
             "mode": 0o644},
            {"id": "a1", "type": "assistant", "content": "", "tool_calls": [
                {"id": "t1", "name": "write_file", "arguments": "{}"}]},
            {"id": "r1", "type": "tool", "tool_call_id": "t1", "name": "write_file", "content": "ok", "ok": True,
             "edits": [{"path": rel, "after": now}]}]


def test_a_planted_session_never_reads_or_writes_through_a_link(tmp_path: Path):
    """A repository ships a session log and checkpoint blobs: a blob that is a link to a file outside, a
    session log that is a link to another workspace's log, a session whose checkpointed file is now a link
    onto another file of the workspace. Undo, show, list, search and export must neither read what a link
    names into the tree or the terminal nor write through it."""
    attempts, through = 0, []
    sha = lambda data: hashlib.sha256(data).hexdigest()  # noqa: E731

    # 1. a checkpoint blob that is a link to a file outside: undo would copy that file into the tree
    case = tmp_path / "blob"
    root = write_repo(case / "repo")
    outside = case / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text(NOTES)
    core = (root / "pkg/core.py").read_bytes()
    secret = sha(NOTES.encode())
    _session_log(root / ".workstation/sessions/evil.jsonl", _undo_records("pkg/core.py", secret, sha(core)))
    blob = root / ".workstation/checkpoints" / secret[:2] / secret
    blob.parent.mkdir(parents=True)
    blob.symlink_to(outside / "notes.txt")
    home = _planted_home(case)
    for command in (("session", "undo", "evil"), ("session", "diff", "evil")):
        attempts += 1
        done = run(root, home, *command)
        assert "Traceback" not in done.stderr, done.stderr
        if (root / "pkg/core.py").read_bytes() != core or NOTES.strip() in done.stdout:
            through.append(f"blob link on {' '.join(command)}")
        assert done.returncode != 0 and "move it aside" in done.stderr, (command, done.stdout, done.stderr)

    # 2. a session log that is a link to a log elsewhere (another workspace's, with its secrets)
    case = tmp_path / "log"
    root = write_repo(case / "repo")
    other = case / "other.jsonl"
    _session_log(other, [{"id": "u1", "type": "user", "content": "the other workspace's OUTSIDE-SECRET"}])
    (root / ".workstation/sessions").mkdir(parents=True)
    (root / ".workstation/sessions/evil.jsonl").symlink_to(other)
    home = _planted_home(case)
    for command in (("session", "list"), ("session", "show", "evil"), ("session", "export", "evil"),
                    ("session", "search", "OUTSIDE-SECRET")):
        attempts += 1
        done = run(root, home, *command)
        assert "Traceback" not in done.stderr, done.stderr
        if "OUTSIDE-SECRET" in done.stdout:
            through.append(f"log link on {' '.join(command)}")
        assert done.returncode != 0 and "move it aside" in done.stderr, (command, done.stdout, done.stderr)

    # 3. undo onto a link the model made (an allow-listed pytest can run os.symlink): the agent's file is now
    # a link to victim.txt, which holds what the agent last left in its file; undo must not delete victim.txt
    # or restore over it
    case = tmp_path / "follow"
    root = write_repo(case / "repo")
    victim = root / "victim.txt"
    victim.write_text("the user's file\n")
    _session_log(root / ".workstation/sessions/evil.jsonl",
                 [*_undo_records("made.txt", "x", sha(victim.read_bytes()))[:1],
                  {"id": "c1", "type": "checkpoint", "turn": "u1", "path": "made.txt", "existed": False},
                  *_undo_records("made.txt", "x", sha(victim.read_bytes()))[2:]])
    (root / "made.txt").symlink_to("victim.txt")
    home = _planted_home(case)
    attempts += 1
    done = run(root, home, "session", "undo", "evil")
    assert "Traceback" not in done.stderr, done.stderr
    if not victim.exists() or victim.read_text() != "the user's file\n":
        through.append("undo through a link")
    assert done.returncode != 0 and "made.txt" in done.stderr, (done.stdout, done.stderr)

    # 4. FIFOs planted where state goes: nothing may hang
    for name, command in (("memory.duckdb", ("memory", "list")), ("index.duckdb", ("index",)),
                          ("sessions/evil.jsonl", ("session", "list")),
                          ("sessions/evil.jsonl", ("session", "show", "evil"))):
        case = tmp_path / f"fifo{attempts}"
        root = write_repo(case / "repo")
        (root / ".workstation" / name).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(root / ".workstation" / name)
        home = _planted_home(case)
        attempts += 1
        try:
            done = run(root, home, *command)
        except subprocess.TimeoutExpired:
            through.append(f"FIFO {name} hung {' '.join(command)}")
            continue
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode != 0 and "move it aside" in done.stderr, (command, done.stdout, done.stderr)
    print(f"planted session: {attempts} attempts, {len(through)} got through {through}")
    assert through == []
