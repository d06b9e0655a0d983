"""`workstation import` on the command line: bad input in one line each, --from the agents' own
folders, --watch and the sidecar option, and imported sessions used like any other."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.trust_support import trust
from workstation.sessions.log import Session

FIX = Path(__file__).parents[1] / "fixtures" / "import"
WORKSTATION = str(Path(sys.executable).with_name("workstation"))


@pytest.fixture
def root(tmp_path):
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


def _records(root: Path, slug: str) -> list[dict]:
    from workstation.paths import Paths

    return Session(Paths.for_root(root), slug).read().records


def _claude_for(root: Path, dest: Path, session_id: str = "9f1c2d3e-0000-4000-8000-00000000abcd") -> Path:
    """The Claude Code fixture as if recorded in `root`."""
    text = (FIX / "claude_session.jsonl").read_text().replace('"/work/demo', json.dumps(str(root))[:-1])
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text.replace("9f1c2d3e-0000-4000-8000-00000000abcd", session_id))
    return dest


# --------------------------------------------------------------------------- import and re-import
def test_import_reports_each_session_and_then_nothing_new(cli, root):
    code, out, err = cli("import", str(FIX / "claude_session.jsonl"), str(FIX / "codex_0.77.jsonl"))
    assert code == 0 and err == ""
    assert "-> claude-2025-10-21-9f1c2d3e: +16 records" in out and "-> codex-2025-11-02-0199bbbb: +8 records" in out
    assert out.strip().endswith("2 file(s): 24 record(s) added to 2 session(s)")
    code, out, err = cli("import", str(FIX / "claude_session.jsonl"), str(FIX / "codex_0.77.jsonl"), "--json")
    assert code == 0
    results = json.loads(out)
    assert [(r["format"], r["added"], r["unchanged"]) for r in results] == [("claude-code", 0, True),
                                                                           ("codex", 0, True)]


def test_format_can_be_forced_and_is_checked(cli, root):
    code, out, err = cli("import", "--format", "openhands", str(FIX / "claude_session.jsonl"))
    assert code == 1 and err.strip().splitlines() == [
        f"error: {FIX / 'claude_session.jsonl'}: not valid JSON (Extra data); nothing imported"]
    assert cli("import", "--format", "codex", str(FIX / "codex_0.40.jsonl"))[0] == 0


# --------------------------------------------------------------------------- bad input
def _lines(err: str) -> list[str]:
    return [line for line in err.strip().splitlines() if line]


def test_bad_lines_are_one_warning_each_and_the_rest_imports(cli, root, tmp_path):
    good = (FIX / "claude_session.jsonl").read_text().splitlines()
    deep = "[" * 200_000 + "]" * 200_000
    nested = json.dumps({"type": "user", "x": json.loads("[" * 150 + "]" * 150)})
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(good[:3] + ["{not json", deep, nested, '"just a string"'] + good[3:]) + "\n")
    code, out, err = cli("import", str(broken))
    assert code == 0
    assert _lines(err) == [f"warning: {broken}: line 4: not valid JSON (Expecting property name enclosed in "
                           "double quotes)",
                           f"warning: {broken}: line 5: nested too deeply to read",
                           f"warning: {broken}: line 6: nested deeper than 100 levels",
                           f"warning: {broken}: line 7: not a JSON object"]
    assert "+16 records" in out  # everything else, as from the clean file


def test_a_truncated_log_imports_up_to_its_cut(cli, root, tmp_path):
    data = (FIX / "claude_session.jsonl").read_bytes()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data[: len(data) - 40])
    code, out, err = cli("import", str(cut))
    assert code == 0 and "+15 records" in out
    assert _lines(err) == [f"warning: {cut}: line 21: last line is cut off (a write was interrupted or is still in "
                           "progress); it is imported once complete"]
    cut.write_bytes(data)  # the writer finished the line
    code, out, err = cli("import", str(cut))
    assert code == 0 and err == "" and "+1 records (1 assistant)" in out


def test_unreadable_files_are_one_error_each_and_the_others_import(cli, root, tmp_path):
    traj = tmp_path / "cut.traj"
    traj.write_text((FIX / "swe_text_actions.traj").read_text()[:300])
    unknown = tmp_path / "notes.md"
    unknown.write_text("# my notes\n\nnothing to import here\n")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, out, err = cli("import", str(traj), str(unknown), str(tmp_path / "missing.jsonl"), str(empty),
                         str(FIX / "openhands_events.json"))
    assert code == 0 and "openhands" in out and "+5 records" in out
    lines = _lines(err)
    assert len(lines) == 4 and all(line.startswith("error: ") for line in lines)
    assert lines[0].startswith(f"error: {traj}: not valid JSON")
    assert lines[1] == (f"error: {unknown}: unknown format: not a Claude Code, Codex, SWE-agent, aider or OpenHands "
                        "log (pass --format to say which)")
    assert lines[2] == f"error: {tmp_path / 'missing.jsonl'}: no such file"
    assert lines[3] == f"error: {empty}: empty file; nothing to import"
    code, out, err = cli("import", str(unknown))
    assert code == 1 and len(_lines(err)) == 1


def test_a_folder_imports_what_it_recognises(cli, root, tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    for name in ("codex_0.40.jsonl", "swe_function_calls.traj"):
        (folder / name).write_bytes((FIX / name).read_bytes())
    (folder / "README.md").write_text("not a log\n")
    code, out, err = cli("import", str(folder))
    assert code == 0 and "2 file(s)" in out
    assert _lines(err) == [f"skipped {folder / 'README.md'}: not a session log of a known format"]


def test_import_needs_something_to_import(cli):
    code, out, err = cli("import")
    assert code == 2 and _lines(err) == [
        "error: give files to import, or --from claude-code / --from codex (see `workstation import --help`)"]


# --------------------------------------------------------------------------- --from
def test_from_claude_code_finds_this_workspaces_sessions(cli, root, tmp_path, monkeypatch):
    from workstation.importers.claude_code import project_dir_name

    config = tmp_path / "claude"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    folder = config / "projects" / project_dir_name(str(root.resolve()))
    _claude_for(root.resolve(), folder / "9f1c2d3e-0000-4000-8000-00000000abcd.jsonl")
    _claude_for(tmp_path / "other", folder / "77777777-0000-4000-8000-000000000000.jsonl",
                "77777777-0000-4000-8000-000000000000")  # same folder name, another project's cwd
    code, out, err = cli("import", "--from", "claude-code")
    assert code == 0 and err == ""
    assert "claude-2025-10-21-9f1c2d3e: +16 records" in out and "77777777" not in out


def test_from_codex_finds_this_workspaces_rollouts(cli, root, tmp_path, monkeypatch):
    home = tmp_path / "codex"
    monkeypatch.setenv("CODEX_HOME", str(home))
    day = home / "sessions" / "2025" / "11" / "02"
    day.mkdir(parents=True)
    mine = (FIX / "codex_0.77.jsonl").read_text().replace('"/work/demo"', json.dumps(str(root.resolve())))
    (day / "rollout-2025-11-02T08-00-00-0199bbbb-2222-7000-8000-000000000002.jsonl").write_text(mine)
    (day / "rollout-2025-09-25T10-00-00-0199aaaa-1111-7000-8000-000000000001.jsonl").write_text(
        (FIX / "codex_0.40.jsonl").read_text())  # recorded in /work/demo: not this workspace
    code, out, err = cli("import", "--from", "codex")
    assert code == 0 and "codex-2025-11-02-0199bbbb: +8 records" in out and "0199aaaa" not in out


def test_from_an_agent_with_no_sessions_here_says_where_it_looked(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "nothing"))
    code, out, err = cli("import", "--from", "codex")
    assert code == 0 and err.startswith("no codex sessions of ") and str(tmp_path / "nothing" / "sessions") in err


# --------------------------------------------------------------------------- imported sessions are sessions
def test_imported_sessions_list_show_search_export_report_archive_restore(cli, root):
    assert cli("import", str(FIX / "claude_session.jsonl"))[0] == 0
    slug = "claude-2025-10-21-9f1c2d3e"
    code, out, _ = cli("session", "list", "--json")
    (info,) = json.loads(out)
    assert (info["slug"], info["title"], info["turns"], info["covered_turns"]) == (
        slug, "Read setup.py and run the tests", 4, 3)  # 4 user messages; Claude Code's summary covers 3
    code, out, _ = cli("session", "show", slug, "--json")
    shown = json.loads(out)
    assert shown["covered_turns"] == 3 and shown["messages"][0]["role"] == "system"
    code, out, _ = cli("session", "search", "string comparison", "--json")
    hits = json.loads(out)
    assert [(h["slug"], h["type"]) for h in hits] == [(slug, "compact")]
    code, out, _ = cli("session", "export", slug, "--format", "json")
    assert len(json.loads(out)["records"]) == 16
    code, out, _ = cli("report", slug, "--json")
    assert code == 0 and json.loads(out)["agent"]["model_calls"] == 7
    code, out, err = cli("session", "archive", slug)
    assert code == 0 and "archived" in out
    code, out, _ = cli("session", "search", "Explain the failure", "--json")
    assert [(h["slug"], h["state"]) for h in json.loads(out)] == [(slug, "archived")]
    code, out, err = cli("import", str(FIX / "claude_session.jsonl"))
    assert code == 0  # unchanged: nothing to add to the archived session
    code, out, _ = cli("session", "restore", slug)
    assert code == 0
    code, out, _ = cli("replay", slug, "--print", "--json")
    assert code == 0 and "Read(/work/demo/setup.py)" in out


def test_imported_events_land_in_the_episodic_store_at_the_source_times(cli, root):
    assert cli("import", str(FIX / "claude_session.jsonl"))[0] == 0
    code, out, _ = cli("reflect", "--sql", "SELECT type, name, strftime(ts, '%Y-%m-%dT%H:%M:%S') AS ts, tokens_in, "
                                          "tokens_out, flow FROM events WHERE session = 'claude-2025-10-21-9f1c2d3e' "
                                          "ORDER BY ts, id", "--json")
    rows = json.loads(out)
    assert {r["flow"] for r in rows} == {"import:claude-code"}
    first_call = next(r for r in rows if r["type"] == "model_call")
    assert first_call == {"type": "model_call", "name": "claude-sonnet-4-5-20250929", "ts": "2025-10-21T03:00:02",
                          "tokens_in": 1104, "tokens_out": 57, "flow": "import:claude-code"}
    tools = [(r["name"], r["ts"]) for r in rows if r["type"] == "tool_call"]
    assert tools == [("Read", "2025-10-21T03:00:06"), ("Bash", "2025-10-21T03:00:09"), ("Task", "2025-10-21T03:02:05")]
    assert ("file_read", "/work/demo/setup.py") in {(r["type"], r["name"]) for r in rows}
    assert sum(r["type"] == "turn" for r in rows) == 5 + 7  # user prompts (the subagent's too) and answers
    assert sum(r["type"] == "compaction" for r in rows) == 1


# --------------------------------------------------------------------------- watching
def _wait(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def _count(root: Path, slug: str) -> int:
    path = root / ".workstation" / "sessions" / f"{slug}.jsonl"
    return path.read_text().count("\n") if path.exists() else 0


def test_watch_imports_lines_as_they_are_written_and_keeps_them_when_the_source_goes(root, tmp_path):
    from workstation.importers.claude_code import project_dir_name

    config = tmp_path / "claude"
    source = config / "projects" / project_dir_name(str(root.resolve())) / "9f1c2d3e-0000-4000-8000-00000000abcd.jsonl"
    full = _claude_for(root.resolve(), tmp_path / "full.jsonl").read_bytes().splitlines(keepends=True)
    source.parent.mkdir(parents=True)
    source.write_bytes(b"".join(full[:8]))
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(config)}
    proc = subprocess.Popen([WORKSTATION, "-C", str(root), "import", "--from", "claude-code", "--watch", "--json"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    slug = "claude-2025-10-21-9f1c2d3e"
    try:
        assert _wait(lambda: _count(root, slug) == 4), _count(root, slug)  # u1, a1 (4 lines), r1, r2
        with open(source, "ab") as fh:
            for line in full[8:]:
                fh.write(line)
                fh.flush()
                time.sleep(0.02)
        assert _wait(lambda: _count(root, slug) == 16), _count(root, slug)
        source.unlink()  # the agent cleans up its old sessions
        time.sleep(1.0)
        assert _count(root, slug) == 16
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert err == ""
    reported = [json.loads(line) for line in out.splitlines()]
    assert sum(r["added"] for r in reported) == 16


def test_the_sidecar_keeps_importing_what_the_config_names(root, tmp_path):
    from workstation.importers.claude_code import project_dir_name

    config = tmp_path / "claude"
    source = config / "projects" / project_dir_name(str(root.resolve())) / "9f1c2d3e-0000-4000-8000-00000000abcd.jsonl"
    _claude_for(root.resolve(), source)
    (root / ".workstation").mkdir()
    (root / ".workstation" / "config.toml").write_text('[import]\nwatch = ["claude-code"]\n')
    trust(root)  # reading another agent's sessions needs the user's trust
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(config)}
    done = subprocess.run([WORKSTATION, "-C", str(root), "sidecar", "--once"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "imported" in done.stdout and _count(root, "claude-2025-10-21-9f1c2d3e") == 16
    (root / ".workstation" / "config.toml").write_text('[import]\nwatch = ["cursor"]\n')
    done = subprocess.run([WORKSTATION, "-C", str(root), "sidecar", "--once"], env=env, capture_output=True,
                          text=True, timeout=120)
    # the changed config asks for trust again, and until then its bad value is one line, ignored (no lockout)
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "import.watch" in line]
    assert len(said) == 1 and "workstation trust" in said[0] and "claude-2025" not in done.stdout


def test_an_imported_session_compacts_like_any_other(cli, root, monkeypatch):
    """`session compact` on an imported Claude Code session folds the source's own summary and the
    turns after it into a summary of ours, through the real litellm path."""
    from support.fakellm import ScriptedLLM
    from support.sessions_support import KEY, KEY_ENV, summarizer, turns_in_prompt, write_config_file

    monkeypatch.setenv(KEY_ENV, KEY)
    slug = "claude-2025-10-21-9f1c2d3e"
    with ScriptedLLM(summarizer()) as server:
        write_config_file(root, server.url, keep_recent=1)
        assert cli("import", str(FIX / "claude_session.jsonl"))[0] == 0
        code, out, err = cli("session", "compact", slug, "--keep", "0", "--json")
        assert code == 0, err
        done = json.loads(out)
        assert (done["status"], done["first_turn"], done["last_turn"]) == ("compacted", 4, 4)
        (request,) = server.requests
        assert turns_in_prompt(request) == [4]
        assert "string comparison" in request["messages"][-1]["content"]  # the imported summary, folded in
    records = _records(root, slug)
    compacts = [r for r in records if r["type"] == "compact"]
    assert len(compacts) == 2 and compacts[-1]["folds"] == compacts[0]["id"] and "source" not in compacts[-1]
    code, out, _ = cli("session", "show", slug, "--json")
    assert json.loads(out)["covered_turns"] == 4
    code, out, _ = cli("session", "compact", slug, "--keep", "0", "--json")
    assert json.loads(out) == {"slug": slug, "status": "nothing"}


@pytest.mark.parametrize("name", ["claude_session.jsonl", "codex_0.40.jsonl", "codex_0.77.jsonl",
                                  "demo.aider.chat.history.md", "openhands_events.json",
                                  "swe_function_calls.traj", "swe_text_actions.traj"])
def test_every_format_is_listed_shown_searched_exported_reported_archived_restored_replayed(cli, root, name):
    code, out, err = cli("import", str(FIX / name), "--json")
    assert code == 0, err
    slugs = [s["slug"] for r in json.loads(out) for s in r["sessions"]]
    assert slugs
    listed = {i["slug"]: i for i in json.loads(cli("session", "list", "--json")[1])}
    assert set(listed) == set(slugs)
    for slug in slugs:
        records = _records(root, slug)
        first_user = next(r for r in records if r["type"] == "user" and not r["source"].get("meta"))
        assert listed[slug]["turns"] == sum(r["type"] == "user" and not r.get("sidechain") for r in records)
        code, out, err = cli("session", "show", slug, "--json")
        assert code == 0 and json.loads(out)["messages"], err
        needle = " ".join(first_user["content"].split()[:3])
        code, out, err = cli("session", "search", needle, "--json")
        assert first_user["id"] in {h["record_id"] for h in json.loads(out) if h["slug"] == slug}, (needle, err)
        code, out, err = cli("session", "export", slug, "--format", "json")
        assert code == 0 and [r["id"] for r in json.loads(out)["records"]] == [r["id"] for r in records], err
        code, out, err = cli("report", slug, "--json")
        assert code == 0 and json.loads(out)["agent"]["model_calls"] == sum(
            r["type"] == "assistant" for r in records), err
        assert cli("session", "archive", slug)[0] == 0
        code, out, err = cli("session", "search", needle, "--json")
        assert {h["state"] for h in json.loads(out) if h["slug"] == slug} == {"archived"}, err
        assert cli("session", "restore", slug)[0] == 0
        assert _records(root, slug) == records
        code, out, err = cli("replay", slug, "--verify")
        assert code == 0, err


def test_a_lone_surrogate_in_an_imported_transcript_prints_escaped_from_every_command(root, tmp_path):
    """`\\ud800` is legal JSON: every printing command exits 0 and shows it escaped, on a real stdout."""
    text = (FIX / "claude_session.jsonl").read_text()
    assert "Read setup.py and run the tests" in text and "Now fix it for real" in text
    planted = tmp_path / "surrogate.jsonl"  # the first prompt (the title) and the last (in context)
    planted.write_text(text.replace("Read setup.py and run the tests", "Read \\ud800 setup.py and run the tests")
                       .replace("Now fix it for real", "Now fix \\ud800 for real"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONIOENCODING"} | {"LANG": "C.UTF-8", "COLUMNS": "300"}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([WORKSTATION, "-C", str(root), *args], capture_output=True, text=True,
                              errors="strict", env=env, timeout=120)

    assert run("import", str(planted)).returncode == 0
    slug = "claude-2025-10-21-9f1c2d3e"
    for args in (["session", "list"], ["session", "list", "--json"], ["session", "show", slug],
                 ["session", "show", slug, "--json"], ["session", "search", "setup"],
                 ["session", "search", "setup", "--json"], ["session", "export", slug],
                 ["session", "export", slug, "--format", "json"], ["replay", slug, "--print"],
                 ["replay", slug, "--print", "--json"]):
        done = run(*args)
        assert (done.returncode, done.stderr) == (0, ""), (args, done.stderr[-500:])
        assert "\\ud800" in done.stdout and "\ud800" not in done.stdout, (args, done.stdout[-500:])
    shown = json.loads(run("session", "show", slug, "--json").stdout)  # JSON keeps the character exact
    assert "Now fix \ud800 for real" in [m.get("content") for m in shown["messages"]]
