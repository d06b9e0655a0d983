"""Protocol servers' start-up against their peers: a fresh process each time, clock from spawn to the answer.

    .venv/bin/python benchmarks/bench_start.py [--runs 7]

ACP: `workstation acp` against claude-agent-acp (npm `@zed-industries/claude-agent-acp`), from spawning the
process until `initialize` is answered; for ours also until `session/new` is answered (a session made in a
fresh workspace with a model configured, so nothing may wait on litellm).
MCP: `workstation mcp` against `@modelcontextprotocol/server-everything` (stdio), from spawning the process
until `tools/list` is answered (after `initialize` and `notifications/initialized`, as a client sends them).
The peers are installed from the npm registry, pinned, into the venv's npm-tools cache (tests/support/npm_support)
and run with the venv's Node. Runs are interleaved, so a busy moment hits both alike; the CPU time (user + sys)
each process used until its answer is printed beside the wall time, and the load average with the figures.
Targets (issue 31): ACP `initialize` <= claude-agent-acp's; MCP `tools/list` <= 1.2x server-everything's.

--memory TURNS: the app's memory, resumed on a session of TURNS turns (`workstation PATH --session SLUG` on a
160x48 pseudo-terminal, the model a scripted server on 127.0.0.1), once the app is idle (no CPU used for 2 s)
after the session shows, then again after one prompt answered through the real litellm path: the resident
memory (VmRSS) of the app and of its sidecar, each; a bare Textual app's beside them. Targets (issue 31):
app <= 120 MB before its first model call, <= 200 MB after; sidecar <= 60 MB.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import results  # noqa: E402  (benchmarks/results.py, beside this script)

CLAUDE_ACP = ("@zed-industries/claude-agent-acp", "0.23.1", "claude-agent-acp")
EVERYTHING = ("@modelcontextprotocol/server-everything", "2026.8.31", "mcp-server-everything")
ACP_INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": False,
                                                                            "writeTextFile": False}}}}
MCP_INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "bench", "version": "1"}}}
MCP_INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
MCP_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


def _cpu(pid: int) -> float:
    """CPU seconds (user + sys) the process used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Peer:
    """A JSON-RPC server on stdio: send lines, wait for the answer with an id."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path):
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=env, cwd=cwd)
        self.buffer = b""

    def send(self, message: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def answer(self, ident: int, timeout: float = 120.0) -> tuple[float, float, dict]:
        """(seconds since spawn, CPU seconds, the response) once the response to `ident` arrived."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if isinstance(message, dict) and message.get("id") == ident and "method" not in message:
                    at = time.perf_counter() - self.started
                    if "error" in message:
                        raise RuntimeError(f"error answer: {message['error']}")
                    return at, _cpu(self.proc.pid), message
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer to {ident} within {timeout} s")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                data = os.read(fd, 1 << 16)
                if not data:
                    raise RuntimeError(f"the server exited ({self.proc.wait()}) before answering {ident}")
                self.buffer += data

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def workstation_argv() -> list[str]:
    return [sys.executable, "-m", "workstation"]


def acp_round(home: Path, repo: Path, env: dict, peer_argv: list[str], node_env: dict) -> dict[str, tuple]:
    got: dict[str, tuple] = {}
    ours = Peer([*workstation_argv(), "-C", str(repo), "acp"], env, repo)
    ours.send(ACP_INIT)
    at, cpu, _ = ours.answer(0)
    got["ours: initialize"] = (at, cpu)
    ours.send({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(repo), "mcpServers": []}})
    at, cpu, _ = ours.answer(1)
    got["ours: session/new"] = (at, cpu)
    ours.close()
    peer = Peer(peer_argv, node_env, repo)
    peer.send(ACP_INIT)
    at, cpu, _ = peer.answer(0)
    got["claude-agent-acp: initialize"] = (at, cpu)
    peer.close()
    return got


def mcp_round(repo: Path, env: dict, peer_argv: list[str], node_env: dict) -> dict[str, tuple]:
    got: dict[str, tuple] = {}
    for name, argv, environ in (("ours", [*workstation_argv(), "-C", str(repo), "mcp"], env),
                                ("server-everything", peer_argv, node_env)):
        server = Peer(argv, environ, repo)
        server.send(MCP_INIT)
        at, cpu, _ = server.answer(0)
        got[f"{name}: initialize"] = (at, cpu)
        server.send(MCP_INITIALIZED)
        server.send(MCP_TOOLS)
        at, cpu, answer = server.answer(1)
        got[f"{name}: tools/list"] = (at, cpu)
        assert answer["result"]["tools"], f"{name} listed no tools"
        server.close()
    return got


def _table(title: str, rounds: list[dict[str, tuple]]) -> dict[str, float]:
    print(title)
    medians = {}
    for key in rounds[0]:
        walls = [r[key][0] for r in rounds]
        cpus = [r[key][1] for r in rounds]
        medians[key] = statistics.median(walls)
        print(f"  {key:<34} wall median {statistics.median(walls) * 1000:6.0f} ms  best {min(walls) * 1000:6.0f} ms"
              f"   CPU median {statistics.median(cpus) * 1000:6.0f} ms")
        results.add(f"{key}, wall median", statistics.median(walls) * 1000, "ms")
        results.add(f"{key}, CPU median", statistics.median(cpus) * 1000, "ms")
    return medians


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


def _idle(pids: list[int], quiet_s: float = 2.0, within: float = 180.0) -> None:
    """Until none of pids used CPU for quiet_s (polled every 0.5 s), at most `within` seconds."""
    deadline = time.monotonic() + within
    last, still = None, 0.0
    while time.monotonic() < deadline:
        now = sum(_cpu(p) for p in pids if Path(f"/proc/{p}").exists())
        still = still + 0.5 if now == last else 0.0
        if still >= quiet_s:
            return
        last = now
        time.sleep(0.5)


def memory_after_resume(turns: int) -> None:
    from support.fakellm import Reply, ScriptedLLM
    from support.pty_support import Terminal
    from support.sessions_support import fill_turns
    from workstation.paths import Paths
    from workstation.sessions import Session

    script = str(Path(sys.executable).with_name("workstation"))
    bare_app = "from textual.app import App\nfrom textual.widgets import Footer, Static\nclass Bare(App):\n" \
               "    def compose(self):\n        yield Static('bare ready')\n        yield Footer()\nBare().run()\n"
    with tempfile.TemporaryDirectory() as tmp, ScriptedLLM(lambda body: Reply(text="probe-reply-ok"), model_ids=("gpt-4o-mini",)) as llm:
        home, repo, user = Path(tmp) / "home", Path(tmp) / "repo", Path(tmp) / "user"
        for folder in (home, repo, user):
            folder.mkdir()
        (repo / "main.py").write_text("def main():\n    return 1\n")
        (home / "config.toml").write_text(f'[model]\nname = "openai/gpt-4o-mini"\napi_base = "{llm.url}"\n'
                                          'api_key_env = "WS_BENCH_KEY"\n'
                                          '[lsp]\nenabled = false\n')
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(WORKSTATION_HOME=str(home), HOME=str(user), WS_BENCH_KEY="sk-bench-not-a-key",
                   LITELLM_LOCAL_MODEL_COST_MAP="True")
        env.pop("WORKSTATION_MODEL", None)
        os.environ["WORKSTATION_HOME"] = str(home)
        # the session is written once per machine (20,000 records take a minute or two), then copied
        template = Path(tempfile.gettempdir()) / f"workstation-bench-start-{turns}-turns"
        if not (template / "slug").exists():
            started = time.perf_counter()
            shutil.rmtree(template, ignore_errors=True)
            (template / "repo").mkdir(parents=True)
            session = Session.create(Paths.for_root(template / "repo"), title="long")
            fill_turns(session, turns)
            (template / "slug").write_text(session.slug)
            print(f"memory: a session of {turns:,} turns written in {time.perf_counter() - started:.1f} s "
                  f"(kept in {template})")
        slug = (template / "slug").read_text()
        shutil.copytree(template / "repo" / ".workstation", repo / ".workstation")
        with Terminal([script, str(repo), "--session", slug], repo, env=env) as term:
            term.wait_for(b"turn " + str(turns).encode() + b": done", timeout=180)
            pids = [term.pid, *_children(term.pid)]
            _idle(pids)
            before = {"app": _rss_mb(term.pid), "sidecar": sum(_rss_mb(c) for c in _children(term.pid))}
            mark = term.mark()
            term.send(b"say hello\r")
            term.wait_for(b"probe-reply-ok", timeout=300, since=mark)
            _idle([term.pid, *_children(term.pid)])
            after = {"app": _rss_mb(term.pid), "sidecar": sum(_rss_mb(c) for c in _children(term.pid))}
            term.send(b"\x11")
            term.wait_exit(30)
        with Terminal([sys.executable, "-c", bare_app], repo, env=env) as term:
            term.wait_for(b"bare ready")
            _idle([term.pid])
            bare = _rss_mb(term.pid)
            term.send(b"\x11")
            term.wait_exit(15)
    print(f"memory (VmRSS) after resuming {turns:,} turns; load average {os.getloadavg()[0]:.1f}:")
    for label, figures, target in (("before the first model call", before, 120), ("after it", after, 200)):
        print(f"  app {label:<28} {figures['app']:6.0f} MB   (target <= {target} MB)"
              f"   sidecar {figures['sidecar']:5.0f} MB   (target <= 60 MB)")
        results.add(f"memory: app {label}", figures["app"], "MB")
        results.add(f"memory: sidecar, app {label}", figures["sidecar"], "MB")
    print(f"  bare Textual app                     {bare:6.0f} MB")
    results.add("memory: bare Textual app", bare, "MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--memory", type=int, metavar="TURNS", default=0,
                        help="measure the app's memory resumed on TURNS turns (10000 for issue 31) instead")
    args = parser.parse_args()
    from support.npm_support import bin_of, node_env

    run = results.Run("bench_start", vars(args))
    if args.memory:
        memory_after_resume(args.memory)
        run.save()
        return
    claude_acp = bin_of(*CLAUDE_ACP)
    everything = bin_of(*EVERYTHING)
    with tempfile.TemporaryDirectory() as tmp:
        home, repo = Path(tmp) / "home", Path(tmp) / "repo"
        home.mkdir()
        repo.mkdir()
        (repo / "main.py").write_text("def main():\n    return 1\n")
        # a model configured (never called): what a user has, so litellm would be wanted
        (home / "config.toml").write_text('[model]\nname = "openai/test-model"\napi_base = "http://127.0.0.1:9/v1"\n'
                                          '[lsp]\nenabled = false\n')
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(WORKSTATION_HOME=str(home), HOME=str(Path(tmp) / "user"), LITELLM_LOCAL_MODEL_COST_MAP="True")
        env.pop("WORKSTATION_MODEL", None)
        (Path(tmp) / "user").mkdir()
        nenv = node_env(HOME=str(Path(tmp) / "user"))
        subprocess.run([*workstation_argv(), "--version"], env=env, capture_output=True, check=True)  # bytecode
        acp_rounds, mcp_rounds = [], []
        for _ in range(args.runs):
            acp_rounds.append(acp_round(home, repo, env, claude_acp, nenv))
            mcp_rounds.append(mcp_round(repo, env, everything, nenv))
    print(f"{args.runs} runs each, interleaved; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    acp = _table("ACP, from spawn:", acp_rounds)
    ratio = acp["ours: initialize"] / acp["claude-agent-acp: initialize"]
    results.add("ACP initialize / claude-agent-acp", ratio, "x")
    print(f"  initialize: ours / claude-agent-acp = {ratio:.2f}x   (target <= 1.0x)")
    mcp = _table("MCP, from spawn:", mcp_rounds)
    ratio = mcp["ours: tools/list"] / mcp["server-everything: tools/list"]
    results.add("MCP tools/list / server-everything", ratio, "x")
    print(f"  tools/list: ours / server-everything = {ratio:.2f}x   (target <= 1.2x)")
    run.save()


if __name__ == "__main__":
    main()
