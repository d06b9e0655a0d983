"""One tool call, run and recorded the same way by everyone who runs one: the agent loop (`run`, for a
call the model asked for), the MCP server (a client's call) and `replay --verify` (a past call run
again). `execute` is that one function; `record` writes its session record.

What `execute` does, in order:
- the call is the episodic operation whose tool_call event names `record_id`, the session record its
  result becomes (with no memory, as in verify, nothing is logged); its arguments are logged masked
  and clipped;
- the tool runs through `tools.call` (argument checks, the call resolved once into an `Invocation`, time
  limit, checkpoint, errors as results) in the caller's `ToolContext` (its services and turn), whose
  sandbox `Policy` is the one place that says what may be written
  (its `protected` field: `.git` in any spelling and the state folders; every WRITE tool confines its
  paths through it, and run_command runs under it);
- the result's text is masked (a file or an output may hold a configured key);
- the operation gets the outcome, and the events the tool's declared meaning implies (reads, edits,
  decisions: agent.tools) are recorded inside it, so the call is their parent. The meaning is read off
  the fields the session record keeps (`recorded`), through `sessions.derive.events`: what replay,
  `report` and the importer derive from a record, so live and recorded sessions agree.
A model's call is parsed once (`parse`, an `Asked`): running it, registering what it would write into an
.env file and batching its edit for the language server read that. Arguments that are not one JSON object
never reach a tool: the result asks for the call again.
What a call would write into an .env-style file is registered as secret before the call is even logged
(`register_env_writes`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ... import scrub
from ...llm import LLMError, ToolCall
from ...memory.episodic import TOOL_CALL
from .. import tools
from . import lspcheck
from .base import ARG_CLIP, ToolResult
from .invocation import ToolContext

if TYPE_CHECKING:
    from ...memory.router import Memory
    from ...sessions.log import Session
    from ...sessions.records import Record

log = logging.getLogger(__name__)


def execute(ctx: ToolContext, name: str, args: dict | None, *, available: "tools.Toolset | Mapping[str, tools.Tool]",
            memory: "Memory | None", call_id: str, record_id: str, problem: str = "", logged: dict | None = None,
            refused: ToolResult | None = None, contain: bool = False,
            on_activity: Callable[[str, str], None] | None = None,
            **op_fields: Any) -> tuple[ToolResult, tools.Meaning]:
    """Run the call `name(args)` of one of `available` and record it (see the module docstring).

    `args` None: malformed, `problem` says why; `logged`: the arguments as the log keeps them when not
    `tools.logged_args(args)`; `refused`: the result instead of running the tool (the caller's own
    refusal); `contain`: a tool's bug becomes a failed result (the trace goes to the log) instead of
    raising; `op_fields`: more fields of the tool_call event (`via`, `client`). Returns the result
    (masked) and what the call meant."""
    if logged is None:
        logged = tools.logged_args(args) if args is not None else {"raw": "(not logged: malformed)"}
    if on_activity:
        on_activity("tool", tools.activity_label(name, logged))
    if memory is None:
        return _run(ctx, name, args, available, call_id, problem, refused, contain)
    # an operation whose end event is the tool_call: a crash mid-tool leaves its op_start unpaired
    with memory.operation(TOOL_CALL, name, tool=name, args=logged, call_id=call_id, turn_id=record_id,
                          **op_fields) as op:
        result, meaning = _run(ctx, name, args, available, call_id, problem, refused, contain)
        op.set(ok=result.ok, result_chars=len(result.text), outcome=result.data.get("outcome")
               or ("ok" if result.ok else "error"), error=None if result.ok else result.text[:300])
        for kind, what, fields in tools.events(meaning, live=True):  # inside the operation: parent = call
            memory.record(kind, what, **fields)
    return result, meaning


def _run(ctx: ToolContext, name: str, args: dict | None, available: "tools.Toolset | Mapping[str, tools.Tool]",
         call_id: str, problem: str, refused: ToolResult | None, contain: bool) -> tuple[ToolResult, tools.Meaning]:
    if refused is not None:
        result = refused
    elif args is None:
        result = ToolResult(f"error: {problem or 'the arguments are not one JSON object'}; send the call again "
                            "with one valid JSON object as arguments", ok=False, data={"outcome": "malformed"})
    else:
        ctx.turn.call_id = call_id  # what an approval asked from now on is about
        try:
            # a Toolset's own call: a sub-agent's refuses what it may not do (agent/subagent.py)
            result = (available.call(ctx, name, args, call_id) if isinstance(available, tools.Toolset)
                      else tools.call(ctx, name, args, available, call_id))
        except Exception as err:
            if not contain:
                raise
            log.exception("%s failed", name)  # a tool's bug: the caller gets one line, the operation its error
            result = ToolResult(f"error: {name} failed: {type(err).__name__}: {scrub.redact(str(err))[:200]}",
                                ok=False, data={"outcome": "error"})
    result.text = scrub.mask(result.text)  # a file or an output may hold a configured key
    tool = available.get(name)
    # what it meant, from the fields its session record keeps: the derivation replay and `report` make
    # of that record, so the live events and theirs cannot differ
    meaning = (tool.meaning(tools.Call(name, args, result.ok, result.text, recorded(result)))
               if args is not None and refused is None and tool is not None else tools.Meaning())
    return result, meaning


def recorded(result: ToolResult) -> dict[str, Any]:
    """The fields of a result its session record keeps (`tools.RECORDED_FIELDS`, those set)."""
    return {k: result.data[k] for k in tools.RECORDED_FIELDS if result.data.get(k) is not None}


def record(session: "Session", call_id: str, name: str, result: ToolResult, record_id: str, **extra: Any
           ) -> "Record":
    """The session log's tool record of a call `execute` ran: its result and `recorded` fields."""
    return session.tool(call_id, name, result.text, id=record_id, ok=result.ok, **recorded(result), **extra)


@dataclass(frozen=True)
class Asked:
    """A tool call the model asked for, its arguments parsed once (`parse`): what running it, registering
    the secrets it would write and batching its edit for the language server all read."""

    call: ToolCall
    args: dict[str, Any] | None  # None: malformed
    problem: str = ""  # why it is malformed

    @property
    def name(self) -> str:
        return self.call.name


def parse(call: ToolCall) -> Asked:
    try:
        return Asked(call, call.parsed_arguments())
    except LLMError as err:
        return Asked(call, None, str(err))


def run(toolset: tools.Toolset, ctx: ToolContext, memory: "Memory", call_id: str, asked: Asked, record_id: str,
        on_activity: Callable[[str, str], None] | None = None,
        before: Callable[[str, dict[str, Any]], ToolResult | None] | None = None
        ) -> tuple[dict[str, Any] | None, ToolResult, tools.Meaning]:
    """`execute` for a call the agent's model asked for. Returns its parsed arguments (None: malformed),
    result and meaning. `before(name, args)` may refuse a well-formed call (the PreToolUse hooks: its result
    stands instead of running the tool)."""
    args, call = asked.args, asked.call
    logged = None if args is not None else {"raw": scrub.mask(call.arguments[:ARG_CLIP + 512])[:ARG_CLIP]}
    refused = before(call.name, args) if before is not None and args is not None else None
    result, meaning = execute(ctx, call.name, args, available=toolset, memory=memory, call_id=call_id,
                              record_id=record_id, problem=asked.problem, logged=logged, on_activity=on_activity,
                              refused=refused)
    return args, result, meaning


def register_env_writes(asked: Asked) -> None:
    """What a call would write into an .env-style file is a secret before the call is even logged."""
    args = asked.args
    if args is None:  # malformed: the call fails and is logged masked like any other
        return
    if any(isinstance(args.get(k), str) and scrub.is_env_file(args[k]) for k in ("path", "dst")):
        for key in ("content", "old", "new"):
            if isinstance(args.get(key), str):
                scrub.register_env_values(args[key])


def batches(toolset: tools.Toolset, ids: list[str], asked: list[Asked]) -> dict[str, lspcheck.Batch]:
    """The edits among a response's calls that the language server checks as one, by call id
    (tools.lspcheck.batches); `ids`: the calls' ids as recorded."""
    return lspcheck.batches((i, toolset.get(a.name), a.args) for i, a in zip(ids, asked))
