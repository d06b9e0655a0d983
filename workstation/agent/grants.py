"""What a custom command's `allowed-tools` lets the turn it starts do without asking.

Claude Code's meaning (code.claude.com/docs/en/skills, the front matter reference: "Tools Claude can use
without asking permission when this skill is active"): the rules pre-approve; they take nothing away. A call
they cover runs where it would otherwise ask; any other call asks as always (and where nobody can be asked,
a headless run, it is refused as always). What the permission mode refuses (`plan`) stays refused: a grant
answers a question, it never turns a refusal into one.

The rules, in Claude Code's syntax:

    Edit  Write  MultiEdit  Bash  mcp__server__tool   a tool by Claude Code's name or ours (`replace_lines`)
    mcp__server  mcp__server__*                        every tool of an MCP server
    Bash(git status:*)  Bash(git diff *)               a command starting with those words, the rest of its
                                                       arguments safe as agent.command_allow requires
    Bash(npm test)                                     exactly that command
    Bash(touch build-*)                                `*` elsewhere: any text, in a plain command line
                                                       (no shell syntax: no `;`, pipes, `$`...)

A command it covers still runs in the sandbox, and only where a full sandbox holds (as an allow-list entry:
with none, it asks). A rule with a pattern on another tool (`Edit(src/**)`) covers nothing.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from .. import sandbox as _sandbox
from ..hooks import tool_names
from ..sandbox.allowlist import check, split
from .approval import ApprovalRequest

ALIASES = {"MultiEdit": "Edit"}  # Claude Code's names we have no tool of their own for


@dataclass(frozen=True)
class Grant:
    source: str  # what granted it: "/review" (the command)
    rules: tuple[str, ...]

    def covers(self, request: ApprovalRequest, policy: _sandbox.Policy) -> bool:
        """Whether `request` runs without asking under these rules (`policy`: the commands' sandbox)."""
        if request.action == "command":
            return _sandbox.status(policy).full and any(
                _command(rule, request.subject, policy) for rule in self.rules if _tool(rule) == "Bash")
        names = tool_names(request.tool_name)
        return any("(" not in rule and any(fnmatch.fnmatchcase(n, ALIASES.get(rule, rule)) or
                                           n.startswith(rule + "__") for n in names)
                   for rule in self.rules if rule.startswith("mcp__") or _tool(rule) != "Bash")


def _tool(rule: str) -> str:
    name = rule.split("(", 1)[0].strip()
    return ALIASES.get(name, name)


def _command(rule: str, command: str, policy: _sandbox.Policy) -> bool:
    """Whether a `Bash` or `Bash(spec)` rule covers `command`."""
    if "(" not in rule:
        return True  # every command (still sandboxed)
    spec = rule.split("(", 1)[1].rsplit(")", 1)[0].strip()
    if spec in ("", "*", ":*"):
        return True
    if spec.endswith(":*") or spec.endswith(" *"):  # plain words: those, then any safe arguments
        return check(command, [spec[:-2].strip()], policy.root, policy.private()) is None
    argv = split(command)  # a plain command line only: `touch a-*` never covers `touch a-1; rm -rf .`
    if argv is None:
        return False
    if "*" not in spec:
        return argv == split(spec)
    return fnmatch.fnmatchcase(" ".join(argv), spec)
