"""Unified diffs of file contents, as git prints them, and cut to a budget for a model.

Lines the two versions share at their start and end are set aside before
matching, so a one-line edit of a large file costs about as much as reading
it; a change too large to match line by line (past MATCH_LIMIT lines) is one
hunk of removed lines and one of added ones. A last line without a newline
is marked `\\ No newline at end of file`; line endings are not shown, so a
CRLF file's diff reads like any other.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

MATCH_LIMIT = 20_000  # lines of the changed middle matched line by line
NO_NEWLINE = "\\ No newline at end of file"


@dataclass(frozen=True)
class Diff:
    text: str  # the unified diff ("" when nothing changed)
    added: int
    removed: int
    first: int | None = None  # first line of the new version that changed (None: nothing added there)

    @property
    def changed(self) -> bool:
        return bool(self.text)


def decode(data: bytes | None) -> str | None:
    """A file's bytes as text, or None when it is not UTF-8 (then its diff says "binary")."""
    if data is None:
        return ""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def file_diff(before: bytes | None, after: bytes | None, path: str, *, old_path: str | None = None,
              context: int = 3) -> Diff:
    """The diff of one file from `before` to `after` (None: the file does not exist on that side)."""
    old_name = "/dev/null" if before is None else f"a/{old_path or path}"
    new_name = "/dev/null" if after is None else f"b/{path}"
    if before == after:
        moved = old_path not in (None, path)
        return Diff(f"rename from {old_path}\nrename to {path}" if moved else "", 0, 0)
    a, b = decode(before), decode(after)
    if a is None or b is None:
        return Diff(f"Binary file {old_path or path} changed" if before is not None and after is not None
                    else f"Binary file {path} {'deleted' if after is None else 'created'}", 0, 0)
    return unified(a, b, old_name, new_name, context=context)


def unified(before: str, after: str, old_name: str = "a", new_name: str = "b", *, context: int = 3) -> Diff:
    a = before.splitlines(keepends=True)
    b = after.splitlines(keepends=True)
    head = 0
    while head < len(a) and head < len(b) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < len(a) - head and tail < len(b) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    if head == len(a) == len(b):
        return Diff("", 0, 0)
    start = max(0, head - context)
    a_mid = a[start: len(a) - max(0, tail - context)]
    b_mid = b[start: len(b) - max(0, tail - context)]
    if len(a_mid) + len(b_mid) > MATCH_LIMIT:
        groups = [[("replace", head - start, len(a) - tail - start, head - start, len(b) - tail - start)]]
    else:
        groups = list(difflib.SequenceMatcher(None, a_mid, b_mid, autojunk=False).get_grouped_opcodes(context))
    lines = [f"--- {old_name}", f"+++ {new_name}"]
    added = removed = 0
    first = None
    for group in groups:
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        lines.append(f"@@ -{_range(start + i1, i2 - i1)} +{_range(start + j1, j2 - j1)} @@")
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                lines += _body(" ", a_mid[a1:a2])
                continue
            if tag in ("replace", "delete"):
                lines += _body("-", a_mid[a1:a2])
                removed += a2 - a1
            if tag in ("replace", "insert"):
                lines += _body("+", b_mid[b1:b2])
                added += b2 - b1
                if first is None:
                    first = start + b1 + 1
    return Diff("\n".join(lines), added, removed, first)


def _range(start: int, length: int) -> str:
    """difflib's unified range: `start,length`, 1-based; an empty range names the line before it."""
    first = start + 1 if length else start
    return str(first) if length == 1 else f"{first},{length}"


def _body(mark: str, lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        text = line.rstrip("\r\n")
        out.append(mark + text)
        if not line.endswith(("\n", "\r")):
            out.append(NO_NEWLINE)
    return out


def record_diff(record: Any) -> str:
    """The unified diff of everything a tool record changed (its `edits`), one file after another."""
    edits = getattr(record, "edits", None)  # a sessions.records.Tool (textdiff sits below sessions)
    return "\n".join(e["diff"] for e in edits or () if isinstance(e, dict) and isinstance(e.get("diff"), str)
                     and e["diff"])


def clip(diff: str, max_chars: int) -> str:
    """The diff's hunks (its two header lines dropped: the caller names the file) within max_chars,
    cut at a line with a note saying how much is left out."""
    lines = diff.splitlines()
    if len(lines) >= 2 and lines[0].startswith("--- ") and lines[1].startswith("+++ "):
        lines = lines[2:]
    out: list[str] = []
    used = 0
    for index, line in enumerate(lines):
        if used + len(line) + 1 > max_chars and out:
            rest = len(lines) - index
            out.append(f"[... {rest} more diff line{'s' if rest != 1 else ''} not shown]")
            break
        out.append(line if len(line) <= max_chars else line[: max_chars - 1] + "…")
        used += len(out[-1]) + 1
    return "\n".join(out)
