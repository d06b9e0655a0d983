"""The console script. `workstation [PATH]` opens the app without loading click and the
command modules (~80 ms of first paint); everything else goes to the command line."""

from __future__ import annotations

import sys

from . import __version__
from .errors import ConfigError, WorkstationError

# Names the click group knows; tests/integration/test_launch.py checks this against workstation.cli.main.
COMMANDS = frozenset({"acp", "chat", "exec", "find", "impact", "import", "index", "map", "mcp", "memory", "reflect",
                      "replay", "report", "sandbox", "session", "sidecar", "team", "trust", "ui", "watch"})


def app_arguments(argv: list[str]) -> dict | None:
    """The app's arguments when argv only opens the app (`[-C P] [--model M] [PATH] ...`), else None."""
    args: dict = {"root": ".", "model": None, "session": None, "sidecar": True}
    path = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-C", "--model", "--session"):
            if i + 1 >= len(argv):
                return None
            args[{"-C": "root", "--model": "model", "--session": "session"}[arg]] = argv[i + 1]
            i += 2
        elif arg == "--no-sidecar":
            args["sidecar"] = False
            i += 1
        elif arg.startswith("-") or arg in COMMANDS or path is not None:
            return None  # --help, --version, a command, anything unusual: the command line decides
        else:
            path = arg
            i += 1
    if path is not None:
        args["root"] = path
    return args


def entry() -> None:
    if sys.argv[1:] == ["--version"]:  # what click's version option prints, without click (issue 31: <= 2x python)
        print(f"workstation, version {__version__}")
        return
    from .process import exit_on_sigterm, finish  # lazy: signal, threading and typing, not needed above

    exit_on_sigterm()
    try:
        _open_app_or_command_line()
    except SystemExit as exc:
        finish(exc.code)
    finish(0)


def _open_app_or_command_line() -> None:
    args = app_arguments(sys.argv[1:])
    if args is None:
        from .cli.common import run_main  # lazy: click and the command modules, ~80 ms of the app's first paint
        from .cli import main  # lazy: click and the command modules, ~80 ms of the app's first paint

        run_main(main)
        return
    from .tui.run import run_app  # lazy: textual, ~250 ms the command line does not need

    root = args.pop("root")
    try:
        code = run_app(root, **args)
    except ConfigError as err:
        for line in err.lines:
            print(f"error: {line}", file=sys.stderr)
        sys.exit(2)
    except WorkstationError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(code)
