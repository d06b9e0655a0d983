"""kill -9 at random moments while sessions are appended to, compacted, archived and restored.

A zygote process imports everything once (litellm takes seconds) and forks a
worker per trial; the worker loops over random operations on three sessions
(model calls go through litellm to the scripted server) until it is killed
with SIGKILL at a random moment. After every kill, recovery runs and every
session must reopen with every turn the worker had confirmed, no id twice,
and compact records that chain without a range compacted twice.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

from support.fakellm import ScriptedLLM
from support.sessions_support import KEY, KEY_ENV, fill, make_config, summarizer
from workstation.sessions import Session
from workstation.sessions.archive import gz_path, meta_path, recover
from workstation.sessions.catalog import load

TRIALS = 36
SLUGS = ("f0", "f1", "f2")

ZYGOTE = textwrap.dedent("""
    import os, random, sys
    sys.path.insert(0, sys.argv[3])
    from support.sessions_support import fill, make_config
    from workstation import llm
    from workstation.sessions import Session, compact
    from workstation.sessions.archive import archive, gz_path, restore

    llm.warm_import()
    config, paths = make_config(sys.argv[1], sys.argv[2], compact_threshold=12, keep_recent=4)
    SLUGS = ("f0", "f1", "f2")

    def work(seed, progress):
        rng = random.Random(seed)
        n = 10_000 * seed
        while True:
            slug = rng.choice(SLUGS)
            live = (paths.sessions / f"{slug}.jsonl").exists()
            op = rng.choices(["append", "compact", "archive"], [5, 2, 2])[0]
            if not live:
                if gz_path(paths, slug).exists():
                    os.write(progress, f"begin restore {slug}\\n".encode())
                    restore(paths, slug)
                    os.write(progress, f"end restore {slug}\\n".encode())
                continue
            session = Session(paths, slug, counter=len)
            if op == "archive" and rng.random() < 0.6:  # summarize first, as `session compact` would:
                os.write(progress, f"begin compact {slug}\\n".encode())  # the archive is then all file moves
                compact(session, config, force=True, keep=0)
                os.write(progress, f"end compact {slug}\\n".encode())
            os.write(progress, f"begin {op} {slug}\\n".encode())
            if op == "append":
                for record in fill(session, rng.randint(1, 6), start=n, tools=True, big=rng.choice([50, 30_000])):
                    os.write(progress, f"turn {slug} {record['id']}\\n".encode())  # only once the append returned
                n += 10
            elif op == "compact":
                compact(session, config, force=rng.random() < 0.5)
            elif op == "archive":
                archive(paths, slug, config)
            os.write(progress, f"end {op} {slug}\\n".encode())

    print("ready", flush=True)
    for line in sys.stdin:
        seed = int(line)
        pid = os.fork()
        if pid == 0:
            progress = os.open(os.path.join(sys.argv[1], "progress.txt"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            try:
                work(seed, progress)
            except BaseException:
                import traceback
                traceback.print_exc()
                os._exit(3)
            os._exit(0)
        print(f"pid {pid}", flush=True)
        _, status = os.waitpid(pid, 0)
        print(f"status {status}", flush=True)
""")


def check_invariants(paths, root) -> dict:
    recover(paths)
    confirmed: dict[str, list[str]] = {s: [] for s in SLUGS}
    progress = root / "progress.txt"
    if progress.exists():
        for line in progress.read_text().splitlines():
            kind, *rest = line.split()
            if kind == "turn":
                confirmed[rest[0]].append(rest[1])
    torn = 0
    for slug in SLUGS:
        live, archived = (paths.sessions / f"{slug}.jsonl").exists(), gz_path(paths, slug).exists()
        assert live != archived, f"{slug}: live={live} archived={archived} after recovery"
        assert archived == meta_path(paths, slug).exists()
        view, _ = load(paths, slug)
        ids = [r["id"] for r in view.records]
        assert len(ids) == len(set(ids)), f"{slug}: a record appears twice"
        turn_ids = [t["id"] for t in view.turns]
        positions = {rid: i for i, rid in enumerate(turn_ids)}
        missing = [rid for rid in confirmed[slug] if rid not in positions]
        assert not missing, f"{slug}: confirmed turns lost: {missing[:3]}"
        assert [positions[rid] for rid in confirmed[slug]] == sorted(positions[rid] for rid in confirmed[slug])
        for problem in view.problems:  # only the one line a kill cut short may be unreadable
            assert "not valid JSON" in problem.reason or "torn last line" in problem.reason, problem
        torn += len(view.problems)
        previous = None
        for record in view.compacts():
            covers = record["covers"]
            assert covers["new_first_turn"] == (previous["covers"]["last_turn"] + 1 if previous else 1), slug
            assert record.get("folds") == (previous["id"] if previous else None)
            previous = record
    return {"torn": torn, "confirmed": sum(len(v) for v in confirmed.values())}


def test_kill_9_during_compaction_and_archiving_loses_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    answer = summarizer()
    rng = random.Random(20250101)

    def jittery(body):
        reply = answer(body)
        reply.delay_s = rng.uniform(0, 0.08)
        return reply

    with ScriptedLLM(jittery) as server:
        config, paths = make_config(tmp_path, server.url, compact_threshold=12, keep_recent=4)
        for slug in SLUGS:  # big, poorly compressible logs: moving them takes a while to kill into
            session = Session.create(paths, slug, counter=len)
            fill(session, 40, tools=True, big=30_000)
            session.user(random.Random(slug).randbytes(600_000).hex())
        script = tmp_path / "zygote.py"
        script.write_text(ZYGOTE)
        errors = open(tmp_path / "zygote.err", "w+")
        zygote = subprocess.Popen([sys.executable, str(script), str(tmp_path), server.url,
                                   os.path.dirname(os.path.dirname(os.path.abspath(__file__)))],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True)
        try:
            assert zygote.stdout.readline() == "ready\n", open(tmp_path / "zygote.err").read()
            killed_during, leftovers = [], []
            for trial in range(1, TRIALS + 1):
                zygote.stdin.write(f"{trial}\n")
                zygote.stdin.flush()
                pid = int(zygote.stdout.readline().split()[1])
                time.sleep(rng.uniform(0.02, 0.7))
                os.kill(pid, signal.SIGKILL)
                status = int(zygote.stdout.readline().split()[1])
                assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, \
                    open(tmp_path / "zygote.err").read()
                killed_during.append(_interrupted(tmp_path / "progress.txt"))
                leftovers.append(_leftovers(paths))
                check_invariants(paths, tmp_path)
        finally:
            zygote.stdin.close()
            zygote.wait(timeout=30)
    summary = check_invariants(paths, tmp_path)
    assert summary["confirmed"] > TRIALS  # the workers did real work between kills
    during = {op: killed_during.count(op) for op in set(killed_during)}
    left = {k: leftovers.count(k) for k in set(leftovers) if k}
    print(f"\n{TRIALS} kills, {summary['confirmed']} confirmed appends, {summary['torn']} torn lines; "
          f"killed during: {during}; half-done moves found: {left}")
    assert during.get("compact", 0) + during.get("archive", 0) > TRIALS // 3


def _interrupted(progress) -> str:
    """The operation a kill landed in: the last `begin` without its `end`."""
    last = progress.read_text().splitlines()[-1].split()
    return last[1] if last[0] == "begin" else "between operations"


def _leftovers(paths) -> str:
    """Traces of a half-done move, before recovery runs."""
    for folder in (paths.sessions, paths.archive):
        if folder.exists() and any(name.endswith(".tmp") for name in os.listdir(folder)):
            return "temp file of an atomic write"
    for slug in SLUGS:
        live, gz, meta = ((paths.sessions / f"{slug}.jsonl").exists(), gz_path(paths, slug).exists(),
                          meta_path(paths, slug).exists())
        if live and gz:
            return "live log and archive copy both present"
        if gz and not meta:
            return "restore between its steps"
    return ""
