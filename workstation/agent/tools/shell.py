"""run_command: a command in the workspace root, allow-listed or approved by the user (agent.tools.shellrun)."""

from __future__ import annotations

from ... import scrub
from ...errors import WorkstationError
from .shellrun import CommandCancelled, CommandDenied, run_command
from .invocation import Invocation
from .base import COMMAND, STR, Tool, ToolResult, as_text, command_outcome, params


def _run_command(inv: Invocation, cmd: str) -> ToolResult:
    verdict = inv.services.permissions.decide(COMMAND, "run_command") if inv.services.permissions is not None else None
    try:
        res = run_command(as_text("cmd", cmd), inv.services.root, allow=inv.services.allow, approve=inv.services.approve,
                          timeout_s=inv.services.command_timeout_s, max_output_chars=inv.services.max_output_chars,
                          cancel=inv.turn.cancel, sandbox=inv.services.policy,
                          unasked=verdict.reason if verdict is not None and verdict.unasked else "")
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
                      data={"exit_code": res.exit_code, "approved_by": res.approved_by, "sandbox": res.sandbox,
                            "outcome": "timeout" if res.exit_code is None else ("ok" if res.exit_code == 0
                                                                                 else "error")})


TOOLS = [
    Tool("run_command", "Run a command in the workspace root, with a timeout and capped output. Needs the "
         "user's approval unless the configured allow-list covers it.", params(["cmd"], cmd=STR),
         _run_command, COMMAND, time_limit_s=None, outcome=command_outcome),
]
