"""The command allow-list (`agent.command_allow`): argv patterns that run without asking.

An entry is one command's words, read as the shell would split them (no pipes, no `;`, no `$`):

    git status              plain words: those words, then any *safe* arguments
    git log -n *            `*`: exactly one safe argument
    pytest -q ...           `...` (last only): any number of safe arguments
    pytest --junitxml=*     `--opt=*`: that option, with a safe value
    pytest --basetemp=build/tmp ...   any other word is literal and names an option exactly

Plain words used to be a prefix; they still are, but what follows must be safe. An argument is safe
when it is not an option that writes or reaches outside the workspace for that program (`OPTIONS`:
`git --output`, `--no-index`, `pytest --basetemp`, `-o`...; an abbreviation of one counts as it), not an
argument file (`@args.txt`), and when, taken as a path, it stays inside the workspace and out of its
state folder (`/etc`, `../x`, a symlink out: not safe). Anything not safe is asked about, unless a
pattern names it. The check is about arguments only: what the program then does is the sandbox's job.

A wrapper (`sh`, `env`, `python`...) runs whatever its arguments say, so an entry starting with one
matches that exact command line and nothing longer; the one exception is `python -m MODULE`, whose
module then gets the same checks as the program of that name (`python -m pytest` is `pytest`).
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from ..paths import STATE_DIRNAME

# Commands that run another command: an allow-list entry never covers them implicitly,
# or `env rm -rf /` would pass as `env`.
WRAPPERS = frozenset({
    "sh", "bash", "zsh", "dash", "fish", "env", "xargs", "sudo", "doas", "nohup", "timeout",
    "nice", "ionice", "exec", "eval", "command", "builtin", "time", "watch", "find", "python", "python3",
    "perl", "ruby", "node", "su", "chroot", "setsid", "stdbuf", "strace",
})
SHELL_SYNTAX = set("|&;<>()$`\\\n*?[]{}~!#")
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?$")

# Options that write files or reach outside the workspace, by program: (long options, short letters).
# A long option is matched with its abbreviations (git and argparse both accept unique prefixes);
# a short letter anywhere in a bundle (`-vo`) counts, since `-vo x` is `-v -o x`.
_PYTEST = ({"--basetemp", "--rootdir", "--junitxml", "--junit-xml", "--resultlog", "--result-log",
            "--report-log", "--log-file", "--override-ini", "--config-file", "--confcutdir", "--debug",
            "--cov-report", "--html", "--pastebin"}, set("oc"))
OPTIONS: dict[str, tuple[set[str], set[str]]] = {
    "git": ({"--output", "--output-directory", "--no-index", "--ext-diff", "--textconv", "--exec",
             "--upload-pack", "--receive-pack", "--config-env", "--git-dir", "--work-tree", "--exec-path",
             "--open-files-in-pager", "--contents", "--show-signature", "--template"}, set("oO")),
    "pytest": _PYTEST,
    "py.test": _PYTEST,
    "ls": (set(), set()),
}
# Any other program: the names that commonly mean "write here" or "read settings from there".
DEFAULT_OPTIONS = ({"--output", "--output-dir", "--output-directory", "--outdir", "--out", "--log-file",
                    "--config", "--config-file", "--rootdir", "--basetemp", "--junitxml"}, set("o"))
ARG_FILES = {"pytest", "py.test"}  # programs that read more arguments from `@file`


def split(command: str) -> list[str] | None:
    """argv if `command` is a plain command line with no shell syntax, else None. A `~` is shell syntax
    only where a shell would expand it, at the start of a word (`HEAD~1` is plain)."""
    if any(ch in SHELL_SYNTAX and ch != "~" for ch in command):
        return None
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    return None if any(arg.startswith("~") for arg in argv) else argv


def program_of(argv: Sequence[str]) -> str:
    """The program whose options the arguments are: `python -m pytest` is pytest."""
    name = Path(argv[0]).name
    if _PYTHON.match(name) and len(argv) > 2 and argv[1] == "-m":
        return argv[2]
    return name


@dataclass(frozen=True)
class Pattern:
    text: str
    words: tuple[str, ...]
    program: str
    rest: bool  # ends with `...` (said or implied): any number of safe arguments may follow

    @classmethod
    def parse(cls, entry: str) -> "Pattern":
        """The pattern of one allow-list entry; ValueError with one line saying what is wrong."""
        if not isinstance(entry, str) or not entry.strip():
            raise ValueError("an empty entry")
        bad = sorted({ch for ch in entry if ch in SHELL_SYNTAX} - {"*"})
        if bad:
            raise ValueError(f"{entry!r} has shell syntax ({' '.join(bad)}): an entry is one command's words, "
                             "with `*` for one argument and a final `...` for any (see the README)")
        try:
            words = shlex.split(entry)
        except ValueError as err:
            raise ValueError(f"{entry!r} is not a command line ({err})") from None
        if not words:
            raise ValueError("an empty entry")
        for i, word in enumerate(words):
            if word == "..." and i != len(words) - 1:
                raise ValueError(f"{entry!r}: `...` may only end an entry")
            if "*" in word and word != "*" and not (word.endswith("=*") and word.count("*") == 1):
                raise ValueError(f"{entry!r}: `*` stands alone (one argument) or ends an option (`--opt=*`)")
            if word in ("*", "...") and i == 0:
                raise ValueError(f"{entry!r}: the first word names the program")
        explicit = words[-1] == "..."
        if explicit:
            words = words[:-1]
        wildcards = explicit or any(w == "*" or w.endswith("=*") for w in words)
        name = Path(words[0]).name
        pinned_module = _PYTHON.match(name) and len(words) > 2 and words[1] == "-m" and "*" not in words[2]
        if name in WRAPPERS and not pinned_module:
            if wildcards:
                raise ValueError(f"{entry!r}: {name} runs whatever its arguments say; name the whole command "
                                 "exactly (no `*` or `...`), or use `python -m MODULE ...`")
            return cls(entry, tuple(words), name, rest=False)
        return cls(entry, tuple(words), program_of(words), rest=explicit or not wildcards)

    def check(self, argv: Sequence[str], root: Path, private: Sequence[Path]) -> tuple[bool, str | None]:
        """(matched, reason): matched when `argv` fits the pattern; otherwise the reason names the first
        unsafe argument when the pattern's own words matched (None when they did not)."""
        words = self.words
        if len(argv) < len(words) or (not self.rest and len(argv) != len(words)):
            # shorter, or longer than an exact pattern: the words may still be a prefix worth naming
            return False, None
        for want, got in zip(words, argv):
            if want == "*":
                if reason := unsafe(got, self.program, root, private):
                    return False, reason
            elif want.endswith("=*"):
                if not got.startswith(want[:-1]):
                    return False, None
                if reason := _outside(got[len(want) - 1:], root, private):
                    return False, f"{got}: {reason}"
            elif want != got:
                return False, None
        for arg in argv[len(words):]:
            if reason := unsafe(arg, self.program, root, private):
                return False, reason
        return True, None


def unsafe(arg: str, program: str, root: Path, private: Sequence[Path] = ()) -> str | None:
    """Why `arg` may not pass as a safe argument of `program`, or None."""
    long, short = OPTIONS.get(program, DEFAULT_OPTIONS)
    value = arg
    if arg.startswith("--") and len(arg) > 2:
        name, _, value = arg.partition("=")
        if any(option.startswith(name) for option in long):
            full = next(option for option in sorted(long) if option.startswith(name))
            return f"{arg}: {full} writes or reaches outside the workspace unless a pattern names it"
    elif arg.startswith("-") and len(arg) > 1:
        letters = set(arg[1:2]) if arg[1:2].isdigit() else set(arg[1:])
        if hit := sorted(letters & short):
            return f"{arg}: -{hit[0]} writes or reaches outside the workspace unless a pattern names it"
        if "/" not in arg:
            return None  # `-n5`, `-la`: no path in it
        value = arg[2:]  # `-I/etc`: an attached path
    elif arg.startswith("@") and program in ARG_FILES:
        return f"{arg}: an argument file ({program} reads more arguments from it)"
    if value and (reason := _outside(value, root, private)):
        return f"{arg}: {reason}"
    return None


def _outside(value: str, root: Path, private: Sequence[Path]) -> str | None:
    """Why `value`, taken as a path from the workspace root, leaves it or enters its state folder."""
    if "\x00" in value:
        return "a NUL byte"
    root_real = Path(os.path.realpath(root))
    real = Path(os.path.realpath(root_real / value))  # an absolute value replaces the root
    if real != root_real and root_real not in real.parents:
        return "outside the workspace"
    for folder in (root_real / STATE_DIRNAME, *private):
        folder_real = Path(os.path.realpath(folder))
        if real == folder_real or folder_real in real.parents:
            return "in the workspace's state folder"
    return None


def parse_all(entries: Iterable[str]) -> list[Pattern]:
    """Every valid pattern of `entries` (config validation has refused the others)."""
    out = []
    for entry in entries:
        try:
            out.append(Pattern.parse(entry))
        except ValueError:
            continue  # refused at config load; a caller passing a raw list gets the valid ones only
    return out


def check(command: str, allow: Iterable[str], root: Path | None = None,
          private: Sequence[Path] = ()) -> str | None:
    """None when the allow-list covers `command`; otherwise why not, in one line (for the approval)."""
    argv = split(command)
    if not argv:
        return "not a plain command line (shell syntax is always asked about)"
    root = Path(root) if root is not None else Path.cwd()
    first_reason = None
    for pattern in parse_all(allow):
        matched, reason = pattern.check(argv, root, private)
        if matched:
            return None
        first_reason = first_reason or reason
    return first_reason or "not on agent.command_allow"


def allowed(command: str, allow: Iterable[str], root: Path | None = None, private: Sequence[Path] = ()) -> bool:
    """True when the allow-list covers `command` without asking the user."""
    return check(command, allow, root, private) is None
