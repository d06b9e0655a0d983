"""One workspace database shared by many processes.

DuckDB lets one process open a file read-write and then no other process at
all. So exactly one process of a workspace, the *owner*, opens the databases;
every other process is a *client* that sends its calls to the owner over a
Unix socket. Ownership is an flock on `owner.lock`: whoever holds it owns.

- Election: a client whose call cannot reach an owner tries the flock; if it
  wins it opens DuckDB and serves, otherwise someone else is starting up and
  it retries with back-off (up to `connect_timeout_s`), so users never see a
  DuckDB lock error.
- Crash: the kernel drops the flock (and DuckDB's own file lock) when the
  owner is killed; the next client whose call fails takes over and DuckDB
  replays its WAL, so every committed (fenced) write survives a kill -9.
- Clean exit: `close()` (also run at interpreter exit) runs the close hooks
  (memory buffers flush), stops accepting calls, lets calls in flight finish
  and answer (for up to CLOSE_GRACE_S; longer ones are interrupted and the
  client retries them, once they have let go of DuckDB), disconnects
  clients, checkpoints, and only then releases the flock; a client then
  elects a new owner.
- Stopped owner (ctrl+z): a waiting client checks the owner's state every
  OWNER_CHECK_S and fails the call after OWNER_STOPPED_S, saying how to resume it.
- Fork: a forked child drops the parent's lock and socket and becomes a client.

Calls name a module-level function `fn(con, *args, **kwargs)` of the
workstation package; the owner runs it with a DuckDB cursor of its own. A call
whose owner dies mid-flight is sent again to the next owner, so every call
must be idempotent (upserts, inserts keyed by client-made ids).

Security: the socket is created 0600 and both ends check the peer's uid
(SO_PEERCRED) because requests and replies are pickles.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import importlib
import logging
import os
import pickle
import shutil
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any, Callable

from ..errors import StoreError, WorkstationError
from ..fsutil import atomic_write, open_state
from ..paths import Paths
from .schema import INDEX_MIGRATIONS, MEMORY_MIGRATIONS, migrate, prune_retry_records

log = logging.getLogger(__name__)

_HEADER = struct.Struct("!Q")
CONNECT_TIMEOUT_S = 30.0  # how long a call waits for some process to become owner
CLOSE_GRACE_S = 5.0  # how long close() lets calls in flight finish before interrupting them (they are retried)
INTERRUPT_WAIT_S = 30.0  # how long close() then waits for interrupted calls to let go of their cursors
OWNER_CHECK_S = 1.0  # while waiting for an answer, how often a client looks whether the owner is stopped
OWNER_STOPPED_S = 2.0  # how long an owner may stay stopped (ctrl+z) before its clients' calls fail
FILE_LOCK_WAIT_S = 10.0  # how long a new owner waits for a previous owner's DuckDB to let go of the file
_MAX_IDLE_CURSORS = 16
_MAX_IDLE_SOCKETS = 8
_PEERCRED = struct.Struct("3i")  # struct ucred {pid, uid, gid}


class RemoteError(Exception):
    """An exception raised by a call on the owner that could not travel as itself."""


@contextlib.contextmanager
def _address(path: Path):
    """The address to bind or connect the socket at `path` with: the path itself, or, when it is longer than a
    Unix socket address may be (108 bytes: a deep workspace), the same file reached through an open descriptor
    of its folder (/proc/self/fd/N/NAME), which the kernel resolves as it would the long path."""
    if len(os.fsencode(str(path))) < 100 or not os.path.isdir("/proc/self/fd"):
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


class _OwnerGone(Exception):
    """The owner is closing: the request was not run and may be sent elsewhere."""


# ---------------------------------------------------------------- wire format

def _dumps(obj: Any) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


def _recv_exact(sock: socket.socket, n: int, on_wait: Callable[[], None] | None = None) -> bytearray:
    """n bytes; on a socket with kernel timeouts (_set_wait_checks), `on_wait()` runs at each (and may raise)."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        try:
            k = sock.recv_into(view[got:], min(n - got, 1 << 22))
        except BlockingIOError:  # the kernel's receive timeout (SO_RCVTIMEO) passed
            if on_wait is None:
                raise
            on_wait()
            continue
        if not k:
            raise ConnectionError("peer closed the connection")
        got += k
    return buf


def _send_all(sock: socket.socket, data: bytes, on_wait: Callable[[], None]) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[sock.send(view):]
        except BlockingIOError:  # the kernel's send timeout (SO_SNDTIMEO) passed
            on_wait()


def _set_wait_checks(sock: socket.socket, seconds: float) -> None:
    """Kernel-side timeouts on a blocking socket: a call returns every `seconds` while it waits.

    (Python's own settimeout polls before every recv: about 50 µs more per call.)"""
    whole = int(seconds)
    timeval = struct.pack("ll", whole, int((seconds - whole) * 1_000_000))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)


def _recv(sock: socket.socket, on_wait: Callable[[], None] | None = None) -> Any:
    (size,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size, on_wait))
    return pickle.loads(_recv_exact(sock, size, on_wait))


def _peer(sock: socket.socket) -> tuple[int, int] | None:
    """(pid, uid) of the process at the other end, where the system tells (Linux)."""
    if not hasattr(socket, "SO_PEERCRED"):  # elsewhere the 0600 socket file is the guard
        return None
    pid, uid, _gid = _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    return pid, uid


def _peer_uid(sock: socket.socket) -> int | None:
    peer = _peer(sock)
    return None if peer is None else peer[1]


def _is_stopped(pid: int) -> bool:
    """True while pid is stopped (SIGSTOP, ctrl+z, a debugger); False if running, gone or unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] in (b"T", b"t")
    except (OSError, IndexError):
        return False


def _command_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


class _StoppedOwnerWatch:
    """Called at each wait for the owner: raises once the owner has been stopped for OWNER_STOPPED_S."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.pid: int | None = None
        self.stopped_since: float | None = None

    def __call__(self) -> None:
        if self.pid is None:  # only calls that wait this long ask who the owner is
            peer = _peer(self.sock)
            self.pid = peer[0] if peer else -1
        if self.pid < 0 or not _is_stopped(self.pid):
            self.stopped_since = None  # busy with a long call, not stopped: keep waiting
            return
        now = time.monotonic()
        self.stopped_since = self.stopped_since or now
        if now - self.stopped_since >= OWNER_STOPPED_S:
            raise StoreError(
                f"the process that owns the workspace database is stopped (pid {self.pid}: "
                f"{_command_of(self.pid)}); resume it (`fg` in its terminal, or kill -CONT {self.pid})")


def _picklable(obj: Any) -> bool:
    try:
        pickle.loads(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
        return True
    except Exception:  # any failure means "send a stand-in instead"
        return False


def _error_reply(err: BaseException) -> bytes:
    if not _picklable(err):
        err = RemoteError(f"{type(err).__name__}: {err}")
    return _dumps(("err", err))


# ---------------------------------------------------------------- functions

_resolved: dict[str, Callable] = {}


def _resolve(name: str) -> Callable:
    fn = _resolved.get(name)
    if fn is None:
        module, _, attr = name.partition(":")
        if not module.startswith("workstation.") or not attr.isidentifier():
            raise StoreError(f"refusing to call {name}: not a module-level workstation function")
        fn = _resolved[name] = getattr(importlib.import_module(module), attr)
    return fn


def _name_of(fn: Callable) -> str:
    module, qualname = getattr(fn, "__module__", ""), getattr(fn, "__qualname__", "")
    if not module.startswith("workstation.") or not qualname.isidentifier():
        raise ValueError(f"Database.call needs a module-level workstation function, got {module}:{qualname}")
    return f"{module}:{qualname}"


def readonly(fn: Callable) -> Callable:
    """Mark a store function as read-only: the owner runs it without the write lock."""
    setattr(fn, "_ws_readonly", True)  # noqa: B010 (a function's attribute, which mypy will not see assigned)
    return fn


@readonly
def ping(con) -> int:
    """The owner's process id: a cheap way to ask who serves the workspace."""
    return os.getpid()


_current = threading.local()  # the owner running the call on this thread


def owner_state(key: str, factory: Callable[[], Any]) -> Any:
    """Per-owner process state (caches, registries) for functions run by `Database.call`.

    It lives as long as this process owns the workspace; a new owner starts empty.
    """
    owner = getattr(_current, "owner", None)
    if owner is None:
        raise RuntimeError("owner_state() is only available inside a function run by Database.call")
    with owner.state_lock:
        if key not in owner.state:
            owner.state[key] = factory()
        return owner.state[key]


# ---------------------------------------------------------------- opening

def _first_line(err: BaseException) -> str:
    return (str(err).splitlines() or [type(err).__name__])[0]


def _is_lock_conflict(err: BaseException) -> bool:
    return "Could not set lock" in str(err) or "Conflicting lock" in str(err)


def _sql_str(path: Path) -> str:
    return str(path).replace("'", "''")


def _damaged_memory(paths: Paths, err: BaseException) -> StoreError:
    return StoreError(
        f"memory store {paths.memory_db} cannot be read ({_first_line(err)}); "
        "it holds LTM and history, so it was left untouched: move it aside to start afresh")


def _connect_memory(paths: Paths):
    """Open the memory store; we hold the owner lock, so a file lock is a previous owner letting go or a stranger."""
    import duckdb  # lazy: duckdb, ~55 ms; a client process never opens it

    deadline = time.monotonic() + FILE_LOCK_WAIT_S
    while True:
        try:
            return duckdb.connect(str(paths.memory_db))
        except duckdb.Error as err:
            if not _is_lock_conflict(err):
                raise _damaged_memory(paths, err) from None
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"memory store {paths.memory_db} is held by a program outside workstation "
                    f"({_first_line(err)}); close it and retry") from None
        time.sleep(0.05)


def _clean_mark(paths: Paths) -> Path:
    return paths.memory_db.with_name(paths.memory_db.name + ".clean")


def _signature(path: Path) -> str:
    st = os.stat(path)
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"


def _verify_memory(paths: Paths) -> None:
    """Refuse a damaged memory store before anything writes to it.

    The owner that closes it cleanly leaves a mark with the file's signature (size, mtime, inode); a
    file that still matches its mark is what that owner left, and opens at once. Any other file (the
    last owner crashed, something else wrote it, it was truncated or copied in) is first opened
    read-only and every table read whole, so every block's checksum is checked: DuckDB would
    otherwise open a file whose damage lies in blocks it has not read yet, write to it, and fail
    later, mid-command."""
    import duckdb  # lazy: duckdb, ~55 ms; a client process never opens it

    mark = _clean_mark(paths)
    if not paths.memory_db.exists():
        return
    try:
        clean = mark.read_text() == _signature(paths.memory_db)
        mark.unlink()  # from now on the file is ours to change; a crash leaves no mark
    except OSError:
        clean = False
    if clean and not Path(str(paths.memory_db) + ".wal").exists():
        return
    try:
        con = duckdb.connect(str(paths.memory_db), read_only=True)
    except duckdb.Error as err:
        if _is_lock_conflict(err):
            return  # a previous owner letting go, or a stranger: _connect_memory waits or says so
        raise _damaged_memory(paths, err) from None
    try:
        tables = con.execute("SELECT schema_name, table_name FROM duckdb_tables() "
                             "WHERE database_name = current_database()").fetchall()
        for schema, table in tables:
            con.execute(f'SELECT count(*), bit_xor(hash(COLUMNS(*))) FROM "{schema}"."{table}"').fetchall()
    except duckdb.Error as err:
        raise _damaged_memory(paths, err) from None
    finally:
        con.close()


def _leave_clean_mark(paths: Paths) -> None:
    """After a clean close: the signature the next owner checks (see _verify_memory)."""
    try:
        atomic_write(_clean_mark(paths), _signature(paths.memory_db).encode())
    except OSError as err:  # the next owner verifies the whole file instead: slower, never wrong
        log.warning("could not mark %s as cleanly closed: %s", paths.memory_db, err.strerror)


def _open_duckdb(paths: Paths):
    import duckdb  # lazy: duckdb, ~55 ms; a client process never opens it

    _verify_memory(paths)
    con = _connect_memory(paths)
    try:
        try:
            migrate(con, "main", MEMORY_MIGRATIONS)
            prune_retry_records(con)
        except duckdb.Error as err:  # a half-written file can open and fail on first read
            raise _damaged_memory(paths, err) from None
        _attach_index(con, paths)
    except BaseException:
        con.close()
        raise
    return con


def _attach_index(con, paths: Paths) -> None:
    import duckdb  # lazy: duckdb, ~55 ms; a client process never opens it

    try:
        con.execute(f"ATTACH '{_sql_str(paths.index_db)}' AS kmap")
        migrate(con, "kmap", INDEX_MIGRATIONS)
        return
    except duckdb.Error as err:
        if _is_lock_conflict(err):
            raise StoreError(f"knowledge map {paths.index_db} is held by a program outside workstation "
                             f"({_first_line(err)}); close it and retry") from None
        reason = _first_line(err)
    # The knowledge map is derived from the files: set the damaged file aside and rebuild.
    try:
        con.execute("DETACH kmap")
    except duckdb.Error:
        pass  # it never attached
    aside = paths.index_db.with_name(f"index.duckdb.corrupt-{time.time_ns()}")
    shutil.move(str(paths.index_db), aside)
    wal = Path(str(paths.index_db) + ".wal")
    if wal.exists():
        shutil.move(str(wal), str(aside) + ".wal")
    message = (f"knowledge map {paths.index_db} was unreadable ({reason}); moved to {aside.name}, "
               "it will be rebuilt from the files")
    log.warning(message)  # one line on stderr unless the app routes logging elsewhere
    con.execute(f"ATTACH '{_sql_str(paths.index_db)}' AS kmap")
    migrate(con, "kmap", INDEX_MIGRATIONS)


# ---------------------------------------------------------------- the owner

class _Owner:
    """The process-local database, served to other processes over a socket."""

    def __init__(self, paths: Paths, lock_fd: int):
        self.paths = paths
        self.lock_fd = lock_fd
        self.con = _open_duckdb(paths)
        self.damaged: str | None = None  # set by the first read that finds a corrupt block
        self.write_lock = threading.RLock()  # one writer at a time keeps transactions from conflicting
        self.state: dict[str, Any] = {}
        self.state_lock = threading.Lock()
        self._cursors: list = []  # idle, ready for the next call
        # running a call: close() interrupts these (the connection's own interrupt does not reach them)
        self._busy: set = set()
        self._cursor_lock = threading.Lock()
        self._flight = threading.Condition()
        self._in_flight = 0
        self._closing = False
        self._conns: set[socket.socket] = set()
        self._handlers: set[threading.Thread] = set()
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        try:
            self._listen()
        except BaseException:
            self.con.close()
            raise

    # -- running calls

    def _enter(self) -> None:
        """Count a call in flight; close() waits for these (refused once closing)."""
        with self._flight:
            if self._closing:
                raise _OwnerGone()
            self._in_flight += 1

    def _leave(self) -> None:
        with self._flight:
            self._in_flight -= 1
            self._flight.notify_all()

    def run(self, name: str, args: tuple, kwargs: dict) -> Any:
        self._enter()
        try:
            return self._execute(name, args, kwargs)
        finally:
            self._leave()

    def _execute(self, name: str, args: tuple, kwargs: dict) -> Any:
        fn = _resolve(name)
        cur = self._take_cursor()
        previous = getattr(_current, "owner", None)
        _current.owner = self
        try:
            if self.damaged is not None and not getattr(fn, "_ws_readonly", False):
                raise StoreError(f"workspace database in {self.paths.state} is damaged ({self.damaged}); "
                                 "nothing more is written to it")
            if getattr(fn, "_ws_readonly", False):
                result = fn(cur, *args, **kwargs)
            else:
                with self.write_lock:
                    result = fn(cur, *args, **kwargs)
        except BaseException as err:
            with self._cursor_lock:
                self._busy.discard(cur)
            cur.close()  # drops whatever transaction the failed call left open
            if self._closing:  # likely interrupted by close(): let the caller retry on the next owner
                raise _OwnerGone() from None
            if isinstance(err, StoreError):
                raise
            if "Corrupt database file" in str(err):  # one line, and no write reaches the file again
                self.damaged = _first_line(err)
                raise StoreError(f"workspace database in {self.paths.state} is damaged ({self.damaged}); "
                                 "nothing more is written to it: move memory.duckdb aside to start afresh "
                                 "(index.duckdb is rebuilt from the files)") from None
            if type(err).__name__ == "IOException":  # a failing disk, not a bug
                raise StoreError(f"workspace database I/O failed in {name}: {_first_line(err)}") from None
            raise
        finally:
            _current.owner = previous
        self._return_cursor(cur)
        return result

    def _take_cursor(self):
        with self._cursor_lock:
            cur = self._cursors.pop() if self._cursors else self.con.cursor()
            self._busy.add(cur)
            return cur

    def _return_cursor(self, cur) -> None:
        with self._cursor_lock:
            self._busy.discard(cur)
            if len(self._cursors) < _MAX_IDLE_CURSORS and not self._closing:
                self._cursors.append(cur)
                return
        cur.close()

    # -- serving

    def _listen(self) -> None:
        path = self.paths.owner_socket
        try:
            path.unlink()  # a stale socket of a dead owner: we hold the lock, so it is not live
        except FileNotFoundError:
            pass
        except OSError as err:
            raise StoreError(f"cannot replace the owner socket {path}: {err.strerror}") from None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with _address(path) as address:
                sock.bind(address)
            os.chmod(path, 0o600)  # before listen(), so nobody else can ever connect
            sock.listen(64)
        except BaseException:
            sock.close()
            raise
        self._listener = sock
        self._accept_thread = threading.Thread(target=self._accept_loop, name="ws-owner-accept", daemon=True)
        self._accept_thread.start()

    def _accept_loop(self) -> None:
        my_uid = os.getuid()
        listener = self._listener
        if listener is None:
            return  # closed before the thread started
        while True:
            try:
                conn, _ = listener.accept()
            except OSError as err:
                if self._closing:
                    return
                if err.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    log.warning("owner cannot accept a connection: %s", err)
                    time.sleep(0.1)
                    continue
                if err.errno in (errno.EBADF, errno.EINVAL):  # listener closed under us
                    return
                raise
            try:
                trusted = _peer_uid(conn) in (None, my_uid)
            except OSError:
                trusted = False
            if not trusted:
                conn.close()
                continue
            with self._flight:
                if self._closing:
                    conn.close()
                    continue
                self._conns.add(conn)
                handler = threading.Thread(target=self._serve_conn, args=(conn,), name="ws-owner-conn", daemon=True)
                self._handlers.add(handler)
            handler.start()

    def _serve_conn(self, conn: socket.socket) -> None:
        try:
            while True:
                try:
                    (size,) = _HEADER.unpack(_recv_exact(conn, _HEADER.size))
                    payload = _recv_exact(conn, size)
                except (OSError, ConnectionError):
                    return
                try:
                    self._enter()  # until the answer is sent, so close() cannot cut it off
                except _OwnerGone:
                    return  # closing: no answer, the client retries with the next owner
                try:
                    try:
                        name, args, kwargs = pickle.loads(payload)
                        reply = _dumps(("ok", self._execute(name, args, kwargs)))
                    except _OwnerGone:
                        return
                    except Exception as err:
                        if not isinstance(err, WorkstationError):  # maybe a bug: keep its traceback for debugging
                            log.debug("call from a client failed", exc_info=True)
                        reply = _error_reply(err)
                    except BaseException as err:  # e.g. SystemExit raised by a call: report it, keep serving
                        reply = _error_reply(RemoteError(f"{type(err).__name__}: {err}"))
                    try:
                        conn.sendall(reply)
                    except OSError:
                        return
                finally:
                    self._leave()
        finally:
            with self._flight:
                self._conns.discard(conn)
                self._handlers.discard(threading.current_thread())
            conn.close()

    # -- closing

    def close(self) -> None:
        with self._flight:
            self._closing = True
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # not connected: close() below is what wakes accept()
            self._listener.close()
            if self._accept_thread is not None:
                self._accept_thread.join(5)
            try:
                self.paths.owner_socket.unlink()  # we still hold the lock, so the path is ours
            except FileNotFoundError:
                pass
        with self._flight:  # let calls in flight finish and answer
            self._flight.wait_for(lambda: self._in_flight == 0, timeout=CLOSE_GRACE_S)
            if self._in_flight:
                log.warning("closing the workspace database with %d calls still running", self._in_flight)
                with self._cursor_lock:
                    for cur in self._busy:
                        cur.interrupt()
                # An interrupted call still holds its cursor, and with it DuckDB's file lock:
                # releasing the owner lock before it lets go would hand the next owner a locked file.
                if not self._flight.wait_for(lambda: self._in_flight == 0, timeout=INTERRUPT_WAIT_S):
                    log.warning("%d interrupted calls did not stop; the next owner may wait for the file",
                                self._in_flight)
            conns, handlers = list(self._conns), list(self._handlers)
        for conn in conns:  # idle clients see EOF and go elect the next owner
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for handler in handlers:
            handler.join(5)
        try:
            with self.write_lock, self._cursor_lock:
                for cur in self._cursors:
                    cur.close()
                self._cursors.clear()
                self.state.clear()
                if self.damaged is None:
                    try:
                        self.con.execute("CHECKPOINT")
                    finally:
                        self.con.close()
                    _leave_clean_mark(self.paths)
                else:
                    self.con.close()
        finally:
            os.close(self.lock_fd)  # releases the flock: the next process takes over

    def abandon_after_fork(self) -> None:
        """In a forked child: let go of the parent's lock and socket, never of its DuckDB.

        Freeing the connection here would run DuckDB's shutdown (a checkpoint)
        in the child, writing the file under the parent: so it is never freed.
        """
        import ctypes  # lazy: ctypes, ~3 ms, only in a forked child

        ctypes.pythonapi.Py_IncRef(ctypes.py_object(self))
        for fd in (self.lock_fd, self._listener.fileno() if self._listener else -1):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass  # already closed: nothing to let go of


# ---------------------------------------------------------------- the handle

_live: "set[Database]" = set()  # open handles, closed at exit even if their owner forgot


class Database:
    """A handle on the workspace databases; owner or client, decided per call."""

    def __init__(self, paths: Paths, connect_timeout_s: float = CONNECT_TIMEOUT_S):
        self.paths = paths.ensure()
        self.connect_timeout_s = connect_timeout_s
        self._owner: _Owner | None = None
        self._closed = False
        self._close_hooks: list[Callable[[], None]] = []
        self._reset_client_state()
        _live.add(self)

    def _reset_client_state(self) -> None:
        self._idle: list[socket.socket] = []  # connected sockets not in use; one call at a time each
        self._pool_lock = threading.Lock()
        self._elect_lock = threading.Lock()

    @property
    def is_owner(self) -> bool:
        return self._owner is not None

    def call(self, fn: Callable, *args, **kwargs) -> Any:
        """Run `fn(con, *args, **kwargs)` where the database lives and return its result.

        Exceptions raised by `fn` are raised here. A call whose owner dies is
        retried on the next owner, so `fn` must be idempotent.
        """
        name = _name_of(fn)
        request = None
        deadline = None  # counted from the first time no owner answered
        pause = 0.002
        while True:
            if self._closed:
                raise StoreError("the workspace database handle is closed")
            owner = self._owner
            if owner is not None:
                try:
                    return owner.run(name, args, kwargs)
                except _OwnerGone:
                    raise StoreError("the workspace database handle is closed") from None
            if request is None:
                request = _dumps((name, args, kwargs))  # unpicklable arguments fail here, before any I/O
            sock = self._checkout()
            if sock is not None:
                watch = _StoppedOwnerWatch(sock)
                try:
                    _send_all(sock, request, watch)
                    status, value = _recv(sock, watch)
                except (OSError, EOFError, ConnectionError):
                    sock.close()  # the owner went away, maybe mid-call: elect or find the next one
                except BaseException:
                    sock.close()  # the reply may still come: this socket is out of step now
                    raise
                else:
                    self._checkin(sock)
                    if status == "err":
                        raise value
                    return value
            if self._elect():
                continue
            deadline = deadline or time.monotonic() + self.connect_timeout_s
            if time.monotonic() > deadline:
                raise StoreError(f"no process could open the workspace database in {self.paths.state} "
                                 f"within {self.connect_timeout_s:.0f}s (is a process owning it stuck?)")
            time.sleep(pause)  # someone else holds the lock and is starting up
            pause = min(pause * 2, 0.05)

    # -- client sockets

    def _checkout(self) -> socket.socket | None:
        with self._pool_lock:
            if self._idle:
                return self._idle.pop()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with _address(self.paths.owner_socket) as address:
                sock.connect(address)
        except OSError:
            sock.close()
            return None
        if _peer_uid(sock) not in (None, os.getuid()):
            sock.close()
            raise StoreError(f"the owner socket {self.paths.owner_socket} belongs to another user; refusing it")
        _set_wait_checks(sock, OWNER_CHECK_S)  # to notice an owner stopped by ctrl+z
        return sock

    def _checkin(self, sock: socket.socket) -> None:
        with self._pool_lock:
            if len(self._idle) < _MAX_IDLE_SOCKETS and not self._closed:
                self._idle.append(sock)
                return
        sock.close()

    def _drop_sockets(self) -> None:
        with self._pool_lock:
            idle, self._idle = self._idle, []
        for sock in idle:
            sock.close()

    # -- ownership

    def _elect(self) -> bool:
        """Take ownership if nobody holds it; True if this process now owns."""
        with self._elect_lock:
            if self._owner is not None:
                return True
            if self._closed:
                return False
            fd = open_state(self.paths.owner_lock, os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                os.close(fd)
                if err.errno in (errno.EAGAIN, errno.EACCES):
                    return False  # someone else owns it or is starting up
                raise
            try:
                os.ftruncate(fd, 0)
                os.write(fd, str(os.getpid()).encode())  # for people wondering who owns
                owner = _Owner(self.paths, fd)
            except BaseException:
                os.close(fd)
                raise
            self._drop_sockets()  # they point at the old owner
            self._owner = owner
            return True

    def acquire_ownership(self) -> bool:
        """Become the owner now if nobody is; returns whether this process owns."""
        if self._closed:
            raise StoreError("the workspace database handle is closed")
        return self._elect()

    # -- closing

    def add_close_hook(self, hook: Callable[[], None]) -> None:
        """Run `hook()` at the start of close(), while calls still work (to flush buffers)."""
        self._close_hooks.append(hook)

    def remove_close_hook(self, hook: Callable[[], None]) -> None:
        try:
            self._close_hooks.remove(hook)
        except ValueError:
            pass

    def close(self) -> None:
        """Flush through the close hooks, then stop serving (owner) and disconnect."""
        if self._closed:
            return
        failure: BaseException | None = None
        for hook in list(reversed(self._close_hooks)):
            try:
                hook()
            except BaseException as err:  # keep closing; the first failure is raised below
                failure = failure or err
        self._close_hooks.clear()
        with self._elect_lock:
            self._closed = True
            owner, self._owner = self._owner, None
        self._drop_sockets()
        if owner is not None:
            owner.close()
        _live.discard(self)
        if failure is not None:
            raise failure

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _after_fork_in_child(self) -> None:
        # The child must not use the parent's DuckDB objects or sockets, nor keep its flock alive.
        if self._owner is not None:
            self._owner.abandon_after_fork()
            self._owner = None
        for sock in self._idle:
            sock.close()  # close, never shutdown: the parent's copy stays connected
        self._reset_client_state()


def open_database(paths: Paths) -> Database:
    return Database(paths)


def _close_all_at_exit() -> None:
    # Closing while threads can still run hands ownership over cleanly and
    # lets DuckDB objects be freed before interpreter teardown (no leak noise).
    for db in list(_live):
        try:
            db.close()
        except Exception as err:  # at exit there is nobody left to raise to
            log.error("closing the workspace database at exit failed: %s", err)


def _after_fork() -> None:
    for db in list(_live):
        db._after_fork_in_child()


atexit.register(_close_all_at_exit)
os.register_at_fork(after_in_child=_after_fork)
