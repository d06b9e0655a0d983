"""User-facing errors: each carries one line that names the problem."""


class WorkstationError(Exception):
    """An error the user can act on; str(err) is a single line."""

    def __str__(self) -> str:  # keep multi-line causes out of the one-liner
        return " ".join(super().__str__().split())


class ConfigError(WorkstationError):
    """Invalid configuration; `lines` holds one message per bad key."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        super().__init__("; ".join(lines))


class StoreError(WorkstationError):
    """A database could not be opened or queried."""
