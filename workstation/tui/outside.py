"""What another process appended to the chat's session (the sidecar's compactions and redactions, a second
app on the same session): the live chat shows it where a resumed chat does, as it lands.

`watch` runs on a thread of its own: every POLL_S it compares the log's size with the last it saw (one stat)
and, when it grew and nothing of this app is writing (no turn, no slash command: each shows its own records as
it writes them), reads what was appended. A record this process did not write (sessions.log.wrote_here)
becomes the turns the one derivation gives it (sessions.transcript.log_groups), put before the turns of the
records that follow it in the log, so the live chat is the resumed one. A turn catches up before it starts.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING

from .liveturn import record_time

if TYPE_CHECKING:
    from .backend import LiveBackend

POLL_S = 0.5  # how soon a record another process appended shows: a stat of the log this often


class Outside:
    def __init__(self, backend: LiveBackend) -> None:
        self.backend = backend
        self._lock = threading.Lock()  # one look at a time; a slash command or turn waits for one under way
        self._commands = 0  # slash commands running: they show what they write themselves
        self._looked = 0  # records of the chat's session accounted for (shown, or this app's own)
        self._size = -1  # the log's size at the last look (-1: look at the next poll)
        self._shown: set[str] = set()  # ids of records past `_looked` a slash command showed with its own

    def reset(self, looked: int) -> None:
        """The chat now shows the session's first `looked` records (a session shown anew)."""
        with self._lock:
            self._looked, self._size = looked, -1
            self._shown.clear()

    def shown(self, records: list[dict]) -> None:
        """A slash command showed these records with what it wrote (some another process may have written)."""
        with self._lock:
            self._shown.update(record.id for record in records)

    @contextlib.contextmanager
    def command(self):
        """While a slash command runs: no look (what it writes it shows itself, as it writes it)."""
        with self._lock:
            self._commands += 1
        try:
            yield
        finally:
            with self._lock:
                self._commands -= 1

    def watch(self, closing: threading.Event) -> None:
        while not closing.wait(POLL_S):
            self.catch_up(turn=False)

    def catch_up(self, *, turn: bool) -> None:
        """Show what another process appended since the last look. `turn`: the caller holds the backend's
        turn lock (a turn about to start); otherwise nothing is done while a turn or session change holds it."""
        from ..agent import tools  # lazy: the agent's tools; loaded by then
        from ..sessions.transcript import log_groups  # lazy: as above
        from ..sessions.log import SessionError, wrote_here  # lazy: the sessions stack; loaded by then

        backend = self.backend
        with self._lock:
            if self._commands or (not turn and backend.busy) or backend.agent is None:
                return
            session = backend.agent.session
            try:
                size = session.path.stat().st_size
                if size == self._size:
                    return
                records = session.read().records
            except (FileNotFoundError, SessionError):  # removed or archived: whatever did it says so
                return
            self._size = size
            fresh = [i for i in range(self._looked, len(records))
                     if not wrote_here(str(records[i].get("id"))) and str(records[i].get("id")) not in self._shown]
            self._looked = len(records)
            self._shown.clear()  # every id in it is below `_looked` now
            if not fresh:
                return
            backend.recount_turns(records)  # a second app's user message is a turn too
            if backend.closing:
                return
            backend.ui(self._show, log_groups(records, tools=tools, ts=record_time), fresh)
        if not backend.closing:
            backend.refresh_bill()
            backend.refresh_context()  # the sidecar's compaction makes the next request smaller
            backend.refresh_timeline()

    def _show(self, groups: list[list[dict]], fresh: list[int]) -> None:
        """On the UI thread: each fresh record's turns before those of the records after it in the log that
        the chat shows (a record of this app's compactor not shown yet is not among them)."""
        transcript = self.backend.app.chat.transcript

        def shown(group: list[dict]) -> bool:
            ids = {turn["id"] for turn in group if turn.get("id")}
            return not ids or any(transcript.has_turn(turn_id) for turn_id in ids)

        pending = set(fresh)
        for index in fresh:
            pending.discard(index)
            after = sum(len(group) for j, group in enumerate(groups[index + 1:], index + 1)
                        if j not in pending and shown(group))
            self.backend.app.chat.insert_turns(len(transcript.turns) - after, groups[index])
