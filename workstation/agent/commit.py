"""Commits of the agent's work: `/commit [MESSAGE]`, `workstation session commit`, and
`agent.auto_commit` after each turn that changed files.

Only the files the session's tool calls changed are committed, found in the session log from each
tool's own declaration (`Meaning.edits`; no tool name is tested here), and of those only the ones
git sees as changed; whatever else the user has changed or staged stays out of the commit. The
state folder and `.git/` are never committed. Without a message the model writes one from the
diff and the user's requests (both scrubbed of secrets); nothing is ever pushed. git itself runs
through workstation.git (pinned settings, no hooks, a time limit).
"""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING

from .. import git, llm, scrub
from ..errors import WorkstationError
from ..fsutil import confine
from ..sessions.log import tool_call_arguments
from ..sessions.records import Assistant, Record, Tool, ToolCall, User
from . import tools

if TYPE_CHECKING:
    from ..runtime import Workspace
    from ..sessions.log import Session

MESSAGE_PROMPT = """You write git commit messages. Answer with the message only: a summary line in the \
imperative mood under 72 characters, then a blank line and a short body (a few lines, wrapped at 72 \
columns) saying what changed and why. No code fences, no quotes, no preamble."""
DIFF_CHARS = 12_000  # of the diff the model reads
REQUEST_CHARS = 2_000  # of the user's requests it reads
SUMMARY_CHARS = 100


class NothingToCommit(WorkstationError):
    """The session changed no file, or none that git sees as changed."""


class NoMessage(WorkstationError):
    """No message was given and the model could not write one."""


def edited_paths(records: list[Record], *, since: str | None = None) -> list[str]:
    """Workspace paths the session's tool calls changed (as their tools declare), first change first;
    with `since`, only the calls after the record with that id (a turn's user record)."""
    calls: dict[str, ToolCall] = {}
    started = since is None
    found: dict[str, None] = {}
    for record in records:
        if isinstance(record, Assistant):
            calls.update((call.id, call) for call in record.tool_calls or ())
        if not started:
            started = record.id == since
            continue
        if not isinstance(record, Tool):
            continue
        call = calls.get(record.tool_call_id)
        # the tools read a record through Fields' mapping access until their reads are typed (issue 32, 2)
        meaning = tools.meaning_of(record.name, tool_call_arguments(call) if call else {}, record)  # type: ignore[arg-type]
        for edit in meaning.edits:
            found.setdefault(edit.path, None)
    return list(found)


def _committable(ws: "Workspace", paths: list[str]) -> list[str]:
    """The paths inside the workspace, out of its state folder and out of .git/ (a log could say anything)."""
    out = []
    for path in paths:
        try:
            _, rel = confine(ws.root, path, (ws.paths.state,))
        except WorkstationError:
            continue
        if rel != "." and ".git" not in rel.split("/"):
            out.append(rel)
    return out


def _requests(records: list[Record], since: str | None) -> str:
    """The user's requests (newest last) that led to the changes, within REQUEST_CHARS."""
    texts = [r.content for r in records if isinstance(r, User) and (since is None or r.id == since)]
    out: list[str] = []
    used = 0
    for text in reversed(texts):
        line = " ".join(text.split())[:500]
        if used + len(line) > REQUEST_CHARS and out:
            break
        out.append(f"- {line}")
        used += len(line)
    return "\n".join(reversed(out))


def write_message(spec, diff: str, requests: str, cancel: threading.Event | None = None) -> str:
    """A commit message for `diff`, by the model of `spec`; LLMError when it fails, WorkstationError when
    it answers nothing usable."""
    prompt = (f"The user asked for:\n{requests or '(no request recorded)'}\n\n"
              f"The changes to commit:\n{diff}")
    answer = llm.complete(spec, [{"role": "system", "content": MESSAGE_PROMPT},
                                 {"role": "user", "content": scrub.mask(prompt)}], cancel=cancel)
    return clean_message(answer.text)


def clean_message(text: str) -> str:
    """The model's answer as a commit message: fences, quotes and blank edges gone, secrets masked."""
    text = re.sub(r"^\s*```[a-z]*\s*\n|\n\s*```\s*$", "", text.strip())
    lines = [line.rstrip() for line in text.strip().strip("\"'").strip().splitlines()]
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines:
        raise NoMessage("the model answered with an empty commit message; give one: /commit MESSAGE")
    summary = lines[0].strip()
    if len(summary) > SUMMARY_CHARS:
        summary = summary[: SUMMARY_CHARS - 1] + "…"
    return scrub.mask("\n".join([summary, *lines[1:]]).strip() + "\n")


def commit_session(ws: "Workspace", session: "Session", message: str | None = None, *, model: str | None = None,
                   since: str | None = None, cancel: threading.Event | None = None) -> git.Commit:
    """Commit the files `session` changed (after record `since`, when given) that git sees as changed,
    with `message` or one the model (`model`, default the configured one) writes. Raises
    WorkstationError with one line when the workspace is in no repository, when nothing changed, when
    there is no message and no model, or when the model or git fails."""
    repo = git.Repo.find(ws.root)
    if repo is None:
        raise WorkstationError(f"{ws.root} is not in a git repository: nothing to commit to")
    records = session.read().records
    paths = _committable(ws, edited_paths(records, since=since))
    if not paths:
        raise NothingToCommit(f"nothing to commit: session {session.slug} changed no files"
                               + (" in this turn" if since else ""))
    changes = repo.changes(paths)
    if not changes:
        raise NothingToCommit(f"nothing to commit: the {len(paths)} file(s) session {session.slug} changed are "
                               "as in the last commit (or ignored by git)")
    if message is None or not message.strip():
        spec = ws.model_spec(model) if (model or ws.config.model.name) else None
        if spec is None:
            raise NoMessage("no commit message: give one (/commit MESSAGE, session commit -m), or set a "
                                   "model to write it")
        try:
            message = write_message(spec, repo.diff(changes, DIFF_CHARS), _requests(records, since), cancel)
        except llm.LLMCancelled:
            raise
        except llm.LLMError as err:
            raise NoMessage(f"the model could not write a commit message ({err}); give one: "
                                   "/commit MESSAGE") from None
    return repo.commit([c.path for c in changes], message)


def describe(commit: git.Commit) -> str:
    n = len(commit.paths)
    return f"committed {n} file{'s' if n != 1 else ''} to {commit.branch} as {commit.sha}: {commit.summary}"


def auto_commit(ws: "Workspace", session: "Session", since: str, *, model: str | None = None,
                request: str = "", cancel: threading.Event | None = None) -> str | None:
    """`agent.auto_commit`: commit what the turn that started at record `since` changed. Returns the line
    to show the user, None when the turn changed nothing. When the model cannot write the message, the
    user's request names the commit (and the line says why)."""
    if not _committable(ws, edited_paths(session.read().records, since=since)):
        return None
    note = ""
    try:
        try:
            commit = commit_session(ws, session, model=model, since=since, cancel=cancel)
        except NoMessage as err:
            note = f" (the message is your request: {err})"
            fallback = " ".join(request.split())[:SUMMARY_CHARS] or f"workstation session {session.slug}"
            commit = commit_session(ws, session, fallback, since=since)
    except (llm.LLMCancelled, NothingToCommit):
        return None  # stopped with the turn; or the turn's changes were undone before it ended
    except WorkstationError as err:
        return f"auto-commit: {err}"
    return f"auto-{describe(commit)}{note}"
