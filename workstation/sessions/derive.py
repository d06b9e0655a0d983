"""What another agent's tool call did to files, derived from its record: the one table of their tools.

Our own tools declare what a call means (agent.tools: `Tool.meaning`). An imported session's calls are
other agents' (Claude Code's Read and Edit, Codex's apply_patch, OpenHands' and SWE-agent's
str_replace_editor, open, create...): this module says which of them read or changed which file, for
every reader of a log alike: the importer's episodic events (importers/events.py, what `reflect`
counts) and the meaning of a recorded call (agent.tools.meaning_of: `report`, replay, the app), so
the two never disagree about an imported session. Commands (Bash, shell, execute_bash) are not read
for the files they touched: a command line does not say.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

FILE_READ, FILE_EDIT = "file_read", "file_edit"

# tool name -> the argument naming its file
READ_TOOLS = {"Read": "file_path", "read_file": "path", "view": "path", "open": "path", "NotebookRead": "notebook_path"}
EDIT_TOOLS = {"Edit": "file_path", "MultiEdit": "file_path", "Write": "file_path", "NotebookEdit": "notebook_path",
              "write_file": "path", "edit_file": "path", "edit": "path", "create": "path"}
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add) File: (.+)$", re.MULTILINE)


def foreign_files(name: str, args: Mapping[str, Any], call: Mapping[str, Any] | None) -> list[tuple[str, str]]:
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
        patch = call.get("arguments") if isinstance(call.get("arguments"), str) else ""
        patch = args.get("input", patch) if isinstance(args.get("input"), str) else patch
        return [(FILE_EDIT, p.strip()) for p in _PATCH_FILE.findall(patch or "")]
    return []
