import os
import stat
import threading
import time

import pytest

from workstation.agent.tools.shellrun import allowed, run_command
from workstation.agent.tools.fileio import ReadLedger, grep, read_lines, replace_lines
from workstation.errors import WorkstationError
from workstation.fsutil import OutsideWorkspace, StateFolder, atomic_write


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.py").write_text("one\ntwo\nthree\nfour\n")
    (tmp_path / "secret.txt").write_text("s3cret\n")
    return root


@pytest.mark.parametrize("path", ["../secret.txt", "sub/../../secret.txt"])
def test_relative_escape_refused(ws, path):
    with pytest.raises(OutsideWorkspace):
        read_lines(ws, path, 1, 1)


def test_absolute_outside_refused_inside_allowed(ws, tmp_path):
    with pytest.raises(OutsideWorkspace):
        read_lines(ws, str(tmp_path / "secret.txt"), 1, 1)
    assert read_lines(ws, str(ws / "a.py"), 2, 2).text == "two\n"


def test_symlink_escape_refused(ws, tmp_path):
    (ws / "link.txt").symlink_to(tmp_path / "secret.txt")
    (ws / "dirlink").symlink_to(tmp_path)
    with pytest.raises(OutsideWorkspace):
        read_lines(ws, "link.txt", 1, 1)
    with pytest.raises(OutsideWorkspace):
        read_lines(ws, "dirlink/secret.txt", 1, 1)
    ledger = ReadLedger()
    with pytest.raises(OutsideWorkspace):
        replace_lines(ws, "link.txt", 1, 1, "x", ledger)
    assert (tmp_path / "secret.txt").read_text() == "s3cret\n"


def test_the_state_folder_is_refused_whatever_the_path(ws):
    state = ws / ".workstation"
    state.mkdir()
    config = state / "config.toml"
    config.write_text('[agent]\ncommand_allow = ["pytest"]\n')
    (ws / "cfg.toml").symlink_to(config)  # a link into the state folder
    (ws / "st").symlink_to(state)
    ledger = ReadLedger()
    for path in (".workstation/config.toml", str(config), "pkg/../.workstation/config.toml", "cfg.toml",
                 "st/config.toml"):
        with pytest.raises(StateFolder) as err:
            read_lines(ws, path, 1, 1, ledger)
        assert "state folder" in str(err.value) and "\n" not in str(err.value)
        ledger.saw(".workstation/config.toml", "forged")  # not even a (forged) read opens the door
        with pytest.raises(StateFolder):
            replace_lines(ws, path, 2, 2, 'command_allow = ["rm"]', ledger)
    assert config.read_text() == '[agent]\ncommand_allow = ["pytest"]\n'
    hits, truncated, unread = grep(ws, "command_allow", ["a.py", "cfg.toml", ".workstation/config.toml"])
    assert hits == [] and not truncated
    assert [rel for rel, _ in unread] == ["cfg.toml", ".workstation/config.toml"]  # named, never opened


def test_a_moved_state_folder_is_refused_too(ws):
    moved = ws / "var" / "state"
    moved.mkdir(parents=True)
    (moved / "log.jsonl").write_text("{}\n")
    with pytest.raises(StateFolder):
        read_lines(ws, "var/state/log.jsonl", 1, 1, private=[moved])
    assert read_lines(ws, "var/state/log.jsonl", 1, 1).text == "{}\n"  # not private unless said so


def test_read_lines_is_one_indexed_inclusive(ws):
    lines = read_lines(ws, "a.py", 2, 3)
    assert lines.text == "two\nthree\n"
    assert lines.numbered().splitlines() == ["2| two", "3| three"]
    assert lines.total == 4


@pytest.mark.parametrize("start,end", [(0, 1), (5, 6), (3, 2)])
def test_read_lines_out_of_range_is_one_line_error(ws, start, end):
    with pytest.raises(WorkstationError) as err:
        read_lines(ws, "a.py", start, end)
    assert "out of range" in str(err.value) and "\n" not in str(err.value)


def test_replace_requires_a_fresh_read(ws):
    ledger = ReadLedger()
    with pytest.raises(WorkstationError, match="read it before"):
        replace_lines(ws, "a.py", 1, 1, "ONE", ledger)
    read_lines(ws, "a.py", 1, 2, ledger)
    (ws / "a.py").write_text("one\ntwo\nTHREE\nfour\n")  # someone else edits
    with pytest.raises(WorkstationError, match="changed on disk"):
        replace_lines(ws, "a.py", 1, 1, "ONE", ledger)
    assert (ws / "a.py").read_text() == "one\ntwo\nTHREE\nfour\n"


def test_replace_insert_and_delete(ws):
    ledger = ReadLedger()
    read_lines(ws, "a.py", 1, 4, ledger)
    assert replace_lines(ws, "a.py", 2, 3, "TWO\nTHREE\nTHREE-B", ledger) == ("a.py", 2, 4)
    assert (ws / "a.py").read_text() == "one\nTWO\nTHREE\nTHREE-B\nfour\n"
    replace_lines(ws, "a.py", 1, 0, "zero", ledger)  # insert before line 1
    assert (ws / "a.py").read_text().startswith("zero\none\n")
    replace_lines(ws, "a.py", 2, 2, "", ledger)  # delete line 2
    assert (ws / "a.py").read_text() == "zero\nTWO\nTHREE\nTHREE-B\nfour\n"
    with pytest.raises(WorkstationError, match="out of range"):
        replace_lines(ws, "a.py", 9, 9, "x", ledger)


def test_atomic_write_keeps_mode_and_leaves_no_temp(tmp_path):
    target = tmp_path / "f.sh"
    target.write_text("old")
    os.chmod(target, 0o755)
    atomic_write(target, b"new")
    assert target.read_bytes() == b"new"
    assert target.stat().st_mode & 0o777 == 0o755
    assert [p.name for p in tmp_path.iterdir()] == ["f.sh"]


def test_grep(ws):
    hits, truncated, unread = grep(ws, r"t(wo|hree)", ["a.py", "missing.py"])
    assert [(h.path, h.line) for h in hits] == [("a.py", 2), ("a.py", 3)] and not truncated
    assert unread == [("missing.py", "no such file")]
    with pytest.raises(WorkstationError, match="invalid pattern"):
        grep(ws, "(", ["a.py"])


def test_allow_list_matching():
    allow = ["git status", "pytest", "env FOO=1 make"]
    assert allowed("git status --short", allow)
    assert allowed("pytest -q tests/x.py", allow)
    assert not allowed("git push", allow)
    assert not allowed("pytest; rm -rf /", allow)  # shell syntax never matches
    assert not allowed("sh -c 'pytest'", allow + ["sh"])  # a wrapper needs an exact entry
    assert not allowed("env rm -rf /", allow + ["env"])
    assert not allowed("xargs rm", allow + ["xargs"])
    assert allowed("env FOO=1 make", allow)


def test_run_command_needs_approval(ws):
    calls = []
    with pytest.raises(WorkstationError, match="you refused: 'echo hi'"):
        run_command("echo hi", ws, allow=[], approve=lambda req: calls.append(req.subject) or False,
                    timeout_s=5, max_output_chars=100)
    assert calls == ["echo hi"]
    res = run_command("echo hi", ws, allow=[], approve=lambda c: True, timeout_s=5, max_output_chars=100)
    assert res.output.strip() == "hi" and res.exit_code == 0 and res.approved_by == "user"
    res = run_command("echo hi", ws, allow=["echo"], approve=None, timeout_s=5, max_output_chars=100)
    assert res.approved_by == "allow-list"


def test_run_command_timeout_and_cap(ws):
    res = run_command("sleep 5", ws, allow=["sleep"], approve=None, timeout_s=0.3, max_output_chars=100)
    assert res.exit_code is None and "timed out" in res.output and res.duration_s < 3
    res = run_command("seq 1 10000", ws, allow=["seq"], approve=None, timeout_s=5, max_output_chars=200)
    assert res.truncated and len(res.output) < 300


# --------------------------------------------------------------------------- inputs that must not hang
def _special_files(ws):
    os.mkfifo(ws / "pipe")
    made = ["pipe"]
    try:
        os.mknod(ws / "zero", 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero, inside the workspace
        made.append("zero")
    except PermissionError:
        pass  # not root: the FIFO alone
    return made


def test_a_fifo_or_a_device_in_the_workspace_is_one_line_not_a_hang(ws):
    for name in _special_files(ws):
        started = time.monotonic()
        with pytest.raises(WorkstationError) as err:
            read_lines(ws, name, 1, 1)
        assert "not a regular file" in str(err.value) and "\n" not in str(err.value)
        assert time.monotonic() - started < 2
    started = time.monotonic()
    hits, _, unread = grep(ws, "one", ["pipe", "zero", "a.py"])
    assert [h.path for h in hits] == ["a.py"] and time.monotonic() - started < 2
    assert [rel for rel, why in unread if "not a regular file" in why] == [
        name for name in ("pipe", "zero") if os.path.lexists(ws / name)]


def test_a_hung_filesystem_gives_up_in_time(ws, monkeypatch):
    from workstation.agent.tools import fileio as filetools

    release = threading.Event()

    def hung(real, rel):  # a read from a hung network mount: blocks in the kernel, uninterruptible
        release.wait(30)
        raise OSError("released")

    monkeypatch.setattr(filetools, "_open_regular", hung)
    monkeypatch.setattr(filetools, "READ_TIMEOUT_S", 0.5)
    started = time.monotonic()
    with pytest.raises(WorkstationError, match=r"reading a.py: gave up after 0.5s") as err:
        read_lines(ws, "a.py", 1, 1)
    assert "\n" not in str(err.value) and time.monotonic() - started < 2
    with pytest.raises(WorkstationError, match="grep: gave up after 0.5s"):
        grep(ws, "one", ["a.py"], timeout_s=0.5)
    release.set()


@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(a|aa)+$", r"(a*)*b", r"^(\w+\s?)*$"])
def test_catastrophic_patterns_finish_fast(ws, pattern):
    (ws / "long.txt").write_text("a" * 50_000 + "!\n")
    started = time.monotonic()
    hits, *_ = grep(ws, pattern, ["long.txt"])
    assert time.monotonic() - started < 1, "the regex engine backtracked"
    assert hits == []


def test_what_re2_cannot_do_is_refused_in_one_line(ws):
    for pattern in (r"(a)\1", r"foo(?=bar)", "x" * 100 + "{1000}{1000}"):
        with pytest.raises(WorkstationError) as err:
            grep(ws, pattern, ["a.py"])
        assert str(err.value).startswith("invalid pattern") and "\n" not in str(err.value)
    hits, *_ = grep(ws, "T(WO|HREE)", ["a.py"], ignore_case=True)
    assert [h.line for h in hits] == [2, 3]


BODIES = {
    "lf": "a\nbb\n\nccc\n",
    "crlf": "a\r\nbb\r\n\r\nccc",
    "cr": "a\rbb\r\rccc\r",
    "mixed": "a\nb\r\nc\rd\x0ce\x85f\u2028g\u2029h\x1ci\nj",
    "no end": "only one line",
    "unicode": "é\nñ\n日本\n",
}


@pytest.mark.parametrize("name", BODIES)
def test_a_big_file_read_through_its_line_index_reads_as_a_small_one(ws, monkeypatch, name):
    from workstation.agent.tools import fileio as filetools

    (ws / "f.txt").write_bytes(BODIES[name].encode())
    total = len(BODIES[name].splitlines())
    ranges = [(s, e) for s in range(1, total + 1) for e in range(s, total + 1)] + [(1, None)]
    small = [read_lines(ws, "f.txt", s, e) for s, e in ranges]
    monkeypatch.setattr(filetools, "LINE_INDEX_MIN_BYTES", 0)
    big = [read_lines(ws, "f.txt", s, e) for s, e in ranges]
    assert [(b.text, b.start, b.end, b.total, b.sha256) for b in big] == \
        [(s.text, s.start, s.end, s.total, s.sha256) for s in small]
    with pytest.raises(WorkstationError, match=f"out of range \\(file has {total} lines\\)"):
        read_lines(ws, "f.txt", total + 1, total + 1)


def test_a_range_of_a_big_file_costs_the_range_and_a_change_is_seen(ws, monkeypatch):
    from workstation.agent.tools import fileio as filetools

    monkeypatch.setattr(filetools, "LINE_INDEX_MIN_BYTES", 1000)
    path = ws / "big.txt"
    path.write_text("".join(f"line {n}\n" for n in range(1, 20_001)))
    ledger = ReadLedger()
    assert read_lines(ws, "big.txt", 5, 6, ledger).text == "line 5\nline 6\n"

    def no_whole_reads(fd, n):
        raise AssertionError("the whole file was read again")

    monkeypatch.setattr(filetools.os, "read", no_whole_reads)  # later ranges: one pread each
    assert read_lines(ws, "big.txt", 19_999, None).text == "line 19999\nline 20000\n"
    monkeypatch.undo()
    monkeypatch.setattr(filetools, "LINE_INDEX_MIN_BYTES", 1000)
    before = ledger.last("big.txt")
    time.sleep(0.01)
    path.write_text("".join(f"LINE {n}\n" for n in range(1, 20_001)))  # same size, new content
    assert read_lines(ws, "big.txt", 5, 5, ledger).text == "LINE 5\n" and ledger.last("big.txt") != before
    (ws / "bad.txt").write_bytes(b"x" * 2000 + b"\xff\n")
    with pytest.raises(WorkstationError, match="not a UTF-8 text file"):
        read_lines(ws, "bad.txt", 1, 1)
