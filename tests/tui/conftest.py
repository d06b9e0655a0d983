"""Fixtures for the TUI tests: a fixed clock zone, a backend that records requests."""

from __future__ import annotations

import asyncio
import inspect
import os
import time

import pytest

from tui_support import RecordingBackend
from workstation.tui.panes import turn_render


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Run `async def` tests here in a fresh event loop (Pilot needs one)."""
    if inspect.iscoroutinefunction(pyfuncitem.obj):
        args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
        asyncio.run(pyfuncitem.obj(**args))
        return True
    return None


@pytest.fixture(autouse=True)
def _utc():
    """Times on screen are local: pin the zone so every machine renders the same."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if old is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old
    time.tzset()


@pytest.fixture
def cold_renderer(monkeypatch):
    """Markdown and lexers not yet loaded, as in a fresh process."""
    monkeypatch.setattr(turn_render, "_ready", {"text", ""})
    monkeypatch.setattr(turn_render, "_wanted", set())


@pytest.fixture
def warm_renderer(monkeypatch):
    """Markdown and the Python lexer loaded, so a frame renders in full at once."""
    ready = {"text", ""}
    monkeypatch.setattr(turn_render, "_ready", ready)
    monkeypatch.setattr(turn_render, "_wanted", set())
    for name in (turn_render.MARKDOWN, "python"):
        turn_render.warm(name)


@pytest.fixture
def backend() -> RecordingBackend:
    return RecordingBackend()
