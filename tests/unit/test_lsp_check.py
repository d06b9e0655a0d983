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
