"""The allow-list's argv patterns: what the defaults still cover, and each argument that reaches outside."""

import pytest

from workstation.sandbox.allowlist import Pattern, allowed, check
from workstation.config import AgentConfig

DEFAULTS = AgentConfig().command_allow


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text("x = 1\n")
    (root / ".workstation").mkdir()
    (tmp_path / "outside").mkdir()
    (root / "out-link").symlink_to(tmp_path / "outside")
    return root


@pytest.mark.parametrize("cmd", [
    "git status", "git status --short -b", "git diff", "git diff HEAD~1 -- pkg/a.py", "git diff --stat main",
    "git log --oneline -n 5", "git log -p -3 pkg", "git log --format=%H --since=2.weeks", "ls", "ls -la pkg",
    "pytest", "pytest -q -x pkg/a.py", "pytest -k 'parse and not slow' -vv", "python -m pytest -q",
    "python -m pytest -x pkg", "pytest pkg/a.py::test_one --tb=short -p no:cacheprovider",
])
def test_the_defaults_keep_ordinary_commands_usable(ws, cmd):
    assert check(cmd, DEFAULTS, ws) is None


@pytest.mark.parametrize("cmd,named", [
    ("git log --output=.workstation/config.toml", "--output"),  # widens the allow-list
    ("git log --outp=.workstation/config.toml", "--output"),  # git accepts abbreviations
    ("git log --output=notes.txt", "--output"),  # refused whatever the value: a pattern must name it
    ("git diff --no-index ../outside/secret.txt pkg/a.py", "--no-index"),
    ("git diff --ext-diff", "--ext-diff"),
    ("git diff -O/etc/passwd", "-O"),
    ("pytest --basetemp=/tmp/victim", "--basetemp"),
    ("pytest --basetemp /tmp/victim", "--basetemp"),
    ("pytest --junitxml=../report.xml", "--junitxml"),
    ("pytest --rootdir=/", "--rootdir"),
    ("pytest -o cache_dir=/tmp/c", "-o"),
    ("pytest -vo cache_dir=/tmp/c", "-o"),  # a bundle is its letters
    ("pytest -c /tmp/evil.ini", "-c"),
    ("python -m pytest --basetemp=/tmp/x", "--basetemp"),
    ("pytest @args.txt", "argument file"),
    ("ls /etc", "outside the workspace"),
    ("ls ../outside", "outside the workspace"),
    ("ls out-link", "outside the workspace"),  # a symlink out
    ("ls pkg/../../outside", "outside the workspace"),
    ("ls .workstation", "state folder"),
    ("git diff HEAD -- /etc/passwd", "outside the workspace"),
    ("git log --since=/etc", "outside the workspace"),  # option values are paths too
])
def test_arguments_that_write_or_reach_outside_are_asked_about(ws, cmd, named):
    reason = check(cmd, DEFAULTS, ws)
    assert reason is not None and named in reason and "\n" not in reason


def test_prefixes_no_longer_cover_other_commands(ws):
    assert check("git push", DEFAULTS, ws) == "not on agent.command_allow"
    assert check("git -c core.fsmonitor=x status", DEFAULTS, ws) == "not on agent.command_allow"
    assert check("git -C /etc status", DEFAULTS, ws) == "not on agent.command_allow"
    assert "shell syntax" in check("git status; rm -rf /", DEFAULTS, ws)


def test_a_pattern_names_what_it_allows(ws):
    assert allowed("pytest --junitxml=reports/j.xml", ["pytest --junitxml=*"], ws)
    assert not allowed("pytest --junitxml=/tmp/j.xml", ["pytest --junitxml=*"], ws)  # its value stays inside
    assert not allowed("pytest --junitxml=reports/j.xml -q", ["pytest --junitxml=*"], ws)  # no `...`: exact
    assert allowed("pytest --junitxml=reports/j.xml -q", ["pytest --junitxml=* ..."], ws)
    assert not allowed("pytest -q --basetemp=x", ["pytest --junitxml=* ..."], ws)
    assert allowed("pytest --basetemp=build/tmp -q", ["pytest --basetemp=build/tmp ..."], ws)
    assert allowed("git log -n 5", ["git log -n *"], ws)
    assert not allowed("git log -n 5 -p", ["git log -n *"], ws)
    assert not allowed("git log -n /etc", ["git log -n *"], ws)
    assert allowed("head -c 10 /dev/zero", ["head -c * /dev/zero"], ws)  # a literal names even a path outside


def test_wrappers_match_exactly_except_python_dash_m(ws):
    assert allowed("env FOO=1 make", ["env FOO=1 make"], ws)
    assert not allowed("env FOO=1 make install", ["env FOO=1 make"], ws)
    assert not allowed("sh -c pytest", ["sh"], ws)
    assert not allowed("python -c 'import os'", DEFAULTS, ws)
    assert not allowed("python -m pip install x", DEFAULTS, ws)
    assert allowed("python -m mypy pkg", ["python -m mypy ..."], ws)


@pytest.mark.parametrize("entry,says", [
    ("ls | wc", "shell syntax"), ("pytest ... -q", "may only end"), ("sh ...", "runs whatever"),
    ("env *", "runs whatever"), ("pytest --x*", "stands alone"), ("* status", "names the program"),
    ("", "empty"), ("git 'log", "not a command line"),
])
def test_bad_entries_are_one_line_each(entry, says):
    with pytest.raises(ValueError) as err:
        Pattern.parse(entry)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_config_refuses_a_bad_entry_naming_it():
    from workstation.config import validate
    from workstation.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        validate({"agent": {"command_allow": ["git status", "make && make test"]}})
    assert str(err.value).count("\n") == 0 and "agent.command_allow: entry 2" in str(err.value)
    for bad, key in (({"command_network": "yes"}, "command_network"), ({"sandbox": "docker"}, "sandbox"),
                     ({"sandbox_hide": ["relative/path"]}, "sandbox_hide")):
        with pytest.raises(ConfigError) as err:
            validate({"agent": bad})
        assert f"agent.{key}" in str(err.value)


def test_command_env_pass_is_validated_and_a_workspace_cannot_set_it_untrusted():
    from workstation import trust
    from workstation.config import validate
    from workstation.errors import ConfigError

    assert validate({"agent": {"command_env_pass": ["GH_TOKEN"]}}).agent.command_env_pass == ["GH_TOKEN"]
    with pytest.raises(ConfigError) as err:
        validate({"agent": {"command_env_pass": ["GH_TOKEN", "NOT A NAME"]}})
    assert "agent.command_env_pass: entry 2" in str(err.value) and str(err.value).count("\n") == 0
    layer = trust.split({"agent": {"command_env_pass": ["GH_TOKEN"], "max_steps": 3}})
    assert layer.applied(False, []) == {"agent": {"max_steps": 3}}
    assert layer.applied(True, [])["agent"]["command_env_pass"] == ["GH_TOKEN"]
