"""The sidecar worker: watches the sessions folder and compacts sessions off the reply path.

`workstation sidecar` runs it standalone (`--once` for one pass); the TUI
starts it with `start_sidecar` and stops it with `stop_sidecar`. Every
change it makes is an appended record taken under the session's claim and
append lock, so it can run beside a TUI that appends to the same session,
beside another sidecar, and be killed at any moment. A compaction by the chat model sends the
conversation as the agent last sent it, rebuilt from the log, while the provider still caches it
(`logged_conversation`); otherwise a transcript.

With `[import] watch = ["claude-code", "codex"]` in the config it also keeps
importing those agents' sessions of this workspace as they write them
(importers/watch.py), so what they log is kept even once they delete it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .paths import Paths
from .process import alive
from .providers import cache_ttl_seconds
from .sessions.archive import recover
from .sessions.compaction import AutoCompactor, CompactResult, Conversation, context_window_of
from .sessions.modelview import as_sent, assemble, current_epoch, seen
from .sessions.log import SUFFIX, LogView, Session, SessionError, live_slugs, ts_seconds
from .sessions.records import Assistant, Redaction, Target
from .sessions.turns import number as number_turns

if TYPE_CHECKING:
    from .config import Config
    from .memory.episodic import Episodic
    from .sessions.records import Record

DEBOUNCE_S = 0.2  # let a burst of appends settle before looking
RESCAN_S = 30.0  # full pass now and then: retries after failures, missed events
Job = tuple[str, float, Callable[[], "str | None"]]  # name, every seconds, what to run (returns a line or None)
IMPORT_RETRY_S = 30.0  # after the import watcher failed, wait this long before starting it again
CACHE_MARGIN_S = 30.0  # a prefix cached this close to its TTL may be gone by the time the request lands


def persist_redactions(session: Session, config: Config, episodic: Episodic | None = None) -> Record | None:
    """Append a `redaction` record for tool outputs that rolling redaction newly hides, if any.

    The context builder redacts by rule anyway; the record makes each decision
    durable (a later config change does not bring the output back) and visible
    in the log.
    """
    view = session.read()
    new = _unpersisted(view, config, session)
    if not new:
        return None
    targets = [Target(id=r.record_id, name=r.name, chars=r.chars, key=r.key) for r in new]
    wanted = {t.id for t in targets}
    turns = number_turns(view.records)
    record = session.append_if(lambda v: wanted.isdisjoint(_persisted(v)), "redaction",
                               targets=targets, at_turn=turns.count)
    if record is not None and episodic is not None:
        for redaction in new:
            episodic.record("redaction", redaction.name, turn=turns.numbers.get(redaction.record_id),
                            chars_before=redaction.chars, chars_after=len(redaction.marker),
                            record_id=redaction.record_id, session=session.slug)
    return record


def _persisted(view: LogView) -> set[str]:
    return {t.id for r in view.records if isinstance(r, Redaction) for t in r.targets or ()}


def _unpersisted(view: LogView, config: Config, session: Session) -> list:
    done = _persisted(view)
    return [r for r in assemble(view, config, counter=session.counter).redactions if r.record_id not in done]


def logged_conversation(session: Session, config: Config, *, now: float | None = None) -> Conversation | None:
    """What the chat model was last sent, rebuilt from the log (sessions.modelview.as_sent: the epoch's head
    and tools, then the turns) and grown to now, so that a compaction by that model reads the history from
    the provider's prompt cache, as the agent's own does (compaction.Conversation), instead of a transcript
    sent cold. None when those bytes are not what was sent or their cache is likely gone: no request in the
    current epoch, its tools not on the epoch record, tools changed or the request trimmed to fit since,
    or the last request older than agent.cache_ttl (re-caching the history costs more than a transcript)."""
    view = session.read()
    model_view = seen(view)
    epoch = current_epoch(model_view)
    if epoch is None or not isinstance(epoch.tool_schemas, list):
        return None
    at = next(i for i, r in enumerate(model_view.records) if r is epoch)
    answers = [r for r in model_view.records[at:] if isinstance(r, Assistant)]
    if not answers or any(a.cache_break == "tools changed" for a in answers) or answers[-1].trimmed:
        return None
    sent = ts_seconds(answers[-1].ts)
    ttl = cache_ttl_seconds(getattr(getattr(config, "agent", None), "cache_ttl", "5m"))
    if sent is None or (time.time() if now is None else now) - sent > ttl - CACHE_MARGIN_S:
        return None
    _, head, body = as_sent(view, config, epoch=epoch, counter=session.counter)
    return Conversation(answers[-1].model or "", head + body, epoch.tool_schemas, session.slug)


class Sidecar:
    def __init__(self, paths: Paths, config: Config, *, episodic: Episodic | None = None,
                 report: Callable[[str], None] | None = None, window_tokens: int | None = None,
                 jobs: list[Job] | None = None):
        self.paths = paths
        self.jobs = list(jobs or [])  # (name, every seconds, fn): run on a thread of their own
        self.config = config
        self.episodic = episodic
        self.report = report or (lambda line: None)
        self.window_tokens = window_tokens if window_tokens is not None else context_window_of(config)
        self._auto = AutoCompactor(episodic)  # when a failed session may be tried again
        self._sessions: dict[str, Session] = {}  # incremental readers, one per slug
        self._warned: set[str] = set()  # an unreadable archive stays so: say it once, not every pass

    def process(self, slug: str) -> CompactResult | None:
        """One look at one session: finish interrupted moves, compact if due, persist redactions."""
        for note in recover(self.paths, slug, warn=self._warn_once):
            self.report(f"recovered {note}")
        session = self._sessions.get(slug) or self._sessions.setdefault(slug, Session(self.paths, slug))
        if not session.path.exists():
            self._sessions.pop(slug, None)
            return None
        try:
            result = self._maybe_compact(session)
            persist_redactions(session, self.config, self.episodic)
        except SessionError as err:  # archived or removed while we worked: nothing left to do here
            self.report(f"{slug}: skipped: {err}")
            return None
        return result

    def _maybe_compact(self, session: Session) -> CompactResult | None:
        slug = session.slug
        result = self._auto.run(session, self.config, self.window_tokens,
                                conversation=lambda: logged_conversation(session, self.config))
        if result is None:
            return None
        if result.ok:
            self.report(f"{slug}: compacted {result.span()} "
                        f"with {result.model} in {result.duration_s:.1f}s ({result.reason})")
        else:
            self.report(f"{slug}: compaction skipped: {result.reason} (retry in {self._auto.waiting(slug):.0f}s)")
        return result

    def run_once(self, *, summary: bool = False) -> list[CompactResult]:
        """One pass over every live session; with `summary` (`sidecar --once`), ends by saying what it
        checked and what it did (a watching sidecar passes every 30 s: its log says only what happened)."""
        results = []
        slugs = live_slugs(self.paths)
        for slug in slugs:
            result = self.process(slug)
            if result is not None:
                results.append(result)
        for note in recover(self.paths, warn=self._warn_once):  # archived-side leftovers with no live log
            self.report(f"recovered {note}")
        done = sum(r.ok for r in results)
        if summary:
            self.report(f"checked {len(slugs)} session{'' if len(slugs) == 1 else 's'} in {self.paths.sessions}: "
                        f"{done} compacted, {len(results) - done} skipped, {len(slugs) - len(results)} not due")
        return results

    def _warn_once(self, line: str) -> None:
        if line not in self._warned:
            self._warned.add(line)
            self.report(f"warning: {line}")

    def run(self, stop: threading.Event, *, parent_pid: int | None = None) -> None:
        """Watch until `stop` is set (or the parent process is gone)."""
        from watchdog.events import FileSystemEventHandler  # lazy: watchdog, +10 ms; the app only spawns the sidecar
        from watchdog.observers import Observer  # lazy: watchdog; the app only spawns the sidecar

        dirty: set[str] = set()
        wake = threading.Condition()

        def note(path: str | bytes) -> None:
            name = os.path.basename(os.fsdecode(path))
            if name.endswith(SUFFIX) and not name.startswith("."):
                with wake:
                    dirty.add(name[: -len(SUFFIX)])
                    wake.notify()

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                note(event.src_path)
                if getattr(event, "dest_path", ""):
                    note(event.dest_path)

        importing = self._start_import(stop)
        for job in self.jobs:
            threading.Thread(target=self._every, args=(job, stop), name=f"sidecar-{job[0]}", daemon=True).start()
        self.paths.ensure()
        observer = Observer()
        observer.schedule(Handler(), str(self.paths.sessions), recursive=False)
        observer.start()
        self.report(f"watching {self.paths.sessions}")
        try:
            self.run_once()
            next_scan = time.monotonic() + RESCAN_S
            while not stop.is_set():
                if parent_pid is not None and not alive(parent_pid):
                    self.report("parent process is gone; stopping")
                    return
                with wake:
                    wake.wait(timeout=0.5)
                    if dirty:
                        wake.wait(timeout=DEBOUNCE_S)
                    batch = sorted(dirty)
                    dirty.clear()
                for slug in batch:
                    if stop.is_set():
                        break
                    if (self.paths.sessions / f"{slug}{SUFFIX}").exists():
                        self.process(slug)
                if time.monotonic() >= next_scan:
                    self.run_once()
                    next_scan = time.monotonic() + RESCAN_S
        finally:
            observer.stop()
            observer.join(timeout=5)
            if importing is not None:
                importing.join(timeout=10)

    def _start_import(self, stop: threading.Event) -> threading.Thread | None:
        """The import watcher of `[import] watch`, on a thread of its own (None when not configured)."""
        sources = tuple(getattr(getattr(self.config, "import_", None), "watch", None) or ())
        if not sources:
            return None
        thread = threading.Thread(target=self._import, args=(sources, stop), name="sidecar-import", daemon=True)
        thread.start()
        return thread

    def _watcher(self, sources: tuple[str, ...]):
        from .importers.engine import Importer  # lazy: importers and store, +75 ms; the app only spawns it
        from .importers.watch import Watcher  # lazy: importers and store, +75 ms; the app only spawns it

        def said(result) -> None:
            for problem in result.problems:
                self.report(f"import: warning: {problem}")
            if result.error:
                self.report(f"import: {result.error}")
            for session in result.sessions:
                if session.count:
                    self.report(f"imported {result.path} -> {session.slug}: +{session.count} records")

        return Watcher(Importer(self.paths, getattr(self.episodic, "db", None)), self.paths.root, sources=sources,
                       report=said)

    def import_once(self) -> None:
        """One import pass of `[import] watch` (what `sidecar --once` does besides compacting)."""
        sources = tuple(getattr(getattr(self.config, "import_", None), "watch", None) or ())
        if sources:
            self._watcher(sources).pass_once()

    def _every(self, job: Job, stop: threading.Event) -> None:
        """Run a job every `seconds` until `stop`: what it returns is reported; a failure is one line, said
        once until it changes (a team server away for an hour is not 720 lines), and the job goes on."""
        name, seconds, fn = job
        last_failure = None
        while not stop.is_set():
            try:
                said = fn()
                if said:
                    self.report(f"{name}: {said}")
                if last_failure is not None:
                    self.report(f"{name}: working again")
                last_failure = None
            except Exception as err:  # a job must never take the compaction worker down
                line = " ".join(str(err).split())[:300]
                if line != last_failure:
                    self.report(f"{name}: {line}")
                last_failure = line
            stop.wait(seconds)

    def _import(self, sources: tuple[str, ...], stop: threading.Event) -> None:
        self.report(f"importing {', '.join(sources)} sessions of {self.paths.root}")
        while not stop.is_set():
            try:
                self._watcher(sources).run(stop)
            except Exception as err:  # an import must never take the compaction worker down: say it, retry
                self.report(f"import watch failed: {' '.join(str(err).split())[:300]}; "
                            f"retrying in {IMPORT_RETRY_S:.0f}s")
                stop.wait(IMPORT_RETRY_S)


def serve(paths: Paths, config: Config, *, once: bool, episodic: Episodic | None = None,
          report: Callable[[str], None] | None = None, parent_pid: int | None = None,
          jobs: list[Job] | None = None) -> list[CompactResult]:
    """What `workstation sidecar` runs: one pass, or watch until SIGTERM/SIGINT. `jobs` run every few
    seconds beside (the command line passes the team push when [team] is configured)."""
    sidecar = Sidecar(paths, config, episodic=episodic, report=report, jobs=jobs)
    if once:
        sidecar.import_once()
        for name, _, fn in sidecar.jobs:
            try:
                said = fn()
            except Exception as err:  # --once reports a failed job and still compacts
                said = " ".join(str(err).split())[:300]
            if said:
                sidecar.report(f"{name}: {said}")
        return sidecar.run_once(summary=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    sidecar.run(stop, parent_pid=parent_pid)
    return []


def start_sidecar(paths: Paths, *, model: str | None = None, log_path: Path | None = None) -> subprocess.Popen:
    """Start `workstation sidecar` for this workspace; it stops by itself when this process dies.
    `model`: the chat model this process was given on its command line, which the config lacks."""
    paths.ensure()
    log_path = log_path or paths.state / "sidecar.log"
    chosen = ["--model", model] if model else []
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "workstation", "-C", str(paths.root), *chosen, "sidecar",
             "--parent", str(os.getpid())],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)  # a Ctrl-C meant for the TUI does not reach it mid-write


def stop_sidecar(proc: subprocess.Popen, timeout: float = 10.0) -> int:
    """SIGTERM, then SIGKILL after `timeout`; both are safe for the logs. Returns the exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()
