"""Timeline pane: time order, type filter, details, selection and the jump into the chat."""

from __future__ import annotations

import tui_sample
from tui_support import settle, started
from workstation.tui.app import WorkstationApp
from workstation.tui.viewdata import TimelineEvent


def names(pane) -> list[str]:
    return [e.name for e in pane.shown]


async def test_events_in_time_order_filtered_by_type():
    app = WorkstationApp()
    async with started(app) as pilot:
        pane = app.timeline
        pane.set_events(reversed(tui_sample.EVENTS))  # order given does not matter
        await pilot.pause()
        assert names(pane) == [e.name for e in tui_sample.EVENTS]
        assert pane.table.row_count == 7
        assert pane.types == ["compaction", "memory", "model", "operation", "tool"]
        pane.table.focus()
        await pilot.press("t")  # first type
        await pilot.pause()
        assert names(pane) == ["turns 1–40"]
        await pilot.press("t", "t", "t", "t")  # ... to tool
        await pilot.pause()
        assert names(pane) == ["file_meta", "read_lines", "replace_lines"]
        assert pane.bar.left.plain.startswith("type: tool") and pane.bar.right.plain == "3 of 7"
        # an event arriving late lands in its place; one of another type stays hidden
        pane.append_events([TimelineEvent(tui_sample.T0 + 6.5, "tool", "grep"),
                            TimelineEvent(tui_sample.T0 + 12, "model", "gpt-4o-mini")])
        await pilot.pause()
        assert names(pane) == ["file_meta", "grep", "read_lines", "replace_lines"]
        await pilot.press("a")
        await pilot.pause()
        assert len(pane.shown) == 9 and [e.ts for e in pane.shown] == sorted(e.ts for e in pane.shown)


async def test_cursor_shows_details_and_enter_selects_and_jumps_the_chat(backend):
    app = WorkstationApp(backend)
    async with started(app) as pilot:
        tui_sample.load(app)
        app.chat.add_turns(tui_sample.synthetic_turns(300))  # the view follows the end
        await pilot.pause()
        transcript = app.chat.transcript
        assert transcript.turn_at_line(round(transcript.scroll_y)) > 250
        pane = app.timeline
        pane.set_type_filter("model")
        await pilot.pause()
        details = pane.query_one("#timeline-details").render().plain
        assert "gpt-4o-mini" in details and "tokens 2,412" in details and "tokens_in: 2000" in details
        pane.table.focus()
        await pilot.press("enter")
        await settle(pilot)
        assert backend.calls == []  # the app moves the chat itself
        assert transcript.cursor == transcript.index_of("a41")
        assert transcript.turn_at_line(round(transcript.scroll_y)) == transcript.index_of("a41")
        # an event whose turn is not in the chat says so instead of doing nothing
        pane.set_events([TimelineEvent(tui_sample.T0 + 20, "model_call", "gpt-4o-mini", id="e9", turn_id="gone"),
                         TimelineEvent(tui_sample.T0 + 21, "memory_miss", "parse", id="e10")])
        pane.set_type_filter(None)
        await pilot.pause()
        pane.table.move_cursor(row=0)
        await pilot.press("enter")
        pane.table.move_cursor(row=1)
        await pilot.press("enter")
        await pilot.pause()
        said = [n.message for n in app._notifications]
        assert "model_call gpt-4o-mini: its turn (gone) is not in this chat" in said
        assert "memory_miss parse belongs to no turn of the chat" in said
        assert transcript.cursor == transcript.index_of("a41")


async def test_failed_events_are_marked_in_the_table_and_the_details():
    app = WorkstationApp()
    async with started(app) as pilot:
        pane = app.timeline
        pane.set_events([TimelineEvent(1.0, "tool_call", "read_lines", id="a", details={"ok": True}),
                         TimelineEvent(2.0, "tool_call", "replace_lines", id="b", details={"ok": False}),
                         TimelineEvent(3.0, "model_call", "m", id="c")])
        await pilot.pause()
        cells = [pane.table.get_row_at(i)[2] for i in range(3)]
        assert [c.plain for c in cells] == ["read_lines", "✗ replace_lines", "m"]
        failed_style = cells[1].style
        assert failed_style and failed_style.color is not None and not cells[0].style  # a colour too
        pane.table.move_cursor(row=1)
        await pilot.pause()
        assert pane.query_one("#timeline-details").render().plain.startswith("✗ failed")


async def test_select_event_by_id_and_plain_mappings():
    app = WorkstationApp()
    async with started(app) as pilot:
        pane = app.timeline
        pane.set_events([{"ts": 5.0, "type": "tool", "name": "grep", "id": "x", "pattern": "TODO"}])
        await pilot.pause()
        assert pane.shown[0].details == {"pattern": "TODO"}  # unknown keys become details
        assert pane.select_event("x") and not pane.select_event("missing")
        await pilot.pause()
        assert "pattern: TODO" in pane.query_one("#timeline-details").render().plain


async def test_an_edit_with_new_errors_is_marked():
    app = WorkstationApp()
    async with started(app) as pilot:
        pane = app.timeline
        pane.set_events([TimelineEvent(1.0, "file_edit", "shop/http.py", id="a", details={"new_errors": 2}),
                         TimelineEvent(2.0, "file_edit", "shop/http.py", id="b", details={"fixed_errors": 2})])
        await pilot.pause()
        cells = [pane.table.get_row_at(i)[2] for i in range(2)]
        assert [c.plain for c in cells] == ["⚠2 shop/http.py", "shop/http.py"]


async def test_a_compaction_is_marked_with_what_it_replaced_and_an_uncompact_takes_it_back():
    from workstation.sessions.compaction import compaction_marks
    from workstation.sessions.records import from_dict
    from workstation.tui.backend import timeline_row
    from workstation.tui.panes.timeline import details_text

    records = [from_dict({"type": "compact", "id": "c1", "covers": {"last_turn": 12, "new_first_turn": 1},
                          "replaced": {"turns": [1, 12], "tool_calls": {"read_lines": 20, "grep": 9},
                                       "files_read": ["a.py"], "outputs": 29, "output_chars": 210400,
                                       "largest": [{"id": "r9", "turn": 7, "name": "read_lines", "chars": 40210}]}})]
    event = {"id": "e1", "ts": tui_sample.T0 + 1, "type": "compaction", "name": "s", "data": {"record_id": "c1"}}
    row = timeline_row(event, {}, compaction_marks(records))
    assert row["name"] == "⊟ turns 1–12"
    assert row["details"]["replaced"] == ("turns 1–12: 29 tool calls (read_lines ×20, grep ×9), 1 files read, "
                                          "29 outputs of 210,400 chars (largest: read_lines 40,210 chars, turn 7)")
    undone = timeline_row(event, {}, compaction_marks([*records, from_dict({"type": "uncompact", "id": "u1", "compact": "c1"})]))
    assert undone["details"]["taken_back"] == "undone by /uncompact"
    app = WorkstationApp()
    async with started(app) as pilot:
        pane = app.timeline
        pane.set_events([undone])  # as the backend gives it
        await pilot.pause()
        name = pane.table.get_row_at(0)[2]
        assert name.plain == "↶ ⊟ turns 1–12"
        assert "replaced: turns 1–12" in details_text(pane.shown[0])
