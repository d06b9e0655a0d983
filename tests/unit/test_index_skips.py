"""Every skip reason is recorded and reported; ignored paths are left out silently."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from support.kmap_helpers import db_paths, open_map, write
from support.trust_support import trust


@pytest.fixture
def messy(tmp_path: Path, tmp_path_factory) -> Path:
    outside = tmp_path_factory.mktemp("elsewhere")
    (outside / "secret.py").write_text("def secret(): pass\n")
    write(tmp_path, {
        "good.py": "def good():\n    return 1\n",
        "image.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
        "big.py": "x = 1\n" * 400,  # 2,400 bytes, over the 1,000-byte limit below
        "latin1.py": "name = 'caf\xe9'\n".encode("latin-1"),
        "sub/ok.md": "# Sub folder notes\n",
    })
    os.symlink(outside / "secret.py", tmp_path / "escape.py")
    os.symlink(outside, tmp_path / "escape_dir")
    os.symlink("loop_b", tmp_path / "loop_a")
    os.symlink("loop_a", tmp_path / "loop_b")
    os.symlink("..", tmp_path / "sub" / "up")  # a folder symlink back to an ancestor
    os.symlink("missing.py", tmp_path / "dangling.py")
    os.mkfifo(tmp_path / "pipe")
    os.symlink("good.py", tmp_path / "alias.py")  # inside the root: indexed under its own name
    return tmp_path


def test_each_skip_reason_is_recorded(messy: Path):
    with open_map(messy, max_file_bytes=1000) as km:
        report = km.index_all()
        reasons = {item["path"]: item["reason"] for item in report.skipped_files}
        assert reasons == {
            "image.png": "binary",
            "big.py": "too_large",
            "latin1.py": "invalid_utf8",
            "escape.py": "outside_root",
            "escape_dir": "outside_root",
            "loop_a": "symlink_loop",
            "loop_b": "symlink_loop",
            "sub/up": "symlink_loop",
            "dangling.py": "unreadable",
            "pipe": "unreadable",
        }
        assert report.skipped == {"binary": 1, "too_large": 1, "invalid_utf8": 1, "outside_root": 2,
                                  "symlink_loop": 3, "unreadable": 2}
        assert db_paths(km) == {"good.py", "alias.py", "sub/ok.md"}
        details = {item["path"]: item["detail"] for item in report.skipped_files}
        assert "NUL byte" in details["image.png"] and "2400 bytes" in details["big.py"]
        assert details["pipe"] == "not a regular file"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_permission_denied_is_unreadable(tmp_path: Path):
    write(tmp_path, {"locked.py": "x = 1\n"})
    (tmp_path / "locked.py").chmod(0)
    with open_map(tmp_path) as km:
        report = km.index_all()
        assert {i["path"]: i["reason"] for i in report.skipped_files} == {"locked.py": "unreadable"}


def test_skipped_file_that_becomes_valid_is_indexed(messy: Path):
    with open_map(messy, max_file_bytes=1000) as km:
        km.index_all()
        (messy / "latin1.py").write_text("def now_fine():\n    pass\n")
        (messy / "image.png").unlink()
        names = [h.name for h in km.find("now_fine").hits]
        assert names == ["now_fine"]
        assert "image.png" not in {s["path"] for s in km.skipped()}


def test_ignored_paths_are_silent(tmp_path: Path):
    write(tmp_path, {
        ".gitignore": "build/\n*.log\n!keep.log\n",
        "build/gen.py": "def generated(): pass\n",
        "run.log": "noise\n",
        "keep.log": "kept\n",
        "src/.gitignore": "local_*.py\n",
        "src/local_cfg.py": "A = 1\n",
        "src/app.py": "def app(): pass\n",
        "vendor/lib.py": "def vendored(): pass\n",
        "notes/draft.md": "# draft\n",
        ".workstation/ignore": "vendor/\n",
        ".git/config": "[core]\n",
    })
    trust(tmp_path)  # the folder's own .workstation/ignore is read in a trusted workspace only
    with open_map(tmp_path, ignore=["notes/"]) as km:
        report = km.index_all()
        assert report.skipped_files == []
        assert db_paths(km) == {".gitignore", "keep.log", "src/.gitignore", "src/app.py"}
        # a rule added later takes effect at the next refresh
        (tmp_path / ".gitignore").write_text("build/\n*.log\n!keep.log\nsrc/app.py\n")
        km.ensure_fresh()
        assert "src/app.py" not in db_paths(km)


def test_cli_reports_skips(messy: Path):
    from click.testing import CliRunner

    from workstation.cli import main

    (messy / ".workstation").mkdir(exist_ok=True)
    (messy / ".workstation" / "config.toml").write_text("[index]\nmax_file_bytes = 1000\n")
    result = CliRunner().invoke(main, ["-C", str(messy), "index", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["skipped"]["symlink_loop"] == 3 and data["files"] == 3
    text = CliRunner().invoke(main, ["-C", str(messy), "index"])
    assert "skipped 10: binary 1, invalid_utf8 1, outside_root 2, symlink_loop 3, too_large 1, unreadable 2" \
        in text.output
    assert "  latin1.py: invalid_utf8 (invalid UTF-8 at byte 11)" in text.output


def test_file_name_that_is_not_utf8_is_skipped(tmp_path: Path):
    write(tmp_path, {"ok.py": "def ok(): pass\n"})
    bad = os.path.join(os.fsencode(tmp_path), b"caf\xe9.py")
    with open(bad, "wb") as fh:
        fh.write(b"def hidden(): pass\n")
    with open_map(tmp_path) as km:
        report = km.index_all()
        assert report.skipped_files == [
            {"path": "caf\\xe9.py", "reason": "invalid_utf8", "detail": "file name is not valid UTF-8"}]
        assert db_paths(km) == {"ok.py"}
        km.ensure_fresh([os.fsdecode(b"caf\xe9.py")])  # as the watcher would pass it
        os.unlink(bad)
        km.ensure_fresh([os.fsdecode(b"caf\xe9.py")])
        from workstation.index.storage import index_state

        assert km.db.call(index_state)[1] == []  # the scoped refresh dropped the skip row


def test_symlinks_into_the_state_folder_or_git_are_never_indexed(tmp_path: Path):
    """The file tools refuse the state folder (config, databases, session logs); the map must not hold
    it either, whatever symlink leads there."""
    from workstation import config as config_mod
    from workstation.index.map import KnowledgeMap
    from workstation.store import Database

    write(tmp_path, {
        "good.py": "def good():\n    return 1\n",
        ".workstation/config.toml": '[ui]\ntheme = "workstation-dark"  # secret_config_marker\n',
        ".workstation/sessions/s1.jsonl": '{"text": "def leaked_session(): pass"}\n',
        ".git/hooks/pre-commit.py": "def git_hook_secret():\n    pass\n",
        "moved_state/notes.py": "def moved_state_secret():\n    pass\n",
    })
    (tmp_path / "sub").mkdir()
    os.symlink(".workstation/config.toml", tmp_path / "cfg.toml")
    os.symlink(".workstation", tmp_path / "state_link")
    os.symlink("../.workstation/sessions", tmp_path / "sub" / "sessions")
    os.symlink(".git/hooks/pre-commit.py", tmp_path / "hook.py")
    os.symlink("moved_state/notes.py", tmp_path / "moved_link.py")
    # the state folder moved into the workspace is protected like .workstation
    cfg, paths = config_mod.load(tmp_path, {"workspace": {"state_dir": str(tmp_path / "moved_state")}})
    with Database(paths) as db:
        km = KnowledgeMap(db, paths, cfg)
        report = km.index_all()
        private = {item["path"] for item in report.skipped_files if item["reason"] == "private"}
        assert private == {"cfg.toml", "state_link", "sub/sessions", "hook.py", "moved_link.py"}
        assert db_paths(km) == {"good.py"}
        for name in ("secret_config_marker", "leaked_session", "git_hook_secret", "moved_state_secret"):
            assert km.find(name).hits == []
        # the scoped refresh the watcher runs decides the same
        for rel in ("cfg.toml", "hook.py", "state_link", "moved_link.py"):
            change = km.ensure_fresh([rel])
            assert rel not in change.indexed and rel not in db_paths(km)
        assert km.freshness("cfg.toml") == "fresh"


def test_gitignore_edits_anywhere_take_effect_at_the_next_gate(tmp_path: Path):
    write(tmp_path, {
        "src/.gitignore": "a_*.py\n",
        "src/a_one.py": "A = 1\n",
        "src/b_one.py": "B = 1\n",
        "src/deep/c_one.py": "C = 1\n",
    })
    with open_map(tmp_path) as km:
        km.index_all()
        assert db_paths(km) == {"src/.gitignore", "src/b_one.py", "src/deep/c_one.py"}
        (tmp_path / "src/.gitignore").write_text("b_*.py\n")  # same size, another rule
        km.ensure_fresh()
        assert db_paths(km) == {"src/.gitignore", "src/a_one.py", "src/deep/c_one.py"}
        (tmp_path / "src/deep/.gitignore").write_text("c_*.py\n")  # a new one, deeper
        km.ensure_fresh()
        assert db_paths(km) == {"src/.gitignore", "src/a_one.py", "src/deep/.gitignore"}
        (tmp_path / "src/.gitignore").unlink()  # gone: its rules go with it
        km.ensure_fresh()
        assert db_paths(km) == {"src/a_one.py", "src/b_one.py", "src/deep/.gitignore"}
        for _ in range(3):  # nothing changed: nothing moves
            assert km.ensure_fresh().empty
