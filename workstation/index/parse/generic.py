"""The table-driven walker for every language but Python.

A language module builds `Tables` (see treesitter.py) that say, per node kind, what
the walk does with it; `walk_generic` then turns a tree into symbols, references and
imports. Actions:

* G_IDENT: record a reference (unless the identifier was marked a definition): 'ref', or
  'attr' for a member name that is read (`x.status`, kinds in `t.member`), or what a
  handler marked it: 'call' (called), 'set' (a member assigned: `err.status = 403`);
* G_CALL: mark the callee as 'call' (a handler may also return imports: `require('x')`);
* G_SKIP: the subtree holds no references (literals, comments);
* G_BIND: names in binding positions (parameters, declarations) are not references;
* G_IMPORT: the handler returns imports, the subtree is skipped;
* G_IMPORT_WALK: the handler returns imports, the subtree is walked;
* G_DEF: the handler returns a DefInfo (a symbol) or None.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Generic, Iterable, Self, TypeVar

from .model import (
    MAX_REFERENCES,
    Import,
    Outline,
    Reference,
    Symbol,
    debugging,
    mkref,
    mksym,
    ref_sort_key,
    sym_sort_key,
)
from .purpose import comment_blocks, purpose_from_comments
from .treesitter import Src, Tables, end_line, one_line

if TYPE_CHECKING:
    from tree_sitter import Node

G_WALK = 0  # the default: go through the named children
G_IDENT, G_CALL, G_SKIP, G_BIND, G_IMPORT, G_IMPORT_WALK, G_DEF = 1, 2, 3, 4, 5, 6, 7


class DefInfo:
    __slots__ = ("name", "kind", "name_node", "parent", "sig_start", "sig_end", "sig_prefix")

    def __init__(self, name: str, kind: str, name_node: Node | None = None, parent: str | None = None,
                 sig_start: int | None = None, sig_end: int | None = None, sig_prefix: str = ""):
        self.name = name
        self.kind = kind
        self.name_node = name_node
        self.parent = parent  # overrides the lexical parent when not None ('' = no parent)
        self.sig_start = sig_start
        self.sig_end = sig_end
        self.sig_prefix = sig_prefix


TT = TypeVar("TT", bound="GenericTables", covariant=True)  # a language's tables, as its handlers see them
GT = TypeVar("GT", bound="GenericTables")


class Ctx(Generic[TT]):
    """What a handler may look at: the source, the language's tables and the current lexical scope."""

    __slots__ = ("S", "t", "enc", "enc_kind", "special", "lang", "pending")

    def __init__(self, S: Src, t: TT, special: dict[int, str | None], lang: str):
        self.pending: list[Import] = []  # imports a definition handler found (Rust `mod x;`)
        self.S = S
        self.t = t
        self.special = special  # start_byte -> 'call' / 'set', or None for "not a reference"
        self.lang = lang
        self.enc: str | None = None
        self.enc_kind: str | None = None


# What each action's handler is given and returns (see the module's docstring).
CallHandler = Callable[["Node", Ctx[TT], "Node | None"], Iterable[Import]]  # the call, its callee identifier
BindHandler = Callable[["Node", Ctx[TT]], None]
ImportHandler = Callable[["Node", Ctx[TT]], Iterable[Import]]
DefHandler = Callable[["Node", Ctx[TT]], "DefInfo | None"]


class GenericTables(Tables):
    """The generic walker's tables: what an action means per kind, the handlers, and the kinds and
    fields the walker looks up. A language family's subclass declares the kinds its handlers use."""

    def __init__(self, lang: str, ident: tuple[str, ...], comments: tuple[str, ...], skips: tuple[str, ...],
                 noise: tuple[str, ...] = ()):
        super().__init__(lang)
        self.set(G_IDENT, *ident)
        self.set(G_SKIP, *comments, *skips)
        self.ident = self.kinds(*ident)
        self.comment = self.kinds(*comments)
        self.noise = frozenset(noise)
        self.purpose_skip: frozenset[int] = frozenset()  # kinds before a file's leading comment (#!)
        self.member: frozenset[int] = frozenset()  # identifiers naming a member (`x.status`): 'attr' refs
        self.call_field: dict[int, int] = {}  # call kind -> the field holding what is called
        self.callee_fields: tuple[int, ...] = ()
        self.declarator_like: frozenset[int] = frozenset()  # kinds mark_names descends through
        self.F_BODY = self.field("body")
        self.F_DECLARATOR = self.field("declarator")
        self.call_handlers: dict[int, CallHandler[Self]] = {}
        self.bind_handlers: dict[int, BindHandler[Self]] = {}
        self.import_handlers: dict[int, ImportHandler[Self]] = {}
        self.def_handlers: dict[int, DefHandler[Self]] = {}

    def set_import(self, action: int, name: str, handler: ImportHandler[Self]) -> None:
        """G_IMPORT (the subtree skipped) or G_IMPORT_WALK (walked) for kind `name`."""
        for kid in self.kinds(name):
            self.actions[kid] = action
            self.import_handlers[kid] = handler


def callee_ident(node: Node | None, t: GenericTables) -> Node | None:
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


def string_value(node: Node, ctx: Ctx[GenericTables]) -> str | None:
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


def walk_generic(root: Node, S: Src, t: GT, lang: str) -> Outline[Reference]:
    """(purpose, symbols, references, imports) of a tree, walked as `t` says."""
    act_get = t.actions.get
    call_handlers, bind_handlers, import_handlers, def_handlers = (
        t.call_handlers, t.bind_handlers, t.import_handlers, t.def_handlers)
    symbols: list[Symbol] = []
    refs: list[Reference] = []
    imports: list[Import] = []
    special: dict[int, str | None] = {}
    special_get = special.get
    ctx = Ctx(S, t, special, lang)
    ascii_src = S.ascii
    text = S.text
    src = S.src
    make_ref = mkref
    refs_append = refs.append
    max_refs = MAX_REFERENCES
    noise = t.noise
    member = t.member
    # the actions as locals: as cheap to compare as literals, and named
    WALK, IDENT, CALL, SKIP, BIND, IMPORT, IMPORT_WALK, DEF = (
        G_WALK, G_IDENT, G_CALL, G_SKIP, G_BIND, G_IMPORT, G_IMPORT_WALK, G_DEF)

    scope: list[tuple[str, str]] = []
    enc: str | None = None
    enc_kind: str | None = None

    stack: list[Node | None] = [*root.named_children]  # None: the end of a definition's scope
    stack.reverse()
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
        kid = node.kind_id
        a = act_get(kid, WALK)
        if a == WALK:
            ch = node.named_children
            if ch:
                ch.reverse()
                ext(ch)
        elif a == IDENT:
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
            if k == "ref" and kid in member:
                k = "attr"
            refs_append(make_ref(name, node.start_point[0] + 1, enc, k))
        elif a == SKIP:
            continue
        else:
            ctx.enc = enc
            ctx.enc_kind = enc_kind
            walk_children = True
            if a == CALL:
                fn = node.child_by_field_id(t.call_field[kid])
                target = callee_ident(fn, t)
                if target is not None:
                    special[target.start_byte] = "call"
                h = call_handlers.get(kid)
                if h is not None:
                    try:
                        imports.extend(h(node, ctx, target))
                    except Exception:
                        if debugging():
                            raise
            elif a == BIND:
                try:
                    bind_handlers[kid](node, ctx)
                except Exception:
                    if debugging():
                        raise
            elif a == IMPORT or a == IMPORT_WALK:
                try:
                    imports.extend(import_handlers[kid](node, ctx))
                except Exception:
                    if debugging():
                        raise
                walk_children = a == IMPORT_WALK
            elif a == DEF:
                try:
                    info = def_handlers[kid](node, ctx)
                except Exception:
                    if debugging():
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
                    sig = one_line(info.sig_prefix + S(sig_start, sig_end))
                    sig = sig.rstrip("{;:= ").rstrip() if sig else sig
                    symbols.append(mksym(info.name, info.kind, parent, sig,
                                         node.start_point[0] + 1, end_line(node)))
                    qual = info.name if parent is None else parent + "." + info.name
                    push(None)
                    scope.append((qual, info.kind))
                    enc = qual
                    enc_kind = info.kind
            if walk_children:
                ch = node.named_children
                if ch:
                    ch.reverse()
                    ext(ch)
    symbols.sort(key=sym_sort_key)
    refs.sort(key=ref_sort_key)
    purpose = _generic_purpose(root, S, t)
    return purpose, symbols, refs, imports


def _generic_purpose(root: Node, S: Src, t: GenericTables) -> str:
    comments: list[tuple[int, int, str]] = []
    for c in root.children:
        if c.kind_id in t.comment:
            comments.append((c.start_point[0], c.end_point[0], S.node(c)))
            continue
        if c.kind_id in t.purpose_skip:
            continue
        break
    purpose = purpose_from_comments(comment_blocks(comments))
    if purpose:
        return purpose
    # Go and Java put the file doc right before the package clause; it is covered above.
    return ""


def mark_names(node: Node, ctx: Ctx[GenericTables], fields: tuple[str, ...], direct: bool) -> None:
    """Mark identifiers in binding positions of node as definitions (not references)."""
    t = ctx.t
    special = ctx.special
    todo: list[Node] = []
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


def binder(fields: tuple[str, ...] = (), direct: bool = False) -> BindHandler[GenericTables]:
    def handler(node: Node, ctx: Ctx[GenericTables]) -> None:
        mark_names(node, ctx, fields, direct)
    return handler


def set_calls(t: GT, calls: dict[str, str], callee_fields: tuple[str, ...],
              handler: CallHandler[GT] | None = None) -> None:
    for type_name, field in calls.items():
        for kid in t.kinds(type_name):
            t.actions[kid] = G_CALL
            t.call_field[kid] = t.field(field)
            if handler is not None:
                t.call_handlers[kid] = handler
    t.callee_fields = tuple(t.field(f) for f in callee_fields)


def set_defs(t: GT, defs: dict[str, DefHandler[GT]]) -> None:
    for type_name, handler in defs.items():
        for kid in t.kinds(type_name):
            t.actions[kid] = G_DEF
            t.def_handlers[kid] = handler


def set_binds(t: GenericTables, binds: dict[str, tuple[tuple[str, ...], bool]]) -> None:
    for type_name, (fields, direct) in binds.items():
        handler = binder(fields, direct)
        for kid in t.kinds(type_name):
            t.actions[kid] = G_BIND
            t.bind_handlers[kid] = handler


def named_def(kind: str, field: str = "name") -> DefHandler[GenericTables]:
    """Handler for a definition whose name is in a field."""
    def handler(node: Node, ctx: Ctx[GenericTables]) -> DefInfo | None:
        n = node.child_by_field_id(ctx.t.field(field))
        if n is None:
            return None
        return DefInfo(ctx.S.node(n), kind, n)
    return handler

