"""One language server process: started in the commands' sandbox, spoken to through pygls' client.

pygls is asyncio: the client and its process live on one event loop in a daemon thread of their own,
and every method here is synchronous, waiting at most a given time for its answer. A server that does
not start, dies, or does not answer in time is marked failed with one line (`Server.error`): later
calls return at once with that line, never block a turn. The process runs inside the same sandbox as
`run_command` (workstation.sandbox: writes only in the workspace, no network, the state folder hidden,
the environment scrubbed of secrets), and dies with us (bubblewrap's --die-with-parent; `stop`).

Documents: the server is told the text of every file it is asked about (didOpen, then didChange with
the whole text when the file on disk differs from what it was told), so its view never lags the disk
for the files in question; `generation` counts every change told, which is how a caller knows that a
diagnostic report it holds is still current.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from ..fsutil import sha256_bytes
from ..paths import absolute_path_env
from .results import Diagnostic, Location, ServerFailed, Stopped, Symbol

if TYPE_CHECKING:
    from ..sandbox import Policy
    from .servers import ServerSpec

MAX_OPEN = 200  # documents kept open; the least recently used is closed past it
MAX_DOC_BYTES = 2_000_000  # a larger file is not sent to the server
STDERR_LINES = 20
QUIET_S = 0.3  # a push-only server has published everything once it says nothing for this long
GIVE_UP_AFTER = 3  # requests in a row that time out: the server is stopped and not asked again


POLL_S = 0.05


def _wait(future, deadline: float, cancel: threading.Event | None):
    """`future`'s result by `deadline` (TimeoutError after it), or Stopped as soon as `cancel` is set."""
    while True:
        left = deadline - time.monotonic()
        try:
            return future.result(timeout=max(0.0, min(left, POLL_S) if cancel is not None else left))
        except TimeoutError:
            if cancel is not None and cancel.is_set():
                raise Stopped("stopped by the user") from None
            if time.monotonic() >= deadline:
                raise


def _serialized(method):
    """One request at a time per server (the agent, slash commands and MCP clients share it)."""
    def run(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)
    run.__name__, run.__doc__ = method.__name__, method.__doc__
    return run


class Server:
    """One running language server for one workspace root; see the module docstring."""

    def __init__(self, spec: "ServerSpec", root: Path, policy: "Policy | None"):
        self.spec = spec
        self.root = Path(os.path.realpath(root))
        self.policy = policy
        self.error: str | None = None
        self._timeouts = 0  # in a row: a server that keeps not answering is given up
        self.generation = 0  # every document change told to the server
        self._docs: collections.OrderedDict[str, tuple[int, str]] = collections.OrderedDict()  # rel -> (version, sha)
        self._results: dict[str, tuple[int, list[Diagnostic]]] = {}  # rel -> (generation, diagnostics)
        self._lock = threading.RLock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name=f"lsp-{spec.language}")
        self._stack = contextlib.ExitStack()
        self._client: Any = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self._started: Any = None  # concurrent Future of the start
        self._stopped = False
        # servers that only push diagnostics (typescript-language-server): what each file last got, numbered
        self._pull = True  # until the server says it does not serve textDocument/diagnostic
        self._push_cond = threading.Condition()
        self._pushes = 0
        self._pushed: dict[str, tuple[int, list[Diagnostic]]] = {}
        self._change_mark = 0  # the push count when the last change was told

    # ------------------------------------------------------------------ life
    def start(self) -> None:
        """Begin starting the server (returns at once); `wait_ready` waits for it."""
        with self._lock:
            if self._started is not None or self._stopped:
                return
            self._thread.start()
            self._started = asyncio.run_coroutine_threadsafe(self._start(), self._loop)

    def wait_ready(self, timeout_s: float, cancel: threading.Event | None = None) -> None:
        """Raise ServerFailed unless the server has started within `timeout_s` (from now)."""
        self.start()
        if self.error:
            raise ServerFailed(self.error)
        try:
            _wait(self._started, time.monotonic() + timeout_s, cancel)
        except TimeoutError:
            raise ServerFailed(f"{self.spec.name} is still starting (not ready in {timeout_s:g}s)") from None
        except Stopped:
            raise
        except Exception as err:  # the start failed: the process, the sandbox, the handshake
            self._fail(f"{self.spec.name} did not start: {self._why(err)}")
            raise ServerFailed(self.error) from None

    @property
    def ready(self) -> bool:
        """Started, and neither its start nor anything since failed."""
        started = self._started
        return (started is not None and started.done() and not started.cancelled() and started.exception() is None
                and self.error is None)

    def stop(self, timeout_s: float = 3.0) -> None:
        """Shut the server down (politely, then by force) and end its thread; safe to call twice."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        if self._started is not None:
            if self.ready:  # a server that never finished starting is not asked
                try:
                    asyncio.run_coroutine_threadsafe(self._shutdown(timeout_s), self._loop).result(timeout_s + 2)
                except Exception:  # already dead or stuck: killed below
                    pass
            self._kill()
            try:
                asyncio.run_coroutine_threadsafe(self._reap(), self._loop).result(timeout_s)
            except Exception:  # a process that outlives SIGKILL: its thread is a daemon
                pass
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout_s)
            if not self._thread.is_alive():
                self._loop.close()
        else:
            self._loop.close()  # never run
        self._stack.close()  # the sandbox's private /tmp

    async def _start(self) -> None:
        from lsprotocol import types as T  # lazy: lsprotocol and cattrs, ~150 ms, only where a server runs
        from pygls.lsp.client import LanguageClient  # lazy: likewise

        logging.getLogger("pygls").setLevel(logging.ERROR)  # its warnings would print over the app

        # a relative PATH entry would find a program the repository planted (the server runs `python`, `node`)
        argv, env = list(self.spec.argv), {**os.environ, "PATH": absolute_path_env()}
        if self.policy is not None:
            from ..sandbox import sandboxed  # lazy: only where a server starts

            argv, env, _status = self._stack.enter_context(sandboxed(argv, self.policy, self.root, env))
        client = LanguageClient("workstation", "0.1")
        spec = self.spec

        @client.feature(T.WORKSPACE_CONFIGURATION)
        def configuration(params: T.ConfigurationParams) -> list:
            return [spec.settings.get(item.section or "", {}) for item in params.items]

        @client.feature(T.WINDOW_LOG_MESSAGE)
        def said(params: T.LogMessageParams) -> None:
            if params.type <= T.MessageType.Warning:  # errors and warnings explain a failure
                self._stderr.append(" ".join(str(params.message).split()))

        @client.feature(T.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def pushed(params: T.PublishDiagnosticsParams) -> None:  # used where pulling is not served
            rel = self.rel(params.uri)
            if rel is not None:
                with self._push_cond:
                    self._pushes += 1
                    self._pushed[rel] = (self._pushes, [_diagnostic(rel, d) for d in params.diagnostics])
                    self._push_cond.notify_all()

        for method in ("pyright/beginProgress", "pyright/reportProgress", "pyright/endProgress", T.PROGRESS):
            client.feature(method)(lambda params: None)

        @client.feature(T.CLIENT_REGISTER_CAPABILITY)
        def register(params) -> None:
            return None

        @client.feature(T.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def progress(params) -> None:
            return None

        await client.start_io(argv[0], *argv[1:], cwd=str(self.root), env=env, start_new_session=True)
        self._client = client
        asyncio.ensure_future(self._drain_stderr(client._server))
        uri = self.root.as_uri()
        await client.initialize_async(T.InitializeParams(
            # our pid means nothing in the sandbox's PID namespace (a server that polls it would exit at once);
            # the sandbox ends the server with us instead
            process_id=None if self.policy is not None else os.getpid(), root_uri=uri,
            workspace_folders=[T.WorkspaceFolder(uri=uri, name=self.root.name)],
            initialization_options=spec.init_options or None,
            capabilities=T.ClientCapabilities(
                workspace=T.WorkspaceClientCapabilities(
                    configuration=True,
                    did_change_watched_files=T.DidChangeWatchedFilesClientCapabilities(dynamic_registration=True)),
                text_document=T.TextDocumentClientCapabilities(
                    diagnostic=T.DiagnosticClientCapabilities(),
                    publish_diagnostics=T.PublishDiagnosticsClientCapabilities(version_support=True),
                    document_symbol=T.DocumentSymbolClientCapabilities(
                        hierarchical_document_symbol_support=True)))))
        client.initialized(T.InitializedParams())

    async def _drain_stderr(self, process) -> None:
        """Keep the server's stderr flowing (a full pipe would stall it); its last lines explain a failure."""
        if process is None or process.stderr is None:
            return
        while True:
            line = await process.stderr.readline()
            if not line:
                return
            self._stderr.append(line.decode("utf-8", "replace").rstrip())

    async def _shutdown(self, timeout_s: float) -> None:
        client = self._client
        if client is None or client.stopped:
            return
        try:
            await asyncio.wait_for(client.shutdown_async(None), timeout_s)
            client.exit(None)
            await asyncio.wait_for(client.stop(), timeout_s)
        except Exception:  # killed by the caller
            pass

    async def _reap(self) -> None:
        """Wait for the killed process and let every task of the loop end, so nothing is left to collect."""
        process = getattr(self._client, "_server", None)
        if process is not None:
            await process.wait()
        current = asyncio.current_task()
        pending = [t for t in asyncio.all_tasks() if t is not current]
        if pending:
            _, left = await asyncio.wait(pending, timeout=1.0)
            for task in left:
                task.cancel()
            await asyncio.gather(*left, return_exceptions=True)

    def _kill(self) -> None:
        process = getattr(self._client, "_server", None)
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, 9)

    def _fail(self, line: str) -> None:
        if self.error is None:
            self.error = " ".join(line.split())[:300]

    def _why(self, err: BaseException) -> str:
        said = next((line for line in reversed(self._stderr) if line.strip()), "")
        text = str(err) or type(err).__name__
        return f"{text} ({said[:160]})" if said else text

    # ------------------------------------------------------------------ requests
    def _call(self, coro_fn, deadline: float, cancel: threading.Event | None = None):
        """Run `coro_fn(client)` on the loop, waiting until `deadline` (time.monotonic); ServerFailed otherwise."""
        client = self._client
        if client is None or client.stopped:
            self._fail(f"{self.spec.name} exited{self._last_said()}")
            raise ServerFailed(self.error)
        future = asyncio.run_coroutine_threadsafe(coro_fn(client), self._loop)
        try:
            answer = _wait(future, deadline, cancel)
        except Stopped:
            future.cancel()
            raise
        except TimeoutError:
            future.cancel()
            self._timeouts += 1
            if self._timeouts >= GIVE_UP_AFTER:
                self._fail(f"{self.spec.name} stopped answering ({self._timeouts} requests in a row timed out)")
                self._kill()
                raise ServerFailed(self.error) from None
            raise ServerFailed(f"{self.spec.name} did not answer in time") from None
        except Exception as err:
            if client.stopped:
                self._fail(f"{self.spec.name} exited{self._last_said()}")
                raise ServerFailed(self.error) from None
            raise ServerFailed(f"{self.spec.name}: {self._why(err)}") from None
        self._timeouts = 0
        return answer

    def _begin(self, timeout_s: float, cancel: threading.Event | None = None) -> float:
        """The deadline of a request of `timeout_s`, once the server is ready within it."""
        deadline = time.monotonic() + timeout_s
        self.wait_ready(timeout_s, cancel)
        return deadline

    def _last_said(self) -> str:
        said = next((line for line in reversed(self._stderr) if line.strip()), "")
        return f": {said[:160]}" if said else ""

    def uri(self, rel: str) -> str:
        return (self.root / rel).as_uri()

    def rel(self, uri: str) -> str | None:
        parsed = urlparse(uri)
        if parsed.scheme != "file":
            return None
        path = Path(os.path.realpath(unquote(parsed.path)))
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return None  # the standard library, a stub: outside the workspace

    def sync(self, rels: list[str]) -> None:
        """Tell the server what each file holds on disk now (open, change, or close a vanished one)."""
        from lsprotocol import types as T  # lazy: see _start

        for rel in rels:
            real = self.root / rel
            known = self._docs.get(rel)
            data = None
            with contextlib.suppress(OSError):  # (read whole each time: a same-size rewrite within one
                if real.stat().st_size <= MAX_DOC_BYTES:  # timestamp tick keeps size and mtime)
                    data = real.read_bytes()
            if data is None:
                if known is not None:
                    self._notify(lambda c, r=rel: c.text_document_did_close(T.DidCloseTextDocumentParams(
                        text_document=T.TextDocumentIdentifier(uri=self.uri(r)))))
                    del self._docs[rel]
                    self._changed(rel)
                continue
            digest = sha256_bytes(data)
            text = data.decode("utf-8", "replace")
            if known is None:
                self._notify(lambda c, r=rel, t=text: c.text_document_did_open(T.DidOpenTextDocumentParams(
                    text_document=T.TextDocumentItem(uri=self.uri(r), language_id=self.spec.language_id(r),
                                                     version=1, text=t))))
                self._docs[rel] = (1, digest)
                self._changed(rel)
            elif known[1] != digest:
                version = known[0] + 1
                self._notify(lambda c, r=rel, t=text, v=version: c.text_document_did_change(
                    T.DidChangeTextDocumentParams(
                        text_document=T.VersionedTextDocumentIdentifier(uri=self.uri(r), version=v),
                        content_changes=[T.TextDocumentContentChangeWholeDocument(text=t)])))
                self._docs[rel] = (version, digest)
                self._changed(rel)
            self._docs.move_to_end(rel)
        while len(self._docs) > MAX_OPEN:
            old, _ = self._docs.popitem(last=False)
            self._notify(lambda c, r=old: c.text_document_did_close(T.DidCloseTextDocumentParams(
                text_document=T.TextDocumentIdentifier(uri=self.uri(r)))))

    @_serialized
    def files_changed(self, changes: dict[str, int]) -> None:
        """Files created (1), changed (2) or deleted (3) outside the open documents (a move, a delete)."""
        from lsprotocol import types as T  # lazy: see _start

        if not changes or not self.ready:
            return
        events = [T.FileEvent(uri=self.uri(rel), type=T.FileChangeType(kind)) for rel, kind in changes.items()]
        self._notify(lambda c: c.workspace_did_change_watched_files(T.DidChangeWatchedFilesParams(changes=events)))
        self.generation += 1

    def _changed(self, rel: str) -> None:
        self.generation += 1
        self._results.pop(rel, None)
        with self._push_cond:
            self._change_mark = self._pushes

    def _notify(self, send) -> None:
        client = self._client

        def run() -> None:
            if not client.stopped:
                send(client)

        self._loop.call_soon_threadsafe(run)

    def open_docs(self) -> list[str]:
        return list(self._docs)

    @_serialized
    def diagnostics(self, rels: list[str], timeout_s: float,
                    cancel: threading.Event | None = None) -> dict[str, list[Diagnostic]]:
        """The server's diagnostics of each file as it is on disk now (pulled, all at once; a report
        already pulled since the last change anywhere is reused)."""
        from lsprotocol import types as T  # lazy: see _start

        deadline = self._begin(timeout_s, cancel)
        self.sync(list(dict.fromkeys([*rels, *self._docs])))
        wanted = [rel for rel in rels if rel in self._docs]
        todo = [rel for rel in wanted if self._results.get(rel, (-1,))[0] != self.generation]
        generation = self.generation

        async def pull(client):
            from pygls.exceptions import JsonRpcMethodNotFound  # lazy: see _start

            async def one(rel: str):
                return await client.text_document_diagnostic_async(T.DocumentDiagnosticParams(
                    text_document=T.TextDocumentIdentifier(uri=self.uri(rel))))
            try:
                return await asyncio.gather(*(one(rel) for rel in todo))
            except JsonRpcMethodNotFound:
                return None

        if todo and self._pull:
            reports = self._call(pull, deadline, cancel)
            if reports is None:
                self._pull = False  # from now on, what it pushes
            else:
                for rel, report in zip(todo, reports):
                    items = getattr(report, "items", None) or ()
                    self._results[rel] = (generation, [_diagnostic(rel, d) for d in items])
        if todo and not self._pull:
            for rel, found in self._await_pushes(todo, deadline, cancel).items():
                self._results[rel] = (generation, found)
        return {rel: self._results[rel][1] for rel in wanted if rel in self._results}

    def _await_pushes(self, rels: list[str], deadline: float, cancel) -> dict[str, list[Diagnostic]]:
        """Each file's diagnostics pushed since the last change, once the server has been quiet for QUIET_S
        (it publishes every open file after a change, the changed one first)."""
        with self._push_cond:
            while True:
                if all(self._pushed.get(rel, (0,))[0] > self._change_mark for rel in rels):
                    count = self._pushes
                    self._push_cond.wait(QUIET_S)
                    if self._pushes == count:
                        return {rel: self._pushed[rel][1] for rel in rels}
                    continue
                if cancel is not None and cancel.is_set():
                    raise Stopped("stopped by the user")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ServerFailed(f"{self.spec.name} published no diagnostics in time")
                self._push_cond.wait(min(left, POLL_S))

    @_serialized
    def references(self, rel: str, line: int, column: int, timeout_s: float,
                   also: Sequence[str] = ()) -> list[Location]:
        """Every reference to the name at `line`:`column` (1-indexed, characters), the declaration excluded.
        `also`: files to open first (where the map saw the name: a server still enumerating the workspace
        searches the open files surely)."""
        from lsprotocol import types as T  # lazy: see _start

        deadline = self._begin(timeout_s)
        self.sync([rel, *also])
        params = T.ReferenceParams(text_document=T.TextDocumentIdentifier(uri=self.uri(rel)),
                                   position=self._position(rel, line, column),
                                   context=T.ReferenceContext(include_declaration=False))
        found = self._call(lambda c: c.text_document_references_async(params), deadline) or []
        return self._locations(found)

    @_serialized
    def definition(self, rel: str, line: int, column: int, timeout_s: float) -> list[Location]:
        from lsprotocol import types as T  # lazy: see _start

        deadline = self._begin(timeout_s)
        self.sync([rel])
        params = T.DefinitionParams(text_document=T.TextDocumentIdentifier(uri=self.uri(rel)),
                                    position=self._position(rel, line, column))
        found = self._call(lambda c: c.text_document_definition_async(params), deadline) or []
        if not isinstance(found, (list, tuple)):
            found = [found]
        return self._locations(found)

    @_serialized
    def symbols(self, rel: str, timeout_s: float) -> list[Symbol]:
        """The file's symbols as the server sees them, nested ones flattened (parent named)."""
        from lsprotocol import types as T  # lazy: see _start

        deadline = self._begin(timeout_s)
        self.sync([rel])
        params = T.DocumentSymbolParams(text_document=T.TextDocumentIdentifier(uri=self.uri(rel)))
        found = self._call(lambda c: c.text_document_document_symbol_async(params), deadline) or []
        out: list[Symbol] = []

        def walk(items, parent: str) -> None:
            for s in items:
                rng = getattr(s, "range", None) or s.location.range
                out.append(Symbol(s.name, int(s.kind), rng.start.line + 1, rng.end.line + 1, parent))
                walk(getattr(s, "children", None) or (), f"{parent}.{s.name}" if parent else s.name)

        walk(found, "")
        return out

    def _position(self, rel: str, line: int, column: int):
        """An LSP position (UTF-16 code units) of a 1-indexed line and character column."""
        from lsprotocol import types as T  # lazy: see _start

        try:
            text = (self.root / rel).read_text("utf-8", "replace").splitlines()[line - 1]
        except (OSError, IndexError):
            text = ""
        units = len(text[: max(0, column - 1)].encode("utf-16-le")) // 2
        return T.Position(line=max(0, line - 1), character=units)

    def _locations(self, found) -> list[Location]:
        out = []
        for item in found:
            uri = getattr(item, "uri", None) or getattr(item, "target_uri", None)
            rng = getattr(item, "range", None) or getattr(item, "target_selection_range", None)
            rel = self.rel(uri) if uri else None
            if rel is None or rng is None:
                continue
            out.append(Location(rel, rng.start.line + 1, rng.end.line + 1, rng.start.character + 1))
        return sorted(set(out), key=lambda loc: (loc.path, loc.line, loc.column))


def _diagnostic(rel: str, d) -> Diagnostic:
    code = d.code if d.code is not None else ""
    return Diagnostic(rel, d.range.start.line + 1, d.range.start.character + 1, str(d.message), str(code),
                      int(d.severity or 1))

