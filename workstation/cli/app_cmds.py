"""`workstation [PATH]`: the Textual app on a workspace."""

from __future__ import annotations

import tomllib

import click

from .common import pass_state


def _configured_theme(root: str) -> str | None:
    """The `ui.theme` the first frame needs, read without validating the whole config.

    Validation (pydantic) costs ~150 ms that first paint should not wait for; the
    backend validates everything right after and closes the app on a bad config.
    """
    from ..paths import Paths

    paths = Paths.for_root(root)
    theme = None
    for path in (paths.user_config_file, paths.config_file):
        try:
            with open(path, "rb") as fh:
                theme = tomllib.load(fh).get("ui", {}).get("theme", theme)
        except (OSError, tomllib.TOMLDecodeError, AttributeError):
            continue
    return theme if isinstance(theme, str) else None


@click.command("ui")
@click.argument("path", required=False)
@click.option("--session", "slug", default=None, help="Resume this session.")
@click.option("--no-sidecar", is_flag=True, help="Do not start the compaction sidecar.")
@pass_state
def ui(state, path: str | None, slug: str | None, no_sidecar: bool) -> None:
    """Open the workstation app on PATH (default: the -C workspace)."""
    from ..tui.app import WorkstationApp
    from ..tui.backend import LiveBackend

    root = path or state.workspace
    backend = LiveBackend(root, model=state.model, session=slug, sidecar=not no_sidecar)
    WorkstationApp(backend, theme=_configured_theme(root)).run()
    if backend.fatal is not None:
        raise backend.fatal  # a bad config or unreadable store: printed as one line by run_main


COMMANDS = [ui]
