"""Model-written purposes: opt-in, cached by content hash, never an error, with progress and cost.

The model is the scripted OpenAI-compatible server, reached through the real litellm path."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from support.fakellm import Reply, ScriptedLLM
from support.kmap_helpers import write
from support.trust_support import trust
from workstation.index.describe import DescribeReport, clean_purpose

FILES = {
    "a.py": "def alpha():\n    return 1\n",
    "b.py": "def beta():\n    return 2\n",
    "c.py": "def gamma():\n    return 3\n",
    "documented.py": '"""Already says what it is for."""\n\ndef delta():\n    return 4\n',
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    write(tmp_path, FILES, aged=True)
    return tmp_path


@contextlib.contextmanager
def _map(root: Path, llm: ScriptedLLM, monkeypatch, **index):
    from workstation import config as config_mod
    from workstation.index.map import KnowledgeMap
    from workstation.store import Database

    monkeypatch.setenv("WS_TEST_KEY", "sk-test-0123456789")
    model = {"name": "openai/test-model", "api_base": llm.url, "api_key_env": "WS_TEST_KEY", "max_retries": 0}
    cfg, paths = config_mod.load(root, {"model": model, "index": index} if index else {"model": model})
    with Database(paths) as db:
        km = KnowledgeMap(db, paths, cfg)
        km.index_all()
        yield km


def _purposes(km) -> dict[str, tuple[str, str]]:
    return {f.path: (f.purpose, f.purpose_source) for f in km.files()}


def test_off_by_default_no_request_is_sent(repo: Path, monkeypatch):
    from workstation.config import IndexConfig

    assert IndexConfig().describe_with_model is False
    with ScriptedLLM([]) as llm, _map(repo, llm, monkeypatch) as km:
        report = km.describe_files(limit=50)
        assert report.described == 0 and report.requests == 0
        assert "describe_with_model" in report.stopped
        assert km.describe_missing(limit=50) == 0
        assert llm.requests == []
        assert all(source == "source" for _p, source in _purposes(km).values())


def test_errors_and_garbage_are_never_stored(repo: Path, monkeypatch):
    replies = {"a.py": Reply(text="Error: rate limit exceeded, retry later"),
               "b.py": Reply(text=""),
               "c.py": Reply(text="Returns the third letter of the Greek alphabet.\n")}

    def answer(body):
        return replies[body["messages"][-1]["content"].split()[1]]

    seen: list[DescribeReport] = []
    with ScriptedLLM(answer) as llm, _map(repo, llm, monkeypatch, describe_with_model=True) as km:
        report = km.describe_files(limit=50, progress=seen.append)
        assert (report.total, report.done, report.described, report.failed, report.requests) == (3, 3, 1, 2, 3)
        assert report.stopped is None and "not a description" in report.error
        assert report.tokens_in > 0 and report.tokens_out > 0
        assert report.cost_usd == 0.0 and report.unpriced == 3  # litellm knows no price for the test model
        assert [r.done for r in seen] == [1, 2, 3] and all(r.total == 3 for r in seen)
        purposes = _purposes(km)
        assert purposes["c.py"] == ("Returns the third letter of the Greek alphabet.", "model")
        assert purposes["a.py"] == ("", "source") and purposes["b.py"] == ("", "source")
        assert purposes["documented.py"] == ("Already says what it is for.", "source")
        km.index_all(force=True)  # nothing failed became a purpose on the way
        assert _purposes(km)["a.py"] == ("", "source")
        assert "documented.py" not in {r["messages"][-1]["content"].split()[1] for r in llm.requests}


def test_a_purpose_is_asked_once_per_content(repo: Path, monkeypatch):
    with ScriptedLLM(lambda body: Reply(text="Holds a small helper function.")) as llm, \
            _map(repo, llm, monkeypatch, describe_with_model=True) as km:
        assert km.describe_files(limit=50).described == 3
        assert len(llm.requests) == 3
        km.index_all(force=True)  # same content: the purposes come back from the cache
        assert _purposes(km)["a.py"] == ("Holds a small helper function.", "model")
        assert km.describe_files(limit=50).requests == 0 and len(llm.requests) == 3
        (repo / "a.py").write_text("def alpha():\n    return 100\n")  # new content: described afresh
        assert _purposes(km)["a.py"] == ("", "source")
        report = km.describe_files(limit=50)
        assert (report.requests, report.described) == (1, 1) and len(llm.requests) == 4
        (repo / "b.py").write_text(FILES["a.py"])  # b now holds what a held: its purpose, no request
        km.index_all(force=True)
        assert _purposes(km)["b.py"] == ("Holds a small helper function.", "model")
        assert km.describe_files(limit=50).requests == 0
        # --force drops the purposes of content no file holds any more: c's old content, here
        (repo / "c.py").write_text(FILES["c.py"] + "\n")
        km.index_all(force=True)
        (repo / "c.py").write_text(FILES["c.py"])  # back to the old content: it is described again
        report = km.describe_files(limit=50)
        assert (report.requests, report.described) == (1, 1) and len(llm.requests) == 5


def test_files_with_the_same_content_cost_one_request(tmp_path: Path, monkeypatch):
    write(tmp_path, {f"pkg{i}/setup_helper.py": "def setup():\n    return None\n" for i in range(4)})
    with ScriptedLLM(lambda body: Reply(text="Sets things up for the package.")) as llm, \
            _map(tmp_path, llm, monkeypatch, describe_with_model=True) as km:
        report = km.describe_files(limit=50)
        assert (report.total, report.described, report.requests) == (4, 4, 1)
        assert {p for p, (purpose, _s) in _purposes(km).items() if purpose == "Sets things up for the package."} \
            == {f"pkg{i}/setup_helper.py" for i in range(4)}


def test_a_failing_model_is_given_up_after_three_errors(tmp_path: Path, monkeypatch):
    write(tmp_path, {f"m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(6)})
    with ScriptedLLM(lambda body: Reply(status=500, error_message="upstream down")) as llm, \
            _map(tmp_path, llm, monkeypatch, describe_with_model=True) as km:
        report = km.describe_files(limit=50)
        assert report.requests == 3 and report.failed == 3 and report.described == 0
        assert report.stopped.startswith("the model failed 3 times in a row") and "upstream down" in report.error
        assert all(purpose == "" for purpose, _s in _purposes(km).values())
        from workstation.llm import LLMError

        with pytest.raises(LLMError, match="upstream down"):  # the app's older call still hears of it
            km.describe_missing(limit=50)


@pytest.mark.parametrize("reply, expected", [
    ("Computes retry delays.\n", "Computes retry delays."),
    ('"Parses the configuration file."', "Parses the configuration file."),
    ("Purpose: Loads the API key variable name from config.", "Loads the API key variable name from config."),
    ("Retries HTTP requests that timed out.", "Retries HTTP requests that timed out."),
    ("Error handling for the command line.", "Error handling for the command line."),
    ("Error: rate limit exceeded", None),
    ("litellm.RateLimitError: quota exceeded for this key", None),
    ("Sorry, I cannot see the file.", None),
    ("N/A", None),
    ("", None),
    ("```python\ndef f(): pass\n```", None),
    ("<html><body>502 Bad Gateway</body></html>", None),
    ('{"error": {"message": "bad request"}}', None),
    ("42", None),
])
def test_clean_purpose(reply: str, expected: str | None):
    assert clean_purpose(reply) == expected


def test_index_describe_prints_progress_and_cost(repo: Path, monkeypatch, tmp_path_factory):
    import json

    from click.testing import CliRunner

    from workstation.cli import main

    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("WORKSTATION_HOME", str(home))
    monkeypatch.setenv("WS_TEST_KEY", "sk-test-0123456789")
    with ScriptedLLM(lambda body: Reply(text="Holds a small helper function.")) as llm:
        (repo / ".workstation").mkdir()
        config = ""  # the model is the user's own: a workspace's config never names an endpoint or key
        (home / "config.toml").write_text(f'[model]\nname = "openai/test-model"\napi_base = "{llm.url}"\n'
                                          'api_key_env = "WS_TEST_KEY"\nmax_retries = 0\n')
        off = CliRunner().invoke(main, ["-C", str(repo), "index", "--describe", "10"])
        assert off.exit_code == 0, off.output
        assert "described 0 of 0 files" in off.output and "describe_with_model = true" in off.output
        assert llm.requests == []
        (repo / ".workstation/config.toml").write_text(config + "\n[index]\ndescribe_with_model = true\n")
        trust(repo)  # describing files with a model is the user's call for this folder
        on = CliRunner().invoke(main, ["-C", str(repo), "index", "--describe", "2"])
        assert on.exit_code == 0, on.output
        assert on.stderr.count("described ") == 2  # a progress line per file
        assert "described 2 of 2 files (0 failed), 2 requests, " in on.stdout and "(+2 unpriced)" in on.stdout
        data = json.loads(CliRunner().invoke(main, ["-C", str(repo), "index", "--describe", "5", "--json"]).stdout)
        assert (data["describe"]["described"], data["describe"]["requests"]) == (1, 1)
        assert len(llm.requests) == 3


def test_index_force_clears_error_purposes_stored_before(repo: Path, monkeypatch):
    with ScriptedLLM([]) as llm, _map(repo, llm, monkeypatch, describe_with_model=True) as km:
        sha = {path: km.indexed_sha(path) for path in ("a.py", "b.py")}

        from workstation.index.describe import set_model_purpose

        # as an older version did: the error text of a failed request stored as a purpose (unchecked)
        km.db.call(set_model_purpose, "a.py", sha["a.py"], "litellm.APIError: upstream down", "m")
        km.db.call(set_model_purpose, "b.py", sha["b.py"], "Computes beta.", "m")
        km.index_all()  # a plain refresh leaves the map alone
        assert _purposes(km)["a.py"] == ("litellm.APIError: upstream down", "model")
        km.index_all(force=True)
        assert _purposes(km)["a.py"] == ("", "source")  # gone, to be described again
        assert _purposes(km)["b.py"] == ("Computes beta.", "model")
        assert llm.requests == []
