"""Archive, restore, recovery of interrupted moves, and the `workstation session ...` commands."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from support.fakellm import ScriptedLLM
from support.sessions_support import (KEY, KEY_ENV, compaction_events, fill, fill_turns, make_config, real_episodic, run_cli,
                              summarizer, write_config_file)
from workstation.cli import main
from workstation.sessions import Session, SessionError
from workstation.sessions.archive import archive, gz_path, meta_path, recover, restore
from workstation.sessions.catalog import export_markdown, list_sessions, load, search
from workstation.sidecar import Sidecar

TRUNCATED = "Compressed file ended before the end-of-stream marker was reached"


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


@pytest.fixture
def server():
    with ScriptedLLM(summarizer()) as srv:
        yield srv


def cli(root, *args):
    result = CliRunner().invoke(main, ["-C", str(root), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_archive_summarizes_compresses_and_restores_byte_for_byte(tmp_path, server):
    config, paths = make_config(tmp_path, server.url, compact_threshold=10, keep_recent=4)
    session = Session.create(paths, "work")
    turns = fill_turns(session, 14, steps=2, big=3000)
    original = session.path.read_bytes()
    with real_episodic(paths) as episodic:
        result = archive(paths, "work", config, episodic=episodic)
        [event] = compaction_events(episodic)
    assert result.summarized and result.compaction.ok and result.compaction.last_turn == 14
    assert not session.path.exists() and event["ok"] is True and event["data"]["reason"] == "manual"
    raw = gzip.decompress(gz_path(paths, "work").read_bytes())
    assert raw.startswith(original) and raw.count(b"\n") == original.count(b"\n") + 1  # + the compact record
    meta = json.loads(meta_path(paths, "work").read_text())
    assert meta["turns"] == 14 and meta["covered_turns"] == 14 and meta["compact"]["type"] == "compact"
    # still listed, readable, searchable
    infos = {i.slug: i for i in list_sessions(paths, archived=True)}
    assert infos["work"].state == "archived" and infos["work"].compacted == "1–14"
    assert "work" not in {i.slug for i in list_sessions(paths)}
    view, state = load(paths, "work")
    assert state == "archived" and [t["id"] for t in view.turns] == [t["id"] for t in turns]
    hits = search(paths, "SRC/MOD_6_1.PY")
    assert {(h.slug, h.state) for h in hits} == {("work", "archived")} and len(hits) >= 2
    restored = restore(paths, "work")
    assert restored.path.read_bytes() == raw
    assert not gz_path(paths, "work").exists() and not meta_path(paths, "work").exists()
    restored.user("back to work")
    assert Session(paths, "work").read().turns[-1]["content"] == "back to work"


def test_archive_without_a_working_model_keeps_every_turn(tmp_path):
    config, paths = make_config(tmp_path)  # no compact model configured
    config.model.name = ""  # nor a chat model to fall back on
    session = Session.create(paths, "quiet")
    fill(session, 5)
    original = session.path.read_bytes()
    with real_episodic(paths) as episodic:
        result = archive(paths, "quiet", config, episodic=episodic)
        [event] = compaction_events(episodic)
    assert not result.summarized and result.compaction.status == "failed"
    assert event["ok"] is False and "no model to compact with" in event["data"]["reason"]
    assert gzip.decompress(gz_path(paths, "quiet").read_bytes()) == original


def test_restore_and_archive_refuse_clearly(tmp_path):
    config, paths = make_config(tmp_path)
    with pytest.raises(SessionError, match="no session named nope"):
        archive(paths, "nope", config)
    with pytest.raises(SessionError, match="no archived session named nope"):
        restore(paths, "nope")
    fill(Session.create(paths, "twin"), 2)
    archive(paths, "twin", config)
    with pytest.raises(SessionError, match="already exists in the archive"):
        Session.create(paths, "twin")
    restore(paths, "twin")
    with pytest.raises(SessionError, match="a live session named twin already exists"):
        restore(paths, "twin")


def _archived(paths, config, slug, turns=4):
    fill(Session.create(paths, slug), turns)
    archive(paths, slug, config)
    return gzip.decompress(gz_path(paths, slug).read_bytes())


@pytest.mark.parametrize("state", ["gz+meta+live", "gz+live", "gz", "meta", "live+gz+meta, live longer"])
def test_recover_finishes_or_undoes_interrupted_moves(tmp_path, state):
    config, paths = make_config(tmp_path)
    raw = _archived(paths, config, "cut")
    live = paths.sessions / "cut.jsonl"
    expect = "archived"
    if state == "gz+meta+live":  # archive killed before unlinking the live log
        live.write_bytes(raw)
    elif state == "gz+live":  # restore killed after writing the live log (or archive before the meta)
        live.write_bytes(raw)
        os.unlink(meta_path(paths, "cut"))
        expect = "live"
    elif state == "gz":  # restore killed after dropping the meta
        os.unlink(meta_path(paths, "cut"))
        expect = "live"
    elif state == "meta":
        os.unlink(gz_path(paths, "cut"))
        live.write_bytes(raw)
        expect = "live"
    else:  # the archiver died after its meta, then the TUI appended to the still-live log
        live.write_bytes(raw + raw.split(b"\n")[0] .replace(b'"id":"', b'"id":"x') + b"\n")
        expect = "live"
    (paths.archive / ".cut.jsonl.gz.abc123.tmp").write_bytes(b"partial")
    assert recover(paths)  # something was done
    assert not (paths.archive / ".cut.jsonl.gz.abc123.tmp").exists()
    view, where = load(paths, "cut")
    assert where == expect and len(view.turns) >= 4 and view.problems == []
    assert live.exists() == (expect == "live") and gz_path(paths, "cut").exists() == (expect == "archived")
    assert meta_path(paths, "cut").exists() == (expect == "archived")
    assert recover(paths) == []  # settled


def test_cli_commands_end_to_end(tmp_path, server):
    write_config_file(tmp_path, server.url, compact_threshold=10, keep_recent=4)
    config, paths = make_config(tmp_path, server.url, compact_threshold=10, keep_recent=4)
    session = Session.create(paths, "cli")
    turns = fill_turns(session, 12, steps=2, big=2500)
    listed = json.loads(cli(tmp_path, "session", "list", "--json"))
    assert [(s["slug"], s["turns"], s["compacted"]) for s in listed] == [("cli", 12, "")]
    assert listed[0]["size"] == session.path.stat().st_size and listed[0]["last_activity"] == turns[-1]["ts"]
    assert "compacted turns 1–8 of cli" in cli(tmp_path, "session", "compact", "cli")
    shown = json.loads(cli(tmp_path, "session", "show", "cli", "--json"))
    assert shown["covered_turns"] == 8 and shown["messages"][0]["role"] == "system"
    raw = cli(tmp_path, "session", "show", "cli", "--raw")
    for turn in turns:  # every original turn, also the compacted ones
        assert turn["id"] in raw
    assert "Summary of turns 1–8" in raw
    assert "archived cli" in cli(tmp_path, "session", "archive", "cli")
    archived = json.loads(cli(tmp_path, "session", "list", "--archived", "--json"))
    assert [(s["slug"], s["state"], s["compacted"]) for s in archived] == [("cli", "archived", "1–12")]
    raw_archived = json.loads(cli(tmp_path, "session", "show", "cli", "--raw", "--json"))
    assert [r["id"] for r in raw_archived["records"] if r["type"] not in ("compact", "redaction")] == \
        [t["id"] for t in turns]
    exported = json.loads(cli(tmp_path, "session", "export", "cli", "--format", "json"))
    assert exported["format"] == "workstation-session" and exported["state"] == "archived"
    md = cli(tmp_path, "session", "export", "cli", "--format", "md")
    assert md.startswith("# Session cli") and "src/mod_2_1.py" in md
    hits = json.loads(cli(tmp_path, "session", "search", "please keep going", "--json"))
    assert {h["slug"] for h in hits} == {"cli"} and all(h["state"] == "archived" for h in hits)
    assert "restored cli" in cli(tmp_path, "session", "restore", "cli")
    assert json.loads(cli(tmp_path, "session", "list", "--json"))[0]["state"] == "live"


def test_cli_errors_are_one_line(tmp_path):
    env = dict(os.environ)
    run = lambda *a: subprocess.run([sys.executable, "-m", "workstation", "-C", str(tmp_path), *a],  # noqa: E731
                                    capture_output=True, text=True, env=env, timeout=60)
    missing = run("session", "show", "ghost")
    assert missing.returncode == 1 and missing.stderr == "error: no session named ghost\n"
    bad = run("session", "export", "../x")
    assert bad.returncode == 1 and bad.stderr.startswith("error: invalid session name '../x'")
    (tmp_path / ".workstation").mkdir(exist_ok=True)
    (tmp_path / ".workstation" / "config.toml").write_text("[memory]\ncompact_threshold = 30\nkeep_recent = 30\n")
    knobs = run("session", "list")  # an untrusted folder's bad keys are one line and ignored, never a lockout
    assert knobs.returncode == 0 and knobs.stderr.count("\n") == 1
    assert "ignored as invalid" in knobs.stderr and "must be below compact_threshold (30)" in knobs.stderr
    (tmp_path / ".workstation" / "config.toml").write_text("[memory]\ncompact_threshold = 30\nkeep_recent = 28\n")
    close = run("session", "list")
    assert close.returncode == 0 and "warning: memory.keep_recent (28) is close to compact_threshold" in close.stderr
    (tmp_path / ".workstation" / "config.toml").unlink()
    fill(Session.create(make_config(tmp_path)[1], "s"), 3)
    skipped = run("session", "compact", "s", "--keep", "0")
    assert skipped.returncode == 1
    assert skipped.stderr == "error: compaction of s skipped: no model to compact with: set model.name or memory.compact_model\n"


def test_markdown_export_marks_unreadable_lines(tmp_path):
    _, paths = make_config(tmp_path)
    session = Session.create(paths, "md")
    fill(session, 2)
    with open(session.path, "ab") as fh:
        fh.write(b"oops\n")
    fill(session, 1, start=2)
    view, state = load(paths, "md")
    text = export_markdown("md", view, state)
    # records 1-2 are turn 1 (a user message and its answer), record 3 starts turn 2
    assert "> unreadable line 3: not valid JSON" in text and "## Turn 2\n\n### user" in text


def test_markdown_export_opens_code_fences_at_the_start_of_a_line(tmp_path):
    _, paths = make_config(tmp_path)
    session = Session.create(paths, "fences")
    session.user("look")
    session.assistant("", tool_calls=[{"id": "c1", "name": "grep", "arguments": '{"pattern": "```"}'}])
    session.tool("c1", "grep", "a.md:1: ```python")
    text = export_markdown("fences", *load(paths, "fences"))
    from markdown_it import MarkdownIt

    fences = [(t.info, t.content) for t in MarkdownIt().parse(text) if t.type == "fence"]
    assert fences == [("json", '{"pattern": "```"}\n'), ("", "a.md:1: ```python\n")], text


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def test_recovery_listing_search_and_the_sidecar_skip_a_truncated_archive(tmp_path):
    config, paths = make_config(tmp_path)
    _archived(paths, config, "good")
    _archived(paths, config, "cut")
    fill(Session.create(paths, "live"), 3)
    gz = gz_path(paths, "cut")
    _truncate(gz)
    os.unlink(meta_path(paths, "cut"))  # a restore cut short: recovery has to decompress it to finish
    damaged = gz.read_bytes()
    line = f"skipped cut, left as it is: archive {gz} is unreadable: {TRUNCATED}"
    warnings = []
    assert recover(paths, warn=warnings.append) == [] and warnings == [line]
    assert sorted(i.slug for i in list_sessions(paths, archived=True, warn=warnings.append)) == ["good", "live"]
    assert {h.slug for h in search(paths, "please keep going", warn=warnings.append)} == {"good", "live"}
    assert warnings == [line] * 3
    reports = []
    sidecar = Sidecar(paths, config, report=reports.append)
    sidecar.run_once()
    sidecar.run_once()
    assert reports == [f"warning: {line}"]  # once, not on every pass
    assert gz.read_bytes() == damaged and not (paths.sessions / "cut.jsonl").exists()
    assert not meta_path(paths, "cut").exists()


def test_commands_name_damaged_archives_and_go_on(tmp_path):
    config, paths = make_config(tmp_path)
    for slug in ("good", "cut", "nogz", "badmeta", "oddmeta"):
        _archived(paths, config, slug)
    fill(Session.create(paths, "live"), 3)
    cut, nogz = gz_path(paths, "cut"), gz_path(paths, "nogz")
    _truncate(cut)
    os.unlink(meta_path(paths, "cut"))
    nogz.write_bytes(b"garbage, not gzip")  # its metadata is intact: listed, but unsearchable
    badmeta, oddmeta = meta_path(paths, "badmeta"), meta_path(paths, "oddmeta")
    badmeta.write_text("{broken")
    oddmeta.write_text(json.dumps(dict(json.loads(oddmeta.read_text()), turns="many")))
    damaged = {p: p.read_bytes() for p in (cut, nogz, badmeta, oddmeta, meta_path(paths, "nogz"))}
    cut_line = f"warning: skipped cut, left as it is: archive {cut} is unreadable: {TRUNCATED}"

    listed = run_cli(tmp_path, "session", "list", "--archived", "--json")
    assert listed.returncode == 0, listed.stderr
    assert sorted(s["slug"] for s in json.loads(listed.stdout)) == ["good", "live", "nogz"]
    warned = listed.stderr.splitlines()
    assert len(warned) == 3 and warned[0] == cut_line
    assert warned[1].startswith(f"warning: skipped badmeta, left as it is: archive metadata {badmeta} is "
                                "unreadable: not valid JSON (")
    assert warned[2] == (f"warning: skipped oddmeta, left as it is: archive metadata {oddmeta} is unreadable: "
                         "'turns' is a string, not an integer")

    searched = run_cli(tmp_path, "session", "search", "please keep going", "--json")
    assert searched.returncode == 0, searched.stderr
    assert {h["slug"] for h in json.loads(searched.stdout)} == {"good", "live", "badmeta", "oddmeta"}
    assert searched.stderr.splitlines() == [
        cut_line, f"warning: not searched: archive {nogz} is unreadable: Not a gzipped file (b'ga')"]

    for slug, path, cause in (("cut", cut, TRUNCATED), ("nogz", nogz, "Not a gzipped file (b'ga')")):
        restored = run_cli(tmp_path, "session", "restore", slug)
        assert restored.returncode == 1
        assert restored.stderr == f"error: cannot restore {slug}: archive {path} is unreadable: {cause}\n"
    assert {p: p.read_bytes() for p in damaged} == damaged  # nothing deleted or changed
    assert not (paths.sessions / "cut.jsonl").exists() and not (paths.sessions / "nogz.jsonl").exists()


def test_a_gzip_bomb_or_deep_metadata_is_refused_in_bounded_memory(tmp_path):
    import tracemalloc
    import zlib

    from workstation.sessions.archive import UnreadableArchive, gunzip, expansion_limit

    config, paths = make_config(tmp_path)
    for slug in ("good", "bomb", "deep"):
        _archived(paths, config, slug)
    bomb = gz_path(paths, "bomb")
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)  # one gzip member: 1 MiB of newlines
    member = compressor.compress(b"\n" * (1 << 20)) + compressor.flush()
    bomb.write_bytes(member * 2048)  # ~2 MB of concatenated members that expand to 2 GiB
    assert bomb.stat().st_size < 3 << 20
    deep = meta_path(paths, "deep")
    deep.write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")

    tracemalloc.start()
    try:
        with pytest.raises(UnreadableArchive, match="expands past 4.. MiB .200x its size., not a session log"):
            gunzip(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < expansion_limit(bomb.stat().st_size) + (64 << 20), peak

    warnings = []
    assert {h.slug for h in search(paths, "please keep going", warn=warnings.append)} == {"good", "deep"}
    assert any("bomb" in w and "expands past" in w for w in warnings), warnings
    assert sorted(i.slug for i in list_sessions(paths, archived=True, warn=warnings.append)) == ["bomb", "good"]
    assert any(w.endswith(f"archive metadata {deep} is unreadable: JSON nested too deeply") for w in warnings)
    restored = run_cli(tmp_path, "session", "restore", "bomb")
    assert restored.returncode == 1 and "expands past" in restored.stderr
    assert restored.stderr.count("\n") == 1
