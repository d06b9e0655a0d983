"""Configuration: TOML files validated strictly, workspace over user over defaults.

Precedence (highest first): environment (WORKSTATION_MODEL), the workspace's
`.workstation/config.toml` (as far as workstation.trust lets it), the user's `config.toml`, the
defaults below.

Each section is a msgspec Struct whose annotations carry the types and bounds (msgspec rather than
pydantic: ~70 ms less at every start of the command line). msgspec stops at the first problem, so
`validate` walks the data key by key and has msgspec check each value alone: every bad key gets its own
line. A key's own rules are its section's `_check_<key>(value)`, rules across keys the section's
`_check()`; both raise ValueError with the message. A section built in code trusts its arguments, as any
Struct does; assigning to a setting checks the value as loading would and refuses (ConfigError) what
loading refuses, so a copy (`copy.deepcopy`) may be changed, never into an invalid config.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
import warnings
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Callable, Literal, get_args, get_origin
from urllib.parse import parse_qs, urlsplit

import msgspec
from msgspec import Meta, field

from . import trust as trust_mod
from .errors import ConfigError
from .paths import DEFAULT_HIDE, Paths
from .trust import Split, Trust


class _Section(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    def __post_init__(self) -> None:
        self._check()

    def _check(self) -> None:
        """Rules across keys: raise ValueError saying what is wrong."""

    def __setattr__(self, name: str, value: Any) -> None:
        info = _fields(type(self)).get(name)
        if info is None:
            raise AttributeError(f"{type(self).__name__} has no setting {name!r}")
        where = f"{type(self).__name__}.{name}"
        problems: list[str] = []
        value = _convert(info.type, value, where, problems, getattr(type(self), f"_check_{name}", None))
        if not problems:
            try:
                msgspec.structs.replace(self, **{name: value})  # runs _check() on a changed copy
            except ValueError as err:
                problems.append(f"{where}: {err}")
        if problems:
            raise ConfigError(problems)
        super().__setattr__(name, value)


DAY_S = 86_400.0  # no time limit in the config may exceed a day: a bigger one is a typo, not a wish
# Every float setting has an upper bound: msgspec has no switch that refuses inf (nan fails any bound).
TimeLimit = Annotated[float, Meta(gt=0, le=DAY_S)]


class ModelConfig(_Section):
    name: str = ""  # any litellm model string; "" means no model configured
    api_base: str = ""  # the endpoint of the model's provider (a proxy, a local server); "" for its default
    api_key_env: str = ""  # name of the env var holding the key; the key itself never goes in config
    fallbacks: list[str] = field(default_factory=list)  # models tried in turn when this one fails
    timeout_s: TimeLimit = 60.0  # one model call, in seconds
    max_retries: Annotated[int, Meta(ge=0, le=10)] = 2  # retries of a failed call (with back-off) before a fallback
    context_window: Annotated[int, Meta(ge=0, le=100_000_000)] = 0  # 0: ask litellm
    # the most tokens the model writes in one answer, which bounds a streamed answer (0: ask litellm)
    max_output_tokens: Annotated[int, Meta(ge=0, le=100_000_000)] = 0


class IndexConfig(_Section):
    max_file_bytes: Annotated[int, Meta(gt=0, le=1 << 30)] = 1_000_000  # larger files are listed, not parsed
    workers: Annotated[int, Meta(ge=0, le=256)] = 0  # 0: one per core
    ignore: list[str] = field(default_factory=list)  # extra gitignore-style patterns
    describe_with_model: bool = False  # opt-in: LLM-written purposes when a model is set

    @staticmethod
    def _check_ignore(patterns: list[str]) -> None:
        from pathspec import GitIgnoreSpec  # lazy: pathspec, ~12 ms, only when index.ignore is set

        for number, pattern in enumerate(patterns, start=1):
            try:
                GitIgnoreSpec.from_lines([pattern])
            except Exception as err:  # pathspec raises its own error types and ValueError/TypeError
                raise ValueError(f"entry {number}: {pattern!r} is not a gitignore pattern ({err})") from None


class MemoryConfig(_Section):
    # turns as sessions.turns counts them: one user message and everything that answered it
    compact_threshold: Annotated[int, Meta(ge=2, le=1_000_000)] = 60  # compact once this many turns are unsummarized
    keep_recent: Annotated[int, Meta(ge=1)] = 40  # the newest turns a compaction keeps verbatim
    compact_model: str = ""  # the model that writes summaries ("": the chat model, over its cached history)
    compact_fallback_model: str = ""  # tried when compact_model fails
    compact_token_ratio: Annotated[float, Meta(gt=0, le=1)] = 0.8  # compact once a request passes this share of the window
    redact_every: Annotated[int, Meta(ge=1, le=1_000_000)] = 10  # large tool outputs older than this many turns are redacted
    redact_min_chars: Annotated[int, Meta(ge=1, le=1 << 30)] = 2000  # an output this long or longer is "large"

    def _check(self) -> None:
        if self.keep_recent >= self.compact_threshold:
            raise ValueError(
                f"keep_recent ({self.keep_recent}) must be below compact_threshold "
                f"({self.compact_threshold}), or compaction can never reclaim anything"
            )

    @property
    def reclaim_warning(self) -> str | None:
        gap = self.compact_threshold - self.keep_recent
        if gap < max(5, self.compact_threshold // 5):
            return (
                f"memory.keep_recent ({self.keep_recent}) is close to compact_threshold "
                f"({self.compact_threshold}): each compaction reclaims only {gap} turns"
            )
        return None


# The permission modes (agent.modes), from the least the agent may do alone to the most: a workspace's config
# may choose one to the left of the user's, never one to the right.
PERMISSION_MODES = ("plan", "ask", "edits", "auto")


def _default_allow() -> list[str]:
    return ["git status", "git diff", "git log", "ls", "pytest", "python -m pytest", "python3 -m pytest"]


class AgentConfig(_Section):
    # argv patterns that run without asking, where a full sandbox holds (README: "Commands")
    command_allow: list[str] = field(default_factory=_default_allow)
    command_network: bool = False  # commands may reach the network (strict, as every bool here: no "yes")
    sandbox: Literal["auto", "bwrap", "landlock", "seatbelt", "off"] = "auto"  # "off": every command asks
    sandbox_hide: list[str] = field(default_factory=lambda: list(DEFAULT_HIDE))  # hidden from commands
    # secret-named environment variables commands still get (scrub.command_env leaves the rest out)
    command_env_pass: list[str] = field(default_factory=list)
    command_timeout_s: TimeLimit = 120.0  # a command is stopped after this many seconds
    # what one command may take (rlimits, in every sandbox and with none; README "What the sandbox enforces")
    command_max_processes: Annotated[int, Meta(ge=8, le=1 << 22)] = 1024
    command_max_file_mb: Annotated[int, Meta(ge=1, le=1 << 30)] = 4096  # the largest file a command may write
    command_max_memory_mb: Annotated[int, Meta(ge=64, le=1 << 30)] = 8192  # the address space of a command
    max_output_chars: Annotated[int, Meta(gt=0, le=1 << 30)] = 20_000  # a tool's output to the model is cut past this
    max_steps: Annotated[int, Meta(ge=1, le=100_000)] = 30  # model calls in one turn before it stops and asks
    auto_commit: bool = False  # commit the files each turn changed (git repositories only; never pushes)
    # how long a provider keeps the prompt cached (Anthropic's cache_control ttl; a 1h write costs 2x, 5m 1.25x)
    cache_ttl: Literal["5m", "1h"] = "5m"
    # sub-agents (the task tool, agent/subagent.py): how many of one agent's run at once, how deep they may nest
    # (1: the agent's own sub-agents start none), each one's budget, and whether one may be granted writes
    max_subagents: Annotated[int, Meta(ge=1, le=16)] = 4
    subagent_depth: Annotated[int, Meta(ge=0, le=3)] = 1  # 0: no sub-agents at all
    subagent_max_steps: Annotated[int, Meta(ge=1, le=1000)] = 12  # model calls of one sub-agent
    subagent_max_tokens: Annotated[int, Meta(ge=1000, le=100_000_000)] = 300_000  # its input + output tokens
    subagent_writes: bool = False  # a task call's `write: true` is honored only when this is true
    # what a session may cost as billed, sub-agents and compactions included: a turn stops before the request
    # that would pass it (0: no budget)
    max_budget_usd: Annotated[float, Meta(ge=0, le=1_000_000)] = 0.0
    # what the agent may do without asking (docs/usage.md "Permission modes"): ask (edits and commands ask),
    # edits (edits apply, commands ask unless allow-listed), plan (read-only, ends with a plan you approve),
    # auto (everything runs inside the sandbox without asking, no network); a workspace may only lower it
    permission_mode: Literal["ask", "edits", "plan", "auto"] = "edits"

    @staticmethod
    def _check_command_allow(entries: list[str]) -> None:
        from .sandbox.allowlist import Pattern  # lazy: ~1.5 ms, only when command_allow is set

        for number, entry in enumerate(entries, start=1):
            try:
                Pattern.parse(entry)
            except ValueError as err:
                raise ValueError(f"entry {number}: {err}") from None

    @staticmethod
    def _check_command_env_pass(names: list[str]) -> None:
        for number, name in enumerate(names, start=1):
            if not _ENV_NAME.match(name):
                raise ValueError(f"entry {number}: {name!r} is not an environment variable name")

    @staticmethod
    def _check_sandbox_hide(paths: list[str]) -> None:
        for number, path in enumerate(paths, start=1):
            if not path.startswith(("/", "~")) or "\x00" in path:
                raise ValueError(f"entry {number}: {path!r} is not an absolute path (or one starting with ~)")


class LspConfig(_Section):
    """Language servers (workstation.lsp): errors an edit introduced, real references for impact."""

    enabled: bool = True  # start language servers for the languages they serve
    timeout_s: Annotated[float, Meta(gt=0, le=600)] = 15.0  # one check or query, a first start included
    max_errors: Annotated[int, Meta(ge=1, le=1000)] = 8  # errors listed in one edit's result
    max_chars: Annotated[int, Meta(ge=100, le=100_000)] = 1200  # characters of them


class HooksConfig(_Section):
    """Hooks: programs run at the agent's events (workstation.hooks; docs/hooks.md)."""

    claude: bool = False  # read the hooks of Claude Code's settings files too (~/.claude, the workspace's .claude)
    timeout_s: TimeLimit = 600.0  # no hook runs longer than this, whatever its own timeout says


class SkillsConfig(_Section):
    """Skills and custom slash commands (workstation.skills)."""

    claude: bool = False  # read Claude Code's skills and commands folders too (~/.claude, the workspace's .claude)


class UIConfig(_Section):
    theme: str = "workstation-dark"  # the app's look: a built-in theme or one of themes/ (ctrl+p lists them)


class ImportConfig(_Section):
    # agents whose sessions of this workspace the sidecar keeps importing as they are written
    watch: list[Literal["claude-code", "codex"]] = field(default_factory=list)


class WorkspaceConfig(_Section):
    state_dir: str = ""  # where databases and sessions live; default <root>/.workstation

    @staticmethod
    def _check_state_dir(value: str) -> None:
        if "\x00" in value:
            raise ValueError("contains a NUL character")


_SERVER_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_)){0,31}$")  # no "__": it separates NAME__tool
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")  # ${VAR}: a value read from our environment at start
_SECRET_NAME = re.compile(r"(?:^|[_-])(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|AUTH|AUTHORIZATION)$|API_?KEY",
                          re.IGNORECASE)


class McpServerConfig(_Section):
    """One MCP server whose tools the agent may call (as NAME__tool): a stdio command or an HTTP url.

    A stdio server gets only the environment named here (plus PATH, HOME and the like), never ours
    whole; values may read ours as ${VAR}. A secret (an env variable or header whose name looks
    secret) must be such a reference: keys never go in config files."""

    command: str = ""  # the program of a stdio server
    args: list[str] = field(default_factory=list)  # its arguments
    env: dict[str, str] = field(default_factory=dict)  # its environment (values may be ${VAR})
    url: str = ""  # a streamable HTTP server
    headers: dict[str, str] = field(default_factory=dict)  # HTTP headers (values may be ${VAR})
    trusted: bool = False  # its calls run without asking
    trusted_tools: list[str] = field(default_factory=list)  # these (the server's own names) run without asking
    startup_timeout_s: TimeLimit = 30.0  # the server must list its tools within this
    timeout_s: TimeLimit = 60.0  # one tool call

    def _check(self) -> None:
        if bool(self.command) == bool(self.url):
            raise ValueError("give either command (a stdio server) or url (a streamable HTTP server)")
        if self.url and not re.match(r"^https?://[^\s/]+", self.url):
            raise ValueError(f"url must be http://... or https://..., got {self.url!r}")
        if self.url and (self.args or self.env):
            raise ValueError("args and env are for a stdio server (command), not a url")
        if self.command and self.headers:
            raise ValueError("headers are for a url server, not a stdio command")
        for what, values in (("env", self.env), ("headers", self.headers)):
            for key, value in values.items():
                if what == "env" and not _ENV_NAME.match(key):
                    raise ValueError(f"env: {key!r} is not an environment variable name")
                if _SECRET_NAME.search(key) and value and not _ENV_REF.search(value):
                    raise ValueError(f"{what}.{key} looks secret: keep the value in an environment variable "
                                     f"and write \"${{VAR}}\" here")


class McpConfig(_Section):
    servers: dict[str, McpServerConfig] = field(default_factory=dict)  # [mcp.servers.NAME] tables, below

    @staticmethod
    def _check_servers(servers: dict[str, McpServerConfig]) -> None:
        for name in servers:
            if not _SERVER_NAME.match(name):
                raise ValueError(f"server name {name!r}: use letters, digits, '-' or single '_' (at most 32)")


_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost", ""})
_WEAK_SSL = frozenset({"disable", "allow", "prefer", "require", "verify-ca"})


def team_url_parts(url: str):
    """`url` split (urllib), for the checks below and for workstation.team.server."""
    parts = urlsplit(url)
    return parts, {k: v[-1] for k, v in parse_qs(parts.query).items()}


def is_loopback(host: str) -> bool:
    """A host the traffic to which never leaves this machine (a unix socket folder counts)."""
    return host in _LOOPBACK or host.startswith("/") or host.startswith("127.")


class TeamConfig(_Section):
    """A team's memory on PostgreSQL (workstation.team; README "Team memory"). Off while url is empty."""

    url: str = ""  # postgresql://user@host:port/db, never with a password
    password_env: str = ""  # the variable holding the password; else libpq's PGPASSWORD or ~/.pgpass
    project: str = ""  # the shared project's name: one server holds many
    share: list[Literal["events", "decisions", "ltm", "sessions"]] = field(
        default_factory=lambda: ["events", "decisions", "ltm"])  # what leaves this machine
    # teammates whose decisions and LTM enter the model's context without accepting each item: read only
    # from the user's own config (workstation.trust NEVER), so a repository cannot vouch for anyone
    accept_authors: list[str] = field(default_factory=list)
    private_namespaces: list[str] = field(default_factory=lambda: ["private"])  # LTM that stays local
    push_every_s: Annotated[float, Meta(ge=1, le=DAY_S)] = 5.0  # the sidecar's push interval

    @staticmethod
    def _check_url(url: str) -> None:
        if not url:
            return
        parts, query = team_url_parts(url)
        if parts.scheme not in ("postgresql", "postgres"):
            raise ValueError(f"must be a postgresql:// URL, got {url.split(':', 1)[0]!r}")
        if parts.password is not None or "password" in query:
            raise ValueError("must not hold a password: put it in the variable named by team.password_env, "
                             "or in PGPASSWORD or ~/.pgpass")
        host = query.get("host", parts.hostname or "")
        if not is_loopback(host) and query.get("sslmode", "verify-full") in _WEAK_SSL:
            raise ValueError(f"sslmode={query['sslmode']} to {host}: a host other than loopback needs "
                             "sslmode=verify-full (TLS with the certificate and host name checked)")

    @staticmethod
    def _check_password_env(name: str) -> None:
        if name and not _ENV_NAME.match(name):
            raise ValueError(f"{name!r} is not an environment variable name")

    def _check(self) -> None:
        if self.url and not self.project.strip():
            raise ValueError("team.url is set: give team.project too (the shared project's name)")

    @property
    def enabled(self) -> bool:
        return bool(self.url)


class Config(_Section):
    model: ModelConfig = field(default_factory=ModelConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    ui: UIConfig = field(default_factory=UIConfig)
    workspace: WorkspaceConfig = field(default_factory=WorkspaceConfig)
    import_: ImportConfig = field(default_factory=ImportConfig, name="import")  # [import] in the file
    mcp: McpConfig = field(default_factory=McpConfig)
    team: TeamConfig = field(default_factory=TeamConfig)
    lsp: LspConfig = field(default_factory=LspConfig)
    hooks: HooksConfig = field(default_factory=HooksConfig)
    skills: SkillsConfig = field(default_factory=SkillsConfig)


# ---------------------------------------------------------------- checking, key by key

_BAD = object()  # a value that did not convert; its problem is already listed


@cache
def _fields(cls: type) -> dict[str, msgspec.structs.FieldInfo]:
    """A section's fields by attribute name (`import_`)."""
    return {info.name: info for info in msgspec.structs.fields(cls)}


@cache
def _keys(cls: type) -> dict[str, msgspec.structs.FieldInfo]:
    """A section's fields by the key a file writes (`import`)."""
    return {info.encode_name: info for info in msgspec.structs.fields(cls)}


def _convert(kind: Any, value: Any, where: str, problems: list[str],
             check: Callable[[Any], None] | None = None) -> Any:
    """`value` as `kind`, checked by msgspec and then by `check`, or _BAD once a line per problem is added
    to `problems` (`where` is the dotted key). Sections and tables are walked key by key, so that one bad
    key hides no other; a table's `check` sees the items that converted."""
    before = len(problems)
    if isinstance(kind, type) and issubclass(kind, _Section) and isinstance(value, dict):
        result = _section(kind, value, where, problems)
    elif get_origin(kind) is dict and isinstance(value, dict):
        key_kind, value_kind = get_args(kind)
        result = {}
        for key, item in value.items():
            item = _convert(value_kind, item, f"{where}.{key}", problems)
            key = _convert(key_kind, key, where, problems)
            if key is not _BAD and item is not _BAD:
                result[key] = item
    else:
        try:
            result = msgspec.convert(value, kind, strict=True)
        except msgspec.ValidationError as err:
            problems.append(_problem(where, err, kind))
            return _BAD
    if check is not None and result is not _BAD:
        try:
            check(result)
        except ValueError as err:
            problems.append(f"{where}: {err}")
    return _BAD if len(problems) > before else result


def _section(cls: type[_Section], data: dict, where: str, problems: list[str]) -> Any:
    keys = _keys(cls)
    before = len(problems)
    values = {}
    for key, value in data.items():
        here = f"{where}.{key}" if where else str(key)
        info = keys.get(key)
        if info is None:
            problems.append(f"{here}: unknown key")
            continue
        values[info.name] = _convert(info.type, value, here, problems, getattr(cls, f"_check_{info.name}", None))
    if len(problems) > before:
        return _BAD
    try:
        return cls(**values)  # runs _check()
    except ValueError as err:
        problems.append(f"{where or '(top level)'}: {err}")
        return _BAD


def _problem(where: str, err: msgspec.ValidationError, kind: Any) -> str:
    """msgspec's message as `dotted.key: message` ("Expected `int` <= 256 - at `$[0]`" at `where`)."""
    message, _, path = str(err).partition(" - at `$")
    key = (where + re.sub(r"\[(\d+)\]", r".\1", path.rstrip("`"))).lstrip(".") or "(top level)"
    if message.startswith("Invalid enum value") and (choices := _choices(kind)):
        message += f" (choose {' or '.join(map(repr, choices))})"
    return f"{key}: {message}"


def _choices(kind: Any) -> tuple:
    """The values of the Literal inside `kind` (list[Literal["a", "b"]] -> ("a", "b"))."""
    if get_origin(kind) is Literal:
        return get_args(kind)
    for arg in get_args(kind):
        if found := _choices(arg):
            return found
    return ()


# ---------------------------------------------------------------- loading

def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as err:
        raise ConfigError([f"{path}: not valid TOML: {err}"]) from None
    except UnicodeDecodeError as err:
        raise ConfigError([f"{path}: not UTF-8 text (byte {err.object[err.start]:#04x} at offset {err.start})"]) from None
    except RecursionError:
        raise ConfigError([f"{path}: not valid TOML: arrays or tables nested too deeply"]) from None
    except OSError as err:
        raise ConfigError([f"{path}: cannot read: {err.strerror}"]) from None


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def validate(data: dict[str, Any], source: str = "config") -> Config:
    """`data` as a Config, or ConfigError with one line per problem, each naming `source` and the key."""
    problems: list[str] = []
    config = _convert(Config, data, "", problems)
    if problems:
        raise ConfigError([f"{source}: {problem}" for problem in problems])
    return config


# Budgets and limits (section -> keys): a workspace's config may lower the user's, never raise them (a
# bigger one costs the user time or money: more model calls, longer waits, more output in each request).
BUDGETS: dict[str, tuple[str, ...]] = {
    "model": ("timeout_s", "max_retries"),
    "index": ("max_file_bytes",),
    "agent": ("command_timeout_s", "max_output_chars", "max_steps", "command_max_processes", "command_max_file_mb",
              "command_max_memory_mb", "max_subagents", "subagent_depth", "subagent_max_steps", "subagent_max_tokens",
              "max_budget_usd"),
    "lsp": ("timeout_s", "max_errors", "max_chars"),
}


NO_LIMIT_AT_ZERO = frozenset({"max_budget_usd"})


class _Layers:
    """The workspace's probe paths, the user's config (as a layer and validated), the workspace's layer,
    the files read, and why the workspace's file could not be read ("" when it could)."""

    def __init__(self, root: str | os.PathLike):
        self.probe = Paths.for_root(root)
        self.user = _read_toml(self.probe.user_config_file)
        self.user_config = validate(self.user, str(self.probe.user_config_file))
        try:
            self.own = _read_toml(self.probe.config_file)
            self.unreadable = ""
        except ConfigError as err:
            self.own, self.unreadable = {}, "; ".join(err.lines)
        self.sources = [str(path) for path, layer in ((self.probe.user_config_file, self.user),
                                                      (self.probe.config_file, self.own)) if layer]

    def check(self) -> None:
        """ConfigError unless the workspace's file reads and validates over the user's (one line a key)."""
        if self.unreadable:
            raise ConfigError([self.unreadable])
        if self.own:
            validate(_merge(self.user, self.own), str(self.probe.config_file))

    def usable(self, layer: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """`layer` (what of the workspace's config would apply untrusted) less every key that does not
        validate over the user's config, and those keys' problems: an untrusted folder's typo is ignored,
        never a lockout."""
        kept: dict[str, Any] = {}
        problems: list[str] = []
        for section, body in layer.items():
            if isinstance(body, dict):  # a section valid as a whole is kept whole: keys that only hold together
                try:  # (keep_recent below compact_threshold) are not judged one at a time
                    validate(_merge(self.user, _merge(kept, {section: body})), "")
                except ConfigError:
                    pass
                else:
                    kept[section] = dict(body)
                    continue
            for key, value in body.items() if isinstance(body, dict) else ():
                trial = _merge(self.user, _merge(kept, {section: {key: value}}))
                try:
                    validate(trial, "")
                except ConfigError as err:
                    problems += [line.removeprefix(": ") for line in err.lines]
                    continue
                kept.setdefault(section, {})[key] = value
        return kept, problems


def _lowered(applied: dict[str, Any], user: "Config") -> tuple[dict[str, Any], list[str]]:
    """`applied` (the workspace's layer) with each budget above the user's own (BUDGETS) held at the user's,
    and one phrase for each one held."""
    held = []
    out = {section: dict(body) if isinstance(body, dict) else body for section, body in applied.items()}
    for section, keys in BUDGETS.items():
        body = out.get(section)
        if not isinstance(body, dict):
            continue
        for key in keys:
            mine = getattr(getattr(user, section), key)
            theirs = body.get(key)
            if not isinstance(theirs, (int, float)) or isinstance(theirs, bool):
                continue
            if key in NO_LIMIT_AT_ZERO:  # 0 is no budget at all: any other is lower, and 0 the highest
                higher = (theirs or float("inf")) > (mine or float("inf"))
            else:
                higher = theirs > mine
            if higher:
                body[key] = mine
                held.append(f"{section}.{key} = {theirs} (yours: {mine})")
    agent = out.get("agent")
    theirs = agent.get("permission_mode") if isinstance(agent, dict) else None
    mine = user.agent.permission_mode
    if isinstance(agent, dict) and theirs in PERMISSION_MODES and \
            PERMISSION_MODES.index(theirs) > PERMISSION_MODES.index(mine):
        agent["permission_mode"] = mine  # the workspace may ask for less freedom, never more
        held.append(f"agent.permission_mode = {theirs!r} (yours: {mine!r})")
    if isinstance(agent, dict) and isinstance(agent.get("sandbox_hide"), list):
        # a workspace hides more, never less: only the user's own config un-hides what the defaults hide
        agent["sandbox_hide"] = list(dict.fromkeys([*user.agent.sandbox_hide, *agent["sandbox_hide"]]))
    return out, held


def inspect(root: str | os.PathLike) -> tuple[Trust, Split]:
    """What trust decides for the workspace at `root`, and its config's keys split (workstation trust, the
    app's question). A workspace config that cannot be read splits as an empty one."""
    layers = _Layers(root)
    return trust_mod.decide(layers.probe.root, layers.own)


def check_workspace(root: str | os.PathLike) -> None:
    """ConfigError naming each problem of the workspace's own config (before the user trusts it)."""
    _Layers(root).check()


def load(root: str | os.PathLike, overrides: dict[str, Any] | None = None) -> tuple[Config, Paths]:
    """Load and validate configuration for a workspace; returns it with its paths.

    The workspace's own config applies as far as trust allows (workstation.trust): its safe keys
    always, its trust-gated keys once the user trusts the folder, its endpoint and key names never.
    What was left out is one warning line."""
    layers = _Layers(root)
    probe, data, sources = layers.probe, layers.user, layers.sources
    verdict, parts = trust_mod.decide(probe.root, layers.own)
    if verdict.trusted:
        layers.check()  # the user's word: an error in it is theirs to fix, as in their own config
    user_ignore = data.get("index", {}).get("ignore", []) if isinstance(data.get("index"), dict) else []
    applied = parts.applied(verdict.trusted, user_ignore)
    invalid: list[str] = [layers.unreadable] if layers.unreadable else []
    if not verdict.trusted:
        applied, problems = layers.usable(applied)
        invalid += problems
    applied, held = _lowered(applied, layers.user_config)
    verdict = dataclasses.replace(verdict, invalid=tuple(invalid), held=tuple(held))
    data = _merge(data, applied)
    if notice := verdict.notice():
        warnings.warn(notice, stacklevel=2)
    if env_model := os.environ.get("WORKSTATION_MODEL"):
        data = _merge(data, {"model": {"name": env_model}})
    if overrides:
        data = _merge(data, overrides)
    config = validate(data, " + ".join(sources) or "config")
    if verdict.trusted:  # the commands the user chose to always allow here (trust.allow_always)
        from .sandbox.allowlist import Pattern  # lazy: ~1.5 ms, only for a trusted folder

        for entry in trust_mod.always_allowed(probe.root):
            try:
                Pattern.parse(entry)
            except ValueError as err:  # edited by hand into something that is not an entry
                warnings.warn(f"trust record: always-allowed command skipped: {err}", stacklevel=2)
                continue
            if entry not in config.agent.command_allow:
                config.agent.command_allow.append(entry)
    if warning := config.memory.reclaim_warning:
        warnings.warn(warning, stacklevel=2)
    paths = Paths.for_root(probe.root, config.workspace.state_dir or None, trusted=verdict.trusted)
    return config, paths
