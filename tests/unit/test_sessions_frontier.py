"""The frontier (sessions.frontier): derived from hand-built logs, never from a summary's prose."""

from __future__ import annotations

import itertools
import json

from workstation.sessions.frontier import command_key, frontier, frontier_budget, head_frontier
from workstation.sessions.logview import LogView
from workstation.sessions.records import from_dict

_ids = itertools.count(1)


class Log:
    """A session log built by hand, record by record, as the agent writes them."""

    def __init__(self):
        self.records: list[dict] = []

    def add(self, type: str, **fields) -> dict:
        record = from_dict({"v": 1, "id": f"{next(_ids):011x}-000000", "ts": "2026-01-01T00:00:00.000Z",
                            "type": type, **fields})
        self.records.append(record)
        return record

    def user(self, text: str) -> dict:
        return self.add("user", content=text, tokens=len(text.split()))

    def say(self, text: str) -> dict:
        return self.add("assistant", content=text)

    def call(self, name: str, content: str, *, ok: bool = True, **args) -> dict:
        call_id = f"c{next(_ids)}"
        self.add("assistant", content="", tool_calls=[{"id": call_id, "name": name, "arguments": json.dumps(args)}])
        extra = {k: v for k, v in (("edits", args.pop("_edits", None)), ("plan", args.pop("_plan", None)))
                 if v is not None}
        return self.add("tool", tool_call_id=call_id, name=name, content=content, ok=ok, **extra)

    def edit(self, path: str, op: str, before: str | None, after: str | None, added=0, removed=0, **extra):
        entry = {"path": path, "op": op, "added": added, "removed": removed, **extra}
        entry.update({k: v for k, v in (("before", before), ("after", after)) if v is not None})
        return entry

    def view(self) -> LogView:
        return LogView(list(self.records))


def test_edits_a_failure_its_fix_a_plan_change_and_a_moved_file():
    log = Log()
    log.user("Add retries to the HTTP client. Keep the public API unchanged, and no new dependencies.")
    log.call("todo", "plan written", _plan=[{"text": "map the client", "status": "in_progress"},
                                             {"text": "add retries", "status": "pending"}])
    log.call("write_file", "created", path="src/retry.py",
             _edits=[log.edit("src/retry.py", "create", None, "r1", added=30)])
    log.call("replace_lines", "edited", path="src/client.py",
             _edits=[log.edit("src/client.py", "edit", "c0", "c1", added=4, removed=1)])
    log.call("move_file", "moved", src="src/old_util.py", dst="src/util.py",
             _edits=[log.edit("src/old_util.py", "move", "u0", None, to="src/util.py"),
                     log.edit("src/util.py", "move", None, "u0", **{"from": "src/old_util.py"})])
    log.call("delete_file", "deleted", path="src/legacy.py",
             _edits=[log.edit("src/legacy.py", "delete", "l0", None, removed=12)])
    log.call("run_command", "$ python -m pytest tests/test_client.py\nE   AssertionError: retried 0 times\n"
             "1 failed in 0.2s\n[exit 1, 0.4s]", ok=False, cmd="python -m pytest tests/test_client.py")
    log.say("The retry test fails; I will fix the loop.")
    log.user("Go on, but log each retry at debug level.")
    # the plan changes mid-way: a step added, the first done
    log.call("todo", "plan written", _plan=[{"text": "map the client", "status": "done"},
                                             {"text": "add retries", "status": "in_progress"},
                                             {"text": "log each retry", "status": "pending"}])
    log.call("replace_lines", "edited", path="src/client.py",
             _edits=[log.edit("src/client.py", "edit", "c1", "c2", added=2)])
    log.call("replace_lines", "edited", path="src/util.py",
             _edits=[log.edit("src/util.py", "edit", "u0", "u1", added=1, removed=1)])
    view = log.view()

    front = frontier(view)
    assert front.turn == 2
    assert [m.text for m in front.messages] == [
        "Add retries to the HTTP client. Keep the public API unchanged, and no new dependencies.",
        "Go on, but log each retry at debug level."]
    assert front.step_in_progress() == "add retries"
    assert [i["text"] for i in front.plan] == ["map the client", "add retries", "log each retry"]
    states = {f.path: (f.state, f.moved_from, f.added, f.removed, f.turns) for f in front.files}
    assert states == {"src/retry.py": ("created", None, 30, 0, [1]),
                      "src/client.py": ("changed", None, 6, 1, [1, 2]),
                      "src/util.py": ("moved", "src/old_util.py", 1, 1, [1, 2]),
                      "src/legacy.py": ("deleted", None, 0, 12, [1])}
    assert front.failure is not None and front.failure.command == "python -m pytest tests/test_client.py"
    assert "AssertionError: retried 0 times" in front.failure.output and front.failure.turn == 1
    text = front.render()
    assert "- moved src/old_util.py -> src/util.py (+1 -1), turns 1-2" in text
    assert "AssertionError: retried 0 times" in text and "[>] add retries" in text

    # a passing run of something else does not clear it; the fix's passing test run does
    log.call("run_command", "$ ls\nsrc\n[exit 0, 0.0s]", cmd="ls")
    assert frontier(log.view()).failure is not None
    log.call("run_command", "$ python -m pytest\n12 passed\n[exit 0, 1.1s]", cmd="python -m pytest")
    assert frontier(log.view()).failure is None
    assert "Last failure" not in frontier(log.view()).render()


def test_a_rewind_of_files_takes_their_changes_out_and_a_file_back_as_it_was_is_no_change():
    log = Log()
    first = log.user("Rename the helper.")
    log.call("replace_lines", "edited", _edits=[log.edit("a.py", "edit", "a0", "a1", added=1)])
    second = log.user("Also touch b.")
    log.call("replace_lines", "edited", _edits=[log.edit("b.py", "edit", "b0", "b1", added=1)])
    log.call("replace_lines", "edited", _edits=[log.edit("a.py", "edit", "a1", "a2", added=1)])
    log.add("rewind", to=second["id"], turn=2, files=["a.py", "b.py"], how="rewind")
    front = frontier(log.view())
    assert {f.path: f.sha for f in front.files} == {"a.py": "a1"}  # b is back as it was: no net change
    log.add("rewind", to=first["id"], turn=1, files=["a.py"], how="undo")
    assert frontier(log.view()).files == []
    # an edit back to the original bytes is no net change either
    log.user("Once more.")
    log.call("replace_lines", "edited", _edits=[log.edit("c.py", "edit", "c0", "c1", added=1)])
    log.call("replace_lines", "edited", _edits=[log.edit("c.py", "edit", "c1", "c0", removed=1)])
    assert frontier(log.view()).files == []


def test_user_words_fit_the_budget_newest_and_first_whole_oldest_cut_first():
    log = Log()
    goal = "GOAL " + "make the parser stream its input " * 5
    log.user(goal)
    for n in range(2, 41):
        log.user(f"message {n}: " + "please look at the next module and keep going with it " * 6)
        log.say("done")
    newest = log.user("newest: " + "now write the tests " * 10)
    front = frontier(log.view(), budget=400)
    turns = [m.turn for m in front.messages]
    assert turns[0] == 1 and front.messages[0].text == goal and not front.messages[0].cut_tokens
    assert front.messages[-1].text == newest["content"] and not front.messages[-1].cut_tokens
    whole = [m.turn for m in front.messages if not m.cut_tokens]
    cut = [m.turn for m in front.messages if m.cut_tokens]
    # the newest of the rest whole, older ones cut to their opening, the oldest left out: nothing lost silently
    assert max(whole[1:-1]) == 40 and cut and max(cut) < min(whole[1:-1])
    assert front.left_out and max(front.left_out) < min(cut)
    assert sorted([*turns, *front.left_out]) == list(range(1, 42))
    said = {r["content"] for r in log.records if r["type"] == "user"}
    assert all(any(text.startswith(m.text) for text in said) for m in front.messages)  # the user's own words
    assert f"{len(front.left_out)} older messages left out" in front.render()
    assert front.cut == len(cut) + len(front.left_out)


def test_the_heads_frontier_keeps_within_its_budget_whatever_the_session_holds():
    """Every section counts (the user's words get what the files and the failure leave), so the head after
    each compaction does not grow with the session; the goal, the newest message, the files and the failure
    are all still there."""
    from workstation.tokens import count

    log = Log()
    goal = "GOAL: make the parser stream its input"
    log.add("user", content=goal)
    for n in range(2, 60):
        log.add("user", content=f"message {n}: " + "please look at the next module and keep going with it " * 6)
        log.call("write_file", "created", path=f"src/mod_{n}.py",
                 _edits=[log.edit(f"src/mod_{n}.py", "create", None, f"m{n}", added=3)])
    log.call("run_command", "FAILED test_stream\n" + "E   assert 1 == 2\n" * 40, ok=False, command="pytest -q")
    log.add("user", content="newest: now write the tests")
    budget = 1000
    assert count(frontier(log.view(), budget=budget).render(told=False)) > budget * 1.2  # the words alone fill it
    text = head_frontier(log.view(), budget=budget)
    assert count(text) <= budget
    assert goal in text and "newest: now write the tests" in text and "src/mod_59.py" in text
    assert "$ pytest -q" in text and "older messages left out" in text
    assert frontier_budget(19_904) == 1658 and frontier_budget(200_000 - 4096) == 4000


def test_open_question_until_the_user_answers_and_rewound_turns_are_not_in_it():
    log = Log()
    log.user("Clean up the config loader.")
    log.say("I found two loaders. Should I merge them into config.py, or keep both?")
    assert [q.text for q in frontier(log.view()).questions] == [
        "Should I merge them into config.py, or keep both?"]
    second = log.user("Merge them.")
    assert frontier(log.view()).questions == []
    log.say("Merged. Anything else?")
    assert [q.turn for q in frontier(log.view()).questions] == [2]
    # the conversation rewound to before turn 2: its message is no longer the user's, the question is open again
    log.add("rewind", to=second["id"], turn=2, conversation=True, how="rewind")
    front = frontier(log.view())
    assert [m.turn for m in front.messages] == [1]
    assert [q.text for q in front.questions] == ["Should I merge them into config.py, or keep both?"]


def test_decisions_pins_and_instructions_in_force_come_from_the_epoch_and_what_followed():
    log = Log()
    log.add("epoch", system="head", state={"decisions": {"d1": "- [D:d1] tabs"}, "pins": [],
                                           "instructions": {"AGENTS.md": "x1"}, "excerpt": "", "redacted": []})
    log.user("Start.")
    log.add("system", content="Always run ruff.", pin=True)
    log.add("system", content="update", update={"decisions": {"d2": "- [D:d2] snake_case"},
                                                "instructions": {"AGENTS.md": "", "src/AGENTS.md": "y1"}})
    log.call("log_decision", "decision d3 logged; it is shown in every later context",
             decision="use httpx", reasoning="async")
    front = frontier(log.view())
    assert front.decisions == {"d1": "- [D:d1] tabs", "d2": "- [D:d2] snake_case",
                               "d3": "- [D:d3] use httpx (why: async)"}
    assert front.pins == ["Always run ruff."] and front.instructions == ["src/AGENTS.md"]
    assert "Decisions in force" not in front.render(told=False) and "src/AGENTS.md" in front.render(told=False)


def test_command_key_ties_a_rerun_to_the_failed_command():
    assert command_key("python -m pytest tests/x.py -x") == command_key("python3 -m pytest") == "python pytest"
    assert command_key("CI=1 npm run test -- --watch=false") == command_key("npm run test")
    assert command_key("cargo test foo") == command_key("cargo test")
    assert command_key("ls -la") != command_key("pytest")
