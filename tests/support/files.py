"""What a test reads off the disk to judge by effect."""

from __future__ import annotations

import os
from pathlib import Path


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (not following links to folders) with its content, by its path under it."""
    out = {}
    for dirpath, _, files in os.walk(folder):
        for name in files:
            path = Path(dirpath, name)
            out[str(path.relative_to(folder))] = path.read_bytes()
    return out
