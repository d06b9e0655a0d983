"""The team replica's schema (store.schema._memory_006): the same reflection views as main, over the team's
tables, and the [team] config's rules."""

from __future__ import annotations

import re

import pytest

from workstation.config import validate
from workstation.errors import ConfigError
from workstation.memory import reflect


def _views(db, schema: str) -> dict[str, str]:
    rows = reflect.run_sql(db, f"SELECT view_name, sql FROM duckdb_views() WHERE schema_name = '{schema}' "
                               "AND NOT internal").rows
    return {name: re.sub(r"^\s*CREATE VIEW \S+ AS ", "", sql) for name, sql in rows}


def test_every_reflection_view_of_main_has_a_team_twin_with_the_same_sql(db):
    main = _views(db, "main")
    team = _views(db, "team")
    assert main and {name: team[name] for name in main} == main
    assert set(team) - set(main) == {"events", "decisions", "ltm"}  # the team's own: everyone's rows


def test_team_config_rules():
    with pytest.raises(ConfigError, match="give team.project too"):
        validate({"team": {"url": "postgresql://a@127.0.0.1/db"}})
    with pytest.raises(ConfigError, match="must be a postgresql:// URL"):
        validate({"team": {"url": "mysql://a@127.0.0.1/db", "project": "p"}})
    with pytest.raises(ConfigError, match="must not hold a password"):
        validate({"team": {"url": "postgresql://a@h/db?password=x", "project": "p"}})
    with pytest.raises(ConfigError, match="choose"):
        validate({"team": {"share": ["everything"]}})
    assert validate({"team": {"url": "postgresql://a@127.0.0.1/db?sslmode=disable", "project": "p"}}).team.enabled
    assert validate({}).team.share == ["events", "decisions", "ltm"]  # sessions stay home unless asked


def test_accepts_made_before_migration_7_keep_the_author_who_first_wrote_the_item():
    """Migration _memory_007 keys acceptance by author and origin: an LTM key accepted before it stays
    accepted for the author of its first write at that origin, never for a later writer under that origin."""
    import duckdb

    from workstation.store.schema import MEMORY_MIGRATIONS, migrate

    con = duckdb.connect()
    migrate(con, "main", MEMORY_MIGRATIONS[:6])
    con.execute("""INSERT INTO team.remote_ltm (namespace, key, value, deleted, stamp, updated_at, updated_by, origin,
                   author, seen_at) VALUES ('default', 'cmd', '"make"', false, 1, now(), 'b', 'h:/w', 'bob', 0),
                   ('default', 'cmd', '"curl | sh"', false, 2, now(), 'b', 'h:/w', 'mallory', 0)""")
    con.execute("""INSERT INTO team.remote_decisions (id, ts, session, flow, step, decision, reasoning, related_files,
                   origin, author) VALUES ('d1', now(), 's', 'f', 1, 'tabs', 'r', [], 'h:/w', 'bob')""")
    con.execute("""INSERT INTO team.accepted VALUES ('ltm', 'h:/w', 'default' || chr(0) || 'cmd', now()),
                   ('decision', 'h:/w', 'd1', now()), ('decision', 'gone:/w', 'd9', now())""")
    assert migrate(con, "main", MEMORY_MIGRATIONS) == 1
    assert sorted(con.execute("SELECT kind, origin, author FROM team.accepted_items").fetchall()) == [
        ("decision", "h:/w", "bob"), ("ltm", "h:/w", "bob")]  # an accept of nothing pulled names no author: gone
