"""Where the language servers (workstation.lsp) meet the tools: every WRITE call is checked around its run,
and `impact` and `find` ask the server first (`references`, `definition`).

Before the call, the errors of the files it writes and of the files importing them are taken (the
baseline); after it, the new and the fixed errors are appended to its result for the model (within
`[lsp] max_errors` and `max_chars`) and kept as `diagnostics` on its record. A query that names a file
of a language with a server starts that server in the background, so the first edit finds it warm.
Nothing here waits past `[lsp] timeout_s`, and no failure of a server fails the call.

Several edits in one response are checked as one (`batches`, `settle`): the model reads all their results
together, after the last, so the states between them are never seen by anyone. The baseline is taken
before the first, and the last one's result carries what all of them changed: the errors new since
before the first edit and still there after the last, and those they fixed. Reporting each edit alone
would tell the model, edit by edit, of breakage its very next edit in the same response mends (a
parameter used in a body before the line that declares it), and every one of those blocks stays in its
history. A command or a sub-agent between edits ends a batch (it may change files of its own).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Callable

from ...errors import WorkstationError
from ...fsutil import confine
from ...index.query import definitions, dependants
from ...lsp import MARK, EditCheck, Location, ServerFailed, language_of
from .base import COMMAND, DELEGATE, QUERY, WRITE, Tool, ToolResult
from .invocation import Invocation, Services, ToolContext


@dataclass
class Batch:
    """Consecutive edits of one response, checked as one (see the module docstring)."""

    ids: list[str]  # the calls, in the order they run: the last one's result carries the check
    paths: list[str]  # every path they name
    begun: bool = False
    check: "EditCheck | str | None" = None
    changed: list[str] = field(default_factory=list)  # what the edits that did change something wrote
    edits: int = 0  # those edits


def batches(calls: Iterable[tuple[str, Tool | None, dict[str, Any] | None]]) -> dict[str, Batch]:
    """A response's calls (id, tool, arguments; None for a call that cannot run) -> the batch of each edit
    that runs with others: runs of two or more WRITE calls not parted by a command or a sub-agent."""
    out: dict[str, Batch] = {}
    run: list[tuple[str, Tool, dict[str, Any]]] = []

    def close() -> None:
        if len(run) > 1:
            paths = dict.fromkeys(p for _, tool, args in run for p in tool.writes(args))
            batch = Batch([call_id for call_id, _, _ in run], list(paths))
            out.update(dict.fromkeys(batch.ids, batch))
        run.clear()

    for call_id, tool, args in calls:
        if tool is None or args is None:
            continue  # an unknown tool or malformed arguments: it never runs
        if tool.effect == WRITE:
            run.append((call_id, tool, args))
        elif tool.effect in (COMMAND, DELEGATE):
            close()
    close()
    return out


def around(inv: Invocation, run: Callable[[], ToolResult]) -> ToolResult:
    """`run` the call, checked by the language servers (see the module docstring)."""
    servers = inv.services.lsp
    if servers is None:
        return run()
    if inv.tool.effect == QUERY:
        path = inv.args.get("path")
        if isinstance(path, str) and path:
            servers.warm(path)
        return run()
    if inv.tool.effect != WRITE:
        return run()
    kmap, cancel = inv.services.kmap, inv.turn.cancel
    batch = inv.turn.lsp_batches.get(inv.call_id)
    if batch is not None:  # checked with the others of its response: `settle`, after the last
        if not batch.begun:
            batch.begun = True
            rels = _confined(inv.services, batch.paths)  # the later calls' paths: resolved when they run
            batch.check = servers.begin_edit(rels, lambda edited: kmap.db.call(dependants, edited),
                                             cancel) if rels else None
        result = run()
        if result.ok and result.data.get("edits"):
            batch.changed += [rel for rel in inv.rels if rel not in batch.changed]
            batch.edits += 1
        return result
    rels = inv.rels
    check = servers.begin_edit(rels, lambda edited: kmap.db.call(dependants, edited), cancel) if rels else None
    result = run()
    if check is None or not result.ok or not result.data.get("edits"):
        return result
    return _reported(inv.services, check, rels, result)


def settle(ctx: ToolContext, call_id: str, result: ToolResult) -> ToolResult:
    """After any call: the last call of a batch carries the batch's check (whether or not it ran itself)."""
    batch = ctx.turn.lsp_batches.get(call_id)
    if batch is None or call_id != batch.ids[-1] or batch.check is None or not batch.edits:
        return result
    return _reported(ctx.services, batch.check, batch.changed, result, batch.edits)


def _reported(services: Services, check: "EditCheck | str", changed: list[str], result: ToolResult,
              edits: int = 1) -> ToolResult:
    """`result` with what the check found appended (and kept as its record's `diagnostics`)."""
    servers = services.lsp
    assert servers is not None
    if isinstance(check, str):  # no server for this language here: said once
        result.text += f"\n{MARK}{check}"
        return result
    report = check.finish(changed)
    report.edits = edits
    shown = report.render(servers.config.max_errors, servers.config.max_chars)
    if shown:
        result.text += f"\n{shown}"
    result.data["diagnostics"] = report.data(shown)
    return result


def _confined(services: Services, paths: list[str]) -> list[str]:
    out = []
    for path in paths:
        try:
            out.append(services.confine_write(path)[1])
        except WorkstationError:
            continue  # refused by the tool itself
    return out


MAX_DEFINITIONS = 5  # definitions of one name whose references are asked for
MAX_OPENED = 50  # files the map saw a name in, opened in the server before it is asked for references


def references(inv: Invocation, symbol: str, seen: Iterable[str] = ()) -> tuple[list[tuple[Location, str]], str, str]:
    """The server's references to the definitions `symbol` names in the map: ([(location, enclosing
    symbol)], the server's name, a note); ([], "", "") when no server runs for their language. `seen`:
    the files where the map found the name."""
    servers = inv.services.lsp
    if servers is None:
        return [], "", ""
    found: dict[Location, str] = {}
    name, note = "", ""
    for path, _qualname, _kind, line in definitions(inv.services.kmap, symbol)[:MAX_DEFINITIONS]:
        server = servers.running(path)
        if server is None:
            continue
        column = _column(inv, path, line, symbol.replace("::", ".").rsplit(":", 1)[-1].rsplit(".", 1)[-1])
        try:
            also = [rel for rel in dict.fromkeys(seen) if language_of(rel) == language_of(path)][:MAX_OPENED]
            for loc in server.references(path, line, column, servers.config.timeout_s, also):
                found.setdefault(loc, _enclosing(inv, loc))
        except ServerFailed as err:
            note = str(err)
            continue
        name = server.spec.name
    return sorted(found.items(), key=lambda item: (item[0].path, item[0].line)), name, note


def definition(inv: Invocation, name: str, at: str) -> tuple[list[Location], str, str]:
    """Where the server says `name`, as used at `at` ("path:line"), is defined: (locations, server, note)."""
    path, _, line = at.rpartition(":")
    if not path or not line.strip().isdigit():
        raise WorkstationError(f"at must be path:line, got {at!r}")
    _, rel = confine(inv.services.root, path, inv.services.private)
    servers = inv.services.lsp
    server = servers.running(rel) if servers is not None else None
    if servers is None or server is None:
        why = servers.absent_for(rel) if servers is not None else ""
        return [], "", why or "no language server runs for this file"
    column = _column(inv, rel, int(line), name.rsplit(".", 1)[-1])
    try:
        return server.definition(rel, int(line), column, servers.config.timeout_s), server.spec.name, ""
    except ServerFailed as err:
        return [], server.spec.name, str(err)


def _column(inv: Invocation, rel: str, line: int, name: str) -> int:
    """The 1-indexed column of `name` on a line: after `def`/`class` when it is defined there, else its
    first use as a whole word."""
    try:
        text = (inv.services.root / rel).read_text("utf-8", "replace").splitlines()[line - 1]
    except (OSError, IndexError):
        return 1
    found = re.search(rf"\b(?:def|class|function|interface|type|const|let|var)\s+({re.escape(name)})\b", text)
    if found is None:
        found = re.search(rf"\b({re.escape(name)})\b", text)
    return found.start(1) + 1 if found else 1


def defined_as(inv: Invocation, loc: Location) -> str:
    """`path:start-end kind qualname` of the map's symbol defined at a location (else path:line)."""
    here = [s for s in inv.services.kmap.symbols(loc.path) if s.start_line <= loc.line <= s.end_line]
    if not here:
        return f"{loc.path}:{loc.line}"
    s = max(here, key=lambda s: s.start_line)
    return f"{loc.path}:{s.start_line}-{s.end_line} {s.kind} {s.qualname}"


def _enclosing(inv: Invocation, loc: Location) -> str:
    inside = [s for s in inv.services.kmap.symbols(loc.path) if s.start_line <= loc.line <= s.end_line]
    return max(inside, key=lambda s: s.start_line).qualname if inside else "<module>"


__all__ = ["Batch", "EditCheck", "around", "batches", "definition", "references", "settle"]
