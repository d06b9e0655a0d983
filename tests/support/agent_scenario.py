"""The request_id scenario, shared by benchmarks/bench_agent.py, benchmarks/record_demo.py and the tests.

* `make_repo(root, size)` writes a fixture package `shop/`: modules of public
  functions calling each other (api -> orders -> catalog -> auth -> http),
  a few hundred lines each in the full size; all of it runs (no I/O).
* `RequestIdPolicy` is the scripted model: a responder for fakellm.ScriptedLLM
  that reads each request's messages and decides the next tool calls, the
  way a memory-first agent would: map every module (file_meta), log the
  convention once (log_decision), then per module grep the definitions and
  call sites, read only the multi-line signatures it cannot see whole, and
  edit bottom-up (replace_lines), citing the decision [D:id] it finds in the
  context (the decision log or a note appended later: tests/support/scenario_common.py
  reads the request for both scenarios). It never looks at the files itself:
  line numbers and line texts come from tool results in the request, the
  parameter text and the function list from the decision, so what it can do
  depends on what the loop put in its context. It also answers compaction
  requests with a summary.
* `check_repo(root)` proves the edit: every public function takes
  `request_id: str | None = None`, every call between them passes
  `request_id=request_id`, and the package still runs.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from support.fakellm import Reply
from support.scenario_common import (PolicyError, ScriptedPolicy, context_text, decision, numbered_rows,
                             whole_map)
from support.scenario_common import summarize  # noqa: F401  (tests import it from here)

TASK = ("Add a `request_id: str | None = None` parameter to every public function in the shop/ package and "
        "pass it through every call between them, so that one request can be traced end to end.")
CHECK = "Check that every public function in shop/ now takes request_id."
PARAM = "request_id: str | None = None"

# --------------------------------------------------------------------------- the fixture repository


@dataclass
class Fn:
    name: str
    params: list[tuple[str, str, str | None]]  # (name, type, default or None)
    calls: list[str] = field(default_factory=list)  # "name" (same module) or "module.name"
    summary: str = ""


def _fn(name: str, params: str, calls: str = "", summary: str = "") -> Fn:
    parsed = []
    for item in filter(None, (p.strip() for p in params.split(","))):
        pname, _, rest = item.partition(":")
        ptype, _, default = rest.partition("=")
        parsed.append((pname.strip(), ptype.strip(), default.strip() or None))
    return Fn(name, parsed, calls.split() if calls else [], summary or name.replace("_", " ").capitalize())


FULL = {
    "http": ("HTTP transport helpers: URLs, query strings, requests and status checks.", [
        _fn("build_url", "path: str, host: str = 'api.shop.test'"),
        _fn("encode_query", "params: dict"),
        _fn("check_status", "code: int"),
        _fn("parse_headers", "raw: str"),
        _fn("retry_delay", "attempt: int, base: int = 2"),
        _fn("send_request", "method: str, url: str, body: dict, timeout: int = 10", "check_status retry_delay"),
        _fn("get_json", "path: str", "build_url send_request"),
        _fn("post_json", "path: str, body: dict", "build_url encode_query send_request"),
    ]),
    "auth": ("Authentication: passwords, tokens, roles and the headers that carry them.", [
        _fn("hash_password", "password: str"),
        _fn("login", "user: str, password: str", "hash_password http.post_json"),
        _fn("refresh_token", "token: str", "http.post_json"),
        _fn("validate_token", "token: str", "http.get_json http.check_status"),
        _fn("auth_headers", "token: str", "validate_token"),
        _fn("current_user", "token: str", "auth_headers http.get_json"),
        _fn("logout", "token: str", "auth_headers http.post_json"),
        _fn("grant_role", "user: str, role: str, scopes: list, expires: int = 3600", "auth_headers http.post_json"),
    ]),
    "catalog": ("The product catalog: listing, search, prices and stock.", [
        _fn("list_products", "category: str, limit: int = 20", "http.encode_query http.get_json"),
        _fn("get_product", "sku: str", "http.get_json"),
        _fn("search_products", "query: str, filters: dict, page: int = 1, size: int = 20",
            "http.encode_query http.get_json"),
        _fn("price_of", "sku: str, qty: int", "get_product"),
        _fn("stock_level", "sku: str", "get_product http.check_status"),
        _fn("reserve_stock", "sku: str, qty: int, token: str", "stock_level auth.auth_headers http.post_json"),
        _fn("release_stock", "sku: str, qty: int, token: str", "auth.auth_headers http.post_json"),
        _fn("related_products", "sku: str", "get_product list_products"),
    ]),
    "orders": ("Orders: creation, items, totals, coupons, submission and status.", [
        _fn("new_order", "customer: str", "auth.current_user"),
        _fn("add_item", "order_id: str, sku: str, qty: int", "catalog.reserve_stock catalog.price_of"),
        _fn("remove_item", "order_id: str, sku: str", "catalog.release_stock"),
        _fn("order_total", "order_id: str, currency: str = 'EUR'", "catalog.price_of"),
        _fn("apply_coupon", "order_id: str, code: str", "order_total"),
        _fn("submit_order", "order_id: str, token: str, notes: str, priority: int = 0",
            "auth.validate_token order_total http.post_json"),
        _fn("cancel_order", "order_id: str, token: str", "auth.auth_headers http.post_json"),
        _fn("order_status", "order_id: str", "http.get_json"),
    ]),
    "api": ("The public facade the web handlers call.", [
        _fn("browse", "category: str", "catalog.list_products"),
        _fn("product_page", "sku: str", "catalog.get_product catalog.related_products"),
        _fn("quick_search", "query: str", "catalog.search_products"),
        _fn("place_order", "customer: str, skus: list, token: str, coupon: str = ''",
            "orders.new_order orders.add_item orders.apply_coupon orders.submit_order"),
        _fn("track_order", "order_id: str", "orders.order_status"),
        _fn("cancel", "order_id: str, token: str", "orders.cancel_order"),
        _fn("account", "token: str", "auth.current_user"),
        _fn("sign_in", "user: str, password: str", "auth.login"),
    ]),
}

SMALL = {  # the demo: short enough to read in a minute
    "http": ("HTTP transport helpers.", [
        _fn("build_url", "path: str, host: str = 'api.shop.test'"),
        _fn("send_request", "method: str, url: str, body: dict, timeout: int = 10"),
        _fn("get_json", "path: str", "build_url send_request"),
    ]),
    "api": ("The public facade the web handlers call.", [
        _fn("product_page", "sku: str", "http.get_json"),
        _fn("place_order", "customer: str, skus: list, token: str, coupon: str = ''", "http.get_json"),
    ]),
}
SIZES = {"full": FULL, "small": SMALL}

_HEADER = '''"""{doc}"""

from __future__ import annotations

import logging
import time

{imports}
log = logging.getLogger(__name__)

MAX_PARTS = 16
NAMESPACE = "shop.{module}"


def _describe(value: object) -> str:
    """A short, log-safe description of a value."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _checksum(parts: list[str]) -> int:
    total = 0
    for index, part in enumerate(parts):
        total = (total * 31 + len(part) + index) % 65521
    return total
'''


def _arg_for(ptype: str, caller: Fn, pname: str) -> str:
    for name, typ, _ in caller.params:
        if name == pname and typ == ptype:
            return name
    anchor = caller.params[0][0]
    return {"str": f"str({anchor})", "int": f"len(str({anchor}))", "list": f"[str({anchor})]",
            "dict": f'{{"ref": str({anchor})}}'}[ptype]


def _signature(fn: Fn) -> list[str]:
    params = [f"{n}: {t}" + (f" = {d}" if d is not None else "") for n, t, d in fn.params]
    if len(fn.params) >= 4:  # wrapped, as formatters leave long signatures
        return [f"def {fn.name}("] + [f"    {p}," for p in params] + [") -> dict:"]
    return [f"def {fn.name}({', '.join(params)}) -> dict:"]


def _function(fn: Fn, spec: dict[str, Fn]) -> list[str]:
    anchor = fn.params[0][0]
    lines = _signature(fn)
    lines.append(f'    """{fn.summary}.')
    lines.append("")
    lines.append("    Args:")
    for name, typ, default in fn.params:
        lines.append(f"        {name}: the {name.replace('_', ' ')} ({typ}" + (f", default {default})" if default else ")"))
    lines += ["", "    Returns:", "        A record of the operation, with the results of what it called.", '    """']
    lines += [
        f"    if {anchor} is None:",
        f'        raise ValueError("{fn.name} needs {anchor}")',
        "    started = time.monotonic()",
        f'    record: dict = {{"op": NAMESPACE + ".{fn.name}", "input": _describe({anchor})}}',
        f'    parts = [part for part in str({anchor}).replace("/", "-").split("-") if part]',
        "    if len(parts) > MAX_PARTS:",
        '        record["truncated"] = True',
        "        parts = parts[:MAX_PARTS]",
        '    record["checksum"] = _checksum(parts)',
    ]
    for target in fn.calls:
        module, _, name = target.rpartition(".")
        callee = spec[target]
        args = ", ".join(_arg_for(t, fn, n) for n, t, d in callee.params if d is None)
        lines.append(f"    {name}_result = {target}({args})")
        lines.append(f'    record["{name}"] = {name}_result.get("checksum", 0)')
    lines += [
        "    for index, part in enumerate(parts):",
        "        if not part.isalnum():",
        '            log.debug("odd part %d in %s", index, record["op"])',
        '    record["parts"] = parts',
        '    record["elapsed_ms"] = round((time.monotonic() - started) * 1000, 3)',
        '    log.debug("%s done", record["op"])',
        "    return record",
    ]
    return lines


def make_repo(root: Path, size: str = "full") -> list[str]:
    """Write the fixture package under root; returns the module paths."""
    modules = SIZES[size]
    spec: dict[str, Fn] = {}
    for module, (_, fns) in modules.items():
        for fn in fns:
            spec[f"{module}.{fn.name}"] = fn
    paths = []
    (root / "shop").mkdir(parents=True, exist_ok=True)
    (root / "shop" / "__init__.py").write_text('"""A toy shop backend (fixture of the request_id scenario)."""\n')
    for module, (doc, fns) in modules.items():
        local = {f"{module}.{fn.name}": fn for fn in fns}
        used = sorted({c.split(".")[0] for fn in fns for c in fn.calls if "." in c})
        imports = "".join(f"from shop import {m}\n" for m in used) + ("\n" if used else "")
        body = _HEADER.format(doc=doc, imports=imports, module=module).splitlines()
        for fn in fns:
            lookup = {**spec, **{c: local[f"{module}.{c}"] for c in fn.calls if "." not in c}}
            body += ["", ""] + _function(fn, lookup)
        path = root / "shop" / f"{module}.py"
        path.write_text("\n".join(body) + "\n")
        paths.append(f"shop/{module}.py")
    return paths


def public_functions(size: str = "full") -> dict[str, list[str]]:
    return {f"shop/{m}.py": [fn.name for fn in fns] for m, (_, fns) in SIZES[size].items()}


# --------------------------------------------------------------------------- checking the result


def check_repo(root: Path, size: str = "full", *, run: bool = True) -> list[str]:
    """Problems with the edit (empty when every function takes and passes request_id)."""
    problems: list[str] = []
    public = {name for names in public_functions(size).values() for name in names}
    for rel in public_functions(size):
        source = (root / rel).read_text()
        try:
            tree = ast.parse(source)
        except SyntaxError as err:
            problems.append(f"{rel}: syntax error line {err.lineno}: {err.msg}")
            continue
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
                continue
            args = node.args.args
            last = args[-1] if args else None
            if last is None or last.arg != "request_id" or ast.unparse(last.annotation) != "str | None":
                problems.append(f"{rel}: {node.name} does not end with request_id: str | None")
            elif not node.args.defaults or ast.unparse(node.args.defaults[-1]) != "None":
                problems.append(f"{rel}: {node.name}'s request_id has no default None")
            for call in ast.walk(node):
                if not isinstance(call, ast.Call):
                    continue
                func = call.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if name not in public:
                    continue
                passed = [k for k in call.keywords if k.arg == "request_id"]
                if not passed or ast.unparse(passed[0].value) != "request_id":
                    problems.append(f"{rel}:{call.lineno}: {node.name} calls {name} without request_id=request_id")
    if run and not problems:
        probe = ("import shop.api as api, json; "
                 "print(json.dumps(api.place_order('alice', ['sku-1'], 'tok-1', request_id='r-1')['op']))")
        proc = subprocess.run([sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            problems.append("the package no longer runs: " + (proc.stderr.strip().splitlines() or ["?"])[-1])
    return problems


# --------------------------------------------------------------------------- the scripted model

_MAP_DEF = re.compile(r"^(\d+)(?:-(\d+))? (?:async )?def ([A-Za-z]\w*)\((.*)$")
GREP = re.compile(r"^([^:\n]+):(\d+): (.*)$")


def close_paren(text: str, open_index: int) -> int:
    depth = 0
    for i in range(open_index, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    raise PolicyError(f"unbalanced parentheses in {text!r}")


def add_call_argument(line: str, names: set[str]) -> str:
    """`f(a)` -> `f(a, request_id=request_id)` for every call of a public function on the line."""
    spots = [m for m in re.finditer(r"\b([A-Za-z_]\w*)\(", line) if m.group(1) in names]
    for match in reversed(spots):
        close = close_paren(line, match.end() - 1)
        inner = line[match.end():close].strip()
        insert = "request_id=request_id" if not inner else ", request_id=request_id"
        line = line[:close] + insert + line[close:]
    return line


def add_parameter(line: str, name: str, param: str) -> str:
    """`def f(a: int) -> dict:` -> `def f(a: int, request_id: str | None = None) -> dict:`."""
    start = line.index(f"def {name}(") + len(f"def {name}")
    close = close_paren(line, start)
    inner = line[start + 1:close].strip()
    return line[:close] + (param if not inner else f", {param}") + line[close:]


class RequestIdPolicy(ScriptedPolicy):
    """The scripted model of the scenario; pass it as ScriptedLLM's responder (see the module doc)."""

    def __init__(self) -> None:
        super().__init__()
        self.modules: list[str] = []
        self.index = 0
        self.pending_defs: list[tuple[int, str]] = []  # multi-line definitions awaiting a read
        self.grep_lines: dict[int, str] = {}

    @staticmethod
    def _decision(messages: list[dict]) -> tuple[str, str]:
        """(id, text) of the request_id convention the context shows (its decision log or a note)."""
        return decision(messages, "request_id")

    @staticmethod
    def _names_from(decision: str) -> set[str]:
        listed = decision.split("Public functions:", 1)
        if len(listed) < 2:
            raise PolicyError("the decision does not list the public functions")
        return set(re.findall(r"[A-Za-z_]\w*", listed[1].split("(why:")[0]))

    # -- turn 1
    def _start(self, messages: list[dict]) -> Reply:
        context = context_text(messages)
        self.modules = sorted(set(re.findall(r"^(shop/(?!__init__)\w+\.py):", context, re.M)))
        if not self.modules:
            raise PolicyError("no shop/ module in the repository map of the context")
        self.phase = "mapped"
        self.log.append(f"map {len(self.modules)} modules")
        return Reply(text="First the map of every module, not the files themselves.",
                     tool_calls=[("file_meta", {"path": m}) for m in self.modules])

    @staticmethod
    def _cut_maps(results) -> list[str]:
        """Files whose map left symbols out to fit its budget."""
        return [args["path"] for _, args, content in results if re.search(r"^\(\+\d+ more symbols\)$", content, re.M)]

    def _after_mapped(self, messages, results) -> Reply:
        self._expect(results, "file_meta")
        if cut := self._cut_maps(results):
            self.maps = {args["path"]: whole_map(messages, content) for _, args, content in results}
            self.phase = "remapped"
            self.log.append(f"map {len(cut)} modules again with a larger budget")
            return Reply(text="Some maps were cut to fit; asking for the whole skeleton.",
                         tool_calls=[("file_meta", {"path": p, "tokens": 2048}) for p in cut])
        return self._decide({args["path"]: whole_map(messages, content) for _, args, content in results})

    def _after_remapped(self, messages, results) -> Reply:
        self._expect(results, "file_meta")
        if self._cut_maps(results):
            raise PolicyError("a map is cut even at 2048 tokens")
        return self._decide({**self.maps, **{args["path"]: whole_map(messages, content)
                                             for _, args, content in results}})

    def _decide(self, maps: dict[str, str]) -> Reply:
        names = []
        for content in maps.values():
            for line in content.splitlines():
                m = _MAP_DEF.match(line)
                if m and not m.group(3).startswith("_"):
                    names.append(m.group(3))
        self.phase = "decided"
        self.log.append(f"decide: {len(names)} public functions")
        decision = (f"Every public function in shop/ takes `{PARAM}` as its last parameter and passes "
                    f"request_id=request_id to every public function it calls. Public functions: "
                    + ", ".join(sorted(names)))
        return Reply(text="One convention for the whole package, logged once.", tool_calls=[(
            "log_decision", {"decision": decision, "files": self.modules,
                             "reasoning": "one name and a None default keep every caller working"})])

    def _after_decided(self, messages, results) -> Reply:
        self._expect(results, "log_decision")
        return self._grep_module(messages)

    def _grep_module(self, messages) -> Reply:
        did, decision = self._decision(messages)
        names = self._names_from(decision)
        module = self.modules[self.index]
        self.phase = "grepped"
        self.log.append(f"grep {module}")
        pattern = r"\b(?:" + "|".join(sorted(names)) + r")\("
        return Reply(text=f"{module}: following [D:{did}], every definition and call of a public function.",
                     tool_calls=[("grep", {"pattern": pattern, "path": module})])

    def _after_grepped(self, messages, results) -> Reply:
        self._expect(results, "grep")
        self.grep_lines = {}
        for line in results[0][2].splitlines():
            m = GREP.match(line)
            if m and m.group(1) == self.modules[self.index]:
                self.grep_lines[int(m.group(2))] = m.group(3)
        if not self.grep_lines:
            raise PolicyError(f"grep found nothing in {self.modules[self.index]}")
        self.pending_defs = [(n, t) for n, t in sorted(self.grep_lines.items())
                             if re.match(r"\s*def \w+\(", t) and not t.rstrip().endswith(":")]
        if self.pending_defs:
            self.phase = "reading"
            self.log.append(f"read {len(self.pending_defs)} wrapped signatures")
            module = self.modules[self.index]
            return Reply(text="These signatures span several lines: reading just those lines.",
                         tool_calls=[("read_lines", {"path": module, "start": n, "end": n + 8})
                                     for n, _ in self.pending_defs])
        return self._edit(messages, {})

    def _after_reading(self, messages, results) -> Reply:
        self._expect(results, "read_lines")
        return self._edit(messages, numbered_rows(results))

    def _edit(self, messages, seen: dict[int, str]) -> Reply:
        did, decision = self._decision(messages)
        names = self._names_from(decision)
        param = re.search(r"`([^`]*request_id[^`]*)`", decision).group(1)
        module = self.modules[self.index]
        edits: list[tuple[int, int, str]] = []  # (start, end, content)
        for number, text in sorted(self.grep_lines.items()):
            d = re.match(r"\s*def (\w+)\(", text)
            if d and not text.rstrip().endswith(":"):
                close = next((n for n in sorted(seen) if n > number and seen[n].lstrip().startswith(")")), None)
                if close is None:
                    raise PolicyError(f"{module}:{number}: the signature's end was not in the lines read")
                edits.append((close, close - 1, f"    {param},"))
            elif d:
                edits.append((number, number, add_parameter(text, d.group(1), param)))
            else:
                edits.append((number, number, add_call_argument(text, names)))
        edits.sort(key=lambda e: -e[0])  # bottom-up: an insertion never moves a line still to edit
        self.phase = "edited"
        self.log.append(f"edit {module}: {len(edits)} lines")
        return Reply(text=f"Applying [D:{did}] to {module}, bottom-up so the line numbers stay valid.",
                     tool_calls=[("replace_lines", {"path": module, "start": s, "end": e, "content": c})
                                 for s, e, c in edits])

    def _after_edited(self, messages, results) -> Reply:
        self._expect(results, "replace_lines")
        self.index += 1
        if self.index < len(self.modules):
            return self._grep_module(messages)
        did, _ = self._decision(messages)
        self.phase = "done"
        return Reply(text=f"Done: every public function in shop/ takes request_id and passes it on, per [D:{did}].")

    # -- turn 2
    def _verify(self, messages) -> Reply:
        self.phase = "verifying"
        self.log.append("verify from the maps")
        return Reply(text="Checking the maps, which the edits re-indexed.",
                     tool_calls=[("file_meta", {"path": m}) for m in self.modules])

    def _after_verifying(self, messages, results) -> Reply:
        self._expect(results, "file_meta")
        if cut := self._cut_maps(results):
            self.maps = {args["path"]: whole_map(messages, content) for _, args, content in results}
            self.phase = "verify-remapped"
            self.log.append(f"verify: map {len(cut)} modules again with a larger budget")
            return Reply(text="Some maps were cut to fit; asking for the whole skeleton.",
                         tool_calls=[("file_meta", {"path": p, "tokens": 2048}) for p in cut])
        return self._check_maps(messages, {args["path"]: whole_map(messages, content)
                                           for _, args, content in results})

    def _after_verify_remapped(self, messages, results) -> Reply:
        self._expect(results, "file_meta")
        if self._cut_maps(results):
            raise PolicyError("a map is cut even at 2048 tokens")
        return self._check_maps(messages, {**self.maps, **{args["path"]: whole_map(messages, content)
                                                            for _, args, content in results}})

    def _check_maps(self, messages, maps: dict[str, str]) -> Reply:
        self.unsure: list[tuple[str, int]] = []
        self.missing: list[str] = []
        self.checked = 0
        _, decision = self._decision(messages)
        expected = self._names_from(decision)
        for path, content in maps.items():
            for line in content.splitlines():
                m = _MAP_DEF.match(line)
                if not m or m.group(3).startswith("_"):
                    continue
                self.checked += 1
                expected.discard(m.group(3))
                if "request_id" in m.group(4):
                    continue
                if m.group(4).endswith("..."):  # the map cut a long signature: read it
                    self.unsure.append((path, int(m.group(1))))
                else:
                    self.missing.append(f"{path}:{m.group(3)}")
        self.missing += sorted(f"{name} (not in any map)" for name in expected)
        if self.unsure:
            self.phase = "verify-read"
            return Reply(text="The map cut some long signatures; reading only those.",
                         tool_calls=[("read_lines", {"path": p, "start": n, "end": n + 8}) for p, n in self.unsure])
        return self._verdict(messages)

    def _after_verify_read(self, messages, results) -> Reply:
        self._expect(results, "read_lines")
        for (path, number), (_, _, content) in zip(self.unsure, results):
            if "request_id" not in content:
                self.missing.append(f"{path}:{number}")
        return self._verdict(messages)

    def _verdict(self, messages) -> Reply:
        did, _ = self._decision(messages)
        self.phase = "verified"
        if self.missing:
            return Reply(text=f"Not done: {', '.join(self.missing)} lack request_id ([D:{did}]).")
        return Reply(text=f"Verified: all {self.checked} public functions take request_id, per [D:{did}].")

