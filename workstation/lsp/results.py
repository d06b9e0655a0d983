"""What a language server answers, as plain values (no asyncio, no pygls: cheap to import anywhere)."""

from __future__ import annotations

from dataclasses import dataclass


class ServerFailed(Exception):
    """The server cannot answer (never started, died, timed out): the message is the one line to show."""


class Stopped(ServerFailed):
    """The user stopped the turn while a request waited (the server is fine)."""


@dataclass(frozen=True)
class Location:
    path: str  # workspace-relative, '/'
    line: int  # 1-indexed
    end_line: int
    column: int = 1  # 1-indexed, in characters


@dataclass(frozen=True)
class Diagnostic:
    path: str
    line: int  # 1-indexed
    column: int  # 1-indexed
    message: str
    code: str
    severity: int  # 1 error, 2 warning, 3 information, 4 hint

    @property
    def key(self) -> tuple[str, str, str]:
        """What makes two reports the same problem, wherever an edit moved it."""
        return self.path, self.code, " ".join(self.message.split())


@dataclass(frozen=True)
class Symbol:
    name: str
    kind: int  # lsprotocol SymbolKind
    line: int  # 1-indexed, inclusive
    end_line: int
    parent: str = ""
