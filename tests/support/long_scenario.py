"""A long scripted session on the httpx sources (tests/httpx_scenario.make_repo): what benchmarks/bench_long.py
drives through the app's, `chat`'s and ACP's agent, and what it measures afterwards (issue 28).

* `Script(root, turns)`: the session, turn by turn. The user's goal is stated in the first message; task
  segments (a plan with the todo tool, changed mid-way; decisions with log_decision; a file created, changed,
  moved; a test that fails, its fix, a second failure and its fix, a last failure left open) are spread
  evenly over the session, with stretches of browsing between them (file_meta, read_lines, grep, find over
  the real httpx sources, the ranges taken from their syntax trees). Every user message is unique, so the
  scripted model knows the turn from the request alone.
* `LongPolicy(script, summarizer)`: the scripted model (a ScriptedLLM responder). A compaction request
  (scenario_common.is_compaction) gets a summary in the five sections: `nothing` writes them empty,
  "(none)" under each; `everything` keeps every user message in their words, every decision, every path,
  the plan and every error line it finds in the request (its previous summary folded in). Any other
  request gets the next step of its turn: the turn is the newest user message's, the step counts the
  answers already given to it.
* Measurement, from the requests the server received and the session log: `usage_tokens` (input, read
  from the cache, written, output: either provider's usage), `request_text`, `facts` (what a request after
  a compaction must carry: the goal in the user's words, the plan step in progress, each decision in force,
  each file changed with its state, the open failure), `probe` (which of them it carries).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from support.fakellm import Reply
from support.scenario_common import COMPACT_MARK, DECISION, NOTE, PolicyError, content, is_compaction, is_new_turn

GOAL = ("My goal for this session: add request tracing to httpx. Every request should carry an id made by a "
        "new helper module, httpx/_ids.py, sent in a header we agree on, with a plain-python test that proves "
        "it; the public API must not change. Start by mapping how a request flows through httpx/_client.py.")
TEST = "python3 tests/test_ids.py"
ASYNC_TEST = "python3 tests/test_async_ids.py"

IDS_V1 = '''"""Request ids for tracing: one per request, sent in the request-id header."""
import secrets


def new_request_id() -> str:
    """A fresh request id, lowercase hex."""
    return secrets.token_hex(6)
'''

TEST_V1 = '''"""Checks of the request-id helper. Run: python3 tests/test_ids.py"""
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def load(rel):
    spec = importlib.util.spec_from_file_location("under_test", ROOT / rel)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ids = load("httpx/_ids.py")
value = ids.new_request_id()
assert len(value) == 16, f"request ids have {len(value)} characters, expected 16"
assert value != ids.new_request_id(), "two request ids are equal"
print("ok: request ids are 16 hex characters")
'''

ASYNC_TEST_TEXT = '''"""AsyncClient sends the request id too. Run: python3 tests/test_async_ids.py"""
import pathlib

source = (pathlib.Path(__file__).resolve().parent.parent / "httpx" / "_client.py").read_text()
async_part = source[source.index("class AsyncClient"):]
assert "REQUEST_ID_HEADER" in async_part, "AsyncClient never sends REQUEST_ID_HEADER (httpx/_client.py)"
print("ok: AsyncClient sends the request id")
'''

DECISION_1 = ("Request ids are 16 lowercase hex characters from secrets.token_hex(8), made only by "
              "new_request_id() and sent in the X-Request-ID header.")
DECISION_2 = ("The header name lives in one constant, REQUEST_ID_HEADER in httpx/_tracing.py; no other module "
              "spells it out.")
DECISION_3 = "Tests of the tracing work are plain python3 scripts under tests/, run as python3 tests/<name>.py."


def plan(*items: tuple[str, str]) -> dict:
    return {"items": [{"text": text, "status": status} for text, status in items]}


MAP, HELPER, TESTIT = ("map how a request flows through Client.send", "add httpx/_ids.py with new_request_id()",
                       "test it in tests/test_ids.py")
HEADER, DOCS = "send the id in the X-Request-ID header from build_request", "document it in docs/tracing.md"
MOVE, ASYNC = "move the helper to httpx/_tracing.py with the header constant", "make AsyncClient send it too"


@dataclass
class Turn:
    text: str  # the user's message
    steps: list[list[tuple[str, dict]]]  # the model's tool calls, one list per response
    answer: str  # the model's last response, without tools
    kind: str = "browse"  # browse | task


def _task_turns() -> list[Turn]:
    """The task segments, in order; the first is the goal."""
    return [
        Turn(GOAL, [[("file_meta", {"path": "httpx/_client.py"})]],
             "Client.send builds nothing itself: build_request makes the Request (headers merged there), "
             "send_handling_auth and send_handling_redirects wrap _send_single_request, which calls the "
             "transport. build_request is where an id header belongs.", "task"),
        Turn("Write the plan down with your todo tool so we can track it.",
             [[("todo", plan((MAP, "done"), (HELPER, "in_progress"), (TESTIT, "pending"), (HEADER, "pending"),
                            (DOCS, "pending")))]],
             "Plan written: mapping done, the helper is next.", "task"),
        Turn("Let's settle the id format and the header name now, and log it so it sticks.",
             [[("log_decision", {"decision": DECISION_1, "files": ["httpx/_ids.py"],
                                 "reasoning": "short enough for logs, long enough not to collide"})]],
             "Logged: 16 hex characters, X-Request-ID.", "task"),
        Turn("Create httpx/_ids.py with new_request_id().",
             [[("write_file", {"path": "httpx/_ids.py", "content": IDS_V1})]],
             "Created httpx/_ids.py with new_request_id().", "task"),
        Turn("Add a plain-python test for it in tests/test_ids.py and run it.",
             [[("write_file", {"path": "tests/test_ids.py", "content": TEST_V1})], [("run_command", {"cmd": TEST})]],
             "The test fails: the ids are 12 characters, not 16.", "task"),
        Turn("Fix the helper so the test passes, and update the plan.",
             [[("edit_file", {"path": "httpx/_ids.py", "old": "secrets.token_hex(6)", "new": "secrets.token_hex(8)"})],
              [("run_command", {"cmd": TEST})],
              [("todo", plan((MAP, "done"), (HELPER, "done"), (TESTIT, "done"), (HEADER, "in_progress"),
                             (DOCS, "pending")))]],
             "Fixed: token_hex(8) gives 16 characters and the test passes. Next: the header.", "task"),
        Turn("Change of plan: drop the docs page. First move the helper to httpx/_tracing.py next to a header "
             "constant, then the header, then AsyncClient too. Update the plan.",
             [[("todo", plan((MAP, "done"), (HELPER, "done"), (TESTIT, "done"), (MOVE, "in_progress"),
                             (HEADER, "pending"), (ASYNC, "pending")))]],
             "Plan changed: docs dropped, the move is in progress.", "task"),
        Turn("Log that the header name lives in a single constant.",
             [[("log_decision", {"decision": DECISION_2, "files": ["httpx/_tracing.py"],
                                 "reasoning": "one spelling, one place to change it"})]],
             "Logged.", "task"),
        Turn("Do the move: httpx/_ids.py becomes httpx/_tracing.py with the header constant; keep the test green.",
             [[("move_file", {"src": "httpx/_ids.py", "dst": "httpx/_tracing.py"})],
              [("edit_file", {"path": "httpx/_tracing.py", "old": "import secrets\n",
                              "new": "import secrets\n\nREQUEST_ID_HEADER = \"X-Request-Id\"\n"}),
               ("edit_file", {"path": "tests/test_ids.py", "old": 'load("httpx/_ids.py")',
                              "new": 'load("httpx/_tracing.py")'})],
              [("run_command", {"cmd": TEST})]],
             "Moved to httpx/_tracing.py with REQUEST_ID_HEADER; the test still passes.", "task"),
        Turn("Also log how we run the tests of this work.",
             [[("log_decision", {"decision": DECISION_3, "reasoning": "no test runner to install"})]],
             "Logged.", "task"),
        Turn("Point httpx/_client.py at the tracing module where the user agent is defined, and make the test "
             "check the header name.",
             [[("edit_file", {"path": "httpx/_client.py", "old": 'USER_AGENT = f"python-httpx/{__version__}"\n',
                              "new": 'USER_AGENT = f"python-httpx/{__version__}"\n'
                                     '# request ids: httpx/_tracing.py (REQUEST_ID_HEADER)\n'}),
               ("edit_file", {"path": "tests/test_ids.py", "old": 'print("ok: request ids are 16 hex characters")',
                              "new": 'assert ids.REQUEST_ID_HEADER == "X-Request-ID", '
                                     'f"the header is {ids.REQUEST_ID_HEADER!r}, expected \'X-Request-ID\'"\n'
                                     'print("ok: request ids are 16 hex characters, sent in X-Request-ID")'})],
              [("run_command", {"cmd": TEST})]],
             "The test now fails: the constant is spelled X-Request-Id.", "task"),
        Turn("Fix the constant's spelling, rerun the test, and move the plan on.",
             [[("edit_file", {"path": "httpx/_tracing.py", "old": '"X-Request-Id"', "new": '"X-Request-ID"'})],
              [("run_command", {"cmd": TEST})],
              [("todo", plan((MAP, "done"), (HELPER, "done"), (TESTIT, "done"), (MOVE, "done"),
                             (HEADER, "in_progress"), (ASYNC, "pending")))]],
             "Fixed; the test passes. The header is in progress.", "task"),
        Turn("Mark the header done (build_request sends it now) and start on AsyncClient: write its test first.",
             [[("todo", plan((MAP, "done"), (HELPER, "done"), (TESTIT, "done"), (MOVE, "done"), (HEADER, "done"),
                             (ASYNC, "in_progress")))],
              [("write_file", {"path": "tests/test_async_ids.py", "content": ASYNC_TEST_TEXT})],
              [("run_command", {"cmd": ASYNC_TEST})]],
             "The AsyncClient test fails as expected: AsyncClient never sends the header yet.", "task"),
    ]


@dataclass
class _Symbol:
    path: str
    name: str  # Class.method or function
    first: int
    last: int


def _symbols(root: Path) -> list[_Symbol]:
    """Functions and methods of 12-90 lines in the httpx copy, for browsing."""
    out = []
    for path in sorted((root / "httpx").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text())
        for node in tree.body:
            inner = [(f"{node.name}.{getattr(n, 'name', '')}", n) for n in node.body] if isinstance(node, ast.ClassDef) else \
                [(getattr(node, "name", ""), node)]
            for name, fn in inner:
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and 12 <= fn.end_lineno - fn.lineno <= 90:
                    out.append(_Symbol(rel, name, fn.lineno, fn.end_lineno))
    return out


def _browse_turns(root: Path, count: int) -> list[Turn]:
    symbols = _symbols(root)
    files = sorted({s.path for s in symbols})
    turns, seen = [], set()
    for i in range(count):
        sym = symbols[(i * 7) % len(symbols)]
        short = sym.name.rpartition(".")[2]
        kind = i % 4
        if kind == 0:
            path = files[(i // 4) % len(files)]
            turn = Turn(f"Show me the map of {path}: what lives there?", [[("file_meta", {"path": path})]],
                        f"{path} holds the pieces its map lists; the parts that matter for tracing are the ones "
                        "that build or send a Request, and none of them creates an id today.")
        elif kind == 1:
            turn = Turn(f"Read {sym.name} in {sym.path} and tell me what it does.",
                        [[("read_lines", {"path": sym.path, "start": sym.first, "end": sym.last})]],
                        f"{sym.name} ({sym.path} {sym.first}-{sym.last}) takes its arguments, normalises them and "
                        "hands the result on; it neither reads nor sets a request id, so tracing does not touch it.")
        elif kind == 2:
            turn = Turn(f"Where is {short} used across the package?",
                        [[("grep", {"pattern": rf"\b{re.escape(short)}\(", "path": "httpx"})]],
                        f"{short} is called from the places the grep lists; each call passes its arguments "
                        "through unchanged, so an id added upstream would reach it without edits.")
        else:
            turn = Turn(f"Find {sym.name} and show me its body.",
                        [[("find", {"query": short})],
                         [("read_lines", {"path": sym.path, "start": sym.first, "end": sym.last})]],
                        f"Found {sym.name} at {sym.path}:{sym.first}; its body is above. It is a leaf for our "
                        "purposes: no header handling.")
        while turn.text in seen:  # every user message unique: the model knows its turn by it
            turn.text += " Once more, please."
        seen.add(turn.text)
        turns.append(turn)
    return turns


class Script:
    """The session's turns (see the module doc): task segments spread evenly between browsing stretches."""

    def __init__(self, root: Path, turns: int) -> None:
        tasks = _task_turns()
        if turns < 2:
            raise ValueError("a session needs at least 2 turns")
        if turns >= 2 * len(tasks):
            at = [1 + round(k * (turns - 1) / len(tasks)) for k in range(len(tasks))]
        else:  # short: the first tasks, one every other turn
            at = list(range(1, turns + 1, 2))[:len(tasks)]
        browse = iter(_browse_turns(root, turns))
        by_turn = dict(zip(at, tasks))
        self.turns: list[Turn] = [by_turn.get(n) or next(browse) for n in range(1, turns + 1)]
        self.index = {t.text: i for i, t in enumerate(self.turns)}

    def __len__(self) -> int:
        return len(self.turns)


# --------------------------------------------------------------------------- the scripted model

SECTION_TITLES = ("Task & instructions", "Decisions & conventions", "Files touched", "Open to-dos", "Errors seen")
NOTHING = "\n".join(f"## {title}\n(none)" for title in SECTION_TITLES)


RANK_MARK = "You rank code search results"  # the find tool's second tier asks the chat model (index/query.py)


def kind_of(body: dict) -> str:
    """What a request the server received is: `compaction`, `rank` (find's ranking of candidates) or `step`
    (one of the agent's model calls)."""
    messages = body.get("messages") or []
    if is_compaction(messages):
        return "compaction"
    if messages and content(messages[0]).startswith(RANK_MARK):
        return "rank"
    return "step"


def rank(messages: list[dict]) -> str:
    """find's ranking: the candidates whose name is the query, best first, or NONE."""
    asked = "\n".join(content(m) for m in messages)  # the candidates (a stable list, then the query's own)
    query = re.search(r"^Query: (.*)$", asked, re.M)
    numbers = [m.group(1) for m in re.finditer(r"^(\d+)\. .*$", asked, re.M)
               if query and re.search(rf"\b{re.escape(query.group(1).strip())}\b", m.group(0))]
    return "\n".join(numbers[:3]) or "NONE"


class LongPolicy:
    """The scripted model of the long session (see the module doc)."""

    def __init__(self, script: Script, summarizer: str) -> None:
        if summarizer not in ("nothing", "everything"):
            raise ValueError(f"unknown summarizer {summarizer!r}")
        self.script, self.summarizer = script, summarizer
        self.turn, self.step = -1, 0
        self.compactions = 0

    def __call__(self, body: dict) -> Reply:
        messages = body["messages"]
        kind = kind_of(body)
        if kind == "compaction":
            self.compactions += 1
            reply = Reply(text=NOTHING if self.summarizer == "nothing" else keep_everything(messages))
        elif kind == "rank":
            reply = Reply(text=rank(messages))
        else:
            reply = self._next(messages)
        reply.args_chunk_size, reply.text_chunk_size = 256, 128  # streamed, in few chunks
        return reply

    def _next(self, messages: list[dict]) -> Reply:
        asked = next((content(m) for m in reversed(messages) if m.get("role") == "user" and not
                      content(m).startswith(NOTE)), None)
        if asked not in self.script.index:
            raise PolicyError(f"a request whose newest user message is not the script's: {str(asked)[:80]!r}")
        turn = self.script.index[asked]
        if is_new_turn(messages):
            self.turn, self.step = turn, 0
        elif turn != self.turn:
            raise PolicyError(f"tool results for turn {turn + 1}, which the model is not in")
        script = self.script.turns[turn]
        step, self.step = self.step, self.step + 1
        if step < len(script.steps):
            return Reply(text="", tool_calls=script.steps[step])
        return Reply(text=script.answer)


def _sections(text: str) -> dict[str, list[str]]:
    """The lines under each of the five headings in a summary text."""
    found: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        heading = re.match(r"^## (.+?)\s*$", line)
        if line.startswith("[turn ") or re.match(r"^Turns \d+\S* to fold in:", line):
            current = None  # a transcript's turns follow the previous summary
        elif heading:
            current = heading.group(1) if heading.group(1) in SECTION_TITLES else None
            continue
        if current and line.strip() and line.strip() != "(none)":
            found.setdefault(current, []).append(line.rstrip())
    return found


def keep_everything(messages: list[dict]) -> str:
    """A summary that keeps everything the request shows: the previous summary's lines, every user message
    in the user's words, every decision, every path a tool call named, the plan the prompt gives, and the
    error lines of the tool results."""
    keep: dict[str, list[str]] = {title: [] for title in SECTION_TITLES}
    for m in messages:
        text = content(m)
        if "## Task & instructions" in text and not text.startswith(COMPACT_MARK):  # a previous summary
            for title, lines in _sections(text).items():
                keep[title] += lines
    transcript = bool(messages) and content(messages[0]).startswith(COMPACT_MARK)  # the turns as text
    for m in messages:
        text = content(m)
        role = m.get("role")
        if transcript and role == "user":
            keep["Task & instructions"] += [f'- the user: "{" ".join(quote.split())}"'
                                            for quote in re.findall(r"^\[turn \d+\] user: (.*)$", text, re.M)]
            keep["Decisions & conventions"] += [f"- {line}" for line in re.findall(
                r"log_decision\((\{.*\})\)$", text, re.M)]
            keep["Errors seen"] += [f"- {line}" for line in re.findall(r"^\[turn \d+\] tool \w+ FAILED: (.*)$", text, re.M)]
        elif role == "user" and not text.startswith((NOTE, COMPACT_MARK)):
            keep["Task & instructions"].append(f'- the user: "{" ".join(text.split())}"')
        if role != "assistant":
            keep["Decisions & conventions"] += [f"- [D:{did}] {line}" for did, line in DECISION.findall(text)]
        for call in m.get("tool_calls") or ():
            args = json.loads(call["function"]["arguments"] or "{}")
            if call["function"]["name"] == "log_decision":
                keep["Decisions & conventions"].append(f"- {args.get('decision', '')}")
            for key in ("path", "src", "dst"):
                if isinstance(args.get(key), str):
                    keep["Files touched"].append(f"- {args[key]} ({call['function']['name']})")
        if role == "tool":
            keep["Errors seen"] += [f"- {line.strip()}" for line in text.splitlines()
                                    if re.search(r"\w*Error\b|^error:|\[exit [1-9]", line.strip())]
        if text.startswith(COMPACT_MARK) or role == "user":
            plan_at = text.find("in this order:\n")
            if plan_at >= 0:
                keep["Open to-dos"] += [line for line in text[plan_at + 15:].splitlines() if line.startswith("- ")]
    return "\n".join(f"## {title}\n" + ("\n".join(dict.fromkeys(keep[title])) or "(none)")
                     for title in SECTION_TITLES)


# --------------------------------------------------------------------------- measuring

def usage_tokens(usage: dict) -> tuple[int, int, int, int, int]:
    """(input, read from the cache, written to it, of which written for 1 h, output) of one answer's usage,
    Anthropic's or OpenAI's (input counts every prompt token, cached or not)."""
    if "prompt_tokens" in usage:
        read = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
        return int(usage["prompt_tokens"]), read, 0, 0, int(usage.get("completion_tokens") or 0)
    read = int(usage.get("cache_read_input_tokens") or 0)
    written = int(usage.get("cache_creation_input_tokens") or 0)
    long = int((usage.get("cache_creation") or {}).get("ephemeral_1h_input_tokens") or 0)
    return int(usage.get("input_tokens") or 0) + read + written, read, written, long, int(usage.get("output_tokens") or 0)


def _norm(text: str) -> str:
    return " ".join(text.split())


def request_text(body: dict) -> str:
    """Everything a request says (message texts and tool-call arguments), whitespace normalised."""
    parts = []
    for m in body.get("messages") or ():
        parts.append(content(m))
        for call in m.get("tool_calls") or ():
            parts.append(call["function"]["arguments"] or "")
    return _norm("\n".join(parts))


@dataclass
class Facts:
    """What a request after a compaction must carry, from the log before it (each kind: name -> text)."""

    goal: dict[str, str] = field(default_factory=dict)
    plan_step: dict[str, str] = field(default_factory=dict)
    decisions: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # path (state) -> the text(s) that must appear, | separated
    failure: dict[str, str] = field(default_factory=dict)

    KINDS = ("goal", "plan_step", "decisions", "files", "failure")

    def items(self):
        for kind in self.KINDS:
            for name, text in getattr(self, kind).items():
                yield kind, name, text


def facts(records: list[dict]) -> Facts:
    """The facts in force after `records` (a session log's, in order)."""
    from workstation.sessions.plan import current

    out = Facts()
    users = [r for r in records if r.get("type") == "user"]
    if users:
        out.goal["the first message"] = _norm(str(users[0].get("content") or ""))
    for item in current(records) or ():
        if item["status"] == "in_progress":
            out.plan_step[item["text"]] = item["text"]
    calls = {c.get("id"): c for r in records if r.get("type") == "assistant" for c in r.get("tool_calls") or ()}
    state: dict[str, tuple[str, str]] = {}  # path now -> (state, where it came from)
    failures: dict[str, str] = {}  # command -> its error line, while it has not passed since
    for r in records:
        if r.get("type") != "tool" or not r.get("ok", True):
            if r.get("type") == "tool" and r.get("name") == "run_command":
                args = _args(calls.get(r.get("tool_call_id")))
                lines = [line.strip() for line in str(r.get("content") or "").splitlines() if "Error" in line]
                failures.pop(args.get("cmd", ""), None)
                failures[args.get("cmd", "")] = lines[-1] if lines else _norm(str(r.get("content") or ""))[:120]
            continue
        name, args = r.get("name"), _args(calls.get(r.get("tool_call_id")))
        if name == "log_decision" and args.get("decision"):
            out.decisions[args["decision"][:40]] = _norm(args["decision"])
        elif name == "run_command":
            failures.pop(args.get("cmd", ""), None)
        elif name == "write_file" and args.get("path"):
            path = args["path"]
            state[path] = ("changed" if path in state and state[path][0] != "deleted" else "created", "")
        elif name in ("edit_file", "replace_lines") and args.get("path"):
            path = args["path"]
            state[path] = (state[path][0] if path in state and state[path][0].startswith(("created", "moved"))
                           else "changed", state.get(path, ("", ""))[1])
        elif name == "move_file" and args.get("src") and args.get("dst"):
            was = state.pop(args["src"], ("", ""))
            state[args["dst"]] = (f"moved from {args['src']}" if not was[0].startswith("created") else
                                  f"created, moved from {args['src']}", args["src"])
        elif name == "delete_file" and args.get("path"):
            state[args["path"]] = ("deleted", "")
    for path, (how, src) in state.items():
        out.files[f"{path} ({how})"] = path if not src else f"{path}|{src}"
    if failures:
        cmd, line = list(failures.items())[-1]
        out.failure[cmd] = _norm(line)
    return out


def _args(call: dict | None) -> dict:
    if not call:
        return {}
    raw = call.get("arguments")
    if isinstance(raw, dict):
        return raw
    try:
        return json.loads(raw or "{}")
    except ValueError:
        return {}


def probe(found: Facts, text: str) -> list[tuple[str, str, bool]]:
    """(kind, name, present) of every fact in `found`, against a request's text (request_text)."""
    return [(kind, name, all(part in text for part in want.split("|"))) for kind, name, want in found.items()]
