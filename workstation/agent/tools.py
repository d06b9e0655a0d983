"""The agent's tools: JSON schemas for the model and their implementations.

Every tool takes a `ToolContext` (the workspace's core services) and returns
text for the model plus `data` for the session log and the episodic log
(path, lines, where a read was served from, memory hit or miss, the whole
file's size in tokens for the naive baseline of `workstation report`).
File tools are confined to the workspace root (real paths: no `..`, no
absolute path outside, no symlink escape) and kept out of its state folder
(config, databases, session logs); results are capped so that one call
cannot flood the context. A tool never raises a WorkstationError or an
OSError: either becomes a failed result the model can read and act on.
"""

from __future__ import annotations

import inspect
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .. import scrub
from ..errors import WorkstationError
from ..fsutil import confine
from ..store.broker import readonly
from .approval import Approver
from .commands import CommandCancelled, CommandDenied, run_command
from .filetools import ReadLedger, grep, read_lines, replace_lines

MAX_RESULT_CHARS = 12_000
MAX_MAP_TOKENS = 4096


@dataclass
class ToolContext:
    root: Path
    kmap: Any  # workstation.index.map.KnowledgeMap
    memory: Any  # workstation.memory.Memory of this session
    recall: Callable[[str], str]  # session record id -> the original text of that record
    ledger: ReadLedger = field(default_factory=ReadLedger)
    approve: Approver | None = None  # asks the user; None: nobody to ask (refused)
    allow: list[str] = field(default_factory=list)
    private: tuple[Path, ...] = ()  # a state folder moved off <root>/.workstation (that one is always refused)
    command_timeout_s: float = 120.0
    max_output_chars: int = 20_000
    step: int | None = None
    session: str = ""
    cancel: threading.Event | None = None  # the turn's stop event: a running command is killed when set
    _file_tokens: dict[str, int] = field(default_factory=dict, repr=False)  # sha -> tokens
    _unindexed: set[str] = field(default_factory=set, repr=False)  # edited, not re-indexed yet
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def edited(self, rel: str) -> None:
        with self._lock:
            self._unindexed.add(rel)

    def reindex(self) -> None:
        """Re-index the files edited since the last call. Runs before any tool reads the map and when
        a step ends, so a burst of edits to one file costs one parse, and nothing ever sees the map
        without them."""
        with self._lock:
            edited, self._unindexed = sorted(self._unindexed), set()
        for rel in edited:
            self.kmap.reindex_file(rel)

    def file_tokens(self, sha: str, text: Callable[[], str]) -> int:
        """Tokens of a whole file (by content hash): what a naive full read would have cost."""
        with self._lock:
            cached = self._file_tokens.get(sha)
        if cached is None:
            from ..tokens import count

            cached = count(text())
            with self._lock:
                self._file_tokens[sha] = cached
        return cached


@dataclass
class ToolResult:
    text: str
    ok: bool = True
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[..., ToolResult]
    read_only: bool = True

    def schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}}


def _params(required: list[str], **props: dict) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required}


_STR = {"type": "string"}
_INT = {"type": "integer"}
_TIER = {"type": "string", "enum": ["stm", "ltm", "episodic"]}


def cap(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit:,} more chars cut; narrow the request]"


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise WorkstationError(f"{name} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    raise WorkstationError(f"{name} must be an integer, got {value!r}")


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise WorkstationError(f"{name} must be a string, got {type(value).__name__}")
    return value


@readonly
def indexed_sha(con, rel: str) -> str | None:
    """The content hash the knowledge map holds for one file (None: not in the map)."""
    row = con.execute("SELECT sha256 FROM kmap.files WHERE path = ?", [rel]).fetchone()
    return row[0] if row else None


# --------------------------------------------------------------------------- file tools
def _file_meta(ctx: ToolContext, path: str, tokens: Any = None) -> ToolResult:
    real, rel = confine(ctx.root, _text("path", path), ctx.private)
    budget = None if tokens is None else _int("tokens", tokens)
    if budget is not None and not 0 < budget <= MAX_MAP_TOKENS:
        raise WorkstationError(f"tokens must be between 1 and {MAX_MAP_TOKENS}, got {budget}")
    ctx.reindex()
    change = ctx.kmap.ensure_fresh([rel])  # the staleness gate: a changed file is re-indexed now
    stale = rel in change.indexed
    for _ in range(3):
        before = ctx.kmap.db.call(indexed_sha, rel)
        fmap = ctx.kmap.file_map(rel, budget)
        sha = ctx.kmap.db.call(indexed_sha, rel)
        if sha is not None and sha == before:
            break  # the map was rendered from this content
    else:
        raise WorkstationError(f"{rel} keeps changing on disk; try again when it is quiet")
    ctx.ledger.saw(rel, sha)  # the map's line ranges belong to this content: edits may follow it

    def whole() -> str:
        return real.read_bytes().decode("utf-8", "replace")

    text = fmap.render()
    try:
        size = real.stat().st_size
        file_tokens = ctx.file_tokens(sha, whole)
    except OSError:  # deleted since: the map was still served
        size, file_tokens = 0, None
    return ToolResult(text, data={"path": rel, "served_from": "memory", "memory": "miss" if stale else "hit",
                                  "sha": sha, "file_tokens": file_tokens, "chars_saved": max(0, size - len(text))})


def _read_lines(ctx: ToolContext, path: str, start: Any, end: Any) -> ToolResult:
    lines = read_lines(ctx.root, _text("path", path), _int("start", start), _int("end", end), ctx.ledger,
                       ctx.private)
    # Cut at a line boundary, and report only the whole lines sent as read: the loop answers a later
    # read of a range it holds as "still in your context", which must not cover lines never sent.
    rows = lines.numbered().splitlines()
    sent, size = 0, 0
    for row in rows:
        size += len(row) + 1
        if size > MAX_RESULT_CHARS:
            break
        sent += 1
    last = lines.start + sent - 1
    if sent == len(rows):
        text = "\n".join(rows) + f"\n[{lines.path}: lines {lines.start}-{lines.end} of {lines.total}]"
    elif sent:
        text = "\n".join(rows[:sent]) + (f"\n[{lines.path}: lines {lines.start}-{last} of {lines.total}; the "
                                         f"rest of {lines.start}-{lines.end} was cut at {MAX_RESULT_CHARS:,} "
                                         f"chars: read on from line {last + 1}]")
    else:
        text = cap(rows[0]) + f"\n[{lines.path}: line {lines.start} of {lines.total} is too long to show whole]"
    read = [lines.start, last] if sent or not rows else None  # a line shown cut was not read
    return ToolResult(text, data={"path": lines.path, "lines": read,
                                  "served_from": "disk", "sha": lines.sha256,
                                  "chars": len("".join(lines.text.splitlines(keepends=True)[:sent])),
                                  "file_tokens": ctx.file_tokens(lines.sha256, lambda: lines.whole)})


def _replace_lines(ctx: ToolContext, path: str, start: Any, end: Any, content: Any) -> ToolResult:
    start, end = _int("start", start), _int("end", end)
    rel, first, last = replace_lines(ctx.root, _text("path", path), start, end, _text("content", content),
                                     ctx.ledger, ctx.private)
    ctx.edited(rel)  # re-indexed before the map is read again (ToolContext.reindex)
    removed = max(0, end - start + 1)
    added = last - first + 1
    shift = added - removed
    what = f"inserted {added} lines before line {start}" if removed == 0 else f"replaced lines {start}-{end}"
    moved = f"; lines after it moved by {shift:+d}" if shift else ""
    new = f"; the new text is lines {first}-{last}" if added else "; nothing inserted (lines deleted)"
    return ToolResult(f"{rel}: {what}{new}{moved}",
                      data={"path": rel, "lines": [first, last], "edit": True,
                            "lines_changed": max(removed, added)})


# --------------------------------------------------------------------------- map queries
def _impact(ctx: ToolContext, symbol: str) -> ToolResult:
    ctx.reindex()
    hits = ctx.kmap.impact(_text("symbol", symbol))
    if not hits:
        return ToolResult(f"no references to {symbol} in the knowledge map", data={"hits": 0, "memory": "miss"})
    lines = [f"{h.path}:{h.line} in {h.enclosing or '<module>'} ({h.kind}"
             + (f" of {h.target}" if h.target else "") + ")" for h in hits]
    return ToolResult(cap("\n".join(lines)), data={"hits": len(hits), "memory": "hit"})


def render_find(result) -> str:
    if not result.hits:
        text = f"nothing matches {result.query!r}"
    else:
        rows = []
        for h in result.hits:
            where = h.path if h.kind == "file" else f"{h.path}:{h.start_line}-{h.end_line}"
            what = "file" if h.kind == "file" else f"{h.symbol_kind} {h.name}"
            rows.append(f"{where}  {what}" + (f" — {h.detail}" if h.detail else "") + f"  [{h.match}]")
        text = "\n".join(rows)
    if result.note:
        text += f"\n({result.note})"
    return text


def _find(ctx: ToolContext, query: str) -> ToolResult:
    ctx.reindex()
    result = ctx.kmap.find(_text("query", query))
    return ToolResult(cap(render_find(result)),
                      data={"hits": len(result.hits), "memory": "hit" if result.hits else "miss"})


def _grep(ctx: ToolContext, pattern: str, path: str = "", ignore_case: bool = False) -> ToolResult:
    ctx.reindex()
    files = [f.path for f in ctx.kmap.files()]
    if path:
        _, rel = confine(ctx.root, _text("path", path), ctx.private)
        if rel:
            files = [f for f in files if f == rel or f.startswith(rel.rstrip("/") + "/")]
    hits, truncated = grep(ctx.root, _text("pattern", pattern), files, ignore_case=bool(ignore_case),
                           private=ctx.private)
    text = "\n".join(f"{h.path}:{h.line}: {h.text}" for h in hits) or f"no match for {pattern!r}"
    if truncated:
        text += "\n[more matches cut; narrow the pattern or the path]"
    return ToolResult(cap(text), data={"hits": len(hits)})


# --------------------------------------------------------------------------- memory
def _qmem(ctx: ToolContext, tier: str, key: str) -> ToolResult:
    from ..memory import MemoryKeyError

    lookup = tier in ("stm", "ltm")  # the tiers whose reads count as memory lookups (episodic: by event id)
    try:
        value = ctx.memory.qmem(tier, key)
    except MemoryKeyError as err:
        return ToolResult(f"error: {err}", ok=False,
                          data={"tier": tier, "key": key, **({"memory": "miss"} if lookup else {})})
    return ToolResult(cap(json.dumps(value, ensure_ascii=False, default=str)),
                      data={"tier": tier, "key": key, **({"memory": "hit"} if lookup else {})})


def _umem(ctx: ToolContext, tier: str, key: str, value: Any) -> ToolResult:
    ctx.memory.umem(tier, key, value)
    return ToolResult(f"stored {tier}:{key}" + (" (durable after fence('ltm'))" if tier == "ltm" else ""),
                      data={"tier": tier, "key": key})


def _fence(ctx: ToolContext, tier: str) -> ToolResult:
    ctx.memory.fence(tier)
    return ToolResult(f"fenced {tier}: earlier writes are durable and visible", data={"tier": tier})


def _log_decision(ctx: ToolContext, decision: str, reasoning: str = "", files: Any = None) -> ToolResult:
    files = files or []
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise WorkstationError("files must be a list of paths")
    decision_id = ctx.memory.log_decision(_text("decision", decision), _text("reasoning", reasoning or ""),
                                          files, step=ctx.step)
    return ToolResult(f"decision {decision_id} logged; it is shown in every later context: follow it and "
                      f"cite [D:{decision_id}] when you do", data={"decision_id": decision_id})


def render_decisions(rows) -> str:
    return "\n".join(f"[D:{d.id}] step {d.step if d.step is not None else '-'}: {d.decision}"
                     + (f" — {d.reasoning}" if d.reasoning else "")
                     + (f" (reused {d.reuse_count}x)" if d.reuse_count else "") for d in rows)


def _decisions(ctx: ToolContext) -> ToolResult:
    rows = ctx.memory.decisions(limit=200)
    if not rows:
        return ToolResult("no decisions logged yet", data={"count": 0})
    return ToolResult(cap(render_decisions(rows)), data={"count": len(rows)})


def render_rows(rows: list[dict], limit: int = 40, width: int = 40) -> str:
    """A plain-text table (for reflection results in chat and in tool results)."""
    if not rows:
        return "(no rows)"
    columns = list(rows[0])
    cells = [[("" if r.get(c) is None else str(r.get(c)))[:width] for c in columns] for r in rows[:limit]]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    if len(rows) > limit:
        lines.append(f"... {len(rows) - limit} more rows")
    return "\n".join(lines)


def _reflect(ctx: ToolContext, name: str, all_sessions: bool = False) -> ToolResult:
    session = None if all_sessions or not ctx.session else ctx.session
    rows = ctx.memory.reflect(_text("name", name), session=session).records()
    return ToolResult(cap(render_rows(rows)), data={"rows": len(rows)})


def _recall(ctx: ToolContext, record_id: str) -> ToolResult:
    return ToolResult(cap(ctx.recall(_text("record_id", record_id))), data={"record_id": record_id})


# --------------------------------------------------------------------------- commands
def _run_command(ctx: ToolContext, cmd: str) -> ToolResult:
    try:
        res = run_command(_text("cmd", cmd), ctx.root, allow=ctx.allow, approve=ctx.approve,
                          timeout_s=ctx.command_timeout_s, max_output_chars=ctx.max_output_chars,
                          cancel=ctx.cancel)
    except CommandDenied as err:
        return ToolResult(f"error: {err}", ok=False, data={"outcome": "denied"})
    except CommandCancelled as err:
        return ToolResult(f"error: {err}", ok=False, data={"outcome": "cancelled"})
    except WorkstationError as err:
        return ToolResult(f"error: {err}", ok=False, data={"outcome": "error"})
    status = "timed out" if res.exit_code is None else f"exit {res.exit_code}"
    # command output is the one tool output that can print the environment: never log a key
    output = scrub.redact(res.output)
    return ToolResult(f"$ {res.command}\n{output}\n[{status}, {res.duration_s:.1f}s]", ok=res.exit_code == 0,
                      data={"exit_code": res.exit_code, "approved_by": res.approved_by,
                            "outcome": "timeout" if res.exit_code is None else ("ok" if res.exit_code == 0
                                                                                 else "error")})


TOOLS: dict[str, Tool] = {t.name: t for t in [
    Tool("file_meta", "Knowledge map of one file: purpose, imports, its symbols with their 1-indexed line "
         "ranges. Costs a few percent of reading the file: call it before read_lines. When the map ends with "
         "'(+N more symbols)', ask again with a larger tokens budget.",
         _params(["path"], path=_STR, tokens={"type": "integer", "description": "map budget in tokens"}),
         _file_meta),
    Tool("read_lines", "Lines start..end (1-indexed, inclusive) of a file. Read only the range you need.",
         _params(["path", "start", "end"], path=_STR, start=_INT, end=_INT), _read_lines),
    Tool("replace_lines", "Replace lines start..end (1-indexed, inclusive) of a file with content; "
         "end = start-1 inserts before start. Refused if the file changed since you last read it "
         "(read_lines or file_meta). Edit bottom-up to keep earlier line numbers valid.",
         _params(["path", "start", "end", "content"], path=_STR, start=_INT, end=_INT, content=_STR),
         _replace_lines, read_only=False),
    Tool("impact", "Every call site and reference of a symbol (name, Class.method or path:name): "
         "file:line and the enclosing symbol.", _params(["symbol"], symbol=_STR), _impact),
    Tool("find", "Find files and symbols by name or path (exact, prefix, fuzzy; by meaning when few match).",
         _params(["query"], query=_STR), _find),
    Tool("grep", "Regex search over the workspace's indexed text files; path limits it to a file or folder. "
         "Returns path:line: text.",
         _params(["pattern"], pattern=_STR, path=_STR, ignore_case={"type": "boolean"}), _grep),
    Tool("qmem", "Read a memory value. Tiers: stm (this run's scratch), ltm (persistent), episodic (event id).",
         _params(["tier", "key"], tier=_TIER, key=_STR), _qmem),
    Tool("umem", "Write a JSON value to stm or ltm (episodic is append-only).",
         _params(["tier", "key", "value"], tier=_TIER, key=_STR, value={"description": "any JSON value"}),
         _umem, read_only=False),
    Tool("fence", "Make every earlier write to a tier durable and visible to other processes.",
         _params(["tier"], tier=_TIER), _fence, read_only=False),
    Tool("log_decision", "Record a naming, pattern or design decision once, so that every later step "
         "follows it.", _params(["decision"], decision=_STR, reasoning=_STR,
                                files={"type": "array", "items": _STR}), _log_decision, read_only=False),
    Tool("decisions", "The decisions logged in this workspace, with how often they were reused.",
         _params([]), _decisions),
    Tool("reflect", "A named reflection query over your own history (e.g. reads_avoided, tool_errors, "
         "hit_rate, decision_reuse); all_sessions widens it to the workspace.",
         _params(["name"], name=_STR, all_sessions={"type": "boolean"}), _reflect),
    Tool("recall", "The original text of a redacted tool output, by the record id its marker names.",
         _params(["record_id"], record_id=_STR), _recall),
    Tool("run_command", "Run a command in the workspace root, with a timeout and capped output. Needs the "
         "user's approval unless the configured allow-list covers it.", _params(["cmd"], cmd=_STR),
         _run_command, read_only=False),
]}

# Tools whose results `workstation replay --verify` can recompute against today's tree.
VERIFIABLE = ("file_meta", "read_lines", "find", "impact", "grep")


def schemas() -> list[dict[str, Any]]:
    return [tool.schema() for tool in TOOLS.values()]


def call(ctx: ToolContext, name: str, arguments: dict[str, Any]) -> ToolResult:
    """Run a tool; a user-facing error or an OS error becomes a failed result the model can act on."""
    tool = TOOLS.get(name)
    if tool is None:
        return ToolResult(f"error: unknown tool {name!r}; tools: {', '.join(TOOLS)}", ok=False)
    started = time.perf_counter()
    try:
        bound = inspect.signature(tool.run).bind(ctx, **arguments)
    except TypeError as err:
        result = ToolResult(f"error: bad arguments for {name}: {err}", ok=False)
    else:
        try:
            result = tool.run(*bound.args, **bound.kwargs)
        except WorkstationError as err:
            result = ToolResult(f"error: {err}", ok=False)
        except OSError as err:  # a write refused by the filesystem, a vanished directory...
            where = ""
            if err.filename:
                try:
                    where = Path(err.filename).relative_to(ctx.root).as_posix() + ": "
                except ValueError:
                    where = f"{err.filename}: "
            result = ToolResult(f"error: {where}{err.strerror or err}", ok=False)
    result.data.setdefault("duration_ms", round((time.perf_counter() - started) * 1000, 3))
    return result
