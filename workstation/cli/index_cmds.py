"""Knowledge-map commands: index, map, find, impact, watch."""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime

import click

from .common import json_option, pass_workspace, print_json


def _progress_bar():
    """A rich progress bar on a terminal, nothing otherwise; returns (context, callback)."""
    if not sys.stderr.isatty():
        return None, None
    from rich.console import Console  # lazy: rich, ~50 ms, only on a terminal
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,  # lazy: rich, as above
                               TimeElapsedColumn)

    progress = Progress(TextColumn("indexing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        TextColumn("{task.fields[path]}", style="dim"), console=Console(stderr=True),
                        transient=True)
    task = progress.add_task("index", total=None, path="")

    def update(done: int, total: int, path: str) -> None:
        progress.update(task, completed=done, total=total, path=path[-60:])

    return progress, update


@click.command("index")
@click.option("--force", is_flag=True, help="Parse every file again, changed or not.")
@click.option("--describe", "describe", type=click.IntRange(min=0), default=0, metavar="N",
              help="Then ask the model for the purposes of up to N files whose source gives none "
                   "(needs index.describe_with_model = true; prints progress and cost).")
@json_option
@pass_workspace
def index_command(ws, force: bool, describe: int, as_json: bool) -> None:
    """Index the workspace into the knowledge map (only what changed, unless --force)."""
    km = ws.kmap
    bar, update = (None, None) if as_json else _progress_bar()
    if bar is not None:
        with bar:
            report = km.index_all(progress=update, force=force)
    else:
        report = km.index_all(force=force)
    described = _describe(km, describe, as_json) if describe else None
    if as_json:
        data = report.to_dict()
        if described is not None:
            data["describe"] = described.to_dict()
        print_json(data)
        return
    click.echo(f"{report.files} files, {report.symbols} symbols in {report.seconds:.2f}s "
               f"({report.indexed} parsed, {report.unchanged} unchanged, {report.removed} removed)")
    if report.skipped:
        by_reason = ", ".join(f"{reason} {n}" for reason, n in sorted(report.skipped.items()))
        click.echo(f"skipped {sum(report.skipped.values())}: {by_reason}")
        shown = report.skipped_files[:20]
        for item in shown:
            click.echo(f"  {item['path']}: {item['reason']} ({item['detail']})")
        if len(report.skipped_files) > len(shown):
            click.echo(f"  ... {len(report.skipped_files) - len(shown)} more (see --json)")
    else:
        click.echo("skipped 0")
    if described is not None:
        click.echo(_describe_line(described))
        if described.stopped:
            click.echo(f"describe stopped: {described.stopped}")


def _describe(km, limit: int, as_json: bool):
    """Model-written purposes after the index, one progress line per file on stderr (not with --json)."""
    def show(report) -> None:
        click.echo(f"  {_describe_line(report)}", err=True)

    return km.describe_files(limit, progress=None if as_json else show)


def _describe_line(report) -> str:
    cost = f"${report.cost_usd:.4f}" + (f" (+{report.unpriced} unpriced)" if report.unpriced else "")
    return (f"described {report.described} of {report.total} files ({report.failed} failed), "
            f"{report.requests} requests, {report.tokens_in}+{report.tokens_out} tokens, {cost}")


@click.command("map")
@click.argument("file", required=False)
@click.option("--tokens", type=int, default=None,  # the core checks it: one line when it is below 1
              help="Token budget (repository map: default 1024; file map: 2% of the file).")
@json_option
@pass_workspace
def map_command(ws, file: str | None, tokens: int | None, as_json: bool) -> None:
    """Print the knowledge map of FILE, or a ranked repository map within a token budget."""
    km = ws.kmap
    if file:
        fm = km.file_map(file, tokens)
        if as_json:
            print_json(fm.to_dict())
        else:
            click.echo(fm.render())
        return
    from .. import tokens as tok  # lazy: the tokenizer, ~7 ms on --help, only for the repository map

    budget = 1024 if tokens is None else tokens
    text = km.repo_map(budget)
    if as_json:
        print_json({"budget": budget, "tokens": tok.count(text), "text": text})
    else:
        click.echo(text)


@click.command("find")
@click.argument("query")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@json_option
@pass_workspace
def find_command(ws, query: str, limit: int, as_json: bool) -> None:
    """Find files and symbols by name (tier one), or by meaning through the model (tier two)."""
    result = ws.kmap.find(query, limit)
    if as_json:
        print_json(result.to_dict())
        return
    for hit in result.hits:
        what = f"{hit.symbol_kind} {hit.name}" if hit.kind == "symbol" else "file"
        detail = f"  {hit.detail}" if hit.detail else ""
        click.echo(f"{hit.location}  {what}  [{hit.match} {hit.score:.0f}]{detail}")
    if not result.hits:
        click.echo(f"nothing matches {result.query!r}")
    if result.note:
        click.echo(f"note: {result.note}")


@click.command("impact")
@click.argument("symbol")
@json_option
@pass_workspace
def impact_command(ws, symbol: str, as_json: bool) -> None:
    """Every call site and reference of SYMBOL (name, Class.method or path:name)."""
    hits = ws.kmap.impact(symbol)
    if as_json:
        print_json({"symbol": symbol, "hits": hits})
        return
    for hit in hits:
        inside = f" in {hit.enclosing}" if hit.enclosing else " at top level"
        target = f" -> {hit.target}" if hit.target else ""
        click.echo(f"{hit.location}{inside} ({hit.kind}){target} [{hit.evidence}]")
    click.echo(f"{len(hits)} reference{'s' if len(hits) != 1 else ''} to {symbol}")


def _json_line(data: dict) -> None:
    """One JSON object on one line, for a stream a script reads as it comes."""
    click.echo(json.dumps(data, ensure_ascii=False))


@click.command("watch")
@json_option
@pass_workspace
def watch_command(ws, as_json: bool) -> None:
    """Keep the knowledge map live until Ctrl-C, printing every re-index (--json: one object a line)."""
    from ..index.watcher import Watcher  # lazy: watchdog, ~60 ms on --help, only for watch

    km = ws.kmap
    report = km.index_all()
    root = str(ws.paths.root)
    if as_json:
        _json_line({"event": "watching", "root": root, "files": report.files, "symbols": report.symbols,
                    "references": report.references, "skipped": report.skipped})
    else:
        click.echo(f"watching {root}: {report.files} files, {report.symbols} symbols (Ctrl-C stops)")

    def show(change) -> None:
        events = [("indexed", change.indexed), ("removed", change.removed), ("skipped", change.skipped)]
        if as_json:
            at = datetime.now().astimezone().isoformat(timespec="seconds")
            ms = round(change.seconds * 1000)
            for event, paths in events:
                for path in paths:
                    _json_line({"event": event, "path": path, "time": at, "refresh_ms": ms})
            return
        stamp = time.strftime("%H:%M:%S")
        for event, paths in events:
            for path in paths:
                click.echo(f"{stamp} {event} {path}")
        click.echo(f"{stamp}   ({change.seconds * 1000:.0f} ms)")

    def failed(err: Exception) -> None:
        click.echo(f"error: refresh failed: {err}", err=True)

    watcher = Watcher(km, on_change=show, on_error=failed).start()
    try:
        while watcher.alive:
            time.sleep(0.5)
        click.echo("error: the file watcher stopped", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        watcher.stop()  # first, so no refresh prints after "stopped"
        if as_json:
            _json_line({"event": "stopped"})
        else:
            click.echo("stopped")
    finally:
        watcher.stop()


COMMANDS: list = [index_command, map_command, find_command, impact_command, watch_command]
