"""Go: functions, methods (parented by their receiver type), types, top-level constants, imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .generic import G_IMPORT, Ctx, DefInfo, GenericTables, named_def, set_binds, set_calls, set_defs
from .model import Import

if TYPE_CHECKING:
    from tree_sitter import Node


def _go_receiver_type(node: Node, ctx: Ctx[GoTables]) -> str | None:
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


def _go_method(node: Node, ctx: Ctx[GoTables]) -> DefInfo | None:
    n = node.child_by_field_id(ctx.t.field("name"))
    if n is None:
        return None
    recv = _go_receiver_type(node, ctx)
    return DefInfo(ctx.S.node(n), "method", n, parent=recv if recv else None)


def _go_type_spec(node: Node, ctx: Ctx[GoTables]) -> DefInfo | None:
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
    return DefInfo(ctx.S.node(n), kind, n, sig_end=sig_end, sig_prefix="type ")


def _go_const(node: Node, ctx: Ctx[GoTables]) -> DefInfo | None:
    if ctx.enc is not None:
        return None
    n = node.child_by_field_id(ctx.t.field("name"))
    if n is None:
        return None
    return DefInfo(ctx.S.node(n), "constant", n, sig_prefix="const ")


def _go_import(node: Node, ctx: Ctx[GoTables]) -> list[Import]:
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


class GoTables(GenericTables):
    """Go's tables, with the kinds its handlers look up."""

    go_type_ident: frozenset[int]
    go_struct: frozenset[int]
    go_interface: frozenset[int]
    go_import_spec: frozenset[int]


def build_go(lang: str) -> GoTables:
    ident = ("identifier", "field_identifier", "type_identifier", "package_identifier")
    t = GoTables(lang, ident, ("comment",),
                    ("interpreted_string_literal", "raw_string_literal", "rune_literal",
                     "int_literal", "float_literal", "imaginary_literal", "true", "false",
                     "nil", "iota", "package_clause", "blank_identifier"))
    t.go_type_ident = t.kinds("type_identifier")
    t.go_struct = t.kinds("struct_type")
    t.go_interface = t.kinds("interface_type")
    t.go_import_spec = t.kinds("import_spec")
    set_calls(t, {"call_expression": "function"}, ("field", "function"))
    t.set_import(G_IMPORT, "import_declaration", _go_import)
    set_binds(t, {
        "parameter_declaration": (("name",), False),
        "variadic_parameter_declaration": (("name",), False),
        "var_spec": (("name",), False),
        "const_spec": (("name",), False),
        "short_var_declaration": (("left",), False),
        "range_clause": (("left",), False),
    })
    # short_var_declaration/range_clause 'left' is an expression_list of identifiers
    t.declarator_like = t.kinds("expression_list")
    set_defs(t, {
        "function_declaration": named_def("function"),
        "method_declaration": _go_method,
        "type_spec": _go_type_spec,
        "type_alias": named_def("type"),
        "method_spec": named_def("method"),
        "const_spec": _go_const,
    })
    return t
