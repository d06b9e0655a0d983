"""Answers over the knowledge map: `find` (two tiers) and `impact`.

find, tier one: exact, prefix and fuzzy (rapidfuzz) matches over symbol names
and paths; a fuzzy match must be most of the query's length, so a sentence
does not match the short names inside it. Tier two runs only when tier one
found fewer than two results and a model is configured: the model ranks
candidate files and symbols by meaning.

impact: every reference to a name, attributed to a definition where the
referring file's own definitions and imports tell which one it means.
Callers go through KnowledgeMap, which runs the staleness gate first.
"""

from __future__ import annotations

import bisect
import math
import posixpath
import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Iterable

from .. import scrub, tokens as tok
from ..errors import WorkstationError
from ..providers import spec_for
from ..store.broker import readonly

if TYPE_CHECKING:
    from ..config import Config
    from ..llm import ModelSpec
    from .map import KnowledgeMap

FUZZY_CUTOFF = 86  # rapidfuzz WRatio; lower lets near-everything in for short queries
MIN_COVER = 0.6  # a fuzzy match is at least this share of the query's length (see _fuzzy)
SEMANTIC_CANDIDATES = 120
STABLE_CANDIDATES = 80  # of them the same for every query, listed first (_tier_two)
MATCHING_BUDGET = 2000  # tokens of the 6,000 kept for the candidates the query's words pick
_MATCH_ORDER = {"exact": 0, "prefix": 1, "fuzzy": 2, "semantic": 3}


@dataclass(frozen=True)
class FindHit:
    kind: str  # 'symbol' or 'file'
    path: str
    name: str  # qualified symbol name, or the path for a file
    symbol_kind: str | None
    start_line: int | None
    end_line: int | None
    match: str  # 'exact' | 'prefix' | 'fuzzy' | 'semantic'
    score: float
    detail: str  # signature of a symbol, purpose of a file

    @property
    def location(self) -> str:
        return f"{self.path}:{self.start_line}" if self.start_line else self.path


@dataclass
class FindResult:
    query: str
    hits: list[FindHit]
    tiers: list[str]  # tiers that ran: 'names', 'semantic'
    note: str | None = None  # why tier two did not run or failed

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ImpactHit:
    path: str
    line: int
    enclosing: str | None  # qualified name of the symbol the reference sits in
    kind: str  # 'call', 'ref' or 'attr' (a member read: `x.name`)
    target: str | None  # 'path:qualname' of the definition it refers to, when known
    evidence: str  # 'same-file' | 'import' | 'unique' | 'name-only' (the name alone: maybe another thing)

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}"


# ---------------------------------------------------------------------------------------
# find

def find(km: KnowledgeMap, query: str, limit: int = 20) -> FindResult:
    # a key in the query (pasted, or the model's from a file it read) goes to no model, no record: the
    # map holds its keys masked anyway, so nothing is lost
    q = scrub.mask(" ".join(query.split()))
    if not q:
        raise WorkstationError("find needs a query")
    if limit < 1:
        raise WorkstationError(f"limit must be at least 1, got {limit}")
    hits = _tier_one(km, q, limit)
    result = FindResult(q, hits, ["names"])
    if len(hits) >= 2:
        return result
    spec = model_spec(km.config)
    if spec is None:
        result.note = "tier one only: no model configured for semantic search"
        return result
    from ..llm import LLMError  # lazy: workstation.llm, +21 ms on every find and impact

    try:
        semantic = _tier_two(km, q, limit, spec)
    except LLMError as err:
        result.note = f"tier two failed: {err}"
        return result
    result.tiers.append("semantic")
    seen = {(h.path, h.name) for h in hits}
    result.hits = hits + [h for h in semantic if (h.path, h.name) not in seen][: max(0, limit - len(hits))]
    return result


def model_spec(config: Config) -> ModelSpec | None:
    """The ModelSpec of the configured model, or None when there is none (the one provider rule)."""
    return spec_for(config.model)


def _tier_one(km: KnowledgeMap, q: str, limit: int) -> list[FindHit]:
    from rapidfuzz import utils  # lazy: rapidfuzz, +44 ms on impact, which never matches fuzzily

    found: dict[tuple, FindHit] = {}

    def add(hit: FindHit) -> None:
        key = (hit.kind, hit.path, hit.name, hit.start_line)
        old = found.get(key)
        if old is None or (_MATCH_ORDER[hit.match], -hit.score) < (_MATCH_ORDER[old.match], -old.score):
            found[key] = hit

    for row in km.db.call(_symbols_matching, q, limit * 5):
        path, name, qualname, kind, signature, start, end, match, score = row
        add(FindHit("symbol", path, qualname, kind, start, end, match, float(score), signature))
    for path, purpose, match, score in km.db.call(_files_matching, q, limit * 5):
        add(FindHit("file", path, path, None, None, None, match, float(score), purpose))

    names, qualnames, basenames, paths = km.cached("find-choices", lambda: _prepare(*km.db.call(_choices)))
    wanted = limit * 3
    qp = utils.default_process(q)
    fuzzy_names = _fuzzy(qp, names, wanted)
    for name, score in _typos(qp, names, wanted).items():  # `clinet` is `client`, which WRatio scores 83
        fuzzy_names[name] = max(fuzzy_names.get(name, 0), score)
    # a dotted query may misspell the class too: match whole qualified names as well
    fuzzy_quals = _fuzzy(qp, qualnames, wanted) if "." in q else {}
    if fuzzy_names or fuzzy_quals:
        for row in km.db.call(_symbols_named, list(fuzzy_names), list(fuzzy_quals), limit * 5):
            path, name, qualname, kind, signature, start, end = row
            score = max(fuzzy_names.get(name, 0), fuzzy_quals.get(qualname, 0))
            add(FindHit("symbol", path, qualname, kind, start, end, "fuzzy", float(score), signature))
    for path, score in _fuzzy(qp, basenames, wanted).items():
        add(FindHit("file", path, path, None, None, None, "fuzzy", float(score), ""))
    if "/" in q:
        for path, score in _fuzzy(qp, paths, wanted).items():
            add(FindHit("file", path, path, None, None, None, "fuzzy", float(score), ""))
    ordered = sorted(found.values(), key=lambda h: (_MATCH_ORDER[h.match], -h.score, h.path, h.start_line or 0))
    return ordered[:limit]


@dataclass(frozen=True)
class _Choices:
    """Strings to fuzzy-match, processed once and sorted by processed length."""

    processed: list[str]
    lengths: list[int]
    items: list[str]  # what each one stands for: a name, or the path of a basename


def _prepare(names: list[str], qualnames: list[str], paths: list[str]) -> tuple[_Choices, ...]:
    from rapidfuzz import utils  # lazy: rapidfuzz, +44 ms on impact, which never matches fuzzily

    def choices(keys: list[str], items: list[str]) -> _Choices:  # no Python call per key: 40,000 in ~20 ms
        processed = list(map(utils.default_process, keys))
        lengths = list(map(len, processed))
        order = sorted(range(len(processed)), key=lengths.__getitem__)  # stable: ties keep the query's order
        return _Choices([processed[i] for i in order], [lengths[i] for i in order], [items[i] for i in order])

    return (choices(names, names), choices(qualnames, qualnames),
            choices([posixpath.basename(p) for p in paths], paths), choices(paths, paths))


def _fuzzy(qp: str, choices: _Choices, limit: int) -> dict[str, float]:
    """item -> score of the choices close to the processed query `qp`.

    A choice shorter than MIN_COVER of the query is left out: WRatio scores a
    string found inside a longer one about 90, so `get` would match
    "token budget". The other way round (a fragment of a longer name) is kept.
    """
    from rapidfuzz import fuzz, process  # lazy: rapidfuzz, +44 ms on impact, which never matches fuzzily

    start = bisect.bisect_left(choices.lengths, math.ceil(len(qp) * MIN_COVER))
    found = process.extract(qp, choices.processed[start:], scorer=fuzz.WRatio,
                            score_cutoff=FUZZY_CUTOFF, limit=limit)
    return {choices.items[start + i]: score for _c, score, i in found}


def _typos(qp: str, choices: _Choices, limit: int) -> dict[str, float]:
    """item -> score of the choices a typo or two away from `qp` (transposed, missing, extra or wrong
    letters, counted by optimal string alignment): one for a query of 4 to 7 characters, two from 8.
    Scored as FUZZY_CUTOFF and up, so they rank with the fuzzy matches."""
    from rapidfuzz import process  # lazy: rapidfuzz, +44 ms on impact, which never matches fuzzily
    from rapidfuzz.distance import OSA  # lazy: as above

    if len(qp) < 4:
        return {}
    most = 1 if len(qp) < 8 else 2
    start = bisect.bisect_left(choices.lengths, len(qp) - most)
    end = bisect.bisect_right(choices.lengths, len(qp) + most)
    found = process.extract(qp, choices.processed[start:end], scorer=OSA.distance, score_cutoff=most,
                            limit=limit)
    return {choices.items[start + i]: FUZZY_CUTOFF + (100 - FUZZY_CUTOFF) * (1 - d / (most + 1))
            for _c, d, i in found}


_WORD_RE = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|\d+")


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD_RE.findall(text) if len(w) > 2}


def _tier_two(km: KnowledgeMap, q: str, limit: int, spec: ModelSpec) -> list[FindHit]:
    from ..llm import complete  # lazy: workstation.llm, +21 ms on every find and impact

    rows = km.cached("semantic-candidates", lambda: km.db.call(_semantic_rows))
    qwords = _words(q)

    def overlap(row: tuple) -> int:
        return len(qwords & _words(" ".join(str(x) for x in (row[1], row[2], row[6]) if x)))

    # the same candidates first for every query (the prompt's prefix a provider caches), then those whose
    # words the query shares, best first, then the query: only the end of the prompt differs between finds
    stable = sorted(rows, key=lambda r: (r[0] != "file", r[1], r[4] or 0, r[2]))[:STABLE_CANDIDATES]
    chosen = {id(r) for r in stable}
    matching = sorted((r for r in rows if id(r) not in chosen and overlap(r)), key=lambda r: (-overlap(r), r[1]))
    ranked: list[tuple] = []
    blocks: tuple[list[str], list[str]] = ([], [])
    budget = 6000
    for block, part, floor in ((blocks[0], stable, MATCHING_BUDGET), (blocks[1], matching, 0)):
        for row in part:
            kind, path, name, skind, start, end, detail = row
            i = len(ranked) + 1
            if kind == "file":
                line = f"{i}. file {path} — {detail}" if detail else f"{i}. file {path}"
            else:
                line = f"{i}. {skind} {name} in {path}:{start} — {detail}"
            size = tok.count(line) + 1
            if budget - size < floor or len(ranked) >= SEMANTIC_CANDIDATES:
                break
            budget -= size
            block.append(line)
            ranked.append(row)
    if not ranked:
        return []
    messages = [
        {"role": "system", "content": (
            "You rank code search results. Given numbered candidates (files and symbols of one repository) "
            "and a query, reply with the numbers of the candidates that match the query's meaning, best "
            f"first, one number per line, at most {limit}. Reply NONE if nothing matches. Reply with nothing "
            "else.\n\nCandidates:\n" + "\n".join(blocks[0]))},
        {"role": "user", "content": ("More candidates, for this query:\n" + "\n".join(blocks[1]) + "\n\n"
                                     if blocks[1] else "") + f"Query: {q}"},
    ]
    answer = complete(spec, messages, stream=False).text
    hits: list[FindHit] = []
    seen: set[int] = set()
    for number in re.findall(r"\b(\d+)\b", answer):
        i = int(number)
        if not 1 <= i <= len(ranked) or i in seen:
            continue
        seen.add(i)
        kind, path, name, skind, start, end, detail = ranked[i - 1]
        score = 100.0 - len(hits)
        if kind == "file":
            hits.append(FindHit("file", path, path, None, None, None, "semantic", score, detail or ""))
        else:
            hits.append(FindHit("symbol", path, name, skind, start, end, "semantic", score, detail or ""))
    return hits[:limit]


@readonly
def _symbols_matching(con, q: str, limit: int) -> list[tuple]:
    return con.execute(
        """SELECT path, name, qualname, kind, signature, start_line, end_line,
                  CASE WHEN name = $q OR qualname = $q THEN 'exact'
                       WHEN lower(name) = lower($q) OR lower(qualname) = lower($q) THEN 'exact'
                       ELSE 'prefix' END AS match,
                  CASE WHEN name = $q OR qualname = $q THEN 100
                       WHEN lower(name) = lower($q) OR lower(qualname) = lower($q) THEN 95
                       ELSE 90 - least(length(name) - length($q), 30) / 3 END AS score
           FROM kmap.symbols
           WHERE lower(name) = lower($q) OR lower(qualname) = lower($q)
              OR starts_with(lower(name), lower($q)) OR starts_with(lower(qualname), lower($q))
           ORDER BY score DESC, path, start_line LIMIT $limit""",
        {"q": q, "limit": limit}).fetchall()


@readonly
def _files_matching(con, q: str, limit: int) -> list[tuple]:
    return con.execute(
        """SELECT path, purpose,
                  CASE WHEN path = $q OR lower(parse_filename(path)) = lower($q)
                         OR lower(parse_filename(path, true)) = lower($q) THEN 'exact'
                       ELSE 'prefix' END AS match,
                  CASE WHEN path = $q THEN 100
                       WHEN lower(parse_filename(path)) = lower($q)
                         OR lower(parse_filename(path, true)) = lower($q) THEN 95
                       ELSE 85 END AS score
           FROM kmap.files
           WHERE path = $q OR starts_with(lower(path), lower($q))
              OR starts_with(lower(parse_filename(path)), lower($q))
           ORDER BY score DESC, path LIMIT $limit""",
        {"q": q, "limit": limit}).fetchall()


@readonly
def _choices(con) -> tuple[list[str], list[str], list[str]]:
    """Distinct names, distinct qualified names of nested symbols, and paths, for fuzzy matching."""
    names = [r[0] for r in con.execute("SELECT DISTINCT name FROM kmap.symbols ORDER BY name").fetchall()]
    qualnames = [r[0] for r in con.execute(
        "SELECT DISTINCT qualname FROM kmap.symbols WHERE qualname <> name ORDER BY qualname").fetchall()]
    paths = [r[0] for r in con.execute("SELECT path FROM kmap.files ORDER BY path").fetchall()]
    return names, qualnames, paths


@readonly
def _symbols_named(con, names: list[str], qualnames: list[str], limit: int) -> list[tuple]:
    return con.execute(
        """SELECT path, name, qualname, kind, signature, start_line, end_line FROM kmap.symbols
           WHERE name IN (SELECT unnest($1::VARCHAR[])) OR qualname IN (SELECT unnest($2::VARCHAR[]))
           ORDER BY path, start_line LIMIT $3""",
        [names, qualnames, limit]).fetchall()


@readonly
def _semantic_rows(con) -> list[tuple]:
    files = con.execute(
        """SELECT 'file', path, path, NULL, NULL, NULL, purpose FROM kmap.files
           WHERE kind IN ('code', 'test', 'config', 'doc')""").fetchall()
    symbols = con.execute(
        """SELECT 'symbol', path, qualname, kind, start_line, end_line, signature FROM kmap.symbols
           WHERE parent IS NULL
             AND kind IN ('class', 'function', 'interface', 'struct', 'trait', 'enum', 'type')"""
    ).fetchall()
    return files + symbols


# ---------------------------------------------------------------------------------------
# impact

# Languages whose walker tells a member (`x.status`: 'attr', 'set') from a bare name ('ref'): there a
# bare name is never a method (a local variable called `status` is not `res.status`).
MEMBER_LANGUAGES = frozenset({"python", "javascript", "typescript", "tsx"})
_CALLABLE = frozenset({"function", "method", "class"})


def impact(km: KnowledgeMap, symbol: str) -> list[ImpactHit]:
    """Every reference to `symbol`: a name, a qualified name (`Class.method`) or `path:name`.

    References attributed to a definition (same file, an import, the only definition) come first,
    then those that only share the name ('name-only'). Not references: a member written with a value
    (`err.status = 403`) when the symbol is a function, method or class, and in MEMBER_LANGUAGES a
    bare name when the symbol is a method. A name the map neither defines nor mentions is an error.
    """
    only_path, spec, name = _parse_symbol(km, symbol)
    defs, refs, deps = km.db.call(_impact_rows, name)
    wanted = _wanted(defs, spec, only_path)
    if (only_path is not None or "." in spec or not refs) and not wanted:
        where = f" in {only_path}" if only_path else ""
        raise WorkstationError(f"no symbol {spec}{where} in the knowledge map")
    kinds = {kind for _p, _q, kind in (wanted or defs)}
    callable_ = bool(kinds) and kinds <= _CALLABLE
    method = kinds == {"method"}
    def_paths: dict[str, list[str]] = {}
    for path, qualname, _kind in defs:
        def_paths.setdefault(path, []).append(qualname)
    wanted_keys = {f"{p}:{q}" for p, q, _k in wanted}
    imports: dict[str, list[tuple[str, tuple[str, ...], str | None]]] = {}
    for path, module, names, target in deps:
        imports.setdefault(path, []).append((module, tuple(names), target))

    hits = []
    for path, line, enclosing, kind, language in refs:
        if kind == "set" and callable_:
            continue  # `err.status = 403` gives err a value; it does not use the function
        if kind == "ref" and method and language in MEMBER_LANGUAGES:
            continue  # a bare name: a local variable or a parameter, not the method
        target, evidence = _attribute(path, name, def_paths, imports.get(path, ()))
        if evidence == "other":
            continue  # the file imports this name from somewhere else
        if target is not None and wanted_keys and target not in wanted_keys:
            continue  # another definition of the same name
        if kind == "attr" and callable_:
            target, evidence = None, "name-only"  # `x.status` read: whose status is unknown
        hits.append(ImpactHit(path, line, enclosing, kind, target, evidence))
    hits.sort(key=lambda h: h.evidence == "name-only")  # stable: by path and line within each group
    return hits


def _parse_symbol(km: KnowledgeMap, symbol: str) -> tuple[str | None, str, str]:
    """(path or None, qualified name, bare name) of `name`, `Class.method` or `path:name`."""
    spec = symbol.strip()
    if not spec:
        raise WorkstationError("impact needs a symbol name")
    only_path = None
    if ":" in spec and not spec.startswith(":"):
        only_path, spec = spec.rsplit(":", 1)
        only_path = km.relpath(only_path)
    for sep in ("::", "#", "->"):
        spec = spec.replace(sep, ".")
    name = spec.rsplit(".", 1)[-1]
    if not name:
        raise WorkstationError(f"cannot tell which name {symbol!r} means")
    return only_path, spec, name


def _wanted(defs: list, spec: str, only_path: str | None) -> list:
    return [d for d in defs if (d[1] == spec or d[1].endswith("." + spec) or "." not in spec)
            and (only_path is None or d[0] == only_path)]


def definitions(km: KnowledgeMap, symbol: str) -> list[tuple[str, str, str, int]]:
    """(path, qualname, kind, start line) of each definition `symbol` (as impact reads it) names."""
    only_path, spec, name = _parse_symbol(km, symbol)
    rows = km.db.call(_definition_rows, name)
    return [row for row in rows if _wanted([row[:3]], spec, only_path)]


@readonly
def _definition_rows(con, name: str) -> list[tuple]:
    return con.execute("SELECT DISTINCT path, qualname, kind, start_line FROM kmap.symbols WHERE name = ? "
                       "ORDER BY path, start_line", [name]).fetchall()


def _attribute(path: str, name: str, def_paths: dict[str, list[str]],
               imports: Iterable[tuple[str, tuple[str, ...], str | None]]) -> tuple[str | None, str]:
    """Which definition a reference in `path` means, and on what evidence."""
    local = def_paths.get(path)
    if local:
        return f"{path}:{_best_qualname(local, name)}", "same-file"
    for _module, names, target in imports:
        if target in def_paths:
            if not names or name in names or "*" in names:
                return f"{target}:{_best_qualname(def_paths[target], name)}", "import"
    for _module, names, target in imports:
        if name in names and target not in def_paths:
            return None, "other"  # `from elsewhere import name`
    if len(def_paths) == 1:
        (only, quals), = def_paths.items()
        return f"{only}:{_best_qualname(quals, name)}", "unique"
    return None, "name-only"


def _best_qualname(quals: list[str], name: str) -> str:
    return min(quals, key=lambda q: (q.count("."), q)) if quals else name


@readonly
def _impact_rows(con, name: str) -> tuple[list, list, list]:
    defs = con.execute(
        "SELECT DISTINCT path, qualname, kind FROM kmap.symbols WHERE name = ? ORDER BY path, qualname",
        [name]).fetchall()
    refs = con.execute(
        """SELECT r.path, r.line, r.enclosing, r.kind, f.language FROM kmap.refs r JOIN kmap.files f USING (path)
           WHERE r.name = ? ORDER BY r.path, r.line""", [name]).fetchall()
    deps = con.execute(
        """SELECT path, module, names, target FROM kmap.deps
           WHERE path IN (SELECT DISTINCT path FROM kmap.refs WHERE name = ?)""", [name]).fetchall()
    return defs, refs, deps


@readonly
def dependants(con, rels: list[str]) -> list[str]:
    """The files that import any of `rels` (as the map resolved their imports), by path; use with db.call."""
    if not rels:
        return []
    marks = ", ".join("?" for _ in rels)
    return [r[0] for r in con.execute(
        f"SELECT DISTINCT path FROM kmap.deps WHERE target IN ({marks}) AND path NOT IN ({marks}) ORDER BY path",
        [*rels, *rels]).fetchall()]
