"""`workstation exec` (also `workstation -p TEXT`): one headless run whose output other programs read.

The run goes through the session host (workstation.host); workstation.headless turns its events into the
output format. See docs/usage.md ("Headless runs").
"""

from __future__ import annotations

import os
import sys
import threading

import click

from ..errors import WorkstationError
from ..terminal import safe
from .common import pass_workspace

# the exit code of each result subtype (workstation.headless); bad input is click's usage error (2)
EXIT = {"success": 0, "error_during_execution": 1, "error_max_turns": 3, "error_max_budget_usd": 4}
EXIT_HELP = ("Exit codes: 0 success; 1 an error during the run (the model, a hook that refused the prompt); "
             "2 bad input (an option's value, a session that does not exist, no prompt, no model); "
             "3 --max-turns reached; 4 --max-budget-usd reached; 130 interrupted.")
# agent.modes: ours, then Claude Code's names (kept here so that --help imports no agent stack; a test checks)
MODE_NAMES = ("ask", "edits", "plan", "auto", "default", "acceptEdits", "bypassPermissions")
STATES = {"ready": "connected", "starting": "pending", "failed": "failed", "stopped": "failed"}  # Claude Code's


@click.command("exec", epilog="Output in Claude Code's shapes: stream-json writes a system/init message, "
               "assistant messages (text, tool_use), user messages (tool_result) and a final result, one JSON "
               "object a line; json writes the result alone. " + EXIT_HELP)
@click.argument("text", required=False)
@click.option("--output-format", "fmt", type=click.Choice(["text", "json", "stream-json"]), default="text",
              show_default=True, help="text: the reply; json: the result object; stream-json: a message a line.")
@click.option("-c", "--continue", "cont", is_flag=True, help="Continue the workspace's latest session.")
@click.option("-r", "--resume", "slug", default=None, metavar="SLUG", help="Continue session SLUG.")
@click.option("--max-turns", type=click.IntRange(min=1, max=100_000), default=None,
              help="Stop after this many model calls (agent.max_steps for this run).")
@click.option("--max-budget-usd", type=float, default=None, metavar="USD",
              help="Stop before a request would make this run cost more than USD, as billed (sub-agents and "
                   "compactions included; agent.max_budget_usd still holds).")
@click.option("--allowed-tools", "--allowedTools", "allowed", multiple=True, metavar="TOOLS",
              help="Offer only these tools (our names or Claude Code's: Bash, Edit, Read...; comma or space "
                   "separated); a call to another is refused.")
@click.option("--disallowed-tools", "--disallowedTools", "disallowed", multiple=True, metavar="TOOLS",
              help="Never offer these tools (as --allowed-tools).")
@click.option("--permission-mode", "mode", type=click.Choice(MODE_NAMES), default=None,
              help="ask, edits, plan or auto (or Claude Code's names for them: default, acceptEdits, "
                   "bypassPermissions) for this run (agent.permission_mode). Nobody is asked: what would ask "
                   "is refused.")
@click.option("--include-partial-messages", "partial", is_flag=True,
              help="With stream-json: also stream_event lines (Anthropic's stream events: message_start, text "
                   "deltas, tool_use blocks, message_stop) as each answer of the model streams.")
@click.option("--model", "model", default=None, help="litellm model string for this run (as `workstation --model`).")
@click.option("--verbose", is_flag=True, help="Accepted for Claude Code's command lines (which need it with "
              "stream-json); every message is written anyway.")
@pass_workspace
def exec_command(ws, text: str | None, fmt: str, cont: bool, slug: str | None, max_turns: int | None,
                 max_budget_usd: float | None, allowed: tuple[str, ...], disallowed: tuple[str, ...],
                 mode: str | None, partial: bool, model: str | None, verbose: bool) -> None:
    """Run the agent on TEXT headlessly (TEXT `-` or none: standard input) and print what it did."""

    if partial and fmt != "stream-json":
        raise click.UsageError("--include-partial-messages needs --output-format stream-json")
    text = _prompt(text)
    if max_budget_usd is not None and not 0 < max_budget_usd < float("inf"):
        raise click.BadParameter("a positive number of dollars", param_hint="--max-budget-usd")
    if cont and slug:
        raise click.UsageError("--continue and --resume each name a session: use one")
    from ..headless import Restricted, tool_list  # lazy: the agent stack, not on --help

    try:
        allowed_names, disallowed_names = tool_list(allowed), tool_list(disallowed)
    except WorkstationError as err:
        raise click.UsageError(str(err)) from None
    run_ws = ws.with_model(model)
    session = _session(run_ws, cont, slug)
    overrides: dict = {}
    if max_turns is not None:
        overrides["agent"] = {"max_steps": max_turns}
    if mode is not None:
        from ..agent.modes import from_claude  # lazy: as above

        overrides.setdefault("agent", {})["permission_mode"] = from_claude(mode)
    flag_budget = None  # the run's own budget, when it is the one that holds (not a smaller configured one)
    if max_budget_usd is not None:
        limit, flag_binds = _budget(run_ws, session, max_budget_usd)
        overrides.setdefault("agent", {})["max_budget_usd"] = limit
        flag_budget = max_budget_usd if flag_binds else None
    if overrides:
        run_ws = run_ws.with_overrides(overrides)
    try:
        code = _hosted(run_ws, session, text, fmt, allowed_names, disallowed_names, keep=cont or bool(slug),
                       restricted=Restricted, budget=flag_budget, partial=partial)
    finally:
        if run_ws is not ws:
            run_ws.close()
    sys.exit(code)


def _hosted(ws, session, text: str, fmt: str, allowed: list[str], disallowed: list[str], *, keep: bool,
            restricted, budget: float | None, partial: bool = False) -> int:
    """The run under a host of its own (its MCP servers stop with it); the exit code."""
    from .. import host as host_mod  # lazy: the agent stack and the MCP SDK, ~300 ms
    from ..agent.loop import NO_MODEL  # lazy: the agent stack, loaded by the host above

    slash = text.strip().startswith("/")  # a built-in command runs here, without a model; a custom one is sent
    if not slash and ws.model_spec() is None:
        raise click.UsageError(NO_MODEL)  # before a session is made for nothing
    host = host_mod.Host.open(ws, exits_after_turn=True,
                              on_notice=lambda line: click.echo(safe(f"[{line}]"), err=True))
    try:
        toolset = host.toolset
        if allowed or disallowed:
            try:
                toolset = restricted(host.toolset, allowed, disallowed)
            except WorkstationError as err:
                raise click.UsageError(str(err)) from None
        if session is None:
            from ..sessions.log import Session  # lazy: as above

            session = Session.create(ws.paths, title=text[:60])
        hosted = host.session(session, approve=_nobody, toolset=toolset)
        try:
            if slash:
                from ..commands import slash as slash_mod  # lazy: as above

                slash = not slash_mod.is_custom(hosted.agent, text)
            if not slash and ws.model_spec() is None:
                raise click.UsageError(NO_MODEL)
            return _run(ws, hosted, text, fmt, slash=slash, budget=budget, partial=partial)
        finally:
            hosted.close(remove_if_empty=not keep)  # a slash command that said nothing leaves no session
    finally:
        host.close()


def _prompt(text: str | None) -> str:
    if text is None or text == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise click.UsageError("no prompt: give TEXT, or pipe it to standard input")
        text = sys.stdin.read()
    if not text.strip():
        raise click.UsageError("the prompt is empty")
    return text


def _session(ws, cont: bool, slug: str | None):
    """The session to continue (None: a new one, made once the run is sure to start)."""
    from ..sessions.log import Session, SessionError  # lazy: the sessions package

    if cont:
        from ..sessions.catalog import last_session  # lazy: as above

        last = last_session(ws.paths)
        if last is None:
            raise click.UsageError("--continue: this workspace has no session with a turn yet")
        return Session.open(ws.paths, last.slug)
    if slug is not None:
        try:
            return Session.open(ws.paths, slug)
        except SessionError as err:
            raise click.UsageError(f"--resume: {err}") from None
    return None


def _budget(ws, session, usd: float) -> tuple[float, bool]:
    """agent.max_budget_usd for a run that may spend `usd` (that budget counts a session's whole bill): what
    the session cost so far plus `usd`, never more than a configured budget allows; and whether `usd` is the
    budget that holds."""
    from ..costs.billing import bill  # lazy: as above

    spent = bill(session.read().records).total.cost_usd if session is not None else 0.0
    configured = ws.config.agent.max_budget_usd
    if configured and configured < spent + usd:
        return configured, False
    return spent + usd, True


def _nobody(request) -> bool:
    """Nobody to ask in a headless run: what needs approval is refused (agent.command_allow still runs)."""
    return False


def _turn(hosted, text: str, sink, *, stream: bool):
    """The turn on a thread of its own, so that Ctrl+C or SIGTERM stops it as Escape does in the app and the
    result is still written: (TurnFinished or None, why it was refused, the exit code of an interruption)."""
    from .. import host as host_mod  # lazy: loaded by the host already

    box: dict = {}
    done = threading.Event()  # not Thread.join: a join Ctrl+C interrupts may take the thread for ended

    def work() -> None:
        try:
            box["finished"] = host_mod.TurnFinished(hosted.run(text, sink, stream=stream))
        except WorkstationError as err:  # refused before it began (a hook, an empty message)
            box["refused"] = str(err)
        except BaseException as err:  # a bug: raised again on the main thread, with its traceback
            box["crash"] = err
        finally:
            done.set()

    worker = threading.Thread(target=work, name="headless-turn", daemon=True)
    worker.start()
    interrupted = None
    while not done.is_set():
        try:
            done.wait(0.2)
        except KeyboardInterrupt:
            interrupted = 130
            hosted.stop()
        except SystemExit as stop:  # SIGTERM (process.exit_on_sigterm)
            interrupted = stop.code if isinstance(stop.code, int) else 143
            hosted.stop()
    if "crash" in box:
        raise box["crash"]
    return box.get("finished"), box.get("refused", ""), interrupted


def _run(ws, hosted, text: str, fmt: str, *, slash: bool = False, budget: float | None = None,
         partial: bool = False) -> int:
    """The run (`slash`: a built-in slash command, /compact, /undo...), its output in `fmt` (`partial`: with
    stream events); the exit code."""
    from .. import host as host_mod  # lazy: loaded by the host already
    from ..headless import Stream, line  # lazy: the output's shapes, only once a run starts
    from ..mcp.client import servers_of  # lazy: the MCP SDK, loaded by the host already

    session = hosted.session
    before = len(session.read().records)
    toolset = hosted.agent.toolset
    catalog = hosted.agent.ctx.services.skills
    servers = servers_of(getattr(toolset, "base", toolset))
    stream = Stream(session_id=hosted.slug, model=hosted.agent.model_name, cwd=str(ws.root),
                    tools=list(toolset.tools), permission_mode=hosted.mode,
                    mcp_servers=[{"name": s.name, "status": STATES.get(s.state, s.state)} for s in servers],
                    slash_commands=sorted(catalog.commands) if catalog is not None else [],
                    skills=sorted(catalog.skills) if catalog is not None else [],
                    api_key_source=ws.config.model.api_key_env or "none", partial=partial)

    gone = threading.Event()  # the reader closed our standard output

    def out(text: str, nl: bool = True) -> None:
        if gone.is_set():
            return
        try:
            click.echo(text, nl=nl)
            sys.stdout.flush()
        except BrokenPipeError:  # nobody reads on: stop the run, say nothing more
            gone.set()
            hosted.stop()
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())

    def emit(message: dict) -> None:
        out(line(message))

    def sink(event) -> None:
        messages = stream.event(event)  # in every format: the result's permission denials name the calls' input
        if fmt == "stream-json":
            for message in messages:
                emit(message)
        elif fmt == "text" and isinstance(event, host_mod.TextFragment):
            out(safe(event.text), nl=False)
        elif fmt == "text" and isinstance(event, host_mod.Retry):
            click.echo(safe(f"\n[retrying: {event.why}]"), err=True)

    if fmt == "stream-json":
        emit(stream.init())
    if slash:
        from ..commands import slash as slash_mod  # lazy: as above

        said = slash_mod.run(hosted.agent, text)
        interrupted = None
        result = stream.result(None, session.read().records[before:], reply=said.text,
                               error="" if said.ok else said.text.splitlines()[0] if said.text else "failed")
        if fmt == "text":
            out(safe(said.text))
    else:
        finished, refused, interrupted = _turn(hosted, text, sink, stream=fmt == "text" or partial)
        result = stream.result(finished, session.read().records[before:], error=refused)
        if result["subtype"] == "error_max_budget_usd" and budget is not None:  # the loop names the config key
            result["errors"] = [f"stopped: the next request would take this run past --max-budget-usd "
                                f"${budget:g} (${result['total_cost_usd']:.4f} spent)"]
    if fmt != "text":
        emit(result)
    else:
        if not slash and result["result"]:
            out("")
        if result["is_error"]:
            click.echo(safe(f"error: {(result.get('errors') or [result['subtype']])[0]}"), err=True)
    if interrupted is not None:
        return interrupted
    if gone.is_set():
        return EXIT["error_during_execution"]
    return EXIT.get(result["subtype"], 1)


COMMANDS = [exec_command]
