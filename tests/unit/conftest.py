"""The unit tier: the core in this process only. A test here that starts a process (subprocess, fork,
spawn, a multiprocessing worker) or opens a network connection fails at once, naming what it tried:
such a test belongs in tests/integration. (Sockets on the local filesystem, the database owner's, are
allowed: they are the core.)"""

from __future__ import annotations

import multiprocessing.process
import os
import socket
import subprocess

import pytest


class NotAUnitTest(Exception):
    pass


def _refuse(what: str):
    def refuse(*args, **kwargs):
        raise NotAUnitTest(f"the unit tier runs no {what}: move this test to tests/integration")
    return refuse


@pytest.fixture(autouse=True)
def _unit_tier_only(monkeypatch):
    real_connect = socket.socket.connect

    def connect(self, address, *args, **kwargs):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise NotAUnitTest(f"the unit tier opens no network connection (to {address}): "
                               "move this test to tests/integration")
        return real_connect(self, address, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("subprocess"))
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", _refuse("multiprocessing worker"))
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, _refuse(f"os.{name}"))
    yield
