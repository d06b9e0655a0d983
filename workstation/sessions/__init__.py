"""Sessions on disk: an append-only JSONL log per session, compaction, rolling redaction, archive.

Light to import (no litellm, no watchdog); the submodules that need them import them inside functions.

    log         Session (create/open/append/read), LogView, the record format
    context     SessionContext.build: the model's view (summary + recent turns, redaction markers)
    compaction  needs_compaction / compact: the two knobs and the token guard
    sidecar     the watching worker, start_sidecar / stop_sidecar
    archive     archive / restore / recover (finishing moves a crash cut short)
    catalog     list_sessions, load, search, export
"""

from .compaction import CompactResult, compact, needs_compaction
from .context import ContextView, SessionContext, fetch_original
from .log import FORMAT_VERSION, LogProblem, LogView, Session, SessionArchived, SessionError

__all__ = [
    "FORMAT_VERSION", "CompactResult", "ContextView", "LogProblem", "LogView", "Session", "SessionArchived",
    "SessionContext", "SessionError", "compact", "fetch_original", "needs_compaction",
]
