"""Asking the user before the agent does something it may not do on its own.

The agent never decides what needs approval and how to ask in one place: a tool
builds an `ApprovalRequest` (what, and why it needs asking) and hands it to the
`Approver` the agent was given: the app's dialog, the command line's prompt, a
test's lambda, or None when nobody can be asked (then the answer is no).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class ApprovalRequest:
    action: str  # "command" (run_command), "tool" (a call to an MCP server's tool) or "edit" (a WRITE tool's call)
    subject: str  # the command line, or the tool call in one line
    reason: str  # why this needs asking, one line ("not on agent.command_allow", "no sandbox: ...")
    tool: str = ""  # the tool that asks (run_command for a command)
    detail: str = ""  # what an edit would write (its first lines), shown under the subject

    @property
    def tool_name(self) -> str:
        if self.tool:
            return self.tool
        return "run_command" if self.action == "command" else self.subject.split("(", 1)[0].split(" ", 1)[0]

    def question(self) -> str:
        what = {"command": "run", "edit": "make this edit"}.get(self.action, "call")
        detail = "".join(f"\n  | {line}" for line in self.detail.splitlines())
        return f"The agent wants to {what}:\n\n  {self.subject}{detail}\n\n({self.reason})\n\nAllow it?"


Approver = Callable[[ApprovalRequest], bool]


def ask(approver: Approver | None, request: ApprovalRequest) -> str | None:
    """None when approved; otherwise the one line that says who said no."""
    if approver is None:
        return f"not approved: {request.subject!r} ({request.reason}; nobody to ask)"
    if approver(request):
        return None
    return f"you refused: {request.subject!r} ({request.reason})"
