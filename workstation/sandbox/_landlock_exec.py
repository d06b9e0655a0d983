"""Run by `workstation.sandbox.landlock` as `python -I -S _landlock_exec.py SPEC -- argv...` (stdlib only):
restrict this process with Landlock, then exec the command, which inherits the restriction for good.

SPEC is JSON: {"write": [paths writable beneath], "write_files": [single files writable], "net": bool}.
Reads are not restricted (Landlock grants by hierarchy and cannot carve `.git` or the state folder out of
a readable workspace). Exit 126 with one line on stderr when Landlock cannot be applied.
"""

import ctypes
import json
import os
import signal
import sys

SYS_CREATE, SYS_ADD_RULE, SYS_RESTRICT = 444, 445, 446  # the same on every architecture
PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG = 38, 1
RULE_PATH_BENEATH = 1
# filesystem rights (ABI 1: bits 0-12; ABI 2: REFER; ABI 3: TRUNCATE)
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1, 2, 4, 8
WRITES = (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12)
REFER, TRUNCATE = 1 << 13, 1 << 14
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2  # ABI 4
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1, 2  # ABI 6


class RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def fail(message: str) -> None:
    sys.stderr.write(f"landlock: {message}\n")
    sys.exit(126)


def main() -> None:
    spec = json.loads(sys.argv[1])
    argv = sys.argv[3:]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(ctypes.c_long(SYS_CREATE), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        fail(f"not available in this kernel ({os.strerror(ctypes.get_errno())})")
    fs = WRITE_FILE | WRITES | (REFER if abi >= 2 else 0) | (TRUNCATE if abi >= 3 else 0)
    net = (NET_BIND_TCP | NET_CONNECT_TCP) if abi >= 4 and not spec["net"] else 0
    scoped = (SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL) if abi >= 6 else 0
    attr = RulesetAttr(fs, net, scoped)
    size = ctypes.sizeof(RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = libc.syscall(ctypes.c_long(SYS_CREATE), ctypes.byref(attr), ctypes.c_size_t(size),
                           ctypes.c_uint32(0))
    if ruleset < 0:
        fail(f"cannot create a ruleset ({os.strerror(ctypes.get_errno())})")
    file_rights = WRITE_FILE | (TRUNCATE if abi >= 3 else 0)
    rules = [(p, fs) for p in spec["write"]] + [(p, file_rights) for p in spec["write_files"]]
    for path, rights in rules:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # not on this machine (/dev/shm...): nothing to allow
        rule = PathBeneath(rights if os.path.isdir(path) else rights & file_rights, fd)
        if libc.syscall(ctypes.c_long(SYS_ADD_RULE), ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH),
                        ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
            fail(f"cannot add a rule for {path} ({os.strerror(ctypes.get_errno())})")
        os.close(fd)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        fail("cannot set no_new_privs")
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the command dies with workstation
    if libc.syscall(ctypes.c_long(SYS_RESTRICT), ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
        fail(f"cannot restrict itself ({os.strerror(ctypes.get_errno())})")
    os.close(ruleset)
    try:
        os.execvp(argv[0], argv)
    except OSError as err:
        sys.stderr.write(f"{argv[0]}: {err.strerror}\n")
        sys.exit(127)


if __name__ == "__main__":  # run by path, as a script; importing it does nothing
    main()
