"""Command: `workstation replay SLUG|FILE.jsonl` — step through a past episode, or `--verify` it today."""

from __future__ import annotations

import sys

import click

from ..errors import WorkstationError
from ..terminal import safe
from .common import json_option, pass_workspace, print_json

EXIT_DIFFERS = 3  # --verify found a result that differs (0: none did, or nothing was checkable; 1/2: errors)


@click.command()
@click.argument("target", metavar="SLUG|FILE.jsonl")
@click.option("--verify", is_flag=True,
              help="Re-run the episode's read-only tool calls against today's tree and show the first step "
                   f"whose result differs (exit status {EXIT_DIFFERS} when one does).")
@click.option("--print", "as_text", is_flag=True, help="Print the episode step by step instead of opening the app.")
@click.option("--step", "step", type=int, default=None, metavar="N",
              help="With --print: stop at step N (1-based) and show the state the agent had there.")
@json_option
@pass_workspace
def replay(ws, target: str, verify: bool, as_text: bool, step: int | None, as_json: bool) -> None:
    """Replay a past episode (a session slug, live or archived, or a session .jsonl file).

    Verification runs in the workspace given by -C; the tree is never written (an episode that edited files
    is checked in a scratch copy where its own edits are re-applied).
    """
    from ..replay import Episode  # lazy: replay, ~100 ms on --help and index

    if verify and (as_text or step is not None):
        raise WorkstationError("--verify does not combine with --print or --step")
    episode = Episode.load(ws.paths, target, config=ws.config)
    for problem in episode.problems:
        click.echo(f"warning: unreadable {problem}", err=True)
    if verify:
        _verify(ws, episode, as_json)
    elif as_text or step is not None or as_json:
        _print(episode, step, as_json)
    else:
        from ..tui.screens import replay as replay_app  # lazy: textual, loaded only to open the player

        replay_app.run(episode)


def _verify(ws, episode, as_json: bool) -> None:
    from ..replay.verify import verify  # lazy: replay, ~100 ms on --help and index

    report = verify(episode, ws)
    if as_json:
        print_json(report.to_dict())
    else:
        click.echo(safe(report.render()))
    if not report.ok:
        sys.exit(EXIT_DIFFERS)  # SystemExit: click's Exit is swallowed by main(standalone_mode=False)


def _print(episode, step: int | None, as_json: bool) -> None:
    from ..replay import render_state, render_steps  # lazy: replay, ~100 ms on --help and index

    index = None
    if step is not None:
        index = episode.check_index(step - 1)
    upto = len(episode.steps) - 1 if index is None else index
    if as_json:
        out = {"episode": episode.name, "source": episode.source, "steps_total": len(episode.steps),
               "steps": [s.to_dict() for s in episode.steps[: upto + 1]],
               "problems": [str(p) for p in episode.problems]}
        if index is not None:
            out["state"] = episode.state_at(index).to_dict()
        print_json(out)
        return
    click.echo(safe(f"episode {episode.name} ({episode.source}): {len(episode.steps)} steps, "
                    f"{episode.length_text()}"))
    click.echo(safe(render_steps(episode, upto)))
    if index is not None:
        click.echo()
        click.echo(safe(render_state(episode, episode.state_at(index))))


COMMANDS = [replay]
