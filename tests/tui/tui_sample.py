"""Fixed sample data for the TUI tests, snapshots and the benchmark."""

from __future__ import annotations

from workstation.tui.viewdata import MapEntry, MemoryEntry, SymbolEntry, TimelineEvent, Turn

T0 = 1_760_000_000.0  # a fixed instant; tests pin TZ=UTC so times render the same everywhere

TURNS = [
    Turn("compaction", "turns 1–40 compacted by gpt-4o-mini", id="c1", ts=T0,
         result="**Task**: add a `timeout` parameter to the public client API.\n\n"
                "- Decisions: thread it through `send()`\n- Files: `src/client.py`"),
    Turn("user", "Add a timeout parameter to every public function in src/client.py",
         id="u41", ts=T0 + 5, tokens=18, number=41),
    # tool turns as the backend derives them (replay.episode.tool_turn): the call's label and its outcome
    Turn("tool", "file_meta(src/client.py)", id="t1", ts=T0 + 6, tool="file_meta", args={"path": "src/client.py"},
         result="class Client (12–88)\n  def send (20–41)\n  def close (43–50)", ok=True, outcome="3 lines"),
    Turn("tool", "read_lines(src/client.py 20-41)", id="t2", ts=T0 + 7, tool="read_lines",
         args={"path": "src/client.py", "start": 20, "end": 41},
         result="\n".join(f"line {n}" for n in range(20, 42)), ok=True, outcome="22 lines"),
    Turn("redaction", "[REDACTED: Output of grep (5,400 chars). Key context: src/client.py.]",
         id="r1", ts=T0 + 8),
    Turn("assistant", "I will thread `timeout` through `Client.send`:\n\n"
         "1. add the parameter with a default of `None`\n2. pass it to `_transport.request`\n\n"
         "```python\ndef send(self, request, timeout=None):\n    ...\n```",
         id="a41", ts=T0 + 9, tokens=412),
    Turn("tool", "replace_lines(src/client.py 20-20)", id="t3", ts=T0 + 10, tool="replace_lines",
         args={"path": "src/client.py", "start": 20, "end": 20},
         result="refused: src/client.py changed since it was read", ok=False,
         outcome="refused: src/client.py changed since it was read"),
    Turn("notice", "model gpt-4o-mini · 3 tools · 1.9 s", ts=T0 + 11),
]

ROOT = [
    MapEntry("src", "dir"),
    MapEntry("tests", "dir"),
    MapEntry("README.md", "file", purpose="What the project is and how to run it", lines=42,
             language="markdown"),
    MapEntry("pyproject.toml", "file", purpose="Packaging and dependencies", lines=30,
             language="toml"),
]
CHILDREN = {
    "src": [
        MapEntry("src/client.py", "file", purpose="HTTP client: sessions, send, close", lines=88,
                 language="python"),
        MapEntry("src/transport.py", "file", purpose="Low-level transport over sockets", lines=140,
                 language="python", freshness="stale"),
        MapEntry("src/util", "dir"),
    ],
    "tests": [MapEntry("tests/test_client.py", "file", purpose="Client tests", lines=64)],
}
SYMBOLS = {
    "src/client.py": [
        SymbolEntry("Client", "class", 12, 88, signature="class Client"),
        SymbolEntry("send", "method", 20, 41, parent="Client", signature="def send(self, request)"),
        SymbolEntry("close", "method", 43, 50, parent="Client", signature="def close(self)"),
        SymbolEntry("connect", "function", 90, 99, signature="def connect(url)"),
    ],
}
PREVIEW = ("    def send(self, request):\n"
           "        \"\"\"Send a request and return the response.\"\"\"\n"
           "        response = self._transport.request(request)\n"
           "        return response\n")

STM = [MemoryEntry("plan", ["add timeout", "thread it", "test"]), MemoryEntry("step", 3)]
LTM = [
    MemoryEntry("naming", "snake_case for parameters", namespace="conventions", updated="2025-10-09"),
    MemoryEntry("timeout_default", None, namespace="decisions", updated="2025-10-09"),
    MemoryEntry("test_cmd", "python -m pytest -q", namespace="project", updated="2025-10-08"),
]
EVENTS = [
    TimelineEvent(T0 + 5.0, "operation", "turn 41", duration_ms=1900, id="e1", turn_id="u41"),
    TimelineEvent(T0 + 5.2, "memory", "qmem ltm conventions", duration_ms=0.4, id="e2",
                  details={"hit": True}),
    TimelineEvent(T0 + 6.0, "tool", "file_meta", duration_ms=12, id="e3", turn_id="t1",
                  details={"path": "src/client.py", "result_chars": 61}),
    TimelineEvent(T0 + 7.0, "tool", "read_lines", duration_ms=3, id="e4", turn_id="t2",
                  details={"path": "src/client.py", "lines": "20-41"}),
    TimelineEvent(T0 + 9.0, "model", "gpt-4o-mini", duration_ms=1450, tokens=2412, id="e5",
                  turn_id="a41", details={"tokens_in": 2000, "tokens_out": 412}),
    TimelineEvent(T0 + 10.0, "tool", "replace_lines", duration_ms=2, id="e6", turn_id="t3",
                  details={"outcome": "refused"}),
    TimelineEvent(T0 + 11.0, "compaction", "turns 1–40", duration_ms=3100, tokens=1200, id="e7",
                  turn_id="c1"),
]


def synthetic_turns(count: int, start: int = 0) -> list[Turn]:
    """Varied turns for volume tests: user, assistant markdown, tool calls."""
    out = []
    for n in range(start, start + count):
        kind = n % 4
        if kind == 0:
            out.append(Turn("user", f"question {n}: what does function_{n} do?", id=f"s{n}"))
        elif kind == 1:
            out.append(Turn("assistant", f"Function `f{n}` returns **{n}**.\n\n- one\n- two",
                            id=f"s{n}", tokens=40))
        else:
            out.append(Turn("tool", id=f"s{n}", tool="read_lines",
                            args={"path": f"src/m{n}.py", "start": 1, "end": 9},
                            result="\n".join(f"line {k}" for k in range(9))))
    return out


def load(app) -> None:
    """Feed every pane of a WorkstationApp with the sample data."""
    app.chat.set_turns(TURNS)
    app.chat.set_context(61_000, 128_000)
    app.chat.set_status("gpt-4o-mini · ready")
    app.map.set_root(ROOT, label="demo")
    app.map.set_children("src", CHILDREN["src"])
    app.memory.set_entries("stm", STM)
    app.memory.set_entries("ltm", LTM)
    app.memory.set_events(EVENTS)
    app.timeline.set_events(EVENTS)
