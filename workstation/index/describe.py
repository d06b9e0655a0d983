"""Model-written purposes for files whose source says nothing about them.

Runs in the background (the TUI calls `KnowledgeMap.describe_missing`
from a worker thread), never on the indexing path. A purpose is stored with
the content hash it describes, so an edit in the meantime discards it.
"""

from __future__ import annotations

import threading

from ..store.broker import readonly

HEAD_LINES = 120
HEAD_CHARS = 6000


def describe_missing(km, limit: int = 20, cancel: threading.Event | None = None) -> int:
    """Describe up to `limit` files lacking a purpose; returns how many got one."""
    from .query import model_spec

    spec = model_spec(km.config)
    if spec is None or not km.config.index.describe_with_model or limit <= 0:
        return 0
    from ..llm import complete

    km.ensure_fresh()
    done = 0
    for path, sha, language in km.db.call(_missing, limit):
        if cancel is not None and cancel.is_set():
            break
        try:
            with open(km.root / path, encoding="utf-8", errors="replace") as fh:
                head = "".join(line for _, line in zip(range(HEAD_LINES), fh))[:HEAD_CHARS]
        except OSError:
            continue  # gone since the gate ran; the next refresh drops it
        messages = [
            {"role": "system", "content": (
                "Describe what a source file is for in one line of at most 15 words, "
                "without repeating its name. Reply with that line only.")},
            {"role": "user", "content": f"File {path} ({language or 'text'}), first lines:\n\n{head}"},
        ]
        text = complete(spec, messages, stream=False, cancel=cancel).text
        line = " ".join(text.strip().splitlines()[0].split()) if text.strip() else ""
        if line:
            km.db.call(set_model_purpose, path, sha, line[:200])
            done += 1
    return done


@readonly
def _missing(con, limit: int) -> list[tuple]:
    return con.execute(
        """SELECT path, sha256, language FROM kmap.files
           WHERE purpose = '' AND kind IN ('code', 'test', 'config') AND line_count > 0
           ORDER BY path LIMIT ?""", [limit]).fetchall()


def set_model_purpose(con, path: str, sha: str, purpose: str) -> None:
    con.execute("""UPDATE kmap.files SET purpose = ?, purpose_source = 'model'
                   WHERE path = ? AND sha256 = ?""", [purpose, path, sha])


def adopt_purposes(con, rows: list[tuple[str, str, str]]) -> None:
    """(path, sha256, purpose) written for the same content elsewhere (another map of these files)."""
    for path, sha, purpose in rows:
        set_model_purpose(con, path, sha, purpose)
