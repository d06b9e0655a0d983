"""Importing other agents' sessions: each format a small module mapping its logs to our records.

    claude_code  Claude Code JSONL (~/.claude/projects/<encoded cwd>/*.jsonl)
    codex        Codex CLI rollouts (~/.codex/sessions/**/rollout-*.jsonl)
    swe_agent    SWE-agent .traj (function-calling and text-action runs)
    aider        aider .aider.chat.history.md (+ .aider.input.history for times)
    openhands    OpenHands event trajectories (JSON)
    base         drafts, stable ids, provenance, timestamps shared by the formats
    engine       Importer: drafts -> session records (idempotent, incremental), events, state
    discover     the default folders of Claude Code and Codex for this workspace (--from)
    watch        keep importing while the other agent writes (--watch, the sidecar option)

Each format module says in its docstring what is peculiar about its logs and what the importer
does with it. The rest of workstation never learns where a session came from, except through
the provenance fields (`source`) of its records.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from .base import ImportProblem, Parsed, loads

FORMATS = ("claude-code", "codex", "swe-agent", "aider", "openhands")
_HEAD = 64 * 1024


def _modules() -> dict[str, ModuleType]:
    from . import aider, claude_code, codex, openhands, swe_agent  # lazy: ~18 ms, only when a source is read

    return {"claude-code": claude_code, "codex": codex, "swe-agent": swe_agent, "aider": aider,
            "openhands": openhands}


def module(fmt: str) -> ModuleType:
    table = _modules()
    if fmt not in table:
        raise ImportProblem(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    return table[fmt]


def detect(data: bytes, path: Path) -> tuple[str, Any]:
    """(format, parsed JSON document or None) from a source's content; ImportProblem when unknown."""
    table = _modules()
    aider, claude_code, codex, openhands, swe_agent = (table[f] for f in ("aider", "claude-code", "codex", "openhands",
                                                                          "swe-agent"))
    head = data[:_HEAD]
    if claude_code.sniff(head):
        return "claude-code", None
    if codex.sniff(head):
        return "codex", None
    stripped = head.lstrip()
    if stripped[:1] in (b"{", b"["):
        doc, reason = loads(data)
        if reason is None:
            if swe_agent.sniff(doc):
                return "swe-agent", doc
            if openhands.sniff(doc):
                return "openhands", doc
            raise ImportProblem(f"{path}: unknown format: JSON that is neither a SWE-agent trajectory nor "
                                f"OpenHands events (pass --format to say which)")
        if b"\n{" not in head.strip():  # one JSON document, not lines: it is broken
            raise ImportProblem(f"{path}: {reason}; nothing imported")
    text = head.decode("utf-8", errors="replace")
    if aider.sniff_text(text, path):
        return "aider", None
    if aider.is_input_history(text):
        raise ImportProblem(f"{path}: aider's input history: it gives times to the .aider.chat.history.md beside "
                            "it; import that file")
    if not data.strip():
        raise ImportProblem(f"{path}: empty file; nothing to import")
    raise ImportProblem(f"{path}: unknown format: not a Claude Code, Codex, SWE-agent, aider or OpenHands log "
                        f"(pass --format to say which)")


def parse(data: bytes, path: Path, fmt: str | None = None) -> tuple[str, Parsed]:
    """Detect (unless given) and parse a source held in memory."""
    doc = None
    if fmt is None:
        fmt, doc = detect(data, path)
    mod = module(fmt)
    if fmt in ("swe-agent", "openhands"):
        if doc is None:
            doc, reason = loads(data)
            if reason:
                raise ImportProblem(f"{path}: {reason}; nothing imported")
        if not mod.sniff(doc):
            raise ImportProblem(f"{path}: not a {fmt} file")
        return fmt, mod.parse(doc, path, len(data))
    return fmt, mod.parse(data, path)


__all__ = ["FORMATS", "ImportProblem", "detect", "module", "parse"]
