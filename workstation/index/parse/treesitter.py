"""tree-sitter plumbing shared by every language: grammars, parsers, node-kind tables.

A grammar numbers its node kinds; a language module looks the kinds it cares
about up by name once (`Tables`), so the walkers compare small integers, never
strings. Parsers are per thread (tree-sitter parsers are not thread-safe).
"""

from __future__ import annotations

import threading
import warnings
from typing import Callable

from .model import MAX_SIGNATURE

_lock = threading.RLock()  # tables_for may build a parser while holding it
_languages: dict[str, object] = {}
_tables: dict[str, "Tables"] = {}
_local = threading.local()


def get_language(lang: str):
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


def get_parser(lang: str):
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
    named constants); `handlers` to the function that does it, where there is one.
    """

    def __init__(self, lang: str):
        language = get_language(lang)
        ids: dict[str, list[int]] = {}
        for i in range(language.node_kind_count):
            if language.node_kind_is_named(i):
                ids.setdefault(language.node_kind_for_id(i), []).append(i)
        self.language = language
        self.ids = ids
        self.actions: dict[int, int] = {}
        self.handlers: dict[int, object] = {}
        self.fields: dict[str, int] = {}
        self.member: frozenset[int] = frozenset()  # identifiers naming a member (`x.status`): 'attr' refs

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


def tables_for(lang: str, build: Callable[[str], Tables]) -> Tables:
    """The tables of `lang`, built by `build(lang)` the first time they are asked for."""
    t = _tables.get(lang)
    if t is None:
        with _lock:
            t = _tables.get(lang)
            if t is None:
                t = build(lang)
                _tables[lang] = t
    return t


class _Mark:
    __slots__ = ()
    kind_id = 65534  # no grammar's: a walker's kind table can map it to "end of scope" (ERROR is 65535)


MARK = _Mark()  # pushed on a walker's stack where a scope ends


def one_line(text: str, limit: int = MAX_SIGNATURE) -> str:
    s = " ".join(text.split())
    if len(s) > limit:
        s = s[: limit - 3].rstrip() + "..."
    return s


def end_line(node) -> int:
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
        self.text = src.decode("ascii") if self.ascii else None

    def __call__(self, sb: int, eb: int) -> str:
        if self.ascii:
            return self.text[sb:eb]
        return self.src[sb:eb].decode("utf-8", "replace")

    def node(self, node) -> str:
        return self(node.start_byte, node.end_byte)
