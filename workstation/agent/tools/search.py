"""Map queries: impact (call sites and references of a symbol), find (files and symbols by name),
grep (regex over the workspace's text files, naming any it did not search). Each runs the staleness gate first."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ... import scrub
from ...fsutil import confine
from . import lspcheck
from .fileio import grep
from ...lsp.servers import SERVER_NAMES
from .invocation import Invocation
from .base import (BOOL, NOTHING, QUERY, RECOMPUTE, STR, Call, Lookup, Meaning, Tool, ToolResult,
                   as_text, cap, params)

if TYPE_CHECKING:
    from ...index.query import FindResult

_NO_MODEL_NOTE = "(tier one only: no model configured for semantic search)"


def render_find(result: "FindResult") -> str:
    if not result.hits:
        text = f"nothing matches {result.query!r}"
    else:
        rows = []
        for h in result.hits:
            where = h.path if h.kind == "file" else f"{h.path}:{h.start_line}-{h.end_line}"
            what = "file" if h.kind == "file" else f"{h.symbol_kind} {h.name}"
            rows.append(f"{where}  {what}" + (f" — {h.detail}" if h.detail else "") + f"  [{h.match}]")
        text = "\n".join(rows)
    if result.note:
        text += f"\n({result.note})"
    return text


def _lookup_meaning(key_arg: str, kind: str) -> Callable[[Call], Meaning]:
    def meaning(call: Call) -> Meaning:
        verdict = call.data.get("memory")
        if not call.ok or verdict not in ("hit", "miss"):
            return NOTHING
        key = scrub.mask(str(call.args.get(key_arg) or ""))  # recorded as an event: never a key in it
        return Meaning(lookups=(Lookup(key, verdict == "hit", kind),))

    return meaning


def _impact(inv: Invocation, symbol: str) -> ToolResult:
    """The language server's references first, when one runs for the definition's language (marked
    [lsp]); then the map's other matches, marked [map] (attributed) or [map, name-only]."""
    inv.services.reindex()
    hits = inv.services.kmap.impact(as_text("symbol", symbol))
    served, server, note = lspcheck.references(inv, symbol, [h.path for h in hits])
    lines = [f"{loc.path}:{loc.line} in {enclosing} [{server}]" for loc, enclosing in served]
    seen = {(loc.path, loc.line) for loc, _ in served}
    for h in hits:  # real references first (the map sorts them so too)
        if (h.path, h.line) in seen:
            continue
        mark = "" if not server else " [map, name-only]" if h.evidence == "name-only" else " [map]"
        lines.append(f"{h.path}:{h.line} in {h.enclosing or '<module>'} ({h.kind}" + (f" of {h.target}" if h.target else "")
                     + ")" + (" [name-only]" if h.evidence == "name-only" and not server else mark))
    if note:
        lines.append(f"({note}; the map's matches only)")
    if not served and not hits:
        return ToolResult(f"no references to {symbol} in the knowledge map", data={"hits": 0, "memory": "miss"})
    return ToolResult(cap("\n".join(lines)), data={"hits": len(lines), "memory": "hit", "lsp": len(served)})


def _find(inv: Invocation, query: str, at: Any = None) -> ToolResult:
    inv.services.reindex()
    query = as_text("query", query)
    head, found = "", 0
    if at is not None:
        locations, server, note = lspcheck.definition(inv, query, as_text("at", at))
        found = len(locations)
        head = "\n".join(f"definition: {lspcheck.defined_as(inv, loc)} [{server}]" for loc in locations)
        if not locations:
            head = f"(no definition of {query} at {at} from the language server: {note or 'none found'})"
        head += "\n"
    result = inv.services.kmap.find(query)
    return ToolResult(cap(head + render_find(result)),
                      data={"hits": len(result.hits) + found, "memory": "hit" if result.hits or found else "miss"})


def _lsp_skip(call: Call) -> str | None:
    if any(f"[{name}]" in call.text for name in SERVER_NAMES) or "from the language server" in call.text:
        return "asked a language server"
    return None


def _find_skip(call: Call) -> str | None:
    if "[semantic]" in call.text or "(tier two failed:" in call.text:
        return "used the model (semantic search)"
    return _lsp_skip(call)


def _find_comparable(text: str) -> str:
    """The verifier runs without a model: tier one's hits are what is compared."""
    return "\n".join(line for line in text.splitlines() if line.strip() != _NO_MODEL_NOTE)


_NAMED_SKIPS = 20  # files named in grep's "not searched" note; the rest are counted


def _in_scope(rel: str, scope: str) -> bool:
    return not scope or rel == scope or rel.startswith(scope.rstrip("/") + "/")


def _not_searched(skipped: list[tuple[str, str]]) -> str:
    """Every file grep did not look at, so that "no match" never hides one: the first few by name."""
    if not skipped:
        return ""
    rows = [f"  {rel}: {why}" for rel, why in skipped[:_NAMED_SKIPS]]
    if len(skipped) > _NAMED_SKIPS:
        rows.append(f"  ... and {len(skipped) - _NAMED_SKIPS} more (a narrower path names them)")
    return f"\n[{len(skipped)} file(s) not searched:\n" + "\n".join(rows) + "]"


def _grep(inv: Invocation, pattern: str, path: str = "", ignore_case: Any = False) -> ToolResult:
    """The indexed files and those the map left out as too large (streamed, within grep's own limits);
    every other file the map skipped is named with its reason."""
    inv.services.reindex()
    scope = ""
    if path:
        _, scope = confine(inv.services.root, as_text("path", path), inv.services.private)
    files = [f.path for f in inv.services.kmap.files() if _in_scope(f.path, scope)]
    skipped = []
    for row in inv.services.kmap.skipped():
        if not _in_scope(row["path"], scope):
            continue
        if row["reason"] == "too_large":
            files.append(row["path"])
        else:
            outside = row["reason"] == "outside_root"  # named, but not where it leads
            detail = "a symlink out of the workspace" if outside else row["detail"]
            skipped.append((row["path"], f"{row['reason'].replace('_', ' ')} ({detail})"))
    hits, truncated, unread = grep(inv.services.root, as_text("pattern", pattern), sorted(files),
                                   ignore_case=bool(ignore_case), private=inv.services.private)
    skipped = sorted(skipped + unread)
    text = "\n".join(f"{h.path}:{h.line}: {h.text}" for h in hits) or f"no match for {pattern!r}"
    if truncated:
        text += "\n[more matches cut; narrow the pattern or the path]"
    return ToolResult(cap(text) + _not_searched(skipped), data={"hits": len(hits), "not_searched": len(skipped)})


TOOLS = [
    Tool("impact", "Every call site and reference of a symbol (name, Class.method or path:name): "
         "file:line and the enclosing symbol; the language server's references first when one runs.",
         params(["symbol"], symbol=STR), _impact, QUERY,
         meaning=_lookup_meaning("symbol", "impact"), verify=RECOMPUTE, verify_skip=_lsp_skip),
    Tool("find", "Find files and symbols by name or path (exact, prefix, fuzzy; by meaning when few match). "
         "With at=path:line, first the definition of the name query as used on that line (language server).",
         params(["query"], query=STR, at=STR), _find, QUERY, meaning=_lookup_meaning("query", "find"), verify=RECOMPUTE,
         verify_skip=_find_skip, comparable=_find_comparable),
    Tool("grep", "Regex search over the workspace's text files; path limits it to a file or folder. "
         "Returns path:line: text, then the files it did not search and why (binary, secrets, unreadable).",
         params(["pattern"], pattern=STR, path=STR, ignore_case=BOOL), _grep, QUERY, verify=RECOMPUTE),
]
