"""Session log records as ACP session updates, for a live turn and for a loaded session's history alike.

One record, one list of updates (`Mapper.updates`):

    user        a user_message_chunk with what the user said
    assistant   an agent_message_chunk with its text (live, the text went out already as it streamed:
                `streamed=True` leaves it out), then a `tool_call` (status pending) per call it made,
                titled as its tool labels it, with its kind, its arguments and the file it works on
    tool        a `tool_call_update`: completed or failed, the result the model saw, and a `diff` content
                per hunk of every file it changed (the diffs the write tools already recorded on the
                record's `edits`: sessions/README.md), and, when it carries one, the agent's whole plan
                as a `plan` update (the todo tool records the plan with every call: sessions.plan)
    system      a notice ("cancelled", a model error) as one bracketed line of the agent's message;
                pins, context updates and epochs are the model's context, not the conversation
    compact     one line saying which turns a summary replaced (history only)

A diff content holds one hunk: `oldText` the hunk's context and removed lines, `newText` its context and
added lines (no `oldText` for a file the call created). A rename, or a binary file, is a line of text.
An imported session's records map the same way: an unknown tool is labelled by its arguments.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

from acp import helpers
from acp.schema import PlanEntry, PlanEntryStatus, ToolCallLocation, ToolKind

from ..agent import tools
from ..sessions import plan as plan_mod
from ..sessions.log import tool_call_arguments
from ..sessions.records import Assistant, Command, Compact, Record, System, Tool, ToolCall, User

PLAN_STATUS: dict[str, PlanEntryStatus] = {"pending": "pending", "in_progress": "in_progress", "done": "completed"}
# what a built-in tool does, as ACP names it (anything else by its declared effect)
KINDS: dict[str, ToolKind] = {"run_command": "execute", "delete_file": "delete", "move_file": "move", "grep": "search",
         "find": "search", "impact": "search", "recall": "read", "todo": "think"}
EFFECT_KINDS: dict[str, ToolKind] = {tools.QUERY: "read", tools.WRITE: "edit", tools.COMMAND: "execute",
                                     tools.MEMORY: "other"}


class Mapper:
    """Maps the records of one session; remembers the calls it has seen, so that a tool record finds the
    call it answers."""

    def __init__(self, root: Path, toolset: "tools.Toolset | None" = None):
        self.root = root
        self.toolset = toolset or tools.Toolset()
        self.calls: dict[str, ToolCall] = {}  # tool call id -> the call the assistant made

    def updates(self, record: Record, *, streamed: bool = False) -> list[Any]:
        if isinstance(record, User):
            return [helpers.update_user_message_text(record.content)]
        if isinstance(record, Assistant):
            content = record.content
            out: list[Any] = [helpers.update_agent_message_text(content)] if content and not streamed else []
            for call in record.tool_calls or ():
                if call.id:
                    self.calls[call.id] = call
                    out.append(self.started(call))
            return out
        if isinstance(record, Tool):
            return self.finished(record)
        if isinstance(record, System) and record.notice:
            return [helpers.update_agent_message_text(f"\n\n{record.content}\n")]
        if isinstance(record, Command) and not streamed:  # a slash command the user ran, as the live session answered
            said = record.content if record.ok else f"error: {record.content}"
            return [helpers.update_user_message_text(record.line), helpers.update_agent_message_text(said)]
        if isinstance(record, Compact):
            return [helpers.update_agent_message_text("\n\n[compaction: earlier turns were summarized for the model; "
                                                      "the log keeps them]\n")]
        return []

    def history(self, records: Iterable[Record]) -> list[Any]:
        """Every update of a session's records, in order (session/load replays them to the client); a
        sub-agent's own steps (marked sidechain) are left out, as they are while a turn runs."""
        return [update for record in records if not record.sidechain for update in self.updates(record)]

    # ------------------------------------------------------------------ tool calls
    def _tool(self, name: str) -> "tools.Tool | None":
        return self.toolset.get(name) or tools.get(name)

    def title(self, name: str, args: dict) -> str:
        tool = self._tool(name)
        return (tool.label if tool is not None else tools.default_label)(name, args)

    def kind(self, name: str) -> ToolKind:
        if name in KINDS:
            return KINDS[name]
        tool = self._tool(name)
        return EFFECT_KINDS.get(tool.effect, "other") if tool is not None else "other"

    def inside(self, rel: object) -> str | None:
        """The absolute path of a path argument inside the workspace; None for any other (the model's
        arguments are not to be trusted: an editor following the agent must not open a file outside)."""
        if not isinstance(rel, str) or not rel or "\0" in rel:
            return None
        where = os.path.normpath(os.path.join(self.root, rel))
        real = os.path.realpath(where)  # a symlink out of the workspace is outside it
        root = os.path.realpath(self.root)
        return where if real == root or real.startswith(root + os.sep) else None

    def locations(self, args: dict) -> list[ToolCallLocation] | None:
        found = []
        for key in ("path", "dst"):
            where = self.inside(args.get(key))
            if where is not None:
                line = args.get("start")
                found.append(ToolCallLocation(path=where, line=line if key == "path" and isinstance(line, int)
                                              and line > 0 else None))
        return found or None

    def started(self, call: ToolCall) -> Any:
        name = call.name or "tool"
        args = tool_call_arguments(call)
        return helpers.start_tool_call(call.id, self.title(name, args), kind=self.kind(name), status="pending",
                                       locations=self.locations(args), raw_input=args)

    def finished(self, record: Tool) -> list[Any]:
        call_id = record.tool_call_id
        if not call_id:  # a result that answers no call (an imported log's quirk): nothing to update
            return []
        content: list[Any] = []
        for edit in record.edits or ():
            if isinstance(edit, dict):
                content += self.diffs(edit)
        text = record.content
        if text:
            content.append(helpers.tool_content(helpers.text_block(text)))
        call = self.calls.get(call_id)
        args = tool_call_arguments(call) if call else {}
        out: list[Any] = [helpers.update_tool_call(
            call_id, status="completed" if record.ok else "failed", content=content,
            locations=self._edited(record) or self.locations(args))]
        if record.ok and record.plan is not None:
            items = plan_mod.items_of(record.plan)
            if items is not None:
                out.append(plan_update(items))
        return out

    def _edited(self, record: Tool) -> list[ToolCallLocation] | None:
        lines = record.lines
        first = lines[0] if isinstance(lines, list) and lines and isinstance(lines[0], int) else None
        found = [ToolCallLocation(path=where, line=first if i == 0 else None)
                 for i, e in enumerate(record.edits or ())
                 if isinstance(e, dict) and e.get("after") and (where := self.inside(e.get("path"))) is not None]
        return found or None

    def diffs(self, edit: dict) -> list[Any]:
        """One `diff` content per hunk of one file's recorded change (a text line for a rename or a binary)."""
        path = edit.get("path")
        text = edit.get("diff")
        where = self.inside(path)
        if where is None or not isinstance(text, str) or not text:
            return []
        found = hunks(text)
        if not found:
            return [helpers.tool_content(helpers.text_block(f"{path}: {text}"))]
        created = "before" not in edit  # the file did not exist before the call (writes.change)
        return [helpers.tool_diff_content(where, new, None if created else old) for old, new in found]


def hunks(diff: str) -> list[tuple[str, str]]:
    """(old, new) text of each hunk of a unified diff: context lines on both sides."""
    out: list[tuple[list[str], list[str]]] = []
    for line in diff.splitlines():
        if line.startswith("@@"):
            out.append(([], []))
        elif not out or line.startswith("\\"):  # the file headers; "\ No newline at end of file"
            continue
        elif line.startswith("-"):
            out[-1][0].append(line[1:])
        elif line.startswith("+"):
            out[-1][1].append(line[1:])
        elif line.startswith(" "):
            out[-1][0].append(line[1:])
            out[-1][1].append(line[1:])
    return [("\n".join(old) + ("\n" if old else ""), "\n".join(new) + ("\n" if new else "")) for old, new in out]


def plan_update(items: list[dict]) -> Any:
    return helpers.update_plan([PlanEntry(content=item["text"], priority="medium",
                                          status=PLAN_STATUS.get(item["status"], "pending")) for item in items])
