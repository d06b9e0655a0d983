"""The pure parsing layer: languages.detect, parser.parse and parser.resolve_import."""

from __future__ import annotations

import ast
import os
import random
import sysconfig
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workstation.index import parse as P
from workstation.index.languages import detect
from workstation.index.parse import Import, Symbol, parse, resolve_import, resolve_import_all

FIXTURES = Path(__file__).parents[1] / "fixtures" / "parser"
PYREPO = FIXTURES / "pyrepo"
OTHER = FIXTURES / "other"


@pytest.fixture(autouse=True)
def _surface_internal_errors(monkeypatch):
    """parse() swallows internal errors by design; in tests they must surface."""
    monkeypatch.setattr(P, "_DEBUG_RAISE", True)


def _known(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def _ast_symbols(source: bytes) -> list[tuple]:
    """(name, kind, parent, lineno, end_lineno) for every def/class, as ast sees them."""
    out = []
    stack = [(ast.parse(source), None, None)]
    while stack:
        node, parent, parent_kind = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if isinstance(child, ast.ClassDef):
                    kind = "class"
                else:
                    kind = "method" if parent_kind == "class" else "function"
                out.append((child.name, kind, parent or "", child.lineno, child.end_lineno))
                qual = child.name if parent is None else f"{parent}.{child.name}"
                stack.append((child, qual, kind))
            else:
                stack.append((child, parent, parent_kind))
    return sorted(out)


def _our_symbols(result) -> list[tuple]:
    return sorted((s.name, s.kind, s.parent or "", s.start_line, s.end_line)
                  for s in result.symbols if s.kind in ("class", "function", "method"))


def _syms(result) -> dict[str, Symbol]:
    return {s.qualname: s for s in result.symbols}


def _fixture(rel: str, root: Path = PYREPO):
    return parse(rel, (root / rel).read_bytes())


# ---------------------------------------------------------------------------------------
# Python agrees with ast


def test_python_fixture_repo_symbols_match_ast():
    checked = 0
    for path in sorted(PYREPO.rglob("*.py")):
        source = path.read_bytes()
        try:
            expected = _ast_symbols(source)
        except SyntaxError:
            continue
        result = parse(path.relative_to(PYREPO).as_posix(), source)
        assert result.language == "python"
        assert not result.has_errors, path
        assert _our_symbols(result) == expected, path
        checked += 1
    assert checked >= 8


def test_python_stdlib_sample_symbols_match_ast():
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    names = ["dataclasses.py", "json/decoder.py", "asyncio/tasks.py", "functools.py",
             "email/message.py", "contextlib.py"]
    checked = 0
    for name in names:
        path = stdlib / name
        if not path.exists():
            continue
        source = path.read_bytes()
        result = parse(name, source)
        assert _our_symbols(result) == _ast_symbols(source), name
        checked += 1
    assert checked >= 3


def test_python_kinds_parents_and_lines():
    r = _fixture("pkg/core.py")
    s = _syms(r)
    assert s["plain"].kind == "function" and s["plain"].parent is None
    assert (s["plain"].start_line, s["plain"].end_line) == (23, 24)
    # decorated: starts at the def line like ast; trailing comments are not part of it
    assert (s["decorated"].start_line, s["decorated"].end_line) == (35, 36)
    assert s["decorated_factory.decorator"].kind == "function"
    assert s["fetch"].kind == "function" and s["fetch"].signature.startswith("async def fetch(")
    assert s["Engine"].kind == "class" and (s["Engine"].start_line, s["Engine"].end_line) == (45, 82)
    assert s["Engine.__init__"].kind == "method" and s["Engine.__init__"].parent == "Engine"
    assert s["Engine.run"].kind == "method"
    assert s["Engine.Config"].kind == "class" and s["Engine.Config"].parent == "Engine"
    assert s["Engine.Config.Inner.deep"].kind == "method"
    assert s["Engine.Config.Inner.deep.local"].kind == "function"
    assert s["Engine.Config.Inner.deep.local"].parent == "Engine.Config.Inner.deep"
    assert s["Engine.conditional"].kind == "method"  # a def under an if in a class body
    assert [x.name for x in r.symbols].count("size") == 2  # property getter and setter
    assert "handler" not in {x.name for x in r.symbols}  # lambdas are not symbols
    assert (s["one_liner"].start_line, s["one_liner"].end_line) == (86, 86)
    assert s["OneLine"].kind == "class"
    assert (s["with_continuation"].start_line, s["with_continuation"].end_line) == (103, 106)
    # module-level UPPER_CASE assignments are constants, lowercase ones are not symbols
    assert s["MAX_JOBS"].kind == "constant" and s["MAX_JOBS"].signature == "MAX_JOBS = 8"
    assert s["_PRIVATE_LIMIT"].kind == "constant"
    assert "lowercase_value" not in s
    lines = [x.start_line for x in r.symbols]
    assert lines == sorted(lines)
    assert r.line_count == 115


def test_python_signatures():
    s = _syms(_fixture("pkg/core.py"))
    assert s["plain"].signature == "def plain(a, b: int = 2, *args, c=MAX_JOBS, **kwargs) -> str"
    assert s["Engine"].signature == "class Engine(object)"
    assert s["Engine.run"].signature == "async def run(self, *jobs, parallel: bool = False, ) -> dict"
    assert s["multiline_signature"].signature == "def multiline_signature( first, second=(1, 2), )"
    assert s["Engine.size"].signature == "def size(self, value)"  # the last one wins the dict
    assert all("\n" not in x.signature for x in s.values())


def test_python_nested_local_classes_and_overloads():
    r = _fixture("pkg/weird.py")
    s = _syms(r)
    assert s["outer.LocalClass"].kind == "class"
    assert s["outer.LocalClass.local_method"].kind == "method"
    assert s["outer.local_function"].kind == "function"
    assert [x.start_line for x in r.symbols if x.name == "over"] == [26, 28, 29]
    assert s["decorated_class_factory.Decorated"].start_line == 66  # the class line, not '@'
    assert (s["trailing_comment_in_if"].start_line, s["trailing_comment_in_if"].end_line) == (71, 75)
    assert (s["docstring_only"].start_line, s["docstring_only"].end_line) == (80, 82)
    assert s["UsesMeta.m"].kind == "method"


def test_python_references():
    r = _fixture("pkg/core.py")
    refs = {(x.name, x.line, x.enclosing, x.kind) for x in r.references}
    assert ("helper", 24, "plain", "call") in refs
    assert ("str", 24, "plain", "call") in refs
    assert ("MAX_JOBS", 23, "plain", "ref") in refs  # a default value is a use
    assert ("join", 77, "Engine.Config.Inner.deep.local", "call") in refs  # osp.join(...)
    assert ("osp", 77, "Engine.Config.Inner.deep.local", "ref") in refs
    assert ("jobs", 57, "Engine.size", "attr") in refs  # self.jobs -> 'jobs', a member read
    assert ("strip", 96, "multiline_signature", "call") in refs
    assert ("plain", 100, "uses_fstrings", "call") in refs  # inside an f-string
    assert ("MAX_JOBS", 100, "uses_fstrings", "ref") in refs  # nested format spec
    # decorators are uses enclosed by the decorated function
    assert ("decorated_factory", 33, "decorated", "call") in refs
    assert ("staticmethod", 34, "decorated", "ref") in refs
    names = [x.name for x in r.references]
    assert "self" not in names and "cls" not in names
    # definitions, parameters and keyword-argument names are not references
    for name in ("kwargs", "args", "timeout", "parallel", "one_liner", "Engine"):
        assert name not in names, name
    assert all(x.kind in ("call", "ref", "attr", "set") for x in r.references)
    lines = [x.line for x in r.references]
    assert lines == sorted(lines)


def test_python_keyword_names_and_lambda_params_are_not_references():
    src = b"def f(a):\n    return g(key=a, other=h)\n\nx = lambda q: q + 1\n"
    r = parse("m.py", src)
    refs = [(x.name, x.kind) for x in r.references]
    assert ("key", "ref") not in refs and ("other", "ref") not in refs
    assert ("g", "call") in refs and ("h", "ref") in refs and ("a", "ref") in refs
    assert refs.count(("q", "ref")) == 1  # the use, not the parameter


def test_python_imports():
    r = _fixture("pkg/core.py")
    imports = [(i.module, i.names, i.line) for i in r.imports]
    assert ("__future__", ("annotations",), 6) in imports
    assert ("os.path", (), 8) in imports
    assert ("sys", (), 9) in imports and ("json", (), 9) in imports
    assert ("typing", ("Any", "Callable"), 10) in imports
    assert (".", ("sub",), 15) in imports
    assert (".sub.helpers", ("helper", "other"), 16) in imports
    r = _fixture("pkg/weird.py")
    modules = [i.module for i in r.imports]
    assert modules == ["typing", "typing", ".core", "ujson", "json"]  # nested ones included


def test_purpose_extraction():
    assert _fixture("pkg/core.py").purpose == "Core engine: runs jobs and reports results."
    assert _fixture("pkg/__init__.py").purpose == "Fixture package for the parser tests."
    assert _fixture("pkg/sub/__init__.py").purpose == "Subpackage with helpers."
    assert _fixture("main.py").purpose == "Entry point of the fixture repository."  # not the shebang
    assert _fixture("pkg/sub/util.py").purpose == ""
    assert parse("x.py", b"# Copyright 2020 X\n# SPDX-License-Identifier: MIT\n\n# Does things.\nx = 1\n").purpose \
        == "Does things."
    assert parse("x.py", b'x = f"not a docstring"\n').purpose == ""
    assert parse("x.py", b"r'''Raw docstring.'''\n").purpose == "Raw docstring."


def test_syntax_errors_still_yield_what_parses():
    r = _fixture("pkg/broken.py")
    assert r.has_errors
    names = {s.qualname for s in r.symbols}
    assert {"before", "AfterBroken", "AfterBroken.method", "after"} <= names
    s = _syms(r)
    assert (s["before"].start_line, s["before"].end_line) == (4, 5)
    assert (s["after"].start_line, s["after"].end_line) == (17, 18)
    assert any(x.name == "before" and x.kind == "call" for x in r.references)
    assert r.purpose == "A module with a syntax error in the middle."


def test_unicode_sources():
    r = _fixture("pkg/unicode_names.py")
    s = _syms(r)
    assert s["Größe"].kind == "class"
    assert s["Größe.größer"].kind == "method" and s["Größe.größer"].signature == "def größer(self, другой)"
    assert (s["计算"].start_line, s["计算"].end_line) == (11, 13)
    assert (s["after_unicode"].start_line, s["after_unicode"].end_line) == (16, 17)
    assert ("计算", 17, "after_unicode", "call") in {(x.name, x.line, x.enclosing, x.kind)
                                                   for x in r.references}
    assert r.purpose.startswith("Ünïcödé names")
    # invalid UTF-8 is tolerated
    r = parse("bad.py", b"def f():\n    return '\xff\xfe'\n\ndef g(): pass\n")
    assert [x.name for x in r.symbols] == ["f", "g"]


def test_ast_fallback_agrees_with_tree_sitter_walk():
    """The ast path (used when tree-sitter trips on valid Python) gives the same answer."""
    for rel in ("pkg/core.py", "pkg/weird.py", "pkg/unicode_names.py", "main.py"):
        source = (PYREPO / rel).read_bytes()
        r = parse(rel, source)
        purpose, symbols, refs, imports = P._parse_python_ast(source)
        assert symbols == r.symbols, rel
        assert imports == r.imports, rel
        assert purpose == r.purpose, rel
        ours = {(x.name, x.line, x.enclosing, x.kind) for x in r.references}
        theirs = {(x.name, x.line, x.enclosing, x.kind) for x in refs}
        assert len(ours ^ theirs) <= max(3, len(ours) // 50), (rel, ours ^ theirs)


def test_dataclasses_are_frozen_values():
    r = parse("m.py", b"def f():\n    g()\n")
    sym, ref = r.symbols[0], r.references[0]
    assert sym == Symbol("f", "function", None, "def f()", 1, 2)
    assert ref == P.Reference("g", 2, "f", "call")
    assert hash(sym) == hash(Symbol("f", "function", None, "def f()", 1, 2))
    with pytest.raises(Exception):
        sym.name = "x"  # type: ignore[misc]


# ---------------------------------------------------------------------------------------
# Other languages


def _other(name: str):
    return parse(name, (OTHER / name).read_bytes())


def _table(result) -> set[tuple]:
    return {(s.qualname, s.kind, s.start_line, s.end_line) for s in result.symbols}


def test_javascript():
    r = _other("sample.js")
    assert r.language == "javascript" and not r.has_errors
    assert r.purpose == "Utilities for formatting dates."
    assert {("Formatter", "class", 7, 16), ("Formatter.constructor", "method", 8, 11),
            ("Formatter.format", "method", 13, 15), ("pad", "function", 18, 20),
            ("double", "function", 22, 22), ("legacyFormat", "function", 24, 26)} <= _table(r)
    assert _syms(r)["pad"].signature == "function pad(n, width = 2)"
    imports = {(i.module, i.names) for i in r.imports}
    assert ("./util", ("default", "readFile", "join")) in imports
    assert ("path", ("*",)) in imports
    assert ("./helpers/index.js", ("helper",)) in imports  # re-export
    assert ("./legacy", ()) in imports  # require()
    refs = {(x.name, x.enclosing, x.kind) for x in r.references}
    assert ("pad", "Formatter.format", "call") in refs
    assert ("getDay", "Formatter.format", "call") in refs
    assert ("render", "legacyFormat", "call") in refs


def test_typescript_and_tsx():
    r = _other("sample.ts")
    assert r.language == "typescript" and not r.has_errors
    assert r.purpose == "Shapes and areas."
    assert {("Shape", "interface", 6, 9), ("Shape.area", "method", 7, 7),
            ("ShapeList", "type", 11, 11), ("Kind", "enum", 13, 16),
            ("BaseShape", "class", 18, 24), ("BaseShape.area", "method", 21, 23),
            ("computeArea", "function", 26, 28), ("Registry", "module", 30, 32),
            ("Registry.register", "function", 31, 31)} <= _table(r)
    assert [(i.module, i.names) for i in r.imports] == [("../geometry/point", ("Point",))]
    assert ("computeArea", "BaseShape.area", "call") in {
        (x.name, x.enclosing, x.kind) for x in r.references}

    r = _other("sample.tsx")
    assert r.language == "tsx" and not r.has_errors
    assert {("Props", "interface", 5, 5), ("Greeting", "function", 7, 9),
            ("Arrow", "function", 11, 11)} <= _table(r)
    assert ("alert", "Greeting", "call") in {(x.name, x.enclosing, x.kind) for x in r.references}


def test_go():
    r = _other("sample.go")
    assert r.language == "go" and not r.has_errors
    assert r.purpose == "Package server runs the HTTP server."
    assert {("DefaultPort", "constant", 11, 11), ("Server", "struct", 14, 17),
            ("Handler", "interface", 19, 21), ("Handler.Handle", "method", 20, 20),
            ("New", "function", 23, 25), ("Server.Run", "method", 27, 30)} <= _table(r)
    s = _syms(r)
    assert s["Server.Run"].signature == "func (s *Server) Run(ctx context.Context) error"
    assert s["Server"].signature == "type Server struct"
    assert [i.module for i in r.imports] == ["context", "fmt", "example.com/proj/internal/store"]
    refs = {(x.name, x.enclosing, x.kind) for x in r.references}
    assert ("Println", "Server.Run", "call") in refs and ("Save", "Server.Run", "call") in refs


def test_rust():
    r = _other("sample.rs")
    assert r.language == "rust" and not r.has_errors
    assert r.purpose == "Geometry primitives."
    assert {("Point", "struct", 7, 10), ("Axis", "enum", 12, 12), ("Area", "trait", 14, 16),
            ("Area.area", "method", 15, 15), ("Point", "impl", 18, 22),
            ("Point.new", "method", 19, 21), ("Point.fmt", "method", 25, 27),
            ("distance", "function", 30, 32)} <= _table(r)
    imports = [(i.module, i.names) for i in r.imports]
    assert imports == [("std::fmt", ()), ("crate::util", ("clamp", "lerp")), ("self::shapes", ())]
    refs = {(x.name, x.enclosing, x.kind) for x in r.references}
    assert ("clamp", "Point.new", "call") in refs and ("write", "Point.fmt", "call") in refs
    assert ("abs", "distance", "call") in refs


def test_java():
    r = _other("Sample.java")
    assert r.language == "java" and not r.has_errors
    assert r.purpose == "Account service."
    assert {("Sample", "class", 9, 27), ("Sample.LIMIT", "constant", 10, 10),
            ("Sample.Sample", "method", 14, 16), ("Sample.total", "method", 18, 20),
            ("Sample.Listener", "interface", 22, 24),
            ("Sample.Listener.onChange", "method", 23, 23), ("Sample.Mode", "enum", 26, 26)} <= _table(r)
    assert [i.module for i in r.imports] == ["java.util.List", "com.example.bank.model.Account"]
    assert ("mapToInt", "Sample.total", "call") in {
        (x.name, x.enclosing, x.kind) for x in r.references}


def test_c_and_headers():
    r = _other("sample.c")
    assert r.language == "c" and not r.has_errors
    assert r.purpose == "Ring buffer implementation."
    assert {("RING_MAX", "macro", 6, 6), ("ring", "struct", 8, 11), ("pair_t", "struct", 13, 15),
            ("clamp", "function", 17, 17), ("ring_push", "function", 19, 26),
            ("clamp", "function", 28, 30)} <= _table(r)
    assert _syms(r)["ring_push"].signature == "int ring_push(struct ring *r, int value)"
    assert [i.module for i in r.imports] == ["<stdlib.h>", "ring.h", "util/log.h"]
    refs = {(x.name, x.enclosing, x.kind) for x in r.references}
    assert ("log_error", "ring_push", "call") in refs and ("clamp", "ring_push", "call") in refs
    h = _other("ring.h")
    assert h.language == "c"
    assert ("ring_push", "function", 4, 4) in _table(h)


def test_cpp():
    r = _other("sample.cpp")
    assert r.language == "cpp" and not r.has_errors
    assert r.purpose == "Matrix math."
    assert {("math", "module", 5, 24), ("math.Matrix", "class", 7, 13),
            ("math.Matrix.rows", "method", 10, 10), ("math.Matrix.Matrix", "method", 15, 17),
            ("math.identity", "function", 20, 22)} <= _table(r)
    assert ("init", "math.Matrix.Matrix", "call") in {
        (x.name, x.enclosing, x.kind) for x in r.references}
    # a C++ header named .h is parsed as C++
    hdr = parse("x.h", b"namespace a {\nclass B {\n  void f();\n};\n}\n")
    assert hdr.language == "cpp" and ("a.B", "class", 2, 4) in _table(hdr)


def test_ruby():
    r = _other("sample.rb")
    assert r.language == "ruby" and not r.has_errors
    assert r.purpose == "Inventory management."
    assert {("Inventory", "module", 5, 17), ("Inventory.Item", "class", 6, 16),
            ("Inventory.Item.LIMIT", "constant", 7, 7),
            ("Inventory.Item.initialize", "method", 9, 11),
            ("Inventory.Item.build", "method", 13, 15), ("helper_method", "function", 19, 21)} <= _table(r)
    assert [(i.module, i.line) for i in r.imports] == [("json", 2), ("./lib/store", 3)]
    assert ("register", "Inventory.Item.build", "call") in {
        (x.name, x.enclosing, x.kind) for x in r.references}


# ---------------------------------------------------------------------------------------
# Import resolution


def test_resolve_python_imports():
    known = _known(PYREPO)

    def res(rel, module, names=()):
        return resolve_import(Import(module, tuple(names), 1), rel, "python", known)

    assert res("pkg/core.py", ".sub.helpers", ["helper"]) == "pkg/sub/helpers.py"
    assert res("pkg/core.py", ".", ["sub"]) == "pkg/sub/__init__.py"
    assert res("pkg/sub/helpers.py", "..core", ["Engine"]) == "pkg/core.py"
    assert res("pkg/sub/helpers.py", "..", ["core"]) == "pkg/core.py"  # submodule wins
    assert res("pkg/sub/helpers.py", ".util", ["shout"]) == "pkg/sub/util.py"
    assert res("pkg/sub/helpers.py", "...", ["outside_the_repo_root"]) is None
    assert res("main.py", "pkg") == "pkg/__init__.py"
    assert res("main.py", "pkg.sub", ["helpers", "util"]) == "pkg/sub/helpers.py"
    assert res("main.py", "layoutpkg.mod") == "src/layoutpkg/mod.py"  # src/ layout
    assert res("main.py", "layoutpkg", ["mod"]) == "src/layoutpkg/mod.py"
    assert res("main.py", "os") is None
    assert resolve_import_all(Import("pkg.sub", ("helpers", "util"), 1), "main.py", "python", known) \
        == ["pkg/sub/helpers.py", "pkg/sub/util.py", "pkg/sub/__init__.py"]
    # a project nested in a subdirectory resolves against the importer's ancestors
    nested = {"backend/app/__init__.py", "backend/app/models.py", "backend/app/views.py"}
    assert resolve_import(Import("app.models", (), 1), "backend/app/views.py", "python", nested) \
        == "backend/app/models.py"


def test_resolve_other_languages():
    known = {
        "web/src/util.ts", "web/src/helpers/index.js", "web/src/components/Button.tsx",
        "web/src/geometry/point.ts", "internal/store/store.go", "internal/store/store_test.go",
        "cmd/main.go", "rs/src/lib.rs", "rs/src/util.rs", "rs/src/shapes/mod.rs",
        "rs/src/geo/mod.rs", "rs/src/geo/point.rs", "rs/src/geo/line.rs",
        "src/main/java/com/example/bank/model/Account.java", "include/mylib/x.h", "src/ring.c",
        "src/ring.h", "lib/store.rb",
    }

    def res(module, importer, language, names=()):
        return resolve_import(Import(module, tuple(names), 1), importer, language, known)

    assert res("./util", "web/src/app.ts", "typescript") == "web/src/util.ts"
    assert res("./util.js", "web/src/app.ts", "typescript") == "web/src/util.ts"  # ESM-style
    assert res("./helpers", "web/src/app.js", "javascript") == "web/src/helpers/index.js"
    assert res("../geometry/point", "web/src/shapes/s.ts", "typescript") == "web/src/geometry/point.ts"
    assert res("./components/Button", "web/src/App.tsx", "tsx") == "web/src/components/Button.tsx"
    assert res("react", "web/src/App.tsx", "tsx") is None
    assert res("../../../../../etc/passwd", "web/src/App.tsx", "tsx") is None
    assert res("ring.h", "src/ring.c", "c") == "src/ring.h"  # relative to the file
    assert res("mylib/x.h", "src/ring.c", "cpp") == "include/mylib/x.h"  # include/
    assert res("<mylib/x.h>", "src/ring.c", "c") == "include/mylib/x.h"
    assert res("<stdio.h>", "src/ring.c", "c") is None
    assert res("example.com/proj/internal/store", "cmd/main.go", "go") == "internal/store/store.go"
    assert res("fmt", "cmd/main.go", "go") is None
    assert res("crate::util", "rs/src/geo/point.rs", "rust", ["clamp"]) == "rs/src/util.rs"
    assert res("self::shapes", "rs/src/lib.rs", "rust") == "rs/src/shapes/mod.rs"  # mod shapes;
    assert res("super::line", "rs/src/geo/point.rs", "rust") == "rs/src/geo/line.rs"
    assert res("crate::geo::point::Point", "rs/src/lib.rs", "rust") == "rs/src/geo/point.rs"
    assert res("std::fmt", "rs/src/lib.rs", "rust") is None
    assert res("com.example.bank.model.Account", "src/main/java/A.java", "java") \
        == "src/main/java/com/example/bank/model/Account.java"
    assert res("./lib/store", "main.rb", "ruby") == "lib/store.rb"
    assert res("store", "main.rb", "ruby") == "lib/store.rb"
    assert res("x", "a.py", "cobol") is None


def test_resolve_fixture_includes_and_requires():
    known = _known(OTHER)
    r = _other("sample.c")
    targets = [resolve_import(i, "sample.c", "c", known) for i in r.imports]
    assert targets == [None, "ring.h", "util/log.h"]
    r = _other("sample.rb")
    assert [resolve_import(i, "sample.rb", "ruby", known) for i in r.imports] == [None, "lib/store.rb"]


# ---------------------------------------------------------------------------------------
# detect


@pytest.mark.parametrize("path,expected", [
    ("pkg/core.py", ("python", "code")),
    ("tests/test_core.py", ("python", "test")),
    ("pkg/core_test.py", ("python", "test")),
    ("conftest.py", ("python", "test")),
    ("src/app/tests/helpers.py", ("python", "test")),
    ("web/App.tsx", ("tsx", "code")),
    ("web/App.test.tsx", ("tsx", "test")),
    ("web/util.spec.ts", ("typescript", "test")),
    ("web/__tests__/x.js", ("javascript", "test")),
    ("lib/index.mjs", ("javascript", "code")),
    ("types/index.d.ts", ("typescript", "code")),
    ("server/server.go", ("go", "code")),
    ("server/server_test.go", ("go", "test")),
    ("src/lib.rs", ("rust", "code")),
    ("src/main/java/A.java", ("java", "code")),
    ("src/test/java/ATest.java", ("java", "test")),
    ("src/ring.c", ("c", "code")),
    ("include/ring.h", ("c", "code")),
    ("src/m.cpp", ("cpp", "code")),
    ("include/m.hpp", ("cpp", "code")),
    ("lib/store.rb", ("ruby", "code")),
    ("spec/store_spec.rb", ("ruby", "test")),
    ("Gemfile", ("ruby", "config")),
    ("pyproject.toml", (None, "config")),
    ("config/app.yaml", (None, "config")),
    ("package.json", (None, "config")),
    ("setup.cfg", (None, "config")),
    ("Makefile", (None, "config")),
    ("Dockerfile", (None, "config")),
    ("docker/Dockerfile.dev", (None, "config")),
    ("requirements-dev.txt", (None, "config")),
    ("CMakeLists.txt", (None, "config")),
    (".gitignore", (None, "config")),
    ("README.md", (None, "doc")),
    ("docs/guide.rst", (None, "doc")),
    ("notes.txt", (None, "doc")),
    ("LICENSE", (None, "doc")),
    ("scripts/build.sh", (None, "code")),
    ("assets/logo.png", (None, "other")),
    ("tests/fixtures/data.json", (None, "config")),
    ("", (None, "other")),
])
def test_detect(path, expected):
    assert detect(path) == expected


# ---------------------------------------------------------------------------------------
# Robustness and speed

ALL_LANGUAGES = ("python", "javascript", "typescript", "tsx", "go", "rust", "java", "c", "cpp",
                 "ruby")


@pytest.mark.parametrize("language", ALL_LANGUAGES)
def test_garbage_never_raises(language):
    rnd = random.Random(language)
    samples = [
        bytes(rnd.randrange(1, 256) for _ in range(3000)),
        os.urandom(2000),  # may contain NULs: treated as binary
        b"(" * 20000,
        b"[" * 5000 + b"]" * 5000,
        b"{" * 10000,
        b"\n" * 10000,
        b"",
        b"\xff\xfe\x00\x00",
        ("x = " + "(" * 2000 + "1" + ")" * 2000).encode(),
        b"if x:\n" + b"".join(b"    " * i + b"if x:\n" for i in range(1, 200)) + b"    " * 200 + b"pass\n",
        "é€😀".encode() * 500,
    ]
    for sample in samples:
        r = parse("file", sample, language)
        assert isinstance(r, P.ParseResult)
        assert r.line_count >= 0


def test_unknown_and_odd_inputs():
    r = parse("README.md", b"# Title\n")
    assert r.language is None and r.symbols == [] and not r.has_errors
    assert parse("x.py", "def f():\n    pass\n").symbols[0].name == "f"  # str is accepted
    assert parse("x.weird", b"def f(): pass", language="python").symbols[0].name == "f"
    r = parse("x.py", b"def f():\n  pass\n" * 3 + b"\x00binary")
    assert isinstance(r, P.ParseResult)


def test_deeply_nested_python_does_not_hit_recursion_limits():
    depth = 99  # Python itself allows at most 100 indentation levels
    lines = ["    " * i + f"def f{i}():" for i in range(depth)]
    lines.append("    " * depth + "return g()")
    r = parse("deep.py", "\n".join(lines).encode() + b"\n")
    assert len(r.symbols) == depth and not r.has_errors
    assert r.symbols[-1].parent.count(".") == depth - 2
    assert r.references[-1].name == "g"
    # expressions nest much deeper than statements; the walk must stay iterative
    nested = b"x = " + b"[" * 20000 + b"y" + b"]" * 20000 + b"\n"
    r = parse("deep2.py", nested)
    assert [x.name for x in r.references] == ["x", "y"]
    r = parse("deep.js", b"f(" * 5000 + b"z" + b")" * 5000 + b";\n")
    assert {x.name for x in r.references} == {"f", "z"}


def test_python_parse_speed():
    chunk = (PYREPO / "pkg" / "core.py").read_bytes()
    source = b"\n".join([chunk] * 9)  # ~1,000 lines
    parse("warm.py", source)
    best = min(_timed(lambda: parse("big.py", source)) for _ in range(3))
    assert best < 0.25, best  # typically ~10 ms (tree-sitter included); loose for busy CI


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


# ---------------------------------------------------------------------------------------
# Property tests

_NAMES = ["a", "b", "foo", "bar_2", "Thing", "_x", "größe", "计算"]
_EXPRS = ["{n}", "{n}.{m}", "{n}({m})", "{n}.{m}()", "[{n}, {m}]", "{{'k': {n}}}", "f'{{{n}}}'",
          "lambda {n}: {m}", "({n} + 1)", "'str # not a comment'", "{n}[0]", "not {n}",
          "(\n    {n},\n    {m}\n)"]


def _gen_expr(rnd: random.Random) -> str:
    return " + ".join(rnd.choice(_EXPRS).format(n=rnd.choice(_NAMES), m=rnd.choice(_NAMES))
                      for _ in range(rnd.randint(1, 3)))


def _gen_block(rnd: random.Random, depth: int) -> list[str]:
    """A random Python block: defs, classes, decorators, async, comments in awkward places."""
    out: list[str] = []
    for _ in range(rnd.randint(1, 4)):
        kinds = ["expr", "assign", "pass", "comment", "blank", "return"]
        if depth < 5:
            kinds += ["def", "async", "class", "if", "for", "decorated", "with", "try", "oneline"]
        kind = rnd.choice(kinds)
        name = rnd.choice(_NAMES)
        if kind == "expr":
            out.append(_gen_expr(rnd))
        elif kind == "assign":
            out.append(f"{name} = {_gen_expr(rnd)}")
        elif kind == "pass":
            out.append("pass")
        elif kind == "comment":
            out.append("    " * rnd.randint(0, 2) + "# a comment")
        elif kind == "blank":
            out.append("")
        elif kind == "return":
            out.append(f"return {_gen_expr(rnd)}")
        elif kind == "oneline":
            out.append(f"def {name}(): return {_gen_expr(rnd)}  # trailing")
        else:
            header = {
                "def": f"def {name}(x, y=1, *a, **k):",
                "async": f"async def {name}(self) -> int:",
                "class": f"class {name.capitalize()}(object):",
                "if": f"if {_gen_expr(rnd)}:",
                "for": f"for {name} in {_gen_expr(rnd)}:",
                "decorated": f"@dec({name})\n# between decorator and def\n@other\ndef {name}():",
                "with": f"with {_gen_expr(rnd)} as {name}:",
                "try": "try:",
            }[kind]
            out += header.split("\n")
            out += ["    " + line if line else line for line in _gen_block(rnd, depth + 1)]
            if kind == "try":
                out += ["except Exception as e:", "    pass"]
            if rnd.random() < 0.5:
                out.append("    " * rnd.randint(0, 2) + "# comment after the block")
    if all(not line.strip() or line.lstrip().startswith("#") for line in out):
        out.append("pass")
    return out


@settings(max_examples=50, deadline=None, database=None)
@given(st.integers(min_value=0, max_value=2**32))
def test_generated_python_symbols_match_ast(seed):
    source = ("\n".join(_gen_block(random.Random(seed), 0)) + "\n").encode()
    try:
        expected = _ast_symbols(source)
    except SyntaxError:
        return  # e.g. 'return' outside a function
    r = parse("gen.py", source)
    assert _our_symbols(r) == expected, source.decode()


@settings(max_examples=30, deadline=None, database=None)
@given(st.binary(max_size=400), st.sampled_from(ALL_LANGUAGES))
def test_random_bytes_never_raise(data, language):
    r = parse("x", data, language)
    assert isinstance(r, P.ParseResult)


@settings(max_examples=30, deadline=None, database=None)
@given(st.lists(st.sampled_from(["def ", "class ", "async ", "(", ")", ":", "\n", "    ", "\t",
                                 "#", "'", '"', '"""', "\\", "@", "=", ",", ".", "x", "y0", "lambda",
                                 "f'{", "}", "match", "case", "->", "*"]), max_size=120))
def test_python_like_text_never_raises(tokens):
    r = parse("x.py", "".join(tokens).encode())
    for s in r.symbols:
        assert 1 <= s.start_line <= s.end_line <= max(r.line_count, 1)


EXPRESS_BANNER = b"""/*!
 * express
 * Copyright(c) 2009-2013 TJ Holowaychuk
 * Copyright(c) 2014-2015 Douglas Christopher Wilson
 * MIT Licensed
 */

'use strict';

/**
 * Module dependencies.
 * @private
 */

var debug = require('debug')('express:router');
"""
MIT_BANNER = b"""/*
 * (The MIT License)
 *
 * Copyright (c) 2014 Someone <someone@example.com>
 *
 * Permission is hereby granted, free of charge, to any person obtaining
 * a copy of this software and associated documentation files.
 */

// Parses cookie headers into objects.
module.exports = parse;
"""
GO_HEADER = b"""// Copyright 2009 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package http provides HTTP client and server implementations.
package http
"""
C_HEADER = b"""/*
 *  linux/kernel/fork.c
 *
 *  Copyright (C) 1991, 1992  Linus Torvalds
 */

/*
 *  'fork.c' contains the help-routines for the 'fork' system call
 */
#include <linux/slab.h>
"""


@pytest.mark.parametrize("path, source, expected", [
    ("lib/router/index.js", EXPRESS_BANNER, ""),  # the banner, then boilerplate: no purpose
    ("index.js", MIT_BANNER, "Parses cookie headers into objects."),
    ("server.go", GO_HEADER, "Package http provides HTTP client and server implementations."),
    ("fork.c", C_HEADER, "'fork.c' contains the help-routines for the 'fork' system call"),
    ("x.js", b"/*! jQuery v3.7.1 | (c) OpenJS Foundation | jquery.org/license */\nvar a = 1;\n", ""),
    ("parser.c", b"/* parser.c - a tiny HTTP request parser\n * Copyright (c) 2010 Someone\n */\nint x;\n",
     "parser.c - a tiny HTTP request parser"),
    ("x.py", b"# mytool\n# Copyright 2020 X\n# Licensed under the MIT License\n\n# Does things.\nx = 1\n",
     "Does things."),
    ("x.ts", b"// Retries requests that timed out.\nexport const x = 1;\n", "Retries requests that timed out."),
])
def test_licence_banners_are_not_purposes(path: str, source: bytes, expected: str):
    assert parse(path, source).purpose == expected
