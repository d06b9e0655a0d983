"""A summary keeps within its share of the window (sessions.compaction.fit_sections): a summarizer that keeps
everything would otherwise grow the head of every request after each compaction."""

from __future__ import annotations

from workstation.sessions.compaction import CUT_NOTE, SECTIONS, fit_sections, render_summary
from workstation.tokens import count


def test_the_longest_sections_are_cut_until_the_summary_fits():
    sections = {key: "(none)" for key, _ in SECTIONS}
    sections["files"] = "\n".join(f"- src/module_{i}.py: changed the parser's handling of case {i}" for i in range(400))
    sections["task"] = "Fix the parser. " * 10
    fitted = fit_sections(sections, 600, count)
    assert count(render_summary(fitted)) <= 600
    assert fitted["files"].endswith(CUT_NOTE) and fitted["files"].startswith("- src/module_0.py")
    assert fitted["task"] == sections["task"]  # short sections stay whole
    assert fit_sections(sections, 0, count) == sections  # no budget: as written
