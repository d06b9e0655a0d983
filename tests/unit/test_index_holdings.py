"""What the map holds, asked through KnowledgeMap (no SQL on the map's tables outside workstation/index)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from support.kmap_helpers import open_map, write
from workstation.errors import WorkstationError

FILES = {
    "pkg/a.py": "class Client:\n    def send(self):\n        return 1\n",
    "pkg/b.py": "def send(x):\n    return x\n",
    "web/c.js": "export function render() { return 1; }\n",
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    write(tmp_path, FILES, aged=True)
    return tmp_path


def _sha(root: Path, rel: str) -> str:
    return hashlib.sha256((root / rel).read_bytes()).hexdigest()


def test_indexed_sha_is_what_the_map_holds_not_the_disk(repo: Path):
    with open_map(repo) as km:
        assert km.indexed_sha("pkg/a.py") is None  # nothing indexed yet, and no gate runs
        km.index_all()
        before = _sha(repo, "pkg/a.py")
        assert km.indexed_sha("pkg/a.py") == before
        assert km.indexed_sha(str(repo / "pkg/a.py")) == before  # an absolute path in the workspace
        (repo / "pkg/a.py").write_text("x = 1\n")
        assert km.indexed_sha("pkg/a.py") == before  # still the indexed content until a refresh
        km.ensure_fresh(["pkg/a.py"])
        assert km.indexed_sha("pkg/a.py") == _sha(repo, "pkg/a.py") != before
        assert km.indexed_sha("nope.py") is None
        with pytest.raises(WorkstationError, match="outside the workspace"):
            km.indexed_sha("/etc/passwd")


def test_known_paths_and_symbol_files(repo: Path):
    with open_map(repo) as km:
        km.index_all()
        assert km.known_paths(["web/c.js", "pkg/a.py", "missing.py", "pkg"]) == ["pkg/a.py", "web/c.js"]
        assert km.known_paths([]) == []
        assert km.symbol_files(["send", "Client.send", "render", "Nothing"]) == [
            ("Client.send", "pkg/a.py"), ("render", "web/c.js"), ("send", "pkg/a.py"), ("send", "pkg/b.py")]
        assert km.symbol_files([]) == []


def test_model_purposes_move_between_maps_of_the_same_content(repo: Path, tmp_path_factory):
    other = tmp_path_factory.mktemp("copy")
    write(other, FILES)
    (other / "pkg/b.py").write_text("def send(x):\n    return x + 1\n")  # another content here
    with open_map(repo) as km:
        km.index_all()
        assert km.model_purposes() == []
        rows = [("pkg/a.py", _sha(repo, "pkg/a.py"), "The client."),
                ("pkg/b.py", _sha(repo, "pkg/b.py"), "Sends things.")]
        km.set_model_purposes(rows)
        assert km.model_purposes() == rows
    with open_map(other) as copy:
        copy.index_all()
        copy.set_model_purposes(rows)
        assert copy.model_purposes() == [rows[0]]  # b.py differs here: its purpose does not apply
        assert {f.path: f.purpose for f in copy.files()}["pkg/a.py"] == "The client."
