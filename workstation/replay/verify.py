"""`replay --verify`: an episode's tool calls re-run against today's tree.

Each tool declares what verification may do with its past calls (agent.tools:
recompute and compare, re-apply in a scratch copy, or never). The first result
that differs from what the agent saw then is marked. The user's tree is never
written: an episode that edited files before reading them again is checked in
a private scratch copy where the episode's own edits are re-applied in order,
so every read is compared against the tree as it would be at that point.
Commands are never re-run. This is the one part of replay that needs the
agent's tools, the index and the store.
"""

from __future__ import annotations

import copy
import difflib
import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..agent import tools
from ..agent.tools import toolcall
from ..errors import WorkstationError
from ..fsutil import confine
from ..index import indexer
from ..index.ignore import IgnoreRules
from ..index.map import KnowledgeMap
from ..paths import STATE_DIRNAME, Paths
from ..sandbox import Policy
from ..sessions.records import Tool, ToolCall
from ..store import Database
from .episode import Episode, Step, call_label

if TYPE_CHECKING:
    from ..config import Config
    from ..runtime import Workspace

DIFF_LINES = 16  # lines of a "short diff"

@dataclass
class Check:
    """One tool call of the episode re-run today."""

    index: int  # step index
    record_id: str
    tool: str
    args: dict
    status: str  # same | differ | skipped | edit-same | edit-differ
    reason: str = ""
    diff: str = ""

    @property
    def number(self) -> int:
        return self.index + 1

    def to_dict(self) -> dict:
        return {"step": self.number, "record_id": self.record_id, "tool": self.tool, "args": self.args,
                "status": self.status, "reason": self.reason or None, "diff": self.diff or None}


@dataclass
class VerifyReport:
    episode: str
    root: str
    mode: str  # "tree": checked in place (read-only) | "scratch": a private copy, the episode's edits replayed
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def _count(self, *statuses: str) -> int:
        return sum(1 for c in self.checks if c.status in statuses)

    @property
    def checked(self) -> int:
        return self._count("same", "differ")

    @property
    def same(self) -> int:
        return self._count("same")

    @property
    def differ(self) -> int:
        return self._count("differ")

    @property
    def skipped(self) -> int:
        return self._count("skipped")

    @property
    def edits_replayed(self) -> int:
        return self._count("edit-same", "edit-differ")

    @property
    def edits_differ(self) -> int:
        return self._count("edit-differ")

    @property
    def first_difference(self) -> Check | None:
        return next((c for c in self.checks if c.status in ("differ", "edit-differ")), None)

    @property
    def ok(self) -> bool:
        return self.first_difference is None

    @property
    def checkable(self) -> bool:
        """Did anything get compared (a recomputed result or a re-applied edit)? An episode whose tools this
        version does not know, or that only ran commands, has nothing to check."""
        return bool(self.checked or self.edits_replayed)

    def status_of(self, index: int) -> str | None:
        """The verdict on step `index` (None: nothing to check there)."""
        return next((c.status for c in self.checks if c.index == index), None)

    def to_dict(self) -> dict:
        first = self.first_difference
        return {"episode": self.episode, "root": self.root, "mode": self.mode, "ok": self.ok,
                "checkable": self.checkable, "checked": self.checked, "same": self.same, "differ": self.differ, "skipped": self.skipped,
                "edits_replayed": self.edits_replayed, "edits_differ": self.edits_differ,
                "first_difference": first.to_dict() if first else None,
                "checks": [c.to_dict() for c in self.checks], "notes": self.notes,
                "seconds": round(self.seconds, 3)}

    def render(self) -> str:
        where = ("in a scratch copy of it, the episode's own edits re-applied" if self.mode == "scratch"
                 else "read-only")
        lines = [f"episode {self.episode} against {self.root} ({where})",
                 f"checked {self.checked}: {self.same} same, {self.differ} differ; skipped {self.skipped}"
                 + (f"; edits replayed {self.edits_replayed} ({self.edits_differ} differ)"
                    if self.edits_replayed else "")]
        for check in self.checks:
            mark = _MARKS[check.status]
            text = f"  {mark} step {check.number:>4}  {call_label(check.tool, check.args)}"
            if check.reason:
                text += f"  ({check.reason})"
            lines.append(text)
        first = self.first_difference
        if not self.checkable:
            lines.append("nothing checkable: no tool call of this episode can be re-run today, so nothing "
                         "says whether it still applies")
        elif first is None:
            lines.append("every checked result is the same as what the agent saw: the episode still applies")
        else:
            lines.append(f"FIRST DIFFERENCE at step {first.number}: {call_label(first.tool, first.args)}")
            lines += ["    " + line for line in first.diff.splitlines()]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


_MARKS = {"same": "=", "differ": "≠", "skipped": "-", "edit-same": "✎", "edit-differ": "≠"}


def _short_diff(then: str, now: str) -> str:
    lines = list(difflib.unified_diff(then.splitlines(), now.splitlines(), "then", "now", n=1, lineterm=""))
    if len(lines) > DIFF_LINES:
        lines = lines[:DIFF_LINES] + [f"… {len(lines) - DIFF_LINES} more diff lines"]
    return "\n".join(lines)


def _arguments_ok(call: ToolCall) -> bool:
    try:
        return isinstance(json.loads(call.arguments or "{}"), dict)
    except (TypeError, ValueError, RecursionError):
        return False


def _skip_reason(step: Step, tool: tools.Tool) -> str | None:
    r = step.record
    if step.call is None:
        return "its call is not in the log"
    if not _arguments_ok(step.call):
        return "its arguments were not a JSON object"
    if isinstance(r, Tool) and not r.ok and r.content.startswith("[not run"):
        return "never ran"
    # the tools read a record through Fields' mapping access until their reads are typed (issue 32, 2)
    return tool.verify_skip(tools.Call.from_record(r, step.args))  # type: ignore[arg-type]


def _tool_name(step: Step) -> str:
    return step.record.name if isinstance(step.record, Tool) else ""


def _edits_before_reads(episode: Episode) -> bool:
    """Did the episode change a file before a later call that is recomputed?"""
    edited = False
    for step in episode.steps:
        if step.kind != "tool":
            continue
        tool = tools.get(_tool_name(step))
        if step.meaning().edits:
            edited = True
        elif edited and tool is not None and tool.verify == tools.RECOMPUTE:
            return True
    return False


def _verifier_config(config: Config) -> Config:
    """The workspace's config with no model (find stays in tier one; nothing leaves the machine)."""
    cfg = copy.deepcopy(config)
    cfg.model.name = ""
    cfg.model.fallbacks = []
    cfg.workspace.state_dir = ""
    return cfg


def verify(episode: Episode, workspace: "Workspace", *, scratch: bool | None = None,
           progress: Callable[[int, int], None] | None = None) -> VerifyReport:
    """Re-run the episode's recomputable tool calls (their tools declare `verify = RECOMPUTE`) against
    today's tree of `workspace` and compare each result with what the agent saw then. `scratch` (default:
    when the episode edited files before reading again) checks in a private copy of the tree with the
    episode's edits re-applied; the workspace's tree is never written."""
    started = time.perf_counter()
    if scratch is None:
        scratch = _edits_before_reads(episode)
    root = workspace.paths.root
    report = VerifyReport(episode.name, str(root), "scratch" if scratch else "tree")
    tree = _ScratchTree(workspace, episode) if scratch else None
    try:
        if tree is not None:
            kmap = tree.open()
        else:
            kmap = KnowledgeMap(workspace.db, workspace.paths, _verifier_config(workspace.config))
        # what the calls may touch: the tree's own policy (its state folder and .git out of reach, as live)
        ctx = tools.tool_context(kmap, Policy(kmap.root, (kmap.paths.state,)), recall=_no_recall,
                                 session=episode.name)
        work = [s for s in episode.steps if s.kind == "tool"]
        unknown: dict[str, list[int]] = {}  # tool name -> steps: one note per name, not one per step
        for done, step in enumerate(work, start=1):
            name = _tool_name(step)
            tool = tools.get(name)
            if tool is None:
                unknown.setdefault(name or "an unnamed tool", []).append(step.number)
            else:
                _check_step(step, tool, ctx, scratch, report)
            if progress is not None:
                progress(done, len(work))
        ctx.services.reindex()
        for name, numbers in unknown.items():
            report.notes.append(f"{_steps_text(numbers)} called {name}, which this version does not know; "
                                "not re-run")
    finally:
        if tree is not None:
            tree.close()
    report.seconds = time.perf_counter() - started
    return report


_REFUSED = ("error: you refused", "error: not approved", "error: command not approved")


def _check_step(step: Step, tool: tools.Tool, ctx: tools.ToolContext, scratch: bool,
                report: VerifyReport) -> None:
    r = step.record
    assert isinstance(r, Tool)  # only tool steps are checked
    name = r.name
    args = step.args
    then = r.content
    if tool.verify == tools.RECOMPUTE:
        reason = _skip_reason(step, tool)
        if reason is not None:
            report.checks.append(Check(step.index, step.id, name, args, "skipped", reason))
            return
        result = _rerun(ctx, step, name, args)
        was_ok = r.ok
        same = result.ok == was_ok and tool.comparable(result.text) == tool.comparable(then)
        reason = "" if result.ok == was_ok else (
            "failed then, succeeds now" if result.ok else "succeeded then, fails now")
        report.checks.append(Check(step.index, step.id, name, args, "same" if same else "differ", reason,
                                   "" if same else _short_diff(then, result.text)))
    elif tool.verify == tools.REAPPLY and r.ok:
        if not scratch:
            report.notes.append(f"step {step.number} edited {tool.label(name, args)}; not replayed "
                                "(read-only check)")
            return
        if step.call is None or not _arguments_ok(step.call):
            report.notes.append(f"step {step.number}: an edit whose call is unreadable was not replayed")
            return
        result = _rerun(ctx, step, name, args)  # inside the scratch copy only
        same = result.ok and tool.comparable(result.text) == tool.comparable(then)
        report.checks.append(Check(step.index, step.id, name, args, "edit-same" if same else "edit-differ",
                                   "" if same else "the episode's edit does not apply the same way",
                                   "" if same else _short_diff(then, result.text)))
    elif tool.effect == tools.DELEGATE:
        report.notes.append(f"step {step.number} ran a sub-agent ({tool.label(name, args)}): its own calls are "
                            "checked as the steps they are")
    elif tool.effect == tools.COMMAND:
        if r.outcome == "denied" or then.startswith(_REFUSED):
            report.notes.append(f"step {step.number}: the command {tool.label(name, args)} was refused and "
                                "never ran")
        else:
            report.notes.append(f"step {step.number} ran a command ({tool.label(name, args)}) that is not "
                                "re-run; whatever it changed is not in the checked tree")


def _rerun(ctx: tools.ToolContext, step: Step, name: str, args: dict) -> tools.ToolResult:
    """A past call run again as every call runs (`agent.tools.toolcall.execute`: the scratch tree's policy says
    what it may write, never `.git` or a state folder; the result masked as the log's was); nothing is
    recorded."""
    result, _meaning = toolcall.execute(ctx, name, args, available=tools.TOOLS, memory=None,
                                        call_id=step.call.id if step.call else "", record_id=step.id)
    return result


def _steps_text(numbers: list[int]) -> str:
    """'step 4', 'steps 4, 6, 9', 'steps 4, 6, 9 … (12 in all)'."""
    if len(numbers) == 1:
        return f"step {numbers[0]}"
    shown = ", ".join(str(n) for n in numbers[:6])
    return f"steps {shown}" + (f" … ({len(numbers)} in all)" if len(numbers) > 6 else "")


def _no_recall(record_id: str) -> str:
    raise WorkstationError("recall is not available while verifying")


class _ScratchTree:
    """A private copy of the workspace's tree (what the index sees, plus the files the episode named),
    with its own state folder, database and knowledge map. Deleted on close."""

    def __init__(self, workspace: Workspace, episode: Episode):
        self.workspace = workspace
        self.episode = episode
        self.tmp: Path | None = None
        self.db = None

    def open(self):
        src = self.workspace.paths
        config = self.workspace.config
        self.tmp = Path(tempfile.mkdtemp(prefix="ws-verify-"))
        root = self.tmp / "tree"
        root.mkdir()
        rules = IgnoreRules(src.root, src.state, config.index.ignore, user_file=src.trusted)
        found = indexer.scan(src.root, rules, config.index.max_file_bytes)
        wanted = {rel: read_from for rel, (read_from, _sig) in found.files.items()}
        for rel in (f"{STATE_DIRNAME}/ignore", ".git/info/exclude")[0 if src.trusted else 1:]:
            if (src.root / rel).is_file():
                wanted[rel] = str(src.root / rel)
        for rel in self._named_files(src.root):
            wanted.setdefault(rel, str(src.root / rel))
        for rel, read_from in wanted.items():
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(read_from, target)
        paths = Paths.for_root(root, trusted=src.trusted)
        self.db = Database(paths)
        kmap = KnowledgeMap(self.db, paths, _verifier_config(config))
        kmap.index_all()
        self._copy_model_purposes(kmap)
        return kmap

    def _named_files(self, root: Path) -> list[str]:
        """Files the episode's file tools named that the index leaves out (they may still be read)."""
        out = []
        for step in self.episode.steps:
            if step.kind != "tool" or not isinstance(step.args.get("path"), str):
                continue
            try:
                real, rel = confine(root, step.args["path"])
            except WorkstationError:
                continue
            if rel and real.is_file() and not rel.startswith((".git/", ".workstation/")):
                out.append(rel)
        return out

    def _copy_model_purposes(self, kmap) -> None:
        """Purposes a model wrote for the real index (same content hash) appear in file_meta; carry them."""
        if not self.workspace.paths.index_db.exists():
            return
        kmap.set_model_purposes(self.workspace.kmap.model_purposes())

    def close(self) -> None:
        try:
            if self.db is not None:
                self.db.close()
        finally:
            if self.tmp is not None:
                shutil.rmtree(self.tmp, ignore_errors=True)


