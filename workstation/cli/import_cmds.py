"""`workstation import`: other agents' sessions (Claude Code, Codex, SWE-agent, aider, OpenHands)
into this workspace's sessions, once or while they are written."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import click

from .common import json_option, pass_workspace, print_json

_SUFFIXES = (".jsonl", ".json", ".traj", ".md")


def _expand(paths: tuple[str, ...]) -> tuple[list[str], set[str]]:
    """Files as given; a folder stands for the files under it that may be session logs (by suffix).
    Returns the files and those that came from a folder (an unknown format there is not an error)."""
    out: list[str] = []
    found: set[str] = set()
    for given in paths:
        if os.path.isdir(given):
            listed = sorted(str(p) for p in Path(given).rglob("*") if p.is_file() and p.name.endswith(_SUFFIXES)
                            and ".workstation" not in p.parts)
            out += listed
            found.update(listed)
        else:
            out.append(given)
    return out, found


def _say(result, as_json: bool) -> None:
    """One line per file that added records or failed; one warning line per problem."""
    for problem in result.problems:
        click.echo(f"warning: {problem}", err=True)
    if result.error:
        click.echo(f"error: {result.error}", err=True)
        return
    if as_json or result.unchanged:
        return
    for session in result.sessions:
        if session.count:
            kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(session.added.items()))
            click.echo(f"{result.path} ({result.format}) -> {session.slug}: +{session.count} records ({kinds})")
        elif not session.skipped:
            click.echo(f"{result.path} ({result.format}) -> {session.slug}: nothing new")


@click.command("import")
@click.argument("paths", nargs=-1)
@click.option("--format", "fmt", type=click.Choice(["claude-code", "codex", "swe-agent", "aider", "openhands"]),
              default=None, help="Read the files as this format (default: detected from their content).")
@click.option("--from", "sources", multiple=True, type=click.Choice(["claude-code", "codex"]),
              help="Also import this workspace's sessions from the agent's own folder (repeatable).")
@click.option("--watch", is_flag=True, help="Keep importing as the files grow, until interrupted.")
@json_option
@pass_workspace
def import_cmd(ws, paths: tuple[str, ...], fmt: str | None, sources: tuple[str, ...], watch: bool,
               as_json: bool) -> None:
    """Import other agents' session logs as workstation sessions (again: only what is new).

    PATH may be a Claude Code .jsonl, a Codex rollout, a SWE-agent .traj, an aider
    .aider.chat.history.md or an OpenHands trajectory, or a folder of them.
    """
    from ..importers import discover  # lazy: the importers, ~60 ms on --help
    from ..importers.engine import Importer  # lazy: the importers, ~60 ms on --help

    if not paths and not sources:
        raise click.UsageError("give files to import, or --from claude-code / --from codex")
    importer = Importer(ws.paths, ws.db)
    root = ws.paths.root
    files, in_folders = _expand(paths)
    if watch:
        _watch(importer, root, files, fmt, sources, as_json)
        return
    found: list[tuple[str, str | None]] = [(f, fmt) for f in files]
    for source in sources:
        listed = discover.sessions(source, root)
        if not listed and not as_json:
            where = ", ".join(str(f) for f in discover.folders(source, root))
            click.echo(f"no {source} sessions of {root} in {where}", err=True)
        found += [(str(p), source) for p in listed]
    from ..importers.bulk import import_many  # lazy: worker pools, only for a folder

    results = []
    for (path, _), result in zip(found, import_many(importer, found)):
        if result.error and path in in_folders and "unknown format" in result.error:
            if not as_json:
                click.echo(f"skipped {path}: not a session log of a known format", err=True)
            continue
        results.append(result)
        _say(result, as_json)
    added = sum(r.added for r in results)
    if as_json:
        print_json([r.to_dict() for r in results])
    else:
        unchanged = sum(r.unchanged for r in results)
        sessions = {s.slug for r in results for s in r.sessions if s.count}
        click.echo(f"{len(results)} file(s): {added} record(s) added to {len(sessions)} session(s)"
                   + (f", {unchanged} unchanged since the last import" if unchanged else ""))
    if any(r.error for r in results) and not added:
        raise SystemExit(1)


def _watch(importer, root: Path, files: list[str], fmt: str | None, sources: tuple[str, ...], as_json: bool) -> None:
    from ..importers.watch import Watcher  # lazy: the file watcher, only with --watch

    def report(result) -> None:
        if as_json:
            click.echo(json.dumps(result.to_dict(), ensure_ascii=False))
            return
        stamp = time.strftime("%H:%M:%S")
        for problem in result.problems:
            click.echo(f"{stamp} warning: {problem}", err=True)
        if result.error:
            click.echo(f"{stamp} error: {result.error}", err=True)
        for session in result.sessions:
            if session.count:
                click.echo(f"{stamp} {result.path} -> {session.slug}: +{session.count} records")

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    watcher = Watcher(importer, root, sources=sources, files=tuple(Path(f) for f in files), fmt=fmt, report=report)
    if not as_json:
        click.echo(f"watching {', '.join(str(f) for f in watcher.folders()) or 'nothing'} (Ctrl-C stops)")
    watcher.run(stop)


COMMANDS: list = [import_cmd]
