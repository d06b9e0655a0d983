"""Pure parsing layer of the knowledge map: source bytes -> symbols, references, imports.

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

import operator
import posixpath
import re
import threading
import warnings
from dataclasses import dataclass

from .languages import detect

__all__ = [
    "Symbol", "Reference", "Import", "ParseResult", "parse", "parse_rows", "resolve_import",
    "resolve_import_all", "SUPPORTED_LANGUAGES",
]

SUPPORTED_LANGUAGES = ("python", "javascript", "typescript", "tsx", "go", "rust", "java",
                       "c", "cpp", "ruby")

MAX_REFERENCES = 200_000  # per file; minified or generated files stop recording past this
MAX_SIGNATURE = 240
PARSE_TIMEOUT_BASE_US = 2_000_000  # tree-sitter time limit: base + per byte of source
PARSE_TIMEOUT_PER_BYTE_US = 5
_DEBUG_RAISE = False  # tests flip this to surface internal errors that parse() would swallow


@dataclass(frozen=True)
class Symbol:
    name: str
    kind: str  # 'class','function','method','interface','struct','enum','trait','impl','module','type','constant','macro'
    parent: str | None  # qualified name of the enclosing symbol, e.g. 'Outer.Inner'
    signature: str  # one line
    start_line: int  # 1-indexed, inclusive
    end_line: int

    @property
    def qualname(self) -> str:
        return self.name if self.parent is None else f"{self.parent}.{self.name}"


@dataclass(frozen=True)
class Reference:
    name: str
    line: int
    enclosing: str | None  # qualified name of the enclosing symbol
    kind: str  # 'call' or 'ref'


@dataclass(frozen=True)
class Import:
    module: str
    names: tuple[str, ...]
    line: int


@dataclass
class ParseResult:
    language: str | None
    purpose: str
    symbols: list[Symbol]
    references: list[Reference]
    imports: list[Import]
    line_count: int
    has_errors: bool


# ---------------------------------------------------------------------------------------
# Fast construction of the frozen dataclasses (dataclass __init__ on a frozen class goes
# through object.__setattr__ once per field; this sets the instance dict in one go).

_new = object.__new__
_osa = object.__setattr__


def _mkref(name: str, line: int, enclosing: str | None, kind: str) -> Reference:
    o = _new(Reference)
    _osa(o, "__dict__", {"name": name, "line": line, "enclosing": enclosing, "kind": kind})
    return o


def _mksym(name, kind, parent, signature, start_line, end_line) -> Symbol:
    o = _new(Symbol)
    _osa(o, "__dict__", {"name": name, "kind": kind, "parent": parent, "signature": signature,
                         "start_line": start_line, "end_line": end_line})
    return o


# ---------------------------------------------------------------------------------------
# tree-sitter plumbing

_lock = threading.RLock()  # _tables_for may build a parser while holding it
_languages: dict[str, object] = {}
_tables: dict[str, "_Tables"] = {}
_local = threading.local()


def _get_language(lang: str):
    language = _languages.get(lang)
    if language is None:
        with _lock:
            language = _languages.get(lang)
            if language is None:
                import tree_sitter_languages as tsl

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    language = tsl.get_language(lang)
                _languages[lang] = language
    return language


def _get_parser(lang: str):
    """One parser per language per thread (tree-sitter parsers are not thread-safe)."""
    cache = getattr(_local, "parsers", None)
    if cache is None:
        cache = _local.parsers = {}
    parser = cache.get(lang)
    if parser is None:
        from tree_sitter import Parser

        parser = Parser()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parser.set_language(_get_language(lang))
        cache[lang] = parser
    return parser


class _Tables:
    """Node-kind ids of one grammar, looked up by name (several ids can share a name)."""

    def __init__(self, lang: str):
        language = _get_language(lang)
        ids: dict[str, list[int]] = {}
        for i in range(language.node_kind_count):
            if language.node_kind_is_named(i):
                ids.setdefault(language.node_kind_for_id(i), []).append(i)
        self.language = language
        self.ids = ids
        self.actions: dict[int, int] = {}
        self.handlers: dict[int, object] = {}
        self.fields: dict[str, int] = {}

    def kinds(self, *names: str) -> frozenset[int]:
        out: set[int] = set()
        for n in names:
            out.update(self.ids.get(n, ()))
        return frozenset(out)

    def set(self, action: int, *names: str, handler=None) -> None:
        for kid in self.kinds(*names):
            self.actions[kid] = action
            if handler is not None:
                self.handlers[kid] = handler

    def field(self, name: str) -> int:
        fid = self.fields.get(name)
        if fid is None:
            fid = self.language.field_id_for_name(name) or 0
            self.fields[name] = fid
        return fid


def _tables_for(lang: str) -> "_Tables":
    t = _tables.get(lang)
    if t is None:
        with _lock:
            t = _tables.get(lang)
            if t is None:
                t = _BUILDERS[lang](lang)
                _tables[lang] = t
    return t


class _Mark:
    __slots__ = ()


_MARK = _Mark()

_PY_COMMENT_RE = re.compile(r"#[^\n]*")


def _one_line(text: str, limit: int = MAX_SIGNATURE) -> str:
    s = " ".join(text.split())
    if len(s) > limit:
        s = s[: limit - 3].rstrip() + "..."
    return s


def _end_line(node) -> int:
    """1-indexed inclusive end line; a node ending at column 0 ends on the previous line."""
    er, ec = node.end_point
    if ec == 0 and er > node.start_point[0]:
        return er
    return er + 1


class _Src:
    """Byte-offset slicing of the source as str (fast path for pure-ASCII files)."""

    __slots__ = ("src", "text", "ascii")

    def __init__(self, src: bytes):
        self.src = src
        self.ascii = src.isascii()
        self.text = src.decode("ascii") if self.ascii else None

    def __call__(self, sb: int, eb: int) -> str:
        if self.ascii:
            return self.text[sb:eb]
        return self.src[sb:eb].decode("utf-8", "replace")

    def node(self, node) -> str:
        return self(node.start_byte, node.end_byte)


# ---------------------------------------------------------------------------------------
# Purpose line

_BOILERPLATE_RE = re.compile(
    r"copyright|\(c\)|©|\blicen[sc]ed?\b|spdx-|all rights reserved|-\*-|"
    r"^\s*!|^\s*(?:en)?coding[:=]|\bvim?:|"
    r"^\s*(?:pylint|mypy|flake8|noqa|type|fmt|isort|pyright|ruff|pyre|pragma)\s*:|"
    r"^\s*(?:eslint|jshint|jslint|jscs|prettier-|tslint|istanbul|c8 |globals? |@ts-|ts-|"
    r"@flow|@format|@jsx|@noflow|@generated|<reference|#region|#endregion|nolint|go:|\+build)|"
    r"^\s*[-\w]+:\s*\S+\s*$|^\s*[=*#/\-~_+<>]{3,}\s*$|^\s*use strict|"
    r"^\s*@(?:author|license|copyright|version|since)\b",
    re.IGNORECASE,
)
_COMMENT_MARKERS_RE = re.compile(r"^\s*(?:/\*+!?|\*+/|\*+|///?!?|#+!?|--|;+)?\s?")
_FILEOVERVIEW_RE = re.compile(r"^\s*@(?:fileoverview|file|module|overview)\s+(.*\S)", re.I)


def _purpose_from_comments(texts: list[str]) -> str:
    for text in texts:
        for raw in text.splitlines():
            if raw.lstrip().startswith("#!"):  # shebang
                continue
            m = _FILEOVERVIEW_RE.match(_COMMENT_MARKERS_RE.sub("", raw, count=1))
            line = m.group(1) if m else _COMMENT_MARKERS_RE.sub("", raw, count=1)
            line = line.replace("*/", "").strip()
            if not line or not any(ch.isalnum() for ch in line):
                continue
            if not m and _BOILERPLATE_RE.search(line):
                continue
            return _one_line(line, 200)
    return ""


def _first_doc_line(content: str) -> str:
    for raw in content.splitlines():
        line = raw.strip()
        if line and any(ch.isalnum() for ch in line):
            return _one_line(line, 200)
    return ""


# ---------------------------------------------------------------------------------------
# Python

_PY_IDENT, _PY_CALL, _PY_SKIP, _PY_STRING, _PY_PARAMS, _PY_KWARG = 1, 2, 3, 4, 5, 6
_PY_IMPORT, _PY_IMPORT_FROM, _PY_FUTURE = 7, 8, 9
_PY_DECORATED, _PY_FUNC, _PY_CLASS = 10, 11, 12
_PY_NOISE = frozenset({"self", "cls"})
_PY_DEF_KINDS = frozenset({"class", "function", "method"})
_CONST_RE = re.compile(r"_*[A-Z][A-Z0-9_]*\Z")


def _build_python(lang: str) -> _Tables:
    t = _Tables(lang)
    t.set(_PY_IDENT, "identifier")
    t.set(_PY_CALL, "call")
    t.set(_PY_SKIP, "comment", "line_continuation", "integer", "float", "true", "false",
          "none", "ellipsis", "escape_sequence", "string_content", "keyword_separator",
          "positional_separator", "pass_statement", "break_statement", "continue_statement",
          "type_conversion", "wildcard_import", "import_prefix")
    t.set(_PY_STRING, "string")
    t.set(_PY_PARAMS, "parameters", "lambda_parameters")
    t.set(_PY_KWARG, "keyword_argument")
    t.set(_PY_IMPORT, "import_statement")
    t.set(_PY_IMPORT_FROM, "import_from_statement")
    t.set(_PY_FUTURE, "future_import_statement")
    t.set(_PY_DECORATED, "decorated_definition")
    t.set(_PY_FUNC, "function_definition")
    t.set(_PY_CLASS, "class_definition")
    t.ident = t.kinds("identifier")
    t.attribute = t.kinds("attribute")
    t.block = t.kinds("block")
    t.interpolation = t.kinds("interpolation")
    t.param_name_only = t.kinds("identifier", "list_splat_pattern", "dictionary_splat_pattern",
                                "tuple_pattern", "keyword_separator", "positional_separator")
    t.param_with_default = t.kinds("typed_parameter", "default_parameter",
                                   "typed_default_parameter")
    t.comment = t.kinds("comment")
    t.expression_statement = t.kinds("expression_statement")
    t.assignment = t.kinds("assignment")
    t.type_alias = t.kinds("type_alias_statement")
    t.string = t.kinds("string")
    t.concatenated = t.kinds("concatenated_string")
    t.aliased_import = t.kinds("aliased_import")
    t.wildcard_import = t.kinds("wildcard_import")
    t.F_ATTRIBUTE = t.field("attribute")
    t.F_MODULE_NAME = t.field("module_name")
    t.F_NAME = t.field("name")
    t.action_list = [0] * 65536  # kind_id -> action; ERROR is 65535
    for kid, a in t.actions.items():
        t.action_list[kid] = a
    return t


def _py_last_token_row(node) -> int:
    """Row of the last non-comment token under node: ast's end_lineno (0-indexed)."""
    eb = node.end_byte
    if eb > node.start_byte:
        leaf = node.descendant_for_byte_range(eb - 1, eb)
        if leaf is not None and not leaf.is_extra:
            return node.end_point[0]
    # The node ends with a comment (or a line continuation): descend along last children,
    # stepping back over extras.
    c = node.walk()
    for _ in range(100_000):
        if not c.goto_last_child():
            break
        while c.node.is_extra and c.goto_previous_sibling():
            pass
        if c.node.is_extra:
            c.goto_parent()
            break
    return c.node.end_point[0]


def _py_dotted(text: str) -> str:
    if " " in text or "\n" in text or "\\" in text or "\t" in text:
        return "".join(text.replace("\\", " ").split())
    return text


def _py_imports(node, kind: int, S: _Src, t: _Tables) -> list[Import]:
    line = node.start_point[0] + 1
    out: list[Import] = []
    named = node.named_children
    if kind == _PY_IMPORT:
        for c in named:
            kid = c.kind_id
            if kid in t.comment:
                continue
            if kid in t.aliased_import:
                inner = c.child_by_field_id(t.F_NAME)
                if inner is None:
                    continue
                c = inner
            out.append(Import(_py_dotted(S.node(c)), (), line))
        return out
    if kind == _PY_FUTURE:
        module_node = None
        module = "__future__"
    else:
        module_node = node.child_by_field_id(t.F_MODULE_NAME)
        if module_node is None:
            return out
        module = _py_dotted(S.node(module_node))
    names: list[str] = []
    for c in named:
        kid = c.kind_id
        if (module_node is not None and c.start_byte == module_node.start_byte) or kid in t.comment:
            continue
        if kid in t.wildcard_import:
            names.append("*")
        elif kid in t.aliased_import:
            inner = c.child_by_field_id(t.F_NAME)
            if inner is not None:
                names.append(_py_dotted(S.node(inner)))
        else:
            names.append(_py_dotted(S.node(c)))
    out.append(Import(module, tuple(names), line))
    return out


def _py_string_content(node, S: _Src) -> str:
    named = node.named_children
    if len(named) >= 2:
        return S(named[0].end_byte, named[-1].start_byte)
    return S.node(node)


def _py_purpose_and_constants(root, S: _Src, t: _Tables, special: dict, symbols: list) -> str:
    comments: list[str] = []
    doc: str | None = None
    first_stmt = True
    for c in root.named_children:
        kid = c.kind_id
        if kid in t.comment:
            if first_stmt:
                comments.append(S.node(c))
            continue
        if first_stmt:
            first_stmt = False
            if kid in t.expression_statement:
                inner = c.named_children
                if len(inner) == 1:
                    s = inner[0]
                    if s.kind_id in t.concatenated:
                        parts = s.named_children
                        s = parts[0] if parts else s
                    if s.kind_id in t.string:
                        prefix = S(s.start_byte, min(s.start_byte + 4, s.end_byte)).lower()
                        if "f" not in prefix.split('"')[0].split("'")[0]:
                            doc = _first_doc_line(_py_string_content(s, S))
                            continue
        if kid in t.expression_statement:
            inner = c.named_children
            if inner and inner[0].kind_id in t.assignment:
                target = inner[0].named_children
                if target and target[0].kind_id in t.ident:
                    name = S.node(target[0])
                    if _CONST_RE.match(name):
                        special[target[0].start_byte] = None
                        symbols.append(_mksym(
                            name, "constant", None, _one_line(S.node(c).split("\n", 1)[0]),
                            c.start_point[0] + 1, _py_last_token_row(c) + 1))
        elif kid in t.type_alias:
            inner = c.named_children
            if inner:
                name_node = inner[0]
                ident = name_node.named_children[0] if name_node.named_child_count else name_node
                if ident.kind_id in t.ident:
                    special[ident.start_byte] = None
                    symbols.append(_mksym(
                        S.node(ident), "type", None, _one_line(S.node(c).split("\n", 1)[0]),
                        c.start_point[0] + 1, _py_last_token_row(c) + 1))
    if doc:
        return doc
    return _purpose_from_comments(comments)


def _parse_python(root, S: _Src):
    t = _tables_for("python")
    act = t.action_list
    act_get = t.actions.get
    symbols: list[Symbol] = []
    refs: list[Reference] = []
    imports: list[Import] = []
    special: dict[int, str | None] = {}  # start_byte -> 'call', or None for "not a reference"
    special_get = special.get
    purpose = _py_purpose_and_constants(root, S, t, special, symbols)

    ascii_src = S.ascii
    text = S.text
    src = S.src
    ident_ids = t.ident
    attr_ids = t.attribute
    block_ids = t.block
    interp_ids = t.interpolation
    name_only = t.param_name_only
    with_default = t.param_with_default
    F_ATTRIBUTE = t.F_ATTRIBUTE
    noise = _PY_NOISE
    refs_append = refs.append
    MARK = _MARK
    budget = MAX_REFERENCES

    scope: list[tuple[str, str]] = []
    enc: str | None = None
    enc_kind: str | None = None

    stack = root.named_children
    stack.reverse()
    pop = stack.pop
    push = stack.append
    ext = stack.extend

    while stack:
        node = pop()
        if node is MARK:
            scope.pop()
            if scope:
                enc, enc_kind = scope[-1]
            else:
                enc = enc_kind = None
            continue
        a = act[node.kind_id]
        if a == 1:  # identifier
            sb = node.start_byte
            k = special_get(sb, "ref")
            if k is None:
                continue
            if ascii_src:
                name = text[sb:node.end_byte]
            else:
                name = src[sb:node.end_byte].decode("utf-8", "replace")
            if name in noise:
                continue
            budget -= 1
            if budget < 0:
                continue
            refs_append((name, node.start_point[0] + 1, enc, k))
        elif a == 0:
            ch = node.named_children
            if ch:
                ch.reverse()
                ext(ch)
        elif a == 2:  # call
            ch = node.named_children
            if ch:
                fn = ch[0]
                fk = fn.kind_id
                if fk in ident_ids:
                    special[fn.start_byte] = "call"
                elif fk in attr_ids:
                    last = fn.child_by_field_id(F_ATTRIBUTE)
                    if last is not None:
                        special[last.start_byte] = "call"
                ch.reverse()
                ext(ch)
        elif a == 3:  # nothing to see below
            continue
        elif a == 4:  # string: only f-string interpolations hold references
            sb = node.start_byte
            head = src[sb:sb + 3]
            if head[:1] not in b"\"'" and (b"f" in head or b"F" in head):
                todo = []
                for c in node.named_children:
                    if c.kind_id in interp_ids:
                        todo.extend(c.named_children)
                todo.reverse()
                ext(todo)
        elif a == 5:  # parameters: names are definitions, defaults/annotations are uses
            todo = []
            for c in node.named_children:
                ck = c.kind_id
                if ck in name_only:
                    continue
                if ck in with_default:
                    ch = c.named_children
                    if ch and ch[0].kind_id not in name_only:
                        todo.append(ch[0])
                    todo.extend(ch[1:])
                else:
                    todo.append(c)
            todo.reverse()
            ext(todo)
        elif a == 6:  # keyword argument: skip the name
            ch = node.named_children
            if len(ch) > 1:
                ch.reverse()
                ch.pop()
                ext(ch)
        elif a <= 9:  # imports
            try:
                imports.extend(_py_imports(node, a, S, t))
            except Exception:
                if _DEBUG_RAISE:
                    raise
        else:  # definitions
            decorators = None
            if a == 10:
                ch = node.named_children
                if not ch:
                    continue
                defn = ch.pop()
                da = act_get(defn.kind_id, 0)
                if da != 11 and da != 12:
                    push(defn)
                    ch.reverse()
                    ext(ch)
                    continue
                node, a, decorators = defn, da, ch
            ch = node.named_children
            if not ch or ch[0].kind_id not in ident_ids:
                if decorators:
                    ch = decorators + ch
                ch.reverse()
                ext(ch)
                continue
            name_node = ch[0]
            name = S(name_node.start_byte, name_node.end_byte)
            if a == 12:
                kind = "class"
            elif enc_kind == "class":
                kind = "method"
            else:
                kind = "function"
            body = ch[-1]
            if body.kind_id in block_ids:
                sig = S(node.start_byte, body.start_byte)
                if "#" in sig:
                    sig = _PY_COMMENT_RE.sub(" ", sig)
                sig = _one_line(sig)
                if sig.endswith(":"):
                    sig = sig[:-1].rstrip()
            else:
                sig = _one_line(S.node(node).split("\n", 1)[0])
            symbols.append(_mksym(name, kind, enc, sig, node.start_point[0] + 1,
                                  _py_last_token_row(node) + 1))
            qual = name if enc is None else enc + "." + name
            push(MARK)
            scope.append((qual, kind))
            enc = qual
            enc_kind = kind
            ch.reverse()
            ch.pop()  # the name
            ext(ch)
            if decorators:
                decorators.reverse()
                ext(decorators)
    symbols.sort(key=_sym_sort_key)
    refs.sort(key=_row_sort_key)  # already in document order but for odd corners: cheap
    return purpose, symbols, refs, imports


_sym_sort_key = operator.attrgetter("start_line")
_ref_sort_key = operator.attrgetter("line")
_row_sort_key = operator.itemgetter(1)


def _refs_from_rows(rows: list[tuple]) -> list[Reference]:
    new, osa, Ref = _new, _osa, Reference
    out = []
    append = out.append
    for name, line, enclosing, kind in rows:
        r = new(Ref)
        osa(r, "__dict__", {"name": name, "line": line, "enclosing": enclosing, "kind": kind})
        append(r)
    return out


_STMT_LIST_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


def _py_ast_outline(tree) -> list[tuple]:
    """(name, kind, parent, lineno, end_lineno) of every def/class, from statements only."""
    import ast

    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    out = []
    stack = [(tree, None, None)]
    while stack:
        node, enc, enc_kind = stack.pop()
        if isinstance(node, defs):
            if isinstance(node, ast.ClassDef):
                kind = "class"
            else:
                kind = "method" if enc_kind == "class" else "function"
            out.append((node.name, kind, enc, node.lineno, node.end_lineno))
            enc = node.name if enc is None else enc + "." + node.name
            enc_kind = kind
        for field in _STMT_LIST_FIELDS:
            children = getattr(node, field, None)
            if children:
                stack.extend((c, enc, enc_kind) for c in children)
    out.sort(key=lambda x: (x[3], x[4], x[0]))
    return out


def _parse_python_ast(source: bytes, tree=None):
    """Same output as _parse_python, from Python's own ast. Used when tree-sitter reports
    errors on a file that Python itself accepts (grammar gaps) and its symbols differ from
    ast's, so such files still agree with ast. Raises on invalid source."""
    import ast

    if tree is None:
        tree = ast.parse(source)
    line_starts = [0]
    for m in re.finditer(b"\n", source):
        line_starts.append(m.end())

    def seg(l1, c1, l2, c2) -> str:
        a = line_starts[l1 - 1] + c1
        b = line_starts[l2 - 1] + c2
        return source[a:b].decode("utf-8", "replace")

    symbols: list[Symbol] = []
    refs: list[Reference] = []
    imports: list[Import] = []
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    type_alias = getattr(ast, "TypeAlias", None)
    for stmt in tree.body:
        target = None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
        elif isinstance(stmt, ast.AnnAssign):
            target = stmt.target
        elif type_alias is not None and isinstance(stmt, type_alias):
            name = getattr(stmt.name, "id", None)
            if name:
                first = seg(stmt.lineno, stmt.col_offset, stmt.end_lineno, stmt.end_col_offset)
                symbols.append(_mksym(name, "type", None, _one_line(first.split("\n", 1)[0]),
                                      stmt.lineno, stmt.end_lineno))
        if isinstance(target, ast.Name) and _CONST_RE.match(target.id):
            first = seg(stmt.lineno, stmt.col_offset, stmt.end_lineno, stmt.end_col_offset)
            symbols.append(_mksym(target.id, "constant", None,
                                  _one_line(first.split("\n", 1)[0]), stmt.lineno,
                                  stmt.end_lineno))
            target.__dict__["_ws_def"] = True
    stack: list = [(tree, None, None, None)]
    while stack:
        node, enc, enc_kind, call_func = stack.pop()
        if isinstance(node, defs):
            if isinstance(node, ast.ClassDef):
                kind = "class"
            else:
                kind = "method" if enc_kind == "class" else "function"
            body0 = node.body[0] if node.body else None
            if body0 is not None:
                first = body0.decorator_list[0] if getattr(body0, "decorator_list", None) else body0
                col = first.col_offset - (1 if first is not body0 else 0)  # before the '@'
                sig = seg(node.lineno, node.col_offset, first.lineno, max(col, 0))
                if "#" in sig:
                    sig = _PY_COMMENT_RE.sub(" ", sig)
                sig = _one_line(sig).rstrip(":").rstrip()
                if sig.endswith(":"):
                    sig = sig[:-1].rstrip()
            else:
                sig = ""
            symbols.append(_mksym(node.name, kind, enc, sig, node.lineno, node.end_lineno))
            qual = node.name if enc is None else enc + "." + node.name
            for child in ast.iter_child_nodes(node):
                stack.append((child, qual, kind, None))
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                imports.append(Import(alias.name, (), node.lineno))
            continue
        if isinstance(node, ast.ImportFrom):
            module = "." * (node.level or 0) + (node.module or "")
            imports.append(Import(module, tuple(a.name for a in node.names), node.lineno))
            continue
        if isinstance(node, ast.Name):
            if node.id not in _PY_NOISE and not node.__dict__.get("_ws_def"):
                refs.append(_mkref(node.id, node.lineno, enc,
                                   "call" if node is call_func else "ref"))
        elif isinstance(node, ast.Attribute):
            refs.append(_mkref(node.attr, node.end_lineno, enc,
                               "call" if node is call_func else "ref"))
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            refs.extend(_mkref(n, node.lineno, enc, "ref") for n in node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
            # names bound here are identifiers in tree-sitter's tree too
            if node.name and node.name not in _PY_NOISE:
                line = node.lineno
                if isinstance(node, ast.ExceptHandler) and node.type is not None:
                    line = node.type.end_lineno
                refs.append(_mkref(node.name, line, enc, "ref"))
        func = node.func if isinstance(node, ast.Call) else None
        for child in ast.iter_child_nodes(node):
            stack.append((child, enc, enc_kind, func))
    refs.sort(key=_ref_sort_key)
    symbols.sort(key=_sym_sort_key)
    imports.sort(key=lambda i: i.line)
    purpose = ""
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        purpose = _first_doc_line(body[0].value.value)
    if not purpose:
        first_line = body[0].lineno if body else len(line_starts) + 1
        comments = []
        for raw in source.split(b"\n", first_line)[: first_line - 1]:
            line = raw.decode("utf-8", "replace").strip()
            if line.startswith("#"):
                comments.append(line)
        purpose = _purpose_from_comments(comments)
    if len(refs) > MAX_REFERENCES:
        del refs[MAX_REFERENCES:]
    return purpose, symbols, refs, imports


# ---------------------------------------------------------------------------------------
# Other languages: a table-driven walker.
#
# actions: IDENT (record a reference), CALL (mark the callee as 'call'), SKIP (subtree has
# no references), BIND (names in binding positions are not references), IMPORT (handler
# returns imports, subtree skipped), IMPORT_WALK (handler returns imports, subtree walked),
# DEF (handler returns symbol info or None).

_G_IDENT, _G_CALL, _G_SKIP, _G_BIND, _G_IMPORT, _G_IMPORT_WALK, _G_DEF = 1, 2, 3, 4, 5, 6, 7


class _DefInfo:
    __slots__ = ("name", "kind", "name_node", "parent", "sig_start", "sig_end", "sig_prefix")

    def __init__(self, name, kind, name_node=None, parent=None, sig_start=None, sig_end=None,
                 sig_prefix=""):
        self.name = name
        self.kind = kind
        self.name_node = name_node
        self.parent = parent  # overrides the lexical parent when not None ('' = no parent)
        self.sig_start = sig_start
        self.sig_end = sig_end
        self.sig_prefix = sig_prefix


class _Ctx:
    """What a handler may look at: the source and the current lexical scope."""

    __slots__ = ("S", "t", "enc", "enc_kind", "special", "lang", "pending")

    def __init__(self, S, t, special, lang):
        self.pending: list[Import] = []
        self.S = S
        self.t = t
        self.special = special
        self.lang = lang
        self.enc = None
        self.enc_kind = None


def _callee_ident(node, t: _Tables):
    """The identifier naming what a call calls: f() -> f, a.b.c() -> c, a::b() -> b."""
    for _ in range(8):
        if node is None:
            return None
        if node.kind_id in t.ident:
            return node
        nxt = None
        for f in t.callee_fields:
            nxt = node.child_by_field_id(f)
            if nxt is not None:
                break
        if nxt is None:
            return None
        node = nxt
    return None


def _string_value(node, ctx: _Ctx) -> str | None:
    """Text of a string literal without quotes (None when it has interpolation)."""
    text = ctx.S.node(node)
    if len(text) >= 2 and text[0] in "\"'`" and text[-1] == text[0]:
        inner = text[1:-1]
        if text[0] == "`" and "${" in inner:
            return None
        if "#{" in inner and text[0] == '"' and ctx.lang == "ruby":
            return None
        return inner
    return None


def _walk_generic(root, S: _Src, lang: str):
    t = _tables_for(lang)
    act_get = t.actions.get
    handlers = t.handlers
    symbols: list[Symbol] = []
    refs: list[Reference] = []
    imports: list[Import] = []
    special: dict[int, str | None] = {}
    special_get = special.get
    ctx = _Ctx(S, t, special, lang)
    ascii_src = S.ascii
    text = S.text
    src = S.src
    mkref = _mkref
    refs_append = refs.append
    MARK = _MARK
    max_refs = MAX_REFERENCES
    noise = t.noise

    scope: list[tuple[str, str]] = []
    enc: str | None = None
    enc_kind: str | None = None

    stack = root.named_children
    stack.reverse()
    pop = stack.pop
    push = stack.append
    ext = stack.extend

    while stack:
        node = pop()
        if node is MARK:
            scope.pop()
            if scope:
                enc, enc_kind = scope[-1]
            else:
                enc = enc_kind = None
            continue
        kid = node.kind_id
        a = act_get(kid, 0)
        if a == 0:
            ch = node.named_children
            if ch:
                ch.reverse()
                ext(ch)
        elif a == 1:
            sb = node.start_byte
            k = special_get(sb, "ref")
            if k is None:
                continue
            if ascii_src:
                name = text[sb:node.end_byte]
            else:
                name = src[sb:node.end_byte].decode("utf-8", "replace")
            if name in noise or len(refs) >= max_refs:
                continue
            refs_append(mkref(name, node.start_point[0] + 1, enc, k))
        elif a == 3:
            continue
        else:
            ctx.enc = enc
            ctx.enc_kind = enc_kind
            walk_children = True
            if a == 2:
                fn = node.child_by_field_id(t.call_field[kid])
                target = _callee_ident(fn, t)
                if target is not None:
                    special[target.start_byte] = "call"
                h = handlers.get(kid)
                if h is not None:
                    try:
                        imports.extend(h(node, ctx, target))
                    except Exception:
                        if _DEBUG_RAISE:
                            raise
            elif a == 4:
                try:
                    handlers[kid](node, ctx)
                except Exception:
                    if _DEBUG_RAISE:
                        raise
            elif a == 5 or a == 6:
                try:
                    imports.extend(handlers[kid](node, ctx))
                except Exception:
                    if _DEBUG_RAISE:
                        raise
                walk_children = a == 6
            elif a == 7:
                try:
                    info = handlers[kid](node, ctx)
                except Exception:
                    if _DEBUG_RAISE:
                        raise
                    info = None
                if ctx.pending:
                    imports.extend(ctx.pending)
                    ctx.pending.clear()
                if info is not None and info.name:
                    if info.name_node is not None:
                        special[info.name_node.start_byte] = None
                    parent = enc if info.parent is None else (info.parent or None)
                    sig_start = node.start_byte if info.sig_start is None else info.sig_start
                    sig_end = info.sig_end
                    if info.kind == "constant":  # the first line, value included
                        nl = src.find(b"\n", sig_start, node.end_byte)
                        sig_end = node.end_byte if nl < 0 else nl
                    elif sig_end is None:
                        body = node.child_by_field_id(t.F_BODY) if t.F_BODY else None
                        sig_end = body.start_byte if body is not None else node.end_byte
                    sig_end = min(sig_end, sig_start + 2000)
                    sig = _one_line(info.sig_prefix + S(sig_start, sig_end))
                    sig = sig.rstrip("{;:= ").rstrip() if sig else sig
                    symbols.append(_mksym(info.name, info.kind, parent, sig,
                                          node.start_point[0] + 1, _end_line(node)))
                    qual = info.name if parent is None else parent + "." + info.name
                    push(MARK)
                    scope.append((qual, info.kind))
                    enc = qual
                    enc_kind = info.kind
            if walk_children:
                ch = node.named_children
                if ch:
                    ch.reverse()
                    ext(ch)
    symbols.sort(key=_sym_sort_key)
    refs.sort(key=_ref_sort_key)
    purpose = _generic_purpose(root, S, t)
    return purpose, symbols, refs, imports


def _generic_purpose(root, S: _Src, t: _Tables) -> str:
    comments: list[str] = []
    for c in root.children:
        if c.kind_id in t.comment:
            comments.append(S.node(c))
            continue
        if c.kind_id in t.purpose_skip:
            continue
        break
    purpose = _purpose_from_comments(comments)
    if purpose:
        return purpose
    # Go and Java put the file doc right before the package clause; it is covered above.
    return ""


def _mark_names(node, ctx: _Ctx, fields: tuple[str, ...], direct: bool) -> None:
    """Mark identifiers in binding positions of node as definitions (not references)."""
    t = ctx.t
    special = ctx.special
    todo = []
    for f in fields:
        todo.extend(node.children_by_field_id(t.field(f)))
    if direct:
        todo.extend(c for c in node.named_children if c.kind_id in t.ident)
    budget = 64
    while todo and budget:  # follow C declarators / patterns down to the identifiers
        budget -= 1
        c = todo.pop()
        if c.kind_id in t.ident:
            special[c.start_byte] = None
            continue
        nxt = c.child_by_field_id(t.F_DECLARATOR) if t.F_DECLARATOR else None
        if nxt is not None:
            todo.append(nxt)
        elif c.kind_id in t.declarator_like:
            todo.extend(c.named_children)
        else:
            named = c.named_children
            if len(named) == 1:
                todo.append(named[0])


def _binder(fields: tuple[str, ...] = (), direct: bool = False):
    def handler(node, ctx):
        _mark_names(node, ctx, fields, direct)
    return handler


def _new_tables(lang, ident, comments, skips, noise=()):
    t = _Tables(lang)
    t.set(_G_IDENT, *ident)
    t.set(_G_SKIP, *comments, *skips)
    t.ident = t.kinds(*ident)
    t.comment = t.kinds(*comments)
    t.noise = frozenset(noise)
    t.purpose_skip = frozenset()
    t.call_field = {}
    t.callee_fields = ()
    t.declarator_like = frozenset()
    t.F_BODY = t.field("body")
    t.F_DECLARATOR = t.field("declarator")
    return t


def _set_calls(t: _Tables, calls: dict[str, str], callee_fields: tuple[str, ...], handler=None):
    for type_name, field in calls.items():
        for kid in t.kinds(type_name):
            t.actions[kid] = _G_CALL
            t.call_field[kid] = t.field(field)
            if handler is not None:
                t.handlers[kid] = handler
    t.callee_fields = tuple(t.field(f) for f in callee_fields)


def _set_defs(t: _Tables, defs: dict[str, object]):
    for type_name, handler in defs.items():
        t.set(_G_DEF, type_name, handler=handler)


def _set_binds(t: _Tables, binds: dict[str, tuple[tuple[str, ...], bool]]):
    for type_name, (fields, direct) in binds.items():
        t.set(_G_BIND, type_name, handler=_binder(fields, direct))


def _named_def(kind: str, field: str = "name"):
    """Handler for a definition whose name is in a field; kind may be a callable(ctx)."""
    def handler(node, ctx):
        n = node.child_by_field_id(ctx.t.field(field))
        if n is None:
            return None
        name = ctx.S.node(n)
        k = kind(node, ctx) if callable(kind) else kind
        if k is None:
            return None
        return _DefInfo(name, k, n)
    return handler


# --- JavaScript / TypeScript ----------------------------------------------------------

_JS_FUNC_VALUES = ("arrow_function", "function", "function_expression", "generator_function")


def _js_variable_declarator(node, ctx):
    t = ctx.t
    name = node.child_by_field_id(t.field("name"))
    if name is None or name.kind_id not in t.ident:
        return None
    value = node.child_by_field_id(t.field("value"))
    if value is not None and value.kind_id in t.js_func:
        return _DefInfo(ctx.S.node(name), "function", name,
                        sig_end=_js_func_sig_end(value, ctx))
    if value is not None and value.kind_id in t.js_class:
        return _DefInfo(ctx.S.node(name), "class", name)
    text = ctx.S.node(name)
    if ctx.enc is None and _CONST_RE.match(text) and value is not None:
        parent = node.parent
        if parent is not None and ctx.S(parent.start_byte, parent.start_byte + 5) == "const":
            return _DefInfo(text, "constant", name)
    ctx.special[name.start_byte] = None
    return None


def _js_func_sig_end(fn, ctx) -> int:
    body = fn.child_by_field_id(ctx.t.F_BODY)
    return body.start_byte if body is not None else fn.end_byte


def _js_assignment(node, ctx):
    t = ctx.t
    right = node.child_by_field_id(t.field("right"))
    if right is None or right.kind_id not in t.js_func:
        return None
    left = node.child_by_field_id(t.field("left"))
    if left is None:
        return None
    target = left if left.kind_id in t.ident else left.child_by_field_id(t.field("property"))
    if target is None or target.kind_id not in t.ident:
        return None
    return _DefInfo(ctx.S.node(target), "function", target, sig_end=_js_func_sig_end(right, ctx))


def _js_pair(node, ctx):
    t = ctx.t
    value = node.child_by_field_id(t.field("value"))
    if value is None or value.kind_id not in t.js_func:
        return None
    key = node.child_by_field_id(t.field("key"))
    if key is None:
        return None
    name = ctx.S.node(key).strip("'\"`")
    return _DefInfo(name, "method", key if key.kind_id in t.ident else None,
                    sig_end=_js_func_sig_end(value, ctx))


def _js_method(node, ctx):
    n = node.child_by_field_id(ctx.t.field("name"))
    if n is None:
        return None
    return _DefInfo(ctx.S.node(n).strip("'\"`"), "method", n)


def _js_field(node, ctx):
    t = ctx.t
    value = node.child_by_field_id(t.field("value"))
    if value is None or value.kind_id not in t.js_func:
        return None
    n = node.child_by_field_id(t.field("name")) or node.child_by_field_id(t.field("property"))
    if n is None:
        return None
    return _DefInfo(ctx.S.node(n), "method", n, sig_end=_js_func_sig_end(value, ctx))


def _js_module(node, ctx):
    n = node.child_by_field_id(ctx.t.field("name"))
    if n is None:
        return None
    return _DefInfo(ctx.S.node(n).strip("'\"`"), "module", n)


def _js_import_names(clause, ctx) -> list[str]:
    t = ctx.t
    names: list[str] = []
    stack = [clause]
    while stack:
        n = stack.pop()
        kid = n.kind_id
        if kid in t.js_import_spec:
            nm = n.child_by_field_id(t.field("name"))
            if nm is not None:
                names.append(ctx.S.node(nm))
            continue
        if kid in t.js_namespace_import:
            names.append("*")
            continue
        if kid in t.ident and n.parent is not None and n.parent.kind_id in t.js_import_clause:
            names.append("default")
            continue
        ch = n.named_children
        ch.reverse()
        stack.extend(ch)
    return names


def _js_import(node, ctx):
    t = ctx.t
    source = node.child_by_field_id(t.field("source"))
    if source is None:
        # TS: import x = require('y')
        for c in node.named_children:
            if c.kind_id in t.js_import_require:
                for s in c.named_children:
                    if s.kind_id in t.js_string:
                        v = _string_value(s, ctx)
                        if v is not None:
                            return [Import(v, (), node.start_point[0] + 1)]
        return []
    module = _string_value(source, ctx)
    if module is None:
        return []
    names: list[str] = []
    for c in node.named_children:
        if c.kind_id in t.js_import_clause or c.kind_id in t.js_export_clause:
            names.extend(_js_import_names(c, ctx))
        elif c.kind_id in t.js_namespace_export:
            names.append("*")
    if not names and node.kind_id in t.js_export_statement and _has_star_token(node):
        names.append("*")
    return [Import(module, tuple(names), node.start_point[0] + 1)]


def _has_star_token(node) -> bool:
    return any(c.type == "*" for c in node.children)


def _js_export(node, ctx):
    if node.child_by_field_id(ctx.t.field("source")) is None:
        return []
    return _js_import(node, ctx)


def _js_call(node, ctx, target):
    """require('x') / import('x') are imports."""
    t = ctx.t
    fn = node.child_by_field_id(t.field("function"))
    if fn is None:
        return []
    fname = ctx.S.node(fn)
    if fname not in ("require", "import"):
        return []
    args = node.child_by_field_id(t.field("arguments"))
    if args is None:
        return []
    named = args.named_children
    if len(named) != 1 or named[0].kind_id not in t.js_string:
        return []
    v = _string_value(named[0], ctx)
    return [Import(v, (), node.start_point[0] + 1)] if v is not None else []


def _build_js(lang: str) -> _Tables:
    ident = ("identifier", "property_identifier", "type_identifier",
             "shorthand_property_identifier", "private_property_identifier")
    t = _new_tables(lang, ident, ("comment", "html_comment"),
                    ("string", "regex", "number", "hash_bang_line", "true", "false", "null",
                     "undefined", "this", "super", "statement_identifier", "predefined_type",
                     "escape_sequence", "string_fragment", "import", "jsx_text"),
                    noise=())
    t.purpose_skip = t.kinds("hash_bang_line")
    t.js_func = t.kinds(*_JS_FUNC_VALUES)
    t.js_class = t.kinds("class")
    t.js_string = t.kinds("string", "template_string")
    t.js_import_clause = t.kinds("import_clause")
    t.js_export_clause = t.kinds("export_clause")
    t.js_import_spec = t.kinds("import_specifier", "export_specifier")
    t.js_namespace_import = t.kinds("namespace_import")
    t.js_namespace_export = t.kinds("namespace_export")
    t.js_export_statement = t.kinds("export_statement")
    t.js_import_require = t.kinds("import_require_clause")
    _set_calls(t, {"call_expression": "function", "new_expression": "constructor"},
               ("property", "function", "name"), handler=_js_call)
    t.set(_G_IMPORT, "import_statement", handler=_js_import)
    t.set(_G_IMPORT_WALK, "export_statement", handler=_js_export)
    _set_binds(t, {
        "formal_parameters": ((), True),
        "required_parameter": (("pattern",), False),
        "optional_parameter": (("pattern",), False),
        "assignment_pattern": (("left",), False),
        "rest_pattern": ((), True),
        "arrow_function": (("parameter",), False),
        "catch_clause": (("parameter",), False),
        "shorthand_property_identifier_pattern": ((), False),
    })
    _set_defs(t, {
        "function_declaration": _named_def("function"),
        "generator_function_declaration": _named_def("function"),
        "function_signature": _named_def("function"),
        "class_declaration": _named_def("class"),
        "abstract_class_declaration": _named_def("class"),
        "method_definition": _js_method,
        "method_signature": _js_method,
        "abstract_method_signature": _js_method,
        "variable_declarator": _js_variable_declarator,
        "assignment_expression": _js_assignment,
        "pair": _js_pair,
        "public_field_definition": _js_field,
        "field_definition": _js_field,
        "interface_declaration": _named_def("interface"),
        "type_alias_declaration": _named_def("type"),
        "enum_declaration": _named_def("enum"),
        "internal_module": _js_module,
        "module": _js_module,
    })
    return t


# --- Go -------------------------------------------------------------------------------

def _go_receiver_type(node, ctx) -> str | None:
    t = ctx.t
    recv = node.child_by_field_id(t.field("receiver"))
    if recv is None:
        return None
    for p in recv.named_children:
        ty = p.child_by_field_id(t.field("type"))
        for _ in range(6):
            if ty is None:
                break
            if ty.kind_id in t.go_type_ident:
                return ctx.S.node(ty)
            nxt = ty.child_by_field_id(t.field("type"))
            if nxt is None:
                named = ty.named_children
                nxt = named[0] if named else None
            ty = nxt
    return None


def _go_method(node, ctx):
    n = node.child_by_field_id(ctx.t.field("name"))
    if n is None:
        return None
    recv = _go_receiver_type(node, ctx)
    return _DefInfo(ctx.S.node(n), "method", n, parent=recv if recv else None)


def _go_type_spec(node, ctx):
    t = ctx.t
    n = node.child_by_field_id(t.field("name"))
    if n is None:
        return None
    ty = node.child_by_field_id(t.field("type"))
    kind = "type"
    sig_end = None
    if ty is not None:
        if ty.kind_id in t.go_struct:
            kind = "struct"
        elif ty.kind_id in t.go_interface:
            kind = "interface"
        sig_end = node.end_byte
        if kind != "type":
            for c in ty.children:
                if c.type == "{" or c.type == "field_declaration_list":
                    sig_end = c.start_byte
                    break
    return _DefInfo(ctx.S.node(n), kind, n, sig_end=sig_end, sig_prefix="type ")


def _go_const(node, ctx):
    if ctx.enc is not None:
        return None
    n = node.child_by_field_id(ctx.t.field("name"))
    if n is None:
        return None
    return _DefInfo(ctx.S.node(n), "constant", n, sig_prefix="const ")


def _go_import(node, ctx):
    t = ctx.t
    out = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n.kind_id in t.go_import_spec:
            path = n.child_by_field_id(t.field("path"))
            if path is None:
                continue
            module = ctx.S.node(path).strip("\"`")
            alias = n.child_by_field_id(t.field("name"))
            names = (ctx.S.node(alias),) if alias is not None else ()
            out.append(Import(module, names, n.start_point[0] + 1))
        else:
            stack.extend(n.named_children)
    out.sort(key=lambda i: i.line)
    return out


def _build_go(lang: str) -> _Tables:
    ident = ("identifier", "field_identifier", "type_identifier", "package_identifier")
    t = _new_tables(lang, ident, ("comment",),
                    ("interpreted_string_literal", "raw_string_literal", "rune_literal",
                     "int_literal", "float_literal", "imaginary_literal", "true", "false",
                     "nil", "iota", "package_clause", "blank_identifier"))
    t.go_type_ident = t.kinds("type_identifier")
    t.go_struct = t.kinds("struct_type")
    t.go_interface = t.kinds("interface_type")
    t.go_import_spec = t.kinds("import_spec")
    _set_calls(t, {"call_expression": "function"}, ("field", "function"))
    t.set(_G_IMPORT, "import_declaration", handler=_go_import)
    _set_binds(t, {
        "parameter_declaration": (("name",), False),
        "variadic_parameter_declaration": (("name",), False),
        "var_spec": (("name",), False),
        "const_spec": (("name",), False),
        "short_var_declaration": (("left",), False),
        "range_clause": (("left",), False),
    })
    # short_var_declaration/range_clause 'left' is an expression_list of identifiers
    t.declarator_like = t.kinds("expression_list")
    _set_defs(t, {
        "function_declaration": _named_def("function"),
        "method_declaration": _go_method,
        "type_spec": _go_type_spec,
        "type_alias": _named_def("type"),
        "method_spec": _named_def("method"),
        "const_spec": _go_const,
    })
    return t


# --- Rust -----------------------------------------------------------------------------

def _rust_fn(node, ctx):
    n = node.child_by_field_id(ctx.t.field("name"))
    if n is None:
        return None
    kind = "method" if ctx.enc_kind in ("impl", "trait") else "function"
    return _DefInfo(ctx.S.node(n), kind, n)


def _rust_type_name(ty, ctx) -> str | None:
    t = ctx.t
    for _ in range(6):
        if ty is None:
            return None
        if ty.kind_id in t.rust_type_ident:
            return ctx.S.node(ty)
        nxt = ty.child_by_field_id(t.field("type")) or ty.child_by_field_id(t.field("name"))
        if nxt is None:
            named = ty.named_children
            nxt = named[-1] if named else None
        ty = nxt
    return None


def _rust_impl(node, ctx):
    ty = node.child_by_field_id(ctx.t.field("type"))
    name = _rust_type_name(ty, ctx)
    if not name:
        return None
    return _DefInfo(name, "impl", None)


def _rust_mod(node, ctx):
    t = ctx.t
    n = node.child_by_field_id(t.field("name"))
    if n is None or node.child_by_field_id(t.F_BODY) is None:
        return None
    return _DefInfo(ctx.S.node(n), "module", n)


def _rust_mod_import(node, ctx):
    t = ctx.t
    n = node.child_by_field_id(t.field("name"))
    if n is not None and node.child_by_field_id(t.F_BODY) is None:
        ctx.special[n.start_byte] = None
        return [Import("self::" + ctx.S.node(n), (), node.start_point[0] + 1)]
    return []


def _rust_use_items(node, ctx) -> list[str]:
    t = ctx.t
    out = []
    for c in node.named_children:
        if c.kind_id in t.rust_use_as:
            p = c.child_by_field_id(t.field("path"))
            if p is not None:
                out.append(_one_line(ctx.S.node(p)).replace(" ", ""))
        elif c.kind_id in t.rust_use_wildcard:
            out.append("*")
        else:
            out.append(_one_line(ctx.S.node(c)).replace(" ", ""))
    return out


def _rust_use(node, ctx):
    t = ctx.t
    line = node.start_point[0] + 1
    arg = node.child_by_field_id(t.field("argument"))
    if arg is None:
        return []
    kid = arg.kind_id
    if kid in t.rust_scoped_use_list:
        path = arg.child_by_field_id(t.field("path"))
        lst = arg.child_by_field_id(t.field("list"))
        module = _one_line(ctx.S.node(path)).replace(" ", "") if path is not None else ""
        names = _rust_use_items(lst, ctx) if lst is not None else []
        return [Import(module, tuple(names), line)]
    if kid in t.rust_use_list:
        return [Import("", tuple(_rust_use_items(arg, ctx)), line)]
    if kid in t.rust_use_as:
        p = arg.child_by_field_id(t.field("path"))
        arg = p if p is not None else arg
    text = _one_line(ctx.S.node(arg)).replace(" ", "")
    if text.endswith("::*"):
        return [Import(text[:-3], ("*",), line)]
    return [Import(text, (), line)]


def _rust_extern_crate(node, ctx):
    n = node.child_by_field_id(ctx.t.field("name"))
    return [Import(ctx.S.node(n), (), node.start_point[0] + 1)] if n is not None else []


def _build_rust(lang: str) -> _Tables:
    ident = ("identifier", "field_identifier", "type_identifier")
    t = _new_tables(lang, ident, ("line_comment", "block_comment"),
                    ("string_literal", "raw_string_literal", "char_literal", "integer_literal",
                     "float_literal", "boolean_literal", "primitive_type", "self", "crate",
                     "super", "lifetime", "escape_sequence"))
    t.rust_type_ident = t.kinds("type_identifier")
    t.rust_use_as = t.kinds("use_as_clause")
    t.rust_use_wildcard = t.kinds("use_wildcard")
    t.rust_scoped_use_list = t.kinds("scoped_use_list")
    t.rust_use_list = t.kinds("use_list")
    _set_calls(t, {"call_expression": "function", "macro_invocation": "macro"},
               ("field", "name", "function"))
    t.set(_G_IMPORT, "use_declaration", handler=_rust_use)
    t.set(_G_IMPORT, "extern_crate_declaration", handler=_rust_extern_crate)
    _set_binds(t, {
        "parameter": (("pattern",), False),
        "let_declaration": (("pattern",), False),
        "closure_parameters": ((), True),
        "for_expression": (("pattern",), False),
    })
    t.declarator_like = t.kinds("tuple_pattern")
    _set_defs(t, {
        "function_item": _rust_fn,
        "function_signature_item": _rust_fn,
        "struct_item": _named_def("struct"),
        "union_item": _named_def("struct"),
        "enum_item": _named_def("enum"),
        "trait_item": _named_def("trait"),
        "impl_item": _rust_impl,
        "mod_item": _rust_mod,
        "const_item": _named_def("constant"),
        "static_item": _named_def("constant"),
        "type_item": _named_def("type"),
        "macro_definition": _named_def("macro"),
    })
    # mod items: 'mod x;' is an import, 'mod x { ... }' a module symbol
    for kid in t.kinds("mod_item"):
        t.handlers[kid] = _rust_mod_dispatch
    return t


def _rust_mod_dispatch(node, ctx):
    info = _rust_mod(node, ctx)
    if info is None:
        ctx.pending.extend(_rust_mod_import(node, ctx))
    return info


# --- Java -----------------------------------------------------------------------------

def _java_field(node, ctx):
    t = ctx.t
    mods = None
    for c in node.named_children:
        if c.kind_id in t.java_modifiers:
            mods = ctx.S.node(c)
            break
    decl = node.child_by_field_id(t.field("declarator"))
    n = decl.child_by_field_id(t.field("name")) if decl is not None else None
    if n is None:
        return None
    if mods and "static" in mods.split() and "final" in mods.split():
        return _DefInfo(ctx.S.node(n), "constant", n)
    ctx.special[n.start_byte] = None
    return None


def _java_import(node, ctx):
    text = ctx.S.node(node).strip()
    if text.startswith("import"):
        text = text[6:]
    text = text.rstrip(";").strip()
    if text.startswith("static "):
        text = text[7:].strip()
    return [Import("".join(text.split()), (), node.start_point[0] + 1)]


def _build_java(lang: str) -> _Tables:
    ident = ("identifier", "type_identifier")
    t = _new_tables(lang, ident, ("line_comment", "block_comment"),
                    ("string_literal", "character_literal", "text_block", "decimal_integer_literal",
                     "hex_integer_literal", "octal_integer_literal", "binary_integer_literal",
                     "decimal_floating_point_literal", "true", "false", "null_literal",
                     "package_declaration", "this", "super", "void_type", "integral_type",
                     "floating_point_type", "boolean_type"))
    t.java_modifiers = t.kinds("modifiers")
    _set_calls(t, {"method_invocation": "name", "object_creation_expression": "type"},
               ("name", "type"))
    t.set(_G_IMPORT, "import_declaration", handler=_java_import)
    _set_binds(t, {
        "formal_parameter": (("name",), False),
        "catch_formal_parameter": (("name",), False),
        "variable_declarator": (("name",), False),
        "inferred_parameters": ((), True),
        "lambda_expression": (("parameters",), False),
        "enhanced_for_statement": (("name",), False),
        "resource": (("name",), False),
    })
    _set_defs(t, {
        "class_declaration": _named_def("class"),
        "record_declaration": _named_def("class"),
        "interface_declaration": _named_def("interface"),
        "annotation_type_declaration": _named_def("interface"),
        "enum_declaration": _named_def("enum"),
        "method_declaration": _named_def("method"),
        "constructor_declaration": _named_def("method"),
        "compact_constructor_declaration": _named_def("method"),
        "field_declaration": _java_field,
        "constant_declaration": _java_field,
    })
    return t


# --- C / C++ --------------------------------------------------------------------------

def _c_declarator_name(node, ctx):
    """Follow 'declarator' fields to the declared name; also says if a function_declarator
    was on the way."""
    t = ctx.t
    d = node.child_by_field_id(t.F_DECLARATOR)
    is_fn = False
    for _ in range(16):
        if d is None:
            return None, is_fn
        kid = d.kind_id
        if kid in t.c_fn_declarator:
            is_fn = True
        if kid in t.c_name:
            return d, is_fn
        nxt = d.child_by_field_id(t.F_DECLARATOR)
        if nxt is None:
            named = d.named_children
            nxt = None
            for c in named:
                if c.kind_id in t.c_name or c.child_by_field_id(t.F_DECLARATOR) is not None:
                    nxt = c
                    break
        d = nxt
    return None, is_fn


def _c_split_qualified(name_node, ctx):
    text = _one_line(ctx.S.node(name_node)).replace(" ", "")
    if name_node.kind_id in ctx.t.c_qualified and "::" in text:
        scope, _, last = text.rpartition("::")
        inner = name_node
        for _ in range(8):  # the last identifier is a definition too, not a reference
            nxt = inner.child_by_field_id(ctx.t.field("name"))
            if nxt is None:
                break
            inner = nxt
        ctx.special[inner.start_byte] = None
        return last, scope.replace("::", ".").strip(".")
    return text, None


def _c_function(node, ctx):
    name_node, _ = _c_declarator_name(node, ctx)
    if name_node is None:
        return None
    name, scope = _c_split_qualified(name_node, ctx)
    in_class = ctx.enc_kind in ("class", "struct")
    kind = "method" if (in_class or scope) else "function"
    parent = None
    if scope:
        parent = scope if ctx.enc is None else ctx.enc + "." + scope
    return _DefInfo(name, kind, name_node, parent=parent)


def _c_prototype(node, ctx):
    if ctx.enc_kind in ("function", "method"):
        name_node, _ = _c_declarator_name(node, ctx)
        if name_node is not None:
            ctx.special[name_node.start_byte] = None
        return None
    name_node, is_fn = _c_declarator_name(node, ctx)
    if name_node is None:
        return None
    if not is_fn:
        ctx.special[name_node.start_byte] = None
        return None
    name, scope = _c_split_qualified(name_node, ctx)
    kind = "method" if (ctx.enc_kind in ("class", "struct") or scope) else "function"
    parent = None
    if scope:
        parent = scope if ctx.enc is None else ctx.enc + "." + scope
    return _DefInfo(name, kind, name_node, parent=parent)


def _c_tagged(kind: str):
    def handler(node, ctx):
        t = ctx.t
        if node.child_by_field_id(t.F_BODY) is None:
            return None
        n = node.child_by_field_id(t.field("name"))
        if n is None:
            return None
        name, _scope = _c_split_qualified(n, ctx)
        return _DefInfo(name, kind, n)
    return handler


def _c_typedef(node, ctx):
    t = ctx.t
    decl = node.child_by_field_id(t.F_DECLARATOR)
    for _ in range(8):
        if decl is None or decl.kind_id in t.c_name:
            break
        nxt = decl.child_by_field_id(t.F_DECLARATOR)
        decl = nxt
    if decl is None:
        return None
    kind = "type"
    ty = node.child_by_field_id(t.field("type"))
    if ty is not None and ty.child_by_field_id(t.F_BODY) is not None \
            and ty.child_by_field_id(t.field("name")) is None:
        kind = "enum" if ty.kind_id in t.c_enum else "struct"
    return _DefInfo(ctx.S.node(decl), kind, decl)


def _c_namespace(node, ctx):
    n = node.child_by_field_id(ctx.t.field("name"))
    if n is None:
        return None
    return _DefInfo(_one_line(ctx.S.node(n)).replace("::", ".").replace(" ", ""), "module", n)


def _c_macro(node, ctx):
    n = node.child_by_field_id(ctx.t.field("name"))
    if n is None:
        return None
    params = node.child_by_field_id(ctx.t.field("parameters"))
    end = params.end_byte if params is not None else n.end_byte
    return _DefInfo(ctx.S.node(n), "macro", n, sig_end=end)


def _c_include(node, ctx):
    path = node.child_by_field_id(ctx.t.field("path"))
    if path is None:
        return []
    text = ctx.S.node(path).strip()
    if text.startswith('"') and text.endswith('"') and len(text) >= 2:
        text = text[1:-1]
    return [Import(text, (), node.start_point[0] + 1)]


def _build_c(lang: str) -> _Tables:
    ident = ("identifier", "field_identifier", "type_identifier", "namespace_identifier")
    t = _new_tables(lang, ident, ("comment",),
                    ("string_literal", "raw_string_literal", "char_literal", "system_lib_string",
                     "number_literal", "true", "false", "null", "nullptr", "preproc_arg",
                     "primitive_type", "this", "escape_sequence", "auto", "sized_type_specifier"))
    t.c_name = t.kinds("identifier", "field_identifier", "qualified_identifier",
                       "destructor_name", "operator_name", "type_identifier")
    t.c_qualified = t.kinds("qualified_identifier")
    t.c_fn_declarator = t.kinds("function_declarator")
    t.c_enum = t.kinds("enum_specifier")
    t.declarator_like = t.kinds("reference_declarator", "pointer_declarator",
                                "array_declarator", "init_declarator", "parenthesized_declarator")
    _set_calls(t, {"call_expression": "function"}, ("field", "name", "function"))
    t.set(_G_IMPORT, "preproc_include", handler=_c_include)
    _set_binds(t, {
        "parameter_declaration": (("declarator",), False),
        "optional_parameter_declaration": (("declarator",), False),
        "init_declarator": (("declarator",), False),
    })
    _set_defs(t, {
        "function_definition": _c_function,
        "declaration": _c_prototype,
        "field_declaration": _c_prototype,
        "struct_specifier": _c_tagged("struct"),
        "union_specifier": _c_tagged("struct"),
        "enum_specifier": _c_tagged("enum"),
        "class_specifier": _c_tagged("class"),
        "type_definition": _c_typedef,
        "alias_declaration": _named_def("type"),
        "namespace_definition": _c_namespace,
        "preproc_def": _c_macro,
        "preproc_function_def": _c_macro,
        "concept_definition": _named_def("type"),
    })
    return t


# --- Ruby -----------------------------------------------------------------------------

def _ruby_scoped_name(n, ctx):
    text = _one_line(ctx.S.node(n)).replace(" ", "")
    scope, _, last = text.rpartition("::")
    return last, scope.replace("::", ".").strip(".") or None


def _ruby_class(kind: str):
    def handler(node, ctx):
        n = node.child_by_field_id(ctx.t.field("name"))
        if n is None:
            return None
        name, scope = _ruby_scoped_name(n, ctx)
        parent = None
        if scope:
            parent = scope if ctx.enc is None else ctx.enc + "." + scope
        return _DefInfo(name, kind, n, parent=parent)
    return handler


def _ruby_method(node, ctx):
    t = ctx.t
    n = node.child_by_field_id(t.field("name"))
    if n is None:
        return None
    kind = "method" if (ctx.enc_kind in ("class", "module") or node.kind_id in t.rb_singleton) \
        else "function"
    params = node.child_by_field_id(t.field("parameters"))
    end = params.end_byte if params is not None else n.end_byte
    return _DefInfo(ctx.S.node(n), kind, n, sig_end=end)


def _ruby_assignment(node, ctx):
    t = ctx.t
    if ctx.enc_kind in ("method", "function"):
        return None
    left = node.child_by_field_id(t.field("left"))
    if left is None or left.kind_id not in t.rb_constant:
        return None
    return _DefInfo(ctx.S.node(left), "constant", left)


def _ruby_call(node, ctx, target):
    t = ctx.t
    if target is None or node.child_by_field_id(t.field("receiver")) is not None:
        return []
    method = ctx.S.node(target)
    if method not in ("require", "require_relative", "load", "autoload"):
        return []
    args = node.child_by_field_id(t.field("arguments"))
    if args is None:
        return []
    named = [c for c in args.named_children if c.kind_id in t.rb_string]
    if not named:
        return []
    value = _string_value(named[-1] if method == "autoload" else named[0], ctx)
    if value is None:
        return []
    if method == "require_relative" and not value.startswith("."):
        value = "./" + value
    return [Import(value, (), node.start_point[0] + 1)]


def _build_ruby(lang: str) -> _Tables:
    ident = ("identifier", "constant")
    t = _new_tables(lang, ident, ("comment",),
                    ("integer", "float", "true", "false", "nil", "self", "simple_symbol",
                     "string_content", "escape_sequence", "heredoc_body", "regex", "character",
                     "instance_variable", "class_variable", "global_variable",
                     "uninterpreted", "heredoc_beginning", "heredoc_end", "heredoc_start"))
    t.rb_constant = t.kinds("constant")
    t.rb_string = t.kinds("string")
    t.rb_singleton = t.kinds("singleton_method")
    _set_calls(t, {"call": "method"}, ("name",), handler=_ruby_call)
    _set_binds(t, {
        "method_parameters": ((), True),
        "lambda_parameters": ((), True),
        "block_parameters": ((), True),
        "optional_parameter": (("name",), False),
        "splat_parameter": (("name",), False),
        "hash_splat_parameter": (("name",), False),
        "block_parameter": (("name",), False),
        "keyword_parameter": (("name",), False),
    })
    _set_defs(t, {
        "class": _ruby_class("class"),
        "module": _ruby_class("module"),
        "method": _ruby_method,
        "singleton_method": _ruby_method,
        "assignment": _ruby_assignment,
    })
    return t


_BUILDERS = {
    "python": _build_python,
    "javascript": _build_js,
    "typescript": _build_js,
    "tsx": _build_js,
    "go": _build_go,
    "rust": _build_rust,
    "java": _build_java,
    "c": _build_c,
    "cpp": _build_c,
    "ruby": _build_ruby,
}

_CPP_HINT_RE = re.compile(rb"^\s*(?:class|namespace|template\s*<|public:|private:|protected:)"
                          rb"|\busing\s+namespace\b|::|#include\s*<(?:iostream|string|vector|memory|map)>",
                          re.MULTILINE)


# ---------------------------------------------------------------------------------------
# Entry point

def _line_count(src: bytes) -> int:
    if not src:
        return 0
    n = src.count(b"\n")
    return n if src.endswith(b"\n") else n + 1


def parse(relpath: str, source: bytes, language: str | None = None) -> ParseResult:
    """Parse one file. Never raises; ``has_errors`` is True when the source has syntax
    errors (what parsed is still returned) or could not be parsed at all."""
    return _parse(relpath, source, language, False)


def parse_rows(relpath: str, source: bytes, language: str | None = None) -> ParseResult:
    """``parse`` for bulk indexing: ``references`` holds plain (name, line, enclosing,
    kind) tuples, which cost a fraction of Reference objects to build and format."""
    return _parse(relpath, source, language, True)


def _parse(relpath: str, source: bytes, language: str | None, rows: bool) -> ParseResult:
    try:
        if isinstance(source, str):
            source = source.encode("utf-8", "surrogatepass")
        elif not isinstance(source, bytes):
            source = bytes(source)
    except Exception:
        return ParseResult(language, "", [], [], [], 0, True)
    line_count = _line_count(source)
    try:
        if language is None:
            language = detect(relpath)[0]
        if language not in _BUILDERS:
            return ParseResult(language, "", [], [], [], line_count, False)
        if language == "c" and str(relpath).lower().endswith(".h") and _CPP_HINT_RE.search(source):
            language = "cpp"
        if b"\x00" in source[:8192]:  # binary content under a source name
            return ParseResult(language, "", [], [], [], line_count, True)
        parser = _get_parser(language)
        # Garbage makes tree-sitter's error recovery ~50x slower than real code; bound it.
        parser.set_timeout_micros(PARSE_TIMEOUT_BASE_US + PARSE_TIMEOUT_PER_BYTE_US * len(source))
        try:
            tree = parser.parse(source)
        except ValueError:  # timed out
            parser.reset()
            return ParseResult(language, "", [], [], [], line_count, True)
        root = tree.root_node
        has_errors = root.has_error
        S = _Src(source)
        if language == "python":
            purpose, symbols, refs, imports = _parse_python(root, S)
            refs_are_rows = True
            if has_errors:
                # tree-sitter grammar gaps (some multi-line annotations): trust Python
                # itself when it accepts the file
                try:
                    import ast

                    tree_ast = ast.parse(source)
                except Exception:  # invalid Python: keep tree-sitter's partial result
                    tree_ast = None
                if tree_ast is not None:
                    has_errors = False
                    ours = sorted(((x.name, x.kind, x.parent, x.start_line, x.end_line)
                                   for x in symbols if x.kind in _PY_DEF_KINDS),
                                  key=lambda x: (x[3], x[4], x[0]))
                    if ours != _py_ast_outline(tree_ast):  # the error was not local
                        purpose, symbols, refs, imports = _parse_python_ast(source, tree_ast)
                        refs_are_rows = False
        else:
            purpose, symbols, refs, imports = _walk_generic(root, S, language)
            refs_are_rows = False
        if refs_are_rows and not rows:
            refs = _refs_from_rows(refs)
        elif rows and not refs_are_rows:
            refs = [(r.name, r.line, r.enclosing, r.kind) for r in refs]
        return ParseResult(language, purpose, symbols, refs, imports, line_count, has_errors)
    except Exception:
        if _DEBUG_RAISE:
            raise
        _local.parsers = {}  # a parser in a bad state is dropped
        return ParseResult(language, "", [], [], [], line_count, True)


# ---------------------------------------------------------------------------------------
# Import resolution


class _PathIndex:
    """Look-ups over a set of repo-relative paths, built once per set."""

    def __init__(self, paths):
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


def _path_index(known_paths) -> _PathIndex:
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


def resolve_import_all(imp: Import, importer: str, language: str, known_paths) -> list[str]:
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


def resolve_import(imp: Import, importer: str, language: str, known_paths) -> str | None:
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
