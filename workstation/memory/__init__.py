"""Tiered memory: STM (this execution's scratch), LTM (persistent, shared) and
Episodic (the append-only log), behind one API: `Memory.qmem / umem / fence`.

Nothing here imports DuckDB: the stores live in the workspace's owner process
(see workstation/store/broker.py) and are reached through `Database.call`.
"""

from .errors import MemoryKeyError, MemoryTierError, MemoryValueError, ReflectError
from .router import TIERS, Memory, published_stm

__all__ = ["Memory", "TIERS", "published_stm", "MemoryKeyError", "MemoryTierError", "MemoryValueError",
           "ReflectError"]
