"""Sessions on disk: an append-only JSONL log per session, compaction, rolling redaction, archive.

Light to import (no litellm, no watchdog); the submodules that need them import them inside functions.

    log         Session (create/open/append/read), LogView, the record format
    modelview   SessionContext.build: the model's view (summary + recent turns, redaction markers)
    compaction  the two knobs and the token guard: compact_now (asked for), AutoCompactor (when due)
    archive     archive / restore / recover (finishing moves a crash cut short)
    catalog     list_sessions, load, search, export
"""

from importlib import import_module
from typing import Any

# Names re-exported from the submodules, loaded when first asked for: importing one submodule
# (the log, the catalog) must not load compaction and with it the model layer (~20 ms a command).
_EXPORTS = {
    "AutoCompactor": "compaction", "CompactResult": "compaction", "compact": "compaction",
    "compact_now": "compaction", "needs_compaction": "compaction",
    "ContextView": "modelview", "SessionContext": "modelview", "fetch_original": "modelview",
    "FORMAT_VERSION": "log", "LogProblem": "log", "LogView": "log", "Session": "log",
    "SessionArchived": "log", "SessionError": "log",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)
