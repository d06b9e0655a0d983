"""The live backend: serves the panes' requests from the core.

Every method runs in a thread worker (the app's `_forward`), so it may block
on DuckDB, the file system or the model; data goes back to the panes through
`app.call_from_thread`. Nothing here imports textual widgets, and the core's
heavy modules load inside `start`, after the first paint.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import PurePosixPath
from typing import Any

from .viewdata import MapEntry, MemoryEntry, SlashCommand, SymbolEntry, Turn

log = logging.getLogger(__name__)

TIMELINE_LIMIT = 2000
PREVIEW_LINES = 80
DESCRIBE_BATCH = 20  # files described per pass of the model-written purposes
DESCRIBE_PER_START = 100  # a bound on what one start spends; purposes persist, so later starts go on


class LiveBackend:
    def __init__(self, root: str, *, model: str | None = None, session: str | None = None,
                 sidecar: bool = True):
        self.root = root
        self.model = model
        self.session_slug = session
        self.with_sidecar = sidecar
        self.app = None
        self.ws = None
        self.agent = None
        self.watcher = None
        self.sidecar = None
        self._cancel = threading.Event()
        self._busy = threading.Lock()  # one agent turn at a time
        self._ready = threading.Event()
        self.fatal: Exception | None = None  # set when the workspace cannot be opened at all

    # ------------------------------------------------------------------ lifecycle
    def _ui(self, fn, *args, **kwargs):
        return self.app.call_from_thread(fn, *args, **kwargs)

    def start(self, app) -> None:
        from .. import llm
        from ..agent import slash
        from ..agent.loop import Agent
        from ..runtime import Workspace
        from ..sessions.log import Session

        from ..errors import WorkstationError

        self.app = app
        threading.Thread(target=llm.warm_import, name="litellm-import", daemon=True).start()
        try:
            self.ws = ws = Workspace(self.root, model=self.model)
        except WorkstationError as err:  # bad config, unreadable store: the CLI prints it after exit
            self.fatal = err
            self._ui(app.exit)
            return
        chat = app.chat
        self._ui(chat.set_commands, [SlashCommand(u.split()[0], " ".join(u.split()[1:]), h)
                                     for u, h in slash.HELP.items()])
        if self.with_sidecar:
            from ..sessions.sidecar import start_sidecar

            self.sidecar = start_sidecar(ws.paths, model=self.model)
        if self.session_slug:
            session = Session.open(ws.paths, self.session_slug)
        else:
            session = Session.create(ws.paths, title="chat")
        self.agent = Agent(ws, session, approve=self._approve)
        self._ready.set()
        self._load_transcript()
        model = self.agent.model_name
        self._ui(chat.set_status, f"session {session.slug} · model {model}" if model else
                 f"session {session.slug} · no model: set [model] name in .workstation/config.toml "
                 "or WORKSTATION_MODEL (slash commands work without one)")
        self._index()
        self.refresh_memory()
        self.refresh_timeline()
        self._describe_files()

    def stop(self) -> None:
        self._cancel.set()
        if self.watcher is not None:
            self.watcher.stop()
        if self.sidecar is not None:
            from ..sessions.sidecar import stop_sidecar

            stop_sidecar(self.sidecar)
        if self.agent is not None:
            self.agent.close()
            session = self.agent.session
            if not session.read().records:  # nothing was said: leave no empty session behind
                session.path.unlink(missing_ok=True)
        if self.ws is not None:
            self.ws.close()

    # ------------------------------------------------------------------ knowledge map
    def _index(self) -> None:
        from ..index.watcher import Watcher

        kmap = self.ws.kmap
        map_pane = self.app.map

        def progress(done: int, total: int, *_: Any) -> None:
            self._ui(map_pane.set_progress, done, total, "indexing")

        self._ui(map_pane.set_progress, 0, None, "scanning")
        kmap.index_all(progress=progress)
        self._ui(map_pane.set_progress, None)
        self._ui(map_pane.set_root, self._children(""))
        self.watcher = Watcher(kmap, on_change=self._map_changed).start()

    def _describe_files(self) -> None:
        """Model-written purposes for files whose source gives none (index.describe_with_model):
        after everything else has loaded, a batch at a time, shown as each batch lands."""
        from ..llm import LLMCancelled, LLMError

        kmap = self.ws.kmap
        for _ in range(DESCRIBE_PER_START // DESCRIBE_BATCH):
            if self._cancel.is_set():
                return
            before = {f.path for f in kmap.files() if not f.purpose}
            try:
                described = kmap.describe_missing(limit=DESCRIBE_BATCH, cancel=self._cancel)
            except LLMCancelled:
                return  # the app is closing
            except LLMError as err:
                self._ui(self.app.notify, f"file purposes not written: {err}", severity="warning", timeout=8)
                return
            new = [f for f in kmap.files() if f.path in before and f.purpose]
            for info in new:
                self._ui(self.app.map.update_entry, MapEntry(info.path, "file", info.purpose, info.line_count,
                                                             info.language or "", "fresh"))
            if described < DESCRIBE_BATCH or not new:  # done, or files that changed meanwhile keep coming back
                return

    def _children(self, folder: str) -> list[MapEntry]:
        prefix = f"{folder}/" if folder else ""
        dirs: dict[str, int] = {}
        files: list[MapEntry] = []
        for info in self.ws.kmap.files():
            if not info.path.startswith(prefix):
                continue
            rest = info.path[len(prefix):]
            if "/" in rest:
                name = rest.split("/", 1)[0]
                dirs[name] = dirs.get(name, 0) + 1
            else:
                files.append(MapEntry(info.path, "file", info.purpose, info.line_count, info.language or "",
                                      "fresh"))
        out = [MapEntry(prefix + name, "dir", f"{count} files") for name, count in sorted(dirs.items())]
        return out + sorted(files, key=lambda e: e.path)

    def _map_changed(self, change) -> None:
        pane = self.app.map
        for path in change.indexed:
            self._ui(pane.update_freshness, path, "fresh")
        for path in change.removed:
            self._ui(pane.update_freshness, path, "deleted")
        parents = {str(PurePosixPath(p).parent) for p in change.indexed if pane.node_for(p) is None}
        for parent in parents:
            folder = "" if parent == "." else parent
            if folder == "" or pane.node_for(folder) is not None:
                self._ui(pane.set_children, folder, self._children(folder))

    def on_map_pane_children_requested(self, msg) -> None:
        self._ui(self.app.map.set_children, msg.path, self._children(msg.path))

    def on_map_pane_symbols_requested(self, msg) -> None:
        symbols = [SymbolEntry(s.name, s.kind, s.start_line, s.end_line, s.parent or "", s.signature)
                   for s in self.ws.kmap.symbols(msg.path)]
        self._ui(self.app.map.set_symbols, msg.path, symbols)

    def on_map_pane_file_selected(self, msg) -> None:
        from ..agent.filetools import read_lines

        purpose = next((f.purpose for f in self.ws.kmap.files() if f.path == msg.path), "")
        head = read_lines(self.ws.root, msg.path, 1, PREVIEW_LINES)
        self._ui(self.app.map.show_preview, msg.path, 1, head.end, head.text, purpose=purpose)

    def on_map_pane_symbol_selected(self, msg) -> None:
        from ..agent.filetools import read_lines

        lines = read_lines(self.ws.root, msg.path, msg.start, msg.end)
        self._ui(self.app.map.show_preview, msg.path, msg.start, msg.end, lines.text)

    # ------------------------------------------------------------------ chat
    def _load_transcript(self) -> None:
        from ..replay import Episode

        view = self.agent.session.read()
        if not view.records:
            return
        episode = Episode.load(self.ws.paths, self.agent.session.slug, config=self.ws.config)
        # every step's turns (transcript_of is one step's: the last alone showed only the newest record)
        turns = [t for index in range(len(episode.steps)) for t in episode.transcript_of(index)]
        self._ui(self.app.chat.set_turns, turns)

    def _approve(self, request) -> bool:
        """Ask the user in the app (an agent.approval.ApprovalRequest); the agent's thread waits for the answer."""
        from .screens.confirm import ConfirmScreen

        answer = threading.Event()
        verdict: list[bool] = []

        def done(ok: bool | None) -> None:
            verdict.append(bool(ok))
            answer.set()

        self._ui(self.app.push_screen, ConfirmScreen(request.question()), done)
        answer.wait()
        return verdict[0]

    def on_chat_pane_submitted(self, msg) -> None:
        from ..agent.loop import AgentEvents
        from ..errors import WorkstationError

        self._ready.wait()
        chat = self.app.chat
        if not self._busy.acquire(blocking=False):
            self._ui(chat.add_turn, Turn("notice", "the agent is still working; Escape stops it"))
            return
        try:
            self._cancel.clear()
            self._ui(chat.add_turn, Turn("user", msg.text, ts=time.time()))
            events = AgentEvents(
                on_text=lambda fragment: self._ui(chat.stream_fragment, fragment),
                on_retry=lambda why: self._ui(chat.add_turn, Turn("notice", f"retrying: {why}")),
                on_tool=self._tool_done,
                on_step=lambda step, tokens, window: self._ui(chat.set_context, tokens, window),
                on_notice=lambda text: self._ui(chat.add_turn, Turn("notice", text)))
            try:
                result = self.agent.run(msg.text, events, cancel=self._cancel)
            except WorkstationError as err:
                self._ui(chat.end_reply)
                self._ui(chat.add_turn, Turn("error", str(err)))
                return
            self._ui(chat.end_reply)
            if result.error:
                self._ui(chat.add_turn, Turn("error", result.error))
        finally:
            self._busy.release()
            self.refresh_memory()
            self.refresh_timeline()

    def _tool_done(self, name: str, args: dict, result) -> None:
        chat = self.app.chat
        self._ui(chat.end_reply)  # text streamed before the call belongs above it
        self._ui(chat.add_turn, Turn("tool", tool=name, args=args, result=result.text, ok=result.ok,
                                     ts=time.time()))

    def on_chat_pane_cancel_requested(self, msg) -> None:
        self._cancel.set()

    def on_chat_pane_command_submitted(self, msg) -> None:
        from ..agent import slash

        self._ready.wait()
        chat = self.app.chat
        self._ui(chat.add_turn, Turn("user", msg.text, ts=time.time()))
        out = slash.run(self.agent, msg.text)
        self._ui(chat.add_turn, Turn("command" if out.ok else "error", out.text, ts=time.time()))
        if out.action == "model":
            self._ui(chat.set_status, f"session {self.agent.session.slug} · model {self.agent.model_name}")
        if out.action == "fork" and out.slug:  # go on in the fork; the original stays as it was
            self._resume(out.slug)
            return
        self.refresh_memory()
        self.refresh_timeline()

    def on_sessions_screen_resume_requested(self, msg) -> None:
        self._ready.wait()
        self._resume(msg.slug)

    def _resume(self, slug: str) -> None:
        """Switch the chat to another session: a fresh agent on it, its transcript, its history."""
        from ..agent.loop import Agent
        from ..sessions.log import Session

        with self._busy:  # never under a running turn
            session = Session.open(self.ws.paths, slug)
            old, self.agent = self.agent, Agent(self.ws, session, approve=self._approve,
                                                model=self.agent.model_name)
            old.close()
        self._ui(self.app.chat.set_turns, [])
        self._load_transcript()
        self._ui(self.app.chat.set_status, f"session {session.slug} · model {self.agent.model_name or '(none)'}")
        self.refresh_memory()
        self.refresh_timeline()

    def on_chat_pane_original_requested(self, msg) -> None:
        from ..sessions.context import fetch_original

        record_id = msg.turn.id
        original = fetch_original(self.agent.session, record_id)
        turn = msg.turn
        self._ui(self.app.chat.update_turn, record_id,
                 Turn(turn.role, turn.text, id=turn.id, ts=turn.ts, result=str(original.get("content") or "")))

    # ------------------------------------------------------------------ memory and timeline
    def refresh_memory(self) -> None:
        memory = self.agent.memory
        pane = self.app.memory
        stm = [MemoryEntry(row["key"], row["value"]) for row in memory.list("stm", limit=1000)]
        ltm = [MemoryEntry(row["key"], row["value"], row["namespace"],
                           time.strftime("%Y-%m-%d %H:%M", time.localtime(row["updated_at"])))
               for row in memory.list("ltm", limit=1000)]
        self._ui(pane.set_entries, "stm", stm)
        self._ui(pane.set_entries, "ltm", ltm)

    def refresh_timeline(self) -> None:
        events = self.agent.memory.episodic.query(session=self.agent.session.slug, limit=TIMELINE_LIMIT)
        events = [e for e in reversed(events) if e["type"] != "op_start"]
        rows = [{"ts": e["ts"], "type": e["type"], "name": e.get("name", ""), "duration_ms": e.get("duration_ms"),
                 "tokens": (e.get("tokens_in") or 0) + (e.get("tokens_out") or 0) or None, "id": e["id"],
                 "session": e.get("session", ""), "details": e.get("data") or {}} for e in events]
        self._ui(self.app.timeline.set_events, rows)
        self._ui(self.app.memory.set_events, rows)

    def on_memory_pane_edit_requested(self, msg) -> None:
        memory = self.agent.memory
        kwargs = {"namespace": msg.namespace} if msg.namespace and msg.tier == "ltm" else {}
        memory.umem(msg.tier, msg.key, msg.value, **kwargs)
        if msg.tier == "ltm":
            memory.fence("ltm")
        self._ui(self.app.memory.upsert, msg.tier, MemoryEntry(msg.key, msg.value, msg.namespace))

    def on_theme_changed(self, msg) -> None:
        """Remember the chosen theme in the workspace config (tomlkit keeps the user's formatting)."""
        import tomlkit

        from ..fsutil import atomic_write

        if self.ws is None:
            return
        path = self.ws.paths.config_file
        doc = tomlkit.parse(path.read_text()) if path.exists() else tomlkit.document()
        if doc.get("ui", {}).get("theme") == msg.theme:
            return
        doc.setdefault("ui", tomlkit.table())["theme"] = msg.theme
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, tomlkit.dumps(doc).encode())


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
