"""docs/configuration.md and the shipped JSON schema of config.toml agree with config.py: the committed files
are what `python -m workstation.configdoc` writes, every key is described, and each row of the reference
states the key's real default (read back from the committed file, not from the generator)."""

from __future__ import annotations

import json
import re

import msgspec

from workstation import configdoc
from workstation.config import Config


def test_the_committed_reference_and_schema_are_what_config_py_makes():
    assert configdoc.DOC_FILE.read_text() == configdoc.markdown(), "run: python -m workstation.configdoc"
    assert configdoc.SCHEMA_FILE.read_text() == configdoc.schema_text(), "run: python -m workstation.configdoc"


def test_every_key_is_described_with_its_default():
    doc = configdoc.DOC_FILE.read_text()
    defaults = Config()
    rows = {}
    section = ""
    for line in doc.splitlines():
        if m := re.match(r"^## \[(\w+)\]$", line):
            section = m.group(1)
        elif section and (m := re.match(r"^\| `(\w+)` \| (.*?) \| `(.*?)` \| (.*?) \| (.*) \|$", line)):
            rows[(section, m.group(1))] = (m.group(3), m.group(5))
    for info in msgspec.structs.fields(Config):
        part = getattr(defaults, info.name)
        for field in msgspec.structs.fields(type(part)):
            default, text = rows[(info.encode_name, field.encode_name)]
            assert text.strip(), f"[{info.encode_name}] {field.encode_name} has no comment in config.py"
            value = getattr(part, field.name)
            if not isinstance(value, msgspec.Struct) and value != {}:
                assert json.loads(default.replace("\\|", "|")) == json.loads(json.dumps(value, default=str)), \
                    (info.encode_name, field.encode_name)


def test_the_schema_names_every_key_and_describes_it():
    schema = json.loads(configdoc.SCHEMA_FILE.read_text())
    for info in msgspec.structs.fields(Config):
        section = schema["$defs"][info.type.__name__]
        assert set(section["properties"]) == {f.encode_name for f in msgspec.structs.fields(info.type)}
        assert all(prop.get("description") for prop in section["properties"].values()), info.encode_name
