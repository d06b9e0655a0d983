"""The purpose line of a file: its first meaningful line of documentation.

A module docstring wins (Python); otherwise the leading comments, skipping
shebangs, encoding and editor lines, linter pragmas, banners and licence text.
Comments are read as blocks (adjacent line comments make one block): a block
that holds a licence or copyright notice, or a preserved `/*!` banner, is
licence text from that line on, and before it only a sentence counts (the
package name over a copyright line, `express`, is no purpose).
"""

from __future__ import annotations

import re

from .treesitter import one_line

_BOILERPLATE_RE = re.compile(
    r"copyright|\(c\)|©|\blicen[sc]ed?\b|spdx-|all rights reserved|-\*-|"
    r"^\s*!|^\s*(?:en)?coding[:=]|\bvim?:|"
    r"^\s*(?:pylint|mypy|flake8|noqa|type|fmt|isort|pyright|ruff|pyre|pragma)\s*:|"
    r"^\s*(?:eslint|jshint|jslint|jscs|prettier-|tslint|istanbul|c8 |globals? |@ts-|ts-|"
    r"@flow|@format|@jsx|@noflow|@generated|<reference|#region|#endregion|nolint|go:|\+build)|"
    r"^\s*[-\w]+:\s*\S+\s*$|^\s*[=*#/\-~_+<>]{3,}\s*$|^\s*use strict|"
    r"^\s*@(?:author|license|copyright|version|since)\b",
    re.IGNORECASE,
)
_LICENCE_RE = re.compile(
    r"copyright|\(c\)|©|\blicen[sc]ed?\b|\bspdx-|all rights reserved|permission is hereby granted|"
    r"@preserve\b|\bpublic domain\b",
    re.IGNORECASE,
)
_NOT_PURPOSE_RE = re.compile(r"^module dependencies\.?$|^(?:private|public|internal)\s*(?:api|methods?)?\.?$",
                             re.IGNORECASE)
_COMMENT_MARKERS_RE = re.compile(r"^\s*(?:/\*+!?|\*+/|\*+|///?!?|#+!?|--|;+)?\s?")
_FILEOVERVIEW_RE = re.compile(r"^\s*@(?:fileoverview|file|module|overview)\s+(.*\S)", re.I)


def comment_blocks(comments: list[tuple[int, int, str]]) -> list[str]:
    """(first row, last row, text) of successive comments, as blocks: a comment that starts on the row
    after the previous one ends continues its block."""
    blocks: list[str] = []
    last = -2
    for start, end, text in comments:
        if blocks and start == last + 1:
            blocks[-1] += "\n" + text
        else:
            blocks.append(text)
        last = end
    return blocks


def purpose_from_comments(texts: list[str]) -> str:
    """The purpose among comment blocks `texts` (see the module docstring)."""
    for text in texts:
        lines: list[tuple[str, bool]] = []  # (line, from an @fileoverview tag)
        for raw in text.splitlines():
            if raw.lstrip().startswith("#!"):  # shebang
                continue
            m = _FILEOVERVIEW_RE.match(_COMMENT_MARKERS_RE.sub("", raw, count=1))
            line = m.group(1) if m else _COMMENT_MARKERS_RE.sub("", raw, count=1)
            line = line.replace("*/", "").strip()
            if line and any(ch.isalnum() for ch in line):
                lines.append((line, bool(m)))
        licence = next((i for i, (line, tag) in enumerate(lines) if not tag and _LICENCE_RE.search(line)),
                       None)
        if licence is None and text.lstrip().startswith("/*!"):
            licence = len(lines)  # a banner minifiers keep: a name and a version, as a rule
        for i, (line, tag) in enumerate(lines if licence is None else lines[:licence]):
            if tag:
                return one_line(line, 200)
            if _BOILERPLATE_RE.search(line) or _NOT_PURPOSE_RE.search(line):
                continue
            if licence is not None and len(line.split()) < 3:
                continue  # `express`, `linux/kernel/fork.c`, `jQuery v3.7.1` over the notice
            return one_line(line, 200)
    return ""


def first_doc_line(content: str) -> str:
    for raw in content.splitlines():
        line = raw.strip()
        if line and any(ch.isalnum() for ch in line):
            return one_line(line, 200)
    return ""

