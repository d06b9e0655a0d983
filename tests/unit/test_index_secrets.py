"""A key written in a file stays in the file: the map masks it wherever it would hold it as written
(a purpose line, a signature), and only there."""

from __future__ import annotations

from pathlib import Path

from support.kmap_helpers import open_map, write

GITHUB = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"  # a well-known key format (40 characters)


def _signatures(km, rel: str) -> dict[str, str]:
    return {s.qualname: s.signature for s in km.symbols(rel)}


def test_a_key_in_a_signature_or_purpose_is_masked(tmp_path: Path):
    write(tmp_path, {
        "settings.py": f'"""Settings, token {GITHUB}."""\n\n'
                       f'def connect(token="{GITHUB}"):\n    return token\n\n'
                       'def other(x):\n    return x\n',
        # the key spread over a call's lines: one_line joins them into the signature the map keeps
        "wrapped.py": f'def wrapped(token=\n        "{GITHUB}"):\n    return token\n',
    })
    with open_map(tmp_path) as km:
        km.index_all()
        infos = {f.path: f for f in km.files()}
        assert GITHUB not in infos["settings.py"].purpose and "***" in infos["settings.py"].purpose
        sigs = _signatures(km, "settings.py")
        assert sigs["connect"] == 'def connect(token="***")'
        assert sigs["other"] == "def other(x)"  # a clean field of a file with a key is left alone
        assert _signatures(km, "wrapped.py")["wrapped"] == 'def wrapped(token= "***")'


def test_a_key_only_in_a_body_changes_nothing_the_map_holds(tmp_path: Path):
    write(tmp_path, {"body.py": f'"""Clean purpose."""\n\ndef use():\n    return "{GITHUB}"\n'})
    with open_map(tmp_path) as km:
        km.index_all()
        assert km.files()[0].purpose == "Clean purpose."
        assert _signatures(km, "body.py") == {"use": "def use()"}


def test_a_value_assigned_to_a_secret_name_is_masked_in_the_map(tmp_path: Path):
    """A key in no known format (issue 19, item 11): `API_KEY = "…"` and its kin, in any of the languages
    the map reads, keep the name and lose the value; a value given to an ordinary name stays."""
    values = [f"zq81-hunter2-{i}-f00dfacebeef" for i in range(8)]
    write(tmp_path, {
        "settings.py": (f'API_KEY = "{values[0]}"\nDB_PASSWORD: str = "{values[1]}"\n'
                        f'def connect(password="{values[2]}", host="db.example.org"):\n    return 1\n'
                        'GREETING = "hello there, friend"\nPRIMARY_KEY_COLUMN = "user_id"\n'),
        "client.ts": (f'export const apiKey = "{values[3]}";\nexport const authToken: string = \'{values[4]}\';\n'
                      'export const title = "the app title";\n'),
        "main.go": f'package main\n\nconst githubToken = "{values[5]}"\n\nfunc main() {{}}\n',
    })
    with open_map(tmp_path) as km:
        km.index_all()
        held = "\n".join(s for rel in ("settings.py", "client.ts", "main.go") for s in _signatures(km, rel).values())
        assert not [v for v in values if v in held], held
        assert 'API_KEY = "***"' in held and 'def connect(password="***", host="db.example.org")' in held, held
        assert 'GREETING = "hello there, friend"' in held and 'PRIMARY_KEY_COLUMN = "user_id"' in held, held
