import os
import warnings
from pathlib import Path

import pytest

from workstation import config
from support.trust_support import trust
from workstation.errors import ConfigError


def write(root, text):
    (root / ".workstation").mkdir(exist_ok=True)
    (root / ".workstation" / "config.toml").write_text(text)


def trusted(root, text):
    """The folder's config, trusted as written: its problems are then the user's to fix, each one line (an
    untrusted folder's are ignored, test_an_untrusted_folders_typo_is_ignored_with_one_line)."""
    write(root, text)
    trust(root)


def test_defaults(tmp_path):
    cfg, paths = config.load(tmp_path)
    assert cfg.memory.compact_threshold == 60 and cfg.memory.keep_recent == 40
    assert paths.state == tmp_path.resolve() / ".workstation"


def test_workspace_over_user(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[model]\nname = "user-model"\ntimeout_s = 5\n')
    monkeypatch.setenv("WORKSTATION_HOME", str(home))
    ws = tmp_path / "ws"
    ws.mkdir()
    write(ws, '[model]\nname = "ws-model"\ncontext_window = 4096\nmax_output_tokens = 100000000\n')
    with pytest.warns(UserWarning, match=r"not trusted: ignored model.name.*max_output_tokens.*workstation trust"):
        cfg, _ = config.load(ws)
    assert cfg.model.name == "user-model" and cfg.model.context_window == 4096  # a safe key applies untrusted
    assert cfg.model.max_output_tokens == 0  # it would let a stream run on: gated
    trust(ws)
    cfg, _ = config.load(ws)
    assert cfg.model.name == "ws-model" and cfg.model.timeout_s == 5 and cfg.model.max_output_tokens == 100_000_000
    monkeypatch.setenv("WORKSTATION_MODEL", "env-model")
    assert config.load(ws)[0].model.name == "env-model"


def test_each_bad_key_gets_one_line(tmp_path):
    trusted(tmp_path, '[memory]\ncompact_threshold = "lots"\nbogus = 1\n[nope]\nx = 1\n')
    with pytest.raises(ConfigError) as err:
        config.load(tmp_path)
    lines = err.value.lines
    assert len(lines) == 3, lines
    assert any("memory.compact_threshold" in line for line in lines)
    assert any("memory.bogus: unknown key" in line for line in lines)
    assert any("nope: unknown key" in line for line in lines)
    assert all("config.toml" in line and "\n" not in line for line in lines)


def test_malformed_toml(tmp_path):
    trusted(tmp_path, "[memory\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        config.load(tmp_path)


def test_keep_recent_must_be_below_threshold(tmp_path):
    trusted(tmp_path, "[memory]\ncompact_threshold = 40\nkeep_recent = 40\n")
    with pytest.raises(ConfigError, match="keep_recent .40. must be below compact_threshold"):
        config.load(tmp_path)


def test_small_gap_warns(tmp_path):
    write(tmp_path, "[memory]\ncompact_threshold = 60\nkeep_recent = 55\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cfg, _ = config.load(tmp_path)
    assert cfg.memory.keep_recent == 55
    assert any("reclaims only 5 turns" in str(w.message) for w in caught)


def test_state_dir_override(tmp_path):
    write(tmp_path, '[workspace]\nstate_dir = "elsewhere/state"\n')
    trust(tmp_path)
    _, paths = config.load(tmp_path)
    assert paths.state == tmp_path.resolve() / "elsewhere" / "state"
    assert paths.config_file == tmp_path.resolve() / ".workstation" / "config.toml"


def test_cli_reports_bad_config_in_one_line_per_key(tmp_path):
    import subprocess
    import sys

    trusted(tmp_path, "[memory]\nkeep_recent = 70\n")
    proc = subprocess.run([sys.executable, "-m", "workstation", "-C", str(tmp_path), "memory", "list",
                           "--tier", "ltm"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "keep_recent (70) must be below" in proc.stderr


def test_mcp_servers_are_checked_key_by_key(tmp_path):
    trusted(tmp_path, '[mcp.servers.both]\ncommand = "x"\nurl = "http://127.0.0.1:1/mcp"\n'
                    '[mcp.servers.web]\nurl = "ftp://host/mcp"\n'
                    '[mcp.servers.keyed]\ncommand = "x"\nenv = { GITHUB_TOKEN = "ghp_literal_value" }\n'
                    '[mcp.servers.typo]\ncommand = "x"\ntrusted_tool = ["a"]\n'
                    '[mcp.servers.args]\ncommand = "x"\nargs = [1]\n')
    with pytest.raises(ConfigError) as err:
        config.load(tmp_path)
    lines = err.value.lines
    assert len(lines) == 5, lines
    assert any("mcp.servers.both: give either command" in line for line in lines)
    assert any("mcp.servers.web: url must be http" in line for line in lines)
    assert any("mcp.servers.keyed: env.GITHUB_TOKEN looks secret" in line for line in lines)
    assert any("mcp.servers.typo.trusted_tool: unknown key" in line for line in lines)
    assert any("mcp.servers.args.args.0" in line for line in lines)
    trusted(tmp_path, '[mcp.servers."two__parts"]\ncommand = "x"\n')
    with pytest.raises(ConfigError, match="server name 'two__parts'"):
        config.load(tmp_path)
    write(tmp_path, '[mcp.servers.gh]\ncommand = "npx"\nenv = { GITHUB_TOKEN = "${GITHUB_TOKEN}" }\n'
                    '[mcp.servers.web]\nurl = "https://example.com/mcp"\nheaders = { Authorization = "Bearer ${TOKEN}" }\n'
                    'trusted = true\n')
    trust(tmp_path)
    servers = config.load(tmp_path)[0].mcp.servers
    assert servers["gh"].env == {"GITHUB_TOKEN": "${GITHUB_TOKEN}"} and servers["web"].trusted


def test_every_problem_is_reported_even_beside_a_bad_table(tmp_path):
    trusted(tmp_path, '[mcp.servers."two__parts"]\ncommand = "x"\n[mcp.servers.bad]\ncommand = 1\n'
                    '[model]\ntimeout_s = 0\nmax_retries = 99\n[memory]\nkeep_recent = "x"\n[import]\nwatch = [1]\n')
    with pytest.raises(ConfigError) as err:
        config.load(tmp_path)
    assert [line.split(": ", 1)[1] for line in err.value.lines] == [
        "mcp.servers.bad.command: Expected `str`, got `int`",
        "mcp.servers: server name 'two__parts': use letters, digits, '-' or single '_' (at most 32)",
        "model.timeout_s: Expected `float` > 0.0",
        "model.max_retries: Expected `int` <= 10",
        "memory.keep_recent: Expected `int`, got `str`",
        "import.watch.0: Expected `str`, got `int`",
    ]


def test_a_changed_copy_is_checked_as_loading_checks_it(tmp_path):
    """Code changes copies of the config (the verifier, compaction's model): a change that loading would
    refuse is refused, and the setting keeps its value."""
    import copy

    cfg, _ = config.load(tmp_path)
    changed = copy.deepcopy(cfg)
    changed.model.name = changed.memory.compact_model = "openai/gpt-4o-mini"
    changed.model.fallbacks = []
    changed.memory = {"compact_threshold": 80, "keep_recent": 20}
    assert changed.memory.keep_recent == 20 and cfg.model.name == "" and cfg.memory.keep_recent == 40
    for section, key, value, says in (
        (changed.memory, "keep_recent", 80, "MemoryConfig.keep_recent: keep_recent .80. must be below"),
        (changed.model, "timeout_s", float("inf"), "ModelConfig.timeout_s: Expected `float` <= 86400.0"),
        (changed.model, "timeout_s", float("nan"), "ModelConfig.timeout_s: Expected `float` > 0.0"),
        (changed.agent, "auto_commit", "yes", "AgentConfig.auto_commit: Expected `bool`, got `str`"),
        (changed.index, "ignore", ["build/", "\\"], "IndexConfig.ignore: entry 2"),
        (changed.workspace, "state_dir", "a\x00b", "contains a NUL character"),
        (changed, "mcp", {"servers": {"x": {"url": "ftp://h"}}}, "mcp.servers.x: url must be http"),
    ):
        before = getattr(section, key)
        with pytest.raises(ConfigError, match=says):
            setattr(section, key, value)
        assert getattr(section, key) == before
    with pytest.raises(AttributeError):
        changed.model.nmae = "typo"


@pytest.mark.parametrize("body, expected", [
    (b'[model]\nname = "\xff\xfe"\n', "not UTF-8 text (byte 0xff at offset 16)"),
    (b"[model]\nname = " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested too deeply"),
    (b"[model]\ntimeout_s = nan\n", "model.timeout_s: Expected `float` > 0.0"),
    (b"[agent]\ncommand_timeout_s = inf\n", "agent.command_timeout_s: Expected `float` <= 86400.0"),
    (b"[model]\ntimeout_s = 1e300\n", "model.timeout_s: Expected `float` <= 86400.0"),
    (b"[memory]\ncompact_threshold = 9999999999999999999\n", "memory.compact_threshold: Expected `int` <= 1000000"),
    (b"[index]\nworkers = 999999999\n", "index.workers: Expected `int` <= 256"),
    (b'[mcp.servers.x]\ncommand = "x"\ntimeout_s = inf\n', "mcp.servers.x.timeout_s: Expected `float` <= 86400.0"),
    (b'[agent]\nsandbox = "docker"\n', "agent.sandbox: Invalid enum value 'docker' (choose 'auto' or 'bwrap' or"),
    (b'[index]\nignore = ["build/", "\\\\"]\n', "index.ignore: entry 2: '\\\\' is not a gitignore pattern"),
    (b'[workspace]\nstate_dir = "a\\u0000b"\n', "workspace.state_dir: contains a NUL character"),
])
def test_hostile_config_is_one_line(tmp_path, body, expected):
    (tmp_path / ".workstation").mkdir()
    (tmp_path / ".workstation" / "config.toml").write_bytes(body)
    trust(tmp_path)
    with pytest.raises(ConfigError) as err:
        config.load(tmp_path)
    assert len(err.value.lines) == 1 and expected in err.value.lines[0], err.value.lines


@pytest.mark.parametrize("state_dir, expected", [
    ("/", "holds the workspace itself"),
    (".", "holds the workspace itself"),
    ("..", "holds the workspace itself"),
    (".git/state", "is inside .git"),
])
def test_state_dir_may_not_swallow_the_workspace_or_git(tmp_path, state_dir, expected):
    from workstation.errors import WorkstationError

    write(tmp_path, f'[workspace]\nstate_dir = "{state_dir}"\n')
    trust(tmp_path)
    with pytest.raises(WorkstationError, match=expected):
        config.load(tmp_path)


def test_state_dir_that_cannot_be_a_folder_is_one_line(tmp_path):
    from workstation import runtime
    from workstation.errors import WorkstationError

    (tmp_path / "afile").write_text("x")
    for state_dir, expected in (("afile", "exists and is not a folder"),
                                ("afile/sub", "cannot be created: Not a directory")):
        write(tmp_path, f'[workspace]\nstate_dir = "{state_dir}"\n')
        trust(tmp_path)
        with pytest.raises(WorkstationError, match=expected):
            runtime.Workspace(tmp_path)
    assert (tmp_path / "afile").read_text() == "x"


def test_a_line_of_the_ignore_file_that_is_no_pattern_is_named_and_left_out(tmp_path):
    from workstation.runtime import Workspace

    (tmp_path / ".workstation").mkdir()
    (tmp_path / ".workstation" / "ignore").write_text("build/\n\\\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "out.py").write_text("x = 1\n")
    (tmp_path / "keep.py").write_text("y = 2\n")
    trust(tmp_path)  # the folder's own ignore file is read only in a trusted workspace
    said = []
    ws = Workspace(tmp_path, on_warning=said.append)
    try:
        ws.kmap.index_all()
        assert said == [".workstation/ignore: '\\\\' is not a gitignore pattern; left out"]
        assert [f.path for f in ws.kmap.files()] == ["keep.py"]  # the good pattern still applies
    finally:
        ws.close()


# --------------------------------------------------------------------------- a workspace's config, issue 29
def _notice(caught) -> str:
    lines = [str(w.message) for w in caught if "workspace" in str(w.message)]
    assert len(lines) == 1, lines
    return lines[0]


def test_an_untrusted_folders_typo_is_ignored_with_one_line(tmp_path):
    """A typo in a cloned repository's config no longer locks the user out: its invalid keys are left out in
    the same one line as its gated keys; the valid safe keys still apply. Once trusted, the typo is the
    user's to fix (an error, as in their own config)."""
    from workstation.runtime import Workspace

    for text, says in (('[agent]\nmax_steps = "many"\ncommand_timeout_s = 30\n[memory]\nbogus = 1\n',
                        "agent.max_steps: Expected `int`, got `str`"),
                       ("[agent\nmax_steps = 3\n", "not valid TOML"),
                       ("[memory]\ncompact_threshold = 40\nkeep_recent = 40\n", "keep_recent (40) must be below")):
        write(tmp_path, text)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cfg, _ = config.load(tmp_path)
        line = _notice(caught)
        assert says in line and "\n" not in line, line
        assert cfg.agent.max_steps == 30  # the user's (the default)
        if "command_timeout_s" in text:
            assert cfg.agent.command_timeout_s == 30  # the valid safe key still applies
            assert "memory.bogus" in line
        Workspace(tmp_path).close()  # every command opens the folder
    trust(tmp_path)
    with pytest.raises(ConfigError, match="keep_recent .40. must be below"):
        config.load(tmp_path)


def test_a_workspace_lowers_the_users_budgets_never_raises_them(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[agent]\nmax_steps = 40\n[lsp]\ntimeout_s = 20\n")
    monkeypatch.setenv("WORKSTATION_HOME", str(home))
    ws = tmp_path / "ws"
    ws.mkdir()
    write(ws, "[agent]\nmax_steps = 100000\ncommand_timeout_s = 86400\nmax_output_chars = 5\n"
              "subagent_max_steps = 1000\ncommand_max_memory_mb = 1048576\n"
              "[lsp]\ntimeout_s = 600\nmax_errors = 1000\n[model]\ntimeout_s = 3\nmax_retries = 10\n")
    for trusted_now in (False, True):
        if trusted_now:
            trust(ws)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cfg, _ = config.load(ws)
        agent, lsp, model = cfg.agent, cfg.lsp, cfg.model
        assert (agent.max_steps, agent.command_timeout_s, lsp.timeout_s, lsp.max_errors, model.max_retries) == (
            40, 120.0, 20.0, 8, 2)  # the user's own, or the default where they set none
        assert (agent.max_output_chars, model.timeout_s) == (5, 3.0)  # lowered: applies
        assert (agent.subagent_max_steps, agent.command_max_memory_mb) == (12, 8192)  # gated, and held once trusted
        line = _notice(caught)
        assert "agent.max_steps = 100000 (yours: 40)" in line and "lsp.timeout_s = 600 (yours: 20.0)" in line


def test_a_trusted_workspace_hides_more_from_commands_never_less(tmp_path, monkeypatch):
    """A trusted repository's `sandbox_hide` adds to what the sandbox hides; it cannot un-hide the
    credentials the defaults hide. Only the user's own config can."""
    from workstation.sandbox import DEFAULT_HIDE, Policy

    ws = tmp_path / "ws"
    ws.mkdir()
    write(ws, '[agent]\nsandbox_hide = ["~/.my-project-secrets"]\n')
    trust(ws)
    cfg, paths = config.load(ws)
    assert cfg.agent.sandbox_hide == [*DEFAULT_HIDE, "~/.my-project-secrets"]
    hidden = Policy.for_workspace(paths, cfg.agent).hide
    assert Path(os.path.realpath(os.path.expanduser("~/.ssh"))) in hidden
    write(ws, "[agent]\nsandbox_hide = []\n")
    trust(ws)
    assert config.load(ws)[0].agent.sandbox_hide == list(DEFAULT_HIDE)
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[agent]\nsandbox_hide = ["~/.ssh"]\n')  # the user's own choice
    monkeypatch.setenv("WORKSTATION_HOME", str(home))
    trust(ws)
    assert config.load(ws)[0].agent.sandbox_hide == ["~/.ssh"]
