"""Serve the scripted model on 127.0.0.1 for trying the app by hand (a person in tmux, not a test).

    .venv/bin/python tests/support/fakellm_serve.py [--port 8765]

Every request is answered with a short reply naming the request's message count ("write PATH: TEXT"
writes the file with write_file first); a compaction request
(the chat model's history with the compaction prompt last, or a transcript) gets a summary in the five
sections. Both endpoints answer, each with its provider's prompt-cache accounting (fakellm.py): point the
app at it with a [model] in the user's config, e.g.

    [model]
    name = "anthropic/claude-sonnet-4-5-20250929"
    api_base = "http://127.0.0.1:8765"
    api_key_env = "FAKE_KEY"

Stops on Ctrl-C.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the support package

from support.fakellm import Reply, ScriptedLLM  # noqa: E402
from support.scenario_common import content, is_compaction, summarize  # noqa: E402


def answer(body: dict) -> Reply:
    messages = body["messages"]
    if is_compaction(messages):
        return Reply(text=summarize(messages))
    asked = next((m for m in reversed(messages) if m["role"] == "user"), {"content": ""})
    words = " ".join(content(asked).split())[:60]
    wanted = re.match(r"write (\S+): (.+)", words)
    if wanted and messages[-1]["role"] == "user":  # "write PATH: TEXT": the file, then a word on it
        return Reply(tool_calls=[("write_file", {"path": wanted[1], "content": wanted[2] + "\n"})])
    if wanted:
        return Reply(text=f"Wrote {wanted[1]}.")
    return Reply(text=f"Noted ({len(messages)} messages in this request): {words}. " + "Some detail. " * 40)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    with ScriptedLLM(answer, cache=True, port=args.port) as server:
        print(f"scripted model at {server.url} (Ctrl-C stops it)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
