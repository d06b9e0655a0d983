"""What the parser returns: symbols, references, imports, and the result of one file.

The frozen dataclasses are built through `mkref`/`mksym` on hot paths: a dataclass
`__init__` on a frozen class goes through `object.__setattr__` once per field, these
set the instance dict in one go.
"""

from __future__ import annotations

import operator
import re
import sys
from dataclasses import dataclass
from typing import Generic, TypeVar

MAX_REFERENCES = 200_000  # per file; minified or generated files stop recording past this
MAX_SIGNATURE = 240
CONST_RE = re.compile(r"_*[A-Z][A-Z0-9_]*\Z")  # a constant's name, by convention (Python, JS)


def debugging() -> bool:
    """True when tests asked parse() to surface the internal errors it swallows by design
    (they set ``workstation.index.parse._DEBUG_RAISE``)."""
    return bool(getattr(sys.modules[__package__], "_DEBUG_RAISE", False))


@dataclass(frozen=True)
class Symbol:
    name: str
    kind: str  # 'class','function','method','interface','struct','enum','trait','impl','module','type','constant','macro'
    parent: str | None  # qualified name of the enclosing symbol, e.g. 'Outer.Inner'
    signature: str  # one line
    start_line: int  # 1-indexed, inclusive
    end_line: int

    @property
    def qualname(self) -> str:
        return self.name if self.parent is None else f"{self.parent}.{self.name}"


@dataclass(frozen=True)
class Reference:
    name: str
    line: int
    enclosing: str | None  # qualified name of the enclosing symbol
    kind: str  # 'call', 'ref'; in Python and JS/TS also 'attr' (a member read: x.name), 'set' (x.name = ...)


@dataclass(frozen=True)
class Import:
    module: str
    names: tuple[str, ...]
    line: int


RefRow = tuple[str, int, str | None, str]  # a Reference as a plain row: (name, line, enclosing, kind)
R = TypeVar("R", Reference, RefRow)


Outline = tuple[str, list[Symbol], list[R], list[Import]]  # what a walker returns: purpose, symbols, references, imports


@dataclass
class ParseResult(Generic[R]):
    """One file's outline. `references` are Reference objects from `parse`, RefRow tuples from `parse_rows`."""

    language: str | None
    purpose: str
    symbols: list[Symbol]
    references: list[R]
    imports: list[Import]
    line_count: int
    has_errors: bool


_new = object.__new__
_osa = object.__setattr__


def mkref(name: str, line: int, enclosing: str | None, kind: str) -> Reference:
    o = _new(Reference)
    _osa(o, "__dict__", {"name": name, "line": line, "enclosing": enclosing, "kind": kind})
    return o


def mksym(name: str, kind: str, parent: str | None, signature: str, start_line: int, end_line: int) -> Symbol:
    o = _new(Symbol)
    _osa(o, "__dict__", {"name": name, "kind": kind, "parent": parent, "signature": signature,
                         "start_line": start_line, "end_line": end_line})
    return o


def refs_from_rows(rows: list[RefRow]) -> list[Reference]:
    new, osa, Ref = _new, _osa, Reference
    out: list[Reference] = []
    append = out.append
    for name, line, enclosing, kind in rows:
        r = new(Ref)
        osa(r, "__dict__", {"name": name, "line": line, "enclosing": enclosing, "kind": kind})
        append(r)
    return out


sym_sort_key = operator.attrgetter("start_line")
ref_sort_key = operator.attrgetter("line")
row_sort_key = operator.itemgetter(1)
