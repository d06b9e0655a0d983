"""Seams that keep one definition per concept: SQL on the knowledge map's tables lives in index/ only
(everything else asks KnowledgeMap), and no module imports another's private names."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import workstation

PACKAGE = Path(workstation.__file__).parent
MAP_SQL = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+kmap\.", re.IGNORECASE)


def _modules():
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_only_the_index_queries_the_maps_tables():
    outside = [str(p.relative_to(PACKAGE)) for p in _modules()
               if "index" not in p.relative_to(PACKAGE).parts[:1] and MAP_SQL.search(p.read_text())]
    assert outside == []


def test_no_module_imports_a_private_name_of_another():
    found = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module not in (None, "__future__"):
                found += [f"{path.relative_to(PACKAGE)}: {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    assert found == []
