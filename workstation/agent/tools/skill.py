"""The `skill` tool: the body of a skill (workstation.skills) whose name and description the model's head
lists, loaded only when the model decides it fits the task; or one file of the skill's folder."""

from __future__ import annotations

from .invocation import Invocation
from .base import NOTHING, QUERY, STR, Tool, ToolResult, params


def _skill(inv: Invocation, name: str, file: str = "") -> ToolResult:
    catalog = inv.services.skills
    found = catalog.skills.get(name) if catalog is not None else None
    if found is None:
        known = ", ".join(catalog.skills) if catalog is not None and catalog.skills else "none"
        return ToolResult(f"error: no skill named {name!r} (skills here: {known})", ok=False)
    try:
        if file:
            return ToolResult(f"[skill {name}: {file}]\n{found.file(file)}", data={"skill": name})
        files = found.files()
        tail = f"\n\n[files of this skill, read with skill(name, file): {', '.join(files)}]" if files else ""
        return ToolResult(f"[skill {name}]\n{found.body()}{tail}", data={"skill": name})
    except (OSError, ValueError) as err:
        return ToolResult(f"error: skill {name}: {err}", ok=False)


TOOLS = [
    Tool("skill", "Load a skill listed under 'Skills' in your instructions: its full instructions (and, with "
         "`file`, one of its files). Load one only when its description fits the task at hand.",
         params(["name"], name=STR, file=STR), _skill, QUERY, meaning=lambda call: NOTHING),
]
