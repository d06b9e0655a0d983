"""File tools: a file's map (file_meta), a range of its lines (read_lines), an edit of a range
(replace_lines). Confined to the workspace root (real paths: no `..`, no absolute path outside, no
symlink escape) and kept out of its state folder, and edits out of `.git` folders; edits are refused
when the file changed since the agent last read it (the ReadLedger's hash guard). Edits by text and
new files are in writes.py."""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

from ...errors import WorkstationError
from ...fsutil import confine, lstat_beneath
from ...tokens import count
from .fileio import file_sha, read_bytes, read_lines, refuse_hard_linked, replace_range
from .invocation import Invocation
from .base import (INT, NOTHING, QUERY, REAPPLY, RECOMPUTE, STR, WRITE, Call, Edit, MapRead, Meaning, Read, Tool,
                   ToolResult, as_int, as_text, cap, default_label, edit_outcome, params,
                   MAX_RESULT_CHARS, RangeMemory)
from .writes import change, shown_range, summary_line

MAX_MAP_TOKENS = 4096


def _range_label(name: str, args: Mapping[str, Any]) -> str:
    """`read_lines(shop/api.py 59-67)`."""
    label = default_label(name, args)
    if "start" in args:
        label = label[:-1] + f" {args.get('start')}-{args.get('end')})"
    return label


# --------------------------------------------------------------------------- file_meta
def _file_meta(inv: Invocation, path: str, tokens: Any = None) -> ToolResult:
    real, rel = confine(inv.services.root, as_text("path", path), inv.services.private)
    inv.turn.open_env(rel)
    now = lstat_beneath(real.parents[rel.count("/")], rel) if rel != "." else None
    if now is not None:
        refuse_hard_linked(now, rel)  # its map would carry what another name of it, outside, holds
    budget = None if tokens is None else as_int("tokens", tokens)
    if budget is not None and not 0 < budget <= MAX_MAP_TOKENS:
        raise WorkstationError(f"tokens must be between 1 and {MAX_MAP_TOKENS}, got {budget}")
    inv.services.reindex()
    change = inv.services.kmap.ensure_fresh([rel])  # the staleness gate: a changed file is re-indexed now
    stale = rel in change.indexed
    for _ in range(3):
        before = inv.services.kmap.indexed_sha(rel)
        fmap = inv.services.kmap.file_map(rel, budget)
        sha = inv.services.kmap.indexed_sha(rel)
        if sha is not None and sha == before:
            break  # the map was rendered from this content
    else:
        raise WorkstationError(f"{rel} keeps changing on disk; try again when it is quiet")
    inv.services.ledger.saw(rel, sha)  # the map's line ranges belong to this content: edits may follow it

    def whole() -> str:
        return read_bytes(real, rel).decode("utf-8", "replace")

    text = fmap.render()
    pointer = _in_head_map(inv.turn.head_map, rel, text, fmap.budget,
                           lambda: inv.services.kmap.file_map(rel, MAX_MAP_TOKENS).render())
    try:
        size = real.stat().st_size
        file_tokens = inv.services.file_tokens(sha, whole, size)
    except OSError:  # deleted since: the map was still served
        size, file_tokens = 0, None
    data = {"path": rel, "served_from": "memory", "memory": "miss" if stale else "hit", "sha": sha,
            "file_tokens": file_tokens}
    if pointer:
        data["in_head_map"] = True
    elif inv.services.ranges is not None:
        earlier = _shown_before(inv.services.ranges, rel, sha, text)
        if earlier:
            pointer, data["continues"] = earlier
        else:
            inv.services.ranges.remember_map(rel, sha, inv.call_id, [line for line in text.splitlines()[1:]
                                                           if not line.endswith("more symbols)")])
    data["chars_saved"] = max(0, size - len(pointer or text))
    return ToolResult(pointer or text, data=data)


def _symbol_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.lstrip()[:1].isdigit()]


def _shown_before(ranges: RangeMemory, rel: str, sha: str, text: str) -> tuple[str, str] | None:
    """(result, call id) when an earlier map of the same content is still in the model's context: the header
    line, then only the lines that one left out (a larger budget after a cut map), or a pointer when it left
    none out. None: none is, or it shows none of these lines."""
    earlier = ranges.shown_map(rel, sha)
    if earlier is None:
        return None
    call_id, seen = earlier
    head, *lines = text.splitlines()
    cut = [lines.pop()] if lines and lines[-1].endswith("more symbols)") else []
    left = [line for line in lines if line not in seen]
    if len(left) == len(lines):
        return None
    if not left:
        return "\n".join([head, f"as your file_meta (call {call_id}) above showed it, unchanged: not sent again",
                          *cut]), call_id
    return "\n".join([head, f"{len(lines) - len(left)} lines as your file_meta (call {call_id}) above showed them, "
                             f"unchanged; the {len(left)} it left out:", *left, *cut]), call_id


def _in_head_map(head_map: str, rel: str, text: str, budget: int, whole: Callable[[], str]) -> str | None:
    """A file map some of whose symbol lines the repository map the model was shown (the system message's,
    with the map updates since) shows unchanged (`rel:`, then its symbols indented by two): its header lines,
    a pointer there, and the symbol lines it does not show, all of them when they fit `budget` (so a map cut
    to its budget can come whole). None: that map shows none of them, or one no longer so, or the rest does
    not fit."""
    block = head_map.split(f"\n{rel}:\n", 1)
    if len(block) < 2:
        return None
    shown = []
    for line in block[1].splitlines():
        if not line.startswith("  "):
            break
        shown.append(line[2:])
    lines = text.splitlines()
    cut = lines[-1].endswith("more symbols)")
    symbols = _symbol_lines(whole() if cut else text)
    if not shown or [line for line in symbols if line in shown] != shown:
        return None  # a line it shows is out of date (or out of order)
    top = [line for line in lines[:-1 if cut else None] if not line.lstrip()[:1].isdigit()]
    others = [line for line in symbols if line not in shown]
    if not others:
        return "\n".join(top + [f"symbols: as in the repository map in your context ({len(shown)} lines, unchanged)"])
    result = "\n".join(top + [f"symbols: {len(shown)} lines as in the repository map in your context, unchanged; "
                               f"the {len(others)} it leaves out:", *others])
    return result if count(result) <= budget else None


# the line of a file_meta result that points at a map in the model's context (_in_head_map, _shown_before)
_POINTS_BACK = re.compile(r"^(?:symbols: (?:\d+ lines )?as in the repository map in your context|(?:\d+ lines )?as "
                          r"your file_meta \(call \S+\) above showed)", re.M)


def _file_meta_skip(call: Call) -> str | None:
    if _POINTS_BACK.search(call.text):  # the log keeps the text, not the result's data
        return "answered by pointing at a map the model's context showed, not rendered whole"
    return None


def _file_meta_meaning(call: Call) -> Meaning:
    path = call.path()
    if not call.ok or path is None:
        return NOTHING
    return Meaning(map_reads=(MapRead(path, call.data.get("memory") != "miss",
                                      int(call.data.get("chars_saved") or 0)),))


# --------------------------------------------------------------------------- read_lines
def _read_lines(inv: Invocation, path: str, start: Any, end: Any) -> ToolResult:
    start, end = as_int("start", start), as_int("end", end)
    again = _still_in_context(inv, path, start, end)
    if again is not None:
        return again
    _, rel = confine(inv.services.root, as_text("path", path), inv.services.private)
    inv.turn.open_env(rel)
    lines = read_lines(inv.services.root, rel, start, end, inv.services.ledger, inv.services.private)
    inv.turn.open_env(rel, lines.whole or lines.text)  # an .env's values: masked in what the loop keeps
    # Cut at a line boundary, and report only the whole lines sent as read: a later read of a range
    # held in context is answered "still in your context", which must not cover lines never sent.
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
    chars = len("".join(lines.text.splitlines(keepends=True)[:sent]))
    if inv.services.ranges is not None and read:
        inv.services.ranges.remember(lines.path, read[0], read[1], lines.sha256, inv.call_id, chars)
    return ToolResult(text, data={"path": lines.path, "lines": read, "served_from": "disk", "sha": lines.sha256,
                                  "chars": chars,
                                  "file_tokens": inv.services.file_tokens(lines.sha256, lambda: lines.whole, lines.size)})


def _still_in_context(inv: Invocation, path: Any, start: int, end: int) -> ToolResult | None:
    """A range the model read before, unchanged on disk and still in its context, is not sent again."""
    if inv.services.ranges is None or not isinstance(path, str):
        return None
    try:
        real, rel = confine(inv.services.root, path, inv.services.private)
    except WorkstationError:
        return None  # let the read report the problem
    if not any(key[0] == rel for key in inv.services.ranges.reads):
        return None
    try:
        sha, size = file_sha(real, rel)
    except WorkstationError:
        return None  # let the read report the problem
    found = inv.services.ranges.covering(rel, start, end, sha)
    if found is None:
        return None
    first, last, call_id, chars = found
    inv.services.ledger.saw(rel, sha)
    saved = chars * (end - start + 1) // max(1, last - first + 1)
    return ToolResult(
        f"{rel} lines {start}-{end} are unchanged since your read_lines {first}-{last} (call {call_id}), "
        "which is still in your context above: not sent again.",
        data={"path": rel, "lines": [start, end], "served_from": "memory", "memory": "hit", "chars_saved": saved,
              "sha": sha, "file_tokens": inv.services.file_tokens(sha, lambda: read_bytes(real, rel).decode("utf-8", "replace"), size)})


def _read_lines_meaning(call: Call) -> Meaning:
    path = call.path()
    if not call.ok or path is None:
        return NOTHING
    served = str(call.data.get("served_from") or "disk")
    lines = call.data.get("lines") or [call.args.get("start"), call.args.get("end")]
    return Meaning(reads=(Read(path, list(lines), served, int(call.data.get("chars") or 0),
                               int(call.data.get("chars_saved") or 0)),))


def _read_lines_skip(call: Call) -> str | None:
    if call.data.get("served_from") == "memory":
        return "answered from the agent's memory of an earlier read, not by the tool"
    return None


# --------------------------------------------------------------------------- replace_lines
def _replace_lines(inv: Invocation, path: str, start: Any, end: Any, content: Any) -> ToolResult:
    start, end = as_int("start", start), as_int("end", end)
    services = inv.services
    done = replace_range(inv.target(as_text("path", path)), start, end, as_text("content", content), services.ledger,
                         services.policy.protected.root, services.staging, services.intend)
    rel, first, last = done.path, done.first, done.last
    inv.turn.open_env(rel, (done.before or b"").decode("utf-8", "replace") + "\n" + done.after.decode("utf-8", "replace"))
    inv.services.edited(rel)  # re-indexed before the map is read again (Services.reindex)
    removed = max(0, end - start + 1)
    added = last - first + 1
    shift = added - removed
    what = f"inserted {added} lines before line {start}" if removed == 0 else f"replaced lines {start}-{end}"
    moved = f"; lines after it moved by {shift:+d}" if shift else ""
    new = f"; the new text is lines {first}-{last}" if added else "; nothing inserted (lines deleted)"
    entry = change(rel, done.before, done.after, "edit")
    shown = shown_range(done.before or b"", done.after, start, end, first, last)
    return ToolResult(f"{rel}: {what}{new}{moved}" + (f"\n{shown}" if shown else ""),
                      data={"path": rel, "lines": [first, last], "lines_changed": max(removed, added),
                            "edits": [entry]})


def _replace_lines_meaning(call: Call) -> Meaning:
    path = call.path()
    if not call.ok or path is None:
        return NOTHING
    return Meaning(edits=(Edit(path, call.data.get("lines"), call.data.get("lines_changed")).checked(call.data),))


def _path_arg(args: Mapping[str, Any]) -> list[str]:
    path = args.get("path")
    return [path] if isinstance(path, str) and path else []


TOOLS = [
    Tool("file_meta", "Knowledge map of one file: purpose, imports, its symbols with their 1-indexed line "
         "ranges. Costs a few percent of reading the file: call it before read_lines. When the map ends with "
         "'(+N more symbols)', ask again with a larger tokens budget.",
         params(["path"], path=STR, tokens={"type": "integer", "description": "map budget in tokens"}),
         _file_meta, QUERY, meaning=_file_meta_meaning, verify=RECOMPUTE, verify_skip=_file_meta_skip),
    Tool("read_lines", "Lines start..end (1-indexed, inclusive) of a file. Read only the range you need.",
         params(["path", "start", "end"], path=STR, start=INT, end=INT), _read_lines, QUERY,
         meaning=_read_lines_meaning, verify=RECOMPUTE, verify_skip=_read_lines_skip, label=_range_label),
    Tool("replace_lines", "Replace lines start..end (1-indexed, inclusive) of a file with content; "
         "end = start-1 inserts before start. Refused if the file changed since you last read it "
         "(read_lines or file_meta). Edit bottom-up to keep earlier line numbers valid.",
         params(["path", "start", "end", "content"], path=STR, start=INT, end=INT, content=STR),
         _replace_lines, WRITE, meaning=_replace_lines_meaning, outcome=edit_outcome, writes=_path_arg, verify=REAPPLY,
         comparable=summary_line, label=_range_label),
]
