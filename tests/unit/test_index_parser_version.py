"""The parser version: an upgrade that changes what the parser extracts re-parses the files it concerns."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.kmap_helpers import db_symbols, open_map, write

from workstation.index import parse
from workstation.index.parse import core


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    write(tmp_path, {
        "a.py": "def old():\n    return 1\n",
        "web/b.js": "function js() { return 1; }\n",
        "notes.txt": "Some notes\n",
    }, aged=True)
    return tmp_path


def _extract_more(monkeypatch) -> None:
    """A 'new parser' for Python: every file also yields a symbol named `added_by_upgrade`."""
    real = core.parse_python

    def upgraded(root, S):
        purpose, symbols, refs, imports = real(root, S)
        symbols = symbols + [parse.Symbol("added_by_upgrade", "function", None, "def added_by_upgrade()", 1, 1)]
        return purpose, symbols, refs, imports

    monkeypatch.setattr(core, "parse_python", upgraded)


def test_a_version_bump_reparses_unchanged_files_of_that_language(repo: Path, monkeypatch):
    with open_map(repo) as km:
        km.index_all()
        assert [s[0] for s in db_symbols(km, "a.py")] == ["old"]
        _extract_more(monkeypatch)
        # the parser changed but its version did not: an unchanged file keeps what it had
        assert km.ensure_fresh().indexed == []
        assert [s[0] for s in db_symbols(km, "a.py")] == ["old"]
        assert km.freshness("a.py") == "fresh"

        monkeypatch.setitem(parse.PARSER_VERSIONS, "python", parse.PARSER_VERSIONS["python"] + 1)
        assert km.freshness("a.py") == "stale"
        assert km.freshness("web/b.js") == "fresh"
        change = km.ensure_fresh()
        assert change.indexed == ["a.py"]  # JavaScript and text files were not parsed again
        assert [s[0] for s in db_symbols(km, "a.py")] == ["old", "added_by_upgrade"]
        assert km.freshness("a.py") == "fresh"
        assert km.ensure_fresh().empty  # once only


def test_a_version_bump_reaches_files_the_scoped_refresh_names(repo: Path, monkeypatch):
    with open_map(repo) as km:
        km.index_all()
        _extract_more(monkeypatch)
        monkeypatch.setitem(parse.PARSER_VERSIONS, "python", parse.PARSER_VERSIONS["python"] + 1)
        assert km.ensure_fresh(["a.py"]).indexed == ["a.py"]
        assert "added_by_upgrade" in [s.name for s in km.symbols("a.py")]


def test_every_language_family_and_text_have_a_version():
    for language in parse.SUPPORTED_LANGUAGES + (None, "something-else"):
        assert parse.parser_version(language) >= 1
    assert parse.parser_version("tsx") == parse.PARSER_VERSIONS["javascript"]
    assert parse.parser_version("cpp") == parse.PARSER_VERSIONS["c"]
    assert parse.parser_version(None) == parse.PARSER_VERSIONS[None]
