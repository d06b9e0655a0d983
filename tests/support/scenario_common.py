"""What the scripted models of the request_id scenarios share (tests/support/agent_scenario.py: the shop fixture,
tests/support/httpx_scenario.py: the real httpx sources).

A scripted policy sees only the request body the agent loop sent. This module reads it the same way for
both: the tool results after the model's last answer, the decisions the context carries, the maps the
context carries, and whether the request is a compaction. The context's layout may change (the lead moves
what changes during a session to messages appended at the end), so nothing here assumes a position:

* decisions are found in any message the model did not write itself: the system message's decision log
  (`- [D:<id>] text`) or a note appended later (`[workstation] Decision logged: [D:<id>] text (why: ...)`);
* the context's own text (the map excerpt, pins, the decision log) is the system message(s) plus every
  user message starting with NOTE ("[workstation] ");
* a compaction request either starts with the compaction prompt (its system message) or is the normal
  conversation whose last message starts with it.
"""

from __future__ import annotations

import json
import re

from support.fakellm import Reply
from workstation.sessions.modelview import UPDATE_PREFIX

DECISION = re.compile(r"\[D:(d[0-9a-f]{12})\] (.*)")
COMPACT_MARK = "You compact the older part"
NOTE = UPDATE_PREFIX  # a context update the loop appended (agent.updates)
NUMBERED = re.compile(r"^\s*(\d+)\| ?(.*)$")  # a read_lines row


class PolicyError(Exception):
    """The scripted model met a request it cannot answer: the scenario fails loudly."""


def content(message: dict) -> str:
    text = message.get("content")
    if isinstance(text, list):  # content blocks (cache breakpoints ride on them)
        return "".join(str(part.get("text") or "") for part in text if isinstance(part, dict))
    return str(text or "")


def is_compaction(messages: list[dict]) -> bool:
    return bool(messages) and (content(messages[0]).startswith(COMPACT_MARK)
                               or content(messages[-1]).startswith(COMPACT_MARK))


def is_note(message: dict) -> bool:
    return message.get("role") == "user" and content(message).startswith(NOTE)


def context_text(messages: list[dict]) -> str:
    """The context's own text: the system message(s) and the workstation's notes, in order."""
    return "\n\n".join(content(m) for m in messages if m.get("role") == "system" or is_note(m))


def is_new_turn(messages: list[dict]) -> bool:
    """The request answers a user message (not tool results): the last message that is not a note is one."""
    for message in reversed(messages):
        if not is_note(message):
            return message.get("role") == "user"
    return False


def decisions(messages: list[dict]) -> list[tuple[str, str]]:
    """(id, text) of every decision the context shows, oldest first (the model's own citations left out)."""
    found: list[tuple[str, str]] = []
    for message in messages:
        if message.get("role") != "assistant":
            found += DECISION.findall(content(message))
    return found


def decision(messages: list[dict], about: str) -> tuple[str, str]:
    """(id, text) of the newest decision the context shows whose text mentions `about`."""
    for did, text in reversed(decisions(messages)):
        if about in text:
            return did, text
    raise PolicyError(f"no decision about {about} in the context")


def latest_results(messages: list[dict]) -> list[tuple[str, dict, str]]:
    """(tool name, arguments, content) of the results after the last assistant message."""
    calls = {}
    for m in messages:
        for c in m.get("tool_calls") or ():
            calls[c["id"]] = (c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
    last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    out = []
    for m in messages[last + 1:]:
        if m["role"] == "tool":
            name, args = calls.get(m["tool_call_id"], ("?", {}))
            out.append((name, args, content(m)))
    return out


POINTER = re.compile(r"^symbols: (?:\d+ lines )?as in the repository map in your context.*$", re.M)
EARLIER = re.compile(r"^(?:\d+ lines )?as your file_meta \(call (\S+)\) above showed.*$", re.M)


def _is_row(line: str) -> bool:
    return line.lstrip()[:1].isdigit()


def whole_map(messages: list[dict], text: str) -> str:
    """A file_meta result as a model reads it: one that points at the system message's repository map (its
    symbols are shown there, unchanged) gets those symbol lines back in place of the pointer; one that points
    at an earlier file_meta result still in the context gets that one's lines merged with its own, the
    symbols in line order."""
    if found := EARLIER.search(text):
        earlier = next((content(m) for m in messages if m.get("role") == "tool"
                        and m.get("tool_call_id") == found.group(1)), None)
        if earlier is None:
            raise PolicyError(f"file_meta points at call {found.group(1)}, which the context does not hold")
        lines = [line for line in earlier.splitlines()[1:] + text[found.end():].splitlines()
                 if line.strip() and not line.endswith("more symbols)")]
        rows = sorted((line for line in lines if _is_row(line)), key=lambda line: int(re.match(r"\s*(\d+)", line)[1]))
        cut = [line for line in text.splitlines() if line.endswith("more symbols)")]
        return "\n".join([text.splitlines()[0], *dict.fromkeys(line for line in lines if not _is_row(line)), *rows,
                          *cut])
    found = POINTER.search(text)
    if not found:
        return text
    path = text.split(" (", 1)[0]
    shown: dict[str, str] = {}  # symbol -> its line: the system message's map, then each map update over it
    for message in messages:
        if message.get("role") == "system" or is_note(message):
            parts = content(message).split(f"\n{path}:\n", 1)
            for line in parts[1].splitlines() if len(parts) > 1 else ():
                if not line.startswith("  "):
                    break
                shown[re.sub(r"^\d+(?:-\d+)? ", "", line[2:]).split("(", 1)[0]] = line[2:]
    if not shown:
        raise PolicyError(f"file_meta points at the repository map for {path}, which the context does not show")
    for line in text[found.end():].splitlines():  # the lines that map leaves out
        if line.strip():
            shown[re.sub(r"^\d+(?:-\d+)? ", "", line).split("(", 1)[0]] = line
    rows = sorted(shown.values(), key=lambda line: int(re.match(r"\d+", line)[0]))
    return text[:found.start()] + "\n".join(rows)


def numbered_rows(results) -> dict[int, str]:
    """Line number -> text of every row the read_lines results show."""
    seen: dict[int, str] = {}
    for _, _, text in results:
        for line in text.splitlines():
            m = NUMBERED.match(line)
            if m:
                seen[int(m.group(1))] = m.group(2)
    return seen


class ScriptedPolicy:
    """The dispatch both scenario policies share: a compaction request gets a summary, a user message
    starts (phase "start") or checks (phase "done") the work, tool results go to `_after_<phase>`."""

    def __init__(self) -> None:
        self.phase = "start"
        self.log: list[str] = []  # what it did, for the benchmark's trace

    def __call__(self, body: dict) -> Reply:
        reply = self._answer(body)
        reply.args_chunk_size, reply.text_chunk_size = 64, 32  # streamed still, in fewer chunks
        return reply

    def _answer(self, body: dict) -> Reply:
        messages = body["messages"]
        if is_compaction(messages):
            return Reply(text=summarize(messages))
        if is_new_turn(messages):
            if self.phase == "start":
                return self._start(messages)
            if self.phase == "done":
                return self._verify(messages)
            raise PolicyError(f"unexpected user message in phase {self.phase}")
        handler = getattr(self, "_after_" + self.phase.replace("-", "_"))
        return handler(messages, latest_results(messages))

    def _start(self, messages: list[dict]) -> Reply:
        raise NotImplementedError

    def _verify(self, messages: list[dict]) -> Reply:
        raise NotImplementedError

    def _expect(self, results, *names: str) -> None:
        bad = [(n, c) for n, _, c in results if n not in names or c.startswith("error:")]
        if bad or not results:
            raise PolicyError(f"phase {self.phase}: expected {'/'.join(names)} results, got {bad or 'none'}")


def summarize(messages: list[dict]) -> str:
    """A compaction answer in the five sections, from the turns in the request: the turns the prompt lists
    (the compaction prompt's own form) or the conversation itself (a compaction that re-sends the history
    with the prompt appended)."""
    from workstation.sessions.compaction import PROMPT

    kept = re.search(r"that begins: «(.*?)»", content(messages[-1]))
    if kept and not content(messages[0]).startswith(COMPACT_MARK):  # the newest part stays verbatim: not folded
        at = max(i for i, m in enumerate(messages[:-1]) if " ".join(content(m).split()).startswith(kept.group(1)))
        messages = [*messages[:at], messages[-1]]
    texts = [content(m).removeprefix(PROMPT) for m in messages]  # the instruction's own section titles left out
    prompt = "\n".join(texts)
    task = re.findall(r"\[turn \d+\] user: (.*)", prompt)
    if not task:
        task = [t.splitlines()[0] for m, t in zip(messages, texts)
                if m.get("role") == "user" and t.strip() and not t.startswith((NOTE, COMPACT_MARK))]
    logged = re.findall(r"(decision d[0-9a-f]{12} logged)", prompt)
    previous = re.search(r"## Task & instructions\n(.*?)\n\n?## Decisions & conventions\n(.*?)\n\n?##", prompt, re.S)
    task_text = "\n".join(f"- {t}" for t in task) or (previous.group(1) if previous else "(none)")
    decision_text = "\n".join(f"- {d}" for d in dict.fromkeys(logged)) or (previous.group(2) if previous else "(none)")
    return "\n".join([
        "## Task & instructions", task_text,
        "## Decisions & conventions", decision_text,
        "## Files touched", "(listed from the tool calls)",
        "## Open to-dos", "- finish threading request_id through the remaining code",
        "## Errors seen", "(none)"])
