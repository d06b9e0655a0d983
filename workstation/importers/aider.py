"""aider chat logs: `.aider.chat.history.md`, with `.aider.input.history` beside it for times.

The quirks of the format, and what this importer does with each:

- Markdown, appended to across runs. `# aider chat started at YYYY-MM-DD HH:MM:SS` opens a run:
  each run is its own session.
- User input is written as lines starting `#### ` (a multi-line input: one such line each);
  aider's own console output (warnings, "Applied edit to...", command output, the token line) as
  lines starting `> `; the model's answer as plain markdown between them. Lines end in two spaces
  (markdown line breaks), which are dropped.
- aider has no tool calls: its console output is kept as tool records named `aider`, without a
  call id, so the model-context builder leaves them out (the model never saw them). Answers to
  aider's own prompts ("Add file to the chat? (Y)es/(N)o... [Yes]: all") are logged as `#### `
  lines too: they go into that console record, not into a user record.
- `> Tokens: 1.8k sent, 653 received. Cost: $0.01 message, $0.02 session.` after an answer is its
  usage, rounded by aider to two significant figures (1.8k); "cache write" / "cache hit" counts
  when shown, and the stated cost is used as is. `> Model: NAME with ... edit format` (or
  `Main model:`) names the model of the run.
- The only times are the run's start (local time, no zone) and, in `.aider.input.history`, one
  `# YYYY-MM-DD HH:MM:SS.ffffff` entry per input with its lines prefixed `+`. User records take
  the time of the next entry with the same text; answers and console output take the time of the
  input before them. Times without a zone are read as local time of this machine.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..fsutil import open_regular
from .base import Conversation, Draft, Parsed, Part, Problem, Usage, file_ts, iso_ts, stable_hash

NAME = "aider"
PREFIX = "aider"
_HEADER = re.compile(r"^# aider chat started at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s*$")
_CONFIRM = re.compile(r"\(Y\)es/\(N\)o.*\]: ?\S*\s*$")
_TOKENS = re.compile(r"^Tokens: (.+?)\.(?:\s|$)(?:\s*Cost: \$([\d.]+) message)?")
_COUNT = re.compile(r"([\d.]+)([kKmM]?) (sent|received|cache write|cache hit)")
_MODEL = re.compile(r"^(?:Main model|Model): (\S+)")
_ENTRY = re.compile(r"^# (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\s*$")


def sniff_text(head: str, path: Path) -> bool:
    return bool(re.search(r"^# aider chat started at ", head, re.MULTILINE)) or \
        path.name.endswith(".aider.chat.history.md")


def is_input_history(head: str) -> bool:
    lines = [line for line in head.splitlines() if line.strip()][:4]
    return bool(lines) and bool(_ENTRY.match(lines[0])) and all(
        _ENTRY.match(line) or line.startswith("+") for line in lines)


def parse(data: bytes, path: Path) -> Parsed:
    file = str(path)
    problems: list[Problem] = []
    text = data.decode("utf-8", errors="replace")
    if "\ufffd" in text and b"\xef\xbf\xbd" not in data:
        problems.append(Problem(file, "not valid UTF-8; unreadable bytes were replaced"))
    entries = _input_history(input_history_of(path), problems)
    real = str(path.resolve())
    conversations: list[Conversation] = []
    run: _Run | None = None
    for line in text.split("\n"):
        found = _HEADER.match(line) if line.startswith("# aider chat") else None
        if found:
            if run is not None:
                conversations.append(run.finish())
            run = _Run(real, len(conversations), iso_ts(found.group(1)) or file_ts(path), found.group(1), entries)
            continue
        if run is None:
            if not line.strip():
                continue
            run = _Run(real, 0, file_ts(path), "", entries)
        run.add(line)
    if run is not None:
        conversations.append(run.finish())
    return Parsed([c for c in conversations if c.drafts], problems, len(data))


def input_history_of(path: Path) -> Path:
    """The input history beside a chat history: `.aider.input.history` for `.aider.chat.history.md`
    (any prefix before them kept: `x.aider.chat.history.md` -> `x.aider.input.history`)."""
    name = path.name
    if name.endswith(".aider.chat.history.md"):
        return path.with_name(name[: -len(".aider.chat.history.md")] + ".aider.input.history")
    return path.with_name(".aider.input.history")


def _input_history(path: Path, problems: list[Problem]) -> list[tuple[str, str]]:
    """(time, text) of each input aider logged, oldest first; [] when the file is absent."""
    try:
        with os.fdopen(open_regular(path), "rb") as fh:
            raw = fh.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return []
    except OSError as err:
        problems.append(Problem(str(path), f"cannot read ({err.strerror}); inputs get the run's start time"))
        return []
    entries: list[tuple[str, str]] = []
    when: str | None = None
    lines: list[str] = []
    for line in raw.split("\n"):
        found = _ENTRY.match(line)
        if found:
            if when:
                entries.append((when, "\n".join(lines)))
            when, lines = iso_ts(found.group(1)), []
        elif line.startswith("+"):
            lines.append(line[1:])
    if when:
        entries.append((when, "\n".join(lines)))
    return entries


class _Run:
    """One `# aider chat started at` run: its lines folded into blocks, then into drafts."""

    def __init__(self, file: str, index: int, start: str, header: str, entries: list[tuple[str, str]]):
        self.key = f"{file}#{index}:{header}"
        self.start = start
        self.ts = start
        self.entries = [e for e in entries if e[0] >= start] if header else entries
        self.blocks: list[tuple[str, list[str]]] = []  # (kind, lines): user | console | answer
        self.model = ""
        self.fenced = False  # inside a ``` block of an answer: every line is the answer's

    def add(self, line: str) -> None:
        # called for every line of the file (~17,000 a MB): the first character decides most of it
        blocks = self.blocks
        first = line[:1]
        if self.fenced:
            if first == "`" and line.startswith("```"):
                self.fenced = False
            blocks[-1][1].append(line)
            return
        fence = first == "`" and line.startswith("```")
        if fence and blocks and blocks[-1][0] == "answer":
            self.fenced = True
            blocks[-1][1].append(line)
            return
        if first == "#" and line.startswith("####"):
            body = line[5:] if line.startswith("#### ") else line[4:]
            kind = "console" if _CONFIRM.search(body) else "user"
        elif first == ">" and (line.startswith("> ") or line.rstrip() == ">"):  # not ">>>>>>> REPLACE"
            kind, body = "console", line[2:]
        else:
            kind, body = "answer", line
            if fence:
                self.fenced = True
        if body.endswith("  "):
            body = body[:-2]
        last = blocks[-1][0] if blocks else None
        if kind == "console" and last == "blank" and len(blocks) > 1 and blocks[-2][0] == "console":
            blocks.pop()  # aider's output with blank lines between it is one stretch of output
            last = "console"
        if last == kind:
            blocks[-1][1].append(body)
        elif kind == "answer" and not body.strip():
            blocks.append(("blank", [body]))  # a blank line between blocks of other kinds
        else:
            blocks.append((kind, [body]))

    def finish(self) -> Conversation:
        drafts: list[Draft] = []
        pointer = 0
        for number, (kind, lines) in enumerate(self.blocks):
            body = "\n".join(lines).strip("\n")
            if kind == "blank" or not body.strip():
                continue
            sid = f"b{number}"
            if kind == "user":
                for index in range(pointer, len(self.entries)):
                    if self.entries[index][1].strip() == body.strip():
                        self.ts, pointer = self.entries[index][0], index + 1
                        break
                drafts.append(Draft("user", sid, self.ts, {"content": body}))
            elif kind == "answer":
                fields = {"model": self.model} if self.model else {}
                drafts.append(Draft("assistant", sid, self.ts, fields, [Part(sid, "text", body, self.ts)], None, {}))
            else:
                self._console(lines, drafts)
                drafts.append(Draft("tool", sid, self.ts, {"name": "aider", "content": body,
                                                           "ok": not _is_error(body)}))
        key = self.key if self.key.rsplit(":", 1)[-1] else f"{self.key}{stable_hash(self.start)[:6]}"
        return Conversation(key, PREFIX, self.start, drafts, {})

    def _console(self, lines: list[str], drafts: list[Draft]) -> None:
        for line in lines:
            found = _MODEL.match(line.strip())
            if found:
                self.model = found.group(1)
            found = _TOKENS.match(line.strip())
            answer = next((d for d in reversed(drafts) if d.type in ("assistant", "user")), None)
            if found and answer is not None and answer.type == "assistant" and answer.usage is None:
                counts = {kind: _number(n, unit) for n, unit, kind in _COUNT.findall(found.group(1))}
                answer.usage = Usage(tokens_in=counts.get("sent", 0),  # litellm's prompt_tokens: caches included
                                     tokens_out=counts.get("received", 0), cache_read=counts.get("cache hit", 0),
                                     cache_creation=counts.get("cache write", 0),
                                     cost=float(found.group(2)) if found.group(2) else None)


def _number(value: str, unit: str) -> int:
    try:
        number = float(value)
    except ValueError:
        return 0
    return int(round(number * {"k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6}.get(unit, 1)))


def _is_error(body: str) -> bool:
    first = body.lstrip().split("\n", 1)[0]
    return bool(re.match(r"^(Traceback|[\w.]*Error\b|[\w.]*Exception\b)", first))
