"""The parser's entry points: `parse` and `parse_rows` for one file, any language.

Decides the language (a `.h` that looks like C++ is parsed as `cpp`), refuses binary
content, bounds tree-sitter's time on garbage, and for Python checks a tree with errors
against `ast` (see python.py). Never raises: a failure is `has_errors` with what parsed.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Callable

from ..languages import detect
from .c import build_c
from .generic import GenericTables, walk_generic
from .go import build_go
from .java import build_java
from .javascript import build_js
from .model import Outline, ParseResult, Reference, RefRow, debugging, refs_from_rows
from .python import PY_DEF_KINDS, parse_python, parse_python_ast, py_ast_outline
from .ruby import build_ruby
from .rust import build_rust
from .treesitter import Src, drop_parsers, get_parser, tables_for

if TYPE_CHECKING:
    from tree_sitter import Node

PARSE_TIMEOUT_BASE_US = 2_000_000  # tree-sitter time limit: base + per byte of source
PARSE_TIMEOUT_PER_BYTE_US = 5

# Every language but Python goes through the generic walker with these tables.
_BUILDERS: dict[str, Callable[[str], GenericTables]] = {
    "javascript": build_js,
    "typescript": build_js,
    "tsx": build_js,
    "go": build_go,
    "rust": build_rust,
    "java": build_java,
    "c": build_c,
    "cpp": build_c,
    "ruby": build_ruby,
}
_TABLES: dict[str, GenericTables] = {}
SUPPORTED_LANGUAGES = ("python", "javascript", "typescript", "tsx", "go", "rust", "java",
                       "c", "cpp", "ruby")
_SUPPORTED = frozenset(SUPPORTED_LANGUAGES)

_CPP_HINT_RE = re.compile(rb"^\s*(?:class|namespace|template\s*<|public:|private:|protected:)"
                          rb"|\busing\s+namespace\b|::|#include\s*<(?:iostream|string|vector|memory|map)>",
                          re.MULTILINE)


_LONE_CR_RE = re.compile(rb"\r(?!\n)")


def line_count(src: bytes) -> int:
    """Lines of a file as the parser counts them: LF, CRLF and a lone CR each end one."""
    if b"\r" in src:
        src = _LONE_CR_RE.sub(b"\n", src)
    return _line_count(src)


def _line_count(src: bytes) -> int:
    if not src:
        return 0
    n = src.count(b"\n")
    return n if src.endswith(b"\n") else n + 1


def parse(relpath: str, source: bytes | str, language: str | None = None) -> ParseResult[Reference]:
    """Parse one file. Never raises; ``has_errors`` is True when the source has syntax
    errors (what parsed is still returned) or could not be parsed at all."""
    result, rows = _parse(relpath, source, language)
    if rows is not None:
        result.references = refs_from_rows(rows)
    return result


def parse_rows(relpath: str, source: bytes | str, language: str | None = None) -> ParseResult[RefRow]:
    """``parse`` for bulk indexing: ``references`` holds plain (name, line, enclosing,
    kind) tuples, which cost a fraction of Reference objects to build and format."""
    r, rows = _parse(relpath, source, language)
    if rows is None:
        rows = [(x.name, x.line, x.enclosing, x.kind) for x in r.references]
    return ParseResult(r.language, r.purpose, r.symbols, rows, r.imports, r.line_count, r.has_errors)


def _walk(root: Node, S: Src, language: str) -> Outline[Reference]:
    return walk_generic(root, S, tables_for(_TABLES, language, _BUILDERS[language]), language)


def _failed(language: str | None, line_count: int, has_errors: bool) -> tuple[ParseResult[Reference], None]:
    return ParseResult(language, "", [], [], [], line_count, has_errors), None


def _parse(relpath: str, source: bytes | str, language: str | None
           ) -> tuple[ParseResult[Reference], list[RefRow] | None]:
    """The file's outline, and its references as rows when the walker made rows (then the result's
    `references` is empty): each entry point turns them into what it returns, once."""
    try:
        if isinstance(source, str):
            source = source.encode("utf-8", "surrogatepass")
        elif not isinstance(source, bytes):
            source = bytes(source)
    except Exception:
        return _failed(language, 0, True)
    if b"\r" in source:
        # A lone CR ends a line (old Mac files; Python and editors agree), but tree-sitter counts only
        # LF: as LF, same length, so every byte offset stays where it was.
        source = _LONE_CR_RE.sub(b"\n", source)
    line_count = _line_count(source)
    try:
        if language is None:
            language = detect(relpath)[0]
        if language not in _SUPPORTED:
            return _failed(language, line_count, False)
        if language == "c" and str(relpath).lower().endswith(".h") and _CPP_HINT_RE.search(source):
            language = "cpp"
        if b"\x00" in source[:8192]:  # binary content under a source name
            return _failed(language, line_count, True)
        parser = get_parser(language)
        # Garbage makes tree-sitter's error recovery ~50x slower than real code; bound it.
        parser.set_timeout_micros(PARSE_TIMEOUT_BASE_US + PARSE_TIMEOUT_PER_BYTE_US * len(source))
        try:
            tree = parser.parse(source)
        except ValueError:  # timed out
            parser.reset()
            return _failed(language, line_count, True)
        root = tree.root_node
        has_errors = root.has_error
        S = Src(source)
        rows: list[RefRow] | None = None
        refs: list[Reference] = []
        if language == "python":
            purpose, symbols, rows, imports = parse_python(root, S)
            if has_errors:
                # tree-sitter grammar gaps (some multi-line annotations): trust Python
                # itself when it accepts the file
                try:
                    tree_ast = ast.parse(source)
                except Exception:  # invalid Python: keep tree-sitter's partial result
                    tree_ast = None
                if tree_ast is not None:
                    has_errors = False
                    ours = sorted(((x.name, x.kind, x.parent, x.start_line, x.end_line)
                                   for x in symbols if x.kind in PY_DEF_KINDS),
                                  key=lambda x: (x[3], x[4], x[0]))
                    if ours != py_ast_outline(tree_ast):  # the error was not local
                        purpose, symbols, refs, imports = parse_python_ast(source, tree_ast)
                        rows = None
        else:
            purpose, symbols, refs, imports = _walk(root, S, language)
        return ParseResult(language, purpose, symbols, refs, imports, line_count, has_errors), rows
    except Exception:
        if debugging():
            raise
        drop_parsers()  # a parser in a bad state is dropped
        return _failed(language, line_count, True)

