"""JavaScript, TypeScript and TSX: one set of tables for the three grammars.

Functions are also what a variable, an assignment, an object pair or a class field holds
(`const f = () => ...`, `exports.f = function`); `require('x')` and `import('x')` are imports.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .generic import (
    G_IMPORT,
    G_IMPORT_WALK,
    Ctx,
    DefInfo,
    GenericTables,
    named_def,
    set_binds,
    set_calls,
    set_defs,
    string_value,
)
from .model import CONST_RE, Import

if TYPE_CHECKING:
    from tree_sitter import Node

_JS_OWNER_RE = re.compile(r"^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*$")
_JS_FUNC_VALUES = ("arrow_function", "function", "function_expression", "generator_function")


def _js_variable_declarator(node: Node, ctx: Ctx[JsTables]) -> DefInfo | None:
    t = ctx.t
    name = node.child_by_field_id(t.field("name"))
    if name is None or name.kind_id not in t.ident:
        return None
    value = node.child_by_field_id(t.field("value"))
    if value is not None and value.kind_id in t.js_func:
        return DefInfo(ctx.S.node(name), "function", name,
                        sig_end=_js_func_sig_end(value, ctx))
    if value is not None and value.kind_id in t.js_class:
        return DefInfo(ctx.S.node(name), "class", name)
    text = ctx.S.node(name)
    if ctx.enc is None and CONST_RE.match(text) and value is not None:
        parent = node.parent
        if parent is not None and ctx.S(parent.start_byte, parent.start_byte + 5) == "const":
            return DefInfo(text, "constant", name)
    ctx.special[name.start_byte] = None
    return None


def _js_func_sig_end(fn: Node, ctx: Ctx[JsTables]) -> int:
    body = fn.child_by_field_id(ctx.t.F_BODY)
    return body.start_byte if body is not None else fn.end_byte


_NOT_AN_OWNER = {"exports", "module.exports", "window", "global", "globalThis", "self"}


def _js_assignment(node: Node, ctx: Ctx[JsTables]) -> DefInfo | None:
    """`f = function`, `res.status = function status(code) {...}` (a method of `res`,
    `res.status`; of `X` for `X.prototype.m`); `err.status = 403` writes a member ('set')."""
    t = ctx.t
    left = node.child_by_field_id(t.field("left"))
    if left is None:
        return None
    target = left if left.kind_id in t.ident else left.child_by_field_id(t.field("property"))
    if target is None or target.kind_id not in t.ident:
        return None
    right = node.child_by_field_id(t.field("right"))
    if right is None or right.kind_id not in t.js_func:
        if target is not left:
            ctx.special[target.start_byte] = "set"
        return None
    if target is not left:
        obj = left.child_by_field_id(t.field("object"))
        owner = ctx.S.node(obj) if obj is not None else ""
        owner = owner[:-len(".prototype")] if owner.endswith(".prototype") else owner
        if owner and owner not in _NOT_AN_OWNER and _JS_OWNER_RE.match(owner):
            return DefInfo(ctx.S.node(target), "method", target, parent=owner,
                           sig_end=_js_func_sig_end(right, ctx))
    return DefInfo(ctx.S.node(target), "function", target, sig_end=_js_func_sig_end(right, ctx))


def _js_pair(node: Node, ctx: Ctx[JsTables]) -> DefInfo | None:
    t = ctx.t
    value = node.child_by_field_id(t.field("value"))
    if value is None or value.kind_id not in t.js_func:
        return None
    key = node.child_by_field_id(t.field("key"))
    if key is None:
        return None
    name = ctx.S.node(key).strip("'\"`")
    return DefInfo(name, "method", key if key.kind_id in t.ident else None,
                    sig_end=_js_func_sig_end(value, ctx))


def _js_method(node: Node, ctx: Ctx[JsTables]) -> DefInfo | None:
    n = node.child_by_field_id(ctx.t.field("name"))
    if n is None:
        return None
    return DefInfo(ctx.S.node(n).strip("'\"`"), "method", n)


def _js_field(node: Node, ctx: Ctx[JsTables]) -> DefInfo | None:
    t = ctx.t
    value = node.child_by_field_id(t.field("value"))
    if value is None or value.kind_id not in t.js_func:
        return None
    n = node.child_by_field_id(t.field("name")) or node.child_by_field_id(t.field("property"))
    if n is None:
        return None
    return DefInfo(ctx.S.node(n), "method", n, sig_end=_js_func_sig_end(value, ctx))


def _js_module(node: Node, ctx: Ctx[JsTables]) -> DefInfo | None:
    n = node.child_by_field_id(ctx.t.field("name"))
    if n is None:
        return None
    return DefInfo(ctx.S.node(n).strip("'\"`"), "module", n)


def _js_import_names(clause: Node, ctx: Ctx[JsTables]) -> list[str]:
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


def _js_import(node: Node, ctx: Ctx[JsTables]) -> list[Import]:
    t = ctx.t
    source = node.child_by_field_id(t.field("source"))
    if source is None:
        # TS: import x = require('y')
        for c in node.named_children:
            if c.kind_id in t.js_import_require:
                for s in c.named_children:
                    if s.kind_id in t.js_string:
                        v = string_value(s, ctx)
                        if v is not None:
                            return [Import(v, (), node.start_point[0] + 1)]
        return []
    module = string_value(source, ctx)
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


def _has_star_token(node: Node) -> bool:
    return any(c.type == "*" for c in node.children)


def _js_export(node: Node, ctx: Ctx[JsTables]) -> list[Import]:
    if node.child_by_field_id(ctx.t.field("source")) is None:
        return []
    return _js_import(node, ctx)


def _js_call(node: Node, ctx: Ctx[JsTables], target: Node | None) -> list[Import]:
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
    v = string_value(named[0], ctx)
    return [Import(v, (), node.start_point[0] + 1)] if v is not None else []


class JsTables(GenericTables):
    """JavaScript, TypeScript and TSX's tables, with the kinds its handlers look up."""

    js_func: frozenset[int]
    js_class: frozenset[int]
    js_string: frozenset[int]
    js_import_clause: frozenset[int]
    js_export_clause: frozenset[int]
    js_import_spec: frozenset[int]
    js_namespace_import: frozenset[int]
    js_namespace_export: frozenset[int]
    js_export_statement: frozenset[int]
    js_import_require: frozenset[int]


def build_js(lang: str) -> JsTables:
    ident = ("identifier", "property_identifier", "type_identifier",
             "shorthand_property_identifier", "private_property_identifier")
    t = JsTables(lang, ident, ("comment", "html_comment"),
                    ("string", "regex", "number", "hash_bang_line", "true", "false", "null",
                     "undefined", "this", "super", "statement_identifier", "predefined_type",
                     "escape_sequence", "string_fragment", "import", "jsx_text"),
                    noise=())
    t.purpose_skip = t.kinds("hash_bang_line")
    t.member = t.kinds("property_identifier", "private_property_identifier")
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
    set_calls(t, {"call_expression": "function", "new_expression": "constructor"},
               ("property", "function", "name"), handler=_js_call)
    t.set_import(G_IMPORT, "import_statement", _js_import)
    t.set_import(G_IMPORT_WALK, "export_statement", _js_export)
    set_binds(t, {
        "formal_parameters": ((), True),
        "required_parameter": (("pattern",), False),
        "optional_parameter": (("pattern",), False),
        "assignment_pattern": (("left",), False),
        "rest_pattern": ((), True),
        "arrow_function": (("parameter",), False),
        "catch_clause": (("parameter",), False),
        "shorthand_property_identifier_pattern": ((), False),
    })
    set_defs(t, {
        "function_declaration": named_def("function"),
        "generator_function_declaration": named_def("function"),
        "function_signature": named_def("function"),
        "class_declaration": named_def("class"),
        "abstract_class_declaration": named_def("class"),
        "method_definition": _js_method,
        "method_signature": _js_method,
        "abstract_method_signature": _js_method,
        "variable_declarator": _js_variable_declarator,
        "assignment_expression": _js_assignment,
        "pair": _js_pair,
        "public_field_definition": _js_field,
        "field_definition": _js_field,
        "interface_declaration": named_def("interface"),
        "type_alias_declaration": named_def("type"),
        "enum_declaration": named_def("enum"),
        "internal_module": _js_module,
        "module": _js_module,
    })
    return t
