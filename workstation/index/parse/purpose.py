"""The purpose line of a file: its first meaningful line of documentation.

A module docstring wins (Python); otherwise the leading comments, skipping
shebangs, encoding and editor lines, linter pragmas, banners and licence text.
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
_COMMENT_MARKERS_RE = re.compile(r"^\s*(?:/\*+!?|\*+/|\*+|///?!?|#+!?|--|;+)?\s?")
_FILEOVERVIEW_RE = re.compile(r"^\s*@(?:fileoverview|file|module|overview)\s+(.*\S)", re.I)


def purpose_from_comments(texts: list[str]) -> str:
    for text in texts:
        for raw in text.splitlines():
            if raw.lstrip().startswith("#!"):  # shebang
                continue
            m = _FILEOVERVIEW_RE.match(_COMMENT_MARKERS_RE.sub("", raw, count=1))
            line = m.group(1) if m else _COMMENT_MARKERS_RE.sub("", raw, count=1)
            line = line.replace("*/", "").strip()
            if not line or not any(ch.isalnum() for ch in line):
                continue
            if not m and _BOILERPLATE_RE.search(line):
                continue
            return one_line(line, 200)
    return ""


def first_doc_line(content: str) -> str:
    for raw in content.splitlines():
        line = raw.strip()
        if line and any(ch.isalnum() for ch in line):
            return one_line(line, 200)
    return ""

