"""Turning a source file's drafts into session records: idempotent, incremental, with events.

For each conversation a source holds:

1. the target session is its slug (`claude-2025-10-21-cfa1e878`), created on first import;
2. the session's records are read and every source item they came from (`source.id`,
   `source.merged`) is known. A draft whose items are all known is skipped; one whose items are
   all new is written whole; one with some new items (an answer still being logged when it was
   last imported) is continued by a record holding only the new parts (`continues`: the record it
   extends; its usage: what grew since);
3. new records get `tokens`, compact records their `covers` (every turn before them), and all
   are appended in one locked write;
4. their episodic events (turn, model_call with tokens and cost, tool_call, file_read/file_edit,
   compaction, error) are written with the source timestamps, in a session named by the slug, as
   one batch whose id is made from the records it holds (a retried batch is applied once). The log
   is written first: if the process dies between the two, the records are there and only their
   events are missing;
5. the file's state (size, mtime, inode, a hash of its head) is stored, so an unchanged file is
   skipped without being read, and the search index reads the new lines.

Re-reading a grown file from its start costs a parse of the whole file, never a duplicate: the
provenance in the log decides what is new, so a lost or stale state only costs time.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..paths import Paths
from ..sessions.log import (FORMAT_VERSION, TURN_TYPES, LogView, Session, SessionArchived, SessionError,
                            record_text, tool_call_arguments)
from . import FORMATS, ImportProblem, parse
from .base import Conversation, Draft, Usage, record_id

HEAD_BYTES = 4096
_ARG_CLIP = 300  # characters of a string argument kept in an episodic tool_call event
_READ_TOOLS = {"Read": "file_path", "read_file": "path", "view": "path", "open": "path", "NotebookRead": "notebook_path"}
_EDIT_TOOLS = {"Edit": "file_path", "MultiEdit": "file_path", "Write": "file_path", "NotebookEdit": "notebook_path",
               "write_file": "path", "edit_file": "path", "edit": "path", "create": "path"}
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add) File: (.+)$", re.MULTILINE)


@dataclass
class SessionResult:
    slug: str
    added: dict[str, int] = field(default_factory=dict)  # record type -> records added
    created: bool = False
    skipped: str = ""  # why nothing could be added (an archived session)

    @property
    def count(self) -> int:
        return sum(self.added.values())


@dataclass
class FileResult:
    path: str
    format: str | None = None
    sessions: list[SessionResult] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    bytes: int = 0
    unchanged: bool = False  # the same file as last time: not read
    error: str = ""  # the file could not be imported at all

    @property
    def added(self) -> int:
        return sum(s.count for s in self.sessions)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "format": self.format, "bytes": self.bytes, "unchanged": self.unchanged,
                "error": self.error or None, "added": self.added, "problems": self.problems,
                "sessions": [{"slug": s.slug, "added": s.added, "created": s.created, "skipped": s.skipped or None}
                             for s in self.sessions]}


class Importer:
    """Imports source files into a workspace's sessions; keep one per process to reuse its readers."""

    def __init__(self, paths: Paths, db: Any = None, *, counter: Callable[[str], int] | None = None):
        self.paths = paths
        self.db = db
        self.counter = counter
        self._sessions: dict[str, Session] = {}
        paths.ensure()

    # ------------------------------------------------------------------ files
    def import_file(self, path: str | os.PathLike, fmt: str | None = None) -> FileResult:
        shown = str(path)
        try:
            real = Path(os.path.realpath(os.path.expanduser(shown)))
            st = real.stat()
        except FileNotFoundError:
            return FileResult(shown, error=f"{shown}: no such file")
        except OSError as err:
            return FileResult(shown, error=f"{shown}: cannot read ({err.strerror})")
        if real.is_dir():
            return FileResult(shown, error=f"{shown}: is a folder; give the session files in it")
        if fmt is not None and fmt not in FORMATS:
            return FileResult(shown, error=f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
        try:
            with open(real, "rb") as fh:
                st = os.fstat(fh.fileno())
                head = fh.read(HEAD_BYTES)
                identity = (st.st_size, st.st_mtime_ns, st.st_ino, hashlib.sha1(head).hexdigest())
                state = self._state(str(real))
                if state is not None and tuple(state[1:5]) == identity and (fmt is None or fmt == state[0]):
                    return FileResult(shown, state[0], bytes=st.st_size, unchanged=True)
                data = head + fh.read()
        except OSError as err:
            return FileResult(shown, error=f"{shown}: cannot read ({err.strerror})")
        try:
            fmt, parsed = parse(data, real, fmt)
        except ImportProblem as err:
            return FileResult(shown, error=str(err).replace(str(real), shown, 1))
        result = FileResult(shown, fmt, bytes=len(data),
                            problems=[str(p).replace(str(real), shown, 1) for p in parsed.problems])
        for conversation in parsed.conversations:
            result.sessions.append(self._write(conversation, fmt, str(real), result.problems))
        if self.db is not None:
            self.db.call(save_source_state, str(real), fmt, *identity, parsed.consumed,
                         [s.slug for s in result.sessions])
            from ..sessions import textindex

            textindex.sync(self.paths, self.db, only=[s.slug for s in result.sessions if s.count])
        return result

    def _state(self, path: str) -> tuple | None:
        return self.db.call(source_state, path) if self.db is not None else None

    # ------------------------------------------------------------------ one session
    def _session(self, slug: str) -> tuple[Session, bool]:
        session = self._sessions.get(slug)
        if session is not None and session.path.exists():
            return session, False
        created = False
        if not (self.paths.sessions / f"{slug}.jsonl").exists():
            try:
                session = Session.create(self.paths, slug, counter=self.counter)
                created = True
            except SessionError as err:
                if "already exists" not in str(err) or "archive" in str(err):
                    raise
        if not created:
            session = Session.open(self.paths, slug, counter=self.counter)
        self._sessions[slug] = session
        return session, created

    def _write(self, conversation: Conversation, fmt: str, file: str, problems: list[str]) -> SessionResult:
        slug = conversation.slug
        result = SessionResult(slug)
        try:
            session, result.created = self._session(slug)
            view = session.read()
        except SessionError as err:
            archived = isinstance(err, SessionArchived) or "archive" in str(err)
            result.skipped = (f"session {slug} is archived: restore it (workstation session restore {slug}) to "
                              "import what is new" if archived else str(err))
            problems.append(f"{file}: {result.skipped}")
            return result
        known: dict[str, dict] = {}
        for record in view.records:
            source = record.get("source")
            if isinstance(source, dict) and isinstance(source.get("id"), str):
                known[source["id"]] = record
                for sid in source.get("merged") or ():
                    if isinstance(sid, str):
                        known[sid] = record
        records = self._materialize(conversation, fmt, file, known)
        if not records:
            return result
        self._finish(records, view)
        try:
            session.append_records(records)
        except SessionError as err:
            result.skipped = str(err)
            problems.append(f"{file}: {err}")
            return result
        for record in records:
            result.added[record["type"]] = result.added.get(record["type"], 0) + 1
        if self.db is not None:
            self._record_events(slug, fmt, view, records)
        return result

    # ------------------------------------------------------------------ drafts -> records
    def _materialize(self, conversation: Conversation, fmt: str, file: str, known: dict[str, dict]) -> list[dict]:
        ids = {sid: record["id"] for sid, record in known.items()}
        records: list[dict] = []
        for draft in conversation.drafts:
            record = self._record(draft, fmt, conversation.key, file, known, ids)
            if record is None:
                continue
            records.append(record)
            for sid in draft.sids():
                ids.setdefault(sid, record["id"])
        return records

    def _record(self, draft: Draft, fmt: str, key: str, file: str, known: dict[str, dict],
                ids: dict[str, str]) -> dict | None:
        sids = draft.sids()
        new = [sid for sid in sids if sid not in known]
        if not new:
            return None
        parts, usage, ts, continues = draft.parts, draft.usage, draft.ts, None
        if len(new) < len(sids):  # some parts were imported before: continue that record
            earlier = known[next(sid for sid in sids if sid in known)]
            continues = earlier["id"]
            parts = [p for p in draft.parts or () if p.sid in new]
            if not parts:
                return None
            usage = _grown(draft.usage, earlier)
            ts = parts[0].ts or ts
        sid = new[0]
        record: dict[str, Any] = {"v": FORMAT_VERSION, "id": record_id(ts, fmt, key, sid), "ts": ts,
                                  "type": draft.type}
        fields = dict(draft.fields)
        if draft.type == "assistant":
            texts = [p.value for p in parts or () if p.kind == "text" and p.value]
            thoughts = [p.value for p in parts or () if p.kind == "reasoning" and p.value]
            calls = [dict(p.value) for p in parts or () if p.kind == "call"]
            record["content"] = "\n\n".join(texts)
            if calls:
                record["tool_calls"] = calls
            if thoughts:
                record["reasoning"] = "\n\n".join(thoughts)
        if "rewind_to" in fields:
            target = ids.get(fields.pop("rewind_to"))
            if target:
                fields["rewind_to"] = target
        if continues:
            for name in ("cwd", "git_branch"):
                fields.pop(name, None)
        record.update({k: v for k, v in fields.items() if v is not None})
        if continues:
            record["continues"] = continues
        if usage is not None:
            record.update(usage.fields())
            if continues:
                record.pop("tokens_out_first", None)
            price = usage.cost if usage.cost is not None else _price(record.get("model", ""), usage)
            if price is not None:
                record["cost_usd"] = round(price, 8)
        source: dict[str, Any] = {"format": fmt, "file": file, "id": sid}
        if len(new) > 1:
            source["merged"] = new[1:]
        source.update(draft.source)
        record["source"] = source
        return record

    def _finish(self, records: list[dict], view: LogView) -> None:
        """Compact records' `covers` (every turn before them) and every record's `tokens`."""
        from ..sessions.compaction import touched_paths

        turns = list(view.turns)
        previous = view.last_compact()
        for record in records:
            if record["type"] in TURN_TYPES:
                turns.append(record)
            elif record["type"] == "compact":
                done = _covered(turns, previous)
                first_new = min(done, len(turns) - 1)
                record["covers"] = {"first_id": turns[0]["id"], "last_id": turns[-1]["id"], "first_turn": 1,
                                    "last_turn": len(turns), "new_first_turn": first_new + 1,
                                    "new_first_id": turns[first_new]["id"]} if turns else {}
                record["files"] = list(dict.fromkeys((previous or {}).get("files", []) +
                                                     touched_paths(turns[done:])))
                if previous is not None:
                    record["folds"] = previous["id"]
                previous = record
        counts = self._count([record_text(r) for r in records])
        for record, tokens in zip(records, counts):
            record["tokens"] = tokens

    def _count(self, texts: list[str]) -> list[int]:
        if self.counter is not None:
            return [self.counter(t) for t in texts]
        from ..tokens import count, encoding

        count("")  # builds the encoding once, under its lock
        encoded = encoding().encode_ordinary_batch(texts, num_threads=max(1, min(4, os.cpu_count() or 1)))
        return [len(tokens) for tokens in encoded]

    # ------------------------------------------------------------------ events
    def _record_events(self, slug: str, fmt: str, view: LogView, records: list[dict]) -> None:
        from ..memory.episodic import append_events

        calls = {c.get("id"): c for r in view.records + records if r["type"] == "assistant"
                 for c in r.get("tool_calls") or ()}
        turn = len(view.turns)
        lines = []
        for record in records:
            if record["type"] in TURN_TYPES:
                turn += 1
            lines.extend(event_lines(record, slug, fmt, calls))
        if not lines:
            return
        batch = f"import:{slug}:{records[0]['id']}:{records[-1]['id']}:{len(records)}"
        self.db.call(append_events, batch, slug, f"import:{fmt}", "\n".join(lines), len(lines))


# --------------------------------------------------------------------------- helpers
def _covered(turns: list[dict], compact: dict | None) -> int:
    from ..sessions.context import covered_count

    return covered_count(turns, compact)


def _grown(usage: Usage | None, earlier: dict) -> Usage | None:
    """What a response's usage grew by since an earlier import recorded part of it."""
    if usage is None:
        return None
    grown = Usage(tokens_in=max(0, usage.tokens_in - int(earlier.get("tokens_in") or 0)),
                  tokens_out=max(0, usage.tokens_out - int(earlier.get("tokens_out") or 0)),
                  cache_read=max(0, usage.cache_read - int(earlier.get("cache_read_tokens") or 0)),
                  cache_creation=max(0, usage.cache_creation - int(earlier.get("cache_creation_tokens") or 0)))
    return grown if (grown.tokens_in or grown.tokens_out) else None


def _price(model: str, usage: Usage) -> float | None:
    from .pricing import cost

    return cost(model, usage.tokens_in, usage.tokens_out, usage.cache_read, usage.cache_creation)


def _micros(ts: str) -> int:
    from datetime import datetime

    try:
        moment = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return time.time_ns() // 1000
    return int(moment.timestamp() * 1_000_000)


def _clip(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= _ARG_CLIP else value[:_ARG_CLIP] + "…"
    if isinstance(value, dict):
        return {k: _clip(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clip(v) for v in value[:50]]
    return value


def event_lines(record: dict, slug: str, fmt: str, calls: dict) -> list[str]:
    """The episodic events of one imported record, encoded as episodic.append_events reads them."""
    from ..memory.episodic import _scrub

    out: list[str] = []
    t = _micros(record["ts"])
    rid = record["id"]
    kind = record["type"]

    def add(type_: str, name: str, data: dict, **columns: Any) -> None:
        line: dict[str, Any] = {"i": f"{rid}:{len(out)}", "t": t, "y": type_, "n": name}
        line.update({k: v for k, v in columns.items() if v is not None})
        data = {k: v for k, v in data.items() if v is not None}
        if data:
            line["x"] = _scrub(data)
        out.append(json.dumps(line, ensure_ascii=False, separators=(",", ":")))

    if kind == "user":
        add("turn", "user", {"chars": len(str(record.get("content") or "")), "turn_id": rid, "source": fmt})
    elif kind == "assistant":
        model = str(record.get("model") or "")
        add("model_call", model, {"model": model or None, "turn_id": rid, "source": fmt,
                                  "cache_read_tokens": record.get("cache_read_tokens"),
                                  "cache_creation_tokens": record.get("cache_creation_tokens"),
                                  "tokens_out_first": record.get("tokens_out_first"),
                                  "usage_scope": record.get("usage_scope"), "calls": record.get("calls"),
                                  "continues": record.get("continues")},
            ti=_int32(record.get("tokens_in")), to=_int32(record.get("tokens_out")), c=record.get("cost_usd"),
            o=True)
        add("turn", "assistant", {"chars": len(str(record.get("content") or "")), "turn_id": rid, "source": fmt})
    elif kind == "tool":
        name = str(record.get("name") or "tool")
        call = calls.get(record.get("tool_call_id"))
        args = tool_call_arguments(call) if call else {}
        ok = bool(record.get("ok", True))
        add("tool_call", name, {"tool": name, "args": _clip(args) or None, "turn_id": rid, "source": fmt,
                                "result_chars": len(str(record.get("content") or "")),
                                "outcome": "ok" if ok else "error"}, d=record.get("duration_ms"), o=ok)
        if ok:
            for type_, path in _file_events(name, args, call):
                add(type_, path, {"path": path, "turn_id": rid, "source": fmt, "served_from": "disk"
                                  if type_ == "file_read" else None})
    elif kind == "compact":
        covers = record.get("covers") or {}
        add("compaction", slug, {"first_turn": covers.get("new_first_turn"), "last_turn": covers.get("last_turn"),
                                 "model": record.get("model"), "reason": record.get("reason"), "record_id": rid,
                                 "source": fmt}, o=True)
    elif kind == "system" and record.get("notice") == "error":
        add("error", fmt, {"error": str(record.get("content") or "")[:500], "turn_id": rid, "source": fmt})
    return out


def _int32(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and -2**31 <= value < 2**31:
        return value
    return None


def _file_events(name: str, args: dict, call: dict | None) -> list[tuple[str, str]]:
    """file_read / file_edit events a known tool's call implies (Claude Code, Codex, OpenHands, SWE-agent)."""
    command = args.get("command") if isinstance(args.get("command"), str) else ""
    if name == "str_replace_editor" and isinstance(args.get("path"), str):
        return [("file_read" if command == "view" else "file_edit", args["path"])]
    if name in _READ_TOOLS and isinstance(args.get(_READ_TOOLS[name]), str):
        return [("file_read", args[_READ_TOOLS[name]])]
    if name in _EDIT_TOOLS and isinstance(args.get(_EDIT_TOOLS[name]), str):
        return [("file_edit", args[_EDIT_TOOLS[name]])]
    if name == "apply_patch" and call is not None:
        patch = call.get("arguments") if isinstance(call.get("arguments"), str) else ""
        patch = args.get("input", patch) if isinstance(args.get("input"), str) else patch
        return [("file_edit", p.strip()) for p in _PATCH_FILE.findall(patch)]
    return []


# --------------------------------------------------------------------------- owner side
def source_state(con, path: str) -> tuple | None:
    row = con.execute("SELECT format, size, mtime_ns, inode, head_sha FROM import_sources WHERE path = ?",
                      [path]).fetchone()
    return tuple(row) if row else None


def save_source_state(con, path: str, fmt: str, size: int, mtime_ns: int, inode: int, head_sha: str,
                      consumed: int, slugs: list[str]) -> None:
    con.execute("""INSERT OR REPLACE INTO import_sources
                   (path, format, size, mtime_ns, inode, head_sha, consumed, sessions, imported_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, make_timestamp(?))""",
                [path, fmt, size, mtime_ns, inode, head_sha, consumed, slugs, time.time_ns() // 1000])


def list_sources(con) -> list[tuple]:
    return con.execute("SELECT path, format, size, consumed, sessions, epoch(imported_at) FROM import_sources "
                       "ORDER BY path").fetchall()
