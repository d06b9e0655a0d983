"""Rust: items, impl blocks (a symbol named by the type), `use` trees, `mod x;` as an import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .generic import G_IMPORT, Ctx, DefInfo, GenericTables, named_def, set_binds, set_calls, set_defs
from .model import Import
from .treesitter import one_line

if TYPE_CHECKING:
    from tree_sitter import Node


def _rust_fn(node: Node, ctx: Ctx[RustTables]) -> DefInfo | None:
    n = node.child_by_field_id(ctx.t.field("name"))
    if n is None:
        return None
    kind = "method" if ctx.enc_kind in ("impl", "trait") else "function"
    return DefInfo(ctx.S.node(n), kind, n)


def _rust_type_name(ty: Node | None, ctx: Ctx[RustTables]) -> str | None:
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


def _rust_impl(node: Node, ctx: Ctx[RustTables]) -> DefInfo | None:
    ty = node.child_by_field_id(ctx.t.field("type"))
    name = _rust_type_name(ty, ctx)
    if not name:
        return None
    return DefInfo(name, "impl", None)


def _rust_mod(node: Node, ctx: Ctx[RustTables]) -> DefInfo | None:
    t = ctx.t
    n = node.child_by_field_id(t.field("name"))
    if n is None or node.child_by_field_id(t.F_BODY) is None:
        return None
    return DefInfo(ctx.S.node(n), "module", n)


def _rust_mod_import(node: Node, ctx: Ctx[RustTables]) -> list[Import]:
    t = ctx.t
    n = node.child_by_field_id(t.field("name"))
    if n is not None and node.child_by_field_id(t.F_BODY) is None:
        ctx.special[n.start_byte] = None
        return [Import("self::" + ctx.S.node(n), (), node.start_point[0] + 1)]
    return []


def _rust_use_items(node: Node, ctx: Ctx[RustTables]) -> list[str]:
    t = ctx.t
    out = []
    for c in node.named_children:
        if c.kind_id in t.rust_use_as:
            p = c.child_by_field_id(t.field("path"))
            if p is not None:
                out.append(one_line(ctx.S.node(p)).replace(" ", ""))
        elif c.kind_id in t.rust_use_wildcard:
            out.append("*")
        else:
            out.append(one_line(ctx.S.node(c)).replace(" ", ""))
    return out


def _rust_use(node: Node, ctx: Ctx[RustTables]) -> list[Import]:
    t = ctx.t
    line = node.start_point[0] + 1
    arg = node.child_by_field_id(t.field("argument"))
    if arg is None:
        return []
    kid = arg.kind_id
    if kid in t.rust_scoped_use_list:
        path = arg.child_by_field_id(t.field("path"))
        lst = arg.child_by_field_id(t.field("list"))
        module = one_line(ctx.S.node(path)).replace(" ", "") if path is not None else ""
        names = _rust_use_items(lst, ctx) if lst is not None else []
        return [Import(module, tuple(names), line)]
    if kid in t.rust_use_list:
        return [Import("", tuple(_rust_use_items(arg, ctx)), line)]
    if kid in t.rust_use_as:
        p = arg.child_by_field_id(t.field("path"))
        arg = p if p is not None else arg
    text = one_line(ctx.S.node(arg)).replace(" ", "")
    if text.endswith("::*"):
        return [Import(text[:-3], ("*",), line)]
    return [Import(text, (), line)]


def _rust_extern_crate(node: Node, ctx: Ctx[RustTables]) -> list[Import]:
    n = node.child_by_field_id(ctx.t.field("name"))
    return [Import(ctx.S.node(n), (), node.start_point[0] + 1)] if n is not None else []


class RustTables(GenericTables):
    """Rust's tables, with the kinds its handlers look up."""

    rust_type_ident: frozenset[int]
    rust_use_as: frozenset[int]
    rust_use_wildcard: frozenset[int]
    rust_scoped_use_list: frozenset[int]
    rust_use_list: frozenset[int]


def build_rust(lang: str) -> RustTables:
    ident = ("identifier", "field_identifier", "type_identifier")
    t = RustTables(lang, ident, ("line_comment", "block_comment"),
                    ("string_literal", "raw_string_literal", "char_literal", "integer_literal",
                     "float_literal", "boolean_literal", "primitive_type", "self", "crate",
                     "super", "lifetime", "escape_sequence"))
    t.rust_type_ident = t.kinds("type_identifier")
    t.rust_use_as = t.kinds("use_as_clause")
    t.rust_use_wildcard = t.kinds("use_wildcard")
    t.rust_scoped_use_list = t.kinds("scoped_use_list")
    t.rust_use_list = t.kinds("use_list")
    set_calls(t, {"call_expression": "function", "macro_invocation": "macro"},
               ("field", "name", "function"))
    t.set_import(G_IMPORT, "use_declaration", _rust_use)
    t.set_import(G_IMPORT, "extern_crate_declaration", _rust_extern_crate)
    set_binds(t, {
        "parameter": (("pattern",), False),
        "let_declaration": (("pattern",), False),
        "closure_parameters": ((), True),
        "for_expression": (("pattern",), False),
    })
    t.declarator_like = t.kinds("tuple_pattern")
    set_defs(t, {
        "function_item": _rust_fn,
        "function_signature_item": _rust_fn,
        "struct_item": named_def("struct"),
        "union_item": named_def("struct"),
        "enum_item": named_def("enum"),
        "trait_item": named_def("trait"),
        "impl_item": _rust_impl,
        "mod_item": _rust_mod_dispatch,  # 'mod x;' is an import, 'mod x { ... }' a module symbol
        "const_item": named_def("constant"),
        "static_item": named_def("constant"),
        "type_item": named_def("type"),
        "macro_definition": named_def("macro"),
    })
    return t


def _rust_mod_dispatch(node: Node, ctx: Ctx[RustTables]) -> DefInfo | None:
    info = _rust_mod(node, ctx)
    if info is None:
        ctx.pending.extend(_rust_mod_import(node, ctx))
    return info
