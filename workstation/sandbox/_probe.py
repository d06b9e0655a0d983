"""Run inside a sandbox by `workstation.sandbox` (stdlib only, `python -I -S`): tries each thing a sandbox
must forbid, on a scratch workspace, and prints one JSON line of what it could do."""

import json
import os
import socket
import sys


def can(action) -> bool:
    try:
        action()
    except OSError:
        return False
    return True


def write(path: str) -> None:
    with open(path, "w") as fh:
        fh.write("probe\n")


def read(path: str) -> None:
    with open(path) as fh:
        fh.read()


def connect(port: int) -> None:
    socket.create_connection(("127.0.0.1", port), timeout=2).close()


def main() -> None:
    ws, outside, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    tmp = os.environ.get("TMPDIR") or "/tmp"
    print(json.dumps({
        "write_workspace": can(lambda: write(os.path.join(ws, "probe"))),
        "write_tmp": can(lambda: write(os.path.join(tmp, "probe"))),
        "write_outside": can(lambda: write(os.path.join(outside, "probe"))),
        "write_git": can(lambda: write(os.path.join(ws, ".git", "probe"))),
        "read_state": can(lambda: read(os.path.join(ws, ".workstation", "probe"))),
        "network": can(lambda: connect(port)),
    }))


if __name__ == "__main__":  # run by path, as a script; importing it does nothing
    main()
