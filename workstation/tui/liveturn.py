"""One agent turn as the live chat shows it: every record the agent writes becomes the chat's turns as a
resumed chat derives them (sessions.transcript), with their ids, as it is written (`host.RecordWritten`).

The streamed reply becomes the recorded assistant turn; a step's last tool result brings the memory and
timeline panes up to date; a compaction (from the agent's compactor thread) shows the line the log gives
it. Every callback runs on the agent's thread (or the compactor's) and reaches the panes through
`backend.ui`.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..sessions.records import Record
    from .backend import LiveBackend
    from .panes.chat import ChatPane


def record_time(record: Record) -> float:
    """A record's ISO `ts` as epoch seconds (now, if it has none readable)."""
    try:
        return datetime.fromisoformat(record.ts.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()


class LiveTurn:
    """One agent turn as the chat shows it: every record the agent writes becomes a turn with its id."""

    def __init__(self, backend: LiveBackend, chat: ChatPane) -> None:
        self.backend = backend
        self.chat = chat
        self.calls: dict[str, dict] = {}  # tool call id -> the call the assistant made
        self.waiting: set = set()  # ids of the last assistant message's calls without a result yet
        self.wrote_user = False

    def step_done(self) -> None:
        """Every call of the agent's last message has its result: the memory and timeline panes catch up
        (on the agent's thread; the panes take the rows through call_from_thread)."""
        self.backend.refresh_memory()
        self.backend.refresh_timeline()

    def heard(self, event) -> None:
        """One event of the turn (a host.Event), as the chat shows it."""
        from .. import host  # lazy: the agent stack, +150 ms; off the first paint

        ui, chat = self.backend.ui, self.chat
        # what streamed is void: the retry streams again. Its notice, as every notice of the turn (a trimmed
        # context, a cache break, an auto-commit), is a record: the chat shows it from the record
        if isinstance(event, host.TextFragment):
            ui(chat.stream_fragment, event.text)
        elif isinstance(event, host.Retry):
            ui(chat.discard_reply)
        elif isinstance(event, host.Step):
            ui(chat.set_context, event.tokens, event.window)
        elif isinstance(event, host.RecordWritten):
            self.recorded(event.record)
        elif isinstance(event, host.ToolStarted):
            ui(chat.set_activity, "tool", event.what)
        elif isinstance(event, host.Activity) and event.kind != "idle":
            ui(chat.set_activity, event.kind, event.what)
        elif isinstance(event, host.Plan):
            ui(chat.set_plan, event.items)

    def compacted(self, record: Record) -> None:
        """A compaction's line, as `log_turns` makes it from the log (the turns it summarized, by number)."""
        from ..agent import tools  # lazy: loaded by the turn already
        from ..sessions.transcript import log_turns  # lazy: as above

        records = self.backend.agent.session.read().records
        at = next((i for i, r in enumerate(records) if r.id == record.id), None)
        if at is not None:
            self.backend.ui(self.chat.add_turns, log_turns(records[: at + 1], at, tools=tools, ts=record_time))
        if not self.backend.busy:  # landed after the turn: the gauge shows the smaller next request
            self.backend.refresh_context()

    def recorded(self, record: Record) -> None:
        """A record the turn wrote, as the chat shows it: the derivation a resumed chat uses (sessions.transcript)."""
        from ..agent import tools  # lazy: the agent's tools, +100 ms; off the first paint
        from ..sessions.transcript import record_turns  # lazy: as above
        from ..sessions.log import tool_call_arguments  # lazy: the sessions stack, +32 ms; off the first paint
        from ..sessions.records import Assistant, Compact, Tool, User  # lazy: as above
        from ..sessions.turns import starts_turn  # lazy: as above

        ui, chat = self.backend.ui, self.chat
        if record.sidechain:  # a sub-agent's: its cost counts; the chat shows its task and summary only
            if isinstance(record, Assistant):
                self.backend.count_call(record)
            return
        ts = record_time(record)
        if isinstance(record, Compact):  # the agent's compaction, from its thread: the line a resumed chat shows
            self.compacted(record)
            return
        call = self.calls.get(record.tool_call_id) if isinstance(record, Tool) else None
        number = self.backend.turn_started() if starts_turn(record) else None
        turns = record_turns(record, tools=tools, ts=ts, args=tool_call_arguments(call) if call else {}, number=number)
        if isinstance(record, User):
            self.wrote_user = True
        elif isinstance(record, Assistant):
            self.backend.count_call(record)
            calls = record.tool_calls or ()
            self.calls.update((c.id, c) for c in calls)
            self.waiting = {c.id for c in calls}
            said = turns[0]
            # the streamed reply becomes the turn, with the text as recorded (secrets masked)
            if ui(chat.end_reply, id=said["id"], tokens=said["tokens"], ts=ts, text=said["text"]) is not None \
                    or not said["text"]:
                return
        for turn in turns:
            ui(chat.add_turn, turn)
        if isinstance(record, Tool) and self.waiting:
            self.waiting.discard(record.tool_call_id)
            if not self.waiting:  # the step's last result: its events and memory writes are in
                self.step_done()
