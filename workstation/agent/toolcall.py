"""One tool call the model asked for, run as an episodic operation (agent.loop calls it for each call of
a step; the loop writes the result to the session log and tells the UI).

Arguments that are not one JSON object become an error result asking for the call again. The episodic
log gets the call's arguments masked and clipped, its outcome, and the events its tool's declared meaning
implies (reads, edits, decisions: agent.tools) inside the operation, so the call is their parent. A
result's text is masked (a file or an output may hold a configured key). What a call would write into an
.env-style file is registered as secret before the call is even logged.
"""

from __future__ import annotations

from typing import Callable

from .. import scrub
from ..llm import LLMError
from ..memory.episodic import TOOL_CALL
from ..memory.router import Memory
from . import tools
from .tools import ToolContext, ToolResult
from .tools.base import ARG_CLIP

def run(toolset: tools.Toolset, ctx: ToolContext, memory: Memory, call_id: str, call, record_id: str,
        on_activity: Callable[[str, str], None] | None = None) -> tuple[dict | None, ToolResult, tools.Meaning]:
    """Run `call` (an llm tool call) as the episodic operation whose tool_call event names `record_id`, the
    session record its result becomes. Returns its parsed arguments (None: malformed), result and meaning."""
    problem = ""  # why the arguments are malformed
    try:
        args: dict | None = call.parsed_arguments()
    except LLMError as err:
        args, problem = None, str(err)
    logged_args = tools.logged_args(args) if args is not None else {"raw": scrub.mask(call.arguments[:ARG_CLIP + 512])[:ARG_CLIP]}
    if on_activity:
        on_activity("tool", tools.activity_label(call.name, logged_args))
    # an operation whose end event is the tool_call: a crash mid-tool leaves its op_start unpaired
    with memory.operation(TOOL_CALL, call.name, tool=call.name, args=logged_args, call_id=call_id,
                          turn_id=record_id) as op:
        if args is None:
            result = ToolResult(f"error: {problem}; send the call again with one valid JSON object as arguments",
                                ok=False, data={"outcome": "malformed"})
        else:
            ctx.call_id = call_id
            result = toolset.call(ctx, call.name, args)
        result.text = scrub.mask(result.text)  # a file or an output may hold a configured key
        op.set(ok=result.ok, result_chars=len(result.text), outcome=result.data.get("outcome")
               or ("ok" if result.ok else "error"), error=None if result.ok else result.text[:300])
        tool = toolset.get(call.name)
        meaning = (tool.meaning(tools.Call(call.name, args, result.ok, result.text, result.data))
                   if args is not None and tool is not None else tools.Meaning())
        for kind, name, fields in tools.events(meaning, live=True):  # inside the operation: parent = call
            memory.record(kind, name, **fields)
    return args, result, meaning


def register_env_writes(call) -> None:
    """What a call would write into an .env-style file is a secret before the call is even logged."""
    if call.oversized or ".env" not in (call.arguments or ""):
        return
    try:
        args = call.parsed_arguments()
    except Exception:  # malformed: the call fails and is logged masked like any other
        return
    if any(isinstance(args.get(k), str) and scrub.is_env_file(args[k]) for k in ("path", "dst")):
        for key in ("content", "old", "new"):
            if isinstance(args.get(key), str):
                scrub.register_env_values(args[key])


def batches(toolset: tools.Toolset, ids: list[str], calls: list) -> dict:
    """The edits among a response's calls that the language server checks as one, by call id
    (tools.lspcheck.batches); `ids`: the calls' ids as recorded."""
    def parsed(call) -> dict | None:
        try:
            return call.parsed_arguments()
        except LLMError:
            return None  # malformed: it never runs

    return tools.lspcheck.batches((i, toolset.get(c.name), parsed(c)) for i, c in zip(ids, calls))
