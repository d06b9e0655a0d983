"""Agent commands: `workstation chat` (one headless agent turn, for scripts) and `workstation report`."""

from __future__ import annotations

import sys

import click

from ..errors import WorkstationError
from ..terminal import safe
from .common import json_option, pass_workspace, print_json, print_table


@click.command()
@click.argument("task")
@click.option("--session", "slug", default=None, help="Continue this session (default: a new one).")
@click.option("--model", "model", default=None, help="litellm model string for this turn (as `workstation --model`).")
@click.option("--yes", "approve_all", is_flag=True,
              help="Approve every command the agent asks to run (otherwise asked on a terminal, refused without).")
@json_option
@pass_workspace
def chat(ws, task: str, slug: str | None, model: str | None, approve_all: bool, as_json: bool) -> None:
    """Run one agent turn on TASK headlessly and print the reply; TASK may also be a slash command."""
    from ..commands import slash  # lazy: the agent stack (litellm's client, ~100 ms), not on --help or index
    from ..agent.loop import NO_MODEL, NoModel  # lazy: the agent stack, as above
    from ..sessions.log import Session  # lazy: the sessions package, ~20 ms on index

    is_slash = task.strip().startswith("/")  # a custom command is sent as a message (below)
    with ws.with_model(model) as ws:
        if not is_slash and ws.model_spec() is None:
            raise NoModel(NO_MODEL)  # before a session is created for nothing
        session = Session.open(ws.paths, slug) if slug else Session.create(ws.paths, title=task[:60])

        def approve(request) -> bool:  # an agent.approval.ApprovalRequest
            if approve_all:
                return True
            if sys.stdin.isatty() and sys.stderr.isatty():
                verb = "run" if request.action == "command" else "call"
                return click.confirm(f"{verb} `{request.subject}`? ({request.reason})", default=False, err=True)
            return False  # nobody to ask

        from .. import host as host_mod  # lazy: the agent stack and the MCP SDK, ~300 ms

        # one process per turn: its compactions run before the request, never in a thread the exit would stop
        host = host_mod.Host.open(ws, exits_after_turn=True,
                                  on_notice=lambda line: click.echo(safe(f"[{line}]"), err=True))
        try:
            hosted = host.session(session, approve=approve)
        except BaseException:
            host.close()
            raise
        try:
            if is_slash and slash.is_custom(hosted.agent, task):
                if ws.model_spec() is None:
                    raise NoModel(NO_MODEL)
                is_slash = False
            if is_slash:
                out = slash.run(hosted.agent, task)
                if as_json:
                    print_json({"session": session.slug, "text": out.text, "ok": out.ok})
                else:
                    click.echo(safe(out.text))
                if not out.ok:
                    sys.exit(1)
                return
            result = hosted.run(task, None if as_json else _printed, stream=not as_json)
        finally:
            hosted.close(remove_if_empty=not slug)  # a slash command said nothing worth a session
            host.close()  # the MCP servers it started stop with it
    if as_json:
        print_json({"session": result.session, "text": result.text, "steps": result.steps,
                    "tool_calls": result.tool_calls, "tokens_in": result.tokens_in, "tokens_out": result.tokens_out,
                    "context_tokens": result.context_tokens, "trimmed": result.trimmed, "error": result.error})
        if result.error:
            sys.exit(1)
        return
    click.echo()
    click.echo(f"[session {result.session}: {result.steps} model calls, {result.tool_calls} tool calls]", err=True)
    if result.error:
        raise WorkstationError(result.error)


def _printed(event) -> None:
    """What `chat` shows of a turn as it runs (a host.Event): the reply on stdout, the rest on stderr."""
    from .. import host  # lazy: loaded by the turn already
    from ..sessions import plan as plan_mod  # lazy: as above

    if isinstance(event, host.TextFragment):
        click.echo(safe(event.text), nl=False)
    elif isinstance(event, host.Retry):
        click.echo(safe(f"\n[retrying: {event.why}]"), err=True)
    elif isinstance(event, host.ToolFinished):
        res = event.result
        click.echo(safe(f"[{event.name} {'ok' if res.ok else 'failed'}: {(res.text.splitlines() or [''])[0][:100]}]"),
                   err=True)
    elif isinstance(event, host.Notice):
        click.echo(safe(f"[{event.line}]"), err=True)
    elif isinstance(event, host.Plan):
        click.echo(safe(f"[plan ({plan_mod.progress(event.items)}):\n{plan_mod.render(event.items)}]"), err=True)


@click.command()
@click.argument("session")
@json_option
@pass_workspace
def report(ws, session: str, as_json: bool) -> None:
    """Efficiency report of SESSION (a slug, or a session .jsonl file) beside a naive baseline replay."""
    from ..agent import tools  # lazy: the agent stack, ~100 ms
    from ..agent.loop import base_tokens  # lazy: as above
    from ..costs import report as report_mod  # lazy: as above

    rep = report_mod.build(ws.paths, session, tools.meaning_of, base_tokens)
    if as_json:
        print_json(rep.to_dict())
        return
    print_table(rep.rows(), title=f"session {rep.session}: memory agent vs naive baseline")
    click.echo("naive: the same steps with a full-file read at every file_meta/read_lines and the whole raw history "
               "in every request (no memory, no compaction, no redaction); naive*: the same, re-reading a file only "
               "after it changed. Method: workstation/costs/report.py")
    if rep.subagent_line():
        click.echo(rep.subagent_line())
    if rep.billing is not None:
        bill = rep.billing
        click.echo()
        print_table(bill.rows(), title=f"billed with an ideal prefix cache, in {bill.unit}")
        for line in [bill.priced_by, *bill.lines()]:
            click.echo(line)
        click.echo("An ideal prefix cache serves what an earlier request sent before; naive and naive* are "
                   "append-only. Method: workstation/costs/billed.py")


@click.command("sandbox")
@json_option
@pass_workspace
def sandbox_command(ws, as_json: bool) -> None:
    """Which sandbox the agent's commands run in here, and what it enforces (checked by a probe run)."""
    from ..sandbox import Policy, status  # lazy: the sandbox, loaded with the config, not by --help
    from ..sandbox.protect import AFTER_NOTE  # lazy: as above

    policy = Policy.for_workspace(ws.paths, ws.config.agent, ws.config.model.api_key_env)
    found = status(policy)
    if as_json:
        print_json({"backend": found.backend, "full": found.full, "line": found.line, "mode": policy.mode,
                    "network": policy.network, "root": str(policy.root),
                    "hidden": [str(p) for p in (*policy.state, *policy.hide)], "detail": found.detail,
                    "put_back": None if found.full else AFTER_NOTE})
        return
    click.echo(found.line)
    if not found.full:
        click.echo(AFTER_NOTE)


COMMANDS = [chat, report, sandbox_command]
