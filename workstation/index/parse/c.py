"""C and C++: declarators followed down to their names, qualified names split into parent and name,
tagged types with bodies, typedefs, namespaces, macros, #include.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .generic import G_IMPORT, Ctx, DefHandler, DefInfo, GenericTables, named_def, set_binds, set_calls, set_defs
from .model import Import
from .treesitter import one_line

if TYPE_CHECKING:
    from tree_sitter import Node


def _c_declarator_name(node: Node, ctx: Ctx[CTables]) -> tuple[Node | None, bool]:
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


def _c_split_qualified(name_node: Node, ctx: Ctx[CTables]) -> tuple[str, str | None]:
    text = one_line(ctx.S.node(name_node)).replace(" ", "")
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


def _c_function(node: Node, ctx: Ctx[CTables]) -> DefInfo | None:
    name_node, _ = _c_declarator_name(node, ctx)
    if name_node is None:
        return None
    name, scope = _c_split_qualified(name_node, ctx)
    in_class = ctx.enc_kind in ("class", "struct")
    kind = "method" if (in_class or scope) else "function"
    parent = None
    if scope:
        parent = scope if ctx.enc is None else ctx.enc + "." + scope
    return DefInfo(name, kind, name_node, parent=parent)


def _c_prototype(node: Node, ctx: Ctx[CTables]) -> DefInfo | None:
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
    return DefInfo(name, kind, name_node, parent=parent)


def _c_tagged(kind: str) -> DefHandler[CTables]:
    def handler(node: Node, ctx: Ctx[CTables]) -> DefInfo | None:
        t = ctx.t
        if node.child_by_field_id(t.F_BODY) is None:
            return None
        n = node.child_by_field_id(t.field("name"))
        if n is None:
            return None
        name, _scope = _c_split_qualified(n, ctx)
        return DefInfo(name, kind, n)
    return handler


def _c_typedef(node: Node, ctx: Ctx[CTables]) -> DefInfo | None:
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
    return DefInfo(ctx.S.node(decl), kind, decl)


def _c_namespace(node: Node, ctx: Ctx[CTables]) -> DefInfo | None:
    n = node.child_by_field_id(ctx.t.field("name"))
    if n is None:
        return None
    return DefInfo(one_line(ctx.S.node(n)).replace("::", ".").replace(" ", ""), "module", n)


def _c_macro(node: Node, ctx: Ctx[CTables]) -> DefInfo | None:
    n = node.child_by_field_id(ctx.t.field("name"))
    if n is None:
        return None
    params = node.child_by_field_id(ctx.t.field("parameters"))
    end = params.end_byte if params is not None else n.end_byte
    return DefInfo(ctx.S.node(n), "macro", n, sig_end=end)


def _c_include(node: Node, ctx: Ctx[CTables]) -> list[Import]:
    path = node.child_by_field_id(ctx.t.field("path"))
    if path is None:
        return []
    text = ctx.S.node(path).strip()
    if text.startswith('"') and text.endswith('"') and len(text) >= 2:
        text = text[1:-1]
    return [Import(text, (), node.start_point[0] + 1)]


class CTables(GenericTables):
    """C and C++'s tables, with the kinds its handlers look up."""

    c_name: frozenset[int]
    c_qualified: frozenset[int]
    c_fn_declarator: frozenset[int]
    c_enum: frozenset[int]


def build_c(lang: str) -> CTables:
    ident = ("identifier", "field_identifier", "type_identifier", "namespace_identifier")
    t = CTables(lang, ident, ("comment",),
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
    set_calls(t, {"call_expression": "function"}, ("field", "name", "function"))
    t.set_import(G_IMPORT, "preproc_include", _c_include)
    set_binds(t, {
        "parameter_declaration": (("declarator",), False),
        "optional_parameter_declaration": (("declarator",), False),
        "init_declarator": (("declarator",), False),
    })
    set_defs(t, {
        "function_definition": _c_function,
        "declaration": _c_prototype,
        "field_declaration": _c_prototype,
        "struct_specifier": _c_tagged("struct"),
        "union_specifier": _c_tagged("struct"),
        "enum_specifier": _c_tagged("enum"),
        "class_specifier": _c_tagged("class"),
        "type_definition": _c_typedef,
        "alias_declaration": named_def("type"),
        "namespace_definition": _c_namespace,
        "preproc_def": _c_macro,
        "preproc_function_def": _c_macro,
        "concept_definition": named_def("type"),
    })
    return t
