"""What the parser extracts, versioned per language family (kept apart from the parser, so
that the staleness gate can compare versions without importing it).

Bump a family's number with any change that alters the symbols, references, imports or
purpose the parser gives for some file: the next refresh re-parses that family's files,
unchanged ones too (the map records the version each file was parsed with). `None` is
text the parser does not understand (its purpose line, see indexer.text_purpose).
"""

from __future__ import annotations

PARSER_VERSIONS: dict[str | None, int] = {
    "python": 4, "javascript": 4, "go": 3, "rust": 3, "java": 3, "c": 3, "ruby": 3, None: 2,  # +1: secrets assigned
}
_FAMILY = {"typescript": "javascript", "tsx": "javascript", "cpp": "c"}


def parser_version(language: str | None) -> int:
    """The version of what the parser extracts from files of `language` (see PARSER_VERSIONS)."""
    family = None if language is None else _FAMILY.get(language, language)
    return PARSER_VERSIONS[family if family in PARSER_VERSIONS else None]
