"""Run by `workstation.sandbox.sandboxed` as `python -I -S _limits_exec.py PROCESSES FILE_BYTES MEMORY_BYTES --
argv...` (stdlib only, inside whatever sandbox wraps it): lower this process's rlimits, then exec the command,
which inherits them with every process it starts.

- RLIMIT_NPROC: PROCESSES more than the processes of this user this process can see (inside bubblewrap's
  PID namespace that is the sandbox alone; outside it, all of the user's, so the user's own count is not
  taken from the command). The kernel does not apply it to root.
- RLIMIT_FSIZE: no file written larger (the write fails with EFBIG; SIGXFSZ is left at its default).
- RLIMIT_DATA (Linux; RLIMIT_AS where there is no RLIMIT_DATA): heap and private writable mappings, so a
  runtime's address-space reservation (V8, the JVM, Go) is not counted until it is used.
A limit is only ever lowered. Exit 127 with one line on stderr when the command cannot be started.
"""

import os
import resource
import sys


def _own_processes() -> int:
    uid, count = os.getuid(), 0
    try:
        names = os.listdir("/proc")
    except OSError:
        return 0  # no /proc (macOS): the limit counts from zero
    for name in names:
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    count += 1
            except OSError:
                continue
    return count


def _lower(which: int, value: int) -> None:
    soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    if soft == resource.RLIM_INFINITY or value < soft:
        resource.setrlimit(which, (value, value))


def main() -> None:
    processes, file_bytes, memory_bytes = (int(x) for x in sys.argv[1:4])
    argv = sys.argv[5:]
    if hasattr(resource, "RLIMIT_NPROC"):
        _lower(resource.RLIMIT_NPROC, processes + _own_processes())
    _lower(resource.RLIMIT_FSIZE, file_bytes)
    _lower(getattr(resource, "RLIMIT_DATA", resource.RLIMIT_AS) if sys.platform.startswith("linux")
           else resource.RLIMIT_AS, memory_bytes)
    try:
        os.execvp(argv[0], argv)
    except OSError as err:
        sys.stderr.write(f"{argv[0]}: {err.strerror}\n")
        sys.exit(127)


if __name__ == "__main__":  # run by path, as a script; importing it does nothing
    main()
