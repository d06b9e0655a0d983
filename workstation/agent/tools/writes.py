"""Tools that change files by their text: write_file (create, or overwrite what the agent read),
edit_file (replace an exact text), delete_file and move_file. replace_lines, the edit by line numbers,
is in files.py.

Every path is confined once, before the call runs (Invocation.target: the sandbox policy's `protected` field): the
workspace only, never its state folder, never a `.git` folder, through symlinks too. An existing file is changed only if the agent read it and it has
not changed since (the ReadLedger's hash guard), and always replaced atomically (fsutil.replace_beneath,
its temporary file in the state folder), its path resolved from the workspace root with no link followed at
any part: a folder swapped for a link after the check is refused, never written through, and a file with
other names (hard links) is replaced, never written through (its reads are refused: fileio). A file keeps its line endings (a CRLF file stays CRLF, whatever
the model sends), its UTF-8 byte-order mark and its mode; nothing adds or drops a final newline.

Every result carries the change as data (`edits`: per file its content hashes before and after and the
full unified diff; sessions/README.md) and, for the model, the diff's hunks with one line of context
(it sent the new text itself: the result shows where it landed) within DIFF_BUDGET characters;
replace_lines shows only what it replaced, or what surrounds an insertion (shown_range). What the file held before is kept by the caller's checkpoint (Services.checkpoint),
before the tool runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping

from ...errors import WorkstationError
from ...fsutil import rename_beneath, replace_beneath, sha256_bytes, unlink_beneath
from ...textdiff import clip, file_diff
from .fileio import read_existing
from .invocation import Invocation
from .base import (BOOL, NOTHING, REAPPLY, STR, WRITE, Call, Edit, Meaning, Tool, ToolResult, as_text,
                   edit_outcome, params)

DIFF_BUDGET = 1200  # characters of diff the model sees (about 300 tokens); the log keeps it whole
SHOWN_CONTEXT = 1  # lines around each change in the diff the model reads: every later request carries it
MAX_WRITE_BYTES = 8_000_000
MAX_STORED_DIFF = 256_000  # characters of one file's diff kept on the tool record
BOM = "\ufeff"


# --------------------------------------------------------------------------- shared by the tools here
def require_read(inv: Invocation, rel: str, data: bytes, doing: str) -> None:
    """The hash guard: the agent saw exactly this content (read_lines, file_meta, or its own last edit)."""
    seen = inv.services.ledger.last(rel)
    if seen is None:
        raise WorkstationError(f"{rel}: read it before {doing} it (read_lines or file_meta)")
    if seen != sha256_bytes(data):
        raise WorkstationError(f"{rel} changed on disk since you last read it; read it again before {doing} it")


def as_text_file(data: bytes, rel: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise WorkstationError(f"{rel}: not a UTF-8 text file") from None


def newline_of(text: str) -> str:
    """The file's line ending: that of its first line (as replace_lines decides)."""
    end = text.find("\n")
    return "\r\n" if end > 0 and text[end - 1] == "\r" else "\n"


def with_newlines(text: str, newline: str) -> str:
    return text if newline == "\n" else text.replace("\r\n", "\n").replace("\n", "\r\n")


def change(rel: str, before: bytes | None, after: bytes | None, op: str, **extra: Any) -> dict:
    """One file's entry of a result's `edits` (sessions/README.md): hashes, op, counts, the full diff."""
    diff = file_diff(before, after, rel, old_path=extra.get("from"))
    text = diff.text
    if len(text) > MAX_STORED_DIFF:
        text = text[:MAX_STORED_DIFF].rsplit("\n", 1)[0] + f"\n[... diff cut at {MAX_STORED_DIFF:,} characters]"
    entry = {"path": rel, "op": op, "before": None if before is None else sha256_bytes(before),
             "after": None if after is None else sha256_bytes(after), "diff": text, "added": diff.added,
             "removed": diff.removed, **extra}
    return {k: v for k, v in entry.items() if v is not None}


def replace_file(inv: Invocation, real: Path, rel: str, data: bytes) -> None:
    """Replace (or create, with its folders) one file atomically, its path resolved from the workspace root
    with no link followed (fsutil.replace_beneath); the agent has seen what it wrote."""
    digest = sha256_bytes(data)
    if inv.services.intend is not None:
        inv.services.intend(rel, digest)
    replace_beneath(inv.services.policy.protected.root, rel, data, staging=inv.services.staging, create=True)
    inv.services.ledger.saw(rel, digest)
    inv.services.edited(rel)  # re-indexed before the map is read again (Services.reindex)


def shown_diff(rel: str, before: bytes | None, after: bytes | None) -> str:
    """The change as the model reads it in a result: hunks with SHOWN_CONTEXT lines, within DIFF_BUDGET."""
    return clip(file_diff(before, after, rel, context=SHOWN_CONTEXT).text, DIFF_BUDGET)


def shown_range(before: bytes, after: bytes, start: int, end: int, first: int, last: int) -> str:
    """What replace_lines shows the model below its head line, within DIFF_BUDGET: the lines it replaced
    (`-`), or for an insertion the lines either side of it (numbered as the file is now). The model sent the
    new text and the head says where it landed, so it is not shown back: what the model may not have read is
    what it replaced, and what an insertion landed between. The log keeps the whole diff."""
    if end >= start:
        rows = [f"-{line}" for line in before.decode("utf-8", "replace").splitlines()[start - 1:end]]
    else:
        now = after.decode("utf-8", "replace").splitlines()
        below = last + 1 if last >= first else first  # the line the insertion went before, numbered as now
        rows = [f" {n}| {now[n - 1]}" for n in (first - 1, below) if 1 <= n <= len(now)]
    return clip("\n".join(rows), DIFF_BUDGET) if rows else ""


def edited_result(head: str, entries: list[dict], *, lines: list[int] | None = None, diff: str = "") -> ToolResult:
    text = head + (f"\n{diff}" if diff else "")
    changed = max((max(e.get("added", 0), e.get("removed", 0)) for e in entries), default=0)
    return ToolResult(text, data={"path": entries[0]["path"] if entries else None, "lines": lines,
                                  "lines_changed": changed, "edits": entries})


def edits_meaning(call: Call) -> Meaning:
    """The files a call changed, from its `edits` (live result or log record)."""
    if not call.ok:
        return NOTHING
    entries = [e for e in call.data.get("edits") or () if isinstance(e, dict) and isinstance(e.get("path"), str)]
    lines = call.data.get("lines")
    return Meaning(edits=tuple(
        Edit(e["path"], lines if i == 0 else None, max(int(e.get("added") or 0), int(e.get("removed") or 0)))
        .checked(call.data if i == 0 else {}) for i, e in enumerate(entries)))


def path_args(*names: str) -> Callable[[Mapping[str, Any]], list[str]]:
    """`writes` of a tool whose arguments `names` are paths it changes."""
    def writes(args: Mapping[str, Any]) -> list[str]:
        return [args[n] for n in names if isinstance(args.get(n), str) and args[n]]
    return writes


def summary_line(text: str) -> str:
    """What `replay --verify` compares of an edit's result: its first line (the diff below it follows
    from the edit, and results recorded before diffs were shown have none)."""
    return text.split("\n", 1)[0]


def _lines(count: int) -> str:
    return f"{count} line{'s' if count != 1 else ''}"


# --------------------------------------------------------------------------- write_file
def _write_file(inv: Invocation, path: str, content: Any) -> ToolResult:
    content = as_text("content", content)
    real, rel = inv.target(as_text("path", path))
    inv.turn.open_env(rel, content)
    before = read_existing(real, rel)
    if before is not None:
        require_read(inv, rel, before, "overwriting")
        old = before.decode("utf-8", "replace")
        inv.turn.open_env(rel, old)  # the diff shows what it held
        content = with_newlines(content, newline_of(old))
        if old.startswith(BOM) and not content.startswith(BOM):
            content = BOM + content
    data = content.encode("utf-8")
    if len(data) > MAX_WRITE_BYTES:
        raise WorkstationError(f"content is {len(data):,} bytes; write_file writes at most {MAX_WRITE_BYTES:,}")
    if data == before:
        return ToolResult(f"{rel}: unchanged (it already holds exactly this content)",
                          data={"path": rel, "lines_changed": 0})
    replace_file(inv, real, rel, data)
    entry = change(rel, before, data, "create" if before is None else "write")
    count = len(content.splitlines())
    if before is None:  # the model knows what it wrote: no need to show it back
        return edited_result(f"{rel}: created ({_lines(count)}, {len(data):,} bytes)", [entry],
                             lines=[1, count] if count else None)
    return edited_result(f"{rel}: overwritten ({_lines(count)}; +{entry['added']} -{entry['removed']})", [entry],
                         lines=[1, count] if count else None, diff=shown_diff(rel, before, data))


# --------------------------------------------------------------------------- edit_file
def _edit_file(inv: Invocation, path: str, old: Any, new: Any, replace_all: Any = False) -> ToolResult:
    old, new = as_text("old", old), as_text("new", new)
    if not isinstance(replace_all, bool):
        raise WorkstationError(f"replace_all must be true or false, got {replace_all!r}")
    real, rel = inv.target(as_text("path", path))
    data = read_existing(real, rel)
    if data is None:
        raise WorkstationError(f"{rel}: no such file (write_file creates files)")
    text = as_text_file(data, rel)
    inv.turn.open_env(rel, f"{text}\n{new}")
    require_read(inv, rel, data, "editing")
    if not old:
        raise WorkstationError("old is empty: give the exact text to replace (write_file creates a file)")
    newline = newline_of(text)
    needle, found = old, text.count(old)
    if not found and newline == "\r\n" and "\n" in old:
        needle = with_newlines(old, newline)  # the model sent \n for a CRLF file's line endings
        found = text.count(needle)
    replacement = with_newlines(new, newline)
    if needle == replacement:
        raise WorkstationError("old and new are the same text: nothing to change")
    if not found:
        raise WorkstationError(f"{rel}: old text not found{_near_miss(text, old)}; read the lines again and "
                               "copy them exactly (whitespace and indentation count)")
    if found > 1 and not replace_all:
        raise WorkstationError(f"{rel}: old text matches {found} times (lines {_where(text, needle)}); include "
                               "more surrounding lines to make it unique, or set replace_all")
    at = text.index(needle)
    updated = text.replace(needle, replacement) if replace_all else text[:at] + replacement + text[at + len(needle):]
    after = updated.encode("utf-8")
    replace_file(inv, real, rel, after)
    entry = change(rel, data, after, "edit")
    first = text.count("\n", 0, at) + 1
    span = replacement[:-1] if replacement.endswith("\n") else replacement
    last = first + span.count("\n")
    where = f"lines {first}-{last}" if replacement and last > first else f"line {first}" if replacement else \
        f"removed at line {first}"
    what = f"replaced {found} occurrences (the first at {where})" if found > 1 else f"replaced the text ({where})"
    return edited_result(f"{rel}: {what}; +{entry['added']} -{entry['removed']}", [entry],
                         lines=[first, last] if replacement else None, diff=shown_diff(rel, data, after))


def _where(text: str, needle: str, show: int = 5) -> str:
    lines: dict[int, None] = {}
    at = text.find(needle)
    while at >= 0 and len(lines) <= show:
        lines[text.count("\n", 0, at) + 1] = None
        at = text.find(needle, at + len(needle))
    return ", ".join(map(str, list(lines)[:show])) + (", …" if len(lines) > show else "")


def _near_miss(text: str, old: str) -> str:
    """A hint at where `old` almost matches: its first line, as is or with other spacing (empty: nowhere)."""
    first = next((line.strip() for line in old.splitlines() if line.strip()), "")
    if not first:
        return ""
    spaced = " ".join(first.split())
    for number, line in enumerate(text.splitlines(), start=1):
        if first in line and len(old.strip().splitlines()) > 1:
            return f" (its first line is at line {number}: a later line differs)"
        if spaced in " ".join(line.split()):
            return f" (its first line is at line {number} with other spacing)"
    return ""


# --------------------------------------------------------------------------- delete_file
def _delete_file(inv: Invocation, path: str) -> ToolResult:
    path = as_text("path", path)
    real, rel = inv.target(path)
    _not_a_link(inv, path, rel, "delete_file removes")
    data = read_existing(real, rel)
    if data is None:
        raise WorkstationError(f"{rel}: no such file")
    if inv.services.intend is not None:
        inv.services.intend(rel, None)
    unlink_beneath(inv.services.policy.protected.root, rel)
    inv.services.edited(rel)
    entry = change(rel, data, None, "delete")
    return edited_result(f"{rel}: deleted ({_lines(len(data.splitlines()))}, {len(data):,} bytes)", [entry])


# --------------------------------------------------------------------------- move_file
def _move_file(inv: Invocation, src: str, dst: str) -> ToolResult:
    src, dst = as_text("src", src), as_text("dst", dst)
    s_real, s_rel = inv.target(src)
    d_real, d_rel = inv.target(dst)
    _not_a_link(inv, src, s_rel, "move_file moves")
    data = read_existing(s_real, s_rel)
    if data is None:
        raise WorkstationError(f"{s_rel}: no such file")
    if s_real == d_real:
        raise WorkstationError(f"{s_rel} and {dst} are the same file")
    exists = f"{d_rel} exists: move_file never overwrites (delete it first, or pick another name)"
    if os.path.lexists(d_real) or os.path.lexists(Path(dst) if Path(dst).is_absolute() else inv.services.root / dst):
        raise WorkstationError(exists)
    if inv.services.intend is not None:
        inv.services.intend(d_rel, sha256_bytes(data))
        inv.services.intend(s_rel, None)
    try:  # both folders opened from the root with no link followed (another filesystem: copied, then removed)
        rename_beneath(inv.services.policy.protected.root, s_rel, d_rel, staging=inv.services.staging)
    except FileExistsError:
        raise WorkstationError(exists) from None
    if inv.services.ledger.last(s_rel) == sha256_bytes(data):
        inv.services.ledger.saw(d_rel, sha256_bytes(data))  # what the agent read under the old name, it knows under the new
    inv.services.edited(s_rel)
    inv.services.edited(d_rel)
    entries = [change(s_rel, data, None, "move", to=d_rel), change(d_rel, None, data, "move", **{"from": s_rel})]
    entries[0]["diff"] = f"rename from {s_rel}\nrename to {d_rel}"
    entries[1]["diff"], entries[1]["added"], entries[0]["removed"] = "", 0, 0
    return edited_result(f"{s_rel} moved to {d_rel}", entries)


def _move_label(name: str, args: Mapping[str, Any]) -> str:
    return f"{name}({args.get('src')} → {args.get('dst')})"


def _not_a_link(inv: Invocation, path: str, rel: str, what: str) -> None:
    """Refuse a path that is itself a symbolic link: removing or moving one acts on the link, not on the
    file the agent read through it (its folders may be links: the real path is what is confined)."""
    given = Path(path) if Path(path).is_absolute() else inv.services.root / path
    if given.is_symlink():
        raise WorkstationError(f"{path} is a symbolic link (to {rel}); {what} regular files only")


# --------------------------------------------------------------------------- the declarations
_WRITE_DOC = ("Create a file (and its folders) with content, or replace a whole file you read before "
              "(read_lines or file_meta). Prefer edit_file or replace_lines to change part of a file.")
_EDIT_DOC = ("Replace the exact text old with new in a file you read before. old must match once (copy it "
             "with its whitespace, a few lines around the change); replace_all replaces every match. The "
             "result shows the diff.")

TOOLS = [
    Tool("write_file", _WRITE_DOC, params(["path", "content"], path=STR, content=STR), _write_file, WRITE,
         meaning=edits_meaning, outcome=edit_outcome, writes=path_args("path"), verify=REAPPLY, comparable=summary_line),
    Tool("edit_file", _EDIT_DOC,
         params(["path", "old", "new"], path=STR, old=STR, new=STR,
                replace_all={**BOOL, "description": "replace every match (default false)"}),
         _edit_file, WRITE, meaning=edits_meaning, outcome=edit_outcome, writes=path_args("path"), verify=REAPPLY,
         comparable=summary_line),
    Tool("delete_file", "Delete one file (not a folder). The user can undo it.", params(["path"], path=STR),
         _delete_file, WRITE, meaning=edits_meaning, outcome=edit_outcome, writes=path_args("path"), verify=REAPPLY,
         comparable=summary_line),
    Tool("move_file", "Move or rename one file; dst must not exist (its folders are created).",
         params(["src", "dst"], src=STR, dst=STR), _move_file, WRITE, meaning=edits_meaning, outcome=edit_outcome,
         writes=path_args("src", "dst"), verify=REAPPLY, comparable=summary_line,
         label=_move_label),
]
