"""DuckDB storage shared by every process of a workspace (see broker.py)."""

from .broker import Database, open_database

__all__ = ["Database", "open_database"]
