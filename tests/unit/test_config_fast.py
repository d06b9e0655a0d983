"""config._plainly_valid (the start-up path that skips pydantic's validator) against pydantic itself:
whatever it accepts, pydantic accepts and builds the same; whatever pydantic refuses, it refuses."""

from typing import Any, Literal, get_args, get_origin

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from workstation import config
from workstation.config import Config, McpServerConfig, _Section


def _shape(value: Any) -> Any:
    """Everything equality hides: types (1 vs 1.0) and each model's set fields."""
    if isinstance(value, BaseModel):
        return (type(value).__name__, sorted(value.model_fields_set),
                {name: _shape(getattr(value, name)) for name in type(value).model_fields})
    if isinstance(value, dict):
        return {key: _shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shape(item) for item in value]
    return (type(value).__name__, repr(value))


def _agrees(data: Any) -> Any:
    fast = config._plainly_valid(Config, data)
    try:
        slow = Config.model_validate(data)
    except ValidationError:
        assert fast is None, f"accepted what pydantic refuses: {data!r}"
        return None
    if fast is not None:
        assert _shape(fast) == _shape(slow), data
    return fast


LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 300), st.integers(), st.floats(), st.text(max_size=6),
    st.sampled_from(["auto", "off", "codex", "claude-code", "*.py", "[", "ls", "git status", "~/.x", "/abs",
                     "rel", "a\x00b", "${X}", "http://h", "a__b", "API_KEY", "x" * 40, 86400, 86401, 1e300,
                     10**30, 1 << 30, 256, 257, 0, 0.0, -0.0, 1.5, float("nan"), float("inf")]))
VALUES = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.sampled_from(["A", "KEY", "x", "a-b", "1"]), inner, max_size=3),
                      max_leaves=6)


EDGES = st.sampled_from([-1, 0, 1, 2, 10, 11, 60, 86400, 86401, 256, 257, 1 << 30, (1 << 30) + 1, 10**30])


def _typed(annotation: Any) -> st.SearchStrategy:
    """Values mostly of the field's own type, at and around its bounds: where the two could differ."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return st.sampled_from([*args, "nope", 1])
    if origin is list:
        return st.lists(st.one_of(_typed(args[0]), LEAVES), max_size=3)
    if origin is dict:
        return st.dictionaries(st.sampled_from(["A", "API_KEY", "x-y", "1", "TOKEN"]),
                               st.one_of(_typed(args[1]), LEAVES), max_size=2)
    if annotation is int:
        return st.one_of(EDGES, st.integers(-3, 100), st.booleans(), st.sampled_from([2.0, "3"]))
    if annotation is float:
        return st.one_of(EDGES, st.floats(-1, 1e5), st.floats(), st.sampled_from([1e300, 0.5, "1"]))
    if annotation is bool:
        return st.one_of(st.booleans(), st.sampled_from([0, 1, "true"]))
    if annotation is str:
        return st.one_of(st.sampled_from(["", "a", "/abs", "~/.x", "rel", "ls", "git status", "*.py", "[z-a]",
                                          "http://h", "a\x00b", "${X}"]), st.text(max_size=5))
    return LEAVES


def _model(model: type[_Section], depth: int = 0) -> st.SearchStrategy:
    keys = {(info.alias or name): info for name, info in model.model_fields.items()}
    choices: dict[str, st.SearchStrategy] = {}
    for key, info in keys.items():
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, _Section):
            choices[key] = st.one_of(_model(annotation, depth + 1), VALUES)
        elif model is config.McpConfig:
            server_names = st.sampled_from(["fs", "a__b", "ok-1", "", "x" * 33])
            choices[key] = st.one_of(st.dictionaries(server_names, _model(McpServerConfig, depth + 1), max_size=2),
                                     VALUES)
        else:
            choices[key] = st.one_of(_typed(annotation), _typed(annotation), _typed(annotation), VALUES)
    choices["bogus"] = VALUES
    return st.lists(st.sampled_from(sorted(choices)), max_size=len(choices), unique=True).flatmap(
        lambda picked: st.fixed_dictionaries({key: choices[key] for key in picked}))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_model(Config))
def test_agrees_with_pydantic(data):
    _agrees(data)


@pytest.mark.parametrize("data", [
    {},
    {"workspace": {"state_dir": "/tmp/state"}},
    {"model": {"name": "openai/gpt-4o", "timeout_s": 5, "max_retries": 10, "fallbacks": ["a", "b"],
               "context_window": 0}},
    {"index": {"workers": 256, "ignore": ["*.log", "build/"], "max_file_bytes": 1 << 30,
               "describe_with_model": True}},
    {"memory": {"compact_threshold": 80, "keep_recent": 40, "compact_token_ratio": 1}},
    {"agent": {"command_allow": ["ls", "pytest"], "sandbox": "off", "command_network": True,
               "sandbox_hide": ["~/.ssh", "/etc/secret"], "command_timeout_s": 86400.0}},
    {"import": {"watch": ["codex", "claude-code"]}, "ui": {"theme": "x"}},
    {"mcp": {"servers": {"fs": {"command": "mcp-fs", "args": ["--root", "."], "env": {"TOKEN": "${TOKEN}"}},
                         "web": {"url": "https://example.com/mcp", "headers": {"Authorization": "${AUTH}"}}}}},
])
def test_plain_configs_skip_pydantic(data):
    """The configs people write take the fast path (and build what pydantic builds)."""
    assert _agrees(data) is not None


@pytest.mark.parametrize("data", [
    {"memory": {"compact_threshold": 40, "keep_recent": 40}},  # the model validator
    {"index": {"ignore": ["a", "[z-a]"]}},  # a field validator after the type
    {"mcp": {"servers": {"a__b": {"command": "x"}}}},  # a field validator before it
    {"mcp": {"servers": {"a": {"command": "x", "env": {"API_KEY": "plain"}}}}},
    {"agent": {"command_network": 1}},  # strict
    {"model": {"timeout_s": float("nan")}},
    {"index": {"workers": 2.0}},  # pydantic coerces it; the fast path leaves that to pydantic
    {"import_": {"watch": []}},  # the field's name, not its key in the file
])
def test_doubtful_configs_go_to_pydantic(data):
    assert config._plainly_valid(Config, data) is None
    _agrees(data)
