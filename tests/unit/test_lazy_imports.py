"""An import inside a function says why it is not at the top of its module: `# lazy: <reason>` on its first
line, naming what it protects (a measured start-up cost, a named import cycle, an optional or platform-only
dependency). Everything else belongs at the top, where a reader and import-linter see it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import workstation

PACKAGE = Path(workstation.__file__).parent
LAZY = re.compile(r"#\s*lazy:\s*\S")


def _unexplained(path: Path) -> list[str]:
    """`line: text` of the imports inside functions of `path` whose first line gives no `# lazy:` reason."""
    source = path.read_text()
    lines = source.splitlines()
    functions = [fn for fn in ast.walk(ast.parse(source)) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))]
    found = {node.lineno for fn in functions for node in ast.walk(fn)
             if isinstance(node, (ast.Import, ast.ImportFrom)) and not LAZY.search(lines[node.lineno - 1])}
    return [f"{n}: {lines[n - 1].strip()}" for n in sorted(found)]


def test_every_import_inside_a_function_says_why_it_is_lazy():
    found = [f"workstation/{path.relative_to(PACKAGE).as_posix()}:{line}"
             for path in sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
             for line in _unexplained(path)]
    assert found == [], "imports inside functions with no `# lazy: <reason>`:\n" + "\n".join(found)
