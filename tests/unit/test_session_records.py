"""The session records as types (sessions/records.py): the README's format description agrees with the Structs,
and a line reads as the format promises (unknown fields ignored, unknown types and bad fields reported)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from workstation.sessions.logview import parse_line, parse_lines
from workstation.sessions.records import (BY_TYPE, RECORD_CLASSES, Assistant, Compact, Covers, Record, Tool,
                                          ToolCall, from_dict, readme_table)

README = Path(__file__).resolve().parents[2] / "sessions" / "README.md"


def test_the_readme_table_is_the_one_the_structs_give():
    text = README.read_text(encoding="utf-8")
    assert readme_table() in text, "sessions/README.md is stale: python -m workstation.sessions.records sessions/README.md"


def _documented() -> dict[str, set[str]]:
    """record type -> the fields the README's hand-written tables ("Fields the agent adds", "Fields of imported
    records") name for it."""
    found: dict[str, set[str]] = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) != 3 or cells[0] in ("record", "field") or set(cells[0]) <= {"-"}:
            continue
        kinds = re.findall(r"[a-z]+", cells[0])
        names = re.findall(r"`([a-z_0-9]+)`", cells[1])
        for kind in BY_TYPE if "every" in kinds else kinds:
            if kind in BY_TYPE:
                found.setdefault(kind, set()).update(names)
    return found


def test_every_field_the_readme_names_is_a_field_of_its_record_type():
    documented = _documented()
    assert {"user", "assistant", "tool", "system", "compact"} <= set(documented)
    missing = {kind: sorted(names - set(BY_TYPE[kind].__struct_fields__)) for kind, names in documented.items()}
    assert not any(missing.values()), missing


def test_every_record_type_of_the_readme_is_a_struct_and_back():
    listed = re.search(r"\| `type` +\| (.+?) \|", README.read_text(encoding="utf-8"))
    assert listed is not None
    assert set(re.findall(r"`([a-z]+)`", listed.group(1))) == set(BY_TYPE) == {c.__struct_config__.tag
                                                                                for c in RECORD_CLASSES}


def test_a_line_decodes_to_its_type_and_writes_back_the_same_object():
    line = (b'{"v":1,"id":"a1","ts":"2025-01-31T09:12:05.902Z","type":"assistant","content":"",'
            b'"tool_calls":[{"id":"c1","name":"read_file","arguments":"{}"}],"tokens_in":812,"tokens":14}')
    record, reason = parse_line(line)
    assert reason is None and isinstance(record, Assistant)
    assert record.tool_calls == [ToolCall(id="c1", name="read_file", arguments="{}")] and record.tokens_in == 812
    assert record.as_dict() == {"v": 1, "id": "a1", "ts": "2025-01-31T09:12:05.902Z", "type": "assistant",
                                "tokens": 14, "content": "", "tool_calls": [{"id": "c1", "name": "read_file",
                                                                             "arguments": "{}"}],
                                "tokens_in": 812}


def test_a_newer_writers_field_is_ignored_and_its_type_reported():
    record, reason = parse_line(b'{"v":1,"id":"t1","type":"tool","content":"x","ok":false,"glow":{"a":[1]}}')
    assert reason is None and isinstance(record, Tool) and record.ok is False and not hasattr(record, "glow")
    view = parse_lines(b'{"v":1,"id":"u1","type":"user","content":"hi"}\n'
                       b'{"v":1,"id":"h1","type":"hologram","content":"later"}\n'
                       b'{"v":1,"id":"u2","type":"user","content":"after"}\n')
    assert [r.id for r in view.records] == ["u1", "u2"]
    assert [(p.line, p.reason) for p in view.problems] == [(2, "unknown record type 'hologram'")]


@pytest.mark.parametrize("line, reason", [
    (b'{"v":1,"id":"a","type":"assistant","latency_ms":"fast"}', "bad field: 'latency_ms' is a string, not a number"),
    (b'{"v":1,"id":"a","type":"tool","ok":1}', "bad field: 'ok' is an integer, not a boolean"),
    (b'{"v":1,"id":"c","type":"compact","covers":{"last_turn":"7"}}',
     "bad field: covers 'last_turn' is a string, not an integer"),
    (b'{"v":1,"id":"","type":"user"}', "record without an id"),
    (b'{"id":"x","type":"user"}', "unsupported format version None (this reader knows 1)"),
])
def test_what_a_reader_cannot_use_is_a_reported_line(line, reason):
    assert parse_line(line) == (None, reason)


def test_an_old_minimal_line_reads_with_the_defaults():
    record, _ = parse_line(b'{"v":1,"id":"k","type":"compact","summary":"s"}')
    assert isinstance(record, Compact) and record.covers is None and record.tokens is None
    assert record.get("summary") == "s" and "covers" not in record  # the mapping access of unconverted readers


def test_from_dict_checks_as_a_reader_does():
    assert isinstance(from_dict({"type": "compact", "id": "k", "covers": {"last_id": "x"}}).covers, Covers)
    with pytest.raises(Exception, match="Expected `str"):
        from_dict({"type": "user", "id": "u", "content": 3})
    assert issubclass(Assistant, Record)
