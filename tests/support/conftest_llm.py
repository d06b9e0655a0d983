"""Pytest fixtures for tests that talk to a (fake) model.

Import into tests/conftest.py (``from support.conftest_llm import scripted_llm, llm_spec  # noqa: F401``)
or directly into a test module.

* ``scripted_llm`` -- a running ``fakellm.ScriptedLLM`` (empty script; ``push()`` replies).
* ``llm_spec``     -- factory: ``llm_spec(**overrides) -> ModelSpec('openai/test-model',
  api_base=<fake url>, api_key_env='WS_TEST_KEY', ...)`` with WS_TEST_KEY set to ``FAKE_API_KEY``
  and test-friendly timeouts/backoff (override any ModelSpec field by keyword);
  ``llm_spec(model=CLAUDE_MODEL)`` talks to the same server's Anthropic Messages endpoint.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterator

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from support.fakellm import Reply, ScriptedLLM  # noqa: E402

__all__ = ["scripted_llm", "llm_spec", "FAKE_API_KEY", "TEST_KEY_ENV", "TEST_MODEL", "CLAUDE_MODEL", "Reply",
           "ScriptedLLM"]

FAKE_API_KEY = "sk-wstest-FAKE0123456789abcdefDONOTLEAK"
TEST_KEY_ENV = "WS_TEST_KEY"
TEST_MODEL = "openai/test-model"
CLAUDE_MODEL = "anthropic/claude-sonnet-4-5-20250929"  # litellm's price map has its cache prices


@pytest.fixture
def scripted_llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


@pytest.fixture
def llm_spec(scripted_llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    from workstation.llm import ModelSpec

    monkeypatch.setenv(TEST_KEY_ENV, FAKE_API_KEY)

    def make(**overrides: Any) -> ModelSpec:
        fields: dict[str, Any] = dict(model=TEST_MODEL, api_base=scripted_llm.url, api_key_env=TEST_KEY_ENV,
                                      timeout_s=5, max_retries=0, backoff_s=0.01)
        fields.update(overrides)
        return ModelSpec(**fields)

    return make
