"""Model-written purposes for files whose source says nothing about them.

Opt-in (`index.describe_with_model`, off by default) and never on the indexing
path: a caller (the app, in the background) runs `describe_files`, which reports
its progress and cost as it goes. Purposes are cached by content hash in
`kmap.purpose_cache`: a file whose content did not change is never described
twice (re-indexing, `index --force` included, takes the purpose from the cache),
and one whose content changed has no purpose until it is described again. A
reply is stored only if it reads as a description: an error, an empty reply or
garbage is counted as a failure and stored nowhere.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Callable

from ..store.broker import readonly
from .query import model_spec

if TYPE_CHECKING:
    from .map import KnowledgeMap

HEAD_LINES = 120
HEAD_CHARS = 6000
MAX_PURPOSE = 200
MAX_FAILURES_IN_A_ROW = 3  # then the model is taken to be down: no more requests this run

_SYSTEM = ("Describe what a source file is for in one line of at most 15 words, without repeating its "
           "name. Reply with that line only.")
# Replies that are not descriptions: errors passed through as text, apologies and refusals, placeholders,
# markup. Narrow on purpose: "Retries requests that timed out" or "Error handling for the CLI" are fine.
_NOT_A_PURPOSE_RE = re.compile(
    r"^[\w.]*(?:error|exception)\s*:|^traceback\b|^(?:sorry|i'm sorry|i am sorry|i cannot|i can't|i can not|"
    r"unable to|as an ai)\b|^(?:none|n/?a|null|undefined|unknown|no description|todo)\W*$"
    r"|```|<html|<!doctype|\{\s*\"error|rate limit exceeded|quota exceeded|internal server error"
    r"|\b(?:status|error) code:? ?[45]\d\d\b",
    re.IGNORECASE)
_LEADING_LABEL_RE = re.compile(r"^(?:purpose|description|summary|this file)\s*[:\-–]\s*", re.IGNORECASE)


def clean_purpose(reply: str) -> str | None:
    """The one-line purpose in a model's reply, or None when the reply is not one (empty, an error or
    refusal, markup, no words)."""
    lines = [line.strip() for line in (reply or "").splitlines() if line.strip()]
    if not lines:
        return None
    line = lines[0].lstrip("-*#> ").strip()
    line = _LEADING_LABEL_RE.sub("", line)
    line = line.strip("\"'`“”‘’ ").strip()
    line = " ".join(line.split())
    if _NOT_A_PURPOSE_RE.search(line) or "```" in reply:
        return None
    words = re.findall(r"[^\W\d_]{2,}", line)
    if len(words) < 2 or len(line) < 8 or len(line.split()) > 40:
        return None
    if len(line) > MAX_PURPOSE:
        line = line[:MAX_PURPOSE - 3].rsplit(" ", 1)[0] + "..."
    return line


@dataclass
class DescribeReport:
    """What a describe run did, so far (the progress callback receives it after every file)."""

    total: int = 0  # files this run set out to describe
    done: int = 0  # of those, handled (described, failed or gone)
    described: int = 0  # purposes written from the model's replies
    failed: int = 0  # requests that failed, or replies that were no description (nothing stored)
    requests: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0  # over the requests whose price litellm knows
    unpriced: int = 0  # requests litellm has no price for (not in cost_usd)
    stopped: str | None = None  # why the run ended early or did not start, if it did
    error: str | None = None  # the last request error, if any

    def to_dict(self) -> dict:
        return asdict(self)


ProgressFn = Callable[[DescribeReport], None]


def describe_files(km: KnowledgeMap, limit: int = 20, cancel: threading.Event | None = None,
                   progress: ProgressFn | None = None) -> DescribeReport:
    """Ask the configured model for the purposes of up to `limit` files that have none (one request per
    distinct content). Never raises for a model failure: the report says what happened."""
    report = DescribeReport()
    spec = model_spec(km.config)
    if not km.config.index.describe_with_model:
        report.stopped = "off: set index.describe_with_model = true to have the model describe files"
        return report
    if spec is None:
        report.stopped = "no model configured"
        return report
    if limit <= 0:
        return report
    from ..llm import LLMCancelled, LLMError, complete  # lazy: workstation.llm, +21 ms on `index --force`, which prunes

    km.ensure_fresh()  # re-indexing also applies purposes already in the cache
    todo: dict[str, list[tuple[str, str | None]]] = {}
    for path, sha, language in km.db.call(_missing, limit):
        todo.setdefault(sha, []).append((path, language))
    report.total = sum(len(files) for files in todo.values())
    in_a_row = 0
    for sha, files in todo.items():
        if cancel is not None and cancel.is_set():
            report.stopped = "cancelled"
            break
        path, language = files[0]
        try:
            with open(km.root / path, encoding="utf-8", errors="replace") as fh:
                head = "".join(line for _, line in zip(range(HEAD_LINES), fh))[:HEAD_CHARS]
        except OSError:
            report.done += len(files)  # gone since the gate ran; the next refresh drops it
            continue
        messages = [{"role": "system", "content": _SYSTEM},
                    {"role": "user", "content": f"File {path} ({language or 'text'}), first lines:\n\n{head}"}]
        report.requests += 1
        try:
            reply = complete(spec, messages, stream=False, cancel=cancel)
        except LLMCancelled:
            report.requests -= 1
            report.stopped = "cancelled"
            break
        except LLMError as err:
            report.failed += len(files)
            report.done += len(files)
            report.error = str(err)
            in_a_row += 1
            if in_a_row >= MAX_FAILURES_IN_A_ROW:
                report.stopped = f"the model failed {in_a_row} times in a row: {err}"
                _tell(progress, report)
                break
            _tell(progress, report)
            continue
        report.tokens_in += reply.tokens_in
        report.tokens_out += reply.tokens_out
        if reply.cost_usd is None:
            report.unpriced += 1
        else:
            report.cost_usd += reply.cost_usd
        purpose = clean_purpose(reply.text)
        report.done += len(files)
        if purpose is None:
            report.failed += len(files)
            report.error = f"not a description: {reply.text.strip()[:80]!r}"
            in_a_row += 1
            if in_a_row >= MAX_FAILURES_IN_A_ROW:
                report.stopped = f"the model's replies were no descriptions {in_a_row} times in a row"
                _tell(progress, report)
                break
        else:
            in_a_row = 0
            km.db.call(set_model_purpose, path, sha, purpose, reply.model)
            report.described += len(files)
        _tell(progress, report)
    return report


def _tell(progress: ProgressFn | None, report: DescribeReport) -> None:
    if progress is not None:
        progress(DescribeReport(**asdict(report)))  # a snapshot: the run goes on changing its own


def describe_missing(km: KnowledgeMap, limit: int = 20, cancel: threading.Event | None = None) -> int:
    """`describe_files`, answered with how many files got a purpose (the app's older call). Raises the
    model's error when the run stopped because the model kept failing."""
    report = describe_files(km, limit, cancel)
    if report.stopped and report.stopped.startswith("the model failed"):
        from ..llm import LLMError  # lazy: workstation.llm, +21 ms (see describe_files)

        raise LLMError(report.error or report.stopped)
    return report.described


@readonly
def _missing(con, limit: int) -> list[tuple]:
    return con.execute(
        """SELECT path, sha256, language FROM kmap.files
           WHERE purpose = '' AND kind IN ('code', 'test', 'config') AND line_count > 0
             AND sha256 NOT IN (SELECT sha256 FROM kmap.purpose_cache)
           ORDER BY path LIMIT ?""", [limit]).fetchall()


def set_model_purpose(con, path: str, sha: str, purpose: str, model: str = "") -> None:
    """Record a model-written purpose for content `sha` (the file at `path` when it was described) and give
    it to every file with that content and no purpose of its own."""
    con.execute(
        """INSERT INTO kmap.purpose_cache (sha256, purpose, model, described_at_ns) VALUES (?, ?, ?, ?)
           ON CONFLICT (sha256) DO UPDATE SET purpose = excluded.purpose, model = excluded.model,
                                              described_at_ns = excluded.described_at_ns""",
        [sha, purpose, model, time.time_ns()])
    con.execute("""UPDATE kmap.files SET purpose = ?, purpose_source = 'model'
                   WHERE sha256 = ? AND (purpose = '' OR purpose_source = 'model')""", [purpose, sha])


def adopt_purposes(con, rows: list[tuple[str, str, str]]) -> None:
    """(path, sha256, purpose) written for the same content elsewhere (another map of these files)."""
    for path, sha, purpose in rows:
        set_model_purpose(con, path, sha, purpose)
