"""Shared CLI plumbing: the workspace argument, JSON output, one-line errors."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, is_dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, Callable

import click
import msgspec
import orjson

from ..errors import ConfigError, WorkstationError
from ..sessions.records import Fields, Record
from ..terminal import escape_unencodable, safe


class WorkstationGroup(click.Group):
    """A group where `workstation PATH` (not a command name) opens the app on PATH, and whose commands
    (`lazy`: name -> module of workstation.cli) are imported when one is asked for."""

    def __init__(self, *args: Any, lazy: dict[str, str] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in self.lazy:
            import importlib  # lazy: only when a command runs

            module = importlib.import_module(f"workstation.cli.{self.lazy[name]}")
            for command in module.COMMANDS:
                self.add_command(command)
        return self.commands.get(name)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        rest = _print_is_exec(list(args))
        i = 0
        while i < len(rest):  # skip global options to find the first positional
            arg = rest[i]
            if arg in ("-C", "--model"):
                i += 2
                continue
            if arg.startswith("-"):
                i += 1
                continue
            break
        if i >= len(rest):
            if not any(a in ("-h", "--help", "--version") for a in rest):
                rest.append("ui")
        elif rest[i] not in self.commands and rest[i] not in self.lazy:
            rest.insert(i, "ui")
        return super().parse_args(ctx, rest)


def _print_is_exec(args: list[str]) -> list[str]:
    """`workstation [-C PATH] [--model M] -p TEXT ...` (Claude Code's `-p`/`--print`) as `workstation ... exec
    TEXT ...`: the global options stay in front, everything else is exec's."""
    head: list[str] = []
    i = 0
    while i < len(args) and args[i] in ("-C", "--model"):
        head += args[i:i + 2]
        i += 2
    rest = args[i:]
    if not any(a in ("-p", "--print") for a in rest) or (rest and not rest[0].startswith("-")):
        return args  # no -p, or a command (or the app's PATH) comes first
    tail = list(rest)
    tail.remove("-p" if "-p" in tail else "--print")
    return [*head, "exec", *tail]


# Every command gets the workspace (runtime.Workspace, built lazily by the group: a command that needs
# no workspace never reads its config) as its first argument.
pass_workspace = click.pass_obj


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


def _default(obj: Any) -> Any:
    if is_dataclass(obj):
        return asdict(obj)
    if isinstance(obj, (datetime, date)):
        return obj.isoformat()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, tuple, frozenset)):
        return list(obj)
    if isinstance(obj, Fields):  # a session record, or a part of one
        return obj.as_dict() if isinstance(obj, Record) else msgspec.to_builtins(obj)
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def print_json(data: Any, *, flat_rows: str | None = None) -> None:
    """`data` as indented JSON; with `flat_rows`, each item of that list (a table's rows) on one line.

    orjson writes 13,000 sessions in a few ms where the json module's indenting encoder (pure Python) takes
    0.5 s; what orjson refuses (an integer past 64 bits, a key that is not a string) goes through json."""
    if flat_rows is None or not data.get(flat_rows):
        click.echo(_dumps(data, indent=True))
        return
    rows = [_dumps(row) for row in data[flat_rows]]
    mark = "\0rows\0"  # where the rows go: no JSON text holds it but this one string
    head = _dumps({**data, flat_rows: [mark]}, indent=True)
    before, after = head.split(f"    {json.dumps(mark)}", 1)
    click.echo(before + "    " + ",\n    ".join(rows) + after)


def _dumps(data: Any, *, indent: bool = False) -> str:
    try:
        return orjson.dumps(data, default=_default, option=orjson.OPT_INDENT_2 if indent else 0).decode()
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(data, default=_default, indent=2 if indent else None, ensure_ascii=False)


def print_table(rows: list[dict], columns: list[str] | None = None, title: str | None = None) -> None:
    from rich.console import Console  # lazy: rich, ~50 ms, only to print a table
    from rich.table import Table  # lazy: rich, as above

    columns = columns or (list(rows[0]) if rows else [])
    table = Table(title=title, show_lines=False)
    for col in columns:
        table.add_column(col)
    for row in rows:
        table.add_row(*("" if row.get(c) is None else str(row.get(c)) for c in columns))
    Console().print(table)


def run_main(main: Callable) -> None:
    """Run the click group, turning known errors into one line on stderr."""
    escape_unencodable(sys.stdout, sys.stderr)
    try:
        sys.exit(main(standalone_mode=False, prog_name="workstation") or 0)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.UsageError as err:  # one line, like every other error; --help has the usage
        where = f" (see `{err.ctx.command_path} --help`)" if err.ctx is not None else ""
        click.echo(f"error: {err.format_message()}{where}", err=True)
        sys.exit(err.exit_code)
    except click.ClickException as err:
        err.show()
        sys.exit(err.exit_code)
    except click.exceptions.Exit as err:
        sys.exit(err.exit_code)
    except ConfigError as err:
        for line in err.lines:
            click.echo(safe(f"error: {line}"), err=True)
        sys.exit(2)
    except WorkstationError as err:  # may name what we did not write (a model's error, a file name)
        click.echo(safe(f"error: {err}"), err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
