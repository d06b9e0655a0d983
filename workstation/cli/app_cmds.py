"""`workstation [PATH]`: the Textual app on a workspace (also reached without click: workstation.entry)."""

from __future__ import annotations

import click

from .common import pass_workspace


@click.command("ui")
@click.argument("path", required=False)
@click.option("--session", "slug", default=None, help="Resume this session.")
@click.option("--no-sidecar", is_flag=True, help="Do not start the compaction sidecar.")
@pass_workspace
def ui(ws, path: str | None, slug: str | None, no_sidecar: bool) -> int:
    """Open the workstation app on PATH (default: the -C workspace)."""
    from ..tui.run import run_app  # lazy: textual, keeps the command line free of it

    return run_app(path or ws.requested_root, model=ws.requested_model, session=slug, sidecar=not no_sidecar)


COMMANDS = [ui]
