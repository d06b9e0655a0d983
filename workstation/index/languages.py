"""Language and file-kind detection from a repo-relative path alone (no file I/O).

``detect(relpath)`` returns ``(language, kind)``:

* ``language`` is one of :data:`LANGUAGES` (those the parser understands) or ``None``.
* ``kind`` is ``'code'``, ``'test'``, ``'config'``, ``'doc'`` or ``'other'``.

``'test'`` is given to code files (a known language or another programming language)
that live under a test directory (``tests/``, ``test/``, ``__tests__/``, ``spec/``,
``testdata/``...) or whose name follows a test convention (``test_*.py``, ``*_test.py``,
``conftest.py``, ``*_test.go``, ``*.test.ts``, ``*.spec.js``, ``*_spec.rb``,
``FooTest.java``...). Docs and configs under a test directory keep their own kind.
"""

from __future__ import annotations

import posixpath

LANGUAGES: tuple[str, ...] = (
    "python", "javascript", "typescript", "tsx", "go", "rust", "java", "c", "cpp", "ruby",
)

_EXT_LANG: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".pyw": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c", ".h": "c",
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".c++": "cpp", ".cp": "cpp",
    ".hh": "cpp", ".hpp": "cpp", ".hxx": "cpp", ".h++": "cpp", ".ipp": "cpp",
    ".tpp": "cpp", ".inl": "cpp", ".cu": "cpp", ".cuh": "cpp",
    ".rb": "ruby", ".rake": "ruby", ".gemspec": "ruby", ".ru": "ruby",
}

# Code we cannot parse, but which is still code (kind 'code'/'test', language None).
_OTHER_CODE_EXTS = frozenset({
    ".sh", ".bash", ".zsh", ".fish", ".ps1", ".psm1", ".bat", ".cmd",
    ".pl", ".pm", ".php", ".swift", ".kt", ".kts", ".scala", ".sc", ".cs", ".fs",
    ".fsx", ".vb", ".lua", ".r", ".jl", ".m", ".mm", ".sql", ".hs", ".ml", ".mli",
    ".ex", ".exs", ".erl", ".clj", ".cljs", ".dart", ".groovy", ".zig", ".nim",
    ".v", ".sv", ".vhd", ".vhdl", ".asm", ".s", ".f", ".f90", ".pas", ".el", ".lisp",
    ".scm", ".rkt", ".elm", ".vue", ".svelte", ".astro", ".html", ".htm", ".css",
    ".scss", ".sass", ".less", ".pyx", ".pxd", ".proto", ".graphql", ".gql", ".thrift",
    ".tf", ".hcl", ".nix", ".bzl", ".star", ".cmake", ".awk", ".sed", ".vim", ".ipynb",
})

_CONFIG_EXTS = frozenset({
    ".toml", ".yaml", ".yml", ".json", ".jsonc", ".json5", ".ini", ".cfg", ".conf",
    ".config", ".properties", ".env", ".xml", ".plist", ".lock", ".editorconfig",
    ".gradle", ".dockerfile", ".mod", ".sum", ".cabal", ".csproj", ".sln", ".props",
    ".targets", ".npmrc", ".babelrc", ".eslintrc", ".prettierrc", ".stylelintrc",
    ".flake8", ".pylintrc", ".coveragerc", ".gitignore", ".gitattributes",
    ".gitmodules", ".dockerignore", ".npmignore", ".nvmrc", ".python-version",
    ".tool-versions", ".bazelrc", ".clang-format", ".clang-tidy",
})

_CONFIG_NAMES = frozenset({
    "makefile", "gnumakefile", "dockerfile", "containerfile", "vagrantfile",
    "jenkinsfile", "procfile", "pipfile", "gemfile", "rakefile", "brewfile",
    "podfile", "fastfile", "berksfile", "guardfile", "justfile", "tiltfile",
    "cmakelists.txt", "build", "build.bazel", "workspace", "workspace.bazel",
    "module.bazel", "meson.build", "meson_options.txt", "sconstruct", "sconscript",
    "requirements.txt", "constraints.txt", "manifest.in", "codeowners", "owners",
    "go.mod", "go.sum", "go.work", "cargo.lock", "package.json", "tsconfig.json",
    ".env", ".envrc", ".gitignore", ".gitattributes", ".gitmodules", ".dockerignore",
    ".editorconfig", ".pre-commit-config.yaml", "setup.cfg", "tox.ini", "pytest.ini",
    "mypy.ini", ".flake8", ".pylintrc", ".coveragerc",
})

# Ruby build files with Ruby syntax: parse them, but they are config.
_RUBY_CONFIG_NAMES = frozenset({
    "gemfile", "rakefile", "vagrantfile", "podfile", "fastfile", "berksfile",
    "guardfile", "brewfile",
})

_DOC_EXTS = frozenset({
    ".md", ".markdown", ".mdx", ".rst", ".txt", ".text", ".adoc", ".asciidoc",
    ".org", ".rdoc", ".textile", ".pod", ".tex", ".wiki", ".man", ".1",
})

_DOC_STEMS = frozenset({
    "readme", "license", "licence", "copying", "changelog", "changes", "history",
    "authors", "contributors", "contributing", "notice", "news", "todo", "code_of_conduct",
    "security", "support", "maintainers", "install", "usage", "credits", "thanks",
    "patents",
})

_TEST_DIRS = frozenset({
    "test", "tests", "__tests__", "__test__", "spec", "specs", "testdata",
    "test_data", "testing_data", "e2e", "integration_tests", "unittests", "unit_tests",
    "testsuite", "test-suite",
})


def _lower_ext(name: str) -> str:
    dot = name.rfind(".")
    if dot <= 0:  # no extension, or a dotfile such as '.bashrc'
        return name.lower() if dot == 0 else ""
    return name[dot:].lower()


def _is_test_name(name: str, lang: str | None) -> bool:
    low = name.lower()
    stem, _, _ext = low.rpartition(".")
    if not stem:
        stem = low
    if lang == "python":
        return (stem.startswith("test_") or stem.endswith("_test") or stem == "conftest"
                or stem.endswith("_tests") or stem == "tests")
    if lang == "go":
        return stem.endswith("_test")
    if lang in ("javascript", "typescript", "tsx"):
        for marker in (".test", ".spec", "_test", "_spec", ".e2e", ".cy"):
            if stem.endswith(marker):
                return True
        return False
    if lang == "ruby":
        return stem.endswith("_spec") or stem.endswith("_test") or stem.startswith("test_")
    if lang == "java":
        return (name.endswith("Test.java") or name.endswith("Tests.java")
                or name.endswith("IT.java") or (name.startswith("Test") and name[4:5].isupper()))
    if lang == "rust":
        return stem.endswith("_test") or stem.endswith("_tests")
    if lang in ("c", "cpp"):
        return (stem.startswith("test_") or stem.endswith("_test")
                or stem.endswith("_unittest") or stem.endswith("_tests"))
    return stem.startswith("test_") or stem.endswith("_test") or stem.endswith("_spec")


def detect(relpath: str) -> tuple[str | None, str]:
    """(language or None, kind) for a repo-relative path.

    language in: python, javascript, typescript, tsx, go, rust, java, c, cpp, ruby (None
    for anything else). kind in: 'code', 'test', 'config', 'doc', 'other'.
    """
    try:
        path = str(relpath).replace("\\", "/")
    except Exception:
        return None, "other"
    name = posixpath.basename(path.rstrip("/"))
    if not name:
        return None, "other"
    low = name.lower()
    ext = _lower_ext(name)

    lang = _EXT_LANG.get(ext)
    if ext == ".ts" and low.endswith(".d.ts"):
        lang = "typescript"
    if lang is None and low in _RUBY_CONFIG_NAMES:
        return "ruby", "config"
    if lang == "ruby" and low.endswith(".gemspec"):
        return "ruby", "config"

    if lang is not None or ext in _OTHER_CODE_EXTS:
        if low in _CONFIG_NAMES:
            return lang, "config"
        parts = path.lower().split("/")[:-1]
        if _is_test_name(name, lang) or any(p in _TEST_DIRS for p in parts):
            return lang, "test"
        # Java/Maven and Gradle layouts: src/test/java/..., src/androidTest/...
        if "src" in parts:
            i = parts.index("src")
            if i + 1 < len(parts) and parts[i + 1] in ("test", "androidtest", "integrationtest", "testfixtures"):
                return lang, "test"
        return lang, "code"

    if low in _CONFIG_NAMES or ext in _CONFIG_EXTS:
        return None, "config"
    if low.startswith(("dockerfile", "containerfile", "makefile")) or low.endswith(
        (".dockerfile", ".mk", "-requirements.txt")
    ) or (low.startswith("requirements") and low.endswith((".txt", ".in"))):
        return None, "config"
    if ext in _DOC_EXTS:
        return None, "doc"
    stem = low.split(".", 1)[0]
    if stem in _DOC_STEMS:
        return None, "doc"
    return None, "other"
