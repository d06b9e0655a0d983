"""The tools that change files (write_file, edit_file, delete_file, move_file, replace_lines): what they
do to the bytes of a file, what the model and the log are told, and every way a model could use them
to write where it must not (the model is the attacker)."""

from __future__ import annotations

import os
import subprocess

import pytest

from support.agent_support import agent, module_server, records, tool_results, workspace
from support.fakellm import Reply
from workstation.agent import tools
from workstation.fsutil import atomic_write, sha256_bytes, sweep_staging
from workstation.textdiff import NO_NEWLINE, unified

server_module, server = module_server()


@pytest.fixture
def ws(tmp_path):
    w = workspace(tmp_path, None)
    yield w
    w.close()


@pytest.fixture
def ag(ws):
    a = agent(ws)
    yield a
    a.close()


def call(a, tool, **args):
    return tools.call(a.ctx, tool, args)


def read(a, path):
    """The model reads a whole file (its hash goes in the ledger)."""
    total = max(1, len((a.ws.root / path).read_bytes().splitlines()))
    result = call(a, "read_lines", path=path, start=1, end=total)
    assert result.ok, result.text
    return result


def workspace_litter(root) -> list[str]:
    """Temporary files a write could leave behind in the workspace (its state folder aside)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.name.endswith(".tmp") and ".workstation" not in p.parts)


# --------------------------------------------------------------------------- write_file
def test_write_file_creates_a_module_and_its_folders(ag, ws):
    result = call(ag, "write_file", path="pkg/sub/deep/mod.py", content="def f():\n    return 1\n")
    assert result.ok and result.text == "pkg/sub/deep/mod.py: created (2 lines, 22 bytes)"
    assert (ws.root / "pkg/sub/deep/mod.py").read_bytes() == b"def f():\n    return 1\n"
    (entry,) = result.data["edits"]
    assert entry["op"] == "create" and "before" not in entry and entry["after"] == sha256_bytes(
        b"def f():\n    return 1\n")
    assert entry["diff"].splitlines()[:3] == ["--- /dev/null", "+++ b/pkg/sub/deep/mod.py", "@@ -0,0 +1,2 @@"]
    assert (entry["added"], entry["removed"]) == (2, 0)
    assert oct((ws.root / "pkg/sub/deep/mod.py").stat().st_mode & 0o777) == "0o644"
    # re-indexed at once: the next map read knows it
    meta = call(ag, "file_meta", path="pkg/sub/deep/mod.py")
    assert meta.ok and "def f()" in meta.text
    assert workspace_litter(ws.root) == []


def test_write_file_overwrites_only_what_was_read_and_unchanged(ag, ws):
    refused = call(ag, "write_file", path="pkg/util.py", content="x = 1\n")
    assert not refused.ok and refused.text == (
        "error: pkg/util.py: read it before overwriting it (read_lines or file_meta)")
    read(ag, "pkg/util.py")
    (ws.root / "pkg/util.py").write_text("# the user's change\n")
    stale = call(ag, "write_file", path="pkg/util.py", content="x = 1\n")
    assert not stale.ok and "changed on disk since you last read it" in stale.text
    assert (ws.root / "pkg/util.py").read_text() == "# the user's change\n"
    read(ag, "pkg/util.py")
    done = call(ag, "write_file", path="pkg/util.py", content="x = 1\n")
    assert done.ok and done.text.startswith("pkg/util.py: overwritten (1 line; +1 -1)")
    assert "-# the user's change\n+x = 1" in done.text  # the model sees the diff
    again = call(ag, "write_file", path="pkg/util.py", content="x = 1\n")  # its own write counts as read
    assert again.ok and again.text.startswith("pkg/util.py: unchanged") and "edits" not in again.data


def test_write_file_keeps_crlf_bom_and_mode_and_adds_no_newline(ag, ws):
    target = ws.root / "win.txt"
    target.write_bytes("\ufeffone\r\ntwo\r\n".encode())
    target.chmod(0o755)
    read(ag, "win.txt")
    assert call(ag, "write_file", path="win.txt", content="uno\ndos\ntres").ok
    assert target.read_bytes() == "\ufeffuno\r\ndos\r\ntres".encode()  # no final newline was asked for
    assert target.stat().st_mode & 0o777 == 0o755
    created = call(ag, "write_file", path="plain.txt", content="no newline")
    assert created.data["edits"][0]["diff"].endswith("+no newline\n" + NO_NEWLINE)


def test_write_file_refuses_folders_and_huge_content(ag, ws):
    folder = call(ag, "write_file", path="pkg", content="x")
    assert not folder.ok and folder.text == "error: pkg: is a directory"
    os.mkfifo(ws.root / "pipe")
    fifo = call(ag, "write_file", path="pipe", content="x")  # opening a FIFO would wait for a writer forever
    assert not fifo.ok and fifo.text == "error: pipe: not a regular file (a FIFO): refused"
    huge = call(ag, "write_file", path="big.txt", content="x" * 8_000_001)
    assert not huge.ok and "write_file writes at most 8,000,000" in huge.text and not (ws.root / "big.txt").exists()
    wrong = call(ag, "write_file", path="a.txt", content={"nested": ["json"]})
    assert not wrong.ok and wrong.text == "error: content must be a string, got dict"


# --------------------------------------------------------------------------- edit_file
def test_edit_file_replaces_exact_text_and_shows_the_diff(ag, ws):
    read(ag, "pkg/core.py")
    result = call(ag, "edit_file", path="pkg/core.py", old="    return 1\n", new="    return 2\n")
    assert result.ok and result.text.splitlines()[0] == "pkg/core.py: replaced the text (line 18); +1 -1"
    # one line of context: the model sent the new text, the result shows where it landed
    assert result.text.splitlines()[1:] == ["@@ -17,2 +17,2 @@", " def _private() -> int:",
                                            "-    return 1", "+    return 2"]
    assert (ws.root / "pkg/core.py").read_text().endswith("def _private() -> int:\n    return 2\n")
    assert result.data["lines"] == [18, 18] and result.data["lines_changed"] == 1
    # the model's own edit counts as its read: a second edit needs no new read
    second = call(ag, "edit_file", path="pkg/core.py", old="def _private() -> int:\n    return 2\n",
                  new="def _private() -> int:\n    value = 2\n    return value\n")
    assert second.ok and second.data["lines"] == [17, 19]


def test_edit_file_missing_ambiguous_and_stale_text_are_refused_in_one_line(ag, ws):
    before = (ws.root / "pkg/core.py").read_bytes()
    unread = call(ag, "edit_file", path="pkg/core.py", old="return 1", new="return 2")
    assert unread.text == "error: pkg/core.py: read it before editing it (read_lines or file_meta)"
    read(ag, "pkg/core.py")
    missing = call(ag, "edit_file", path="pkg/core.py", old="return 7", new="return 8")
    assert missing.text == ("error: pkg/core.py: old text not found; read the lines again and copy them exactly "
                            "(whitespace and indentation count)")
    spaced = call(ag, "edit_file", path="pkg/core.py", old="def parse(text: str)  -> str:", new="x")
    assert "(its first line is at line 12 with other spacing)" in spaced.text
    later = call(ag, "edit_file", path="pkg/core.py", old="def parse(text: str) -> str:\n    return 0\n", new="x")
    assert "(its first line is at line 12: a later line differs)" in later.text
    twice = call(ag, "edit_file", path="pkg/core.py", old='"""', new="'''")
    assert twice.text == ("error: pkg/core.py: old text matches 6 times (lines 1, 7, 13); include more "
                          "surrounding lines to make it unique, or set replace_all")
    same = call(ag, "edit_file", path="pkg/core.py", old="return 1", new="return 1")
    assert same.text == "error: old and new are the same text: nothing to change"
    empty = call(ag, "edit_file", path="pkg/core.py", old="", new="x")
    assert empty.text.startswith("error: old is empty")
    gone = call(ag, "edit_file", path="pkg/none.py", old="a", new="b")
    assert gone.text == "error: pkg/none.py: no such file (write_file creates files)"
    for result in (missing, spaced, later, twice, same, empty, gone):
        assert not result.ok and "\n" not in result.text
    assert (ws.root / "pkg/core.py").read_bytes() == before
    (ws.root / "pkg/core.py").write_text(before.decode() + "# the user's line\n")
    stale = call(ag, "edit_file", path="pkg/core.py", old="return 1", new="return 2")
    assert not stale.ok and "changed on disk since you last read it" in stale.text
    assert (ws.root / "pkg/core.py").read_text().endswith("# the user's line\n")


def test_edit_file_replace_all(ag, ws):
    read(ag, "pkg/core.py")
    result = call(ag, "edit_file", path="pkg/core.py", old='"""', new="'''", replace_all=True)
    assert result.ok and result.text.startswith("pkg/core.py: replaced 6 occurrences (the first at line 1)")
    assert '"""' not in (ws.root / "pkg/core.py").read_text()
    bad = call(ag, "edit_file", path="pkg/core.py", old="'''", new='"', replace_all="yes")
    assert not bad.ok and bad.text == "error: replace_all must be true or false, got 'yes'"


def test_edit_file_keeps_a_crlf_file_crlf_and_a_missing_final_newline_missing(ag, ws):
    target = ws.root / "win.py"
    target.write_bytes(b"a = 1\r\nb = 2\r\nc = 3")
    read(ag, "win.py")
    result = call(ag, "edit_file", path="win.py", old="a = 1\nb = 2\n", new="a = 10\nb = 20\nb2 = 21\n")
    assert result.ok, result.text
    assert target.read_bytes() == b"a = 10\r\nb = 20\r\nb2 = 21\r\nc = 3"
    tail = call(ag, "edit_file", path="win.py", old="c = 3", new="c = 30")
    assert tail.ok and target.read_bytes().endswith(b"b2 = 21\r\nc = 30")
    assert tail.text.splitlines()[-2:] == ["+c = 30", NO_NEWLINE]


def test_edit_file_refuses_a_file_that_is_not_utf8(ag, ws):
    (ws.root / "latin.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    ag.ctx.services.ledger.saw("latin.txt", sha256_bytes((ws.root / "latin.txt").read_bytes()))
    result = call(ag, "edit_file", path="latin.txt", old="caf", new="bar")
    assert not result.ok and result.text == "error: latin.txt: not a UTF-8 text file"


# --------------------------------------------------------------------------- delete_file
def test_delete_file(ag, ws):
    data = (ws.root / "pkg/util.py").read_bytes()
    result = call(ag, "delete_file", path="pkg/util.py")
    assert result.ok and result.text == f"pkg/util.py: deleted (10 lines, {len(data)} bytes)"
    assert not (ws.root / "pkg/util.py").exists()
    (entry,) = result.data["edits"]
    assert entry["op"] == "delete" and entry["before"] == sha256_bytes(data) and "after" not in entry
    assert entry["diff"].startswith("--- a/pkg/util.py\n+++ /dev/null\n@@ -1,10 +0,0 @@") and entry["removed"] == 10
    assert call(ag, "find", query="Cleaner").text.startswith("nothing matches 'Cleaner'")  # gone from the map
    again = call(ag, "delete_file", path="pkg/util.py")
    assert not again.ok and again.text == "error: pkg/util.py: no such file"
    folder = call(ag, "delete_file", path="pkg")
    assert not folder.ok and folder.text == "error: pkg: is a directory" and (ws.root / "pkg/core.py").exists()


def test_delete_file_removes_no_symlink_and_nothing_it_points_to(ag, ws):
    (ws.root / "alias.py").symlink_to(ws.root / "pkg/core.py")
    result = call(ag, "delete_file", path="alias.py")
    assert not result.ok and result.text == ("error: alias.py is a symbolic link (to pkg/core.py); delete_file "
                                             "removes regular files only")
    assert (ws.root / "alias.py").is_symlink() and (ws.root / "pkg/core.py").exists()


# --------------------------------------------------------------------------- move_file
def test_move_file(ag, ws):
    data = (ws.root / "pkg/util.py").read_bytes()
    (ws.root / "pkg/util.py").chmod(0o750)
    result = call(ag, "move_file", src="pkg/util.py", dst="lib/helpers/util.py")
    assert result.ok and result.text == "pkg/util.py moved to lib/helpers/util.py"
    assert not (ws.root / "pkg/util.py").exists() and (ws.root / "lib/helpers/util.py").read_bytes() == data
    assert (ws.root / "lib/helpers/util.py").stat().st_mode & 0o777 == 0o750
    out, into = result.data["edits"]
    assert (out["path"], out["op"], out["to"], out["before"], "after" in out) == (
        "pkg/util.py", "move", "lib/helpers/util.py", sha256_bytes(data), False)
    assert (into["path"], into["from"], into["after"], "before" in into) == (
        "lib/helpers/util.py", "pkg/util.py", sha256_bytes(data), False)
    assert out["diff"] == "rename from pkg/util.py\nrename to lib/helpers/util.py"
    assert tools.get("move_file").label("move_file", {"src": "a", "dst": "b"}) == "move_file(a → b)"
    assert "lib/helpers/util.py" in call(ag, "find", query="Cleaner").text  # re-indexed under its new name
    # a move is not a read: the agent never saw this file
    unread = call(ag, "edit_file", path="lib/helpers/util.py", old="class Cleaner", new="class Scrubber")
    assert not unread.ok and "read it before editing it" in unread.text
    # what it read under the old name it knows under the new one
    read(ag, "pkg/core.py")
    assert call(ag, "move_file", src="pkg/core.py", dst="pkg/fetching.py").ok
    assert call(ag, "edit_file", path="pkg/fetching.py", old="def _private()", new="def _hidden()").ok


def test_move_file_never_overwrites_and_never_moves_a_link(ag, ws):
    core = (ws.root / "pkg/core.py").read_bytes()
    taken = call(ag, "move_file", src="pkg/util.py", dst="pkg/core.py")
    assert not taken.ok and taken.text == ("error: pkg/core.py exists: move_file never overwrites (delete it "
                                           "first, or pick another name)")
    (ws.root / "dangling").symlink_to(ws.root / "nowhere.py")
    dangling = call(ag, "move_file", src="pkg/util.py", dst="dangling")
    assert not dangling.ok and "exists: move_file never overwrites" in dangling.text
    assert not (ws.root / "nowhere.py").exists()
    (ws.root / "alias.py").symlink_to(ws.root / "pkg/util.py")
    link = call(ag, "move_file", src="alias.py", dst="moved.py")
    assert not link.ok and "is a symbolic link (to pkg/util.py)" in link.text
    same = call(ag, "move_file", src="pkg/util.py", dst="pkg/../pkg/util.py")
    assert not same.ok and same.text == "error: pkg/util.py and pkg/../pkg/util.py are the same file"
    missing = call(ag, "move_file", src="pkg/none.py", dst="x.py")
    assert not missing.ok and missing.text == "error: pkg/none.py: no such file"
    assert (ws.root / "pkg/core.py").read_bytes() == core and (ws.root / "pkg/util.py").exists()


# --------------------------------------------------------------------------- diffs
def _apply(before: str, diff: str) -> list[str]:
    """Apply a unified diff of ours (hunks only) to `before`: the test that the diff is right."""
    old = before.splitlines()
    out, at = [], 0
    lines = diff.splitlines()[2:]
    i = 0
    while i < len(lines):
        head = lines[i]
        assert head.startswith("@@ "), head
        start = int(head.split()[1][1:].split(",")[0])
        length = int(head.split()[1].split(",")[1]) if "," in head.split()[1] else 1
        first = start - 1 if length else start
        out += old[at:first]
        at = first
        i += 1
        while i < len(lines) and not lines[i].startswith("@@ "):
            mark, text = lines[i][:1], lines[i][1:]
            if mark == " ":
                assert old[at] == text
                out.append(text)
                at += 1
            elif mark == "-":
                assert old[at] == text
                at += 1
            elif mark == "+":
                out.append(text)
            i += 1
    return out + old[at:]


def test_diffs_apply_back_to_the_new_version():
    import random

    rnd = random.Random(7)
    for _ in range(400):
        a = [f"line {rnd.randint(0, 12)}" for _ in range(rnd.randint(0, 60))]
        b = list(a)
        for _ in range(rnd.randint(1, 5)):
            op = rnd.choice("ida")
            if op == "i":
                b.insert(rnd.randint(0, len(b)), f"new {rnd.randint(0, 9)}")
            elif b and op == "d":
                b.pop(rnd.randrange(len(b)))
            elif b:
                b[rnd.randrange(len(b))] = f"changed {rnd.randint(0, 9)}"
        before, after = "".join(f"{line}\n" for line in a), "".join(f"{line}\n" for line in b)
        diff = unified(before, after, "a/x", "b/x")
        if a == b:
            assert diff.text == ""
            continue
        assert _apply(before, diff.text) == b
        assert diff.added == sum(1 for line in diff.text.splitlines()[2:] if line.startswith("+"))


def test_the_model_sees_a_diff_cut_to_its_budget_and_the_log_keeps_it_whole(ag, ws):
    (ws.root / "long.txt").write_text("".join(f"line {i}\n" for i in range(400)))
    read(ag, "long.txt")
    result = call(ag, "write_file", path="long.txt", content="".join(f"LINE {i}\n" for i in range(400)))
    assert result.ok and len(result.text) < 1400 and "more diff lines not shown]" in result.text
    assert result.data["edits"][0]["diff"].count("\n") == 2 + 800


# --------------------------------------------------------------------------- through the model loop
def test_the_model_creates_a_module_and_its_test(tmp_path, server):
    w = workspace(tmp_path, server.url)
    a = agent(w)
    module = "def slug(text: str) -> str:\n    return '-'.join(text.lower().split())\n"
    test = "from pkg.slug import slug\n\n\ndef test_slug():\n    assert slug('A b') == 'a-b'\n"
    server.push(Reply(tool_calls=[("write_file", {"path": "pkg/slug.py", "content": module}),
                                  ("write_file", {"path": "tests/test_slug.py", "content": test})]),
                Reply(tool_calls=[("edit_file", {"path": "pkg/slug.py", "old": "'-'.join", "new": "'_'.join"})]),
                Reply(tool_calls=[("edit_file", {"path": "tests/test_slug.py", "old": "'a-b'", "new": "'a_b'"})]),
                Reply(text="Done."))
    assert a.run("add a slug helper and its test").error is None
    assert (w.root / "pkg/slug.py").read_text() == module.replace("'-'.join", "'_'.join")
    assert "'a_b'" in (w.root / "tests/test_slug.py").read_text()
    ran = subprocess.run([os.sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_slug.py"],
                         cwd=w.root, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(w.root)})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    results = records(a.session, "tool")
    assert [r["ok"] for r in results] == [True] * 4
    assert [r["edits"][0]["op"] for r in results] == ["create", "create", "edit", "edit"]
    assert results[2]["edits"][0]["diff"].endswith("-    return '-'.join(text.lower().split())\n"
                                                   "+    return '_'.join(text.lower().split())")
    # the model saw the diff of its edit
    sent = server.requests[-1]["messages"]
    (name, _, content), = tool_results(sent)
    assert name == "edit_file" and "+from pkg.slug import slug" not in content and "+    assert slug('A b') == 'a_b'" \
        in content
    a.close()
    w.close()


# --------------------------------------------------------------------------- the model as an attacker
@pytest.fixture(scope="module")
def trap(tmp_path_factory):
    """A workspace with a git folder, a nested repository, a state folder and symlinks into each."""
    tmp = tmp_path_factory.mktemp("attacks")
    w = workspace(tmp, None)
    root = w.root
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "init", "-q", str(root / "vendor")], check=True)
    w.paths.config_file.write_text('[agent]\ncommand_allow = ["git status"]\n')
    (tmp / "outside.txt").write_text("outside\n")
    (root / "gitlink").symlink_to(root / ".git")
    (root / "gitconfig").symlink_to(root / ".git" / "config")
    (root / "hooklink").symlink_to(root / ".git" / "hooks" / "pre-commit")  # dangling: no such hook yet
    (root / "statelink").symlink_to(w.paths.state)
    (root / "cfglink").symlink_to(w.paths.config_file)
    (root / "outlink").symlink_to(tmp)
    (root / "victim.txt").write_text("the user's file\n")
    a = agent(w)
    protected = {p: p.read_bytes() for p in [root / ".git/config", root / "vendor/.git/config",
                                             w.paths.config_file, tmp / "outside.txt"]}
    yield a, tmp, protected
    a.close()
    w.close()


TARGETS = ["../outside.txt", "{tmp}/outside.txt", "outlink/outside.txt", "outlink/new.txt",
           ".git/config", ".GIT/config", ".git/hooks/pre-commit", "./.git/../.git/config", ".g\u200cit/config",
           ".git./config", "vendor/.git/config", "gitlink/config", "gitconfig", "hooklink",
           ".workstation/config.toml", ".WORKSTATION/config.toml", "statelink/config.toml", "cfglink"]
REFUSALS = ("is outside the workspace", "in a .git folder", "in the workspace's state folder")


def _attack(tool: str, target: str) -> list[dict]:
    """Arguments of `tool` aimed at `target` (both ends of a move)."""
    return {"write_file": [{"path": target, "content": "[core]\n\tfsmonitor = touch /tmp/pwned\n"}],
            "edit_file": [{"path": target, "old": "[core]", "new": "[core]\n\tfsmonitor = touch /tmp/pwned"}],
            "replace_lines": [{"path": target, "start": 1, "end": 1, "content": "[core] fsmonitor = x"}],
            "delete_file": [{"path": target}],
            "move_file": [{"src": "victim.txt", "dst": target}, {"src": target, "dst": "stolen.txt"}]}[tool]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("tool", ["write_file", "edit_file", "replace_lines", "delete_file", "move_file"])
def test_writes_outside_the_workspace_in_git_or_in_the_state_folder_are_refused(trap, tool, target):
    a, tmp, protected = trap
    if tools.get(tool) is None:
        pytest.skip(f"{tool} is not declared yet")
    for args in _attack(tool, target.format(tmp=tmp)):
        for rel in (target, "victim.txt"):  # even a (forged) read does not open the door
            a.ctx.services.ledger.saw(rel.format(tmp=tmp), "anything")
        result = call(a, tool, **args)
        assert not result.ok and any(r in result.text for r in REFUSALS), result.text
        assert "\n" not in result.text
    for path, data in protected.items():
        assert path.read_bytes() == data, path
    root = a.ws.root
    assert not (root / ".git/hooks/pre-commit").exists() and not (tmp / "new.txt").exists()
    assert (root / "victim.txt").read_text() == "the user's file\n" and not (root / "stolen.txt").exists()


def test_reading_git_is_still_fine(trap):
    a, _, _ = trap
    assert call(a, "read_lines", path=".git/config", start=1, end=2).ok


def test_an_attack_through_the_model_loop_with_deeply_nested_arguments(tmp_path, server):
    w = workspace(tmp_path, server.url)
    subprocess.run(["git", "init", "-q", str(w.root)], check=True)
    config = (w.root / ".git/config").read_bytes()
    a = agent(w)
    deep = '{"path": "x.py", "content": ' + "[" * 100_000 + "]" * 100_000 + "}"
    server.push(Reply(tool_calls=[("write_file", {"path": ".git/config", "content": "[core]\n\tfsmonitor = x\n"}),
                                  ("edit_file", {"path": "../repo/.git/config", "old": "[core]", "new": "x"}),
                                  ("write_file", deep),
                                  ("write_file", {"path": "y.py", "content": {"a": [[[["deep"]]]]}})],
                      tool_call_style="whole"),
                Reply(text="refused, fine"))
    assert a.run("make git run my program").error is None
    results = records(a.session, "tool")
    assert [r["ok"] for r in results] == [False] * 4
    assert "in a .git folder" in results[0]["content"] and "in a .git folder" in results[1]["content"]
    assert "nested" in results[2]["content"] or "malformed" in results[2]["content"]
    assert results[3]["content"] == "error: content must be a string, got dict"
    assert (w.root / ".git/config").read_bytes() == config
    assert not (w.root / "x.py").exists() and not (w.root / "y.py").exists()
    a.close()
    w.close()


# --------------------------------------------------------------------------- temporary files
def test_atomic_writes_keep_their_temporary_files_out_of_the_workspace(tmp_path):
    staging = tmp_path / "state" / "tmp"
    target = tmp_path / "work" / "a.txt"
    target.parent.mkdir()
    atomic_write(target, b"one", staging=staging)
    assert target.read_bytes() == b"one" and sorted(os.listdir(target.parent)) == ["a.txt"]
    # a writer killed mid-write left its temporary file in staging (and a note naming one elsewhere)
    dead = _dead_pid()
    (staging / f"{dead}-abc.tmp").write_bytes(b"partial")
    orphan = target.parent / f".a.txt.ws-{dead}-xyz.tmp"
    orphan.write_bytes(b"partial")
    (staging / f"{dead}-xyz.note").write_text(str(orphan))
    (staging / f"{os.getpid()}-live.tmp").write_bytes(b"mine, still writing")
    assert sweep_staging(staging) == 2
    assert not orphan.exists() and sorted(os.listdir(staging)) == [f"{os.getpid()}-live.tmp"]


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_the_staging_folder_on_another_filesystem_falls_back_beside_the_file(tmp_path, monkeypatch):
    from workstation import fsutil

    staging = tmp_path / "state" / "tmp"
    target = tmp_path / "a.txt"
    monkeypatch.setattr(fsutil, "_same_filesystem", lambda a, b: False)
    seen = []
    real_rename = os.rename

    def spy(src, dst, *, src_dir_fd=None, dst_dir_fd=None):  # the temporary file is renamed by folder descriptor
        seen.append((os.readlink(f"/proc/self/fd/{src_dir_fd}"), sorted(os.listdir(staging))))
        return real_rename(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    monkeypatch.setattr(os, "rename", spy)
    atomic_write(target, b"data", staging=staging)
    assert target.read_bytes() == b"data"
    (where, notes), = seen
    assert where == str(tmp_path) and len(notes) == 1 and notes[0].endswith(".note")  # named while it existed
    assert os.listdir(staging) == [] and sorted(os.listdir(tmp_path)) == ["a.txt", "state"]
