"""Importing many files on worker processes (importers/bulk.py) writes exactly what importing them
one by one writes: the same logs, events, search hits and source states; the next import finds
them unchanged, and a file that grew adds only its new lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from workstation.importers.bulk import MIN_FILES, import_many
from workstation.importers.engine import Importer
from workstation.memory.reflect import run_sql
from workstation.paths import Paths
from workstation.sessions.catalog import search
from workstation.sessions.log import Session
from workstation.store import Database

FIX = Path(__file__).parents[1] / "fixtures" / "import"
CLAUDE_ID = "9f1c2d3e-0000-4000-8000-00000000abcd"
CODEX_ID = "0199aaaa-1111-7000-8000-000000000001"


def _sources(folder: Path, n: int) -> list[tuple[str, None]]:
    """n Claude Code sessions and n // 4 Codex rollouts, each with an id of its own."""
    claude = (FIX / "claude_session.jsonl").read_text()
    codex = (FIX / "codex_0.40.jsonl").read_text()
    folder.mkdir()
    out = []
    for i in range(n):
        sid = f"{i:08x}{CLAUDE_ID[8:]}"
        path = folder / "claude" / f"{sid}.jsonl"
        path.parent.mkdir(exist_ok=True)
        path.write_text(claude.replace(CLAUDE_ID, sid))
        out.append((str(path), None))
        if i % 4 == 0:
            rid = f"{i:08x}{CODEX_ID[8:]}"
            path = folder / "codex" / f"rollout-2025-09-25T10-00-00-{rid}.jsonl"
            path.parent.mkdir(exist_ok=True)
            path.write_text(codex.replace(CODEX_ID, rid))
            out.append((str(path), None))
    return out


def _state(paths: Paths, db: Database) -> tuple:
    logs = {p.name: [r for r in Session(paths, p.stem).read().records] for p in paths.sessions.glob("*.jsonl")}
    events = run_sql(db, "SELECT id, type, name, session, ts, tokens_in, tokens_out, cost_usd, flow FROM events "
                         "ORDER BY id", limit=100_000).rows
    hits = [(h.slug, h.record_id, h.type, h.turn, h.snippet) for h in search(paths, "pytest", limit=10_000, db=db)]
    states = run_sql(db, "SELECT count(*) FROM import_sources").rows
    return logs, events, hits, states


@pytest.fixture
def workspaces(tmp_path):
    made = []

    def make(name: str) -> tuple[Paths, Database]:
        (tmp_path / name).mkdir()
        paths = Paths.for_root(tmp_path / name)
        db = Database(paths)
        made.append(db)
        return paths, db

    yield make
    for db in made:
        db.close()


def test_workers_write_what_one_process_writes_and_the_next_import_reads_nothing(tmp_path, workspaces):
    items = _sources(tmp_path / "src", MIN_FILES)
    (serial_paths, serial_db), (bulk_paths, bulk_db) = workspaces("serial"), workspaces("bulk")
    serial = import_many(Importer(serial_paths, serial_db), items, workers=1)
    bulk = import_many(Importer(bulk_paths, bulk_db), items, workers=2)
    assert [r.to_dict() for r in bulk] == [r.to_dict() for r in serial]
    assert all(r.added and not r.problems and not r.error for r in bulk)
    expected = _state(serial_paths, serial_db)
    assert len(expected[0]) == len(items) and len(expected[1]) > 20 * len(items) and expected[2]
    assert _state(bulk_paths, bulk_db) == expected

    again = import_many(Importer(bulk_paths, bulk_db), items, workers=2)
    assert all(r.unchanged and not r.added for r in again)
    # a grown file: only its new line, found through the workers as well
    grown = Path(items[0][0])
    with grown.open("a") as fh:
        fh.write('{"type":"user","uuid":"u-grown","parentUuid":null,"sessionId":"%s","timestamp":'
                 '"2025-10-21T04:00:00.000Z","cwd":"/work/demo","message":{"role":"user","content":'
                 '"one more pytest question"}}\n' % grown.stem)
    third = import_many(Importer(bulk_paths, bulk_db), items, workers=2)
    assert [r.added for r in third] == [1] + [0] * (len(items) - 1)
    assert sum(r.unchanged for r in third) == len(items) - 1
    hits = search(bulk_paths, "one more pytest question", db=bulk_db)
    assert [(h.slug, h.type) for h in hits] == [(f"claude-2025-10-21-{grown.stem[:8]}", "user")]


def test_a_bad_file_among_many_is_one_error_and_the_rest_import(tmp_path, workspaces):
    items = _sources(tmp_path / "src", MIN_FILES)
    bad = tmp_path / "src" / "not-a-log.jsonl"
    bad.write_text("this is not JSON\n")
    missing = str(tmp_path / "src" / "gone.jsonl")
    items[3:3] = [(str(bad), None), (missing, None)]
    paths, db = workspaces("ws")
    results = import_many(Importer(paths, db), items, workers=2)
    assert [r.path for r in results] == [p for p, _ in items]
    assert results[3].error and "unknown format" in results[3].error
    assert results[4].error == f"{missing}: no such file"
    assert sum(bool(r.error) for r in results) == 2 and all(r.added for r in results if not r.error)
