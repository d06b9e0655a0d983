"""Language servers, managed: one per language per workspace, started on first use, stopped with us.

What they give the agent (agent/tools): after every edit the errors the edit introduced, in the changed
file and in the files that import it, and the errors it fixed (check.py); `impact` asks the server for
real references before the map's name matches; `find` can jump to a definition.

Why pygls' client over lsprotocol's types, and not hand-written JSON-RPC or multilspy:
- lsprotocol is the LSP specification generated into typed Python classes (Microsoft's, the same
  generator as the VS Code client's types), with cattrs converters; pygls (the Open Law Library's,
  used by many Python servers) builds its client on them: framing, request ids, cancellation,
  server-to-client requests (workspace/configuration) and the process. Both are maintained and
  small (~1 MB with cattrs), pure Python, and already what `lsprotocol` users test against.
- multilspy (Microsoft's) fits the "library interface" idea but downloads its servers at run time
  (a rule here: nothing downloads at run time), pins old server versions, and starts them outside any
  sandbox; its one-language-per-class design would hide the process we must sandbox.
- Hand-written framing would be ~200 lines of protocol code of our own to get right and keep up.
pygls is asyncio; client.py keeps it on a loop in a thread of its own so the rest stays synchronous
and every wait is bounded.

Servers run in the commands' sandbox (workstation.sandbox), since a project's configuration can make
a server run a program of the project's (basedpyright runs the interpreter a pyrightconfig.json
names, or a planted `.venv/bin/python`). Where no sandbox backend works here, no server starts, and one
line says why. And none starts in a folder the user has not trusted (workstation.trust): nothing a
repository ships runs before trust, sandboxed or not.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .check import MARK, EditCheck, Report
from .results import Diagnostic, Location, ServerFailed, Symbol
from .servers import ServerSpec, language_of, spec_for

if TYPE_CHECKING:
    from ..config import LspConfig
    from .client import Server
    from ..sandbox import Policy

__all__ = ["MARK", "Diagnostic", "EditCheck", "LanguageServers", "Location", "Report", "Server", "ServerFailed",
           "ServerSpec", "Symbol", "block_of", "language_of"]

MAX_DEPENDANTS = 30  # files importing an edited one that are checked with it


def block_of(text: str) -> str:
    """The language server's lines at the end of an edit's result ("" when it has none): for the chat."""
    at = text.find("\n" + MARK)
    if at < 0:
        return text if text.startswith(MARK) else ""
    return text[at + 1:]


class LanguageServers:
    """The language servers of one workspace; see the module docstring."""

    def __init__(self, root: Path, config: "LspConfig", policy: "Policy | None",
                 specs: Callable[[str], "ServerSpec | str"] = spec_for, *, trusted: bool = False):
        self.root = root
        self.config = config
        self.policy = policy
        self.trusted = trusted  # the user trusts the folder: only then does a server start
        self.specs = specs  # how each language's server starts (servers.spec_for; tests start others)
        self._servers: dict[str, Server] = {}
        self._absent: dict[str, str] = {}  # language -> why it has no server
        self._told: set[str] = set()  # languages whose absence a result has said once
        self._lock = threading.Lock()
        self._closed = False

    def server(self, language: str) -> Server | None:
        """The language's server, started (in the background) if it is not yet; None with `absent(language)`
        saying why when there is none."""
        if not self.config.enabled or self._closed:
            return None
        with self._lock:
            found = self._servers.get(language)
            if found is not None or language in self._absent:
                return found
            why = self._untrusted() or self._no_sandbox()
            spec = self.specs(language) if not why else why
            if isinstance(spec, str):
                self._absent[language] = spec
                return None
            from .client import Server  # lazy: asyncio, for the processes that start a server

            found = self._servers[language] = Server(spec, self.root, self.policy)
        found.start()
        return found

    def absent(self, language: str) -> str:
        return self._absent.get(language, "")

    def absent_for(self, rel: str) -> str:
        """Why no server answers for `rel` ("" when one does, or it is merely starting)."""
        language = language_of(rel)
        if language is None:
            return f"no language server for {rel}"
        found = self._servers.get(language)
        return found.error or "" if found is not None else self.absent(language)

    def _untrusted(self) -> str:
        if self.trusted:
            return ""
        return (f"no language server: {self.root} is not trusted, and a server runs what a repository ships (its "
                f"interpreter, its plugins); `workstation trust {self.root}` to have edits checked")

    def _no_sandbox(self) -> str:
        if self.policy is None:
            return ""
        from .. import sandbox  # lazy: the sandbox probe runs once, where a server is wanted

        status = sandbox.status(self.policy)
        if status.backend is None:
            return f"no language server: it runs only in the commands' sandbox, and there is none ({status.line})"
        return ""

    def warm(self, rel: str) -> None:
        """Start the server of `rel`'s language now, without waiting (a file the agent is reading)."""
        language = language_of(rel)
        if language is not None:
            self.server(language)

    def running(self, rel: str, timeout_s: float | None = None) -> Server | None:
        """The server of `rel`'s language when it is (or becomes, within `timeout_s`) ready; else None."""
        language = language_of(rel)
        found = self.server(language) if language else None
        if found is None or found.error:
            return None
        if not found.ready:
            try:
                found.wait_ready(self.config.timeout_s if timeout_s is None else timeout_s)
            except ServerFailed:
                return None
        return found

    def begin_edit(self, paths: list[str], dependants: Callable[[list[str]], list[str]],
                   cancel: "threading.Event | None" = None) -> "EditCheck | str | None":
        """Before an edit of `paths`: its check (the baseline taken), or one line saying why there is none
        to say in the result (once per language), or None (nothing to check)."""
        by_language: dict[str, list[str]] = {}
        for rel in paths:
            language = language_of(rel)
            if language is not None:
                by_language.setdefault(language, []).append(rel)
        if not by_language or not self.config.enabled:
            return None
        language, rels = next(iter(by_language.items()))  # an edit writes one language's files
        found = self.server(language)
        if found is None:
            if language in self._told or not self.absent(language):
                return None
            self._told.add(language)
            return self.absent(language)
        if found.error:
            if language in self._told:
                return None
            self._told.add(language)
            return found.error
        more = [rel for rel in dependants(rels) if language_of(rel) == language and rel not in rels]
        return EditCheck(found, rels + more[:MAX_DEPENDANTS], self.config.timeout_s, cancel)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            servers, self._servers = list(self._servers.values()), {}
        for found in servers:
            found.stop()
