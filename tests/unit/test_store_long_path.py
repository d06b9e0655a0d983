"""A workspace deep enough that its owner socket's path is longer than a Unix socket address may be (108
bytes) still gets its database: the owner binds, and a client connects, through a descriptor of the folder."""

from __future__ import annotations

import threading

from workstation.memory.reflect import run_sql
from workstation.paths import Paths
from workstation.store import Database


def test_a_deep_workspace_opens_its_database(tmp_path):
    root = tmp_path / ("deep-" * 12) / ("folder-" * 8)
    root.mkdir(parents=True)
    paths = Paths.for_root(root)
    assert len(str(paths.owner_socket)) > 108
    owner = Database(paths)
    try:
        assert run_sql(owner, "SELECT 41 + 1", limit=1).rows == [[42]]
        answers = []
        client = threading.Thread(target=lambda: answers.append(_as_client(paths)))
        client.start()
        client.join(60)
        assert answers == [[[7]]]
    finally:
        owner.close()


def _as_client(paths: Paths):
    """A second Database on the same workspace: the owner is taken, so it connects to the owner's socket."""
    db = Database(paths)
    try:
        return run_sql(db, "SELECT 7", limit=1).rows
    finally:
        db.close()
