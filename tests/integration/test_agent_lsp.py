"""Language servers, managed (workstation.lsp) with a real basedpyright process, in the commands' sandbox
(no network there: the wheel works offline), through the real litellm path for the scripted model.

- an edit that breaks a call site in another file: its result names the new error with file and line;
  the model's next edit fixes it and its result says so; the record and the timeline keep the counts;
- impact on a name with a same-named unrelated symbol: the server's real references first, the map's
  name-only matches after, marked; find jumps to a definition;
- the map's symbols and the server's (documentSymbol) agree on line ranges for the demo repository;
- a server that fails or hangs is one line in the result, never a stuck turn.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from support import agent_support
from support.agent_support import agent, events, module_server, records
from support.fakellm import Reply
from workstation.agent import tools
from workstation.commands import slash

pytestmark = pytest.mark.timeout(240)

server_module, server = module_server()

DEMO = Path(__file__).resolve().parents[2] / "sessions" / "demo-repo"
FILES = {p.relative_to(DEMO).as_posix(): p.read_text() for p in sorted(DEMO.rglob("*.py"))}
ADMIN = '''\
"""Admin tools: a cache with its own get_json, unrelated to shop.http's."""


class Cache:
    def get_json(self, key: str) -> dict[str, int]:
        return {key: 1}


def warm(store) -> None:
    store.get_json("k")
'''
LSP = {"enabled": True, "timeout_s": 90.0}  # a first start on a loaded 2-core machine took 12 s; warm checks take well under 1 s


def workspace(tmp_path, url, **kwargs):
    """The test's workspace, trusted: no language server starts in a folder the user has not trusted."""
    return agent_support.workspace(tmp_path, url, trusted=True, **kwargs)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """One workspace over the demo repository (plus an unrelated get_json) and its warm server."""
    ws = workspace(tmp_path_factory.mktemp("lsp"), None, files={**FILES, "shop/admin.py": ADMIN}, lsp=LSP)
    yield ws
    ws.close()


def _line(ws, rel: str, text: str) -> int:
    return next(i for i, line in enumerate((ws.root / rel).read_text().splitlines(), 1) if text in line)


def test_an_edit_that_breaks_a_caller_names_the_error_and_the_next_edit_says_it_is_fixed(tmp_path, server):
    ws = workspace(tmp_path, server.url, files=FILES, lsp=LSP)
    line = _line(ws, "shop/http.py", "def get_json(")
    callers = [i for i, text in enumerate((ws.root / "shop/api.py").read_text().splitlines(), 1)
               if "http.get_json(" in text]
    server.push(
        Reply(tool_calls=[("read_lines", {"path": "shop/http.py", "start": line, "end": line})]),
        Reply(tool_calls=[("replace_lines", {"path": "shop/http.py", "start": line, "end": line,
                                             "content": "def get_json(path: str, timeout: float) -> dict:\n"})]),
        Reply(tool_calls=[("replace_lines", {"path": "shop/http.py", "start": line, "end": line,
                                             "content": "def get_json(path: str, timeout: float = 5.0) -> dict:\n"})]),
        Reply(text="get_json takes a timeout now."))
    a = agent(ws)
    try:
        result = a.run("give get_json a timeout")
    finally:
        a.close()
        ws.close()
    assert result.error is None
    broke, mended = [r for r in records(a.session, "tool") if r["name"] == "replace_lines"]
    # the breaking edit names each broken call site in the other file, with its line
    assert "lsp: 2 new errors (basedpyright):" in broke["content"], broke["content"]
    for caller in callers:
        assert f"shop/api.py:{caller}:" in broke["content"]
    assert 'Argument missing for parameter "timeout"' in broke["content"]
    assert broke["diagnostics"]["new"] == 2 and broke["diagnostics"]["fixed"] == 0
    # the next edit fixes them, and its result says so (one message in one file: one line, every place named)
    fixed = ", ".join(f"shop/api.py:{caller}" for caller in callers)
    assert f"lsp: fixed: {fixed} Argument missing" in mended["content"], mended["content"]
    assert "new error" not in mended["content"]
    assert mended["diagnostics"]["fixed"] == 2
    # the model read them: the requests carried the results
    sent = [m["content"] for body in server.requests[server.mark:] for m in body["messages"] if m["role"] == "tool"]
    assert any("lsp: 2 new errors" in c for c in sent) and any("lsp: fixed:" in c for c in sent)
    # the timeline marks the edits
    edits = [e for e in events(ws, a.session.slug) if e["type"] == "file_edit"]
    assert [(e["data"].get("new_errors"), e["data"].get("fixed_errors")) for e in edits] == [(2, 0), (0, 2)]


def test_the_edits_of_one_response_are_checked_as_one_and_the_last_result_says_what_they_left(tmp_path, server):
    """The model reads a response's results together, after its last edit: the states between its edits
    are not reported (an edit its next one mends), what they leave broken is, in the last result."""
    ws = workspace(tmp_path, server.url, files=FILES, lsp=LSP)
    line = _line(ws, "shop/http.py", "def get_json(")
    first, second = [i for i, text in enumerate((ws.root / "shop/api.py").read_text().splitlines(), 1)
                     if "http.get_json(" in text]
    api = (ws.root / "shop/api.py").read_text().splitlines()
    fix_first = {"path": "shop/api.py", "start": first, "end": first,
                 "content": api[first - 1].replace("http.get_json(str(sku))", "http.get_json(str(sku), 5.0)") + "\n"}
    fix_second = {"path": "shop/api.py", "start": second, "end": second,
                  "content": api[second - 1].replace("http.get_json(str(customer))",
                                                     "http.get_json(str(customer), 5.0)") + "\n"}
    assert fix_first["content"] != api[first - 1] + "\n" and fix_second["content"] != api[second - 1] + "\n"
    server.push(
        Reply(tool_calls=[("read_lines", {"path": "shop/http.py", "start": line, "end": line}),
                          ("read_lines", {"path": "shop/api.py", "start": first, "end": second})]),
        Reply(tool_calls=[("replace_lines", {"path": "shop/http.py", "start": line, "end": line,
                                             "content": "def get_json(path: str, timeout: float) -> dict:\n"}),
                          ("replace_lines", fix_first)]),
        Reply(tool_calls=[("replace_lines", fix_second)]),
        Reply(text="get_json takes a timeout, and both callers pass one."))
    a = agent(ws)
    try:
        result = a.run("give get_json a timeout and pass one everywhere")
    finally:
        a.close()
        ws.close()
    assert result.error is None
    signature, one_caller, other_caller = [r for r in records(a.session, "tool") if r["name"] == "replace_lines"]
    # the first edit of the response says nothing: its broken callers were not the response's last word
    assert "lsp:" not in signature["content"] and not signature.get("diagnostics"), signature["content"]
    # the last one carries the check of both: the caller still broken, not the one its edit mended
    assert f"lsp: 1 new error after this response's 2 edits (basedpyright):\n  shop/api.py:{second}:" \
        in one_caller["content"], one_caller["content"]
    assert 'Argument missing for parameter "timeout"' in one_caller["content"]
    assert f"shop/api.py:{first}:" not in one_caller["content"]
    assert one_caller["diagnostics"]["new"] == 1 and one_caller["diagnostics"]["edits"] == 2
    # the model read it before its next step, and its next edit (alone in its response) hears it is fixed
    after_batch = [m["content"] for m in server.requests[server.mark + 2]["messages"] if m["role"] == "tool"]
    assert any("lsp: 1 new error after this response's 2 edits" in c for c in after_batch)
    assert f"lsp: fixed: shop/api.py:{second} Argument missing" in other_caller["content"], other_caller["content"]
    edits = [e for e in events(ws, a.session.slug) if e["type"] == "file_edit"]
    assert [(e["data"].get("new_errors"), e["data"].get("fixed_errors")) for e in edits] == [
        (None, None), (1, 0), (0, 1)]


def test_the_backlog_is_not_reported_only_what_an_edit_adds(demo):
    ws = demo
    (ws.root / "shop/backlog.py").write_text('"""Old errors."""\n\nx: int = "not an int"\n\n\ndef f() -> int:\n    return 1\n')
    ws.kmap.index_all()
    a = agent(ws, "backlog")
    try:
        assert tools.call(a.ctx, "read_lines", {"path": "shop/backlog.py", "start": 1, "end": 7}).ok
        res = tools.call(a.ctx, "replace_lines", {"path": "shop/backlog.py", "start": 7, "end": 7,
                                                  "content": "    return 'one'\n"})
        assert res.ok
        assert "lsp: 1 new error" in res.text, res.text
        assert "shop/backlog.py:7:" in res.text and "backlog.py:3:" not in res.text  # the old error is not new
        # an edit that adds nothing says nothing
        quiet = tools.call(a.ctx, "replace_lines", {"path": "shop/backlog.py", "start": 1, "end": 1,
                                                    "content": '"""Old errors, still."""\n'})
        assert quiet.ok and "lsp:" not in quiet.text and quiet.data["diagnostics"]["new"] == 0
    finally:
        a.close()
        (ws.root / "shop/backlog.py").unlink()


def test_impact_lists_the_real_references_first_and_the_name_matches_after_marked(demo, tmp_path):
    ws = demo
    a = agent(ws, "impact")
    try:
        res = tools.call(a.ctx, "impact", {"symbol": "get_json"})
        slash_text = slash.run(a, "/impact get_json").text
    finally:
        a.close()
    lines = res.text.splitlines()
    callers = [i for i, text in enumerate((ws.root / "shop/api.py").read_text().splitlines(), 1)
               if "http.get_json(" in text]
    assert lines[:2] == [f"shop/api.py:{callers[0]} in product_page [basedpyright]",
                         f"shop/api.py:{callers[1]} in place_order [basedpyright]"], res.text
    # the map's match comes after, marked: it guessed from the name (an untyped `store` in a file that
    # defines another get_json); the server found no reference there
    assert lines[2] == "shop/admin.py:10 in warm (call of shop/admin.py:Cache.get_json) [map]", res.text
    assert len(lines) == 3 and res.data["lsp"] == 2
    assert slash_text.splitlines()[:2] == lines[:2]
    # the map alone puts its guess first, and the real call sites after it as name-only
    from workstation.runtime import Workspace

    alone = Workspace(ws.root, overrides={"lsp": {"enabled": False}})
    try:
        a2 = agent(alone, "impact-alone")
        try:
            plain = tools.call(a2.ctx, "impact", {"symbol": "get_json"}).text.splitlines()
        finally:
            a2.close()
    finally:
        alone.close()
    assert plain[0].startswith("shop/admin.py:10") and all(p.endswith("[name-only]") for p in plain[1:])


def test_find_jumps_to_the_definition_of_a_name_used_on_a_line(demo):
    ws = demo
    a = agent(ws, "find")
    try:
        caller = _line(ws, "shop/api.py", "http.get_json(")
        res = tools.call(a.ctx, "find", {"query": "get_json", "at": f"shop/api.py:{caller}"})
    finally:
        a.close()
    start = _line(ws, "shop/http.py", "def get_json(")
    end = len((ws.root / "shop/http.py").read_text().splitlines())
    assert res.text.splitlines()[0] == f"definition: shop/http.py:{start}-{end} function get_json [basedpyright]"


@pytest.mark.parametrize("rel", sorted(FILES))
def test_the_maps_symbols_and_the_servers_agree_on_line_ranges(demo, rel):
    ws = demo
    server = ws.lsp.running(rel)
    assert server is not None, ws.lsp.absent_for(rel)
    kinds = {5: "class", 6: "method", 12: "function"}  # lsprotocol SymbolKind
    theirs = {(s.name, kinds[s.kind], s.line, s.end_line) for s in server.symbols(rel, 60) if s.kind in kinds}
    ours = {(s.name, s.kind, s.start_line, s.end_line) for s in ws.kmap.symbols(rel)
            if s.kind in ("class", "method", "function")}
    assert ours == theirs
    assert ours or rel.endswith("__init__.py")


def _broken(tmp_path, argv):
    """A workspace whose Python server is the given program (a real process that fails or hangs)."""
    from workstation.lsp import LanguageServers, ServerSpec

    ws = workspace(tmp_path, None, lsp={"enabled": True, "timeout_s": 3.0})
    servers = LanguageServers(ws.root, ws.config.lsp, None, specs=lambda language: ServerSpec(language, "broken", argv),
                              trusted=True)
    ws.__dict__["lsp"] = servers  # the workspace's servers are these (closed with it)
    return ws


@pytest.mark.parametrize("argv", [
    (sys.executable, "-c", "import sys; print('cannot start: no such project', file=sys.stderr); sys.exit(3)"),
    (sys.executable, "-c", "import time; time.sleep(120)"),  # never answers
], ids=["dies", "hangs"])
def test_a_server_that_fails_or_hangs_is_one_line_never_a_stuck_turn(tmp_path, argv):
    ws = _broken(tmp_path, argv)
    a = agent(ws)
    try:
        assert tools.call(a.ctx, "read_lines", {"path": "pkg/util.py", "start": 1, "end": 5}).ok
        started = time.monotonic()
        res = tools.call(a.ctx, "replace_lines", {"path": "pkg/util.py", "start": 1, "end": 1,
                                                  "content": '"""Utilities, edited."""\n'})
        took = time.monotonic() - started
        assert res.ok and (ws.root / "pkg/util.py").read_text().startswith('"""Utilities, edited."""')
        block = [line for line in res.text.splitlines() if line.startswith("lsp: ")]
        assert len(block) == 1 and "broken" in block[0], res.text
        if "dies" in block[0] or "exit" in block[0] or "did not start" in block[0]:
            assert "cannot start" in block[0]  # its last words explain it
        assert took < 3.0 + 2.0  # within lsp.timeout_s
    finally:
        a.close()
        ws.close()


@pytest.mark.skipif(shutil.which("typescript-language-server") is not None,
                    reason="typescript-language-server is installed here: its absence cannot be shown")
def test_no_typescript_server_is_said_once(tmp_path):
    ws = workspace(tmp_path, None, lsp={"enabled": True})
    a = agent(ws)
    try:
        first = tools.call(a.ctx, "write_file", {"path": "web/app.ts", "content": "export const a: number = 1;\n"})
        again = tools.call(a.ctx, "write_file", {"path": "web/b.ts", "content": "export const b = 2;\n"})
    finally:
        a.close()
        ws.close()
    assert first.ok and again.ok
    lines = [line for line in first.text.splitlines() if line.startswith("lsp: ")]
    assert len(lines) == 1 and "no TypeScript/JavaScript language server" in lines[0]
    assert "lsp:" not in again.text


def test_an_edit_over_mcp_is_checked_too(demo):
    from workstation.mcp.server import Service

    ws = demo
    at = _line(ws, "shop/http.py", "def build_url(")
    service = Service(ws)
    state = service.client("k", "editor", "1")
    try:
        assert service.call(state, "read_lines", {"path": "shop/http.py", "start": at, "end": at}).ok
        broke = service.call(state, "replace_lines", {"path": "shop/http.py", "start": at, "end": at,
                                                      "content": "def build_url(path: str, host: str) -> dict:\n"})
        mended = service.call(state, "replace_lines", {"path": "shop/http.py", "start": at, "end": at,
                                                       "content": "def build_url(path: str, host: str = 'api.shop.test') -> dict:\n"})
    finally:
        service.close()
    caller = _line(ws, "shop/http.py", "build_url_result = build_url(")
    assert f"lsp: 1 new error (basedpyright):\n  shop/http.py:{caller}:" in broke.text, broke.text
    assert f"lsp: fixed: shop/http.py:{caller} Argument missing" in mended.text, mended.text


def test_stopping_the_turn_ends_a_wait_for_the_server_at_once(tmp_path):
    import threading

    ws = _broken(tmp_path, (sys.executable, "-c", "import time; time.sleep(120)"))
    ws.config.lsp.timeout_s = 30.0
    a = agent(ws)
    try:
        assert tools.call(a.ctx, "read_lines", {"path": "pkg/util.py", "start": 1, "end": 5}).ok
        a.ctx.turn.cancel = threading.Event()
        threading.Timer(0.5, a.ctx.turn.cancel.set).start()
        started = time.monotonic()
        res = tools.call(a.ctx, "replace_lines", {"path": "pkg/util.py", "start": 1, "end": 1,
                                                  "content": '"""Utilities, edited."""\n'})
        assert time.monotonic() - started < 3.0  # not the 30 s of lsp.timeout_s
        # the edit itself was quick and is done; its check says why it did not run
        assert "lsp: stopped by the user; this edit was not checked" in res.text or (
            not res.ok and "stopped by the user" in res.text)
    finally:
        a.ctx.turn.cancel = None
        a.close()
        ws.close()


def _typescript_ready() -> str:
    from workstation.lsp.servers import spec_for

    spec = spec_for("typescript")
    if isinstance(spec, str):
        return spec
    return "" if spec.init_options else "typescript-language-server has no tsserver beside it (typescript@5)"


@pytest.mark.skipif(bool(_typescript_ready()), reason=f"no TypeScript server here: {_typescript_ready()}")
def test_a_typescript_edit_that_breaks_a_caller_and_its_fix(tmp_path):
    files = {"src/lib.ts": 'export function greet(name: string): string {\n  return "hi " + name;\n}\n',
             "src/main.ts": 'import { greet } from "./lib";\n\nexport const out = greet("x");\n',
             "tsconfig.json": '{"compilerOptions": {"strict": true, "target": "es2020", "module": "commonjs"}}\n'}
    ws = workspace(tmp_path, None, files=files, lsp=LSP)
    a = agent(ws)
    try:
        assert tools.call(a.ctx, "read_lines", {"path": "src/lib.ts", "start": 1, "end": 1}).ok
        broke = tools.call(a.ctx, "replace_lines", {"path": "src/lib.ts", "start": 1, "end": 1,
                                                    "content": "export function greet(name: string, n: number): string {\n"})
        mended = tools.call(a.ctx, "replace_lines", {"path": "src/lib.ts", "start": 1, "end": 1,
                                                     "content": "export function greet(name: string, n = 1): string {\n"})
    finally:
        a.close()
        ws.close()
    assert "lsp: 1 new error (typescript-language-server):\n  src/main.ts:3:" in broke.text, broke.text
    assert "lsp: fixed: src/main.ts:3 Expected 2 arguments" in mended.text, mended.text


# --------------------------------------------------------------------------- a hostile repository (issue 29)
PLANTED_PYTHON = '#!/bin/sh\ntouch "$(dirname "$0")/../../PLANTED_RAN"\nexec python3 "$@"\n'


def test_no_language_server_runs_what_an_untrusted_repository_ships(tmp_path):
    """The repository plants `.venv/bin/python`, which basedpyright would run to find the project's
    packages; untrusted, no server starts (one line says why and how to trust), so nothing of it runs."""
    ws = agent_support.workspace(tmp_path, None, files={**FILES, ".venv/bin/python": PLANTED_PYTHON}, lsp=LSP)
    (ws.root / ".venv/bin/python").chmod(0o755)
    (ws.root / ".venv/pyvenv.cfg").write_text("home = /usr/bin\n")
    a = agent(ws)
    try:
        assert tools.call(a.ctx, "read_lines", {"path": "shop/http.py", "start": 1, "end": 5}).ok
        res = tools.call(a.ctx, "replace_lines", {"path": "shop/http.py", "start": 1, "end": 1,
                                                  "content": '"""HTTP helpers, edited."""\n'})
        assert res.ok, res.text
        assert not (ws.root / "PLANTED_RAN").exists()
        block = [line for line in res.text.splitlines() if line.startswith("lsp: ")]
        assert block == [f"lsp: no language server: {ws.root} is not trusted, and a server runs what a repository "
                         f"ships (its interpreter, its plugins); `workstation trust {ws.root}` to have edits checked"]
    finally:
        a.close()
        ws.close()
    assert not (ws.root / "PLANTED_RAN").exists()


def test_a_language_server_is_found_only_through_absolute_path_entries(tmp_path, monkeypatch):
    from workstation.lsp.servers import spec_for

    bin_dir = tmp_path / "repo" / "node_modules" / ".bin"
    bin_dir.mkdir(parents=True)
    for name in ("typescript-language-server", "node", "tsc"):
        (bin_dir / name).write_text(f"#!/bin/sh\ntouch {tmp_path}/PLANTED_RAN\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.chdir(tmp_path / "repo")  # the app runs in the repository
    monkeypatch.setenv("PATH", f"node_modules/.bin{os.pathsep}{os.environ['PATH']}")
    spec = spec_for("typescript")
    argv = [] if isinstance(spec, str) else list(spec.argv)
    assert not any("node_modules/.bin" in part for part in argv), argv


@pytest.mark.timeout(60)
def test_a_workspace_cannot_make_an_edit_wait_on_a_server_past_the_users_limit(tmp_path, monkeypatch):
    """A trusted repository's `lsp.timeout_s = 600` with a server that never answers: the edit still waits
    no longer than the user's own limit (3 s here)."""
    from workstation.lsp import ServerSpec
    from workstation.runtime import Workspace
    from support.trust_support import trust

    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[lsp]\ntimeout_s = 3\n")
    monkeypatch.setenv("WORKSTATION_HOME", str(home))
    root = tmp_path / "repo"
    agent_support.write_repo(root)
    (root / ".workstation").mkdir()
    (root / ".workstation" / "config.toml").write_text("[lsp]\ntimeout_s = 600\n")
    trust(root)
    ws = Workspace(root)
    hang = (sys.executable, "-c", "import time; time.sleep(120)")
    ws.lsp.policy, ws.lsp.specs = None, lambda language: ServerSpec(language, "hangs", hang)
    a = agent(ws)
    try:
        assert tools.call(a.ctx, "read_lines", {"path": "pkg/util.py", "start": 1, "end": 5}).ok
        started = time.monotonic()
        res = tools.call(a.ctx, "replace_lines", {"path": "pkg/util.py", "start": 1, "end": 1,
                                                  "content": '"""Utilities, edited."""\n'})
        took = time.monotonic() - started
        assert res.ok and "lsp: " in res.text
        assert took < 3.0 + 2.0, took
    finally:
        a.close()
        ws.close()
