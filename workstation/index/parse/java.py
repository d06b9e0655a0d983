"""Java: classes, records, interfaces, enums, methods, `static final` fields as constants, imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .generic import G_IMPORT, Ctx, DefInfo, GenericTables, named_def, set_binds, set_calls, set_defs
from .model import Import

if TYPE_CHECKING:
    from tree_sitter import Node


def _java_field(node: Node, ctx: Ctx[JavaTables]) -> DefInfo | None:
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
        return DefInfo(ctx.S.node(n), "constant", n)
    ctx.special[n.start_byte] = None
    return None


def _java_import(node: Node, ctx: Ctx[JavaTables]) -> list[Import]:
    text = ctx.S.node(node).strip()
    if text.startswith("import"):
        text = text[6:]
    text = text.rstrip(";").strip()
    if text.startswith("static "):
        text = text[7:].strip()
    return [Import("".join(text.split()), (), node.start_point[0] + 1)]


class JavaTables(GenericTables):
    """Java's tables, with the kinds its handlers look up."""

    java_modifiers: frozenset[int]


def build_java(lang: str) -> JavaTables:
    ident = ("identifier", "type_identifier")
    t = JavaTables(lang, ident, ("line_comment", "block_comment"),
                    ("string_literal", "character_literal", "text_block", "decimal_integer_literal",
                     "hex_integer_literal", "octal_integer_literal", "binary_integer_literal",
                     "decimal_floating_point_literal", "true", "false", "null_literal",
                     "package_declaration", "this", "super", "void_type", "integral_type",
                     "floating_point_type", "boolean_type"))
    t.java_modifiers = t.kinds("modifiers")
    set_calls(t, {"method_invocation": "name", "object_creation_expression": "type"},
               ("name", "type"))
    t.set_import(G_IMPORT, "import_declaration", _java_import)
    set_binds(t, {
        "formal_parameter": (("name",), False),
        "catch_formal_parameter": (("name",), False),
        "variable_declarator": (("name",), False),
        "inferred_parameters": ((), True),
        "lambda_expression": (("parameters",), False),
        "enhanced_for_statement": (("name",), False),
        "resource": (("name",), False),
    })
    set_defs(t, {
        "class_declaration": named_def("class"),
        "record_declaration": named_def("class"),
        "interface_declaration": named_def("interface"),
        "annotation_type_declaration": named_def("interface"),
        "enum_declaration": named_def("enum"),
        "method_declaration": named_def("method"),
        "constructor_declaration": named_def("method"),
        "compact_constructor_declaration": named_def("method"),
        "field_declaration": _java_field,
        "constant_declaration": _java_field,
    })
    return t
