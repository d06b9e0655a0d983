"""task: hand one self-contained job to a sub-agent with a context of its own, and get its summary back.

The sub-agent (agent/subagent.py) works on the same workspace with the same tools, within a budget of
model calls and tokens, and its steps are recorded as a child flow of this call. Only its summary enters
the caller's context. Read-only unless `write` is asked for and the user's configuration lets sub-agents
write (agent.subagent_writes); several task calls in one answer run at once (agent.max_subagents).
"""

from __future__ import annotations

import contextvars
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Mapping, TypeVar

from .invocation import Invocation
from .base import BOOL, DELEGATE, NEVER, STR, Tool, ToolResult, as_text, params

MAX_PROMPT = 8_000  # characters of a task description
T = TypeVar("T")


def _task(inv: Invocation, prompt: str, write: bool = False) -> ToolResult:
    prompt = as_text("prompt", prompt).strip()
    if not prompt:
        return ToolResult("error: prompt is empty: describe the task and what the summary must say", ok=False)
    if len(prompt) > MAX_PROMPT:
        return ToolResult(f"error: prompt is {len(prompt):,} characters; keep a task under {MAX_PROMPT:,}", ok=False)
    if not isinstance(write, bool):
        return ToolResult(f"error: write must be true or false, got {write!r}", ok=False)
    if inv.services.delegate is None:
        return ToolResult("error: sub-agents are not available here", ok=False, data={"outcome": "denied"})
    return inv.services.delegate(prompt, write)


def _label(name: str, args: Mapping[str, Any]) -> str:
    prompt = " ".join(str(args.get("prompt") or "").split())
    mode = ", write" if args.get("write") is True else ""
    return f"{name}({prompt[:60] + ('…' if len(prompt) > 60 else '')}{mode})"


TOOLS = [
    Tool("task", "Hand a self-contained job (a search across the code, a review, a question about how something "
         "works) to a sub-agent with a fresh context of its own and the same tools; you get back only its "
         "summary, so your context stays small. Say exactly what to find and what the summary must contain "
         "(paths and line numbers). The sub-agent is read-only unless write is true (allowed only when the "
         "user's configuration lets sub-agents write). Several task calls in one answer run at once.",
         params(["prompt"], prompt=STR, write=BOOL), _task, DELEGATE, verify=NEVER, label=_label,
         time_limit_s=None),
]


def groups(calls: list[dict]) -> list[list[int]]:
    """The indexes of one answer's tool calls in the groups they run in: consecutive task calls together
    (at once), any other call alone, in the order the model asked."""
    out: list[list[int]] = []
    for index, call in enumerate(calls):
        if call.get("name") == "task" and out and calls[out[-1][-1]].get("name") == "task":
            out[-1].append(index)
        else:
            out.append([index])
    return out


def at_once(work: list[Callable[[], T]], limit: int) -> list[T]:
    """Each of `work` run, at most `limit` at a time (one alone runs in this thread), in the caller's context
    (its episodic operation); the results in order. An exception is raised again here."""
    if len(work) == 1:
        return [work[0]()]
    with ThreadPoolExecutor(max_workers=max(1, limit), thread_name_prefix="task") as pool:
        futures = [pool.submit(contextvars.copy_context().run, fn) for fn in work]
        return [future.result() for future in futures]
