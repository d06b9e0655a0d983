"""What a tool call did, and the episodic events that follows from it: one derivation for every record.

A call's `Meaning` (the maps and ranges it read, the files it edited, its memory lookups, a decision,
a memory write, the plan) becomes its episodic events through `events`, the one function that does so:
for a live call (agent.tools.toolcall.execute, the loop's and the MCP server's), for a past one (replay), and
for an imported one (importers/events.py). So `reflect`, which counts events, and `report`, which reads
meanings, agree on live and imported sessions alike.

Our own tools declare what a call means (agent.tools: `Tool.meaning`). An imported session's calls are
other agents' (Claude Code's Read and Edit, Codex's apply_patch, OpenHands' and SWE-agent's
str_replace_editor, open, create...): `foreign_meaning` says which of them read or changed which file
(`foreign_files`, the one table of their tools). Commands (Bash, shell, execute_bash) are not read for
the files they touched: a command line does not say.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Mapping

from .records import Tool, ToolCall

FILE_READ, FILE_EDIT = "file_read", "file_edit"


# --------------------------------------------------------------------------- what a call meant
@dataclass(frozen=True)
class Read:
    """File content that entered the context (`served_from` disk), or was answered from memory."""

    path: str
    lines: list | None  # [start, end], 1-indexed
    served_from: str  # "disk" | "memory"
    chars: int = 0
    chars_saved: int = 0


@dataclass(frozen=True)
class MapRead:
    """A file's knowledge map served instead of its content."""

    path: str
    hit: bool  # False: the map was stale and re-indexed first
    chars_saved: int = 0


@dataclass(frozen=True)
class Edit:
    path: str
    lines: list | None = None  # [start, end] of the new text, when it is one range
    lines_changed: int | None = None
    new_errors: int = 0  # the language server's errors the call introduced (its first file carries them)
    fixed_errors: int = 0

    def checked(self, data: Mapping[str, Any]) -> "Edit":
        """This edit with the counts of its call's `diagnostics` (workstation.lsp.check.Report.data)."""
        found = data.get("diagnostics")
        if not isinstance(found, Mapping):
            return self
        return dataclasses.replace(self, new_errors=int(found.get("new") or 0), fixed_errors=int(found.get("fixed") or 0))


@dataclass(frozen=True)
class Lookup:
    key: str
    hit: bool
    kind: str  # "find" | "impact" | ...


@dataclass(frozen=True)
class Todo:
    """One item of the agent's plan (the todo tool)."""

    text: str
    status: str  # "pending" | "in_progress" | "done"


@dataclass(frozen=True)
class Meaning:
    """What one call did; see the module docstring."""

    map_reads: tuple[MapRead, ...] = ()
    reads: tuple[Read, ...] = ()
    edits: tuple[Edit, ...] = ()
    lookups: tuple[Lookup, ...] = ()
    decision: dict | None = None  # {id, decision, reasoning, files}
    memory_write: tuple[str, str, Any] | None = None  # (tier, key, value)
    plan: tuple[Todo, ...] | None = None  # the agent's whole plan as this call wrote it (() cleared it)

    @property
    def looked_at(self) -> list[str]:
        """Files a naive agent with no map and no memory would have read whole for this call."""
        return list(dict.fromkeys([m.path for m in self.map_reads] + [r.path for r in self.reads]))


NOTHING = Meaning()


def events(meaning: Meaning, *, live: bool) -> list[tuple[str, str, dict]]:
    """The episodic events a call's meaning adds beside its tool_call event: (type, name, fields).
    A live decision is recorded by the decision log itself, so only replay derives its event."""
    out: list[tuple[str, str, dict]] = []
    for m in meaning.map_reads:
        out.append(("memory_hit" if m.hit else "memory_miss", m.path,
                    {"tier": "kmap", "kind": "path", "reason": None if m.hit else "stale: re-indexed"}))
        out.append(("read_avoided", m.path, {"path": m.path, "reason": "knowledge map instead of the file",
                                              "chars_saved": m.chars_saved}))
    for r in meaning.reads:
        if r.served_from == "memory":
            out.append(("memory_hit", r.path, {"tier": "reads", "kind": "range"}))
            out.append(("file_read", r.path, {"path": r.path, "lines": r.lines, "chars": 0, "served_from": "memory"}))
            out.append(("read_avoided", r.path, {"path": r.path, "reason": "unchanged range still in context",
                                                  "chars_saved": r.chars_saved}))
        else:
            out.append(("file_read", r.path, {"path": r.path, "lines": r.lines, "chars": r.chars,
                                              "served_from": "disk"}))
    for e in meaning.edits:
        fields = {"path": e.path, "lines": e.lines, "lines_changed": e.lines_changed}
        if e.new_errors or e.fixed_errors:  # the timeline marks an edit that broke (or mended) something
            fields.update(new_errors=e.new_errors, fixed_errors=e.fixed_errors)
        out.append(("file_edit", e.path, fields))
    for lk in meaning.lookups:
        out.append(("memory_hit" if lk.hit else "memory_miss", lk.key, {"tier": "kmap", "kind": lk.kind}))
    if meaning.decision and not live:
        d = meaning.decision
        out.append(("decision_logged", d["id"], {"decision": d.get("decision"), "files": d.get("files")}))
    return out


def foreign_meaning(name: str, args: Mapping[str, Any], record: Tool | Mapping[str, Any],
                    call: ToolCall | Mapping[str, Any] | None = None) -> Meaning:
    """What a recorded call of another agent's tool `name` did (`foreign_files`); a failed call, or a tool
    not in the table (Bash), meant nothing we can tell. (A record still a dict: the importers' own.)"""
    if isinstance(record, Tool):
        ok, content = record.ok, record.content
    else:
        ok, content = record.get("ok", True), str(record.get("content") or "")
    if not ok:
        return NOTHING
    files = foreign_files(name, args, call)
    chars = len(content)
    return Meaning(reads=tuple(Read(path, None, "disk", chars=chars) for kind, path in files if kind == FILE_READ),
                   edits=tuple(Edit(path) for kind, path in files if kind == FILE_EDIT))


# --------------------------------------------------------------------------- other agents' tools

# tool name -> the argument naming its file
READ_TOOLS = {"Read": "file_path", "read_file": "path", "view": "path", "open": "path", "NotebookRead": "notebook_path"}
EDIT_TOOLS = {"Edit": "file_path", "MultiEdit": "file_path", "Write": "file_path", "NotebookEdit": "notebook_path",
              "write_file": "path", "edit_file": "path", "edit": "path", "create": "path"}
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add) File: (.+)$", re.MULTILINE)


def foreign_files(name: str, args: Mapping[str, Any], call: ToolCall | Mapping[str, Any] | None
                  ) -> list[tuple[str, str]]:
    """(FILE_READ | FILE_EDIT, path) for each file the call of another agent's tool `name` read or changed,
    from its parsed `args` (and, for apply_patch, the call's raw `arguments`: Codex sends the patch itself)."""
    command = args.get("command") if isinstance(args.get("command"), str) else ""
    if name == "str_replace_editor" and isinstance(args.get("path"), str):
        return [(FILE_READ if command == "view" else FILE_EDIT, args["path"])]
    if name in READ_TOOLS and isinstance(args.get(READ_TOOLS[name]), str):
        return [(FILE_READ, args[READ_TOOLS[name]])]
    if name in EDIT_TOOLS and isinstance(args.get(EDIT_TOOLS[name]), str):
        return [(FILE_EDIT, args[EDIT_TOOLS[name]])]
    if name == "apply_patch" and call is not None:
        raw = call.arguments if isinstance(call, ToolCall) else call.get("arguments")
        patch = raw if isinstance(raw, str) else ""
        patch = args.get("input", patch) if isinstance(args.get("input"), str) else patch
        return [(FILE_EDIT, p.strip()) for p in _PATCH_FILE.findall(patch or "")]
    return []
