"""Pure parsing layer of the knowledge map: source bytes -> symbols, references, imports.

One module per job: `treesitter` (grammars, parsers, node-kind tables), `model` (what
is returned), `purpose` (a file's purpose line), `python` and `generic` (the two
walkers), one module per language family for the generic walker (`javascript`, `go`,
`rust`, `java`, `c`, `ruby`), `core` (the entry points) and `resolve` (import
resolution, used only by the indexer).

No database and no UI here. ``parse()`` never raises; on broken input it returns what
parses. ``has_errors`` is True when the source has syntax errors, when it looks binary (a
NUL byte in the first 8 KiB: nothing is parsed) or when tree-sitter hit its time limit
(garbage; nothing is returned). Python files on which tree-sitter's grammar trips but
that Python itself accepts (some multi-line annotations) are checked against ``ast``:
``has_errors`` is then False and, if the outlines differ, the result comes from ``ast``.
A ``.h`` file that looks like C++ is parsed as ``cpp`` (``language`` says so).

Conventions (shared by every language):

* Lines are 1-indexed and inclusive. A symbol spans from the line of its defining keyword
  to its last line. For Python this is exactly ``ast``: ``lineno`` of a decorated def or
  class is the ``def``/``class`` line (not the decorator line) and the end is
  ``end_lineno``, i.e. the last token of the body, ignoring trailing comments.
* ``parent`` and ``enclosing`` are qualified names joined with ``'.'`` whatever the
  language (``Outer.Inner.method``, Go ``Server.Run``, Rust ``Point.new``, C++ ``ns.Foo``).
* Python symbol kinds: ``class``, ``function``, ``method`` (a def whose nearest
  enclosing symbol is a class), plus ``constant`` (module-level ``UPPER_CASE = ...``) and
  ``type`` (module-level ``type X = ...``). Lambdas are not symbols.
* References are identifier uses. ``kind`` is ``'call'`` for the callee name of a call
  (``f()`` -> ``f``, ``a.b.c()`` -> ``c``) and ``'ref'`` otherwise; for ``a.b`` both
  ``a`` and ``b`` are recorded. Definition names, parameters, keyword-argument names and
  import statements are not references; Python ``self``/``cls`` are left out as noise.
  Decorator uses are enclosed by the decorated symbol.
* Imports keep the module as written (``'..pkg.mod'``, ``'./util'``, ``'fmt'``,
  ``'util/helper.h'``, ``'<stdio.h>'``, ``'crate::util'``) with two normalisations: Rust
  ``mod foo;`` is recorded as ``'self::foo'`` and Ruby ``require_relative 'x'`` as
  ``'./x'`` (both are relative to the importing file, which is how they resolve).
"""

from __future__ import annotations

from ..versions import PARSER_VERSIONS, parser_version
from .core import SUPPORTED_LANGUAGES, line_count, parse, parse_rows
from .model import Import, ParseResult, Reference, Symbol
from .python import parse_python_ast as _parse_python_ast  # noqa: F401  (tests compare against it)
from .resolve import resolve_import, resolve_import_all

__all__ = [
    "Symbol", "Reference", "Import", "ParseResult", "parse", "parse_rows", "resolve_import",
    "resolve_import_all", "SUPPORTED_LANGUAGES", "PARSER_VERSIONS", "parser_version", "line_count",
]

_DEBUG_RAISE = False  # tests flip this to surface internal errors that parse() would swallow
