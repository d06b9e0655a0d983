"""Map queries: impact (call sites and references of a symbol), find (files and symbols by name),
grep (regex over the workspace's indexed text files). Each runs the staleness gate first."""

from __future__ import annotations

from typing import Any

from ...fsutil import confine
from ..filetools import grep
from .base import (BOOL, NOTHING, QUERY, RECOMPUTE, STR, Call, Lookup, Meaning, Tool, ToolContext, ToolResult,
                   as_text, cap, params)

_NO_MODEL_NOTE = "(tier one only: no model configured for semantic search)"


def render_find(result) -> str:
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


def _lookup_meaning(key_arg: str, kind: str):
    def meaning(call: Call) -> Meaning:
        verdict = call.data.get("memory")
        if not call.ok or verdict not in ("hit", "miss"):
            return NOTHING
        return Meaning(lookups=(Lookup(str(call.args.get(key_arg) or ""), verdict == "hit", kind),))

    return meaning


def _impact(ctx: ToolContext, symbol: str) -> ToolResult:
    ctx.reindex()
    hits = ctx.kmap.impact(as_text("symbol", symbol))
    if not hits:
        return ToolResult(f"no references to {symbol} in the knowledge map", data={"hits": 0, "memory": "miss"})
    lines = [f"{h.path}:{h.line} in {h.enclosing or '<module>'} ({h.kind}"
             + (f" of {h.target}" if h.target else "") + ")" for h in hits]
    return ToolResult(cap("\n".join(lines)), data={"hits": len(hits), "memory": "hit"})


def _find(ctx: ToolContext, query: str) -> ToolResult:
    ctx.reindex()
    result = ctx.kmap.find(as_text("query", query))
    return ToolResult(cap(render_find(result)),
                      data={"hits": len(result.hits), "memory": "hit" if result.hits else "miss"})


def _find_skip(call: Call) -> str | None:
    if "[semantic]" in call.text or "(tier two failed:" in call.text:
        return "used the model (semantic search)"
    return None


def _find_comparable(text: str) -> str:
    """The verifier runs without a model: tier one's hits are what is compared."""
    return "\n".join(line for line in text.splitlines() if line.strip() != _NO_MODEL_NOTE)


def _grep(ctx: ToolContext, pattern: str, path: str = "", ignore_case: Any = False) -> ToolResult:
    ctx.reindex()
    files = [f.path for f in ctx.kmap.files()]
    if path:
        _, rel = confine(ctx.root, as_text("path", path), ctx.private)
        if rel:
            files = [f for f in files if f == rel or f.startswith(rel.rstrip("/") + "/")]
    hits, truncated = grep(ctx.root, as_text("pattern", pattern), files, ignore_case=bool(ignore_case),
                           private=ctx.private)
    text = "\n".join(f"{h.path}:{h.line}: {h.text}" for h in hits) or f"no match for {pattern!r}"
    if truncated:
        text += "\n[more matches cut; narrow the pattern or the path]"
    return ToolResult(cap(text), data={"hits": len(hits)})


TOOLS = [
    Tool("impact", "Every call site and reference of a symbol (name, Class.method or path:name): "
         "file:line and the enclosing symbol.", params(["symbol"], symbol=STR), _impact, QUERY,
         meaning=_lookup_meaning("symbol", "impact"), verify=RECOMPUTE),
    Tool("find", "Find files and symbols by name or path (exact, prefix, fuzzy; by meaning when few match).",
         params(["query"], query=STR), _find, QUERY, meaning=_lookup_meaning("query", "find"), verify=RECOMPUTE,
         verify_skip=_find_skip, comparable=_find_comparable),
    Tool("grep", "Regex search over the workspace's indexed text files; path limits it to a file or folder. "
         "Returns path:line: text.", params(["pattern"], pattern=STR, path=STR, ignore_case=BOOL), _grep, QUERY,
         verify=RECOMPUTE),
]
