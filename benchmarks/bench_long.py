"""A 200-turn session through every front end, with a small window: compactions, trimming, the cache, the cost
per turn and what survives each compaction (issue 28). Prints figures beside the issue's targets; asserts nothing.

    .venv/bin/python benchmarks/bench_long.py [--frontend app|chat|acp|all] [--provider anthropic|openai|both]
        [--summarizer nothing|everything|both] [--turns 200] [--window 24000] [--pause 0.2] [--json PATH]

The session (tests/support/long_scenario.py): the httpx sources installed beside litellm, copied; the user's goal in
the first message; task segments (a plan with the todo tool changed mid-way, three decisions, a file created,
changed and moved, a test that fails and its fix, a second failure and its fix, a last failure left open)
spread over the session between stretches of browsing (file_meta, read_lines, grep, find). The model is the
scripted server on 127.0.0.1 (tests/support/fakellm.py) through the real litellm path, answering as Anthropic or as
OpenAI and billing the prompt cache as each does (tests/support/fake_cache.py: Anthropic's cache_control breakpoints,
reads and writes; OpenAI's automatic prefix caching in 128-token steps). A compaction request gets a summary
in the five sections that keeps `nothing` ("(none)" under each) or `everything` the request shows.

Front ends, each the real thing:
* app: in this process as the app runs its agent (workstation/tui/backend.py): an Agent with background
  compaction, the MCP toolset, every command approved, a short pause after each answer (--pause).
* chat: one `workstation chat TEXT --session SLUG --yes --json` process per turn (the installed CLI).
* acp: one `workstation acp` process, driven over stdio by the ACP SDK's client (as tests/integration/
  test_acp.py does): a new session, then one prompt per turn, every permission allowed, the same pause.

Figures, from the requests the server received (each paired with the usage it answered) and the session log:
compactions (compact records; compaction requests the server saw), requests trimmed (agent steps the log
records with `trimmed`), the cache-served share of input tokens over every request after the first,
compaction requests included; billed cost per turn by 50-turn segment (each request priced with litellm's
price map as the fake server billed it, counted in the turn it arrived in); the peak request (input tokens
as the server counted them) against compact_token_ratio x window plus the largest turn; probes after every
compaction: the first agent request that carries the compaction's summary must carry the user's first message
in their words, the plan step in progress, each decision in force, each file changed (its path, and where it
came from when moved) and the last failure still open (its error line), all computed from the log before it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from support import httpx_scenario  # noqa: E402
from support import long_scenario as long  # noqa: E402
from support.fakellm import ScriptedLLM  # noqa: E402
from support.trust_support import user_config  # noqa: E402

MODELS = {"anthropic": "anthropic/claude-sonnet-4-5-20250929", "openai": "openai/test-model"}
PRICED_AS = {"anthropic": "anthropic/claude-sonnet-4-5-20250929", "openai": "gpt-4.1"}  # the fake has no price
KEY_ENV = "WS_BENCH_FAKE_KEY"  # the scripted server's key: never a real one
FRONTENDS, PROVIDERS, SUMMARIZERS = ("app", "chat", "acp"), ("anthropic", "openai"), ("nothing", "everything")
SEGMENT = 50
TARGET_CACHE, TARGET_COST_RATIO = 0.95, 1.15


@dataclass
class Run:
    frontend: str
    provider: str
    summarizer: str
    turns: int
    window: int
    ratio: float = 0.0  # memory.compact_token_ratio
    deadline: float | None = None  # time.monotonic() after which no turn starts (--deadline)
    asked: int = 0  # turns asked for; `turns` is how many ran
    marks: list[int] = field(default_factory=list)  # exchanges received before each turn (and the end)
    errors: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    exchanges: list[dict] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)
    script: long.Script | None = None

    def past_deadline(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline

    @property
    def key(self) -> str:
        return f"{self.frontend}/{self.provider}/{self.summarizer}"


# --------------------------------------------------------------------------- set-up

def prepare(root: Path, url: str, provider: str, window: int) -> dict:
    """The httpx copy as the repository; the scripted model in a user config home of the run's own (a workspace
    names no endpoint); the environment a front-end process needs."""
    home = root.parent / "user-home"
    os.environ[KEY_ENV] = "sk-bench-fake-key"
    user_config(f'[model]\nname = "{MODELS[provider]}"\napi_base = "{url}"\napi_key_env = "{KEY_ENV}"\n'
                f"max_retries = 0\ntimeout_s = 60\ncontext_window = {window}\n\n"
                "[lsp]\nenabled = false\n", home)  # no language server: the figures are the context's
    (root / ".workstation").mkdir(exist_ok=True)
    (root / ".workstation" / "config.toml").write_text("[agent]\nmax_steps = 20\n")
    env = {**os.environ, "WORKSTATION_HOME": str(home), KEY_ENV: "sk-bench-fake-key",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("WORKSTATION_MODEL", None)
    return env


def cli() -> str:
    """The installed `workstation` command beside this interpreter."""
    found = Path(sys.executable).parent / "workstation"
    if not found.exists():
        raise SystemExit(f"no installed workstation command at {found}: pip install -e . first")
    return str(found)


# --------------------------------------------------------------------------- the front ends

def run_app(run: Run, root: Path, server: ScriptedLLM, pause: float) -> str:
    from workstation.agent.loop import Agent, AgentEvents
    from workstation.mcp.client import open_toolset
    from workstation.runtime import Workspace
    from workstation.sessions import Session

    ws = Workspace(root)
    ws.kmap.index_all()  # as the app does at start
    session = Session.create(ws.paths, title="long session")
    toolset = open_toolset(ws)
    agent = Agent(ws, session, approve=lambda request: True, toolset=toolset)  # background compaction
    try:
        for turn in run.script.turns:
            if run.past_deadline():
                break
            run.marks.append(len(server.exchanges))
            result = agent.run(turn.text, AgentEvents())
            if result.error:
                run.errors.append(f"turn {len(run.marks)}: {result.error}")
            time.sleep(pause)  # the user reads the answer: a background compaction may land meanwhile
    finally:
        agent.close()
        toolset.close()
        ws.close()
    return session.slug


def run_chat(run: Run, root: Path, server: ScriptedLLM, env: dict) -> str:
    slug = None
    for n, turn in enumerate(run.script.turns, 1):
        if run.past_deadline():
            break
        run.marks.append(len(server.exchanges))
        argv = [cli(), "-C", str(root), "chat", turn.text, "--yes", "--json", *(["--session", slug] if slug else [])]
        proc = subprocess.run(argv, env=env, cwd=root, capture_output=True, text=True, timeout=300)
        try:
            out = json.loads(proc.stdout)
        except ValueError:
            run.errors.append(f"turn {n}: exit {proc.returncode}: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
            if slug is None:
                break
            continue
        slug = slug or out["session"]
        if out.get("error"):
            run.errors.append(f"turn {n}: {out['error']}")
    return slug or ""


def run_acp(run: Run, root: Path, server: ScriptedLLM, env: dict, pause: float) -> str:
    from acp import spawn_agent_process, text_block
    from acp.schema import AllowedOutcome, RequestPermissionResponse

    class Editor:
        async def session_update(self, session_id, update, **kwargs):
            pass

        async def request_permission(self, options, session_id, tool_call, **kwargs):
            return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id="allow"))

    async def drive() -> str:
        with open(root.parent / "acp-stderr", "w") as err:
            async with spawn_agent_process(Editor(), cli(), "-C", str(root), "acp", env=env, cwd=str(root),
                                           transport_kwargs={"stderr": err}) as (conn, _proc):
                await conn.initialize(protocol_version=1)
                new = await conn.new_session(cwd=str(root), mcp_servers=[])
                for n, turn in enumerate(run.script.turns, 1):
                    if run.past_deadline():
                        break
                    run.marks.append(len(server.exchanges))
                    done = await conn.prompt(session_id=new.session_id, prompt=[text_block(turn.text)])
                    if done.stop_reason != "end_turn":
                        run.errors.append(f"turn {n}: stop reason {done.stop_reason}")
                    await asyncio.sleep(pause)
                return new.session_id

    return asyncio.run(drive())


def execute(run: Run, base: Path, pause: float) -> None:
    root = base / run.key.replace("/", "-") / "repo"
    root.mkdir(parents=True)
    httpx_scenario.make_repo(root)
    run.script = long.Script(root, run.turns)
    policy = long.LongPolicy(run.script, run.summarizer)
    with ScriptedLLM(policy, cache=True) as server:
        env = prepare(root, server.url, run.provider, run.window)
        from workstation.config import load as load_config

        config, _ = load_config(root)
        run.ratio = config.memory.compact_token_ratio
        started = time.perf_counter()
        if run.frontend == "app":
            slug = run_app(run, root, server, pause)
        elif run.frontend == "chat":
            slug = run_chat(run, root, server, env)
        else:
            slug = run_acp(run, root, server, env, pause)
        time.sleep(0.5)  # a compaction still streaming when the front end stopped is answered
        run.elapsed_s = time.perf_counter() - started
        run.asked, run.turns = run.turns, len(run.marks)  # the figures cover the turns that ran
        run.marks.append(len(server.exchanges))
        run.exchanges = list(server.exchanges)
    from workstation.paths import Paths
    from workstation.sessions.log import Session

    run.records = Session.open(Paths.for_root(root), slug).read().records if slug else []


# --------------------------------------------------------------------------- figures

def turn_of(run: Run, index: int) -> int:
    """The turn (1-based) during which exchange `index` arrived."""
    return max((n for n, mark in enumerate(run.marks[:-1], 1) if mark <= index), default=1)


def figures(run: Run) -> dict:
    from workstation import pricing

    ex = run.exchanges
    answered = [(i, e) for i, e in enumerate(ex) if e["usage"] is not None]
    kinds = [long.kind_of(e["request"]) for e in ex]
    compaction = {i for i, kind in enumerate(kinds) if kind == "compaction"}
    steps = [i for i, _ in answered if kinds[i] == "step"]
    records = run.records
    assistants = [r for r in records if r.get("type") == "assistant"]
    compacts = [r for r in records if r.get("type") == "compact"]
    unanswered = [i for i, e in enumerate(ex) if e["usage"] is None]
    out: dict = {"unanswered": len(unanswered), "turns": run.turns, "turns_asked": run.asked or run.turns, "window": run.window, "compact_token_ratio": run.ratio,
                 "elapsed_s": round(run.elapsed_s, 1), "errors": len(run.errors),
                 "requests": len(ex), "agent_requests": len(steps), "rank_requests": kinds.count("rank"), "compaction_requests": len(compaction),
                 "compaction_requests_answered": sum(1 for i in compaction if ex[i]["usage"] is not None),
                 "compactions": len(compacts), "logged_model_calls": len(assistants),
                 "trimmed_requests": sum(1 for r in assistants if r.get("trimmed")),
                 "most_turns_trimmed": max((int(r.get("trimmed") or 0) for r in assistants), default=0)}
    # the cache, over every request after the first
    tokens = {i: long.usage_tokens(e["usage"]) for i, e in answered}
    after = [tokens[i] for i, _ in answered[1:]]
    total_in, total_read = sum(t[0] for t in after), sum(t[1] for t in after)
    out["cache_served"] = round(total_read / total_in, 4) if total_in else None
    comp_in = sum(tokens[i][0] for i in compaction if i in tokens)
    out["compaction_cache_served"] = round(sum(tokens[i][1] for i in compaction if i in tokens) / comp_in, 4) \
        if comp_in else None
    # billed cost per turn, by segment
    rates = pricing.rates(PRICED_AS[run.provider])
    cost_by_turn = [0.0] * (run.turns + 1)
    for i, (total, read, written, long_w, output) in tokens.items():
        cost_by_turn[turn_of(run, i)] += rates.billed(total, output, read, written, long_w)
    out["priced_as"] = PRICED_AS[run.provider]
    out["cost_total_usd"] = round(sum(cost_by_turn), 4)
    out["cost_per_turn_by_segment"] = [round(sum(cost_by_turn[s:s + SEGMENT]) / len(cost_by_turn[s:s + SEGMENT]), 5)
                                       for s in range(1, run.turns + 1, SEGMENT)]
    first = first_compaction_turn(records)
    out["first_compaction_turn"] = first
    if first is not None and first + SEGMENT <= run.turns - SEGMENT + 1:
        after_first = cost_by_turn[first + 1:first + 1 + SEGMENT]
        last = cost_by_turn[run.turns - SEGMENT + 1:]
        base = sum(after_first) / len(after_first)
        out["cost_ratio_last_vs_after_first"] = round((sum(last) / len(last)) / base, 3) if base else None
    else:
        out["cost_ratio_last_vs_after_first"] = None  # the session is too short to have both
    # peak request against ratio x window + one turn
    # (in the agent's own count, the one the window and the ratio are in; the server's count of the same
    # requests, JSON and all, beside it)
    one_turn = largest_turn(run)
    out.update(peak_request=max((int(r.get("context_tokens") or 0) for r in assistants), default=0),
               largest_turn=one_turn, peak_target=int(run.ratio * run.window + one_turn),
               peak_server=max((tokens[i][0] for i in steps), default=0))
    out["probes"], out["missed"] = probes(run, steps, assistants, compacts)
    return out


def first_compaction_turn(records: list[dict]) -> int | None:
    users = 0
    for r in records:
        users += r.get("type") == "user"
        if r.get("type") == "compact":
            return users
    return None


def largest_turn(run: Run) -> int:
    """Tokens of the largest turn, counted as the agent counts a request (agent/prompt.py: each message's
    text and tool calls plus its overhead), over the log's records of the turn."""
    from workstation.agent.prompt import MESSAGE_OVERHEAD
    from workstation.tokens import count

    sizes: list[int] = []
    for r in run.records:
        if r.get("type") == "user":
            sizes.append(0)
        if not sizes or r.get("type") not in ("user", "assistant", "tool"):
            continue
        sizes[-1] += count(str(r.get("content") or "")) + MESSAGE_OVERHEAD + sum(
            count(str(c.get("name") or "") + str(c.get("arguments") or "")) for c in r.get("tool_calls") or ())
    return max(sizes, default=0)


def probes(run: Run, steps: list[int], assistants: list[dict], compacts: list[dict]) -> tuple[dict, list[str]]:
    """Per kind [present, probed] over every compaction; and what was missed (the first few, in words)."""
    tally = {kind: [0, 0] for kind in long.Facts.KINDS}
    tally["compactions seen in a request"] = [0, 0]
    missed: list[str] = []
    position = {id(r): k for k, r in enumerate(run.records)}
    texts: dict[int, str] = {}

    def text_of(k: int) -> str:
        if k not in texts:
            texts[k] = long.request_text(run.exchanges[steps[k]]["request"])
        return texts[k]

    start = 0  # each compaction is looked for after the one before it was seen
    for number, compact in enumerate(compacts, 1):
        summary = long._norm(str(compact.get("summary") or ""))
        seen_at = next((k for k in range(start, len(steps)) if summary in text_of(k)), None)
        tally["compactions seen in a request"][1] += 1
        if seen_at is None:
            missed.append(f"compaction {number}: no later request carries its summary")
            continue
        start = seen_at
        tally["compactions seen in a request"][0] += 1
        if seen_at >= len(assistants):
            missed.append(f"compaction {number}: its request has no record in the log")
            continue
        before = run.records[:position[id(assistants[seen_at])]]
        for kind, name, present in long.probe(long.facts(before), text_of(seen_at)):
            tally[kind][1] += 1
            tally[kind][0] += present
            if not present and len(missed) < 12:
                missed.append(f"compaction {number} (turn {turn_of(run, steps[seen_at])}): {kind} {name}")
    return tally, missed


def cache_detail(run: Run) -> list[dict]:
    """Each compaction request and the first agent step after it: its tokens, how many the cache served,
    and where its prefix left the previous request's (the first item, tool or message, that differs)."""
    from support.fake_cache import openai_items

    ex = run.exchanges
    kinds = [long.kind_of(e["request"]) for e in ex]
    rows: list[dict] = []
    for i, kind in enumerate(kinds):
        if kind != "compaction":
            continue
        step = next((j for j in range(i + 1, len(ex)) if kinds[j] == "step"), None)
        for j, what in ((i, "compaction"), (step, "step after")):
            if j is None or ex[j]["usage"] is None:
                continue
            total, read, written, _, _ = long.usage_tokens(ex[j]["usage"])
            before = next((k for k in range(j - 1, -1, -1) if kinds[k] != "rank"), None)
            mine = openai_items(ex[j]["request"])
            theirs = openai_items(ex[before]["request"]) if before is not None else []
            same = next((n for n, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
            differs = mine[same][:90] if same < len(mine) else "(nothing: the request is a prefix of the last)"
            rows.append({"what": what, "turn": turn_of(run, j), "total": total, "read": read, "written": written,
                         "items": len(mine), "items_shared": same, "first_difference": differs})
    return rows


def show_detail(rows: list[dict]) -> None:
    print("  compaction requests and the step after each: tokens, cache-served, the prefix shared with the "
          "request before it (items)")
    for r in rows:
        print(f"    turn {r['turn']:>3} {r['what']:<10} {r['total']:>6} in, {r['read']:>6} read "
              f"({r['read'] / r['total']:.1%}), {r['written']:>6} written, uncached {r['total'] - r['read']:>5}; "
              f"{r['items_shared']}/{r['items']} items shared; first difference: {r['first_difference']}")


# --------------------------------------------------------------------------- printing

def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else "MET" if ok else "MISSED"


def pct(value) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def show(run: Run, f: dict) -> None:
    print(f"=== {run.key}: {run.turns} turns, model.context_window = {run.window:,} "
          f"(memory.compact_token_ratio {run.ratio}), {f['elapsed_s']:.0f}s")
    if run.turns < run.asked:
        print(f"  stopped at the deadline (--deadline) after {run.turns} of the {run.asked} turns asked for: "
              "the figures cover the turns that ran")
    if run.errors:
        print(f"  {len(run.errors)} turns ended in an error: the figures cover what ran")
    for line in run.errors[:5]:
        print(f"  error: {line}")
    if len(run.errors) > 5:
        print(f"  ... {len(run.errors) - 5} more errors")
    print(f"  requests: {f['requests']} ({f['agent_requests']} agent steps answered, {f['compaction_requests']} "
          f"compaction requests, {f['compaction_requests_answered']} answered, {f['rank_requests']} find rankings); the log: {f['logged_model_calls']} "
          f"model calls")
    if f["unanswered"]:
        print(f"  requests the server did not answer (refused, or the client went away): {f['unanswered']}")
    print(f"  compactions (records in the log): {f['compactions']}"
          + (f", the first in turn {f['first_compaction_turn']}" if f['first_compaction_turn'] else ""))
    print(f"  requests trimmed: {f['trimmed_requests']} (most turns left out of one: {f['most_turns_trimmed']})"
          f"   target 0 -> {verdict(f['trimmed_requests'] == 0)}")
    print(f"  cache-served share of input tokens, every request after the first: {pct(f['cache_served'])} "
          f"(compaction requests alone: {pct(f['compaction_cache_served'])})   target >= {TARGET_CACHE:.0%} -> "
          f"{verdict(None if f['cache_served'] is None else f['cache_served'] >= TARGET_CACHE)}")
    segments = "  ".join(f"{SEGMENT * k + 1}-{min(run.turns, SEGMENT * (k + 1))}: ${c:.4f}"
                         for k, c in enumerate(f["cost_per_turn_by_segment"]))
    print(f"  billed cost per turn by segment (priced as {f['priced_as']}): {segments}; total ${f['cost_total_usd']:.2f}")
    ratio = f["cost_ratio_last_vs_after_first"]
    print(f"  last {SEGMENT} turns vs the {SEGMENT} after the first compaction: "
          f"{'n/a' if ratio is None else f'{ratio:.2f}x'}   target <= {TARGET_COST_RATIO}x -> "
          f"{verdict(None if ratio is None else ratio <= TARGET_COST_RATIO)}")
    print(f"  peak request: {f['peak_request']:,} tokens as the agent counts them (the server's count of the "
          f"same JSON: {f['peak_server']:,}); ratio x window + the largest turn = {run.ratio} x {run.window:,} + "
          f"{f['largest_turn']:,} = {f['peak_target']:,}   -> {verdict(f['peak_request'] <= f['peak_target'])}")
    print("  probes after every compaction (present / probed):")
    for kind, (present, probed) in f["probes"].items():
        print(f"    {kind:<30} {present:>4} / {probed:<4} {pct(present / probed if probed else None):>7}"
              f"   target 100% -> {verdict(None if not probed else present == probed)}")
    for line in f["missed"][:8]:
        print(f"    missed: {line}")
    print()


def compare(previous: dict, current: dict) -> None:
    """The change of each figure against the last run's of the same combination."""
    for key, now in current.items():
        old = previous.get(key)
        if old is None:
            continue
        changes = []
        for name in ("compactions", "trimmed_requests", "cache_served", "cost_total_usd",
                     "cost_ratio_last_vs_after_first", "peak_request"):
            a, b = old.get(name), now.get(name)
            if a != b:
                changes.append(f"{name} {a} -> {b}")
        for kind, (present, probed) in now.get("probes", {}).items():
            was = old.get("probes", {}).get(kind)
            if was and was != [present, probed]:
                changes.append(f"probes {kind} {was[0]}/{was[1]} -> {present}/{probed}")
        print(f"  change {key}: " + ("; ".join(changes) if changes else "none"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frontend", choices=[*FRONTENDS, "all"], default="all")
    parser.add_argument("--provider", choices=[*PROVIDERS, "both"], default="anthropic")
    parser.add_argument("--summarizer", choices=[*SUMMARIZERS, "both"], default="both")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--window", type=int, default=24000, help="model.context_window in tokens")
    parser.add_argument("--pause", type=float, default=0.2, help="seconds after each answer (app, acp)")
    parser.add_argument("--json", type=Path, default=None,
                        help="write the figures here (kept per combination) and print the change from the last run's")
    parser.add_argument("--detail", action="store_true",
                        help="print each compaction request and the step after it, with its cache figures")
    parser.add_argument("--dump", type=Path, default=None,
                        help="write every request and its usage here as JSON (one file per combination)")
    parser.add_argument("--keep", type=Path, default=None, help="run in this folder and keep it")
    parser.add_argument("--deadline", type=float, default=None,
                        help="seconds from the start after which no run starts a new turn (the figures cover the "
                             "turns that ran; a run not started by then is skipped)")
    args = parser.parse_args()
    if args.turns < 2:
        parser.error("--turns must be at least 2")
    from workstation import llm

    llm.warm_import()
    pick = lambda value, every: list(every) if value in ("all", "both") else [value]  # noqa: E731
    runs = [Run(fe, pr, su, args.turns, args.window) for fe in pick(args.frontend, FRONTENDS)
            for pr in pick(args.provider, PROVIDERS) for su in pick(args.summarizer, SUMMARIZERS)]
    tmp = None
    if args.keep:
        base = args.keep.resolve()
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="bench-long-")
        base = Path(tmp.name)
    results: dict[str, dict] = {}
    try:
        deadline = None if args.deadline is None else time.monotonic() + args.deadline
        for run in runs:
            if deadline is not None and time.monotonic() > deadline:
                print(f"=== {run.key}: not run, the deadline (--deadline) had passed")
                continue
            run.deadline = deadline
            execute(run, base, args.pause)
            results[run.key] = figures(run)
            show(run, results[run.key])
            if args.dump:
                args.dump.mkdir(parents=True, exist_ok=True)
                (args.dump / f"{run.key.replace('/', '-')}.json").write_text(json.dumps(run.exchanges))
            if args.detail:
                show_detail(cache_detail(run))
    finally:
        if tmp is not None:
            tmp.cleanup()
    if args.json:
        previous = json.loads(args.json.read_text()) if args.json.exists() else {}
        if previous:
            print(f"against the last run's figures in {args.json}:")
            compare(previous, results)
        args.json.write_text(json.dumps({**previous, **results}, indent=1, sort_keys=True) + "\n")
        print(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
