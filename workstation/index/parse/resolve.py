"""Import resolution: where an import points inside the repository, if anywhere.

Used only by the indexer, once a file's imports are parsed: `resolve_import` maps an
import to the repo-relative path it most plausibly names (see its docstring for the
rules per language), `resolve_import_all` to every such path, best first.
"""

from __future__ import annotations

import posixpath
import threading
from typing import Collection

from .model import Import


class _PathIndex:
    """Look-ups over a set of repo-relative paths, built once per set."""

    def __init__(self, paths: Collection[str]):
        self.paths = paths
        self.by_basename: dict[str, list[str]] = {}
        self.dirs: dict[str, list[str]] = {}
        for p in paths:
            d, _, base = p.rpartition("/")
            self.by_basename.setdefault(base, []).append(p)
            self.dirs.setdefault(d, []).append(p)
        for v in self.by_basename.values():
            v.sort()
        for v in self.dirs.values():
            v.sort()
        self._go_dirs: dict[str, list[str]] | None = None
        # (module, names, importer's folder) -> Python resolution: files of one folder
        # share most of their imports, and nothing else of the importer matters
        self.py_cache: dict[tuple, list[str]] = {}

    def with_suffix(self, suffix: str) -> list[str]:
        """Paths equal to suffix or ending with '/' + suffix."""
        base = suffix.rpartition("/")[2]
        tail = "/" + suffix
        return [p for p in self.by_basename.get(base, ()) if p == suffix or p.endswith(tail)]

    def go_dirs(self) -> dict[str, list[str]]:
        """Every trailing part of every directory holding .go files -> those directories."""
        if self._go_dirs is None:
            out: dict[str, list[str]] = {}
            for d, files in self.dirs.items():
                if not any(f.endswith(".go") for f in files):
                    continue
                parts = d.split("/") if d else []
                for i in range(len(parts)):
                    out.setdefault("/".join(parts[i:]), []).append(d)
            self._go_dirs = out
        return self._go_dirs


_index_cache: list[tuple[object, int, _PathIndex]] = []
_index_lock = threading.Lock()


def _path_index(known_paths: Collection[str]) -> _PathIndex:
    n = len(known_paths)
    with _index_lock:
        for obj, size, idx in _index_cache:
            if obj is known_paths and size == n:
                return idx
    idx = _PathIndex(known_paths)
    with _index_lock:
        _index_cache.insert(0, (known_paths, n, idx))
        del _index_cache[4:]
    return idx


def _norm(path: str) -> str | None:
    if not path:
        return ""
    p = posixpath.normpath(path)
    if p == ".":
        return ""
    if p.startswith("../") or p == ".." or p.startswith("/"):
        return None
    return p


def _join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p and p.strip("/"))


def _closest(cands: list[str], importer: str) -> list[str]:
    """Order candidates by how much directory they share with the importer."""
    idir = importer.split("/")[:-1]

    def shared(p: str) -> int:
        n = 0
        for a, b in zip(idir, p.split("/")[:-1]):
            if a != b:
                break
            n += 1
        return n

    return sorted(cands, key=lambda p: (-shared(p), len(p), p))


def _ancestors(importer: str) -> list[str]:
    parts = importer.split("/")[:-1]
    return ["/".join(parts[:i]) for i in range(len(parts), 0, -1)]


def _py_resolve(imp: Import, importer: str, idx: _PathIndex) -> list[str]:
    key = (imp.module, imp.names, importer.rpartition("/")[0])
    found = idx.py_cache.get(key)
    if found is None:
        found = idx.py_cache[key] = _py_resolve_uncached(imp, importer, idx)
    return list(found)


def _py_resolve_uncached(imp: Import, importer: str, idx: _PathIndex) -> list[str]:
    mod = imp.module.strip()
    names = [n for n in imp.names if n and n != "*"]
    if mod.startswith("."):
        dots = len(mod) - len(mod.lstrip("."))
        rest = mod[dots:]
        parts = importer.split("/")[:-1]
        if dots - 1 > len(parts):
            return []
        roots = ["/".join(parts[: len(parts) - (dots - 1)])]
    else:
        rest = mod
        roots = [""]
        for extra in ("src", "lib", "python", "py"):
            roots.append(extra)
        roots.extend(_ancestors(importer))
    segs = [s for s in rest.split(".") if s]
    firsts = [f for f in (name.split(".")[0].strip("/") for name in names)]
    paths = idx.paths
    out: list[str] = []
    seen = set()
    for root in roots:
        base = _join(root, *segs)
        cands = []
        for first in firsts:
            sub = (base + "/" + first if first else base) if base else first  # _join(base, first)
            cands += [sub + ".py", sub + "/__init__.py", sub + ".pyi"]
        if segs:
            cands += [base + ".py", base + "/__init__.py", base + ".pyi", base + "/__init__.pyi"]
        else:
            cands += [_join(base, "__init__.py")]
        for c in cands:
            if c in paths and c not in seen:
                seen.add(c)
                out.append(c)
        if out:
            return out
    return out


_JS_EXTS = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts", ".d.ts", ".vue",
            ".svelte", ".json")


def _js_resolve(imp: Import, importer: str, idx: _PathIndex) -> list[str]:
    spec = imp.module.strip().split("?", 1)[0].split("#", 1)[0]
    if not spec:
        return []
    bases: list[str] = []
    if spec.startswith("."):
        b = _norm(_join(posixpath.dirname(importer), spec) if not spec.startswith("/") else spec)
        if b is None:
            return []
        bases.append(b)
    elif spec.startswith(("@/", "~/")):
        bases += [spec[2:], "src/" + spec[2:]]
    elif spec.startswith("/"):
        bases.append(spec.lstrip("/"))
    elif "/" in spec and not spec.startswith("@"):
        bases += ["src/" + spec, spec]
    else:
        return []
    out: list[str] = []
    for base in bases:
        cands = [base]
        stem, ext = posixpath.splitext(base)
        if ext in (".js", ".jsx", ".mjs", ".cjs"):
            cands += [stem + e for e in (".ts", ".tsx", ".mts", ".cts")]
        cands += [base + e for e in _JS_EXTS]
        cands += [_join(base, "index") + e for e in _JS_EXTS]
        for c in cands:
            if c in idx.paths and c not in out:
                out.append(c)
        if out:
            return out
    return out


def _c_resolve(imp: Import, importer: str, idx: _PathIndex) -> list[str]:
    inc = imp.module.strip()
    system = inc.startswith("<")
    inc = inc.strip("<>\"").strip()
    if not inc:
        return []
    cands: list[str] = []
    if not system:
        rel = _norm(_join(posixpath.dirname(importer), inc))
        if rel is not None:
            cands.append(rel)
    plain = _norm(inc)
    if plain is not None:
        cands += [plain, "include/" + plain, "src/" + plain]
    for c in cands:
        if c in idx.paths:
            return [c]
    if plain and (not system or "/" in plain):
        found = idx.with_suffix(plain)
        if found:
            return _closest(found, importer)
    return []


def _go_resolve(imp: Import, importer: str, idx: _PathIndex) -> list[str]:
    path = imp.module.strip().strip('"`').strip("/")
    if not path:
        return []
    segs = path.split("/")
    dirs = idx.go_dirs()
    if "." not in segs[0] and len(segs) == 1:
        matches = [d for d in dirs.get(path, ()) if d == path]
    else:
        matches = []
        for i in range(len(segs)):
            found = dirs.get("/".join(segs[i:]))
            if found:
                matches = found
                break
    if not matches:
        return []
    d = _closest(matches, importer)[0] if len(matches) > 1 else matches[0]
    files = [f for f in idx.dirs.get(d, ()) if f.endswith(".go") and not f.endswith("_test.go")]
    if not files:
        files = [f for f in idx.dirs.get(d, ()) if f.endswith(".go")]
    pkg = d.rpartition("/")[2] + ".go"
    files.sort(key=lambda f: (f.rpartition("/")[2] != pkg, f.rpartition("/")[2] != "doc.go", f))
    return files


def _rust_module_dir(importer: str) -> str:
    d, _, base = importer.rpartition("/")
    if base in ("mod.rs", "lib.rs", "main.rs"):
        return d
    return _join(d, base[:-3] if base.endswith(".rs") else base)


def _rust_crate_dir(importer: str) -> str:
    parts = importer.split("/")[:-1]
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] == "src":
            return "/".join(parts[: i + 1])
    return "/".join(parts)


def _rust_resolve(imp: Import, importer: str, idx: _PathIndex) -> list[str]:
    path = imp.module.strip().replace(" ", "")
    segs = [s for s in path.split("::") if s]
    if segs and segs[0] == "":
        segs = segs[1:]
    bases: list[str] = []
    if segs and segs[0] == "crate":
        bases.append(_rust_crate_dir(importer))
        segs = segs[1:]
    elif segs and segs[0] in ("self", "super"):
        d = _rust_module_dir(importer)
        alt = posixpath.dirname(importer)
        if segs[0] == "self":
            segs = segs[1:]
        while segs and segs[0] == "super":
            d = posixpath.dirname(d)
            alt = posixpath.dirname(alt)
            segs = segs[1:]
        bases += [d, alt] if alt != d else [d]
    else:
        bases += [_rust_module_dir(importer), _rust_crate_dir(importer)]
    names = [n.split("::")[0] for n in imp.names if n and n not in ("*", "self")]
    out: list[str] = []
    for base in bases:
        trials = [segs + [n] for n in names] + [segs[:k] for k in range(len(segs), 0, -1)]
        for s in trials:
            if not s:
                continue
            p = _join(base, *s)
            for c in (p + ".rs", p + "/mod.rs"):
                if c in idx.paths and c not in out:
                    out.append(c)
        if out:
            return out
    return out


def _java_resolve(imp: Import, importer: str, idx: _PathIndex) -> list[str]:
    mod = imp.module.strip()
    if mod.endswith(".*"):
        pkg = mod[:-2].replace(".", "/")
        out = []
        for d, files in idx.dirs.items():
            if d == pkg or d.endswith("/" + pkg):
                out += [f for f in files if f.endswith((".java", ".kt"))]
        return _closest(out, importer) if out else []
    segs = mod.split(".")
    for k in range(len(segs), 1, -1):  # static imports name members: drop trailing parts
        rel = "/".join(segs[:k])
        for ext in (".java", ".kt"):
            found = idx.with_suffix(rel + ext)
            if found:
                return _closest(found, importer)
    return []


def _ruby_resolve(imp: Import, importer: str, idx: _PathIndex) -> list[str]:
    spec = imp.module.strip()
    if not spec:
        return []
    if not spec.endswith(".rb"):
        spec_rb = spec + ".rb"
    else:
        spec_rb = spec
    if spec.startswith("."):
        p = _norm(_join(posixpath.dirname(importer), spec_rb))
        return [p] if p is not None and p in idx.paths else []
    for c in ("lib/" + spec_rb, spec_rb, "app/" + spec_rb):
        if c in idx.paths:
            return [c]
    if "/" in spec:
        found = idx.with_suffix(spec_rb)
        if found:
            return _closest(found, importer)
    return []


_RESOLVERS = {
    "python": _py_resolve,
    "javascript": _js_resolve,
    "typescript": _js_resolve,
    "tsx": _js_resolve,
    "c": _c_resolve,
    "cpp": _c_resolve,
    "go": _go_resolve,
    "rust": _rust_resolve,
    "java": _java_resolve,
    "ruby": _ruby_resolve,
}


def resolve_import_all(imp: Import, importer: str, language: str, known_paths: Collection[str]) -> list[str]:
    """Every path in known_paths that the import plausibly names, best first (a Python
    ``from pkg import a, b`` can name submodules a and b; a Go import names all the files
    of a package directory). Never raises."""
    try:
        resolver = _RESOLVERS.get(language)
        if resolver is None or not imp.module and not imp.names:
            return []
        importer = str(importer).replace("\\", "/")
        while importer.startswith("./"):
            importer = importer[2:]
        return resolver(imp, importer, _path_index(known_paths))
    except Exception:
        return []


def resolve_import(imp: Import, importer: str, language: str, known_paths: Collection[str]) -> str | None:
    """Map an import to a repo-relative path in known_paths where possible, else None.

    python: dotted modules and relative imports, packages' __init__.py, src/ and other
    roots (the importer's ancestors too); for ``from x import name`` a submodule
    ``x/name.py`` wins over ``x/__init__.py``. JS/TS: relative specifiers (and ``@/``,
    ``~/``) with .ts/.tsx/.js/... and index.* resolution, ``.js`` written for a ``.ts``
    file. C/C++: quoted includes relative to the file, the root, include/ and src/, then
    a unique-ish suffix match. Go: package directory by longest suffix of the import path
    (a file of that directory is returned). Rust: crate::, self::, super:: and ``mod x;``
    to x.rs or x/mod.rs. Java: package path suffix. Ruby: require_relative and
    lib/-relative require.
    """
    found = resolve_import_all(imp, importer, language, known_paths)
    return found[0] if found else None
