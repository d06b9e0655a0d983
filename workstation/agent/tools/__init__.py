"""The agent's tools: every module of this package declares its tools in a `TOOLS` list (base.Tool:
schema, implementation and what a call means), and this registry collects them. Adding a tool is
adding it to one module here; the loop, replay, the report and the MCP server read the declaration.
Beside the tools: what they are made of (fileio.py: confined reads and edits; shellrun.py: a command
in the sandbox), what a call runs with (invocation.py) and the one function that runs and records a
call (toolcall.py).

`call(ctx, name, args, call_id)` runs one: it resolves the call once (`invocation.resolve`: parsed
arguments, write paths confined), then the permission mode, the .env guard, the checkpoint, the
language-server check and the bounded run each read that resolution. A user-facing error or an OS
error becomes a failed result the model can read and act on, a tool past its time limit or stopped
by the user is abandoned with one line, and nothing raises.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import inspect
import pkgutil
import threading
import time
from pathlib import Path
from typing import Any, Mapping

from ... import scrub
from ...errors import WorkstationError
from ...sessions.derive import foreign_meaning
from ..approval import ApprovalRequest, ask
from . import lspcheck
from .base import (COMMAND, DELEGATE, MEMORY, NEVER, QUERY, RECOMPUTE, RECORDED_FIELDS, REAPPLY, WRITE, Call,
                   Meaning, Tool, ToolResult, activity_label, cap, default_label, default_outcome,
                   events, logged_args)
from .invocation import Invocation, Services, ToolContext, Turn, resolve, tool_context
from .memory import render_decisions, render_rows
from .search import render_find

__all__ = ["TOOLS", "RECORDED_FIELDS", "Call", "Invocation", "Meaning", "Services", "Tool", "ToolContext",
           "ToolResult", "Turn", "activity_label", "resolve", "tool_context",
           "call", "call_label", "cap", "default_label", "events", "get", "logged_args", "DELEGATE",
           "meaning_of", "outcome_of", "render_decisions", "render_find", "render_rows", "schemas", "Toolset", "COMMAND", "MEMORY", "QUERY", "WRITE",
           "RECOMPUTE", "REAPPLY", "NEVER"]


# The modules of this package that declare no tools: what the tools are made of, and the call's machinery.
_NOT_TOOLS = {"base", "fileio", "invocation", "shellrun", "toolcall"}


def _collect() -> dict[str, Tool]:
    found: dict[str, Tool] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name in _NOT_TOOLS:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for tool in getattr(module, "TOOLS", ()):
            if tool.name in found:
                raise RuntimeError(f"tool {tool.name} is declared twice ({module.__name__})")
            found[tool.name] = tool
    return found


TOOLS: dict[str, Tool] = _collect()


def get(name: str) -> Tool | None:
    return TOOLS.get(name)


def schemas(*, effects: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """The tools' JSON schemas for a model (only those with one of `effects`, when given)."""
    return [t.schema() for t in TOOLS.values() if effects is None or t.effect in effects]


def meaning_of(name: str, args: Mapping[str, Any], record: Mapping[str, Any],
               call: Mapping[str, Any] | None = None) -> Meaning:
    """What a recorded call did (a session log's tool record, its call's arguments, and the call itself
    when at hand). A tool this version does not know, or any tool of an imported record (it has a
    `source`, and its `write_file` is another agent's, whatever the name), is another agent's, whose file
    reads and edits sessions.derive knows (Read, Edit, apply_patch...), as the importer's events do; a
    failed call, or a tool it does not know either (Bash), meant nothing we can tell."""
    tool = TOOLS.get(name)
    if tool is not None and "source" not in record:
        return tool.meaning(Call.from_record(record, args))
    return foreign_meaning(name, args, record, call)


def call_label(name: str, args: Mapping[str, Any]) -> str:
    """`read_lines(shop/api.py 59-67)`: a tool call in one short line, as its tool declares."""
    tool = TOOLS.get(name)
    return (tool.label if tool is not None else default_label)(name, args)


def outcome_of(name: str, args: Mapping[str, Any], record: Mapping[str, Any]) -> str:
    """What a recorded call came to, in a few words (`Tool.outcome`; the default for a tool this version
    does not know)."""
    tool = TOOLS.get(name)
    return (tool.outcome if tool is not None else default_outcome)(Call.from_record(record, args))


class Toolset:
    """The tools one agent offers its model: the built-in ones and any added at run time (an MCP
    server's tools, declared as `Tool`s like the rest)."""

    def __init__(self, extra: list[Tool] | tuple[Tool, ...] = ()):
        self.tools: dict[str, Tool] = dict(TOOLS)
        for tool in extra:
            if tool.name in self.tools:
                raise WorkstationError(f"tool {tool.name} is already defined")
            self.tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self.tools.values()]

    def call(self, ctx: ToolContext, name: str, arguments: dict[str, Any], call_id: str = "") -> ToolResult:
        return call(ctx, name, arguments, self.tools, call_id)


def call(ctx: ToolContext, name: str, arguments: dict[str, Any],
         available: Mapping[str, Tool] | None = None, call_id: str = "") -> ToolResult:
    """Run a tool (of `available`, default the built-in ones); see the module docstring. The call is
    resolved once (`invocation.resolve`); everything around its run reads that."""
    available = TOOLS if available is None else available
    tool = available.get(name)
    if tool is None:
        return ToolResult(f"error: unknown tool {name!r}; tools: {', '.join(available)}", ok=False)
    started = time.perf_counter()
    try:
        inspect.signature(tool.run).bind(None, **arguments)
    except TypeError as err:
        result = ToolResult(f"error: bad arguments for {name}: {err}", ok=False)
    else:  # one edit at a time: an agent's sub-agents share its lock (Services.write_lock)
        with ctx.services.write_lock if tool.effect == WRITE else contextlib.nullcontext():
            inv = resolve(ctx, tool, arguments, call_id)  # under the lock: no other edit moves a path meanwhile
            result = (_permitted(inv) or _env_guard(inv) or _checkpoint(inv)
                      or lspcheck.around(inv, lambda: _run_bounded(inv)))
    if tool.effect == WRITE and ctx.turn.lsp_batches:  # the last edit of a response's batch carries its check
        with ctx.services.write_lock:
            result = lspcheck.settle(ctx, call_id, result)
    result.data.setdefault("duration_ms", round((time.perf_counter() - started) * 1000, 3))
    return result


def _permitted(inv: Invocation) -> ToolResult | None:
    """The session's permission mode on this call (agent.modes.decide, the one place that decides): a
    refusal the model reads, a question to the user (an edit in `ask`), or None to go on. What a COMMAND
    tool does without asking in `auto` is its own to apply (it knows whether the sandbox holds it)."""
    permissions, tool = inv.services.permissions, inv.tool
    if permissions is None:
        return None
    verdict = permissions.decide(tool.effect, tool.name)
    if verdict.refused:
        return ToolResult(f"error: {verdict.reason}", ok=False, data={"outcome": "denied"})
    if verdict.asks:
        subject = activity_label(tool.name, logged_args(inv.args))
        refusal = ask(inv.services.approve, ApprovalRequest("edit", subject, verdict.reason, tool=tool.name,
                                                            detail=_written(inv.args)))
        if refusal is not None:
            return ToolResult(f"error: {refusal}", ok=False, data={"outcome": "denied"})
    return None


def _written(arguments: Mapping[str, Any], lines: int = 12) -> str:
    """The text an edit would write, its first `lines` lines (masked: it may hold a key), for the question."""
    text = next((v for k in ("content", "new") if isinstance(v := arguments.get(k), str)), "")
    shown = text.splitlines()
    more = f"\n… {len(shown) - lines} more lines" if len(shown) > lines else ""
    return scrub.mask("\n".join(shown[:lines])) + more


def _env_guard(inv: Invocation) -> ToolResult | None:
    """An .env-style file the user did not name is refused before anything is kept of it (a checkpoint
    would copy its values into the state folder). A refused path is the tool's to report."""
    for rel in inv.rels:
        try:
            inv.turn.open_env(rel)
        except WorkstationError as err:
            return ToolResult(f"error: {err}", ok=False)
    return None


def _checkpoint(inv: Invocation) -> ToolResult | None:
    """Keep what the paths a WRITE call changes hold before it runs (Services.checkpoint, given the paths as
    resolved); a failure to keep them stops the call, which then changes nothing."""
    if inv.tool.effect != WRITE or inv.services.checkpoint is None:
        return None
    try:
        inv.services.checkpoint(inv.rels)
    except (WorkstationError, OSError) as err:
        return ToolResult(f"error: no checkpoint could be kept, so nothing was changed: {err}", ok=False)
    return None


def _run(inv: Invocation) -> ToolResult:
    tool = inv.tool
    try:
        return tool.run(inv, **inv.args)
    except WorkstationError as err:
        return ToolResult(f"error: {err}", ok=False)
    except OSError as err:  # a write refused by the filesystem, a vanished directory...
        where = ""
        if err.filename:
            try:
                where = Path(err.filename).relative_to(inv.services.root).as_posix() + ": "
            except ValueError:
                where = f"{err.filename}: "
        return ToolResult(f"error: {where}{err.strerror or err}", ok=False)
    except RecursionError:
        return ToolResult(f"error: the arguments of {tool.name} are nested too deeply", ok=False)


_POLL_S = 0.05


def _run_bounded(inv: Invocation) -> ToolResult:
    """Run in a worker thread, waiting at most the tool's time limit and never past a stop.

    A tool that outlives its limit (a slow filesystem, a pathological input) is abandoned: its thread
    ends on its own later and its result is dropped. Changes a WRITE tool makes are each atomic, so an
    abandoned one leaves a file either as it was or as it would be."""
    tool, cancel = inv.tool, inv.turn.cancel
    if tool.time_limit_s is None and cancel is None:
        return _run(inv)
    box: list[ToolResult | BaseException] = []

    def work() -> None:
        try:
            box.append(_run(inv))
        except BaseException as err:  # a bug: raised again in the caller's thread, as if run there
            box.append(err)

    # in the caller's context: events the tool records belong to its call's operation (memory.episodic)
    worker = threading.Thread(target=contextvars.copy_context().run, args=(work,), daemon=True,
                              name=f"tool-{tool.name}")
    worker.start()
    deadline = None if tool.time_limit_s is None else time.monotonic() + tool.time_limit_s
    while True:
        worker.join(_POLL_S)
        if box:
            if isinstance(box[0], BaseException):
                raise box[0]
            return box[0]
        if cancel is not None and cancel.is_set() and tool.effect not in (COMMAND, DELEGATE):
            # (run_command watches the stop itself: it kills its process group and says so; a sub-agent stops)
            return ToolResult(f"error: {tool.name} stopped by the user", ok=False, data={"outcome": "cancelled"})
        if deadline is not None and time.monotonic() > deadline:
            return ToolResult(f"error: {tool.name} took longer than {tool.time_limit_s:g}s and was abandoned; "
                              "narrow the request", ok=False, data={"outcome": "timeout"})
