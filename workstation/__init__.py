"""workstation: a terminal agent workstation with a live knowledge map and tiered memory."""

__version__ = "0.1.0"
