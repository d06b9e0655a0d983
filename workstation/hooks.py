"""Hooks: the user's programs run at the agent's events, in the format scripts already speak (Claude Code's).

Where they come from, in order (each file holds `{"hooks": {EVENT: [{"matcher": "Edit|Write", "hooks":
[{"type": "command", "command": "...", "timeout": 60}]}]}}`):
- the user's own `hooks.json` in the config home (paths.user_dir());
- the workspace's `.workstation/hooks.json`, only once the folder is trusted (workstation.trust: a changed
  file asks again, as a changed config does);
- with `hooks.claude = true` in the user's own config, Claude Code's settings too: `~/.claude/settings.json`,
  and the workspace's `.claude/settings.json` and `.claude/settings.local.json` once the folder is trusted.

A hook gets the event as JSON on stdin, with Claude Code's common fields (`session_id`, `transcript_path`,
`cwd`, `permission_mode`, `hook_event_name`) and the event's own. A tool event names the tool as Claude Code
does where one of ours is the same concept (`Edit` for edit_file and replace_lines, `Write`, `Bash`, `Read`,
`Grep`, `Glob`, `Task`, `TodoWrite`; ours otherwise, in `workstation_tool` always), and `tool_input` carries
Claude Code's field names (`file_path`, absolute; `command`, `old_string`, `new_string`...) beside ours, so a
script written for Claude Code reads what it expects. A matcher is a regular expression matched whole
against either name (`*` or none: every tool; for SessionStart: startup, resume, compact or clear).

What a hook says: exit 0, its stdout added to the context for SessionStart and UserPromptSubmit when it is
not JSON; exit 2, the action refused (or, for Stop, the turn goes on) with its stderr as the reason; any
other code, one line for the user and nothing else. A JSON object on stdout may carry `continue` /
`stopReason`, `suppressOutput`, `systemMessage`, `decision` / `reason` and `hookSpecificOutput`
(`permissionDecision` allow/deny/ask with `permissionDecisionReason`, `additionalContext`); fields it does
not know are ignored. Every hook has a time limit (its `timeout`, default 60 s, never more than the user's
`hooks.timeout_s`); a hook that hangs is killed, and one that hangs, crashes or prints garbage is one line
for the user: the session goes on. What a hook adds to the model's context is masked (workstation.scrub).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import scrub
from .paths import Paths, user_dir

HOOK = "hook"  # the episodic event of one hook run (memory.episodic): name = the event
EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse",
          "PostToolUseFailure", "PreCompact", "PostCompact", "Stop", "SubagentStart", "SubagentStop",
          "Notification", "SessionEnd")
# Claude Code's events that have no counterpart here: their hooks are left out without a word
ELSEWHERE = frozenset({"ConfigChange", "CwdChanged", "DirectoryAdded", "Elicitation", "ElicitationResult",
                       "FileChanged", "InstructionsLoaded", "MessageDisplay", "PermissionDenied", "PostToolBatch",
                       "Setup", "StopFailure", "TaskCompleted", "TaskCreated", "TeammateIdle", "UserPromptExpansion",
                       "WorktreeCreate", "WorktreeRemove"})
TOOL_EVENTS = frozenset({"PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure"})
# events whose plain stdout (exit 0) is context for the model, as in Claude Code
STDOUT_IS_CONTEXT = frozenset({"SessionStart", "UserPromptSubmit"})
DEFAULT_TIMEOUT_S = 60.0
OUTPUT_LIMIT = 64 * 1024  # of a hook's stdout and stderr kept: a hook that floods is cut, never held in memory
CONTEXT_LIMIT = 10_000  # characters of context one hook adds (Claude Code's cap)

# our tools by the name Claude Code gives the same concept
CLAUDE_NAMES = {"edit_file": "Edit", "replace_lines": "Edit", "write_file": "Write", "run_command": "Bash",
                "read_lines": "Read", "file_meta": "Read", "grep": "Grep", "find": "Glob", "task": "Task",
                "todo": "TodoWrite"}


class HookConfigError(ValueError):
    """A hooks file that is not the shape above; its message names the file and the problem."""


@dataclass(frozen=True)
class Hook:
    event: str
    matcher: str  # "" matches everything
    command: str
    timeout_s: float
    source: str  # the file it came from

    def matches(self, *names: str) -> bool:
        if self.matcher in ("", "*"):
            return True
        try:
            pattern = re.compile(self.matcher)
        except re.error:
            return any(self.matcher == name for name in names)
        return any(pattern.fullmatch(name) for name in names if name)


@dataclass
class Outcome:
    """What the hooks of one event decided, together."""

    blocked: bool = False  # exit 2, decision "block", permissionDecision "deny" (Stop: the turn goes on)
    reason: str = ""  # why (to the model for a tool or a Stop, to the user for a prompt)
    permission: str = ""  # PreToolUse: allow | deny | ask ("" when no hook decided)
    stop: bool = False  # continue: false: the agent stops
    stop_reason: str = ""
    context: list[str] = field(default_factory=list)  # for the model (masked)
    messages: list[str] = field(default_factory=list)  # for the user: systemMessage, errors, time-outs
    runs: list[dict] = field(default_factory=list)  # one per hook run: what the timeline shows

    @property
    def context_text(self) -> str:
        return "\n\n".join(self.context)


def _load_file(path: Path, problems: list[str]) -> dict[str, list[dict]]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            data = json.loads(fh.read(1 << 20))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, RecursionError) as err:
        problems.append(f"hooks in {path} ignored: {type(err).__name__}: {err}")
        return {}
    hooks = data.get("hooks") if isinstance(data, dict) else None
    if hooks is None:
        return {}
    if not isinstance(hooks, dict):
        problems.append(f"hooks in {path} ignored: \"hooks\" is not an object")
        return {}
    return hooks


def parse(hooks: dict, source: str, problems: list[str], limit_s: float) -> list[Hook]:
    """The hooks of one file's `hooks` object; what is not the shape is named in `problems` and left out
    (an event we do not have, a hook type other than command)."""
    found: list[Hook] = []
    for event, groups in hooks.items():
        if event in ELSEWHERE:
            continue
        if event not in EVENTS:
            problems.append(f"{source}: no event {event!r} here (known: {', '.join(EVENTS)}); its hooks ignored")
            continue
        if not isinstance(groups, list):
            problems.append(f"{source}: {event} is not a list; ignored")
            continue
        for group in groups:
            if not isinstance(group, dict) or not isinstance(group.get("hooks", []), list):
                problems.append(f"{source}: a {event} entry is not {{matcher, hooks: [...]}}; ignored")
                continue
            matcher = group.get("matcher") or ""
            if not isinstance(matcher, str):
                problems.append(f"{source}: a {event} matcher is not a string; ignored")
                continue
            for hook in group.get("hooks", []):
                if not isinstance(hook, dict) or hook.get("type", "command") != "command" \
                        or not isinstance(hook.get("command"), str) or not hook["command"].strip():
                    problems.append(f"{source}: a {event} hook is not {{type: command, command: ...}}; ignored")
                    continue
                timeout = hook.get("timeout", DEFAULT_TIMEOUT_S)
                if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
                    timeout = DEFAULT_TIMEOUT_S
                found.append(Hook(event, matcher, hook["command"], min(float(timeout), limit_s), source))
    return found


def sources(paths: Paths, claude: bool) -> list[Path]:
    """The files hooks are read from here (see the module docstring), in order."""
    found = [user_dir() / "hooks.json"]
    if claude:
        found.append(Path.home() / ".claude" / "settings.json")
    if paths.trusted:
        found.append(paths.state / "hooks.json")
        if claude:
            found += [paths.root / ".claude" / "settings.json", paths.root / ".claude" / "settings.local.json"]
    return found


class Hooks:
    """The hooks in force in one workspace, and the runner of an event's hooks."""

    def __init__(self, hooks: list[Hook], *, root: Path, problems: list[str] | None = None):
        self.hooks = hooks
        self.root = root
        self.problems = list(problems or [])  # what the files said wrong, once, for the user

    @classmethod
    def load(cls, paths: Paths, *, claude: bool = False, limit_s: float = DEFAULT_TIMEOUT_S) -> "Hooks":
        problems: list[str] = []
        hooks: list[Hook] = []
        for path in sources(paths, claude):
            hooks += parse(_load_file(path, problems), str(path), problems, limit_s)
        return cls(hooks, root=paths.root, problems=problems)

    def __bool__(self) -> bool:
        return bool(self.hooks)

    def for_event(self, event: str, *names: str) -> list[Hook]:
        return [h for h in self.hooks if h.event == event and h.matches(*names)]

    def describe(self) -> list[str]:
        """One line per hook in force: event, matcher, command, limit, file (for /hooks)."""
        return [f"{h.event}{f' [{h.matcher}]' if h.matcher else ''}: {h.command} (≤ {h.timeout_s:g} s; {h.source})"
                for h in self.hooks]

    def run(self, event: str, payload: dict[str, Any], *, match: tuple[str, ...] = (),
            env: dict[str, str] | None = None) -> Outcome:
        """Run the event's hooks that match (`match`: the names a matcher may match), one after another, and
        what they decided together. `payload` holds the common fields and the event's own."""
        outcome = Outcome()
        for hook in self.for_event(event, *match):
            self._one(hook, {**payload, "hook_event_name": event}, outcome, env)
            if outcome.stop:
                break
        return outcome

    def _one(self, hook: Hook, payload: dict, outcome: Outcome, env: dict[str, str] | None) -> None:
        started = time.monotonic()
        run: dict[str, Any] = {"event": hook.event, "command": hook.command, "source": hook.source}
        environment = {**(os.environ if env is None else env), "CLAUDE_PROJECT_DIR": str(self.root),
                       "WORKSTATION_PROJECT_DIR": str(self.root)}
        try:
            done = _run(hook.command, json.dumps(payload).encode(), self.root, environment, hook.timeout_s)
        except subprocess.TimeoutExpired:
            run.update(outcome="timeout", duration_ms=round((time.monotonic() - started) * 1000))
            outcome.messages.append(f"hook {hook.event} `{_short(hook.command)}` gave no answer within "
                                    f"{hook.timeout_s:g} s: stopped, and the session goes on")
            outcome.runs.append(run)
            return
        except OSError as err:
            run.update(outcome="error", duration_ms=round((time.monotonic() - started) * 1000))
            outcome.messages.append(f"hook {hook.event} `{_short(hook.command)}` could not start: {err.strerror}")
            outcome.runs.append(run)
            return
        stdout = done.stdout[:OUTPUT_LIMIT].decode("utf-8", "replace")
        stderr = done.stderr[:OUTPUT_LIMIT].decode("utf-8", "replace").strip()
        run.update(exit=done.returncode, duration_ms=round((time.monotonic() - started) * 1000))
        if done.returncode == 2:
            outcome.blocked = True
            outcome.reason = _join(outcome.reason, stderr or f"refused by a {hook.event} hook")
            run["outcome"] = "blocked"
        elif done.returncode != 0:
            line = (stderr.splitlines() or [""])[0][:200]
            outcome.messages.append(f"hook {hook.event} `{_short(hook.command)}` failed (exit {done.returncode})"
                                    + (f": {line}" if line else ""))
            run["outcome"] = "error"
        else:
            run["outcome"] = "ok"
            self._said(hook, stdout, outcome, run)
        outcome.runs.append(run)

    def _said(self, hook: Hook, stdout: str, outcome: Outcome, run: dict) -> None:
        """What an exit-0 hook printed: a JSON object (its fields), else text (context for some events)."""
        text = stdout.strip()
        said: Any = None
        if text.startswith("{"):
            try:
                said = json.loads(text)
            except (ValueError, RecursionError):
                said = None
        if not isinstance(said, dict):
            if text and hook.event in STDOUT_IS_CONTEXT:
                outcome.context.append(scrub.mask(text[:CONTEXT_LIMIT]))
                run["context_chars"] = min(len(text), CONTEXT_LIMIT)
            return
        if said.get("continue") is False:
            outcome.stop = True
            outcome.stop_reason = _text(said.get("stopReason")) or f"stopped by a {hook.event} hook"
            run["outcome"] = "stopped"
        if message := _text(said.get("systemMessage")):
            outcome.messages.append(message)
        decision = said.get("decision")
        if decision == "block":
            outcome.blocked = True
            outcome.reason = _join(outcome.reason, _text(said.get("reason")) or f"refused by a {hook.event} hook")
            run["outcome"] = "blocked"
        elif decision == "approve" and hook.event == "PreToolUse" and not outcome.permission:
            outcome.permission = "allow"  # the older spelling of permissionDecision allow
        specific = said.get("hookSpecificOutput")
        if isinstance(specific, dict):
            permission = specific.get("permissionDecision")
            if hook.event in ("PreToolUse", "PermissionRequest") and permission in ("allow", "deny", "ask"):
                # the strictest answer of all the hooks stands: deny over ask over allow
                order = {"": 0, "allow": 1, "ask": 2, "deny": 3}
                if order[permission] > order[outcome.permission]:
                    outcome.permission = permission
                if permission == "deny":
                    outcome.blocked = True
                    outcome.reason = _join(outcome.reason, _text(specific.get("permissionDecisionReason"))
                                           or f"refused by a {hook.event} hook")
                run["permission"] = permission
            decision_obj = specific.get("decision")  # PermissionRequest's {"behavior": "allow" | "deny"}
            if hook.event == "PermissionRequest" and isinstance(decision_obj, dict) \
                    and decision_obj.get("behavior") in ("allow", "deny"):
                outcome.permission = decision_obj["behavior"]
                if decision_obj["behavior"] == "deny":
                    outcome.blocked = True
                    outcome.reason = _join(outcome.reason, _text(decision_obj.get("message")))
            if context := _text(specific.get("additionalContext")):
                outcome.context.append(scrub.mask(context[:CONTEXT_LIMIT]))
                run["context_chars"] = min(len(context), CONTEXT_LIMIT)


def _run(command: str, stdin: bytes, cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """The hook's shell in a process group of its own: at its time limit the whole group is killed, so a
    child it left holding the output (`sleep 30; echo`) cannot keep the session waiting."""
    proc = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=cwd, env=env, start_new_session=True)
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        raise
    finally:
        try:  # what the hook left running in the background goes with it
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _join(before: str, more: str) -> str:
    return f"{before}\n{more}".strip() if more else before


def _short(command: str) -> str:
    return command if len(command) <= 60 else command[:59] + "…"


def tool_input(name: str, args: dict[str, Any], root: Path) -> dict[str, Any]:
    """A tool call's arguments as a hook reads them: ours, and Claude Code's names for the same fields."""
    out = dict(args)
    for ours in ("path", "src"):
        if isinstance(args.get(ours), str) and "file_path" not in out:
            out["file_path"] = str(root / args[ours])
    if isinstance(args.get("cmd"), str):
        out["command"] = args["cmd"]
    if name in ("edit_file", "replace_lines"):
        if isinstance(args.get("old"), str):
            out["old_string"] = args["old"]
        if isinstance(args.get("new"), str):
            out["new_string"] = args["new"]
        if name == "replace_lines" and isinstance(args.get("content"), str):
            out["new_string"] = args["content"]
    if name == "read_lines" and isinstance(args.get("start"), int):
        out["offset"] = args["start"]
        if isinstance(args.get("end"), int):
            out["limit"] = max(0, args["end"] - args["start"] + 1)
    if name == "find" and isinstance(args.get("query"), str):
        out["pattern"] = args["query"]
    return out


def tool_names(name: str) -> tuple[str, ...]:
    """The names a matcher may match for one of our tools: Claude Code's first, then ours."""
    claude = CLAUDE_NAMES.get(name)
    if claude:
        return (claude, name)
    if "__" in name:  # an MCP server's tool (NAME__tool): Claude Code calls it mcp__NAME__tool
        return (f"mcp__{name}", name)
    return (name,)
