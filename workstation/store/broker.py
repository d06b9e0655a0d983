"""One workspace database shared by many processes.

DuckDB lets one process open a file read-write and then no other process at
all. So exactly one process of a workspace, the *owner*, opens the databases;
every other process is a *client* that sends its calls to the owner over a
Unix socket. Ownership is an flock on `owner.lock`: whoever holds it owns.
The kernel drops the lock when the owner exits or is killed, and the next
client whose call fails takes it over, so no process ever sees a lock error
and a kill -9 wedges nobody. DuckDB's WAL keeps every committed write.

Calls name a module-level function `fn(con, *args)` in the workstation
package; the owner runs it with a connection of its own. A call may be
retried after an owner dies, so calls must be idempotent (upserts, inserts
keyed by client-made ids).
"""

from __future__ import annotations

import errno
import fcntl
import importlib
import logging
import os
import pickle
import shutil
import socket
import socketserver
import struct
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable

from ..errors import StoreError
from ..paths import Paths
from .schema import INDEX_MIGRATIONS, MEMORY_MIGRATIONS, migrate

log = logging.getLogger(__name__)

_HEADER = struct.Struct("!I")
CONNECT_TIMEOUT_S = 30.0


def _send(sock: socket.socket, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_HEADER.pack(len(data)) + data)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise ConnectionError("owner closed the connection")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _recv(sock: socket.socket) -> Any:
    (size,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size))
    return pickle.loads(_recv_exact(sock, size))


def _resolve(name: str) -> Callable:
    module, _, attr = name.partition(":")
    if not module.startswith("workstation."):
        raise StoreError(f"refusing to call {name}: not a workstation function")
    return getattr(importlib.import_module(module), attr)


def _name_of(fn: Callable) -> str:
    return f"{fn.__module__}:{fn.__qualname__}"


class RemoteError(Exception):
    """An exception raised by a call on the owner, carried back to the caller."""


def _open_duckdb(paths: Paths):
    import duckdb

    try:
        con = duckdb.connect(str(paths.memory_db))
    except duckdb.Error as err:
        raise StoreError(
            f"memory store {paths.memory_db} cannot be opened ({str(err).splitlines()[0]}); "
            "it holds LTM and history, so it was left untouched: move it aside to start afresh"
        ) from None
    try:
        con.execute(f"ATTACH '{_sql_str(paths.index_db)}' AS kmap")
    except duckdb.Error as err:
        # The knowledge map is derived from the files: set the damaged file aside and rebuild.
        aside = paths.index_db.with_name(f"index.duckdb.corrupt-{int(time.time())}")
        warnings.warn(f"knowledge map {paths.index_db} is unreadable ({str(err).splitlines()[0]}); "
                      f"moved to {aside.name}, it will be rebuilt from the files", stacklevel=2)
        shutil.move(str(paths.index_db), aside)
        wal = Path(str(paths.index_db) + ".wal")
        if wal.exists():
            shutil.move(str(wal), str(aside) + ".wal")
        con.execute(f"ATTACH '{_sql_str(paths.index_db)}' AS kmap")
    try:
        migrate(con, "main", MEMORY_MIGRATIONS)
        migrate(con, "kmap", INDEX_MIGRATIONS)
    except duckdb.Error as err:
        con.close()
        raise StoreError(f"cannot migrate the workspace databases: {str(err).splitlines()[0]}") from None
    return con


def _sql_str(path: Path) -> str:
    return str(path).replace("'", "''")


class _Owner:
    """The process-local database, served to other processes over a socket."""

    def __init__(self, paths: Paths, lock_fd: int):
        self.paths = paths
        self.lock_fd = lock_fd
        self.con = _open_duckdb(paths)
        self.write_lock = threading.RLock()
        self._local = threading.local()
        self._cursors: list = []
        self.server: socketserver.ThreadingUnixStreamServer | None = None
        self._serve()

    def cursor(self):
        cur = getattr(self._local, "cursor", None)
        if cur is None:
            cur = self._local.cursor = self.con.cursor()
            self._cursors.append(cur)
        return cur

    def run(self, name: str, args: tuple, kwargs: dict) -> Any:
        fn = _resolve(name)
        if getattr(fn, "_ws_readonly", False):
            return fn(self.cursor(), *args, **kwargs)
        with self.write_lock:  # one writer at a time keeps transactions from conflicting
            return fn(self.cursor(), *args, **kwargs)

    def _serve(self) -> None:
        sock_path = self.paths.owner_socket
        try:
            sock_path.unlink()
        except FileNotFoundError:
            pass
        owner = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                while True:
                    try:
                        name, args, kwargs = _recv(self.request)
                    except (ConnectionError, OSError, EOFError):
                        return
                    try:
                        reply = ("ok", owner.run(name, args, kwargs))
                    except Exception as err:  # carried back to the caller, who raises it
                        reply = ("err", err if _picklable(err) else RemoteError(f"{type(err).__name__}: {err}"))
                    try:
                        _send(self.request, reply)
                    except OSError:
                        return

        old_umask = os.umask(0o077)  # the socket is for this user only
        try:
            self.server = socketserver.ThreadingUnixStreamServer(str(sock_path), Handler)
        finally:
            os.umask(old_umask)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, name="ws-owner", daemon=True).start()

    def close(self) -> None:
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            try:
                self.paths.owner_socket.unlink()
            except FileNotFoundError:
                pass
        with self.write_lock:
            for cur in self._cursors:
                cur.close()
            self.con.execute("CHECKPOINT")
            self.con.close()
        os.close(self.lock_fd)  # releases the flock: the next process takes over


def _picklable(err: Exception) -> bool:
    try:
        pickle.loads(pickle.dumps(err))
        return True
    except Exception:
        return False


def readonly(fn: Callable) -> Callable:
    """Mark a store function as read-only: the owner runs it without the write lock."""
    fn._ws_readonly = True
    return fn


class Database:
    """A handle on the workspace databases; owner or client, decided per call."""

    def __init__(self, paths: Paths, connect_timeout_s: float = CONNECT_TIMEOUT_S):
        self.paths = paths.ensure()
        self.connect_timeout_s = connect_timeout_s
        self._owner: _Owner | None = None
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()  # one in-flight call per client socket
        self._closed = False

    @property
    def is_owner(self) -> bool:
        return self._owner is not None

    def call(self, fn: Callable, *args, **kwargs) -> Any:
        """Run `fn(con, *args, **kwargs)` where the database lives and return its result."""
        if self._closed:
            raise StoreError("database handle is closed")
        name = _name_of(fn)
        if self._owner is not None:
            return self._owner.run(name, args, kwargs)
        deadline = time.monotonic() + self.connect_timeout_s
        while True:
            with self._lock:
                if self._owner is None:
                    try:
                        sock = self._sock or self._connect()
                        _send(sock, (name, args, kwargs))
                        status, value = _recv(sock)
                    except (ConnectionError, OSError, EOFError):
                        self._drop_socket()
                        if time.monotonic() > deadline:
                            raise StoreError(
                                f"no process could open the workspace database in {self.paths.state} "
                                f"within {self.connect_timeout_s:.0f}s") from None
                        self._try_become_owner()
                        if self._owner is None:
                            time.sleep(0.02)
                        continue
                    if status == "err":
                        raise value
                    return value
            return self._owner.run(name, args, kwargs)

    def _connect(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(self.paths.owner_socket))
        except OSError:
            sock.close()
            raise
        self._sock = sock
        return sock

    def _drop_socket(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def _try_become_owner(self) -> None:
        fd = os.open(self.paths.owner_lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            if err.errno in (errno.EAGAIN, errno.EACCES):
                return  # someone else owns it; their socket will answer soon
            raise
        try:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
            self._owner = _Owner(self.paths, fd)
        except BaseException:
            os.close(fd)
            raise

    def acquire_ownership(self) -> bool:
        """Become the owner now if nobody is; returns whether this process owns."""
        with self._lock:
            if self._owner is None:
                self._try_become_owner()
        return self._owner is not None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._drop_socket()
            if self._owner is not None:
                owner, self._owner = self._owner, None
                owner.close()

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_database(paths: Paths) -> Database:
    return Database(paths)
