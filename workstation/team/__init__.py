"""A team's memory on PostgreSQL: append-only sync of the local store, local first.

Nothing in the agent's path waits on the network: the local DuckDB store and its broker stay as they are,
and `workstation team push` (or the sidecar, every few seconds) sends the rows past a local watermark,
while `team pull` copies the teammates' rows into a local replica (schema `team` of memory.duckdb) on
which the same reflection views run, offline too.

- server.py: the server's schema (one definition: the admin SQL the README shows), connecting (TLS
  checked for any host but loopback; the password only from the environment or libpq's own files).
- replica.py: the owner-side half (run through the broker): what is pending, the replica, the views.
- sync.py: push, pull and status, each failure one line.
- accept.py: teammates' memory enters the model's context only once the user accepts it.
- sessions.py: session logs shared as lines (off by default), listed and searched on the pulled copies.

psycopg is imported only where sync runs (130-300 ms).
"""

from ..errors import WorkstationError


class TeamError(WorkstationError):
    """A team-sync problem, said in one line (server away, schema newer, bad credentials)."""
