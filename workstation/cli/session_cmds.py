"""Commands: `workstation session ...` (list, show, compact, commit, archive, restore, export, search;
undo, rewind, fork and diff of the files the agent changed) and `workstation sidecar` (the compaction
worker)."""

from __future__ import annotations

import time

import click

from ..errors import WorkstationError
from ..terminal import safe
from .common import json_option, pass_workspace, print_json, print_table


def _human_size(size: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(size)


def _episodic(ws, flow: str):
    """The workspace's episodic recorder, flushed before the database handle closes."""
    from ..memory.episodic import Episodic  # lazy: the memory package, ~80 ms on --help

    episodic = Episodic(ws.db, flow=flow)
    click.get_current_context().call_on_close(episodic.close)  # runs before the group closes the db
    return episodic


def _warn_problems(view) -> None:
    for problem in view.problems:
        click.echo(f"warning: unreadable {problem}", err=True)


def _warn(line: str) -> None:
    click.echo(f"warning: {line}", err=True)


@click.group("session")
def session_group() -> None:
    """Session logs: list, show, compact, uncompact, frontier, commit, archive, restore, export, search, undo,
    rewind, fork, diff."""


team_option = click.option("--team", is_flag=True,
                           help="Teammates' sessions pulled by `workstation team pull` (with author and origin).")


@session_group.command("list")
@click.option("--archived", is_flag=True, help="Include archived sessions.")
@team_option
@json_option
@pass_workspace
def list_cmd(ws, archived: bool, team: bool, as_json: bool) -> None:
    """Sessions with turns, compacted range, size and last activity."""
    from ..sessions.catalog import info_dict, list_sessions  # lazy: the sessions package, ~60 ms on --help

    if team:
        from ..team.sessions import team_sessions  # lazy: the team package

        rows = ws.db.call(team_sessions)
        if as_json:
            print_json(rows)
        elif not rows:
            click.echo("no teammates' sessions pulled (they share them with [team] share = [..., \"sessions\"])")
        else:
            print_table(rows, ["author", "origin", "slug", "lines"])
        return

    infos = list_sessions(ws.paths, archived=archived, warn=_warn)
    if as_json:
        print_json([info_dict(i) for i in infos])
        return
    rows = [{"slug": i.slug, "state": i.state, "turns": i.turns, "compacted": i.compacted or "-",
             "size": _human_size(i.size), "last activity": (i.last_activity or "")[:19].replace("T", " "),
             "title": i.title[:40]} for i in infos]
    columns = ["slug", "turns", "compacted", "size", "last activity", "title"]
    if archived:
        columns.insert(1, "state")
    if not rows:
        click.echo("no sessions" + ("" if archived else " (archived ones: --archived)"))
        return
    print_table(rows, columns)


@session_group.command("show")
@click.argument("slug")
@click.option("--raw", is_flag=True, help="Every original record, also the compacted and redacted ones.")
@json_option
@pass_workspace
def show_cmd(ws, slug: str, raw: bool, as_json: bool) -> None:
    """What the model sees of SLUG (summary, recent turns, markers), or with --raw every turn."""
    from ..sessions.catalog import export_markdown, load  # lazy: the sessions package, ~60 ms on --help
    from ..costs import billing  # lazy: the sessions package, ~60 ms on --help
    from ..sessions.modelview import assemble  # lazy: the sessions package, ~60 ms on --help
    from ..sessions.turns import of_log, taken_back  # lazy: the sessions package, ~60 ms on --help

    view, where = load(ws.paths, slug)
    _warn_problems(view)
    if raw:
        if as_json:
            print_json({"slug": slug, "state": where, "records": view.records,
                        "problems": [str(p) for p in view.problems]})
        else:
            click.echo(safe(export_markdown(slug, view, where)), nl=False)
        return
    context = assemble(view, ws.config)
    bill = billing.bill(view.records)
    turns, covered = of_log(view)
    marks = taken_back(view.records)
    taken = [{"id": r.id, "type": r.kind, "turn": turns.of(r), **marks[r.id].to_dict()}
             for r in view.records if r.id in marks]
    if as_json:
        print_json({"slug": slug, "state": where, "turns": turns.count,
                    "covered_turns": covered.last_turn, "partial": covered.partial, "summary_id": context.summary_id,
                    "tokens": context.tokens, "redacted": [r.record_id for r in context.redactions],
                    "taken_back": taken, "billed": bill.to_dict(), "messages": context.messages})
        return
    summarized = f"turns {covered.describe()} summarized" if covered.last_turn else "none summarized"
    click.echo(f"# {slug} ({where}): {turns.count} turns, {summarized}, ~{context.tokens:,} tokens in context")
    if bill.total.calls:
        click.echo(f"# {_billed(bill)}")
    for line in _taken_lines(taken):
        click.echo(f"# {line}")
    for message in context.messages:
        click.echo(f"\n[{message['role']}]")
        if message.get("content"):
            click.echo(safe(str(message["content"])))
        for call in message.get("tool_calls") or ():
            click.echo(safe(f"-> {call['function']['name']}({call['function']['arguments']})"))


def _taken_lines(taken: list[dict]) -> list[str]:
    """`turns 4–5 taken back by /rewind 4 (not in the context below)`, `edits of turn 3 undone by /undo`:
    what a rewind or undo took back, one line for each (--raw shows every record, marked)."""
    groups: dict[tuple[str, bool], list[int]] = {}
    for item in taken:
        groups.setdefault((item["by"], item["conversation"]), [])
        if item["turn"] not in groups[(item["by"], item["conversation"])]:
            groups[(item["by"], item["conversation"])].append(item["turn"])
    lines = []
    for (by, conversation), numbers in groups.items():
        if len(numbers) == 1:
            span = f"turn {numbers[0]}"
        elif numbers == list(range(numbers[0], numbers[-1] + 1)):
            span = f"turns {numbers[0]}–{numbers[-1]}"
        else:
            span = "turns " + ", ".join(map(str, numbers))
        lines.append(f"{span} {by} (not in the context below)" if conversation else f"edits of {span} {by}")
    return lines


def _billed(bill) -> str:
    """'12 model calls billed $0.4210, cache hit 93.5% (steps 95.1%, 2 compaction calls 41.0%)'."""
    total, steps, compactions = bill.total, bill.kinds["step"], bill.kinds["compaction"]
    cost = f"${total.cost_usd:.4f}" + (f" (+{total.unpriced} calls with no price)" if total.unpriced else "") \
        if total.calls > total.unpriced else "with no price"
    hit = "" if total.hit is None else f", cache hit {total.hit:.1%}"
    if compactions.calls and total.hit is not None:
        hit += (f" (steps {steps.hit:.1%}" if steps.hit is not None else " (") + \
            f", {compactions.calls} compaction calls {compactions.hit:.1%})"
    return f"{total.calls} model calls billed {cost}{hit}"


@session_group.command("compact")
@click.argument("slug")
@click.option("--keep", type=click.IntRange(min=0), default=None,
              help="Turns (user messages with all that answered them) to keep verbatim (default "
                   "memory.keep_recent; 0 summarizes everything).")
@click.option("--focus", default="", help="What the summary keeps in detail (e.g. 'the retry logic').")
@json_option
@pass_workspace
def compact_cmd(ws, slug: str, keep: int | None, focus: str, as_json: bool) -> None:
    """Compact SLUG now, whatever the threshold."""
    from ..sessions import Session, compact_now  # lazy: the sessions package, ~60 ms on --help

    result = compact_now(Session.open(ws.paths, slug), ws.config, _episodic(ws, "session compact"), keep=keep,
                         focus=focus)
    if result.status == "nothing":
        if as_json:
            print_json({"slug": slug, "status": "nothing"})
        else:
            click.echo(result.describe())
        return
    if not result.ok:
        raise WorkstationError(result.describe())
    if as_json:
        print_json({"slug": slug, "status": result.status, "first_turn": result.first_turn,
                    "last_turn": result.last_turn, "partial": result.partial, "model": result.model,
                    "record_id": result.record.id if result.record else None,
                    "duration_s": round(result.duration_s, 3)})
        return
    click.echo(f"compacted {result.span()} of {slug} with {result.model} "
               f"in {result.duration_s:.1f}s (record {result.record.id if result.record else '?'})")


@session_group.command("uncompact")
@click.argument("slug")
@json_option
@pass_workspace
def uncompact_cmd(ws, slug: str, as_json: bool) -> None:
    """Undo the compaction in force in SLUG: the model sees its turns again as before it (/uncompact)."""
    from ..sessions import Session  # lazy: the sessions package, ~60 ms on --help
    from ..sessions.compaction import uncompact  # lazy: the sessions package, ~60 ms on --help

    record = uncompact(Session.open(ws.paths, slug))
    if as_json:
        print_json({"slug": slug, "record_id": record.id, "compact": record.compact, "turns": record.turns,
                    "held": record.held})
        return
    first, last = record.turns or (0, 0)
    click.echo(f"undid the compaction of turns {first}–{last} of {slug} (record {record.compact}): the model "
               f"sees them again as before it; {record.held}")


@session_group.command("frontier")
@click.argument("slug")
@click.option("--budget", type=click.IntRange(min=64), default=None,
              help="Tokens of the user's messages to keep (default 2,000).")
@json_option
@pass_workspace
def frontier_cmd(ws, slug: str, budget: int | None, as_json: bool) -> None:
    """Where the work of SLUG stands, from its log alone: the user's words, the plan, decisions, pins and
    instructions in force, the files changed, the last failure, open questions (/frontier)."""
    from ..sessions.catalog import load  # lazy: the sessions package, ~60 ms on --help
    from ..sessions.frontier import USER_BUDGET, frontier  # lazy: the sessions package, ~60 ms on --help

    view, _where = load(ws.paths, slug)
    _warn_problems(view)
    found = frontier(view, budget=budget or USER_BUDGET)
    if as_json:
        print_json({"slug": slug, **found.as_dict()})
    else:
        click.echo(safe(found.render()))


@session_group.command("commit")
@click.argument("slug")
@click.option("-m", "--message", default=None, help="The commit message (default: the model writes one).")
@json_option
@pass_workspace
def commit_cmd(ws, slug: str, message: str | None, as_json: bool) -> None:
    """Commit the files SLUG's agent changed (only those; never pushes)."""
    from ..agent.commit import commit_session, describe  # lazy: the agent stack, ~100 ms
    from ..sessions import Session  # lazy: the sessions package, ~60 ms on --help

    commit = commit_session(ws, Session.open(ws.paths, slug), message)
    if as_json:
        print_json({"slug": slug, "sha": commit.sha, "branch": commit.branch, "message": commit.message,
                    "paths": commit.paths})
        return
    click.echo(describe(commit))


@session_group.command("archive")
@click.argument("slug")
@json_option
@pass_workspace
def archive_cmd(ws, slug: str, as_json: bool) -> None:
    """Summarize SLUG, then move it (compressed) to the archive."""
    from ..sessions.archive import archive  # lazy: the sessions package, ~60 ms on --help

    result = archive(ws.paths, slug, ws.config, episodic=_episodic(ws, "session archive"))
    compaction = result.compaction
    failed = compaction is not None and not compaction.ok
    if as_json:
        print_json({"slug": slug, "path": result.path, "summarized": result.summarized,
                    "summary_error": compaction.reason if failed else None})
        return
    click.echo(f"archived {slug} to {result.path}")
    if failed:
        click.echo(f"warning: archived without a fresh summary: {compaction.reason}", err=True)


@session_group.command("restore")
@click.argument("slug")
@pass_workspace
def restore_cmd(ws, slug: str) -> None:
    """Bring an archived session back to the live folder."""
    from ..sessions.archive import restore  # lazy: the sessions package, ~60 ms on --help

    session = restore(ws.paths, slug)
    click.echo(f"restored {slug} to {session.path}")


@session_group.command("export")
@click.argument("slug")
@click.option("--format", "fmt", type=click.Choice(["md", "json"]), default="md", show_default=True)
@pass_workspace
def export_cmd(ws, slug: str, fmt: str) -> None:
    """Print every record of SLUG as markdown or JSON (archived sessions too)."""
    from ..sessions.catalog import export  # lazy: the sessions package, ~60 ms on --help

    text = export(ws.paths, slug, fmt)
    click.echo(text if fmt == "json" else safe(text), nl=False)  # JSON stays exact: its encoder escapes controls


@session_group.command("search")
@click.argument("text")
@click.option("--limit", type=click.IntRange(min=1), default=200, show_default=True)
@team_option
@json_option
@pass_workspace
def search_cmd(ws, text: str, limit: int, team: bool, as_json: bool) -> None:
    """Find TEXT in every session, archived ones included."""
    from ..sessions.catalog import search  # lazy: the sessions package, ~60 ms on --help

    if team:
        from ..team.sessions import team_search  # lazy: the team package

        rows = ws.db.call(team_search, text, limit)
        if as_json:
            print_json(rows)
        elif not rows:
            click.echo(f"no teammate's session mentions {safe(repr(text))}")
        else:
            print_table([{**r, "text": safe(r["text"][:120])} for r in rows],
                        ["author", "origin", "slug", "line", "text"])
        return

    hits = search(ws.paths, text, limit=limit, warn=_warn, db=ws.db)
    if as_json:
        print_json(hits)
        return
    if not hits:
        click.echo(f"no session mentions {safe(repr(text))}")
        return
    print_table([{"slug": h.slug, "state": h.state, "turn": f"{h.turn or '-'}{' ↶' if h.taken_back else ''}",
                  "type": h.type, "record": h.record_id, "snippet": safe(h.snippet)} for h in hits],
                ["slug", "state", "turn", "type", "record", "snippet"])
    if any(h.taken_back for h in hits):
        click.echo("↶: the record was taken back by a rewind or undo (--json says which)")


def _checkpoints(ws, slug: str):
    from ..agent.checkpoints import Checkpoints  # lazy: the agent stack, ~100 ms
    from ..sessions.log import Session  # lazy: the sessions package, ~60 ms on --help

    return Checkpoints(ws.paths, Session.open(ws.paths, slug))


def _print_restored(done, as_json: bool) -> None:
    if as_json:
        print_json({"to": done.to, "turn": done.turn, "files": done.files, "conversation": done.conversation,
                    "how": done.how})
    else:
        click.echo(done.describe())


@session_group.command("undo")
@click.argument("slug")
@json_option
@pass_workspace
def undo_cmd(ws, slug: str, as_json: bool) -> None:
    """Restore the files the newest turn of SLUG that changed any changed (/undo)."""
    _print_restored(_checkpoints(ws, slug).undo(), as_json)


@session_group.command("rewind")
@click.argument("slug")
@click.argument("turn", type=click.IntRange(min=1))
@click.option("--files", "only", flag_value="files", help="Only the files.")
@click.option("--conversation", "only", flag_value="conversation", help="Only what the model sees.")
@json_option
@pass_workspace
def rewind_cmd(ws, slug: str, turn: int, only: str | None, as_json: bool) -> None:
    """Go back to before user TURN of SLUG: its files and the conversation the model sees (/rewind)."""
    done = _checkpoints(ws, slug).rewind(turn, files=only != "conversation", conversation=only != "files")
    _print_restored(done, as_json)


@session_group.command("fork")
@click.argument("slug")
@click.option("--before", "turn", type=click.IntRange(min=1), default=None,
              help="Copy the conversation up to before this user turn (default: all of it).")
@click.option("--as", "new_slug", default=None, help="Name of the new session.")
@json_option
@pass_workspace
def fork_cmd(ws, slug: str, turn: int | None, new_slug: str | None, as_json: bool) -> None:
    """A new session with SLUG's conversation; the files stay as they are (/fork)."""
    from ..agent.checkpoints import fork  # lazy: the agent stack, ~100 ms
    from ..sessions.log import Session  # lazy: the sessions package, ~60 ms on --help

    new = fork(ws.paths, Session.open(ws.paths, slug), turn, new_slug)
    if as_json:
        print_json({"slug": new.slug, "from": slug, "before_turn": turn})
    else:
        click.echo(f"forked {slug} into {new.slug}")


@session_group.command("diff")
@click.argument("slug")
@click.argument("path", required=False)
@json_option
@pass_workspace
def diff_cmd(ws, slug: str, path: str | None, as_json: bool) -> None:
    """The net change SLUG made to the files (against what they held before its first change)."""
    from ..commands.slash import render_diff  # lazy: the agent stack, ~100 ms

    changes = _checkpoints(ws, slug).diff(path)
    if as_json:
        print_json({"slug": slug, "files": changes})
    elif changes:
        click.echo(render_diff(changes))
    else:
        click.echo("no net change")


@click.command("sidecar")
@click.option("--once", is_flag=True, help="One pass over every session, then exit.")
@click.option("--parent", type=int, default=None, hidden=True, help="Exit when this process is gone.")
@json_option
@pass_workspace
def sidecar_cmd(ws, once: bool, parent: int | None, as_json: bool) -> None:
    """Watch the sessions folder and compact sessions past the threshold."""
    from ..sidecar import serve  # lazy: the sessions package, ~60 ms on --help

    def report(line: str) -> None:
        if not as_json:
            click.echo(line if once else f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}")

    results = serve(ws.paths, ws.config, once=once, episodic=_episodic(ws, "sidecar"), report=report,
                    parent_pid=parent, jobs=_team_jobs(ws))
    if as_json:
        print_json([{"slug": r.slug, "status": r.status, "first_turn": r.first_turn, "last_turn": r.last_turn,
                     "model": r.model, "reason": r.reason} for r in results])


def _team_jobs(ws) -> list:
    """The sidecar's team push every [team] push_every_s, when [team] is configured."""
    if not ws.config.team.enabled:
        return []
    from ..team.sync import Team  # lazy: the team package, only with [team]

    team = Team(ws.db, ws.paths, ws.config.team)

    def push() -> str | None:
        report = team.push()
        return report.line() if sum(report.rows.values()) else None

    return [("team push", ws.config.team.push_every_s, push)]


COMMANDS: list = [session_group, sidecar_cmd]
