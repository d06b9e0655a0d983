"""Ruby: classes, modules, methods, constants, and require / require_relative / load / autoload as imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .generic import Ctx, DefHandler, DefInfo, GenericTables, set_binds, set_calls, set_defs, string_value
from .model import Import
from .treesitter import one_line

if TYPE_CHECKING:
    from tree_sitter import Node


def _ruby_scoped_name(n: Node, ctx: Ctx[RubyTables]) -> tuple[str, str | None]:
    text = one_line(ctx.S.node(n)).replace(" ", "")
    scope, _, last = text.rpartition("::")
    return last, scope.replace("::", ".").strip(".") or None


def _ruby_class(kind: str) -> DefHandler[RubyTables]:
    def handler(node: Node, ctx: Ctx[RubyTables]) -> DefInfo | None:
        n = node.child_by_field_id(ctx.t.field("name"))
        if n is None:
            return None
        name, scope = _ruby_scoped_name(n, ctx)
        parent = None
        if scope:
            parent = scope if ctx.enc is None else ctx.enc + "." + scope
        return DefInfo(name, kind, n, parent=parent)
    return handler


def _ruby_method(node: Node, ctx: Ctx[RubyTables]) -> DefInfo | None:
    t = ctx.t
    n = node.child_by_field_id(t.field("name"))
    if n is None:
        return None
    kind = "method" if (ctx.enc_kind in ("class", "module") or node.kind_id in t.rb_singleton) \
        else "function"
    params = node.child_by_field_id(t.field("parameters"))
    end = params.end_byte if params is not None else n.end_byte
    return DefInfo(ctx.S.node(n), kind, n, sig_end=end)


def _ruby_assignment(node: Node, ctx: Ctx[RubyTables]) -> DefInfo | None:
    t = ctx.t
    if ctx.enc_kind in ("method", "function"):
        return None
    left = node.child_by_field_id(t.field("left"))
    if left is None or left.kind_id not in t.rb_constant:
        return None
    return DefInfo(ctx.S.node(left), "constant", left)


def _ruby_call(node: Node, ctx: Ctx[RubyTables], target: Node | None) -> list[Import]:
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
    value = string_value(named[-1] if method == "autoload" else named[0], ctx)
    if value is None:
        return []
    if method == "require_relative" and not value.startswith("."):
        value = "./" + value
    return [Import(value, (), node.start_point[0] + 1)]


class RubyTables(GenericTables):
    """Ruby's tables, with the kinds its handlers look up."""

    rb_constant: frozenset[int]
    rb_string: frozenset[int]
    rb_singleton: frozenset[int]


def build_ruby(lang: str) -> RubyTables:
    ident = ("identifier", "constant")
    t = RubyTables(lang, ident, ("comment",),
                    ("integer", "float", "true", "false", "nil", "self", "simple_symbol",
                     "string_content", "escape_sequence", "heredoc_body", "regex", "character",
                     "instance_variable", "class_variable", "global_variable",
                     "uninterpreted", "heredoc_beginning", "heredoc_end", "heredoc_start"))
    t.rb_constant = t.kinds("constant")
    t.rb_string = t.kinds("string")
    t.rb_singleton = t.kinds("singleton_method")
    set_calls(t, {"call": "method"}, ("name",), handler=_ruby_call)
    set_binds(t, {
        "method_parameters": ((), True),
        "lambda_parameters": ((), True),
        "block_parameters": ((), True),
        "optional_parameter": (("name",), False),
        "splat_parameter": (("name",), False),
        "hash_splat_parameter": (("name",), False),
        "block_parameter": (("name",), False),
        "keyword_parameter": (("name",), False),
    })
    set_defs(t, {
        "class": _ruby_class("class"),
        "module": _ruby_class("module"),
        "method": _ruby_method,
        "singleton_method": _ruby_method,
        "assignment": _ruby_assignment,
    })
    return t
