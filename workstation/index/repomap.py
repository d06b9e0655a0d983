"""Maps that fit a token budget: one file's skeleton, or the whole repository ranked.

File map: header (path, language, lines, purpose), dependencies, dependants
and the symbol skeleton with line ranges. By default it may cost 2% of the
file's own tokens (at least 256 for files under 1,000 lines, where 2% would
say almost nothing); top-level symbols win over nested ones when it must cut.

Repository map: files ranked by PageRank over the reference graph (file A
refers to a name that file B defines, weighted as Aider does: sqrt of the
count, split between same-named definitions, imports confirming the edge
count ten times), then each file's rank shared out among the symbols the
others refer to. The longest prefix of that ranking whose rendering fits the
budget is shown; the result is counted and never exceeds it.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import tokens as tok
from ..errors import WorkstationError
from ..store.broker import readonly

if TYPE_CHECKING:
    from .map import KnowledgeMap

FILE_MAP_SHARE = 0.02
SMALL_FILE_LINES = 1000
SMALL_FILE_FLOOR = 256
SIGNATURE_CHARS = 100
_MINOR_KINDS = frozenset({"constant", "variable", "field", "macro"})
DAMPING = 0.85
BASELINE_SHARE = 0.2  # part of a file's rank its top-level symbols get, referred to or not
_COMMON_NAMES = frozenset(dir(builtins)) | {
    "get", "set", "add", "run", "main", "init", "list", "dict", "str", "len", "keys", "items", "values",
    "update", "close", "open", "read", "write", "name", "value", "data", "copy", "append", "format"}


@dataclass
class FileMap:
    path: str
    language: str | None
    kind: str
    line_count: int
    purpose: str
    purpose_source: str
    has_errors: bool
    dependencies: list[dict]  # {'module', 'target', 'line'}
    dependants: list[str]
    symbols: list[dict]  # every symbol: name, qualname, kind, parent, signature, start_line, end_line
    budget: int
    text: str = ""
    tokens: int = 0
    omitted: int = 0  # symbols left out to fit the budget

    def render(self) -> str:
        return self.text

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in (
            "path", "language", "kind", "line_count", "purpose", "purpose_source", "has_errors",
            "dependencies", "dependants", "symbols", "budget", "tokens", "omitted", "text")}


def default_budget(file_tokens: int, line_count: int) -> int:
    share = int(file_tokens * FILE_MAP_SHARE)
    if line_count >= SMALL_FILE_LINES:
        return max(share, 1)
    return max(share, SMALL_FILE_FLOOR)


def _symbol_line(sym: dict, depth: int) -> str:
    sig = sym["signature"] or f"{sym['kind']} {sym['name']}"
    if len(sig) > SIGNATURE_CHARS:
        sig = sig[:SIGNATURE_CHARS - 3] + "..."
    if sym.get("context"):
        sig = f"{sym['context']}: {sig}"
    start, end = sym["start_line"], sym["end_line"]
    span = f"{start}" if start == end else f"{start}-{end}"
    return f"{'  ' * depth}{span} {sig}"


def _fit(lines: list[str], budget: int) -> str | None:
    text = "\n".join(lines)
    return text if tok.count(text) <= budget else None


def file_map(km: KnowledgeMap, rel: str, tokens: int | None = None) -> FileMap:
    row = km.db.call(_file_row, rel)
    if row is None:
        files, skipped = km.db.call(_why_missing, rel)
        if skipped:
            raise WorkstationError(f"{rel} is not in the knowledge map: skipped ({skipped[0]}: {skipped[1]})")
        raise WorkstationError(f"{rel} is not in the knowledge map (no such file, or ignored)")
    path, language, kind, line_count, purpose, purpose_source, has_errors, sha = row
    symbols, deps, dependants = km.db.call(_file_details, rel)
    sym_dicts = [dict(zip(("name", "qualname", "kind", "parent", "signature", "start_line", "end_line"), s))
                 for s in symbols]
    if tokens is None:
        tokens = default_budget(_file_tokens(km, rel, sha), line_count)
    check_budget(tokens)
    fm = FileMap(path, language, kind, line_count, purpose, purpose_source, bool(has_errors),
                 [{"module": m, "target": t, "line": ln} for m, t, ln in deps], list(dependants),
                 sym_dicts, tokens)
    _render_file_map(fm)
    return fm


def _file_tokens(km: KnowledgeMap, rel: str, sha: str) -> int:
    def build() -> int:
        try:
            with open(km.root / rel, "rb") as fh:
                return tok.count(fh.read().decode("utf-8", "replace"))
        except OSError:
            return 0
    return km.cached(f"file-tokens:{rel}:{sha}", build)


def _capped_list(label: str, items: list[str], max_tokens: int) -> str:
    """'label: a, b, c (+N more)' with as many items as fit in `max_tokens`."""
    if not items:
        return ""
    shown: list[str] = []
    for item in items:
        rest = len(items) - len(shown) - 1
        candidate = f"{label}: " + ", ".join(shown + [item]) + (f" (+{rest} more)" if rest else "")
        if tok.count(candidate) > max_tokens:
            break
        shown.append(item)
    if not shown:
        return ""
    rest = len(items) - len(shown)
    return f"{label}: " + ", ".join(shown) + (f" (+{rest} more)" if rest else "")


def _is_private(qualname: str) -> bool:
    return any(part.startswith("_") and not (part.startswith("__") and part.endswith("__"))
               for part in qualname.split("."))


def _render_file_map(fm: FileMap) -> None:
    budget = fm.budget
    head = f"{fm.path} ({fm.language or fm.kind}, {fm.line_count} lines)"
    if fm.has_errors:
        head += " [syntax errors]"
    if fm.purpose:
        head += f": {fm.purpose}"
    while tok.count(head) > budget and len(head) > 1:  # a tiny budget gets a cut header
        head = head[: max(1, len(head) * 2 // 3)]
    if tok.count(head) > budget:
        fm.text, fm.tokens, fm.omitted = "", 0, len(fm.symbols)
        return
    resolved = [d["target"] for d in fm.dependencies if d["target"]]
    external = sorted({d["module"] for d in fm.dependencies if not d["target"]})
    deps_line = _capped_list("imports", list(dict.fromkeys(resolved + external)), budget // 4)
    used_line = _capped_list("used by", fm.dependants, budget // 8)
    top = [head] + [line for line in (deps_line, used_line) if line]

    depth: dict[str, int] = {}
    for sym in fm.symbols:
        depth[sym["qualname"]] = 0 if sym["parent"] is None else depth.get(sym["parent"], 0) + 1
    # what survives a cut: public before private, definitions before constants,
    # shallow before deep, big before small
    priority = sorted(range(len(fm.symbols)), key=lambda i: (
        _is_private(fm.symbols[i]["qualname"]), fm.symbols[i]["kind"] in _MINOR_KINDS,
        depth[fm.symbols[i]["qualname"]],
        fm.symbols[i]["start_line"] - fm.symbols[i]["end_line"], i))
    sym_lines = {i: _symbol_line(fm.symbols[i], depth[fm.symbols[i]["qualname"]]) for i in priority}

    def compose(chosen: set[int]) -> str:
        lines = top + [sym_lines[i] for i in range(len(fm.symbols)) if i in chosen]
        left = len(fm.symbols) - len(chosen)
        if left and chosen:
            lines.append(f"(+{left} more symbols)")
        return "\n".join(lines)

    whole = compose(set(range(len(fm.symbols))))
    if (size := tok.count(whole)) <= budget:  # it all fits: no room kept for a "+N more" line, no cut
        fm.text, fm.tokens, fm.omitted = whole, size, 0
        return
    chosen: set[int] = set()
    spent = tok.count(compose(chosen)) + 8  # room for the "+N more" line
    for i in priority:
        cost = tok.count(sym_lines[i]) + 1
        if spent + cost <= budget:
            chosen.add(i)
            spent += cost
    # per-line counts approximate the whole: verify, and shed the least important until it fits
    shed = [i for i in reversed(priority) if i in chosen]
    text = compose(chosen)
    while tok.count(text) > budget:
        if shed:
            chosen.discard(shed.pop(0))
        elif len(top) > 1:
            top.pop()
        else:
            break
        text = compose(chosen)
    fm.text = text
    fm.tokens = tok.count(text)
    fm.omitted = len(fm.symbols) - len(chosen)


@readonly
def _file_row(con, rel: str):
    return con.execute(
        """SELECT path, language, kind, line_count, purpose, purpose_source, has_errors, sha256
           FROM kmap.files WHERE path = ?""", [rel]).fetchone()


@readonly
def _why_missing(con, rel: str):
    skipped = con.execute("SELECT reason, detail FROM kmap.skipped WHERE path = ?", [rel]).fetchone()
    return None, skipped


@readonly
def _file_details(con, rel: str):
    symbols = con.execute(
        """SELECT name, qualname, kind, parent, signature, start_line, end_line FROM kmap.symbols
           WHERE path = ? ORDER BY start_line, end_line DESC""", [rel]).fetchall()
    deps = con.execute("SELECT module, target, line FROM kmap.deps WHERE path = ? ORDER BY line",
                       [rel]).fetchall()
    dependants = [r[0] for r in con.execute(
        "SELECT DISTINCT path FROM kmap.deps WHERE target = ? AND path <> ? ORDER BY path", [rel, rel]).fetchall()]
    return symbols, deps, dependants


# ---------------------------------------------------------------------------------------
# Repository map

@dataclass
class Ranking:
    files: list[tuple[str, float]]  # (path, rank), best first
    symbols: dict[str, list[tuple[float, tuple]]] = field(default_factory=dict)  # path -> [(score, symbol row)]


def pagerank(nodes: list[str], edges: dict[tuple[str, str], float], damping: float = DAMPING,
             iterations: int = 100, tol: float = 1e-9) -> dict[str, float]:
    """Weighted PageRank by power iteration; dangling nodes spread their rank evenly."""
    n = len(nodes)
    if n == 0:
        return {}
    index = {node: i for i, node in enumerate(nodes)}
    out_weight = [0.0] * n
    links: list[tuple[int, int, float]] = []
    for (src, dst), w in edges.items():
        if w > 0 and src in index and dst in index and src != dst:
            links.append((index[src], index[dst], w))
            out_weight[index[src]] += w
    rank = [1.0 / n] * n
    for _ in range(iterations):
        dangling = sum(rank[i] for i in range(n) if out_weight[i] == 0)
        base = (1.0 - damping) / n + damping * dangling / n
        new = [base] * n
        for s, d, w in links:
            new[d] += damping * rank[s] * w / out_weight[s]
        delta = sum(abs(a - b) for a, b in zip(new, rank))
        rank = new
        if delta < tol * n:
            break
    return {node: rank[i] for node, i in index.items()}


def _edge_weight(src: str, dst: str, name: str, weight: float, imports: set) -> float:
    """How much one file's references to a name defined in another say about that other file."""
    imported = (src, dst) in imports
    if name.startswith("__") and name.endswith("__"):
        return 0.0  # dunders are called by the language, not named by the code
    if len(name) < 4 or name in _COMMON_NAMES:
        return weight * 0.1 if imported else 0.0  # builtin-like names say nothing without an import
    if imported:
        weight *= 10.0  # the import confirms which definition is meant
    if name.startswith("_"):
        weight *= 0.1
    return weight


def rank_repository(km: KnowledgeMap) -> Ranking:
    nodes, name_edges, import_edges, symbols = km.db.call(_graph_rows)
    imports = set(import_edges)
    file_edges: dict[tuple[str, str], float] = {}
    weighted = []
    for src, dst, name, weight in name_edges:
        w = _edge_weight(src, dst, name, weight, imports)
        if w <= 0:
            continue
        weighted.append((src, dst, name, w))
        file_edges[(src, dst)] = file_edges.get((src, dst), 0.0) + w
    for src, dst in imports:  # an import with no resolved reference still says something
        file_edges[(src, dst)] = file_edges.get((src, dst), 0.0) + 0.5
    rank = pagerank(nodes, file_edges)
    out_total: dict[str, float] = {}
    for (src, _dst), w in file_edges.items():
        out_total[src] = out_total.get(src, 0.0) + w
    # share each referring file's rank among the names it refers to (Aider's definition rank)
    name_score: dict[tuple[str, str], float] = {}
    for src, dst, name, w in weighted:
        key = (dst, name)
        name_score[key] = name_score.get(key, 0.0) + rank.get(src, 0.0) * w / out_total[src]
    top_level: dict[str, int] = {}
    for row in symbols:
        if row[4] is None:
            top_level[row[0]] = top_level.get(row[0], 0) + 1
    by_file: dict[str, list[tuple[float, tuple]]] = {}
    for row in symbols:
        path, name, qualname, kind, parent, signature, start, end = row
        score = name_score.get((path, name), 0.0)
        if parent is None:  # a file's top level shows through even when nothing names it
            score += BASELINE_SHARE * rank.get(path, 0.0) / top_level[path]
        by_file.setdefault(path, []).append((score, row))
    files = sorted(rank.items(), key=lambda kv: (-kv[1], kv[0]))
    return Ranking(files, by_file)


def check_budget(tokens: int) -> None:
    """A token budget is a whole number of at least 1 (nothing fits in 0: an error, not an empty map)."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise WorkstationError(f"token budget must be a whole number of at least 1, got {tokens!r}")


def repo_map(km: KnowledgeMap, budget: int = 1024) -> str:
    check_budget(budget)
    ranking: Ranking = km.cached("repo-ranking", lambda: rank_repository(km))
    if not ranking.files:
        return ""
    entries: list[tuple[float, str, tuple]] = [
        (score, path, row) for path, _rank in ranking.files for score, row in ranking.symbols.get(path, ())]
    entries.sort(key=lambda e: (-e[0], e[1], e[2][6]))
    file_rank = dict(ranking.files)
    total_files = len(ranking.files)

    def render(count: int) -> str:
        chosen: dict[str, list[tuple]] = {}
        for _score, path, row in entries[:count]:
            chosen.setdefault(path, []).append(row)
        lines = [f"Repository map: {len(chosen)} of {total_files} files, most referenced first"]
        for path in sorted(chosen, key=lambda p: (-file_rank.get(p, 0.0), p)):
            lines.append(f"{path}:")
            for row in sorted(chosen[path], key=lambda r: (r[6], r[2])):
                sym = {"name": row[1], "kind": row[3], "signature": row[5], "start_line": row[6],
                       "end_line": row[7], "context": row[4]}
                lines.append(_symbol_line(sym, 1))
        return "\n".join(lines)

    # every entry adds a line, so at least one token: no prefix longer than the budget fits
    lo, hi, best = 1, min(len(entries), budget), ""
    while lo <= hi:  # the longest prefix of the ranking that fits
        mid = (lo + hi) // 2
        text = render(mid)
        if tok.count(text) <= budget:
            best, lo = text, mid + 1
        else:
            hi = mid - 1
    return best


@readonly
def _graph_rows(con):
    nodes = [r[0] for r in con.execute("SELECT path FROM kmap.files ORDER BY path").fetchall()]
    name_edges = con.execute(
        """WITH defs AS (SELECT DISTINCT name, path FROM kmap.symbols WHERE length(name) > 1),
                counted AS (SELECT name, path, count(*) OVER (PARTITION BY name) AS ndef FROM defs),
                uses AS (SELECT path AS src, name, count(*) AS n FROM kmap.refs GROUP BY path, name)
           SELECT u.src, c.path, u.name, sqrt(u.n) / c.ndef
           FROM uses u JOIN counted c ON u.name = c.name
           WHERE u.src <> c.path AND c.ndef <= 12""").fetchall()
    import_edges = con.execute(
        "SELECT DISTINCT path, target FROM kmap.deps WHERE target IS NOT NULL AND target <> path").fetchall()
    symbols = con.execute(
        "SELECT path, name, qualname, kind, parent, signature, start_line, end_line FROM kmap.symbols").fetchall()
    return nodes, name_edges, import_edges, symbols
