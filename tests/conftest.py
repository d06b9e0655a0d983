"""Shared fixtures: keep a developer's own config and network out of every test."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture(autouse=True)
def _isolated_user(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("wshome")
    monkeypatch.setenv("WORKSTATION_HOME", str(home))
    monkeypatch.delenv("WORKSTATION_MODEL", raising=False)
    yield


from conftest_llm import llm_spec, scripted_llm  # noqa: E402,F401  (shared fixtures)
