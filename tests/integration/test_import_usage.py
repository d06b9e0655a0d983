"""`reflect usage` over imported and native sessions: totals this test computes from the raw files,
and, for Claude Code sessions, what the real ccusage reports on the same files."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from workstation.importers.engine import Importer
from workstation.costs.usage import usage

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "transcripts"
REPO = Path(__file__).resolve().parents[2]
# ccusage 17.x is plain JavaScript; 18+ runs a native binary from optional packages that the
# npm registry reachable here does not serve for linux-x64 (20.0.26: "native binary is not available").
CCUSAGE_VERSION = "17.2.1"
FIELDS = ("input", "output", "cache_creation", "cache_read")

pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason=f"the shared sample transcripts are not at {SHARED}")


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _price_map() -> dict:
    import importlib.util

    base = list(importlib.util.find_spec("litellm").submodule_search_locations)[0]
    return json.loads(Path(base, "model_prices_and_context_window_backup.json").read_text())


# --------------------------------------------------------------------------- totals from the raw files
def claude_totals(path: Path, *, first: bool = False) -> dict:
    """Per response (message.id + requestId): the last logged usage (first=True: the first), summed."""
    chosen: dict = {}
    for d in _lines(path):
        message = d.get("message") or {}
        if d.get("type") == "assistant" and message.get("usage"):
            key = (message.get("id"), d.get("requestId"))
            if not first or key not in chosen:
                chosen[key] = (message.get("model"), message["usage"])
    prices = _price_map()
    out = {f: 0 for f in FIELDS} | {"cost": 0.0, "priced": True}
    for model, u in chosen.values():
        row = {"input": u.get("input_tokens", 0), "output": u.get("output_tokens", 0),
               "cache_creation": u.get("cache_creation_input_tokens", 0), "cache_read": u.get("cache_read_input_tokens", 0)}
        for field in FIELDS:
            out[field] += row[field]
        entry = prices.get(model)
        if entry is None:
            out["priced"] = False
            continue
        out["cost"] += (row["input"] * entry["input_cost_per_token"] + row["output"] * entry["output_cost_per_token"]
                        + row["cache_creation"] * entry["cache_creation_input_token_cost"]
                        + row["cache_read"] * entry["cache_read_input_token_cost"])
    return out


def codex_totals(path: Path) -> dict:
    out = {f: 0 for f in FIELDS}
    previous = None
    for d in _lines(path):
        p = d.get("payload") or {}
        if d.get("type") == "event_msg" and p.get("type") == "token_count" and p.get("info"):
            total = p["info"]["total_token_usage"]
            if total == previous:
                continue  # the same count logged twice
            previous = total
            u = p["info"]["last_token_usage"]
            out["input"] += u["input_tokens"] - u["cached_input_tokens"]
            out["cache_read"] += u["cached_input_tokens"]
            out["output"] += u["output_tokens"]
    return out


def openhands_totals(path: Path) -> dict:
    out = {f: 0 for f in FIELDS}
    seen = set()
    for event in json.loads(path.read_text()):
        response = (event.get("tool_call_metadata") or {}).get("model_response")
        if "action" in event and response and response["id"] not in seen:
            seen.add(response["id"])
            u = response["usage"]
            out["cache_creation"] += u.get("cache_creation_input_tokens") or 0
            out["cache_read"] += u.get("cache_read_input_tokens") or 0
            out["input"] += u["prompt_tokens"] - (u.get("cache_creation_input_tokens") or 0) \
                - (u.get("cache_read_input_tokens") or 0)
            out["output"] += u["completion_tokens"]
    return out


def swe_totals(path: Path) -> dict:
    stats = (json.loads(path.read_text()).get("info") or {}).get("model_stats")
    if not stats:
        return {f: 0 for f in FIELDS}
    return {"input": stats["tokens_sent"], "output": stats["tokens_received"], "cache_creation": 0, "cache_read": 0}


def aider_totals(path: Path) -> dict:
    out = {f: 0 for f in FIELDS}
    for sent, unit_s, received, unit_r in re.findall(
            r"^> Tokens: ([\d.]+)(k?) sent, ([\d.]+)(k?) received", path.read_text(), re.MULTILINE):
        out["input"] += round(float(sent) * (1000 if unit_s else 1))
        out["output"] += round(float(received) * (1000 if unit_r else 1))
    return out


def totals_of(path: Path) -> dict:
    kind = path.parent.name
    if kind == "claude-code":
        return claude_totals(path)
    if kind == "codex":
        return codex_totals(path)
    if kind == "openhands":
        return openhands_totals(path)
    if kind == "swe-agent":
        return swe_totals(path)
    return aider_totals(path)


SAMPLES = sorted(p for p in SHARED.rglob("*") if p.is_file() and p.name != "SOURCES.md"
                 and not p.name.endswith(".aider.input.history")) if SHARED.is_dir() else []


@pytest.fixture
def imported(paths, db):
    importer = Importer(paths, db)
    slugs = {}
    for sample in SAMPLES:
        result = importer.import_file(sample, flush=False)
        slugs[sample] = [s.slug for s in result.sessions]
    importer.flush()
    return slugs


def _rows(db, by: str = "session", **kw) -> dict:
    result = usage(db, by, **kw)
    return {r[by]: r for r in result.records()}


def test_usage_per_session_equals_totals_computed_from_the_raw_files(db, imported):
    rows = _rows(db)
    for sample, slugs in imported.items():
        want = totals_of(sample)
        got = {f: sum(rows[s][f] for s in slugs if s in rows) for f in FIELDS}
        assert got == {f: want[f] for f in FIELDS}, sample.name
        if want.get("priced"):  # a model the price map names as logged: the cost the map gives
            assert sum(rows[s]["cost_usd"] for s in slugs) == pytest.approx(want["cost"], abs=1e-6)


def test_like_ccusage_counts_the_first_snapshot_of_streamed_answers(db, imported):
    rows = _rows(db, like_ccusage=True)
    for sample in sorted((SHARED / "claude-code").iterdir()):
        want = claude_totals(sample, first=True)
        (slug,) = imported[sample]
        assert {f: rows[slug][f] for f in FIELDS} == {f: want[f] for f in FIELDS}
    streamed = SHARED / "claude-code" / "jnarowski__agentcmd__full-session.jsonl"
    (slug,) = imported[streamed]
    assert _rows(db)[slug]["output"] > rows[slug]["output"]  # the final counts are larger
    assert _rows(db)[slug]["cost_usd"] > rows[slug]["cost_usd"]


def test_every_grouping_adds_up_to_the_same_totals(db, imported):
    totals = usage(db, "session").meta["totals"]
    for by in ("day", "month", "model"):
        result = usage(db, by)
        assert result.meta["totals"] == totals
        assert sum(r["calls"] for r in result.records()) == totals["calls"]
    days = [r["day"] for r in usage(db, "day").records()]
    assert days == sorted(days) and "2025-10-21" in days


def test_native_model_calls_count_beside_imported_ones(db, imported):
    from workstation.memory.episodic import MODEL_CALL, Episodic

    episodic = Episodic(db, session="2025-01-31-fix-the-loader", flow="main")
    with episodic.operation(MODEL_CALL, "openai/gpt-4o", model="openai/gpt-4o") as op:
        op.set(tokens_in=812, tokens_out=21, cost_usd=0.00224)
    with episodic.operation(MODEL_CALL, "openai/gpt-4o", model="openai/gpt-4o") as op:
        op.set(ok=False, error="timeout")  # a failed call: no tokens, not a billed call
    episodic.close()
    row = _rows(db)["2025-01-31-fix-the-loader"]
    assert (row["agent"], row["calls"], row["input"], row["output"], row["cost_usd"]) == (
        "workstation", 1, 812, 21, 0.00224)


def test_reflect_usage_on_the_command_line(paths, imported, capsys, monkeypatch):
    import sys

    from workstation.cli import main
    from workstation.cli.common import run_main

    monkeypatch.setattr(sys, "argv", ["workstation", "-C", str(paths.root), "reflect", "usage", "--by", "month",
                                      "--json"])
    with pytest.raises(SystemExit) as exit:
        run_main(main)
    assert exit.value.code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["by"] == "month" and sum(r["calls"] for r in out["rows"]) == out["totals"]["calls"] > 0
    monkeypatch.setattr(sys, "argv", ["workstation", "-C", str(paths.root), "reflect", "tool_errors", "--by", "day"])
    with pytest.raises(SystemExit) as exit:
        run_main(main)
    assert exit.value.code == 2 and "--by and --like-ccusage go with `reflect usage`" in capsys.readouterr().err


# --------------------------------------------------------------------------- ccusage itself
def _ccusage() -> Path:
    """ccusage from the npm registry, installed once into the repository's .venv (pinned)."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("npm (and node) are not on PATH: cannot run ccusage to compare with")
    cache = REPO / ".venv" / f"ccusage-{CCUSAGE_VERSION}"
    cli = cache / "node_modules" / "ccusage" / "dist" / "index.js"
    if not cli.exists():
        cache.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["npm", "install", "--prefix", str(cache), "--no-audit", "--no-fund", "--silent",
                               f"ccusage@{CCUSAGE_VERSION}"], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    assert cli.exists(), f"ccusage {CCUSAGE_VERSION} installed without {cli}"
    return cli


def test_claude_sessions_total_what_ccusage_reports(tmp_path, db, imported):
    cli = _ccusage()
    projects = tmp_path / "claude" / "projects"
    samples = sorted((SHARED / "claude-code").iterdir())
    for n, sample in enumerate(samples):  # one project folder each: ccusage's "session" is a folder
        (projects / f"-p{n}").mkdir(parents=True)
        shutil.copy(sample, projects / f"-p{n}" / sample.name)
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(tmp_path / "claude")}
    done = subprocess.run(["node", str(cli), "session", "--offline", "--json"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    theirs = {row["sessionId"]: row for row in json.loads(done.stdout)["sessions"]}
    ours = _rows(db)
    ours_like = _rows(db, like_ccusage=True)
    assert len(theirs) == len(samples)
    for n, sample in enumerate(samples):
        (slug,) = imported[sample]
        row = theirs[f"-p{n}"]
        want = {"input": row["inputTokens"], "output": row["outputTokens"],
                "cache_creation": row["cacheCreationTokens"], "cache_read": row["cacheReadTokens"]}
        assert {f: ours_like[slug][f] for f in FIELDS} == want, sample.name
        # by default only the output differs, by what the later snapshots of streamed answers added
        assert {f: ours[slug][f] for f in FIELDS if f != "output"} == {f: want[f] for f in FIELDS if f != "output"}
        assert ours[slug]["output"] == claude_totals(sample)["output"] >= want["output"]
