"""Commands run with limits on processes, file size and memory (issue 19, item 11), under every sandbox
backend this machine has and with none. Judged by effect: a command the user approved tries to start more
processes than the limit, to write a file past it and to take more memory than it, and must fail at each.

The kernel exempts root (uid 0 of the first user namespace, also inside bubblewrap's) from the process
limit: run as root, the process attack is still made but not judged, and the test says so."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from workstation import sandbox
from workstation.sandbox import Limits, Policy

LIMITS = Limits(processes=64, file_bytes=1 << 20, memory_bytes=512 << 20)
ATTACKS = {  # what the command prints: how far it got
    "processes": "import os, time\nn = 0\nfor _ in range(300):\n    try:\n        pid = os.fork()\n    "
                 "except OSError:\n        break\n    if pid == 0:\n        time.sleep(3); os._exit(0)\n    n += 1\n"
                 "print(n)",
    "file size": "import signal\nsignal.signal(signal.SIGXFSZ, signal.SIG_IGN)\nn = 0\ntry:\n"
                 "    with open('big.bin', 'wb') as f:\n        for _ in range(64):\n"
                 "            f.write(b'x' * 65536); f.flush(); n += 65536\nexcept OSError:\n    pass\nprint(n)",
    "memory": "n = 0\nkeep = []\ntry:\n    for _ in range(32):\n        keep.append(bytearray(64 << 20)); "
              "n += 64 << 20\nexcept MemoryError:\n    pass\nprint(n)",
}
ALLOWED = {"processes": LIMITS.processes, "file size": LIMITS.file_bytes, "memory": LIMITS.memory_bytes}

RUNNER = """
import json, sys
from pathlib import Path
from workstation.agent.commands import run_command
from workstation.sandbox import Limits, Policy
root, mode, limits, attacks = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
out = {}
for name, code in attacks.items():
    res = run_command("python3 -c " + __import__("shlex").quote(code), Path(root), allow=[], approve=lambda r: True,
                      timeout_s=60, max_output_chars=10_000,
                      sandbox=Policy(root, mode=mode, limits=Limits(*limits)))
    out[name] = [res.output, res.exit_code, res.sandbox]
print(json.dumps(out))
"""


def _modes() -> list[str]:
    modes = [m for m in ("bwrap", "landlock", "seatbelt") if sandbox.status(Policy(Path.cwd(), mode=m)).backend]
    return modes + ["off"]


@pytest.mark.parametrize("mode", _modes())
def test_a_command_cannot_pass_its_process_file_and_memory_limits(mode, capsys):
    root = Path(tempfile.mkdtemp(prefix="ws-limits-"))
    try:
        done = subprocess.run([sys.executable, "-c", RUNNER, str(root), mode,
                               json.dumps([LIMITS.processes, LIMITS.file_bytes, LIMITS.memory_bytes]),
                               json.dumps(ATTACKS)], capture_output=True, text=True, timeout=300, cwd=root,
                              env=dict(os.environ))
        assert done.returncode == 0, done.stderr[-2000:]
        results = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    through, unjudged = [], []
    for name, (output, code, backend) in results.items():
        assert backend == ("none" if mode == "off" else mode), (name, backend)
        # the count it printed (a note may follow: forked children outlive a command outside bubblewrap)
        got = next((int(line) for line in output.splitlines() if line.strip().isdigit()), 0)
        if got > ALLOWED[name] and (name != "processes" or os.geteuid() != 0):
            through.append(f"{name}: {got} > {ALLOWED[name]}")
        elif got > ALLOWED[name]:
            unjudged.append(f"{name} ({got} started: root is exempt)")
        assert "Traceback" not in output, output
    with capsys.disabled():
        print(f"\nlimits under {mode}: {len(ATTACKS)} attempts, {len(through)} got through {through}"
              + (f"; not judged: {', '.join(unjudged)}" if unjudged else ""))
    assert through == []
