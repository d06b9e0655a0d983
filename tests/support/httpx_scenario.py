"""Seed 003's own evaluation, on the real httpx sources: add `request_id` to the public API and propagate it
through Client and AsyncClient. Shared by benchmarks/bench_agent.py and tests/integration/test_httpx_scenario.py.

* `make_repo(root)` copies the .py files of the httpx package installed beside litellm into root/httpx/
  (nothing downloads; the copy lives only as long as the run).
* The task, exactly (the policy decides it and the check proves it):
  - the public API functions of httpx/_api.py (its `__all__`: request, stream, get, options, head, post,
    put, patch, delete) and the methods of the same names on Client and AsyncClient in httpx/_client.py
    take `request_id: str | None = None` as their last (keyword-only) parameter;
  - every call from one of them to another passes `request_id=request_id`: _api's verbs -> request,
    request -> Client.request, stream -> Client.stream, the clients' verbs -> self.request, and
    request/stream -> self.build_request;
  - BaseClient.build_request, which both clients build every request with, takes it as well and records it
    in the request's extensions["request_id"] (left out when None), where transports and event hooks read
    it. `send` takes a Request already built, which carries the id, so it is left as it is.
* `HttpxRequestIdPolicy` is the scripted model (a ScriptedLLM responder) doing it as a memory-first agent
  would, deciding each step from the request's messages: it maps the files the task names (file_meta, with
  the larger budget when the context's map of a file is cut, or again with it when a map comes back cut), logs the
  convention once (log_decision) and cites [D:id] whenever it applies it, greps each file for the
  definitions, the calls and the closing parentheses of the targets (a grep is not a file read), reads only
  build_request's body (the one edit beyond a line insertion) and edits with replace_lines and edit_file
  callee first, from the sink up (build_request, the clients' methods, then _api.py), so that no edit
  leaves a call passing request_id to a function that does not take it yet (HttpxRequestIdPolicy._edit):
  with `per_function=True` one function's edits per response (as a model reading each result before its
  next edit would; bench_agent's default, --httpx-steps function), else all of a file's edits in one
  response (as one MultiEdit-like batch). The second turn checks from fresh maps and one grep. It answers
  compaction requests with a summary (tests/support/scenario_common.py).
* `check_repo(root)` proves the edit: the signatures and every call between the targets (compared with
  the calls in the installed, unedited package), then the edited package imported in a subprocess sends
  requests through httpx.MockTransport (no network) with every function of the API, sync and async, and
  the transport must see each request's id.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from support.fakellm import Reply
from support.scenario_common import (PolicyError, ScriptedPolicy, content, context_text, decision, is_note, numbered_rows,
                             whole_map)

API, CLIENT = "httpx/_api.py", "httpx/_client.py"
CLASSES = ("Client", "AsyncClient")
SINK = ("BaseClient", "build_request")
PARAM = "request_id: str | None = None"
TASK = (f"Add a `{PARAM}` parameter to every public API function in {API} and propagate it through the "
        f"Client and AsyncClient call chains in {CLIENT}, so that one request can be traced end to end.")
CHECK = (f"Check that every public API function in {API} and the request methods of Client and AsyncClient in "
         f"{CLIENT} now take request_id and pass it on.")
# Seed 003's table, as its README prints it (encode/httpx, the same task).
SEED = {"file_reads": (4, 7), "memory_queries": (8, 0), "memory_hits": (3, 0), "reads_avoided": (3, None),
        "decisions_reused": (19, None)}
SEED_REDUCTION = 0.429  # 1 - 4/7


def source_package() -> Path:
    import httpx

    return Path(httpx.__file__).resolve().parent


def make_repo(root: Path) -> list[str]:
    """Copy the installed httpx package's .py files to root/httpx; returns their paths."""
    src = source_package()
    copied = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src)
        if "__pycache__" in rel.parts:
            continue
        dest = root / "httpx" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
        copied.append(f"httpx/{rel.as_posix()}")
    return copied


# --------------------------------------------------------------------------- checking the result

def _api_names(tree: ast.Module) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            return sorted(ast.literal_eval(node.value))
    raise ValueError("httpx/_api.py has no __all__")


def targets(api: str, client: str) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """'request', 'Client.get', 'BaseClient.build_request', ... -> their definitions, from the sources."""
    api_tree, client_tree = ast.parse(api), ast.parse(client)
    names = _api_names(api_tree)
    found: dict = {n.name: n for n in api_tree.body if isinstance(n, ast.FunctionDef) and n.name in names}
    for cls in client_tree.body:
        if not isinstance(cls, ast.ClassDef) or cls.name not in (*CLASSES, SINK[0]):
            continue
        for fn in cls.body:
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                    (cls.name in CLASSES and fn.name in names) or (cls.name, fn.name) == SINK):
                found[f"{cls.name}.{fn.name}"] = fn
    return found


def calls_between(found: dict) -> list[tuple[str, str, ast.Call]]:
    """(caller, callee name, call) of every call from a target to a function or method named like one."""
    names = {key.rpartition(".")[2] for key in found}
    out = []
    for key, fn in found.items():
        for node in ast.walk(fn):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if name in names:
                    out.append((key, name, node))
    return out


_PROBE = r'''
import asyncio, json, sys
import httpx

seen = []
def handler(request):
    seen.append(request.extensions.get("request_id"))
    return httpx.Response(200, json={"ok": True})

transport = httpx.MockTransport(handler)
URL = "https://example.test/path"
VERBS = ("get", "options", "head", "post", "put", "patch", "delete")
BODY = {"post": {"json": {}}, "put": {"json": {}}, "patch": {"json": {}}}

with httpx.Client(transport=transport) as client:
    for verb in VERBS:
        getattr(client, verb)(URL, request_id=f"client.{verb}", **BODY.get(verb, {}))
    client.request("GET", URL, request_id="client.request")
    with client.stream("GET", URL, request_id="client.stream") as response:
        response.read()
    client.get(URL)  # callers that pass no id keep working

async def run_async():
    async with httpx.AsyncClient(transport=transport) as client:
        for verb in VERBS:
            await getattr(client, verb)(URL, request_id=f"async.{verb}", **BODY.get(verb, {}))
        await client.request("GET", URL, request_id="async.request")
        async with client.stream("GET", URL, request_id="async.stream") as response:
            await response.aread()
asyncio.run(run_async())

class MockedClient(httpx.Client):  # the module-level API builds its own Client: give it the mock transport
    def __init__(self, **kwargs):
        super().__init__(transport=transport, **kwargs)
httpx._api.Client = MockedClient
for verb in VERBS:
    getattr(httpx, verb)(URL, request_id=f"api.{verb}", **BODY.get(verb, {}))
httpx.request("GET", URL, request_id="api.request")
with httpx.stream("GET", URL, request_id="api.stream") as response:
    response.read()
print(json.dumps(seen))
'''


def expected_ids() -> list:
    verbs = ["get", "options", "head", "post", "put", "patch", "delete", "request", "stream"]
    return ([f"client.{v}" for v in verbs] + [None] + [f"async.{v}" for v in verbs]
            + [f"api.{v}" for v in verbs])


def passed_blind(root: Path) -> list[str]:
    """What a half-done edit breaks, as the language server would report it: a target that uses request_id
    (passes it on, or records it) without taking it, and a call that passes request_id to a target that does
    not take it yet. Empty when the tree is consistent at this point, finished or not."""
    found = targets((root / API).read_text(), (root / CLIENT).read_text())

    def takes(key: str) -> bool:
        fn = found.get(key)
        return fn is not None and any(a.arg == "request_id" for a in fn.args.kwonlyargs)

    problems = [f"{key} uses request_id without taking it" for key, fn in found.items() if not takes(key) and any(
        isinstance(node, ast.Name) and node.id == "request_id" for node in ast.walk(fn))]
    for caller, name, call in calls_between(found):
        if not any(k.arg == "request_id" for k in call.keywords):
            continue
        if "." in caller:  # self.<name>: the caller's class, else the base class both clients share
            cls = caller.partition(".")[0]
            callee = f"{cls}.{name}" if f"{cls}.{name}" in found else f"{SINK[0]}.{name}"
        else:  # _api.py: client.<name> is Client's, a bare name the module's own function
            callee = f"Client.{name}" if isinstance(call.func, ast.Attribute) else name
        if not takes(callee):
            problems.append(f"{caller} passes request_id to {callee}, which does not take it")
    return problems


def check_repo(root: Path, *, run: bool = True) -> list[str]:
    """Problems with the edit (empty when it is complete and the package works)."""
    try:
        found = targets((root / API).read_text(), (root / CLIENT).read_text())
    except SyntaxError as err:
        return [f"syntax error in {err.filename or 'httpx'} line {err.lineno}: {err.msg}"]
    src = source_package()
    before = targets((src / "_api.py").read_text(), (src / "_client.py").read_text())
    problems = []
    if sorted(found) != sorted(before):
        problems.append(f"the functions in scope changed: {sorted(set(before) ^ set(found))}")
    for key, fn in found.items():
        args = fn.args
        last = args.kwonlyargs[-1] if args.kwonlyargs else None
        if last is None or last.arg != "request_id" or ast.unparse(last.annotation) != "str | None":
            problems.append(f"{key} does not end with a keyword-only request_id: str | None")
        elif args.kw_defaults[-1] is None or ast.unparse(args.kw_defaults[-1]) != "None":
            problems.append(f"{key}'s request_id has no default None")
    calls, original = calls_between(found), calls_between(before)
    edges = sorted((caller, name) for caller, name, _ in calls)
    if edges != sorted((caller, name) for caller, name, _ in original):
        problems.append(f"the calls between the targets changed: {edges}")
    for caller, name, call in calls:
        passed = [k for k in call.keywords if k.arg == "request_id"]
        if not passed or ast.unparse(passed[0].value) != "request_id":
            problems.append(f"{caller} calls {name} (line {call.lineno}) without request_id=request_id")
    if run and not problems:
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        proc = subprocess.run([sys.executable, "-c", _PROBE], cwd=root, env=env, capture_output=True, text=True,
                              timeout=60)
        if proc.returncode != 0:
            problems.append("the package no longer works: " + (proc.stderr.strip().splitlines() or ["?"])[-1])
        elif json.loads(proc.stdout.strip().splitlines()[-1]) != expected_ids():
            problems.append(f"the transport saw the ids {proc.stdout.strip()}, not {expected_ids()}")
    return problems


# --------------------------------------------------------------------------- the scripted model

_HEADER = re.compile(r"^(httpx/[\w/]+\.py) \(\w+, \d+ lines\)$", re.M)
_MAP_CLASS = re.compile(r"^(\d+)-(\d+) class (\w+)")
_MAP_DEF = re.compile(r"^(\s*)(\d+)(?:-(\d+))? (?:async )?def (\w+)\(")
_GREP = re.compile(r"^([^:\n]+):(\d+): (.*)$")
_CALL = re.compile(r"^(\s*)(?:return |with |\w+ = )?(?:await )?(?:self\.|client\.)?(\w+)\($")
_CUT = re.compile(r"^\(\+\d+ more symbols\)$", re.M)
BIG_MAP = 4096  # tokens: the most file_meta gives


def map_blocks(text: str) -> dict[str, str]:
    """path -> its map, for every file map in a text (a header line starts each)."""
    heads = list(_HEADER.finditer(text))
    return {m.group(1): text[m.start(): heads[i + 1].start() if i + 1 < len(heads) else len(text)]
            for i, m in enumerate(heads)}


def map_functions(fmap: str) -> dict[str, tuple[int, int]]:
    """'name' (top level) or 'Class.name' -> (first, last) line, from a file map."""
    out: dict[str, tuple[int, int]] = {}
    cls: tuple[str, int, int] | None = None
    for line in fmap.splitlines():
        if m := _MAP_CLASS.match(line):
            cls = (m.group(3), int(m.group(1)), int(m.group(2)))
        elif m := _MAP_DEF.match(line):
            first = int(m.group(2))
            last = int(m.group(3) or first)
            if m.group(1) and cls and cls[1] <= first <= cls[2]:
                out.setdefault(f"{cls[0]}.{m.group(4)}", (first, last))
            elif not m.group(1):
                out.setdefault(m.group(4), (first, last))
    return out


class HttpxRequestIdPolicy(ScriptedPolicy):
    """The scripted model of the httpx scenario (see the module doc)."""

    def __init__(self, *, per_function: bool = False) -> None:
        super().__init__()
        self.per_function = per_function  # one response per function's edits, not one per file
        self.files: list[str] = []
        self.ranges: dict[str, dict[str, tuple[int, int]]] = {}  # path -> its functions' lines, from the maps

    # -- reading the context
    @staticmethod
    def _decision(messages) -> tuple[str, str]:
        return decision(messages, "request_id")

    @staticmethod
    def _targets_from(text: str) -> dict[str, list[str]]:
        """path -> the functions the decision lists for it."""
        listed = text.split("Functions:", 1)
        if len(listed) < 2:
            raise PolicyError("the decision does not list the functions")
        out = {}
        for part in listed[1].split("(why:")[0].strip().rstrip(".").split("; "):
            path, _, names = part.partition(": ")
            out[path.strip()] = [n.strip() for n in names.split(",") if n.strip()]
        return out

    def _map(self, messages, purpose: str) -> Reply:
        """file_meta of the files the task names: the larger budget for those whose map the context shows
        cut (with no map in the context, the default budget first)."""
        task = next(content(m) for m in reversed(messages) if m["role"] == "user" and not is_note(m))
        self.files = sorted(set(re.findall(r"httpx/[\w/]+\.py", task)))
        if API not in self.files or CLIENT not in self.files:
            raise PolicyError(f"the task does not name {API} and {CLIENT}")
        shown = map_blocks(context_text(messages))
        calls = [("file_meta", {"path": p, **({"tokens": BIG_MAP} if _CUT.search(shown.get(p, "")) else {})})
                 for p in self.files]
        larger = sum("tokens" in args for _, args in calls)
        self.log.append(f"{purpose}: map {len(calls)} files ({larger} with a larger budget)")
        self.collected: dict[str, str] = {}
        return Reply(text="Their maps first, not the files" + (
            ": the context's maps are cut, so with a larger budget." if larger else "."), tool_calls=calls)

    def _maps(self, messages, results) -> dict[str, str] | Reply:
        """The maps of every file once none is cut; until then a reply asking again with the larger budget."""
        asked = {args["path"]: args for name, args, _ in results if name == "file_meta"}
        self.collected.update({args["path"]: whole_map(messages, text) for name, args, text in results
                               if name == "file_meta"})
        cut = [p for p in asked if _CUT.search(self.collected[p])]
        if any(asked[p].get("tokens") == BIG_MAP for p in cut):
            raise PolicyError(f"a map is cut even at {BIG_MAP} tokens")
        if cut:
            self.log.append(f"map {len(cut)} files again with a larger budget")
            return Reply(text="Some maps were cut to fit; asking for the whole skeletons.",
                         tool_calls=[("file_meta", {"path": p, "tokens": BIG_MAP}) for p in cut])
        if missing := [p for p in self.files if p not in self.collected]:
            raise PolicyError(f"no map of {missing}")
        return dict(self.collected)

    # -- turn 1
    def _start(self, messages) -> Reply:
        self.phase = "mapped"
        return self._map(messages, "start")

    def _after_mapped(self, messages, results) -> Reply:
        self._expect(results, "file_meta")
        maps = self._maps(messages, results)
        if isinstance(maps, Reply):
            return maps
        self.ranges = {path: map_functions(text) for path, text in maps.items()}
        api = sorted(n for n in self.ranges[API] if "." not in n and not n.startswith("_"))
        client = sorted(f"{c}.{n}" for c in CLASSES for n in api if f"{c}.{n}" in self.ranges[CLIENT])
        sink = ".".join(SINK)
        if sink not in self.ranges[CLIENT] or len(client) != 2 * len(api):
            raise PolicyError(f"the map of {CLIENT} lacks {sink} or some of {client}")
        self.phase = "decided"
        self.log.append(f"decide: {len(api)} API functions, {len(client)} client methods, {sink}")
        text = (f"Every public API function of {API} and the request methods of the same names on Client and "
                f"AsyncClient take `{PARAM}` as their last keyword-only parameter and pass request_id=request_id "
                f"to every one of these functions they call; {sink}, which both clients build every request "
                "with, takes it too and records it in the request's extensions[\"request_id\"] (send takes a "
                f"Request already built, which carries it). Functions: {API}: {', '.join(api)}; "
                f"{CLIENT}: {', '.join(sorted(client + [sink]))}")
        return Reply(text="One convention for the API and both clients, logged once.", tool_calls=[(
            "log_decision", {"decision": text, "files": self.files,
                             "reasoning": "a keyword with a None default keeps every existing caller working; "
                                          "extensions is where httpx carries per-request metadata"})])

    def _after_decided(self, messages, results) -> Reply:
        self._expect(results, "log_decision")
        return self._grep(messages, CLIENT)  # the callees first: see _edit

    def _grep(self, messages, path: str) -> Reply:
        did, text = self._decision(messages)
        names = sorted({n.rpartition(".")[2] for listed in self._targets_from(text).values() for n in listed})
        pattern = r"\b(?:" + "|".join(names) + r")\(|^\s*\)"
        calls = [("grep", {"pattern": pattern, "path": path})]
        why = "every definition and call of the functions, and the lines that close them"
        if path == CLIENT:  # build_request's body changes: the one range that must be read
            first, last = self.ranges[CLIENT][".".join(SINK)]
            calls.append(("read_lines", {"path": CLIENT, "start": first, "end": last}))
            why += f", and {SINK[1]}'s body ({first}-{last}), where the id joins the request"
        self.phase = f"grepped-{'api' if path == API else 'client'}"
        self.log.append(f"grep {path}" + (" + read the sink" if path == CLIENT else ""))
        return Reply(text=f"{path}: following [D:{did}], {why}.", tool_calls=calls)

    def _after_grepped_api(self, messages, results) -> Reply:
        self._expect(results, "grep")
        return self._edit(messages, API, results, {})

    def _after_grepped_client(self, messages, results) -> Reply:
        self._expect(results, "grep", "read_lines")
        return self._edit(messages, CLIENT, [r for r in results if r[0] == "grep"],
                          numbered_rows([r for r in results if r[0] == "read_lines"]))

    def _edit(self, messages, path: str, grep_results, body: dict[int, str]) -> Reply:
        """Plan a file's edits. The order is the one a careful agent propagating a parameter takes: from the
        sink up the call chain, callee before caller (build_request, the clients' request and stream, their
        verbs; then _api.py's request and stream, its verbs). Every edit then leaves the package correct: a
        call passes request_id only to a function that already takes it, inside a function that already has
        it, so the language server's word on each edit has nothing to report, where caller-first (or
        bottom-up) editing has it report the calls not yet updated after every edit. In both files that
        order is top-down, so each insertion moves the lines below it: the policy adds to a line number its
        grep gave one for every line it inserted above it, the shift each result states ("lines after it
        moved by +1")."""
        did, text = self._decision(messages)
        wanted = self._targets_from(text)[path]
        param = re.search(r"`([^`]*request_id[^`]*)`", text).group(1)
        names = {n.rpartition(".")[2] for p in self._targets_from(text).values() for n in p}
        lines: dict[int, str] = {}
        for _, _, out in grep_results:
            for row in out.splitlines():
                if (m := _GREP.match(row)) and m.group(1) == path:
                    lines[int(m.group(2))] = m.group(3)
        closings = sorted(n for n, t in lines.items() if t.lstrip().startswith(")"))

        def closing(after: int, indent: str, signature: bool) -> int:
            for n in closings:
                t = lines[n]
                if n > after and t[:len(t) - len(t.lstrip())] == indent:
                    if signature and not t.lstrip().startswith(") ->"):
                        break
                    return n
            raise PolicyError(f"{path}:{after}: no closing line in the grep")

        groups: list[tuple[int, list[tuple[int, str]]]] = []  # per function: (its first line, its inserts)
        for key in wanted:
            first, last = self.ranges[path][key]
            d = lines.get(first, "")
            if not re.match(r"\s*(?:async )?def \w+\($", d):
                raise PolicyError(f"{path}:{first}: {key}'s definition is not a wrapped signature: {d!r}")
            indent = d[:len(d) - len(d.lstrip())]
            inserts = [(closing(first, indent, True), f"{indent}    {param},")]
            for n in sorted(lines):
                m = _CALL.match(lines[n])
                if first < n <= last and m and m.group(2) in names:
                    inserts.append((closing(n, m.group(1), False), f"{m.group(1)}    request_id=request_id,"))
            groups.append((first, inserts))
        sink: tuple[int, dict] | None = None  # (the line the body's new lines go before, the edit_file call)
        if body:  # the sink: the id joins the extensions the Request is built with
            ret = next((n for n in sorted(body) if body[n].lstrip().startswith("return Request(")), None)
            passed = any("extensions=extensions" in body[n] for n in body if ret is not None and n > ret)
            if ret is None or ret - 1 not in body or not passed:
                raise PolicyError(f"{SINK[1]}'s body does not build its Request with extensions=extensions")
            indent = body[ret][:len(body[ret]) - len(body[ret].lstrip())]
            old = f"{body[ret - 1]}\n{body[ret]}"
            new = (f"{body[ret - 1]}\n{indent}if request_id is not None:\n"
                   f"{indent}    extensions = {{**extensions, \"request_id\": request_id}}\n{body[ret]}")
            sink = (ret, {"path": path, "old": old, "new": new})
        groups.sort(key=lambda g: g[0])  # top-down: callee first (the docstring)
        inserted: list[int] = []  # the grep's line numbers before which a line went in so far

        def now(n: int) -> int:
            return n + sum(1 for at in inserted if at <= n)

        steps = []
        for first, inserts in groups:
            step = []
            for n, t in sorted(inserts):
                step.append(("replace_lines", {"path": path, "start": now(n), "end": now(n) - 1, "content": t}))
                inserted.append(n)
            if sink and first <= sink[0] <= self.ranges[path][".".join(SINK)][1]:
                step.append(("edit_file", sink[1]))  # by text, after the signature's insertion
                inserted += [sink[0], sink[0]]
            steps.append(step)
        if not self.per_function:
            steps = [[call for step in steps for call in step]]
        self.phase = f"edited-{'api' if path == API else 'client'}"
        self.log.append(f"edit {path}: {sum(len(g) for _, g in groups)} lines inserted in {len(groups)} functions, "
                        f"callee first, {'one function per step' if self.per_function else 'in one step'}"
                        + (", the sink's body" if body else ""))
        self.pending = steps
        self.did, self.path = did, path
        return self._next_edit()

    def _next_edit(self) -> Reply:
        return Reply(text=f"Applying [D:{self.did}] to {self.path}, callee first so every step stays correct.",
                     tool_calls=self.pending.pop(0))

    def _after_edited_client(self, messages, results) -> Reply:
        self._expect(results, "replace_lines", "edit_file")
        if self.pending:
            return self._next_edit()
        return self._grep(messages, API)

    def _after_edited_api(self, messages, results) -> Reply:
        self._expect(results, "replace_lines")
        if self.pending:
            return self._next_edit()
        did, _ = self._decision(messages)
        self.phase = "done"
        return Reply(text=f"Done: the API functions and both clients' request methods take request_id and pass "
                          f"it down to {SINK[1]}, per [D:{did}].")

    # -- turn 2
    def _verify(self, messages) -> Reply:
        reply = self._map(messages, "verify")
        did, _ = self._decision(messages)
        reply.text = f"Checking against [D:{did}] from fresh maps (the edits re-indexed them) and one grep."
        reply.tool_calls = list(reply.tool_calls) + [("grep", {"pattern": "request_id", "path": "httpx"})]
        self.phase = "verifying"
        self.greps: list[str] = []
        return reply

    def _after_verifying(self, messages, results) -> Reply:
        self._expect(results, "file_meta", "grep")
        self.greps += [out for name, _, out in results if name == "grep"]
        maps = self._maps(messages, results)
        if isinstance(maps, Reply):
            return maps
        hits: dict[str, dict[int, str]] = {}
        for out in self.greps:
            for row in out.splitlines():
                if m := _GREP.match(row):
                    hits.setdefault(m.group(1), {})[int(m.group(2))] = m.group(3)
        did, text = self._decision(messages)
        param = re.search(r"`([^`]*request_id[^`]*)`", text).group(1)
        missing, checked = [], 0
        for path, wanted in self._targets_from(text).items():
            ranges = map_functions(maps[path])
            for key in wanted:
                checked += 1
                if key not in ranges:
                    missing.append(f"{path}:{key} (not in the map)")
                    continue
                first, last = ranges[key]
                inside = [t for n, t in hits.get(path, {}).items() if first <= n <= last]
                if not any(t.strip() == f"{param}," for t in inside):
                    missing.append(f"{path}:{key} (no parameter)")
                elif not any(t.strip() != f"{param}," for t in inside):
                    missing.append(f"{path}:{key} (does not pass it on)")
        self.phase = "verified"
        self.log.append(f"verify {checked} functions: {len(missing)} missing")
        if missing:
            return Reply(text=f"Not done: {', '.join(missing)} ([D:{did}]).")
        return Reply(text=f"Verified: all {checked} functions take request_id and pass it on, per [D:{did}].")
