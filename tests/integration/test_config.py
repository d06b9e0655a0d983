import warnings

import pytest

from workstation import config
from trust_support import trust
from workstation.errors import ConfigError


def write(root, text):
    (root / ".workstation").mkdir(exist_ok=True)
    (root / ".workstation" / "config.toml").write_text(text)


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
    write(tmp_path, '[memory]\ncompact_threshold = "lots"\nbogus = 1\n[nope]\nx = 1\n')
    with pytest.raises(ConfigError) as err:
        config.load(tmp_path)
    lines = err.value.lines
    assert len(lines) == 3, lines
    assert any("memory.compact_threshold" in line for line in lines)
    assert any("memory.bogus: unknown key" in line for line in lines)
    assert any("nope: unknown key" in line for line in lines)
    assert all("config.toml" in line and "\n" not in line for line in lines)


def test_malformed_toml(tmp_path):
    write(tmp_path, "[memory\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        config.load(tmp_path)


def test_keep_recent_must_be_below_threshold(tmp_path):
    write(tmp_path, "[memory]\ncompact_threshold = 40\nkeep_recent = 40\n")
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

    write(tmp_path, "[memory]\nkeep_recent = 70\n")
    proc = subprocess.run([sys.executable, "-m", "workstation", "-C", str(tmp_path), "memory", "list",
                           "--tier", "ltm"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "keep_recent (70) must be below" in proc.stderr


def test_mcp_servers_are_checked_key_by_key(tmp_path):
    write(tmp_path, '[mcp.servers.both]\ncommand = "x"\nurl = "http://127.0.0.1:1/mcp"\n'
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
    write(tmp_path, '[mcp.servers."two__parts"]\ncommand = "x"\n')
    with pytest.raises(ConfigError, match="server name 'two__parts'"):
        config.load(tmp_path)
    write(tmp_path, '[mcp.servers.gh]\ncommand = "npx"\nenv = { GITHUB_TOKEN = "${GITHUB_TOKEN}" }\n'
                    '[mcp.servers.web]\nurl = "https://example.com/mcp"\nheaders = { Authorization = "Bearer ${TOKEN}" }\n'
                    'trusted = true\n')
    trust(tmp_path)
    servers = config.load(tmp_path)[0].mcp.servers
    assert servers["gh"].env == {"GITHUB_TOKEN": "${GITHUB_TOKEN}"} and servers["web"].trusted


def test_every_problem_is_reported_even_beside_a_bad_table(tmp_path):
    write(tmp_path, '[mcp.servers."two__parts"]\ncommand = "x"\n[mcp.servers.bad]\ncommand = 1\n'
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
