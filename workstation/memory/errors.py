"""Memory errors: each names the tier and the key or value that was wrong."""

from __future__ import annotations

from ..errors import WorkstationError


class MemoryTierError(WorkstationError):
    """Unknown tier, or an operation the tier does not allow (e.g. set on episodic)."""


class MemoryKeyError(WorkstationError):
    """The key is not in the tier."""


class MemoryValueError(WorkstationError):
    """The value cannot be stored (LTM and episodic data must be JSON)."""


class ReflectError(WorkstationError):
    """A reflection query was unknown, not read-only, or failed."""
