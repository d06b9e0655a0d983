"""Open the app on a workspace: shared by `workstation [PATH]` and its fast path (workstation.entry)."""

from __future__ import annotations

import sys
import tomllib

from ..errors import WorkstationError
from ..paths import Paths
from .app import WorkstationApp
from .backend import LiveBackend


def configured_theme(root: str) -> str | None:
    """The `ui.theme` the first frame needs, read without validating the whole config.

    Loading and validating the config costs ~60 ms that first paint should not wait for; the
    backend validates everything right after and closes the app on a bad config.
    """
    paths = Paths.for_root(root)
    theme = None
    for path in (paths.user_config_file, paths.config_file):
        try:
            with open(path, "rb") as fh:
                theme = tomllib.load(fh).get("ui", {}).get("theme", theme)
        except (OSError, tomllib.TOMLDecodeError, AttributeError):
            continue
    return theme if isinstance(theme, str) else None


def run_app(root: str, *, model: str | None = None, session: str | None = None, sidecar: bool = True) -> int:
    """Run the app until it quits and return its exit code (143 after a SIGTERM);
    raises what stopped the workspace from opening (e.g. a bad config), or a non-terminal output: the
    app drawn into a pipe or a file spins (~55% CPU seen) and no one can see or quit it."""
    if not sys.stdout.isatty():
        raise WorkstationError("the app needs a terminal, and its output is not one (the commands, "
                               "`workstation --help`, work piped)")
    backend = LiveBackend(root, model=model, session=session, sidecar=sidecar)
    app = WorkstationApp(backend, theme=configured_theme(root), quit_on_sigterm=True)
    app.run()
    if backend.fatal is not None:
        raise backend.fatal
    return app.return_code or 0
