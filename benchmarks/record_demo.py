"""Record the demo episode shipped in sessions/: a real run of the agent loop, replayable with no model.

    /tmp/wsvenv/bin/python benchmarks/record_demo.py

Writes, replacing what is there:
  sessions/demo-repo/               the fixture repository as it was BEFORE the episode (the small
                                    request_id scenario of tests/support/agent_scenario.py: two modules)
  sessions/demo-request-id.jsonl    the session log of the episode

The episode is the benchmark's scenario, shorter: the real Agent (real litellm,
tools, knowledge map, memory, compaction) against the scripted model on
127.0.0.1. Turn 1 adds `request_id: str | None = None` to every public function
and threads it through their calls; turn 2 checks the result from the maps.
Afterwards: `workstation report sessions/demo-request-id.jsonl`.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_TOP = HERE.parent
sys.path.insert(0, str(REPO_TOP / "tests"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from support.agent_scenario import CHECK, TASK, RequestIdPolicy, check_repo, make_repo  # noqa: E402
from support.fakellm import ScriptedLLM  # noqa: E402
from support.trust_support import user_config  # noqa: E402

from workstation.agent import tools  # noqa: E402
from workstation.costs import report as report_mod  # noqa: E402
from workstation.agent.loop import Agent, base_tokens  # noqa: E402
from workstation.runtime import Workspace  # noqa: E402
from workstation.sessions import Session  # noqa: E402

SLUG = "demo-request-id"
SIZE = "small"


def main() -> None:
    out_dir = REPO_TOP / "sessions"
    with tempfile.TemporaryDirectory(prefix="record-demo-") as tmp:
        root = Path(tmp) / "demo-repo"
        make_repo(root, SIZE)
        pristine = Path(tmp) / "pristine"
        shutil.copytree(root, pristine)
        with ScriptedLLM(RequestIdPolicy()) as server:
            (root / ".workstation").mkdir()
            # the endpoint in a user config home of the recording's own (a workspace's config never names one)
            user_config(f'[model]\nname = "openai/test-model"\napi_base = "{server.url}"\nmax_retries = 0\n'
                        "context_window = 32768\n", Path(tmp) / "user-home")
            with Workspace(root) as ws:
                session = Session.create(ws.paths, SLUG)
                agent = Agent(ws, session, compaction="sync")
                try:
                    for text in (TASK, CHECK):
                        result = agent.run(text)
                        if result.error:
                            raise SystemExit(f"the episode failed: {result.error}")
                        print(f"> {text}\n{result.text}\n")
                finally:
                    agent.close()
                problems = check_repo(root, SIZE)
                if problems:
                    raise SystemExit("the episode did not do its job: " + "; ".join(problems))
                log = session.path.read_bytes()
                rep = report_mod.build(ws.paths, SLUG, tools.meaning_of, base_tokens)
                if tmp.encode() in log:
                    raise SystemExit("the log mentions the temporary folder; it would not replay elsewhere")
        target_repo = out_dir / "demo-repo"
        if target_repo.exists():
            shutil.rmtree(target_repo)
        shutil.copytree(pristine, target_repo)
        (out_dir / f"{SLUG}.jsonl").write_bytes(log)
    print(f"wrote {out_dir / (SLUG + '.jsonl')} ({len(log):,} bytes) and {target_repo}/")
    for row in rep.rows():
        print(f"  {row['metric']:<17} agent {row['agent']:>8}   naive {row['naive']:>8}  {row['saved']}")


if __name__ == "__main__":
    main()
