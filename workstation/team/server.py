"""The team server: PostgreSQL, append-only, shared by a team's engineers.

One definition of the server's schema: ADMIN_SQL, which a team admin runs once (`workstation team
admin-sql` prints it; the README shows it) and the tests run on their server. Engineers' roles hold
only INSERT (and USAGE of the row sequences): nobody's client can change or delete what another wrote.
Every row carries the project, its origin (machine and workspace) and its author. The server, not the
client, answers for three things, in one statement-level trigger (check_rows) on every synced table:
- the author is the person's login (session_user: a SET ROLE changes nothing), never a column a client writes;
- a project is written by its members only (workstation.members, which the admin fills) and read by them
  only: engineers read through the visible_* views, never the tables;
- an origin belongs to the login that first wrote it (workstation.origins): nobody writes under another
  engineer's origin, so a teammate's accepted key cannot be overwritten from a third desk.
A row's key is the origin and the row's local key, so a push sent twice lands once (ON CONFLICT DO
NOTHING). `seq` orders each origin's rows: a push holds its origin's advisory lock until it commits, so
an origin's rows become visible in seq order and a puller's per-origin watermark never skips one.

Connecting: the URL carries no password (config refuses one); it comes from the variable named by
`team.password_env`, or libpq's PGPASSWORD or ~/.pgpass. Any host but loopback is reached over TLS with
the certificate and host name checked (sslmode=verify-full), whatever the URL says.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

from ..config import TeamConfig, is_loopback, team_url_parts
from . import TeamError

SCHEMA_VERSION = 2  # the server schema this client writes and reads; a newer one asks for an upgrade
CONNECT_TIMEOUT_S = 5
# The longest each team command waits on the server, connecting included: past it the connection is cut and
# the command says so in one line. A push or pull keeps what it finished (each batch commits on its own), so the
# next one goes on from there.
TIME_LIMIT_S = {"status": 10.0, "push": 45.0, "pull": 45.0}

# Key columns compare bytewise (COLLATE "C") whatever the server's locale: cheaper to index, one order.
# Columns of the synced tables after (seq, project, origin, author), as the server types them. Pushed and
# pulled as CSV in this order (replica.py writes and reads the same order).
COLUMNS: dict[str, list[tuple[str, str]]] = {
    "events": [("id", 'text COLLATE "C" NOT NULL'), ("ts", "timestamp NOT NULL"), ("session", "text NOT NULL"),
               ("flow", "text NOT NULL"), ("step", "integer"), ("parent", "text"), ("type", "text NOT NULL"),
               ("name", "text NOT NULL"), ("duration_ms", "double precision"), ("tokens_in", "integer"),
               ("tokens_out", "integer"), ("cost_usd", "double precision"), ("ok", "boolean"), ("data", "text")],
    "decisions": [("id", 'text COLLATE "C" NOT NULL'), ("ts", "timestamp NOT NULL"), ("session", "text NOT NULL"),
                  ("flow", "text NOT NULL"), ("step", "integer"), ("decision", "text NOT NULL"),
                  ("reasoning", "text NOT NULL"), ("related_files", "text NOT NULL")],  # a JSON list
    "ltm": [("namespace", 'text COLLATE "C" NOT NULL'), ("key", 'text COLLATE "C" NOT NULL'), ("value", "text"),
            ("deleted", "boolean NOT NULL"), ("stamp", "bigint NOT NULL"), ("updated_at", "timestamp NOT NULL"),
            ("updated_by", "text NOT NULL")],
    "session_lines": [("slug", 'text COLLATE "C" NOT NULL'), ("line", "bigint NOT NULL"), ("text", "text NOT NULL")],
}
KEYS = {"events": ("id",), "decisions": ("id",), "ltm": ("namespace", "key", "stamp"),
        "session_lines": ("slug", "line")}
KINDS = tuple(COLUMNS)
SHARE_OF = {"events": "events", "decisions": "decisions", "ltm": "ltm", "session_lines": "sessions"}


def bare(sqltype: str) -> str:
    """A column's type without its constraints and collation ('text COLLATE "C" NOT NULL' -> 'text')."""
    return sqltype.replace(' COLLATE "C"', "").replace(" NOT NULL", "")


def _table_sql(kind: str) -> str:
    cols = ",\n    ".join(f"{name} {kind_}" for name, kind_ in COLUMNS[kind])
    key = ", ".join(KEYS[kind])
    return (f"CREATE TABLE workstation.{kind} (\n    seq bigint GENERATED ALWAYS AS IDENTITY,\n"
            f"    project text COLLATE \"C\" NOT NULL,\n    origin text COLLATE \"C\" NOT NULL,\n"
            f"    author text NOT NULL DEFAULT session_user,\n    {cols},\n"
            f"    PRIMARY KEY (project, origin, {key})\n);\n"
            f"CREATE INDEX {kind}_pull ON workstation.{kind} (project, origin, seq);\n" + _guard_sql(kind))


def _guard_sql(kind: str) -> str:
    """What schema 2 puts around a synced table: the rows' check, the members' view."""
    return (f"CREATE TRIGGER {kind}_rows AFTER INSERT ON workstation.{kind} REFERENCING NEW TABLE AS new_rows\n"
            f"    FOR EACH STATEMENT EXECUTE FUNCTION workstation.check_rows();\n"
            f"CREATE VIEW workstation.visible_{kind} WITH (security_barrier) AS SELECT * FROM workstation.{kind}\n"
            f"    WHERE project IN (SELECT project FROM workstation.members WHERE login = session_user);")


def insert_columns(kind: str) -> list[str]:
    """The columns a push writes (seq is the server's, author the inserting login: session_user)."""
    return ["project", "origin", *(name for name, _ in COLUMNS[kind])]


# Every statement's new rows, checked once (a COPY of 50,000 rows costs one pass over them): the author is the
# session's login (SET ROLE changes current_user, never session_user), the project is one the login is a member
# of, and each origin is the login's own: the first login to write an origin owns it for good. SECURITY
# DEFINER: engineers can neither read the members and origins tables nor write them.
_CHECK_ROWS = """CREATE FUNCTION workstation.check_rows() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    bad record;
BEGIN
    SELECT n.author INTO bad FROM new_rows n WHERE n.author IS DISTINCT FROM session_user LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'a row''s author is its writer''s login %, not %', session_user, bad.author
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT n.project INTO bad FROM (SELECT DISTINCT project FROM new_rows) n WHERE NOT EXISTS (
        SELECT 1 FROM workstation.members m WHERE m.project = n.project AND m.login = session_user) LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION '% is not a member of project %', session_user, bad.project
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    INSERT INTO workstation.origins (project, origin, login)
        SELECT DISTINCT project, origin, session_user FROM new_rows ON CONFLICT DO NOTHING;
    SELECT o.origin, o.login INTO bad FROM (SELECT DISTINCT project, origin FROM new_rows) n
        JOIN workstation.origins o ON o.project = n.project AND o.origin = n.origin
        WHERE o.login <> session_user LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'origin % belongs to %, who wrote it first: % may not write under it',
            bad.origin, bad.login, session_user USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END $$;"""

_MEMBERS_AND_ORIGINS = [
    "-- Who may read and write a project; an admin adds each engineer to each project:",
    "-- INSERT INTO workstation.members VALUES ('shop', 'alice');",
    'CREATE TABLE workstation.members (project text COLLATE "C" NOT NULL, login name NOT NULL, '
    "PRIMARY KEY (project, login));",
    "-- Which login owns each origin (machine and workspace): the first to write it.",
    'CREATE TABLE workstation.origins (project text COLLATE "C" NOT NULL, origin text COLLATE "C" NOT NULL, '
    "login name NOT NULL, claimed_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (project, origin));",
    _CHECK_ROWS,
]
_GRANTS = [
    "CREATE VIEW workstation.my_projects AS SELECT project FROM workstation.members WHERE login = session_user;",
    "GRANT USAGE ON SCHEMA workstation TO workstation_engineer;",
    "GRANT SELECT ON workstation.meta, workstation.my_projects TO workstation_engineer;",
    f"GRANT SELECT ON {', '.join(f'workstation.visible_{kind}' for kind in KINDS)} TO workstation_engineer;",
    "-- author is not among the columns they may write: it is always the login that inserted the row.",
    *[f"GRANT INSERT ({', '.join(insert_columns(kind))}) ON workstation.{kind} TO workstation_engineer;"
      for kind in KINDS],
    "GRANT USAGE ON ALL SEQUENCES IN SCHEMA workstation TO workstation_engineer;",
]

ADMIN_SQL = "\n".join([
    "-- Run once, as the database's owner, in the database the team's [team] url names.",
    "CREATE SCHEMA workstation;",
    "CREATE TABLE workstation.meta (key text PRIMARY KEY, value text NOT NULL);",
    f"INSERT INTO workstation.meta VALUES ('schema_version', '{SCHEMA_VERSION}');",
    *_MEMBERS_AND_ORIGINS,
    *[_table_sql(kind) for kind in KINDS],
    "-- Engineers may add rows and read their projects' rows, nothing else: the server side is append-only.",
    "CREATE ROLE workstation_engineer NOLOGIN;",
    *_GRANTS,
    "-- One login per engineer; its name is the author their rows carry:",
    "-- CREATE ROLE alice LOGIN PASSWORD '...' IN ROLE workstation_engineer;",
])

# Rows of every kind, oldest first within a kind (seq is per table): who wrote what, where.
_ALL_ROWS = " UNION ALL ".join(f"SELECT {rank} AS rank, seq, project, origin, author FROM workstation.{kind}"
                               for rank, kind in enumerate(KINDS))
UPGRADE_SQL = "\n".join([
    "-- From schema 1 to 2: run once, as the database's owner, in one transaction (psql -1).",
    *_MEMBERS_AND_ORIGINS,
    "-- Every login that wrote to a project is a member of it: remove who should not be.",
    f"INSERT INTO workstation.members SELECT DISTINCT project, author::name FROM ({_ALL_ROWS}) r",
    "    WHERE author IN (SELECT rolname FROM pg_roles WHERE rolcanlogin);",
    "-- Each origin is its first login's: rows of other logins under it were forged, or written by SET ROLE.",
    f"INSERT INTO workstation.origins (project, origin, login) SELECT DISTINCT ON (project, origin) project, "
    f"origin, author::name FROM ({_ALL_ROWS}) r",
    "    WHERE author IN (SELECT rolname FROM pg_roles WHERE rolcanlogin) ORDER BY project, origin, rank, seq;",
    *[f"ALTER TABLE workstation.{kind} ALTER COLUMN author SET DEFAULT session_user;\n{_guard_sql(kind)}"
      for kind in KINDS],
    "REVOKE SELECT ON ALL TABLES IN SCHEMA workstation FROM workstation_engineer;",
    *_GRANTS,
    f"UPDATE workstation.meta SET value = '{SCHEMA_VERSION}' WHERE key = 'schema_version';",
])


def connect_args(team: TeamConfig, environ: os._Environ | dict | None = None) -> dict[str, Any]:
    """psycopg.connect's arguments for `team`: TLS forced for any host but loopback, the password
    from the environment only. One line (TeamError) when the named variable is unset."""
    environ = os.environ if environ is None else environ
    parts, query = team_url_parts(team.url)
    host = query.get("host", parts.hostname or "")
    args: dict[str, Any] = {"conninfo": team.url, "connect_timeout": CONNECT_TIMEOUT_S,
                            "application_name": "workstation-team", "autocommit": False}
    if not is_loopback(host):
        args["sslmode"] = "verify-full"
    if team.password_env:
        password = environ.get(team.password_env)
        if password is None:
            raise TeamError(f"team.password_env names {team.password_env}, which is not set")
        args["password"] = password
    return args


def where(team: TeamConfig) -> str:
    """The server as people name it: host:port/db (never a password, which the URL cannot hold)."""
    parts, query = team_url_parts(team.url)
    return f"{query.get('host', parts.hostname or 'localhost')}:{parts.port or 5432}{parts.path or '/'}"


class Deadline:
    """A time limit for one team command over one connection. Neither libpq nor the server bounds how long a
    server may take to answer once connected (a swamped server, a network that stalls without closing): past
    the limit a timer shuts the connection's socket down, so whatever call waits on it fails at once."""

    def __init__(self, what: str, seconds: float) -> None:
        self.what, self.seconds = what, seconds
        self.ends = time.monotonic() + seconds
        self.expired = False
        self._timer: threading.Timer | None = None

    def remaining(self) -> float:
        return max(0.0, self.ends - time.monotonic())

    def watch(self, con) -> None:
        self._timer = threading.Timer(self.remaining(), self._cut, [con.fileno()])
        self._timer.daemon = True
        self._timer.start()

    def _cut(self, fd: int) -> None:
        self.expired = True
        try:
            with socket.socket(fileno=os.dup(fd)) as sock:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:  # closed meanwhile: nothing waits on it
            pass

    def close(self) -> None:
        """Stop watching; before the connection closes (its descriptor may be reused after)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer.join()

    def line(self, team: TeamConfig) -> str:
        return (f"team server {where(team)} did not answer within {self.seconds:.0f} s: {self.what} gave up "
                "(a server swamped, or a network that stalls)")


def connect(team: TeamConfig, deadline: Deadline | None = None):
    """An open psycopg connection, or TeamError with one line (down, refused, bad password, no TLS, slower
    than `deadline`, which from here on watches the connection)."""
    import psycopg  # lazy: psycopg, 130-300 ms; only where sync runs

    args = connect_args(team)
    if deadline is not None:  # libpq's connect_timeout is whole seconds, at least 2
        args["connect_timeout"] = max(2, min(CONNECT_TIMEOUT_S, int(deadline.remaining()) or 2))
    try:
        con = psycopg.connect(**args)
    except psycopg.errors.ConnectionTimeout:
        raise TeamError(f"team server {where(team)} is unreachable: no answer within {args['connect_timeout']} s"
                        ) from None
    except psycopg.Error as err:
        raise TeamError(f"team server {where(team)} is unreachable: {_first_line(err)}") from None
    if deadline is not None:
        deadline.watch(con)
    return con


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[-1].strip() if text else type(err).__name__


def check_schema(con, team: TeamConfig) -> int:
    """The server's schema version, or TeamError: none (the admin SQL was never run) or newer than ours."""
    import psycopg  # lazy: psycopg, only where sync runs

    try:
        with con.cursor() as cur:
            cur.execute("SELECT value FROM workstation.meta WHERE key = 'schema_version'")
            row = cur.fetchone()
        con.rollback()
    except psycopg.errors.UndefinedTable:
        con.rollback()
        raise TeamError(f"team server {where(team)} has no workstation schema: a team admin runs the SQL "
                        "of `workstation team admin-sql` there once") from None
    except psycopg.errors.InsufficientPrivilege:
        con.rollback()
        raise TeamError(f"team server {where(team)} refuses this role: a team admin grants it "
                        "workstation_engineer") from None
    version = int(row[0]) if row and str(row[0]).isdigit() else 0
    if version > SCHEMA_VERSION:
        raise TeamError(f"team server {where(team)} has schema version {version}, newer than this "
                        f"workstation's {SCHEMA_VERSION}: upgrade workstation to sync with it")
    if version < 1:
        raise TeamError(f"team server {where(team)} has an unreadable schema version {row!r}")
    if version < SCHEMA_VERSION:
        raise TeamError(f"team server {where(team)} has schema version {version}, older than this workstation's "
                        f"{SCHEMA_VERSION} (which has the server enforce projects' members and origins' owners): "
                        "a team admin runs `workstation team admin-sql --upgrade` there once")
    return version


def whoami(con, team: TeamConfig) -> str:
    """The login the server knows this connection by (the author of what it writes), or TeamError when
    that login is not a member of the configured project."""
    with con.cursor() as cur:
        cur.execute("SELECT session_user, EXISTS (SELECT 1 FROM workstation.my_projects WHERE project = %s)",
                    [team.project])
        login, member = cur.fetchone()
    con.rollback()
    if not member:
        raise TeamError(f"{login} is not a member of project {team.project} on team server {where(team)}: a "
                        f"team admin adds it there (INSERT INTO workstation.members VALUES ('{team.project}', "
                        f"'{login}'))")
    return str(login)
