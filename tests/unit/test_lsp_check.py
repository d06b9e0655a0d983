"""The edit check's arithmetic (workstation.lsp.check): new and fixed errors, the budget, the chat's block."""

from __future__ import annotations

from workstation.lsp import block_of
from workstation.lsp.check import Report, difference
from workstation.lsp.client import Diagnostic


def d(path: str, line: int, message: str, code: str = "reportCallIssue") -> Diagnostic:
    return Diagnostic(path, line, 5, message, code, 1)


def test_an_error_an_edit_only_moved_is_neither_new_nor_fixed():
    before = [d("a.py", 10, 'Argument missing for parameter "x"'), d("b.py", 3, "old")]
    after = [d("a.py", 12, 'Argument missing for parameter "x"'), d("b.py", 3, "old"), d("b.py", 7, "fresh")]
    new, fixed = difference(before, after)
    assert new == [d("b.py", 7, "fresh")] and fixed == []


def test_one_more_of_the_same_error_is_new_and_one_less_is_fixed():
    same = 'Argument missing for parameter "x"'
    new, fixed = difference([d("a.py", 1, same)], [d("a.py", 1, same), d("a.py", 9, same)])
    assert [x.line for x in new] == [9] and fixed == []
    new, fixed = difference([d("a.py", 1, same), d("a.py", 9, same)], [d("a.py", 1, same)])
    assert new == [] and [x.line for x in fixed] == [9]


def test_the_result_keeps_to_its_budget_and_says_how_many_it_left_out():
    report = Report("basedpyright", new=[d("a.py", i, f"error number {i} " + "x" * 40) for i in range(1, 21)])
    text = report.render(max_errors=5, max_chars=10_000)
    lines = text.splitlines()
    assert lines[0] == "lsp: 20 new errors (basedpyright):"
    assert len(lines) == 1 + 5 + 1 and lines[-1] == "  … and 15 more"
    short = report.render(max_errors=50, max_chars=200).splitlines()
    assert sum(len(line) + 1 for line in short[1:-1]) <= 200 + len(short[1]) and short[-1].startswith("  … and ")
    assert report.data(text)["new"] == 20


def test_the_chat_finds_the_block_at_the_end_of_a_result():
    result = "shop/http.py: replaced lines 3-3\n@@ -2,3 +2,3 @@\n-a\n+b\nlsp: 1 new error (basedpyright):\n  x.py:1:1 bad"
    assert block_of(result) == "lsp: 1 new error (basedpyright):\n  x.py:1:1 bad"
    assert block_of("shop/http.py: replaced lines 3-3") == ""


def test_errors_of_one_message_in_one_file_are_one_line_naming_every_location():
    same = 'No parameter named "request_id"'
    report = Report("basedpyright",
                    new=[d("a.py", 3, same), d("b.py", 4, same), d("a.py", 9, same), d("a.py", 5, "other")],
                    fixed=[d("c.py", 1, same), d("c.py", 7, same)])
    assert report.render(max_errors=8, max_chars=1200).splitlines() == [
        "lsp: 4 new errors (basedpyright):",
        f"  a.py:3:5, a.py:9:5 {same} [reportCallIssue]",
        f"  b.py:4:5 {same} [reportCallIssue]",
        "  a.py:5:5 other [reportCallIssue]",
        f"lsp: fixed: c.py:1, c.py:7 {same} [reportCallIssue]"]
    # the budget counts locations, not lines: a long group is cut and the rest counted
    many = Report("basedpyright", new=[d("a.py", i, same) for i in range(1, 13)])
    lines = many.render(max_errors=5, max_chars=1200).splitlines()
    assert lines[1] == "  " + ", ".join(f"a.py:{i}:5" for i in range(1, 6)) + f" {same} [reportCallIssue]"
    assert lines[2:] == ["  … and 7 more"]


def test_a_batchs_block_says_it_covers_the_responses_edits():
    report = Report("basedpyright", new=[d("a.py", 3, "bad")], fixed=[d("b.py", 2, "old")], edits=3)
    assert report.render(8, 1200).splitlines() == [
        "lsp: 1 new error after this response's 3 edits (basedpyright):", "  a.py:3:5 bad [reportCallIssue]",
        "lsp: fixed after this response's 3 edits: b.py:2 old [reportCallIssue]"]
    assert report.data("x")["edits"] == 3 and "edits" not in Report("basedpyright").data("")


def test_the_error_that_appeared_is_new_not_the_one_that_stayed_in_place():
    same = 'No parameter named "request_id"'
    new, fixed = difference([d("a.py", 271, same)], [d("a.py", 241, same), d("a.py", 271, same)])
    assert [x.line for x in new] == [241] and fixed == []


def test_a_responses_edits_form_batches_that_a_command_or_a_sub_agent_ends():
    from workstation.agent.tools import TOOLS
    from workstation.agent.tools.lspcheck import batches

    def edit(path: str) -> dict:
        return {"path": path, "start": 1, "end": 1, "content": "x = 1\n"}

    calls = [("r", TOOLS["read_lines"], {"path": "a.py", "start": 1, "end": 2}),
             ("e1", TOOLS["replace_lines"], edit("a.py")), ("bad", TOOLS["replace_lines"], None),
             ("q", TOOLS["grep"], {"pattern": "x"}), ("e2", TOOLS["replace_lines"], edit("b.py")),
             ("c", TOOLS["run_command"], {"command": "ls"}), ("e3", TOOLS["replace_lines"], edit("c.py")),
             ("e4", TOOLS["write_file"], {"path": "d.py", "content": ""}), ("t", TOOLS["task"], {"prompt": "p"}),
             ("e5", TOOLS["replace_lines"], edit("e.py")), ("u", None, {"path": "f.py"})]
    found = batches(calls)
    assert set(found) == {"e1", "e2", "e3", "e4"}  # e5 is alone: checked as today, by itself
    assert found["e1"] is found["e2"] and found["e1"].ids == ["e1", "e2"] and found["e1"].paths == ["a.py", "b.py"]
    assert found["e3"] is found["e4"] and found["e3"].ids == ["e3", "e4"] and found["e3"].paths == ["c.py", "d.py"]
    assert batches([("e", TOOLS["replace_lines"], edit("a.py"))]) == {}
    twice = batches([("x", TOOLS["replace_lines"], edit("a.py")), ("y", TOOLS["replace_lines"], edit("a.py"))])
    assert twice["x"].paths == ["a.py"]  # a file edited twice is checked once


def test_an_edits_two_waits_on_the_server_share_one_time_limit(tmp_path):
    """The baseline before an edit and the check after it wait lsp.timeout_s in all, not each: a server slow
    to answer the first leaves the second only what is left, and none when nothing is."""
    import time
    from types import SimpleNamespace

    from workstation.lsp.check import EditCheck

    asked: list[float] = []

    def diagnostics(scope, timeout_s, cancel=None):
        asked.append(timeout_s)
        time.sleep(0.3)
        return {}

    server = SimpleNamespace(root=tmp_path, spec=SimpleNamespace(name="slow"), diagnostics=diagnostics,
                             files_changed=lambda moved: None)
    check = EditCheck(server, ["a.py"], 1.0)
    report = check.finish(["a.py"])
    assert asked[0] == 1.0 and 0.6 <= asked[1] <= 0.71, asked
    assert not report.note
    spent = EditCheck(server, ["a.py"], 0.2)  # the baseline alone took longer than the limit
    late = spent.finish(["a.py"])
    assert len(asked) == 3 and "took the edit's 0.2s before it" in late.note, (asked, late.note)
