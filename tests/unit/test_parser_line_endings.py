"""Line endings: a lone CR (old Mac files) ends a line as LF and CRLF do, for every language."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from support.kmap_helpers import age, open_map, write
from workstation.index.parse import line_count, parse

SOURCES = {
    "m.py": '"""Mac module."""\nimport os\n\n\nclass A:\n    def f(self):\n        return os.path\n\n\ndef g():\n    return A()\n',
    "m.js": "// Mac script.\nfunction f() {\n  return 1;\n}\nclass K {\n  m() { return f(); }\n}\n",
    "m.go": "// Package m does things.\npackage m\n\nfunc F() int {\n\treturn 1\n}\n",
    "m.c": "/* Mac C. */\n#include <stdio.h>\nint f(void) {\n  return 1;\n}\n",
    "m.rb": "# Mac Ruby.\nclass A\n  def f\n    1\n  end\nend\n",
}


def _outline(result) -> tuple:
    return ([(s.name, s.kind, s.parent, s.start_line, s.end_line) for s in result.symbols],
            [(r.name, r.line, r.enclosing, r.kind) for r in result.references],
            [(i.module, i.line) for i in result.imports], result.purpose, result.line_count, result.has_errors)


@pytest.mark.parametrize("rel", sorted(SOURCES))
@pytest.mark.parametrize("ending", ["\r", "\r\n"])
def test_every_line_ending_gives_the_same_outline(rel: str, ending: str):
    lf = parse(rel, SOURCES[rel].encode())
    assert lf.symbols and not lf.has_errors
    other = parse(rel, SOURCES[rel].replace("\n", ending).encode())
    assert _outline(other)[:5] == _outline(lf)[:5]
    assert not other.has_errors


def test_cr_only_python_agrees_with_ast():
    source = SOURCES["m.py"].replace("\n", "\r").encode()
    tree = ast.parse(source)
    expected = sorted((n.name, n.lineno, n.end_lineno) for n in ast.walk(tree)
                      if isinstance(n, (ast.FunctionDef, ast.ClassDef)))
    assert sorted((s.name, s.start_line, s.end_line) for s in parse("m.py", source).symbols) == expected


def test_line_count_counts_every_ending():
    assert line_count(b"a\rb\r\nc\nd") == 4
    assert line_count(b"a\r") == line_count(b"a\n") == line_count(b"a\r\n") == 1
    assert line_count(b"") == 0


def test_a_cr_only_file_is_mapped_with_its_lines(tmp_path: Path):
    write(tmp_path, {"mac.py": SOURCES["m.py"].replace("\n", "\r").encode()})
    age(tmp_path / "mac.py")
    with open_map(tmp_path) as km:
        km.index_all()
        info = {f.path: f for f in km.files()}["mac.py"]
        assert info.line_count == 11 and info.purpose == "Mac module." and not info.has_errors
        assert [(s.qualname, s.start_line, s.end_line) for s in km.symbols("mac.py")] == [
            ("A", 5, 7), ("A.f", 6, 7), ("g", 10, 11)]
        assert "5-7 class A" in km.file_map("mac.py").render()
