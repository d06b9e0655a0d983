"""litellm itself: imported lazily (it takes ~3 s), configured once (no banners, no downloads, no stray
handlers, secrets redacted from its and the OpenAI SDK's log records), and warmed from a background thread."""

from __future__ import annotations

import importlib
import logging
import os
import threading
from typing import Any

from .. import scrub

_REDACTING_FILTER = scrub.RedactingFilter()
# Exact logger names (a logger's filters do not apply to records of its children).
_FILTERED_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "openai", "openai._base_client",
                     "httpx", "httpcore.http11", "httpcore.connection", "workstation.llm")


_litellm_mod: Any = None
_import_lock = threading.Lock()


def load_litellm() -> Any:
    global _litellm_mod
    if _litellm_mod is None:
        with _import_lock:
            if _litellm_mod is None:
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                import litellm  # lazy: litellm, ~3 s  # noqa: PLC0415

                _configure_litellm(litellm)
                _litellm_mod = litellm
    return _litellm_mod


def _configure_litellm(litellm: Any) -> None:
    litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banners printed to stdout
    litellm.disable_hf_tokenizer_download = True  # token_counter must never download tokenizers
    if hasattr(litellm, "telemetry"):
        litellm.telemetry = False
    # litellm attaches its own StreamHandler (stdout/stderr) to its loggers; in a TUI that garbles
    # the screen.  Drop it: records propagate to the application's logging setup instead.  Keep
    # litellm's DEBUG flood out unless LITELLM_LOG asks for it.
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
        lg = logging.getLogger(name)
        for h in list(lg.handlers):
            if type(h).__name__ == "LevelRoutingStreamHandler" or isinstance(h, logging.StreamHandler):
                lg.removeHandler(h)
        lg.propagate = True
        if not os.environ.get("LITELLM_LOG"):
            lg.setLevel(logging.WARNING)
    for name in _FILTERED_LOGGERS:
        lg = logging.getLogger(name)
        if _REDACTING_FILTER not in lg.filters:
            lg.addFilter(_REDACTING_FILTER)


_warmed = False

# Modules litellm / the OpenAI SDK import lazily on the first completion (~1 s) and on the first
# completion *with tools* (litellm's MCP hook imports the whole `mcp` package, ~1.3 s).
_PREWARM_MODULES = (
    "openai.resources",
    "litellm.responses.mcp.chat_completions_handler",
    "litellm.llms.openai.openai",
    "litellm.litellm_core_utils.streaming_handler",
    "litellm.proxy.openai_files_endpoints.common_utils",
)


def warm_import() -> None:
    """Import and configure litellm, pre-import what the first completion would import lazily and
    load the default tokenizer (~4-5 s in total; call from a background thread at app start)."""
    global _warmed
    lit = load_litellm()
    if _warmed:
        return
    _warmed = True
    for name in _PREWARM_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # only an optimisation; module layout differs across litellm versions
            pass
    try:
        lit.token_counter(model="gpt-4o", text="warm up")
    except Exception:
        pass
