"""What the model has been told and what an update tells it (agent.updates): the fold of an epoch and
its updates, the difference, and when a redaction within an epoch pays."""

from __future__ import annotations

from workstation.agent.updates import State, current_epoch, difference, excerpt_update, known, redaction_pays
from workstation.sessions.records import Record, from_dict
from workstation.sessions.log import LogView


def record(kind: str, rid: str, **fields) -> Record:
    return from_dict({"v": 1, "id": rid, "type": kind, **fields})


def test_known_folds_the_epoch_and_every_update_after_it():
    epoch = record("epoch", "e1", state=State(decisions={"d1": "- [D:d1] one"}, pins=["a"],
                                              instructions={"AGENTS.md": "x"}, excerpt="map v1").as_record())
    view = LogView([
        record("system", "u0", content="before the epoch", update={"pins_added": ["ignored"]}),
        epoch,
        record("system", "u1", content="...", update={"decisions": {"d2": "- [D:d2] two"}, "pins_added": ["b"]}),
        record("system", "u2", content="...", update={"pins_removed": ["a"], "instructions": {"AGENTS.md": ""},
                                                     "excerpt": "map v2"}),
    ])
    told = known(view, epoch)
    assert told.decisions == {"d1": "- [D:d1] one", "d2": "- [D:d2] two"}
    assert told.pins == ["b"] and told.instructions == {} and told.excerpt == "map v2"


def test_the_epoch_in_force_is_the_newest_one_written_for_the_summary_in_force():
    first = record("epoch", "e1", summary=None)
    view = LogView([first, record("user", "m1", content="hi")])
    assert current_epoch(view) is first
    view.records.append(record("compact", "c1", summary="s", covers={"last_id": "m1"}))
    assert current_epoch(view) is None  # a compaction since: a new head is due
    second = record("epoch", "e2", summary="c1")
    view.records.append(second)
    assert current_epoch(view) is second


def test_the_difference_names_only_what_changed():
    before = State(decisions={"d1": "- [D:d1] one"}, pins=["a"], instructions={"AGENTS.md": "x"}, excerpt="m")
    assert difference(before, State(**{**before.__dict__}), {}) is None
    now = State(decisions={"d1": "- [D:d1] one", "d2": "- [D:d2] two"}, pins=["a", "b"],
                instructions={"AGENTS.md": "y", "pkg/AGENTS.md": "z"}, excerpt="m")
    update = difference(before, now, {"AGENTS.md": "--- AGENTS.md ---\nnew", "pkg/AGENTS.md": "--- pkg ---\nz"})
    assert update.data == {"decisions": {"d2": "- [D:d2] two"}, "pins_added": ["b"],
                           "instructions": {"AGENTS.md": "y", "pkg/AGENTS.md": "z"}}
    assert "- [D:d2] two" in update.text and "[D:d1]" not in update.text
    assert "--- AGENTS.md ---\nnew" in update.text and "- b" in update.text


def test_an_excerpt_mostly_shown_already_is_sent_as_its_changed_lines():
    before = "Repository map: 3 files\npkg/a.py:\n  1-3 def f(x)\n  5-9 def g(y)\npkg/b.py:\n  1-2 def h()"
    after = before.replace("def g(y)", "def g(y, request_id=None)")
    text = excerpt_update(before, after)
    assert text.splitlines() == ["Knowledge map, changed lines (the rest as shown before):", "pkg/a.py:",
                                 "  5-9 def g(y, request_id=None)"]
    other = "Knowledge map of the files this task names:\n\nother.py:\n  1-2 def z()"
    assert excerpt_update(before, other) == other  # mostly new: whole


def test_a_redaction_pays_only_when_its_savings_outweigh_re_caching_what_follows():
    unknown = "no-such/model"  # Anthropic's multipliers: read 0.1, write 1.25
    # 10,000 tokens freed, 2,000 after them: 10,000 * 0.1 * 3 = 3,000 > 2,000 * 1.15 = 2,300
    assert redaction_pays(10_000, 2_000, 3, unknown)
    assert not redaction_pays(10_000, 2_000, 2, unknown)  # 2,000 < 2,300
    assert not redaction_pays(1_000, 50_000, 20, unknown)  # a small output early in a long history: never
