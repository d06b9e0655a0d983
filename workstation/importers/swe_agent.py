"""SWE-agent trajectories: `<run>/<instance>/<instance>.traj`, one JSON object per run.

The quirks of the format, and what this importer does with each:

- `history` is what the model was sent and answered (role system | user | assistant | tool);
  `trajectory` repeats the steps as {action, observation, response, thought, state}. The history
  is imported; a file with only a trajectory is imported from it.
- Function-calling runs (SWE-agent 1.x): assistant messages carry `tool_calls`, sometimes as the
  Python repr of a list rather than JSON (read with `ast.literal_eval`, never evaluated), and
  `role: tool` messages carry `tool_call_ids`. Names and arguments stay as written (find_file,
  open, edit, str_replace_editor, submit...).
- Older text-action runs: the assistant answers in prose with the command in `action` (first word:
  an ACI command such as `open`, `edit`, `find_file`, or a shell command), and the observation
  comes back as the next *user* message. Each action becomes one call named by its first word,
  with the whole action as `{"command": ...}` and an id `action-<n>`; the user message after it
  becomes that call's tool record. Demonstrations (`is_demo`) stay user records, marked
  `source.meta`.
- No timestamps at all: every record gets the file's modification time (`source.time` says so).
- Usage only as run totals in `info.model_stats` (tokens_sent, tokens_received, instance_cost,
  api_calls), and usually no model name (`replay_config` has it in newer runs): the totals go on
  the last assistant record with `usage_scope: run` and `calls`, and the stated cost is used as is.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from .base import (Conversation, Draft, Parsed, Part, Problem, Usage, arguments_text, as_int, file_ts, loads,
                   text_of)

NAME = "swe-agent"
PREFIX = "swe-agent"


def sniff(doc: Any) -> bool:
    if not isinstance(doc, dict):
        return False
    history, trajectory = doc.get("history"), doc.get("trajectory")
    if isinstance(history, list) and history and all(isinstance(m, dict) and "role" in m for m in history[:5]):
        return True
    return isinstance(trajectory, list) and bool(trajectory) and isinstance(trajectory[0], dict) and \
        "action" in trajectory[0] and "observation" in trajectory[0]


def parse(doc: Any, path: Path, data_len: int) -> Parsed:
    file = str(path)
    ts = file_ts(path)
    problems: list[Problem] = []
    drafts: list[Draft] = []
    model = _model(doc)
    history = doc.get("history")
    if not isinstance(history, list) or not history:
        history = _from_trajectory(doc.get("trajectory") or [])
    awaiting: dict | None = None  # the text action whose observation comes next
    names: dict[str, str] = {}  # call id -> tool name
    for index, message in enumerate(history):
        if not isinstance(message, dict):
            problems.append(Problem(file, f"history[{index}] is not an object; skipped"))
            continue
        sid = f"h{index}"
        where = {"item": index, "time": "file-mtime"}
        role = message.get("role")
        text = text_of(message.get("content"))
        if role == "system":
            drafts.append(Draft("system", sid, ts, {"content": text}, source=where))
        elif role == "assistant":
            calls, problem = _calls(message, index)
            if problem:
                problems.append(Problem(file, f"history[{index}]: {problem}"))
            fields: dict[str, Any] = {"model": model} if model else {}
            parts = [Part(sid, "text", text, ts)] if text else []
            parts += [Part(sid, "call", call, ts) for call in calls]
            drafts.append(Draft("assistant", sid, ts, fields, parts, None, where))
            names.update((call["id"], call["name"]) for call in calls)
            awaiting = calls[0] if calls and message.get("tool_calls") in (None, "", []) else None
        elif role == "tool":
            ids = _ids(message.get("tool_call_ids"))
            call_id = ids[0] if ids else (message.get("tool_call_id") or "")
            drafts.append(Draft("tool", sid, ts, {"tool_call_id": str(call_id),
                                                  "name": names.get(str(call_id), "unknown"), "content": text,
                                                  "ok": True}, source=where))
        elif role == "user" and awaiting is not None:
            drafts.append(Draft("tool", sid, ts, {"tool_call_id": awaiting["id"], "name": awaiting["name"],
                                                  "content": text, "ok": True}, source=where))
            awaiting = None
        elif role == "user":
            if message.get("is_demo") in (True, "True", "true"):
                where["meta"] = True
            drafts.append(Draft("user", sid, ts, {"content": text}, source=where))
        else:
            problems.append(Problem(file, f"history[{index}] has an unknown role {role!r}; skipped"))
    usage = _run_usage(doc)
    last = next((d for d in reversed(drafts) if d.type == "assistant"), None)
    if usage is not None and last is not None:
        last.usage = usage
    info = doc["info"] if isinstance(doc.get("info"), dict) else {}
    facts = {k: info[k] for k in ("exit_status",) if isinstance(info.get(k), str)}
    # no stable day (the file is rewritten as the run goes): the slug names the instance instead
    label = path.stem.replace("__", "-")
    return Parsed([Conversation(str(path.resolve()), PREFIX, ts, drafts, facts, label)], problems, data_len)


def _from_trajectory(steps: list) -> list[dict]:
    history: list[dict] = []
    for step in steps:
        if isinstance(step, dict):
            history.append({"role": "assistant", "content": step.get("response") or step.get("thought") or "",
                            "action": step.get("action") or ""})
            history.append({"role": "user", "content": step.get("observation") or ""})
    return history


def _calls(message: dict, index: int) -> tuple[list[dict], str | None]:
    raw = message.get("tool_calls")
    if isinstance(raw, str) and raw.strip():
        value, reason = loads(raw)
        if reason:
            try:
                value = ast.literal_eval(raw)  # SWE-agent wrote Python reprs of the call list
            except (ValueError, SyntaxError, RecursionError, MemoryError):
                return [], "tool_calls is neither JSON nor a Python literal; the calls are left out"
        raw = value
    if isinstance(raw, list) and raw:
        calls = []
        for n, call in enumerate(raw):
            if not isinstance(call, dict):
                continue
            function = call["function"] if isinstance(call.get("function"), dict) else call
            name = function["name"] if isinstance(function.get("name"), str) else "unknown"
            calls.append({"id": str(call.get("id") or f"call-{index}-{n}"), "name": name,
                          "arguments": arguments_text(function.get("arguments"))})
        return calls, None
    action = message.get("action")
    if isinstance(action, str) and action.strip():
        words = action.strip().split()
        return [{"id": f"action-{index}", "name": words[0], "arguments": json.dumps({"command": action})}], None
    return [], None


def _ids(raw: Any) -> list[str]:
    if isinstance(raw, list):
        return [str(x) for x in raw]
    if isinstance(raw, str) and raw.strip():
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError, RecursionError, MemoryError):
            return [raw]
        return [str(x) for x in value] if isinstance(value, (list, tuple)) else [str(value)]
    return []


def _model(doc: dict) -> str:
    config = doc.get("replay_config")
    if isinstance(config, str):
        config, _ = loads(config)
    if isinstance(config, dict):
        for holder in (config.get("agent"), config):
            model = holder.get("model") if isinstance(holder, dict) else None
            name = (model.get("model_name") or model.get("name")) if isinstance(model, dict) else None
            if isinstance(name, str):
                return name
    return ""


def _run_usage(doc: dict) -> Usage | None:
    info = doc["info"] if isinstance(doc.get("info"), dict) else {}
    stats = info["model_stats"] if isinstance(info.get("model_stats"), dict) else None
    if not stats:
        return None
    cost = stats.get("instance_cost", stats.get("total_cost"))
    return Usage(tokens_in=as_int(stats.get("tokens_sent")), tokens_out=as_int(stats.get("tokens_received")),
                 cost=float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None,
                 calls=as_int(stats.get("api_calls")) or None, scope="run")
