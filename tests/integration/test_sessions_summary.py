"""The sessions list's summary (sessions.catalog, paths.sessions_summary): a cache of what the list says of
each live log, so that a list reads the logs changed since the last one and no others. The logs stay the
truth: whatever happens to the summary (torn, from another version, planted), the list says what the logs
say."""

from __future__ import annotations

import json
import os
from dataclasses import asdict

import pytest

from support.sessions_support import fill, make_config
from workstation.sessions import Session
from workstation.sessions.archive import archive, restore
from workstation.sessions.catalog import list_sessions
from workstation.sessions.log import json_line


@pytest.fixture
def workspace(tmp_path):
    return make_config(tmp_path)


@pytest.fixture
def paths(workspace):
    return workspace[1]


def listed(paths, warnings=None) -> dict[str, dict]:
    return {i.slug: asdict(i) for i in list_sessions(paths, warn=(warnings if warnings is not None else []).append)}


def from_logs(paths) -> dict[str, dict]:
    """The list as the logs alone make it (no summary)."""
    paths.sessions_summary.unlink(missing_ok=True)
    found = listed(paths)
    return found


def sessions(paths) -> None:
    fill(Session.create(paths, "plain"), 6)
    fill(Session.create(paths, "tools"), 8, tools=True)
    broken = Session.create(paths, "broken")
    fill(broken, 3)
    with open(broken.path, "ab") as fh:
        fh.write(b"{not json\n")
    fill(broken, 2, start=3)


def test_the_summary_says_what_the_logs_say_and_follows_each_change(workspace):
    config, paths = workspace
    sessions(paths)
    first = listed(paths)
    assert paths.sessions_summary.exists()
    assert listed(paths) == first == from_logs(paths)
    assert first["tools"]["changed"] == () and first["plain"]["turns"] == 3 and first["broken"]["problems"] == 1

    Session.open(paths, "plain").user("one more question")  # an append: the size changes
    after = listed(paths)
    assert after["plain"]["turns"] == 4 and after["plain"]["title"] == first["plain"]["title"]
    assert after == from_logs(paths)

    archive(paths, "tools", config)  # gone from the live list, and from the summary
    assert "tools" not in listed(paths)
    restore(paths, "tools")
    assert listed(paths)["tools"] == first["tools"]

    Session.create(paths, "new").user("a new session")
    assert listed(paths)["new"]["turns"] == 1


def test_a_log_replaced_by_one_of_the_same_size_is_read_again(paths):
    """A restore or a copy puts another file under the name: its inode and change time tell it apart."""
    fill(Session.create(paths, "one"), 4)
    before = listed(paths)["one"]
    log = paths.sessions / "one.jsonl"
    data = log.read_bytes()
    other = data.replace(b"please keep going", b"PLEASE KEEP GOING")
    assert len(other) == len(data)
    spare = paths.sessions / ".one.jsonl.spare.tmp"
    spare.write_bytes(other)
    os.replace(spare, log)
    assert listed(paths)["one"]["title"] == before["title"].replace("please keep going", "PLEASE KEEP GOING")


def test_a_torn_foreign_or_planted_summary_is_rebuilt_from_the_logs(paths, tmp_path):
    sessions(paths)
    truth = from_logs(paths)
    for planted in (b'{"version": 1, "sessions": {"plain": [1, 2', b'{"version": 99, "sessions": {}}',
                    b'{"version": 1, "sessions": {"plain": "lies"}}', b"\x00\xff"):
        paths.sessions_summary.write_bytes(planted)
        assert listed(paths) == truth
    # a summary that names a log's identity with other figures is believed only for that identity
    listed(paths)
    text = paths.sessions_summary.read_bytes().replace(b'"tools"', b'"plain"', 1)
    paths.sessions_summary.write_bytes(text)
    assert listed(paths) == truth
    # a summary naming, with its very identity, a file of the folder that is no session's log
    stray = paths.sessions / "Stray.Notes.jsonl"
    stray.write_bytes((paths.sessions / "plain.jsonl").read_bytes())
    st = stray.stat()
    listed(paths)
    summary = json.loads(paths.sessions_summary.read_bytes())
    summary["sessions"]["Stray.Notes"] = [[st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns],
                                          *summary["sessions"]["plain"][1:]]
    paths.sessions_summary.write_text(json.dumps(summary))
    assert listed(paths) == truth
    stray.unlink()

    paths.sessions_summary.unlink()
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("{}")
    paths.sessions_summary.symlink_to(elsewhere)
    warnings: list[str] = []
    assert listed(paths, warnings) == truth
    assert any("symbolic link" in w for w in warnings)
    assert elsewhere.read_text() == "{}"  # never written through


def test_unreadable_lines_are_reported_on_every_list(paths):
    sessions(paths)
    said = []
    for _ in range(2):  # from the log, then from the summary
        warnings: list[str] = []
        listed(paths, warnings)
        said.append(warnings)
    assert said[0] == said[1] and len(said[0]) == 1 and said[0][0].startswith("broken: unreadable line 4: ")


def test_a_summary_that_cannot_be_saved_leaves_the_list_right(paths):
    sessions(paths)
    truth = from_logs(paths)
    paths.sessions_summary.unlink()
    paths.sessions_summary.mkdir()  # something the rename cannot replace
    warnings: list[str] = []
    assert listed(paths, warnings) == truth
    assert any("could not be saved" in w for w in warnings)


def test_a_log_appended_to_while_the_list_reads_it_is_read_again(paths, monkeypatch):
    """The summary keeps the identity from before the read: a line that lands meanwhile is seen next time."""
    session = Session.create(paths, "busy")
    fill(session, 2)
    real_read = Session.read

    def read_then_append(self):
        view = real_read(self)
        with open(self.path, "ab") as fh:
            fh.write(json_line({"v": 1, "id": "late-1", "ts": "2025-01-01T00:00:00Z", "type": "user",
                                "content": "late", "tokens": 1}))
        return view

    monkeypatch.setattr(Session, "read", read_then_append)
    assert listed(paths)["busy"]["turns"] == 1
    monkeypatch.setattr(Session, "read", real_read)
    assert listed(paths)["busy"]["turns"] == 2


def test_a_title_with_a_lone_surrogate_is_listed_every_time(paths):
    """Legal in a log's JSON, refused by UTF-8: that one session stays out of the summary, the others in it."""
    Session.create(paths, "odd").user("look at \ud800 here")
    fill(Session.create(paths, "plain"), 2)
    for _ in range(2):
        found = listed(paths)
        assert found["odd"]["title"] == "look at \ud800 here" and found["plain"]["turns"] == 1
    assert b'"plain"' in paths.sessions_summary.read_bytes()
