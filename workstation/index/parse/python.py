"""Python: symbols, references and imports from tree-sitter's tree, checked against `ast`.

The walk is iterative (expressions nest far deeper than the recursion limit) and
records references as plain (name, line, enclosing, kind) rows, which cost a
fraction of Reference objects. When tree-sitter's grammar trips on a file that
Python itself accepts (some multi-line annotations), `parse_python_ast` gives the
same output from Python's own `ast` (see core.py for when it is used).

This module is over 500 lines because it holds two parsers of one language that must
agree to the line: the tree-sitter walk and the `ast` fallback it is checked against.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from .model import (
    CONST_RE,
    MAX_REFERENCES,
    Import,
    Outline,
    Reference,
    RefRow,
    Symbol,
    debugging,
    mkref,
    mksym,
    ref_sort_key,
    row_sort_key,
    sym_sort_key,
)
from .purpose import comment_blocks, first_doc_line, purpose_from_comments
from .treesitter import Src, Tables, one_line, tables_for

if TYPE_CHECKING:
    from tree_sitter import Node

_PY_COMMENT_RE = re.compile(r"#[^\n]*")

# What the walk does with a node, by kind (Tables.actions / action_list). WALK (0) is the
# default: go through the named children. The imports sit together (<= _PY_FUTURE), as do
# the definitions (> _PY_FUTURE): the walk tests ranges.
_PY_WALK = 0
_PY_IDENT = 1  # an identifier: a reference unless marked otherwise
_PY_CALL = 2  # a call: its callee identifier is a 'call'
_PY_SKIP = 3  # nothing below holds a reference
_PY_STRING = 4  # only f-string interpolations hold references
_PY_PARAMS = 5  # parameter names are definitions; defaults and annotations are uses
_PY_KWARG = 6  # a keyword argument's name is not a reference
_PY_ATTR = 7  # `x.name`: the name is an 'attr' reference (a member read), unless called
_PY_ASSIGN = 8  # `x.name = ...`: the member assigned is a 'set' reference
_PY_IMPORT, _PY_IMPORT_FROM, _PY_FUTURE = 9, 10, 11
_PY_DECORATED, _PY_FUNC, _PY_CLASS = 12, 13, 14
_PY_NOISE = frozenset({"self", "cls"})
PY_DEF_KINDS = frozenset({"class", "function", "method"})


class PyTables(Tables):
    """The Python walker's tables: the kinds and fields it looks up, and `action_list`, the actions
    as a list indexed by kind id (faster than a dict in the walk)."""

    ident: frozenset[int]
    attribute: frozenset[int]
    block: frozenset[int]
    interpolation: frozenset[int]
    param_name_only: frozenset[int]
    param_with_default: frozenset[int]
    comment: frozenset[int]
    expression_statement: frozenset[int]
    assignment: frozenset[int]
    type_alias: frozenset[int]
    string: frozenset[int]
    concatenated: frozenset[int]
    aliased_import: frozenset[int]
    wildcard_import: frozenset[int]
    F_ATTRIBUTE: int
    F_LEFT: int
    F_MODULE_NAME: int
    F_NAME: int
    action_list: list[int]


_TABLES: dict[str, PyTables] = {}


def _build_python(lang: str) -> PyTables:
    t = PyTables(lang)
    t.set(_PY_IDENT, "identifier")
    t.set(_PY_CALL, "call")
    t.set(_PY_SKIP, "comment", "line_continuation", "integer", "float", "true", "false",
          "none", "ellipsis", "escape_sequence", "string_content", "keyword_separator",
          "positional_separator", "pass_statement", "break_statement", "continue_statement",
          "type_conversion", "wildcard_import", "import_prefix")
    t.set(_PY_STRING, "string")
    t.set(_PY_PARAMS, "parameters", "lambda_parameters")
    t.set(_PY_KWARG, "keyword_argument")
    t.set(_PY_ATTR, "attribute")
    t.set(_PY_ASSIGN, "assignment")
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
    t.F_LEFT = t.field("left")
    t.F_MODULE_NAME = t.field("module_name")
    t.F_NAME = t.field("name")
    t.action_list = [0] * 65536  # kind_id -> action; ERROR is 65535
    for kid, a in t.actions.items():
        t.action_list[kid] = a
    return t


def _py_last_token_row(node: Node) -> int:
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


def _py_imports(node: Node, kind: int, S: Src, t: PyTables) -> list[Import]:
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


def _py_string_content(node: Node, S: Src) -> str:
    named = node.named_children
    if len(named) >= 2:
        return S(named[0].end_byte, named[-1].start_byte)
    return S.node(node)


def _py_purpose_and_constants(root: Node, S: Src, t: PyTables, special: dict[int, str | None],
                              symbols: list[Symbol]) -> str:
    comments: list[tuple[int, int, str]] = []
    doc: str | None = None
    first_stmt = True
    for c in root.named_children:
        kid = c.kind_id
        if kid in t.comment:
            if first_stmt:
                comments.append((c.start_point[0], c.end_point[0], S.node(c)))
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
                            doc = first_doc_line(_py_string_content(s, S))
                            continue
        if kid in t.expression_statement:
            inner = c.named_children
            if inner and inner[0].kind_id in t.assignment:
                target = inner[0].named_children
                if target and target[0].kind_id in t.ident:
                    name = S.node(target[0])
                    if CONST_RE.match(name):
                        special[target[0].start_byte] = None
                        symbols.append(mksym(
                            name, "constant", None, one_line(S.node(c).split("\n", 1)[0]),
                            c.start_point[0] + 1, _py_last_token_row(c) + 1))
        elif kid in t.type_alias:
            inner = c.named_children
            if inner:
                name_node = inner[0]
                ident = name_node.named_children[0] if name_node.named_child_count else name_node
                if ident.kind_id in t.ident:
                    special[ident.start_byte] = None
                    symbols.append(mksym(
                        S.node(ident), "type", None, one_line(S.node(c).split("\n", 1)[0]),
                        c.start_point[0] + 1, _py_last_token_row(c) + 1))
    if doc:
        return doc
    return purpose_from_comments(comment_blocks(comments))


def parse_python(root: Node, S: Src) -> Outline[RefRow]:
    """(purpose, symbols, reference rows, imports) of a Python tree.

    The walk goes right to left (children pushed as tree-sitter lists them, so the last pops
    first): no list is reversed per node, and the rows, collected in reverse document order,
    are turned around once at the end. Every action reads only the node and its descendants,
    so the order of the walk changes nothing but the order rows are found in.
    """
    t = tables_for(_TABLES, "python", _build_python)
    act = t.action_list
    act_get = t.actions.get
    symbols: list[Symbol] = []
    refs: list[tuple] = []
    special: dict[int, str | None] = {}  # start_byte -> 'call', or None for "not a reference"
    special_get = special.get
    purpose = _py_purpose_and_constants(root, S, t, special, symbols)
    defined: list[Symbol] = []  # definitions and the imports of each statement, last first
    imported: list[list[Import]] = []

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
    # the actions as locals: as cheap to compare as literals, and named
    WALK, IDENT, CALL, SKIP, STRING, PARAMS, KWARG, ATTR, ASSIGN = (
        _PY_WALK, _PY_IDENT, _PY_CALL, _PY_SKIP, _PY_STRING, _PY_PARAMS, _PY_KWARG, _PY_ATTR, _PY_ASSIGN)
    F_LEFT = t.F_LEFT
    LAST_IMPORT, DECORATED, FUNC, CLASS = _PY_FUTURE, _PY_DECORATED, _PY_FUNC, _PY_CLASS

    scope: list[tuple[str, str]] = []
    enc: str | None = None
    enc_kind: str | None = None

    stack: list[Node | None] = [*root.named_children]  # None: the end of a definition's scope
    pop = stack.pop
    push = stack.append
    ext = stack.extend

    while stack:
        node = pop()
        if node is None:  # the end of a definition's scope
            scope.pop()
            if scope:
                enc, enc_kind = scope[-1]
            else:
                enc = enc_kind = None
            continue
        a = act[node.kind_id]
        if a == IDENT:
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
            refs_append((name, node.start_point[0] + 1, enc, k))
        elif a == WALK:
            ext(node.named_children)
        elif a == SKIP:
            continue
        elif a == CALL:
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
                ext(ch)
        elif a == ATTR:
            last = node.child_by_field_id(F_ATTRIBUTE)
            if last is not None and last.start_byte not in special:  # a call or a write says more
                special[last.start_byte] = "attr"
            ext(node.named_children)
        elif a == ASSIGN:
            left = node.child_by_field_id(F_LEFT)
            if left is not None and left.kind_id in attr_ids:
                last = left.child_by_field_id(F_ATTRIBUTE)
                if last is not None:
                    special[last.start_byte] = "set"
            ext(node.named_children)
        elif a == STRING:
            sb = node.start_byte
            head = src[sb:sb + 3]
            if head[:1] not in b"\"'" and (b"f" in head or b"F" in head):
                for c in node.named_children:
                    if c.kind_id in interp_ids:
                        ext(c.named_children)
        elif a == PARAMS:
            for c in node.named_children:
                ck = c.kind_id
                if ck in name_only:
                    continue
                if ck in with_default:
                    ch = c.named_children
                    if ch and ch[0].kind_id not in name_only:
                        push(ch[0])
                    ext(ch[1:])
                else:
                    push(c)
        elif a == KWARG:
            ch = node.named_children
            if len(ch) > 1:
                ext(ch[1:])
        elif a <= LAST_IMPORT:  # import, from-import, future import
            try:
                imported.append(_py_imports(node, a, S, t))
            except Exception:
                if debugging():
                    raise
        else:  # definitions
            decorators = None
            if a == DECORATED:
                ch = node.named_children
                if not ch:
                    continue
                defn = ch.pop()
                da = act_get(defn.kind_id, WALK)
                if da != FUNC and da != CLASS:
                    ext(ch)
                    push(defn)
                    continue
                node, a, decorators = defn, da, ch
            ch = node.named_children
            if not ch or ch[0].kind_id not in ident_ids:
                if decorators:
                    ext(decorators)
                ext(ch)
                continue
            name_node = ch[0]
            name = S(name_node.start_byte, name_node.end_byte)
            if a == CLASS:
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
                sig = one_line(sig)
                if sig.endswith(":"):
                    sig = sig[:-1].rstrip()
            else:
                sig = one_line(S.node(node).split("\n", 1)[0])
            defined.append(mksym(name, kind, enc, sig, node.start_point[0] + 1,
                                 _py_last_token_row(node) + 1))
            qual = name if enc is None else enc + "." + name
            push(None)  # the end of its scope
            scope.append((qual, kind))
            enc = qual
            enc_kind = kind
            if decorators:
                ext(decorators)
            ext(ch[1:])  # not the name
    refs.reverse()  # found last first, as were the definitions and imports
    defined.reverse()
    symbols += defined
    imported.reverse()
    imports = [imp for group in imported for imp in group]
    if len(refs) > MAX_REFERENCES:  # the first ones in the file, as a walk in order would keep
        del refs[MAX_REFERENCES:]
    symbols.sort(key=sym_sort_key)
    refs.sort(key=row_sort_key)  # already in document order but for odd corners: cheap
    return purpose, symbols, refs, imports


_STMT_LIST_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


def _end(node: ast.stmt | ast.expr) -> int:
    """A node's last line: `end_lineno`, which `ast.parse` always sets (None only on nodes built by hand)."""
    return node.end_lineno or node.lineno


def py_ast_outline(tree: ast.Module) -> list[tuple[str, str, str | None, int, int | None]]:
    """(name, kind, parent, lineno, end_lineno) of every def/class, from statements only."""
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    out: list[tuple[str, str, str | None, int, int | None]] = []
    stack: list[tuple[ast.AST, str | None, str | None]] = [(tree, None, None)]
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


def parse_python_ast(source: bytes, tree: ast.Module | None = None) -> Outline[Reference]:
    """Same output as _parse_python, from Python's own ast. Used when tree-sitter reports
    errors on a file that Python itself accepts (grammar gaps) and its symbols differ from
    ast's, so such files still agree with ast. Raises on invalid source."""
    if tree is None:
        tree = ast.parse(source)
    line_starts = [0]
    for m in re.finditer(b"\n", source):
        line_starts.append(m.end())

    def seg(l1: int, c1: int, l2: int, c2: int) -> str:
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
                first = seg(stmt.lineno, stmt.col_offset, _end(stmt), stmt.end_col_offset or 0)
                symbols.append(mksym(name, "type", None, one_line(first.split("\n", 1)[0]),
                                      stmt.lineno, _end(stmt)))
        if isinstance(target, ast.Name) and CONST_RE.match(target.id):
            first = seg(stmt.lineno, stmt.col_offset, _end(stmt), stmt.end_col_offset or 0)
            symbols.append(mksym(target.id, "constant", None,
                                  one_line(first.split("\n", 1)[0]), stmt.lineno, _end(stmt)))
            target.__dict__["_ws_def"] = True
    stack: list[tuple[ast.AST, str | None, str | None, ast.expr | None]] = [(tree, None, None, None)]
    while stack:
        node, enc, enc_kind, call_func = stack.pop()
        if isinstance(node, defs):
            if isinstance(node, ast.ClassDef):
                kind = "class"
            else:
                kind = "method" if enc_kind == "class" else "function"
            body0 = node.body[0] if node.body else None
            if body0 is not None:
                head: ast.stmt | ast.expr = body0
                if isinstance(body0, defs) and body0.decorator_list:
                    head = body0.decorator_list[0]
                col = head.col_offset - (1 if head is not body0 else 0)  # before the '@'
                sig = seg(node.lineno, node.col_offset, head.lineno, max(col, 0))
                if "#" in sig:
                    sig = _PY_COMMENT_RE.sub(" ", sig)
                sig = one_line(sig).rstrip(":").rstrip()
                if sig.endswith(":"):
                    sig = sig[:-1].rstrip()
            else:
                sig = ""
            symbols.append(mksym(node.name, kind, enc, sig, node.lineno, _end(node)))
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
                refs.append(mkref(node.id, node.lineno, enc,
                                   "call" if node is call_func else "ref"))
        elif isinstance(node, ast.Attribute):
            refs.append(mkref(node.attr, _end(node), enc,
                               "call" if node is call_func else "set" if node.__dict__.get("_ws_set")
                               else "attr"))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):  # `x.name = ...`: a member written
            for target in node.targets if isinstance(node, ast.Assign) else (node.target,):
                if isinstance(target, ast.Attribute):
                    target.__dict__["_ws_set"] = True
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            refs.extend(mkref(n, node.lineno, enc, "ref") for n in node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
            # names bound here are identifiers in tree-sitter's tree too
            if node.name and node.name not in _PY_NOISE:
                line = node.lineno
                if isinstance(node, ast.ExceptHandler) and node.type is not None:
                    line = _end(node.type)
                refs.append(mkref(node.name, line, enc, "ref"))
        func = node.func if isinstance(node, ast.Call) else None
        for child in ast.iter_child_nodes(node):
            stack.append((child, enc, enc_kind, func))
    refs.sort(key=ref_sort_key)
    symbols.sort(key=sym_sort_key)
    imports.sort(key=lambda i: i.line)
    purpose = ""
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        purpose = first_doc_line(body[0].value.value)
    if not purpose:
        first_line = body[0].lineno if body else len(line_starts) + 1
        comments: list[tuple[int, int, str]] = []
        for row, raw in enumerate(source.split(b"\n", first_line)[: first_line - 1]):
            text = raw.decode("utf-8", "replace").strip()
            if text.startswith("#"):
                comments.append((row, row, text))
        purpose = purpose_from_comments(comment_blocks(comments))
    if len(refs) > MAX_REFERENCES:
        del refs[MAX_REFERENCES:]
    return purpose, symbols, refs, imports

