"""The check of one edit: the errors the language server reports in the changed files and in the files that
import them, before the edit and after it; what the result says is only the difference.

`new`: errors after the edit that were not there before (compared by file, rule and message, not by
line: an edit above an old error moves it without making it new). `fixed`: errors there before that
are gone, which is how the model's next edit hears that it repaired what its last one broke. Only
errors (severity 1) count; warnings and hints are the project's business. What the model reads is
held to a budget of errors and characters (`[lsp] max_errors`, `max_chars`); the record keeps the
counts and the shown lines.

The block the result gets starts with a line beginning `MARK`, so the chat can show it under the edit.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .results import Diagnostic, ServerFailed

if TYPE_CHECKING:
    from .client import Server

MARK = "lsp: "
ERROR = 1


@dataclass
class Report:
    server: str
    new: list[Diagnostic] = field(default_factory=list)
    fixed: list[Diagnostic] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)  # files whose diagnostics were compared
    note: str = ""  # one line: why there was no check (a server that failed, timed out, is absent)
    ms: float = 0.0  # the check's cost: the pulls before and after the edit
    edits: int = 1  # the edits compared together: a response's edits are checked as one (tools.lspcheck)

    def render(self, max_errors: int, max_chars: int) -> str:
        """The block appended to the edit's result ("" when there is nothing to say). Errors of one message
        in one file are one line: every location (path:line:column), then the message once."""
        if self.note:
            return f"{MARK}{self.note}"
        lines: list[str] = []
        after = f" after this response's {self.edits} edits" if self.edits > 1 else ""
        if self.new:
            count = len(self.new)
            lines.append(f"{MARK}{count} new error{'s' if count != 1 else ''}{after} ({self.server}):")
            lines += _budgeted(_grouped(self.new, True), "  ", max_errors, max_chars)
        if self.fixed:
            lines += _budgeted(_grouped(self.fixed, False), f"{MARK}fixed{after}: ", max_errors, max_chars // 2)
        return "\n".join(lines)

    def data(self, shown: str) -> dict:
        """What the session record keeps (`diagnostics`)."""
        out = {"server": self.server, "new": len(self.new), "fixed": len(self.fixed), "files": len(self.checked),
               "ms": self.ms}
        if self.edits > 1:
            out["edits"] = self.edits
        if self.note:
            out["note"] = self.note
        if shown:
            out["shown"] = shown
        return out


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _code(d: Diagnostic) -> str:
    return f" [{d.code}]" if d.code else ""


def _grouped(found: list[Diagnostic], column: bool) -> list[tuple[list[str], str]]:
    """(locations, message) per file and message, in the order first found."""
    groups: dict[tuple[str, str], list[str]] = {}
    for d in found:
        where = f"{d.path}:{d.line}:{d.column}" if column else f"{d.path}:{d.line}"
        groups.setdefault((d.path, f"{_one_line(d.message)}{_code(d)}"), []).append(where)
    return [(wheres, message) for (_, message), wheres in groups.items()]


def _budgeted(groups: list[tuple[list[str], str]], prefix: str, max_errors: int, max_chars: int) -> list[str]:
    """One line per group (its locations, then its message) while `max_chars` and `max_errors` (counted in
    locations) last; then how many errors were left out."""
    out: list[str] = []
    used = shown = 0
    for wheres, message in groups:
        wheres = wheres[:max_errors - shown]
        line = f"{prefix}{', '.join(wheres)} {message}"
        if not wheres or out and used + len(line) > max_chars:
            break
        out.append(line[:max_chars])
        used += len(line) + 1
        shown += len(wheres)
    if (left := sum(len(wheres) for wheres, _ in groups) - shown) > 0:
        out.append(f"  … and {left} more")
    return out


def _errors(found: dict[str, list[Diagnostic]]) -> list[Diagnostic]:
    return [d for rel in sorted(found) for d in found[rel] if d.severity == ERROR]


def difference(before: list[Diagnostic], after: list[Diagnostic]) -> tuple[list[Diagnostic], list[Diagnostic]]:
    """(new, fixed): what `after` has more of than `before` and the reverse, keyed by Diagnostic.key. An
    error still at its place is matched first, so that one more of a message is the one that appeared,
    not whichever comes last in the file."""
    same_place = (collections.Counter((d.key, d.line) for d in before)
                  & collections.Counter((d.key, d.line) for d in after))
    left_before, left_after = _unmatched(before, same_place), _unmatched(after, same_place)
    had = collections.Counter(d.key for d in left_before)
    has = collections.Counter(d.key for d in left_after)
    new, fixed = [], []
    for d in left_after:
        if had[d.key] > 0:
            had[d.key] -= 1
        else:
            new.append(d)
    for d in left_before:
        if has[d.key] > 0:
            has[d.key] -= 1
        else:
            fixed.append(d)
    return new, fixed


def _unmatched(found: list[Diagnostic], matched: "collections.Counter") -> list[Diagnostic]:
    taken = collections.Counter(matched)
    out = []
    for d in found:
        if taken[(d.key, d.line)] > 0:
            taken[(d.key, d.line)] -= 1
        else:
            out.append(d)
    return out


class EditCheck:
    """Begun before an edit (the baseline), finished after it (`finish`): the two waits on the server share
    `timeout_s` (lsp.timeout_s, which a workspace may lower, never raise: config.BUDGETS)."""

    def __init__(self, server: "Server", scope: list[str], timeout_s: float, cancel: "threading.Event | None" = None):
        self.server = server
        self.cancel = cancel
        self.scope = scope
        self.timeout_s = timeout_s
        self.started = time.perf_counter()
        self.note = ""
        self.before: list[Diagnostic] = []
        self.existed = {rel: (server.root / rel).exists() for rel in scope}
        try:
            self.before = _errors(server.diagnostics(scope, timeout_s, cancel))
        except ServerFailed as err:
            self.note = f"{err}; this edit was not checked"
        self.spent = time.perf_counter() - self.started

    def finish(self, changed: list[str]) -> Report:
        """The report once the edit is on disk; `changed`: the paths the tool wrote."""
        report = Report(self.server.spec.name, checked=list(self.scope), note=self.note)
        if self.note:
            return report
        started = time.perf_counter()
        moved = {rel: (1 if (self.server.root / rel).exists() else 3) for rel in changed
                 if (self.server.root / rel).exists() != self.existed.get(rel, True)}
        self.server.files_changed(moved)  # a created or vanished module: imports resolve anew
        left = self.timeout_s - self.spent  # one edit waits on the server lsp.timeout_s in all, not twice that
        try:
            if left <= 0:
                raise ServerFailed(f"{self.server.spec.name} took the edit's {self.timeout_s:g}s before it")
            after = _errors(self.server.diagnostics(self.scope, left, self.cancel))
        except ServerFailed as err:
            report.note = f"{err}; this edit was not checked"
            return report
        report.new, report.fixed = difference(self.before, after)
        report.ms = round((self.spent + time.perf_counter() - started) * 1000, 1)
        return report
