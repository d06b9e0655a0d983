"""Commands: see the module docstring of each command."""

COMMANDS: list = []
