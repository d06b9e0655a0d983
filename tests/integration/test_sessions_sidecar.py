"""The sidecar as a real process: one pass, watching while a session is appended to, two at once."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from support.fakellm import ScriptedLLM
from support.sessions_support import (KEY, KEY_ENV, compaction_events, fill_turns, make_config, real_episodic, summarizer,
                              turns_in_prompt, write_config_file)
from workstation.sessions import Session
from workstation.sessions.compaction import plan_compaction
from workstation.sidecar import start_sidecar, stop_sidecar


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def test_sidecar_once_compacts_what_is_due_and_records_why(tmp_path):
    with ScriptedLLM(summarizer(fail=["compact"])) as server:
        write_config_file(tmp_path, server.url, compact_threshold=10, keep_recent=4)
        config, paths = make_config(tmp_path, server.url, compact_threshold=10, keep_recent=4)
        due, small = Session.create(paths, "due"), Session.create(paths, "small")
        fill_turns(due, 12)
        fill_turns(small, 5)
        out = subprocess.run([sys.executable, "-m", "workstation", "-C", str(tmp_path), "sidecar", "--once"],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert "due: compacted turns 1–8 with openai/fallback" in out.stdout
        assert out.stdout.splitlines()[-1] == (f"checked 2 sessions in {paths.sessions}: 1 compacted, 0 skipped, "
                                               "1 not due")
        assert [r["model"] for r in server.requests] == ["compact", "fallback"]
    assert len(due.read().compacts()) == 1 and small.read().compacts() == []
    with real_episodic(paths) as episodic:
        [event] = compaction_events(episodic)
    assert event["name"] == "due" and event["ok"] is True and event["flow"] == "sidecar"


def test_watching_sidecars_compact_a_session_being_appended_to(tmp_path):
    """Two real sidecars watch while this process appends 120 turns (waiting, after 40, for the first
    compaction: a sidecar loads the model client with it): every turn survives, in order, each range is
    compacted exactly once, and the compact records chain without gaps."""
    answer = summarizer()

    def slowish(body):
        reply = answer(body)
        reply.delay_s = 0.05
        return reply

    knobs = dict(compact_threshold=20, keep_recent=8)
    with ScriptedLLM(slowish) as server:
        write_config_file(tmp_path, server.url, **knobs)
        config, paths = make_config(tmp_path, server.url, **knobs)
        session = Session.create(paths, "busy")
        sidecars = [start_sidecar(paths), start_sidecar(paths)]
        log = paths.state / "sidecar.log"
        try:
            deadline = time.monotonic() + 90
            while not log.exists() or log.read_text().count("watching ") < 2:
                assert time.monotonic() < deadline and all(p.poll() is None for p in sidecars), log.read_text()
                time.sleep(0.1)
            appended = []
            for n in range(120):
                appended += fill_turns(session, 1, start=n)
                time.sleep(0.02)
                if n == 40:  # a sidecar loads the model client with its first compaction (seconds): let it land
                    deadline = time.monotonic() + 120
                    while not Session(paths, "busy").read().compacts():
                        assert time.monotonic() < deadline, log.read_text()
                        time.sleep(0.2)
            deadline = time.monotonic() + 90
            while plan_compaction(session.read(), config) is not None:
                assert time.monotonic() < deadline, "the sidecars did not catch up"
                assert all(p.poll() is None for p in sidecars), (paths.state / "sidecar.log").read_text()
                time.sleep(0.2)
        finally:
            codes = [stop_sidecar(p) for p in sidecars]
        requests = list(server.requests)
    assert codes == [0, 0], (paths.state / "sidecar.log").read_text()
    view = Session(paths, "busy").read()
    assert view.problems == []
    assert [t["id"] for t in view.turns] == [r["id"] for r in appended]
    compacts = view.compacts()
    assert len(compacts) >= 3
    # compactions landed between appends, not only after them
    assert view.records.index(compacts[0]) < view.records.index(view.turns[-1])
    previous = None
    for record in compacts:
        covers = record["covers"]
        assert covers["new_first_turn"] == (previous["covers"]["last_turn"] + 1 if previous else 1)
        assert record.get("folds") == (previous["id"] if previous else None)
        previous = record
    sent = [n for body in requests for n in turns_in_prompt(body)]
    assert sent == list(range(1, previous["covers"]["last_turn"] + 1))  # no turn summarized twice


def test_a_sidecar_compacts_with_the_model_its_app_was_given_on_the_command_line(tmp_path):
    """`workstation --model M PATH`: the config names no model, the sidecar must still have one."""
    with ScriptedLLM(summarizer()) as server:
        config_file = write_config_file(tmp_path, server.url, compact_threshold=10, keep_recent=4, compact_model="",
                                        compact_fallback_model="")
        config_file.write_text(config_file.read_text().replace('name = "openai/chat"', 'name = ""'))
        config, paths = make_config(tmp_path, server.url, compact_threshold=10, keep_recent=4)
        session = Session.create(paths, "due")
        fill_turns(session, 12)
        sidecar = start_sidecar(paths, model="openai/chosen")
        try:
            deadline = time.monotonic() + 60
            while not session.read().compacts():
                assert time.monotonic() < deadline and sidecar.poll() is None, \
                    (paths.state / "sidecar.log").read_text()
                time.sleep(0.1)
        finally:
            assert stop_sidecar(sidecar) == 0
        assert {r["model"] for r in server.requests} == {"chosen"}


def test_sidecar_stops_when_its_parent_is_gone(tmp_path):
    make_config(tmp_path)
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    sidecar = subprocess.Popen([sys.executable, "-m", "workstation", "-C", str(tmp_path), "sidecar",
                                "--parent", str(parent.pid)], stdout=subprocess.PIPE, text=True)
    parent.wait()
    assert sidecar.wait(timeout=30) == 0
    assert "parent process is gone" in sidecar.stdout.read()


def test_a_failing_import_watch_is_reported_and_retried_not_fatal(tmp_path, monkeypatch):
    import threading

    from workstation import sidecar as sidecar_mod

    config, paths = make_config(tmp_path)
    lines: list[str] = []
    car = sidecar_mod.Sidecar(paths, config, report=lines.append)
    stop = threading.Event()
    starts = []

    class Broken:
        def run(self, _stop):
            starts.append(1)
            if len(starts) == 2:
                stop.set()
            raise OSError("the Claude Code folder vanished")

    monkeypatch.setattr(car, "_watcher", lambda sources: Broken())
    monkeypatch.setattr(sidecar_mod, "IMPORT_RETRY_S", 0.01)
    car._import(("claude-code",), stop)
    assert len(starts) == 2  # retried after the failure
    assert lines[0].startswith("importing claude-code sessions of")
    assert lines[1] == "import watch failed: the Claude Code folder vanished; retrying in 0s"
