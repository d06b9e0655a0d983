"""Slash commands: the user calls the agent's tools directly in the chat. None needs a model
except /compact, /archive's summary and /commit's message when none is given (which say so when
there is none).

Tool results shown to the user are not turns of the conversation: the model
does not see them, and a file the user /read is not a file the model has read
(slash commands keep their own read ledger, so replace_lines still requires
the model's own read).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from .. import scrub
from ..agent.checkpoints import fork
from ..agent.commit import commit_session, describe
from ..agent.instructions import NAMES, USER_FILE
from ..agent.tools import call as call_tool, render_rows
from ..errors import WorkstationError
from ..memory import reflect
from ..memory.episodic import TOOL_CALL
from ..memory.ltm import parse_value
from ..sessions.archive import archive
from ..sessions.compaction import compact_now, describe_replaced, uncompact
from ..sessions.modelview import seen
from ..sessions.frontier import frontier
from ..sessions.plan import current, progress, render
from ..sessions.recall import recall

if TYPE_CHECKING:
    from ..agent.loop import Agent
    from ..config import Config

HELP = {
    "/map [FILE [TOKENS]]": "knowledge map of a file (within TOKENS), or the ranked repository map",
    "/read FILE A-B": "lines A..B of a file (1-indexed, inclusive)",
    "/impact NAME": "call sites and references of a symbol",
    "/find QUERY": "files and symbols by name or path",
    "/grep PATTERN [PATH]": "regex search over the workspace (or under PATH)",
    "/qmem TIER KEY": "read memory (stm, ltm, episodic)",
    "/umem TIER KEY VALUE": "write memory (VALUE is JSON, or a bare string; stm or ltm)",
    "/fence TIER": "make earlier writes of a tier durable and visible",
    "/decisions": "the decision log",
    "/pin TEXT": "an instruction re-injected into every later context, compactions included",
    "/reflect [NAME]": "a reflection query over this session's history (no NAME: list them)",
    "/compact [KEEP] [FOCUS]": "summarize all but the newest KEEP turns now (default memory.keep_recent); FOCUS: "
                               "what to keep in detail (/compact 10 retry logic, or keep=10)",
    "/uncompact": "undo the last compaction: the model sees its turns again as before it (automatic compaction "
                  "then waits until the request would not fit the window)",
    "/frontier": "where the work stands, from the log: the user's words, plan, decisions, files, last failure",
    "/recall N|ID": "turn N whole from the log (one a compaction replaced, too), or the record ID in full",
    "/archive": "summarize this session and move it to the archive; a new session starts",
    "/undo": "restore the files the last turn that changed any changed (refused if someone else changed one since)",
    "/rewind N [files|conversation|both]": "back to before user turn N (default both; the log keeps every line)",
    "/fork [N]": "a new session with this conversation (up to before user turn N); the files stay as they are",
    "/diff [FILE]": "what this session changed in the files, net",
    "/new": "start a new session (this one stays as it is; /clear does the same)",
    "/clear": "the same as /new",
    "/model [NAME]": "show or switch the model",
    "/commit [MESSAGE]": "commit the files this session changed (the model writes MESSAGE if none); never pushes",
    "/instructions": "the project instructions in effect (AGENTS.md, CLAUDE.md, .workstation/instructions.md)",
    "/plan": "the agent's plan (its todo list) as it last wrote it",
    "/hooks": "the hooks in force (workstation.hooks): event, matcher, command, time limit and file",
    "/help": "this list",
}
COMMANDS = tuple(usage.split()[0] for usage in HELP)


@dataclass
class SlashResult:
    text: str
    ok: bool = True
    # what a UI must do besides showing the text: 'archived' and 'new' (move to a new session), 'fork' (move to
    # the session `slug`), 'model', 'pinned', 'committed' (refresh the git status), 'files' (files changed:
    # /undo, /rewind), 'rewound' (and the conversation the model sees)
    action: str | None = None
    slug: str | None = None
    record: dict | None = None  # the `command` record `run` kept of it (None: the session was archived)


def parse_range(spec: str) -> tuple[int, int]:
    try:
        first, sep, last = spec.partition("-")
        start = int(first)
        return start, int(last) if sep else start
    except ValueError:
        raise WorkstationError(f"bad line range {spec!r}: use A-B, e.g. 10-40") from None


def is_command(line: str) -> bool:
    return line.strip().split(" ", 1)[0] in COMMANDS


def run(agent, line: str, *, set_model: Callable[[str], None] | None = None) -> SlashResult:
    """Run one slash command line for an Agent (no model needed), and keep it and its answer in the
    session's log (a `command` record, never shown to the model) so a resumed chat shows them too; an
    archived session is gone from where the log was. The record names the first record the command
    wrote itself (`wrote_from`: an undo's note to the model), which a chat shows after the command's lines."""
    idle = not agent.running  # else a turn writes beside the command: what it wrote is not the command's
    before = len(agent.session.read().records) if idle else 0
    out = _run(agent, line, set_model)
    if out.action != "archived":
        wrote = agent.session.read().records[before:] if idle else []
        out.record = keep(agent.session, line, out, wrote_from=wrote[0]["id"] if wrote else None)
    return out


def is_custom(agent, line: str) -> bool:
    """A custom command's line (workstation.skills): it is sent as a message (Agent.run expands it), not run
    here. A built-in command of the same name wins."""
    name = line.strip().partition(" ")[0]
    return name not in _HANDLERS and agent.expand_command(line) is not None


def custom_help(catalog) -> list[tuple[str, str]]:
    """(usage, description) of each custom command of a `skills.Catalog` (None: none), for /help, the palette
    and ACP."""
    if catalog is None:
        return []
    return [(f"/{c.name}" + (f" {c.argument_hint}" if c.argument_hint else ""), c.description or "custom command")
            for c in catalog.commands.values() if f"/{c.name}" not in _HANDLERS]


def keep(session, line: str, out: SlashResult, **fields) -> dict:
    """The `command` record of a slash command line and its answer, appended to `session` (the one it ran
    in, or the one it moved the chat to: /new, /fork)."""
    fields = {k: v for k, v in fields.items() if v is not None}
    return session.append("command", line=line.strip(), content=out.text, ok=out.ok, **fields)


def _run(agent, line: str, set_model: Callable[[str], None] | None) -> SlashResult:
    name, _, rest = line.strip().partition(" ")
    rest = rest.strip()
    try:
        handler = _HANDLERS.get(name)
        if handler is None:
            return SlashResult(f"unknown command {name}; /help lists them", ok=False)
        result = handler(agent, rest)
        if name == "/model" and result.action == "model" and set_model is not None:
            set_model(agent.model_name)
        return result
    except WorkstationError as err:
        return SlashResult(f"error: {err}", ok=False)


def _tool(agent: Agent, tool_name: str, **args) -> SlashResult:
    result = call_tool(agent.user_ctx, tool_name, args)
    data = result.data
    agent.memory.record(TOOL_CALL, tool_name, ok=result.ok, duration_ms=data.get("duration_ms"), tool=tool_name,
                        args=scrub.mask_data({k: v for k, v in args.items() if k != "content"}),
                        result_chars=len(result.text),
                        outcome="ok" if result.ok else "error", error=None if result.ok else result.text[:300],
                        via="slash")
    return SlashResult(result.text, result.ok)


def _need(value: str, usage: str) -> str:
    if not value:
        raise WorkstationError(f"usage: {usage}")
    return value


def _words(text: str, n: int, usage: str) -> list[str]:
    parts = text.split(None, n - 1)
    if len(parts) != n:
        raise WorkstationError(f"usage: {usage}")
    return parts


def _help(agent: Agent, rest: str) -> SlashResult:
    width = max(map(len, HELP))
    # the MCP servers the agent was given (workstation.mcp.client.McpToolset), their state and tools
    mcp: list[str] = getattr(agent.toolset, "help_lines", list)()
    custom = [f"{usage:<{width}}  {text}" for usage, text in custom_help(agent.ctx.services.skills)]
    return SlashResult("\n".join([f"{usage:<{width}}  {text}" for usage, text in HELP.items()]
                                 + (["", *mcp] if mcp else []) + (["", "custom commands:", *custom] if custom else [])))


def _map(agent: Agent, rest: str) -> SlashResult:
    """`/map FILE 4000`: a budget after the file shows the symbols a smaller map leaves as '(+N more)'."""
    if rest:
        path, _, budget = rest.rpartition(" ")
        if path and budget.lstrip("-").isdigit():  # the tool checks the budget's range
            return _tool(agent, "file_meta", path=path, tokens=int(budget))
        return _tool(agent, "file_meta", path=rest)
    return SlashResult(agent.kmap.repo_map(tokens=1024))


def _read(agent: Agent, rest: str) -> SlashResult:
    path, span = _words(rest, 2, "/read FILE A-B")
    start, end = parse_range(span)
    return _tool(agent, "read_lines", path=path, start=start, end=end)


def _grep(agent: Agent, rest: str) -> SlashResult:
    """The last word is the PATH when it names a file or folder of the workspace (`/grep TODO src`)."""
    pattern = _need(rest, "/grep PATTERN [PATH]")
    parts = pattern.rsplit(" ", 1)
    if len(parts) == 2 and parts[0].strip() and (agent.ws.root / parts[1]).exists():
        return _tool(agent, "grep", pattern=parts[0].rstrip(), path=parts[1])
    return _tool(agent, "grep", pattern=pattern)


def _umem(agent: Agent, rest: str) -> SlashResult:
    tier, key, raw = _words(rest, 3, "/umem TIER KEY VALUE")
    value = parse_value(raw, bare_word=True)  # a bare word is a string value
    return _tool(agent, "umem", tier=tier, key=key, value=value)


def _pin(agent: Agent, rest: str) -> SlashResult:
    agent.pin(_need(rest, "/pin TEXT"))
    return SlashResult(f"pinned: {scrub.mask(rest)}", action="pinned")  # as kept: never a key on screen


def _reflect(agent: Agent, rest: str) -> SlashResult:
    if not rest:
        return SlashResult("\n".join(f"{n:<20} {d}" for n, d in reflect.names()))
    rows = agent.memory.reflect(rest, session=agent.session.slug).records()
    return SlashResult(render_rows(rows))


def _compaction_config(agent: Agent) -> Config:
    cfg = agent.compaction_config()
    if cfg is None:
        raise WorkstationError("compaction needs a model: set memory.compact_model or a chat model (/model NAME)")
    return cfg


def parse_compact(rest: str, default_keep: int) -> tuple[int, str]:
    """(keep, focus) of `/compact [KEEP] [FOCUS]`: KEEP is a leading number or a `keep=N` word anywhere."""
    words = rest.split()
    keep = default_keep
    given = [w for w in words if w.lower().startswith("keep=")]
    if len(given) > 1:
        raise WorkstationError("usage: /compact [KEEP] [FOCUS]: keep= given twice")
    if given:
        words.remove(given[0])
        value = given[0][5:]
        if not value.isdigit():
            raise WorkstationError(f"usage: /compact [KEEP] [FOCUS]: keep={value} is not a number of turns")
        keep = int(value)
    elif words and words[0].isdigit():
        keep = int(words.pop(0))
    return keep, " ".join(words)


def _compact(agent: Agent, rest: str) -> SlashResult:
    keep, focus = parse_compact(rest, agent.config.memory.keep_recent)
    if refused := agent.refused_compaction("manual", focus):
        return SlashResult(f"not compacted: a PreCompact hook refused: {refused}", ok=False)
    outcome = compact_now(agent.session, _compaction_config(agent), agent.memory.episodic, keep=keep, focus=focus,
                          conversation=agent.conversation)
    if outcome.ok:
        agent.compacted("manual", outcome.record)
    if outcome.ok and outcome.record is not None:  # what the model sees instead of those turns from now on
        return SlashResult(f"{outcome.describe()}; the model sees this summary instead of them:\n\n"
                           f"{outcome.record.get('summary', '')}")
    return SlashResult(outcome.describe(), outcome.ok or outcome.status == "nothing")


def _uncompact(agent: Agent, rest: str) -> SlashResult:
    if rest:
        raise WorkstationError("usage: /uncompact (no arguments: undoes the compaction in force)")
    agent.require_idle("/uncompact")
    record = uncompact(agent.session)
    first, last = record.turns or (0, 0)
    span = f"turn {last}" if first == last else f"turns {first}–{last}"
    return SlashResult(f"undid the compaction of {span}: the model sees them again as it did before it, and the next "
                       f"request continues the last one sent before it (a warm prompt cache still serves it); "
                       f"{record.held} (/compact still runs when asked)", action="rewound")


def _frontier(agent: Agent, rest: str) -> SlashResult:
    if rest:
        raise WorkstationError("usage: /frontier (no arguments)")
    view = agent.session.read()
    text = frontier(view, counter=agent.session.counter).render()
    compact = seen(view).last_compact()
    if compact is not None and compact.replaced:
        text += f"\n### The newest compaction replaced\n{describe_replaced(compact.replaced)} (/recall N shows one)"
    return SlashResult(text)


def _recall(agent: Agent, rest: str) -> SlashResult:
    if not rest.strip() or len(rest.split()) > 1:
        raise WorkstationError("usage: /recall N (a turn's number) or /recall ID (a record's id)")
    return SlashResult(recall(agent.session, rest))


def _commit(agent: Agent, rest: str) -> SlashResult:
    agent.ctx.services.reindex()
    commit = commit_session(agent.ws, agent.session, rest or None, model=agent.model_name)
    return SlashResult(describe(commit), action="committed")


def _instructions(agent: Agent, rest: str) -> SlashResult:
    found = agent.instructions_in_effect()
    if not found:
        return SlashResult(f"no project instructions: no {', '.join(NAMES)} at the root or in the folders worked "
                           f"on, and no {USER_FILE}")
    out = []
    for item in found:
        notes = [f"{item.chars:,} chars"] + (["cut"] if item.cut else []) + \
            ([] if item.shown else ["not shown to the model: over the budget for instructions"])
        out += [f"--- {item.path} ({', '.join(notes)}) ---", item.text, ""]
    return SlashResult("\n".join(out).rstrip())


def _hooks(agent, rest: str) -> SlashResult:
    lines = agent.hooks.describe()
    if not lines:
        return SlashResult("no hooks in force (they are read from hooks.json in your config home, the workspace's "
                           ".workstation/hooks.json once it is trusted, and Claude Code's settings with "
                           "hooks.claude = true)")
    return SlashResult("\n".join(["hooks in force:", *lines]))


def _plan(agent, rest: str) -> SlashResult:
    todo = current(seen(agent.session.read()).records)  # a rewound turn's plan is not the plan in force
    if todo is None:
        return SlashResult("no plan yet: the agent writes one with its todo tool")
    return SlashResult(f"plan ({progress(todo)}):\n{render(todo)}" if todo else "plan: (cleared)")


def _archive(agent: Agent, rest: str) -> SlashResult:
    cfg = agent.compaction_config() or agent.config  # no model: archived without a fresh summary
    result = archive(agent.ws.paths, agent.session.slug, cfg, episodic=agent.memory.episodic)
    text = f"archived {agent.session.slug}"
    if result.compaction is not None and not result.compaction.ok:
        text += f" (without a fresh summary: {result.compaction.reason})"
    return SlashResult(text, action="archived")


def _new(agent: Agent, rest: str) -> SlashResult:
    if rest:
        raise WorkstationError("usage: /new (or /clear): no arguments")
    return SlashResult(f"session {agent.session.slug} stays as it is; a new session starts", action="new")


def _undo(agent: Agent, rest: str) -> SlashResult:
    if rest:
        raise WorkstationError("usage: /undo (no arguments; /rewind N goes further back)")
    return _restored(agent.undo())


_REWIND_WHAT = {"files": (True, False), "conversation": (False, True), "both": (True, True)}


def _rewind(agent: Agent, rest: str) -> SlashResult:
    usage = "usage: /rewind N [files|conversation|both] (N: a user turn number, 1 is the first)"
    parts = rest.split()
    if not parts or len(parts) > 2 or not parts[0].isdigit() or (len(parts) == 2 and parts[1] not in _REWIND_WHAT):
        raise WorkstationError(usage)
    files, conversation = _REWIND_WHAT[parts[1] if len(parts) == 2 else "both"]
    return _restored(agent.rewind(int(parts[0]), files=files, conversation=conversation))


def _restored(done) -> SlashResult:
    return SlashResult(done.describe(), action="rewound" if done.conversation else "files")


def _fork(agent: Agent, rest: str) -> SlashResult:
    if rest and not rest.isdigit():
        raise WorkstationError("usage: /fork [N] (N: fork before user turn N; none: the whole conversation)")
    new = fork(agent.ws.paths, agent.session, int(rest) if rest else None)
    return SlashResult(f"forked {agent.session.slug} into {new.slug}", action="fork", slug=new.slug)


def _diff(agent: Agent, rest: str) -> SlashResult:
    changes = agent.checkpoints.diff(rest or None)
    if not changes:
        return SlashResult("no net change: the files this session touched are as they were")
    return SlashResult(render_diff(changes))


def render_diff(changes: list[dict]) -> str:
    """/diff and `session diff`: one header line per file, then its diff."""
    out = []
    for c in changes:
        note = "; changed outside the agent since its last edit" if c.get("changed_outside") else ""
        out.append(f"{c['path']}: +{c['added']} -{c['removed']}{note}")
        out.append(c["diff"].rstrip("\n"))
    return "\n".join(out)


def _model(agent: Agent, rest: str) -> SlashResult:
    if not rest:
        if not agent.model_name:
            return SlashResult("model: none configured (/model NAME, e.g. /model openai/gpt-4o-mini)")
        window = agent.configured_window()
        return SlashResult(f"model: {agent.model_name}" + (f" (context window {window:,} tokens)" if window else ""))
    agent.set_model(rest)
    return SlashResult(f"model set to {agent.model_name}", action="model")


_HANDLERS: dict[str, Callable[[Agent, str], SlashResult]] = {
    "/help": _help,
    "/map": _map,
    "/read": _read,
    "/impact": lambda agent, rest: _tool(agent, "impact", symbol=_need(rest, "/impact NAME")),
    "/find": lambda agent, rest: _tool(agent, "find", query=_need(rest, "/find QUERY")),
    "/grep": _grep,
    "/qmem": lambda agent, rest: _tool(agent, "qmem", **dict(zip(("tier", "key"), _words(rest, 2, "/qmem TIER KEY")))),
    "/umem": _umem,
    "/fence": lambda agent, rest: _tool(agent, "fence", tier=_need(rest, "/fence TIER")),
    "/decisions": lambda agent, rest: _tool(agent, "decisions"),
    "/pin": _pin,
    "/reflect": _reflect,
    "/compact": _compact,
    "/uncompact": _uncompact,
    "/frontier": _frontier,
    "/recall": _recall,
    "/archive": _archive,
    "/undo": _undo,
    "/rewind": _rewind,
    "/fork": _fork,
    "/diff": _diff,
    "/new": _new,
    "/clear": _new,
    "/model": _model,
    "/commit": _commit,
    "/instructions": _instructions,
    "/plan": _plan,
    "/hooks": _hooks,
}
assert set(_HANDLERS) == set(COMMANDS)
