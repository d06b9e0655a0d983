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
        (message,) = backend.named("on_timeline_pane_event_selected")
        assert message.event.id == "e5" and message.event.turn_id == "a41"
        await pilot.pause()
        assert transcript.cursor == transcript.index_of("a41")
        assert transcript.turn_at_line(round(transcript.scroll_y)) == transcript.index_of("a41")


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
