"""Undoing a compaction (sessions.compaction.uncompact): the model's view as before it, automatic compaction
held until the request would not fit, and what a compaction replaced (`replaced`)."""

from __future__ import annotations

import pytest

from support.sessions_support import fill_turns, make_config
from workstation.sessions import Session, SessionError
from workstation.sessions.compaction import compaction_marks, plan_compaction, replaced_by, uncompact
from workstation.sessions.modelview import assemble, current_epoch, seen


def compacted(session: Session, upto: dict, previous: dict | None = None, **covers) -> dict:
    return session.append("compact", summary="## Task & instructions\n(none)", sections={}, files=[],
                          covers={"last_id": upto["id"], "first_turn": 1, **covers}, model="m", reason="threshold",
                          folds=previous["id"] if previous else None)


def test_uncompact_puts_the_epoch_before_the_compaction_back(tmp_path):
    config, paths = make_config(tmp_path)
    session = Session.create(paths, "u")
    first = session.append("epoch", system="HEAD ONE", state={}, tools="t")
    turns = fill_turns(session, 3, steps=2)
    before = assemble(session.read(), config, system_prompt="HEAD ONE", epoch=first).messages
    compact = compacted(session, turns[-2], last_turn=3, new_first_turn=1)
    second = session.append("epoch", system="HEAD TWO", state={}, tools="t", summary=compact["id"])
    session.append("redaction", targets=[{"id": turns[2]["id"]}], at_turn=3, epoch=second["id"])
    assert current_epoch(seen(session.read()))["id"] == second["id"]

    record = uncompact(session)
    assert record["compact"] == compact["id"] and record["epochs"] == [second["id"]] and record["turns"] == [1, 3]
    view = seen(session.read())
    assert view.last_compact() is None and current_epoch(view)["id"] == first["id"]
    assert not any(r["type"] == "redaction" for r in view.records)  # made in the undone epoch
    assert assemble(session.read(), config, system_prompt="HEAD ONE", epoch=first).messages == before
    assert session.read().get(compact["id"]) is not None  # nothing is deleted
    with pytest.raises(SessionError, match="nothing to uncompact"):
        uncompact(session)
    assert compaction_marks(session.read().records)[compact["id"]]["undone"] == "undone by /uncompact"


def test_a_second_uncompact_undoes_the_summary_before(tmp_path):
    config, paths = make_config(tmp_path)
    session = Session.create(paths, "u2")
    turns = fill_turns(session, 4)
    one = compacted(session, turns[1], last_turn=1)
    two = compacted(session, turns[-1], one, last_turn=2)
    assert seen(session.read()).last_compact()["id"] == two["id"]
    uncompact(session)
    assert seen(session.read()).last_compact()["id"] == one["id"]
    uncompact(session)
    assert seen(session.read()).last_compact() is None


def test_automatic_compaction_is_held_until_the_request_would_not_fit(tmp_path):
    config, paths = make_config(tmp_path, compact_threshold=3, keep_recent=1)
    session = Session.create(paths, "held")
    turns = fill_turns(session, 3)
    compacted(session, turns[1], last_turn=1)
    uncompact(session)
    fill_turns(session, 3, start=3)
    view = session.read()
    size = assemble(seen(view), config).tokens
    assert plan_compaction(view, config, window_tokens=10 * size + 10_000) is None  # threshold passed, held
    assert plan_compaction(view, config, force=True) is not None  # asked for: runs
    over = plan_compaction(view, config, window_tokens=size + 100)  # no longer fits less the reply (>= 256)
    assert over is not None
    # once a compaction lands after the uncompact record, the hold is over
    compacted(session, session.read().turns[-3], last_turn=5)
    fill_turns(session, 3, start=6)
    assert plan_compaction(session.read(), config, window_tokens=10 * size + 10_000) is not None


def test_replaced_lists_turns_calls_files_read_and_outputs_by_size(tmp_path):
    config, paths = make_config(tmp_path, compact_threshold=2, keep_recent=1)
    session = Session.create(paths, "r")
    fill_turns(session, 3, steps=3, big=500)
    plan = plan_compaction(session.read(), config)
    replaced = replaced_by(plan)
    assert replaced["turns"] == [1, 2] and replaced["tool_calls"] == {"read_file": 4}
    assert replaced["files_read"] == ["src/mod_1_1.py", "src/mod_1_2.py", "src/mod_2_1.py", "src/mod_2_2.py"]
    assert replaced["outputs"] == 4 and replaced["output_chars"] == 2000
    assert [o["chars"] for o in replaced["largest"]] == [500] * 4 and replaced["largest"][0]["turn"] == 1
