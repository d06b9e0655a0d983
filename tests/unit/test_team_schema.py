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
