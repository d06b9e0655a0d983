"""`workstation [PATH]`: the Textual app on a workspace."""

from __future__ import annotations

import click

from .common import pass_state


@click.command("ui")
@click.argument("path", required=False)
@click.option("--session", "slug", default=None, help="Resume this session.")
@click.option("--no-sidecar", is_flag=True, help="Do not start the compaction sidecar.")
@pass_state
def ui(state, path: str | None, slug: str | None, no_sidecar: bool) -> None:
    """Open the workstation app on PATH (default: the -C workspace)."""
    from .. import config as config_mod
    from ..tui.app import WorkstationApp
    from ..tui.backend import LiveBackend

    root = path or state.workspace
    cfg, _ = config_mod.load(root)  # fail before the screen opens on a bad config
    backend = LiveBackend(root, model=state.model, session=slug, sidecar=not no_sidecar)
    WorkstationApp(backend, theme=cfg.ui.theme).run()


COMMANDS = [ui]
