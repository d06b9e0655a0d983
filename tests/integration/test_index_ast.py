"""Symbols and line ranges of indexed Python files agree with Python's own `ast`.

The fixture repository holds hand-written tricky shapes plus real standard
library modules; it goes through the whole indexer (walk, worker pool, TSV
bulk load into DuckDB) and the rows are read back from the database.
"""

from __future__ import annotations

import ast
import shutil
import sysconfig
from pathlib import Path

import pytest

from support.kmap_helpers import db_symbols, open_map, write
from workstation.index import indexer

TRICKY = '''\
"""Fixture module: shapes the indexer must get right."""
import os
from typing import Any

CONSTANT = 1


def plain(a, b=2):
    return a + b


async def coroutine(x):
    await x


@decorator
@other.decorator(arg)
def decorated(
    a,
    b,
):
    """doc"""
    def inner():
        class Local:
            def method(self):
                pass
        return Local
    return inner


class Outer(Base, metaclass=Meta):
    attr = 1

    class Inner:
        def deep(self):
            return lambda: 0
            # trailing comment, not part of the body

    @property
    def prop(self):
        return self.attr
    # comment after the body

    async def amethod(self): ...

    if DEBUG:
        def debug_only(self):
            pass


if TYPE_CHECKING:
    def conditional(): ...
else:
    def conditional():
        pass

try:
    def in_try(): pass
except ImportError:
    pass


def one_liner(): return 1
class Empty: pass


def last(
    x,  # a comment
):
    return (
        x
    )
'''

STDLIB_FILES = ["argparse.py", "dataclasses.py", "typing.py", "inspect.py", "functools.py"]
STDLIB_PACKAGES = ["json", "email", "asyncio"]


def expected_symbols(source: str) -> list[tuple]:
    """(qualname, kind, start, end) of every class and def, by the parser's conventions."""
    out = []

    def visit(node, scope: list[tuple[str, str]]):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                parent = scope[-1][0] if scope else None
                if isinstance(child, ast.ClassDef):
                    kind = "class"
                else:
                    kind = "method" if scope and scope[-1][1] == "class" else "function"
                qual = child.name if parent is None else f"{parent}.{child.name}"
                out.append((qual, kind, child.lineno, child.end_lineno))
                visit(child, scope + [(qual, kind)])
            else:
                visit(child, scope)

    visit(ast.parse(source), [])
    return sorted(out)


@pytest.fixture(scope="module")
def fixture_repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("astrepo")
    write(root, {"pkg/tricky.py": TRICKY})
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    (root / "stdlib").mkdir()
    for name in STDLIB_FILES:
        shutil.copy(stdlib / name, root / "stdlib" / name)
    for package in STDLIB_PACKAGES:
        shutil.copytree(stdlib / package, root / "stdlib" / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_python_symbols_match_ast(fixture_repo: Path):
    sources = sorted(p for p in fixture_repo.rglob("*.py") if ".workstation" not in p.parts)
    assert len(sources) >= indexer.POOL_MIN_FILES  # enough files that the worker pool parses them
    with open_map(fixture_repo, workers=2) as km:
        report = km.index_all()
        assert report.files >= len(sources)
        compared = 0
        for path in sources:
            rel = path.relative_to(fixture_repo).as_posix()
            source = path.read_text()
            want = expected_symbols(source)
            got = sorted(s for s in db_symbols(km, rel) if s[1] in ("class", "function", "method"))
            assert got == want, f"{rel}: symbols differ from ast"
            compared += len(want)
        print(f"\n{len(sources)} Python files, {compared} classes and defs agree with ast")
        assert compared > 1000


def test_tricky_shapes_exactly(fixture_repo: Path):
    with open_map(fixture_repo, workers=1) as km:
        km.index_all()
        got = {s[0]: s for s in db_symbols(km, "pkg/tricky.py")}
        # decorated def starts at the `def` line and its inner class's method is nested twice
        assert got["decorated"][2:] == (18, 28)
        assert got["decorated.inner.Local.method"][1] == "method"
        assert got["Outer.Inner.deep"][2:] == (35, 36)  # the trailing comment is not the body
        assert got["Outer.debug_only"][1] == "method"
        assert got["CONSTANT"][1] == "constant"


def test_syntax_error_file_still_yields_what_parses(tmp_path: Path):
    write(tmp_path, {"broken.py": (
        "def ok():\n    return 1\n\n"
        "def broken(:\n    pass\n\n"
        "class After:\n    def m(self):\n        return ok()\n")})
    with open_map(tmp_path) as km:
        km.index_all()
        names = {s[0] for s in db_symbols(km, "broken.py")}
        assert "ok" in names
        info = {f.path: f for f in km.files()}["broken.py"]
        assert info.has_errors
        fm = km.file_map("broken.py")
        assert "[syntax errors]" in fm.render()


def test_rows_survive_the_bulk_load_unchanged(tmp_path: Path):
    from workstation.index import parse as parser
    from workstation.index.map import _symbols_of

    odd = (
        'def quoted(a="\\N", b=\'"\', c="\\t", d=r"\\\\N"):  # comment\n    return a\n\n\n'
        "def café(ünïcode=1):\n    return quoted(ünïcode)\n\n\n"
        "class Wide:\n    def method(self, x: 'dict[str, \"int\"]' = {}) -> None:\n        café(x)\n"
    )
    js = "export function tabbed(a,\tb) {\n  return a + b;\n}\nclass K { m() { return tabbed(1, 2); } }\n"
    write(tmp_path, {"odd.py": odd, "web/app.js": js})
    with open_map(tmp_path) as km:
        km.index_all()
        for rel, source in (("odd.py", odd), ("web/app.js", js)):
            parsed = parser.parse(rel, source.encode())
            want = [(s.name, s.qualname, s.kind, s.parent, s.signature, s.start_line, s.end_line)
                    for s in parsed.symbols]
            assert sorted(km.db.call(_symbols_of, rel)) == sorted(want)
        refs = {(h.path, h.line, h.enclosing) for h in km.impact("café")}
        assert refs == {("odd.py", 11, "Wide.method")}
