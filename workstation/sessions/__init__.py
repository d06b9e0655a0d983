"""Sessions on disk: an append-only JSONL log per session, compaction, rolling redaction, archive.

Light to import (no litellm, no watchdog); the submodules that need them import them inside functions.

    log         Session (create/open/append/read), LogView, the record format
    context     SessionContext.build: the model's view (summary + recent turns, redaction markers)
    compaction  the two knobs and the token guard: compact_now (asked for), AutoCompactor (when due)
    sidecar     the watching worker, start_sidecar / stop_sidecar
    archive     archive / restore / recover (finishing moves a crash cut short)
    catalog     list_sessions, load, search, export
"""

from .compaction import AutoCompactor, CompactResult, compact, compact_now, needs_compaction
from .context import ContextView, SessionContext, fetch_original
from .log import FORMAT_VERSION, LogProblem, LogView, Session, SessionArchived, SessionError

__all__ = [
    "AutoCompactor", "FORMAT_VERSION", "CompactResult", "ContextView", "LogProblem", "LogView", "Session", "SessionArchived",
    "SessionContext", "SessionError", "compact", "compact_now", "fetch_original", "needs_compaction",
]
