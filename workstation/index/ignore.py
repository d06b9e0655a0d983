"""Which paths the knowledge map leaves out, with git's rules.

Sources, highest precedence first:
1. `.workstation/ignore` (read only in a trusted workspace: workstation.trust) and the config's
   `index.ignore` patterns (the user's explicit word for workstation, so they may also re-include
   with `!`);
2. `.gitignore` files, a deeper one overriding a shallower one, each relative
   to its own folder (as git reads them);
3. `.git/info/exclude`.
`.git`, the `.workstation` folder and the state folder are always left out.
As in git, nothing inside an ignored folder can be re-included.
"""

from __future__ import annotations

import os
import posixpath
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Literal, Sequence

from ..paths import STATE_DIRNAME

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

Sig = tuple[int, int, int, int]  # a file's (size, mtime_ns, ctime_ns, inode): what freshness compares first


_RECENT_NS = 2_000_000_000  # as freshness.RACY_WINDOW_NS: file times are coarse


def _read_lines(path: Path) -> list[str] | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().splitlines()
    except OSError:
        return None  # a missing or unreadable ignore file is treated as absent, as git does


def _compile(lines: Iterable[str], where: str = "", problems: list[str] | None = None) -> GitIgnoreSpec | None:
    """The patterns of an ignore file; a line that is no pattern is left out, as git does (and said in
    `problems`, for the user's own file)."""
    lines = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        return None
    from pathspec import GitIgnoreSpec  # lazy: pathspec, +15 ms, only for a tree with ignore patterns

    try:
        return GitIgnoreSpec.from_lines(lines)
    except Exception:  # pathspec's own error types and ValueError: find the lines that are not patterns
        good = []
        for line in lines:
            try:
                GitIgnoreSpec.from_lines([line])
                good.append(line)
            except Exception:
                if problems is not None:
                    problems.append(f"{where}: {line!r} is not a gitignore pattern; left out")
        return GitIgnoreSpec.from_lines(good) if good else None


class IgnoreRules:
    """Decides whether a repo-relative path is ignored; `.gitignore` files are read lazily."""

    def __init__(self, root: Path, state_dir: Path | None = None, extra_patterns: Sequence[str] = (),
                 user_file: bool = True):
        self.root = Path(root)
        self.user_file = user_file  # read `.workstation/ignore` (a trusted workspace)
        always = {".git", STATE_DIRNAME}
        if state_dir is not None:
            try:
                rel = Path(os.path.realpath(state_dir)).relative_to(self.root).as_posix()
            except ValueError:
                rel = ""
            if rel and rel != ".":
                always.add(rel)
        self.always = frozenset(always)
        # the real folders a symlink must never lead into (config, databases, session logs, git objects)
        private = [self.root / a for a in sorted(always)]
        if state_dir is not None:
            private.append(Path(state_dir))
        self._private = [os.path.realpath(p) for p in private]
        self.extra_patterns = list(extra_patterns)
        self._git: dict[str, GitIgnoreSpec | None] = {}  # folder relpath ('' for root) -> spec or None
        # folder -> stat signature of its .gitignore (None: no such file; False: read without one)
        self._git_sigs: dict[str, Sig | None | Literal[False]] = {}
        # folder -> ((folder, spec), ...) deepest first, specs only
        self._chains: dict[str, tuple[tuple[str, GitIgnoreSpec], ...]] = {}
        self._always_top = frozenset(a for a in self.always if "/" not in a)
        self._always_deep = tuple(a for a in self.always if "/" in a)
        self.reload()

    def reload(self, gitignores: bool = True) -> None:
        """Read every ignore file again (they may have changed since). A walk that reports each
        folder's `.gitignore` through `saw_gitignore` may keep the ones it finds unchanged."""
        own = _read_lines(self.root / STATE_DIRNAME / "ignore") if self.user_file else None
        user_lines = list(own or []) + self.extra_patterns
        self.problems: list[str] = []  # lines of the user's ignore file that are no patterns
        self._user = _compile(user_lines, f"{STATE_DIRNAME}/ignore", self.problems)
        self._exclude = _compile(_read_lines(self.root / ".git" / "info" / "exclude") or [])
        if gitignores:
            self._git.clear()
            self._git_sigs.clear()
            self._chains.clear()

    def saw_gitignore(self, folder: str, sig: Sig | None) -> None:
        """What a walk found of `folder`'s `.gitignore` (its stat signature, None: no such file):
        read again only if that changed since it was read."""
        if folder in self._git and self._git_sigs.get(folder, False) == sig:
            return
        if sig is None:
            spec = None
        else:
            lines = _read_lines(self.root / folder / ".gitignore" if folder else self.root / ".gitignore")
            spec = _compile(lines) if lines else None
        if self._git.get(folder) is not spec or folder not in self._git:
            self._chains.clear()
        self._git[folder] = spec
        # a file changed within the last tick or two may change again unseen: read it again next time
        recent = sig is not None and max(sig[1], sig[2]) >= time.time_ns() - _RECENT_NS
        self._git_sigs[folder] = False if recent else sig

    # -- .gitignore files -------------------------------------------------
    def gitignore_spec(self, folder: str) -> GitIgnoreSpec | None:
        """The compiled `.gitignore` of `folder` (cached); None when it has none."""
        if folder not in self._git:
            lines = _read_lines(self.root / folder / ".gitignore" if folder else self.root / ".gitignore")
            self._git[folder] = _compile(lines) if lines else None
            self._git_sigs[folder] = False  # read without a signature: the next walk reads it again
            self._chains.clear()
        return self._git[folder]

    # -- decisions --------------------------------------------------------
    def is_private(self, real: str) -> bool:
        """Whether a real path is `.git`, the `.workstation` folder or the state folder, or inside one:
        a symlink there is never followed. Compared by path and by file identity, so that another
        spelling of the same folder (a case-insensitive filesystem) is caught too."""
        identities = set()
        for folder in self._private:
            if real == folder or real.startswith(folder + os.sep):
                return True
            try:
                st = os.stat(folder)
            except OSError:
                continue  # not there: nothing in it to protect
            identities.add((st.st_dev, st.st_ino))
        if not identities:
            return False
        root = str(self.root)
        part = real
        while part.startswith(root + os.sep):
            try:
                st = os.stat(part)
            except OSError:
                return False
            if (st.st_dev, st.st_ino) in identities:
                return True
            part = os.path.dirname(part)
        return False

    def is_always_ignored(self, relpath: str) -> bool:
        if relpath.partition("/")[0] in self._always_top:
            return True
        return any(relpath == a or relpath.startswith(a + "/") for a in self._always_deep)

    def _chain(self, folder: str) -> tuple[tuple[str, GitIgnoreSpec], ...]:
        """The `.gitignore` files that apply in `folder`, deepest first (computed once per folder:
        the walk asks for every entry)."""
        chain = self._chains.get(folder)
        if chain is None:
            spec = self.gitignore_spec(folder)
            above = self._chain(posixpath.dirname(folder)) if folder else ()
            chain = self._chains[folder] = ((folder, spec),) + above if spec is not None else above
        return chain

    def ignored_here(self, relpath: str, is_dir: bool) -> bool:
        """Whether `relpath` itself is ignored, assuming no folder above it is."""
        if self.is_always_ignored(relpath):
            return True
        probe = relpath + "/" if is_dir else relpath
        if self._user is not None:
            verdict = self._user.check_file(probe).include
            if verdict is not None:
                return verdict
        for folder, spec in self._chain(posixpath.dirname(relpath)):  # the deepest with an opinion decides
            sub = probe[len(folder) + 1:] if folder else probe
            verdict = spec.check_file(sub).include
            if verdict is not None:
                return verdict
        if self._exclude is not None:
            return bool(self._exclude.check_file(probe).include)
        return False

    def ignored(self, relpath: str, is_dir: bool = False) -> bool:
        """Whether `relpath` is ignored, itself or through any folder above it."""
        relpath = relpath.strip("/")
        if not relpath:
            return False
        parts = relpath.split("/")
        for i in range(1, len(parts)):
            if self.ignored_here("/".join(parts[:i]), True):
                return True
        return self.ignored_here(relpath, is_dir)
