"""Writes outside the workspace (issue 29), judged by effect on a folder outside it:

- a process flips a folder of the workspace between a directory and a link to outside while the user runs
  `session undo` (20 runs), and while the file tools write into it: nothing outside may change, because
  every write resolves its path from the workspace root with no link followed at any component
  (fsutil.open_folder_beneath), never checked first and written after;
- a file of the workspace hard-linked to a file outside: never read through the link (read_lines, file_meta,
  grep, over MCP too: the agent's tools share the code), and an edit never writes through it.

The races also run as an unprivileged uid of their own (tests/support/uid.py), where root's
permission to write anywhere cannot hide a fault or make one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import traceback
import time
from pathlib import Path

import pytest

from support.files import snapshot
from workstation.agent.checkpoints import Checkpoints
from workstation.fsutil import sha256_bytes
from workstation.paths import Paths
from workstation.sessions import Session

CLI = [sys.executable, "-m", "workstation"]  # the uid run's interpreter has no `workstation` script beside it
HERE = Path(__file__).resolve().parent
UNDO_RUNS = 20
FILES = 40  # files under the flipped folder one undo restores: its writes span many flips

# Flips `root/sub` between the real folder and a link to `outside` until SIGTERM, then prints how many times. Each
# flip is one atomic exchange of the two names (renameat2 RENAME_EXCHANGE): `sub` is always there, a folder or a link.
FLIPPER = textwrap.dedent("""
    import ctypes, os, random, signal, sys, time
    root, outside = sys.argv[1], sys.argv[2]
    rng = random.Random(int(sys.argv[3]))
    libc = ctypes.CDLL(None, use_errno=True)
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    sub, link = os.path.join(root, "sub").encode(), os.path.join(root, ".sub-link").encode()
    os.symlink(outside, link)
    def exchange():
        if libc.renameat2(AT_FDCWD, sub, AT_FDCWD, link, RENAME_EXCHANGE) != 0:
            raise OSError(ctypes.get_errno(), "renameat2")
    flips, stop = 0, []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    print("go", flush=True)
    while not stop:
        exchange()  # sub: the link
        time.sleep(rng.uniform(0, 0.004))  # for up to 4 ms
        exchange()  # sub: the folder again
        flips += 2
        time.sleep(rng.uniform(0, 0.04))  # for up to 40 ms: long enough for undo's checks to pass
    print(flips, flush=True)
""")


def _agent_changed(root: Path, slug: str) -> None:
    """A session whose turn 1 changed every file under sub/ (checkpointed first, as the loop does)."""
    paths = Paths.for_root(root)
    paths.ensure()
    session = Session.create(paths, slug)
    cps = Checkpoints(paths, session)
    turn = session.user("change them")["id"]
    names = [f"sub/f{i:02d}.txt" for i in range(FILES)]
    cps.take(turn, names)
    edits = []
    for name in names:
        data = f"the agent's {name}\n".encode()
        (root / name).write_bytes(data)
        edits.append({"path": name, "op": "write", "after": sha256_bytes(data)})
    session.tool("c1", "write_file", "ok", ok=True, edits=edits)


def _workspace(base: Path) -> tuple[Path, Path]:
    root, outside = base / "repo", base / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    for i in range(FILES):
        (root / "sub" / f"f{i:02d}.txt").write_text(f"the user's f{i:02d}\n")
        (outside / f"f{i:02d}.txt").write_text(f"outside f{i:02d}: must survive\n")
    (outside / "notes.txt").write_text("outside notes: must survive\n")
    return root, outside


def _env(home: Path) -> dict[str, str]:
    env = {**os.environ, "WORKSTATION_HOME": str(home), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("WORKSTATION_MODEL", None)
    return env


def flip_race(base: Path, runs: int = UNDO_RUNS) -> dict:
    """`runs` undo runs (the CLI, a process each) with a flipping process; what got through."""
    root, outside = _workspace(base)
    home = base / "home"
    home.mkdir()
    before = snapshot(outside)
    through, tracebacks, done, refused, flips, why, finished = [], [], 0, 0, 0, set(), 0
    for run in range(runs):
        for i in range(FILES):  # the user's files back, then the agent's change of them, in a new session
            (root / "sub" / f"f{i:02d}.txt").write_text(f"the user's f{i:02d}\n")
        _agent_changed(root, f"race{run}")
        flipper = subprocess.Popen([sys.executable, "-c", FLIPPER, str(root), str(outside), str(run)],
                                   stdout=subprocess.PIPE, text=True)
        assert flipper.stdout.readline() == "go\n"
        undo = subprocess.run([*CLI, "-C", str(root), "session", "undo", f"race{run}"], capture_output=True,
                              text=True, timeout=120, env=_env(home), stdin=subprocess.DEVNULL)
        flipper.send_signal(signal.SIGTERM)
        flips += int(flipper.communicate(timeout=30)[0].strip() or 0)
        if "Traceback" in undo.stderr:
            tracebacks.append(f"run {run}: {undo.stderr.strip().splitlines()[-1]}")
        elif undo.returncode == 0:
            done += 1
        else:
            refused += 1
            why.add(undo.stderr.strip().split(": ", 1)[-1].split(" (")[0][:90])
            assert undo.stderr.strip().count("\n") == 0, undo.stderr  # one line
        assert (root / "sub").is_dir() and not (root / "sub").is_symlink()
        (root / ".sub-link").unlink()
        if undo.returncode != 0:  # stopped or refused, as a kill would leave it: once the link is gone, it finishes
            again = subprocess.run([*CLI, "-C", str(root), "session", "undo", f"race{run}"], capture_output=True,
                                   text=True, timeout=120, env=_env(home), stdin=subprocess.DEVNULL)
            assert again.returncode == 0, again.stderr
        users = [(root / "sub" / f"f{i:02d}.txt").read_text() for i in range(FILES)]
        finished += users == [f"the user's f{i:02d}\n" for i in range(FILES)]
        now = snapshot(outside)
        if now != before:
            changed = sorted(k for k in set(now) | set(before) if now.get(k) != before.get(k))
            through.append(f"run {run}: {len(changed)} files outside written ({', '.join(changed[:3])})")
            for name in changed:  # put the outside folder back for the next run
                (outside / name).unlink(missing_ok=True)
            for name, data in before.items():
                (outside / name).write_bytes(data)
    return {"runs": runs, "undone": done, "refused": refused, "flips": flips, "through": through,
            "tracebacks": tracebacks, "why": sorted(why), "finished": finished}


def test_an_undo_raced_by_a_flipping_folder_never_writes_outside(tmp_path: Path):
    got = flip_race(tmp_path)
    print(f"flip race: {got['runs']} undo runs, {got['flips']} flips; {got['undone']} undone, {got['refused']} "
          f"refused {got['why']}; {len(got['through'])} wrote outside {got['through']}; tracebacks: {got['tracebacks']}; "
          f"{got['finished']} gave every file back once the flipping stopped")
    assert got["through"] == [] and got["tracebacks"] == []
    assert got["finished"] == got["runs"]  # a stopped undo lost nothing: run again, it finishes


# ---------------------------------------------------------------- hard links to a file outside
OUTSIDE_SECRET = "OUTSIDE-SECRET-4711"


def _hard_linked(base: Path) -> tuple[Path, dict[str, Path]]:
    """A workspace whose notes.txt and helper.py are other names of files outside it."""
    from support.agent_support import write_repo

    root = write_repo(base / "repo")
    outside = base / "outside"
    outside.mkdir()
    targets = {"notes.txt": outside / "secret.txt", "helper.py": outside / "secret.py"}
    targets["notes.txt"].write_text(f"the user's private notes: {OUTSIDE_SECRET}\nsecond line\n")
    targets["helper.py"].write_text(f'def private():\n    """{OUTSIDE_SECRET}"""\n    return 1\n')
    for name, target in targets.items():
        os.link(target, root / name)
    return root, targets


HARD_LINK_CALLS = [("read_lines", {"path": "notes.txt", "start": 1, "end": 2}),
                   ("file_meta", {"path": "helper.py"}),
                   ("grep", {"pattern": "OUTSIDE-SECRET"}),
                   ("read_lines", {"path": "helper.py", "start": 1, "end": 3}),
                   ("replace_lines", {"path": "notes.txt", "start": 2, "end": 2, "content": "rewritten"}),
                   ("edit_file", {"path": "helper.py", "old": "return 1", "new": "return 2"}),
                   ("write_file", {"path": "notes.txt", "content": "overwritten\n"})]


def _judge(answers: list[tuple[str, bool, str]], targets: dict[str, Path], before: dict[str, bytes]) -> list[str]:
    through = [f"{name} read it" for name, _, text in answers if OUTSIDE_SECRET in text]
    through += [f"{target.name} outside written" for target in targets.values()
                if target.read_bytes() != before[target.name]]
    return through


def hard_links(base: Path) -> dict:
    """HARD_LINK_CALLS by the agent's tools on a workspace with hard links to files outside; what got through."""
    from workstation.agent import tools
    from workstation.agent.tools import tool_context
    from workstation.runtime import Workspace
    from workstation.sandbox import Policy

    root, targets = _hard_linked(base)
    before = {t.name: t.read_bytes() for t in targets.values()}
    with Workspace(root) as ws:
        ctx = tool_context(ws.kmap, Policy(root), staging=ws.paths.staging)
        answers = []
        for name, args in HARD_LINK_CALLS:
            result = tools.call(ctx, name, args)
            answers.append((name, result.ok, result.text))
    return {"calls": len(answers), "through": _judge(answers, targets, before), "answers": answers}


def test_a_hard_link_to_a_file_outside_is_never_read_or_written_through_by_the_agents_tools(tmp_path: Path):
    got = hard_links(tmp_path)
    print(f"hard links, the agent's tools: {got['calls']} calls, {len(got['through'])} got through {got['through']}")
    assert got["through"] == []
    answers = got["answers"]
    refusals = [text for name, ok, text in answers if name != "grep"]
    assert all("hard links" in text for text in refusals), refusals  # says why, in one line
    assert all(text.count("\n") == 0 for text in refusals), refusals
    assert "notes.txt" in next(text for name, _, text in answers if name == "grep")  # named as not searched


def test_a_hard_link_to_a_file_outside_is_never_read_or_written_through_over_mcp(tmp_path: Path):
    import asyncio

    from mcp import Client, StdioServerParameters
    from mcp.types import Implementation

    root, targets = _hard_linked(tmp_path)
    before = {t.name: t.read_bytes() for t in targets.values()}
    server = StdioServerParameters(command=CLI[0], args=[*CLI[1:], "-C", str(root), "mcp"],
                                   env={"WORKSTATION_HOME": str(tmp_path / "home"),
                                        "LITELLM_LOCAL_MODEL_COST_MAP": "True"})

    async def session() -> list[tuple[str, bool, str]]:
        async with Client(server, client_info=Implementation(name="attacker", version="1")) as c:
            out = []
            for name, args in HARD_LINK_CALLS:
                result = await c.call_tool(name, args)
                out.append((name, not result.is_error, "\n".join(b.text for b in result.content)))
            return out

    answers = asyncio.run(session())
    through = _judge(answers, targets, before)
    print(f"hard links over MCP: {len(answers)} calls, {len(through)} got through {through}")
    assert through == []


# ---------------------------------------------------------------- the MCP HTTP server's origin
def _start_http(root: Path, home: Path) -> tuple[subprocess.Popen, str, str]:
    """(the server, its URL, its bearer token) as its start printed them."""
    proc = subprocess.Popen([*CLI, "-C", str(root), "mcp", "--http", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(home))
    deadline, url = time.monotonic() + 60, None
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if "http://127.0.0.1:" in line:
            url = line.split(" on ")[-1].strip()
        elif url and "Authorization: Bearer " in line:
            return proc, url, line.split("Authorization: Bearer ", 1)[1].split("`", 1)[0]
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"the HTTP server did not start: {proc.stderr.read()}")


def test_the_mcp_http_server_answers_its_own_origin_only(tmp_path: Path):
    """With the valid token, a request whose Origin is another local port (a page any local web server serves,
    in the user's browser) is refused; the server's own origin, and none (every non-browser client), are served."""
    import httpx

    from support.agent_support import write_repo

    root = write_repo(tmp_path / "repo")
    home = tmp_path / "home"
    home.mkdir()
    proc, url, token = _start_http(root, home)
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    other = port + 1 if port < 65535 else port - 1
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "origin-test", "version": "1"}}})

    def status(origin: str | None) -> int:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream"}
        if origin is not None:
            headers["Origin"] = origin
        return httpx.post(url, headers=headers, content=body, timeout=30).status_code

    try:
        foreign = {origin: status(origin) for origin in (
            f"http://localhost:{other}", f"http://127.0.0.1:{other}", f"http://[::1]:{other}", "http://localhost",
            "http://127.0.0.1", f"https://127.0.0.1:{port}", "http://evil.example", "null")}
        own = {origin: status(origin) for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}", None)}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    through = [origin for origin, code in foreign.items() if code < 400]
    print(f"origins: {len(foreign)} foreign tried, {len(through)} served {through}; own: {own}")
    assert through == [] and set(foreign.values()) == {403}
    assert all(code == 200 for code in own.values()), own


# ---------------------------------------------------------------- the file tools raced the same way
TOOL_CALLS = 300


def tools_race(base: Path, calls: int = TOOL_CALLS) -> dict:
    """The agent's write tools (write_file, edit_file, replace_lines, delete_file, move_file), each checkpointed
    first as the loop does, on files under sub/ while a process flips sub/ to a link outside; what got through.
    In-process: a call is a few ms."""
    import random

    from workstation.agent import tools
    from workstation.agent.tools import tool_context
    from workstation.sandbox import Policy

    root, outside = _workspace(base)
    paths = Paths.for_root(root)
    paths.ensure()
    before = snapshot(outside)
    real_sub = os.open(root / "sub", os.O_RDONLY | os.O_DIRECTORY)  # the folder itself, whatever its name then
    session = Session.create(paths, "tools")
    cps = Checkpoints(paths, session)
    turn = session.user("change them")["id"]
    ctx = tool_context(None, Policy(root, (paths.state,)), staging=paths.staging,  # type: ignore[arg-type]
                       checkpoint=lambda rels: cps.take(turn, rels, resolved=True))  # checkpointed, as the loop does
    rng = random.Random(29)
    flipper = subprocess.Popen([sys.executable, "-c", FLIPPER, str(root), str(outside), "7"], stdout=subprocess.PIPE,
                               text=True)
    assert flipper.stdout.readline() == "go\n"
    done, refused, tracebacks = 0, 0, []
    try:
        for n in range(calls):
            name = f"f{rng.randrange(FILES):02d}.txt"
            try:  # what the agent read: the file as it is in the workspace's own folder
                with os.fdopen(os.open(name, os.O_RDONLY, dir_fd=real_sub), "rb") as fh:
                    ctx.services.ledger.saw(f"sub/{name}", sha256_bytes(fh.read()))
                exists = True
            except FileNotFoundError:
                exists = False
            op = rng.choice(["write_file", "edit_file", "replace_lines", "delete_file", "move_file"]) if exists \
                else "write_file"
            args = {"write_file": {"path": f"sub/{name}", "content": f"call {n}\n"},
                    "edit_file": {"path": f"sub/{name}", "old": "\n", "new": f" {n}\n"},
                    "replace_lines": {"path": f"sub/{name}", "start": 1, "end": 1, "content": f"line {n}"},
                    "delete_file": {"path": f"sub/{name}"},
                    "move_file": {"src": f"sub/{name}", "dst": f"sub/moved{n}.txt"}}[op]
            try:
                result = tools.call(ctx, op, args)
            except Exception as err:  # the test counts what a call raised instead of answering
                tracebacks.append(f"{op}: {type(err).__name__}: {err} " + "|".join(traceback.format_exc().splitlines()[-8:]))
                continue
            done += result.ok
            refused += not result.ok
    finally:
        flipper.send_signal(signal.SIGTERM)
        flips = int(flipper.communicate(timeout=30)[0].strip() or 0)
        os.close(real_sub)
    now = snapshot(outside)
    written = sorted(k for k in set(now) | set(before) if now.get(k) != before.get(k))
    return {"calls": calls, "done": done, "refused": refused, "flips": flips, "written": written,
            "tracebacks": tracebacks}


def test_the_file_tools_raced_by_a_flipping_folder_never_write_outside(tmp_path: Path):
    got = tools_race(tmp_path)
    print(f"tools race: {got['calls']} calls, {got['flips']} flips; {got['done']} done, {got['refused']} refused; "
          f"{len(got['written'])} files outside written {got['written'][:5]}; raised: {got['tracebacks'][:3]}")
    assert got["written"] == [] and got["tracebacks"] == []
    assert got["done"] > 0  # the race let work through too: the test raced real writes


# ---------------------------------------------------------------- the same, as an unprivileged uid
UID_RUNNER = """
import json, sys
from pathlib import Path
import test_link_races as t
base = Path(sys.argv[1])
out = {}
for name, run in (("undo", t.flip_race), ("tools", t.tools_race), ("hard links", t.hard_links)):
    (base / name).mkdir()
    out[name] = run(base / name)
print(json.dumps(out))
"""


def test_the_races_and_hard_links_as_an_unprivileged_uid(tmp_path: Path):
    """The three attacks above run as a uid of its own (no passwd entry, no other process: tests/support/uid.py),
    owning the workspace and the files outside it as a user owns theirs; root's power to
    write anywhere plays no part."""
    from support.uid import TESTS, as_uid, other_uid, uid_env, uid_folder, uid_python

    uid = other_uid("the tests above ran as this user")
    with uid_folder(uid, "ws-links-") as base:
        env = uid_env(base, str(HERE), str(TESTS), LITELLM_LOCAL_MODEL_COST_MAP="True")
        python = uid_python(uid, env)
        done = subprocess.run([python, "-c", UID_RUNNER, str(base)], env=env, cwd=base, preexec_fn=as_uid(uid),
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        got = json.loads(done.stdout.strip().splitlines()[-1])
    undo, tools, links = got["undo"], got["tools"], got["hard links"]
    print(f"as uid {uid}: {undo['runs']} undo runs, {undo['flips']} flips, {len(undo['through'])} wrote outside; "
          f"{tools['calls']} tool calls, {tools['flips']} flips, {len(tools['written'])} files outside written; "
          f"hard links: {len(links['through'])} of {links['calls']} got through")
    assert undo["through"] == [] and undo["tracebacks"] == [] and undo["finished"] == undo["runs"]
    assert tools["written"] == [] and tools["tracebacks"] == [] and tools["done"] > 0
    assert links["through"] == []


def test_a_move_never_replaces_what_stands_at_its_destination_by_then(tmp_path: Path):
    """move_file looks for its destination first; a file made there after that look (by the user's editor, a
    command) is not replaced: the rename itself refuses (renameat2 RENAME_NOREPLACE where there is one)."""
    from workstation.fsutil import rename_beneath

    (tmp_path / "a.txt").write_text("moved\n")
    (tmp_path / "b.txt").write_text("the user's b, made after the look\n")
    with pytest.raises(FileExistsError):
        rename_beneath(tmp_path, "a.txt", "b.txt")
    assert (tmp_path / "b.txt").read_text() == "the user's b, made after the look\n"
    assert (tmp_path / "a.txt").read_text() == "moved\n"
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")  # a dangling link stands there too
    with pytest.raises(FileExistsError):
        rename_beneath(tmp_path, "a.txt", "link")
    rename_beneath(tmp_path, "a.txt", "sub/c.txt")  # its folders made
    assert (tmp_path / "sub/c.txt").read_text() == "moved\n" and not (tmp_path / "a.txt").exists()
