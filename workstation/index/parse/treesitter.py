"""tree-sitter plumbing shared by every language: grammars, parsers, node-kind tables.

A grammar numbers its node kinds; a language module looks the kinds it cares
about up by name once (`Tables`), so the walkers compare small integers, never
strings. Parsers are per thread (tree-sitter parsers are not thread-safe).
"""

from __future__ import annotations

import threading
import warnings
from typing import TYPE_CHECKING, Callable, TypeVar

from .model import MAX_SIGNATURE

if TYPE_CHECKING:
    from tree_sitter import Language, Node, Parser

_lock = threading.RLock()  # tables_for may build a parser while holding it
_languages: dict[str, Language] = {}
_local = threading.local()


def get_language(lang: str) -> Language:
    language = _languages.get(lang)
    if language is None:
        with _lock:
            language = _languages.get(lang)
            if language is None:
                import tree_sitter_languages as tsl  # lazy: grammars, +6 ms on paths that parse nothing

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    language = tsl.get_language(lang)
                _languages[lang] = language
    return language


def get_parser(lang: str) -> Parser:
    """One parser per language per thread (tree-sitter parsers are not thread-safe)."""
    cache = getattr(_local, "parsers", None)
    if cache is None:
        cache = _local.parsers = {}
    parser = cache.get(lang)
    if parser is None:
        from tree_sitter import Parser  # lazy: tree-sitter, +5 ms on paths that parse nothing

        parser = Parser()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parser.set_language(get_language(lang))
        cache[lang] = parser
    return parser


def drop_parsers() -> None:
    """Forget this thread's parsers (one may be in a bad state after an internal error)."""
    _local.parsers = {}


class Tables:
    """Node-kind ids of one grammar, looked up by name (several ids can share a name).

    `actions` maps a kind id to what the language's walker does with that node (its own
    named constants). A walker's subclass declares the kind sets and fields it looks up
    (python.PyTables, generic.GenericTables and one per language family).
    """

    def __init__(self, lang: str):
        language = get_language(lang)
        ids: dict[str, list[int]] = {}
        for i in range(language.node_kind_count):
            name = language.node_kind_for_id(i)  # None only for an id past the grammar's
            if name is not None and language.node_kind_is_named(i):
                ids.setdefault(name, []).append(i)
        self.language = language
        self.ids = ids
        self.actions: dict[int, int] = {}
        self.fields: dict[str, int] = {}

    def kinds(self, *names: str) -> frozenset[int]:
        out: set[int] = set()
        for n in names:
            out.update(self.ids.get(n, ()))
        return frozenset(out)

    def set(self, action: int, *names: str) -> None:
        for kid in self.kinds(*names):
            self.actions[kid] = action

    def field(self, name: str) -> int:
        fid = self.fields.get(name)
        if fid is None:
            fid = self.language.field_id_for_name(name) or 0
            self.fields[name] = fid
        return fid


T = TypeVar("T", bound=Tables)


def tables_for(cache: dict[str, T], lang: str, build: Callable[[str], T]) -> T:
    """The tables of `lang` in `cache` (a walker's own), built by `build(lang)` the first time they are asked for."""
    t = cache.get(lang)
    if t is None:
        with _lock:
            t = cache.get(lang)
            if t is None:
                t = build(lang)
                cache[lang] = t
    return t


def one_line(text: str, limit: int = MAX_SIGNATURE) -> str:
    s = " ".join(text.split())
    if len(s) > limit:
        s = s[: limit - 3].rstrip() + "..."
    return s


def end_line(node: Node) -> int:
    """1-indexed inclusive end line; a node ending at column 0 ends on the previous line."""
    er, ec = node.end_point
    if ec == 0 and er > node.start_point[0]:
        return er
    return er + 1


class Src:
    """Byte-offset slicing of the source as str (fast path for pure-ASCII files)."""

    __slots__ = ("src", "text", "ascii")

    def __init__(self, src: bytes):
        self.src = src
        self.ascii = src.isascii()
        self.text = src.decode("ascii") if self.ascii else ""  # read only when ascii

    def __call__(self, sb: int, eb: int) -> str:
        if self.ascii:
            return self.text[sb:eb]
        return self.src[sb:eb].decode("utf-8", "replace")

    def node(self, node: Node) -> str:
        return self(node.start_byte, node.end_byte)
