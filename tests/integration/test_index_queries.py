"""find (two tiers) and impact (references told apart by imports)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.fakellm import Reply, ScriptedLLM
from support.kmap_helpers import open_map, write
from workstation.errors import WorkstationError

REPO = {
    "store/__init__.py": "",
    "store/disk.py": """\
        '''Persist records on disk.'''


        class Store:
            def save(self, record):
                return record


        def load(path):
            return open(path).read()


        def reload(path):
            return load(path)
        """,
    "conf/__init__.py": "",
    "conf/settings.py": """\
        def load(name):
            return {}
        """,
    "use_store.py": """\
        from store.disk import Store, load


        def run():
            data = load("x")
            Store().save(data)
            return data
        """,
    "use_conf.py": """\
        from conf.settings import load


        def configure():
            return load("app")
        """,
    "use_json.py": """\
        from json import load


        def parse(fh):
            return load(fh)
        """,
    "net/http_retry.py": """\
        def backoff_schedule(attempts):
            return [2 ** i for i in range(attempts)]
        """,
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    write(tmp_path, REPO)
    return tmp_path


def test_impact_tells_same_named_symbols_apart(repo: Path):
    with open_map(repo) as km:
        store_load = km.impact("store/disk.py:load")
        assert [(h.location, h.enclosing, h.kind, h.evidence) for h in store_load] == [
            ("store/disk.py:14", "reload", "call", "same-file"),
            ("use_store.py:5", "run", "call", "import"),
        ]
        assert {h.target for h in store_load} == {"store/disk.py:load"}
        conf_load = km.impact("conf/settings.py:load")
        assert [h.location for h in conf_load] == ["use_conf.py:5"]
        everything = km.impact("load")
        assert [h.location for h in everything] == ["store/disk.py:14", "use_conf.py:5", "use_store.py:5"]
        # json's load is imported from elsewhere: not ours
        assert all(h.path != "use_json.py" for h in everything)


def test_impact_of_a_method_and_unknown_names(repo: Path):
    with open_map(repo) as km:
        hits = km.impact("Store.save")
        assert [(h.location, h.target) for h in hits] == [("use_store.py:6", "store/disk.py:Store.save")]
        with pytest.raises(WorkstationError, match="no symbol no_such_name in"):  # issue 12: as a missing symbol
            km.impact("no_such_name")
        with pytest.raises(WorkstationError, match="no symbol Nope.save"):
            km.impact("Nope.save")


def test_find_tier_one_exact_prefix_fuzzy(repo: Path):
    with open_map(repo) as km:
        exact = km.find("Store")
        assert (exact.hits[0].name, exact.hits[0].match, exact.hits[0].start_line) == ("Store", "exact", 4)
        prefix = km.find("backoff")
        assert (prefix.hits[0].name, prefix.hits[0].match) == ("backoff_schedule", "prefix")
        fuzzy = km.find("backof_schedule")
        assert (fuzzy.hits[0].name, fuzzy.hits[0].match) == ("backoff_schedule", "fuzzy")
        by_path = km.find("http_retry.py")
        assert (by_path.hits[0].kind, by_path.hits[0].path) == ("file", "net/http_retry.py")
        assert exact.tiers == ["names"] and exact.note is None


def test_find_without_model_says_tier_one_only(repo: Path):
    with open_map(repo) as km:
        result = km.find("how do we wait between network attempts")
        assert result.hits == []
        assert result.tiers == ["names"]
        assert result.note == "tier one only: no model configured for semantic search"


def _model(llm) -> dict:
    return {"name": "openai/test-model", "api_base": llm.url, "api_key_env": "WS_TEST_KEY", "max_retries": 0}


def test_find_tier_two_asks_the_model(repo: Path, monkeypatch):
    monkeypatch.setenv("WS_TEST_KEY", "sk-test-0123456789")

    def pick_retry(body):
        prompt = "\n".join(m["content"] for m in body["messages"])  # the candidates, then the query
        numbers = re.findall(r"^(\d+)\. .*http_retry", prompt, flags=re.M)
        return Reply(text="\n".join(numbers))

    with ScriptedLLM(pick_retry) as llm:
        from workstation import config as config_mod
        from workstation.index.map import KnowledgeMap
        from workstation.store import Database

        cfg, paths = config_mod.load(repo, {"model": _model(llm)})
        with Database(paths) as db:
            result = KnowledgeMap(db, paths, cfg).find("how do we wait between network attempts")
        assert result.tiers == ["names", "semantic"]
        assert {h.path for h in result.hits} == {"net/http_retry.py"}
        assert {h.match for h in result.hits} == {"semantic"}
        assert "backoff_schedule" in {h.name for h in result.hits}
        assert "Query: how do we wait between network attempts" in llm.requests[0]["messages"][-1]["content"]


def test_find_tier_two_lists_the_same_candidates_first_for_every_query(repo: Path, monkeypatch):
    """The candidates every query gets come first, in the system message (a prefix the provider caches), and
    the query last: two finds differ only at the end of their prompts. What the query's words pick is listed."""
    monkeypatch.setenv("WS_TEST_KEY", "sk-test-0123456789")
    with ScriptedLLM(lambda body: Reply(text="NONE")) as llm:
        from workstation import config as config_mod
        from workstation.index.map import KnowledgeMap
        from workstation.store import Database

        cfg, paths = config_mod.load(repo, {"model": _model(llm)})
        with Database(paths) as db:
            km = KnowledgeMap(db, paths, cfg)
            km.find("how do we wait between network attempts")
            km.find("where are the rows kept")
        first, second = (body["messages"] for body in llm.requests[:2])
    assert first[0] == second[0] and "Candidates:\n1. " in first[0]["content"]
    assert first[-1]["content"].endswith("Query: how do we wait between network attempts")
    assert second[-1]["content"].endswith("Query: where are the rows kept")
    assert "backoff_schedule" in "\n".join(m["content"] for m in first)


def test_find_tier_two_failure_is_reported(repo: Path, monkeypatch):
    monkeypatch.setenv("WS_TEST_KEY", "sk-test-0123456789")
    with ScriptedLLM([Reply(status=500, error_message="upstream down")]) as llm:
        from workstation import config as config_mod
        from workstation.index.map import KnowledgeMap
        from workstation.store import Database

        cfg, paths = config_mod.load(repo, {"model": _model(llm)})
        with Database(paths) as db:
            result = KnowledgeMap(db, paths, cfg).find("zzz nothing like this")
        assert result.tiers == ["names"]
        assert result.note.startswith("tier two failed:")


def test_model_written_purpose_survives_until_the_content_changes(repo: Path, monkeypatch):
    monkeypatch.setenv("WS_TEST_KEY", "sk-test-0123456789")
    with ScriptedLLM(lambda body: Reply(text="Computes retry delays.\n")) as llm:
        from workstation import config as config_mod
        from workstation.index.map import KnowledgeMap
        from workstation.store import Database

        cfg, paths = config_mod.load(repo, {"model": _model(llm), "index": {"describe_with_model": True}})
        with Database(paths) as db:
            km = KnowledgeMap(db, paths, cfg)
            km.index_all()
            assert km.describe_missing(limit=50) == 5  # every non-empty file without a docstring or comment
            purposes = {f.path: (f.purpose, f.purpose_source) for f in km.files()}
            assert purposes["net/http_retry.py"] == ("Computes retry delays.", "model")
            assert purposes["store/disk.py"] == ("Persist records on disk.", "source")
            km.index_all(force=True)  # same content: the model's line stays
            assert {f.path: f.purpose_source for f in km.files()}["net/http_retry.py"] == "model"
            (repo / "net/http_retry.py").write_text(
                "# Exponential backoff.\ndef backoff_schedule(n):\n    return n\n")
            purposes = {f.path: (f.purpose, f.purpose_source) for f in km.files()}
            assert purposes["net/http_retry.py"] == ("Exponential backoff.", "source")


# Short names that sentence-like queries contain ("get" in "budget"), and longer ones to look up.
SHORT_NAMES = {
    "memory/episodic.py": """\
        class Episodic:
            def get(self, key):
                return key


        def _get(store, key):
            return store[key]
        """,
    "verify.py": """\
        class VerifyReport:
            def ok(self):
                return True
        """,
    "paths.py": """\
        HERE = __file__
        BASE = HERE
        """,
    "src/kmap/knowledge_map.py": """\
        class KnowledgeMap:
            def find(self, query):
                return query
        """,
}
SENTENCES = ["token budget", "where is the database schema", "get the base here"]


@pytest.fixture
def short_names(tmp_path: Path) -> Path:
    write(tmp_path, SHORT_NAMES)
    return tmp_path


def test_find_sentence_does_not_match_the_short_names_inside_it(short_names: Path):
    with open_map(short_names) as km:
        for sentence in SENTENCES:
            result = km.find(sentence)
            assert result.hits == [], (sentence, [h.name for h in result.hits])


def test_find_names_and_paths_still_match_on_a_repo_of_short_names(short_names: Path):
    def top(query: str) -> list[tuple[str, str]]:
        return [(h.name, h.match) for h in km.find(query).hits]

    with open_map(short_names) as km:
        assert top("Episodic") == [("Episodic", "exact"), ("memory/episodic.py", "exact"), ("Episodic.get", "prefix")]
        assert sorted(top("VerifyRep")) == [("VerifyReport", "prefix"), ("VerifyReport.ok", "prefix")]
        assert top("KnowldgeMap") == [("KnowledgeMap", "fuzzy")]
        assert top("KnowledgeMap.find") == [("KnowledgeMap.find", "exact"), ("KnowledgeMap", "fuzzy")]
        assert top("KnowldgeMap.find") == [("KnowledgeMap.find", "fuzzy")]
        assert top("kmap/knowledge_map") == [("src/kmap/knowledge_map.py", "fuzzy")]
        assert top("knowledge_map.py") == [("src/kmap/knowledge_map.py", "exact")]
        assert top("get_") == [("Episodic.get", "fuzzy"), ("_get", "fuzzy")]


def test_find_sentence_goes_on_to_the_model(short_names: Path, monkeypatch):
    monkeypatch.setenv("WS_TEST_KEY", "sk-test-0123456789")

    def pick_find(body):
        prompt = "\n".join(m["content"] for m in body["messages"])  # the candidates, then the query
        return Reply(text="\n".join(re.findall(r"^(\d+)\. \w+ KnowledgeMap ", prompt, flags=re.M)))

    with ScriptedLLM(pick_find) as llm:
        from workstation import config as config_mod
        from workstation.index.map import KnowledgeMap
        from workstation.store import Database

        cfg, paths = config_mod.load(short_names, {"model": _model(llm)})
        with Database(paths) as db:
            result = KnowledgeMap(db, paths, cfg).find("token budget")
        assert result.tiers == ["names", "semantic"]
        assert [(h.name, h.match) for h in result.hits] == [("KnowledgeMap", "semantic")]


def test_find_forgives_a_typo(tmp_path: Path):
    write(tmp_path, {"net/client.py": "class Client:\n    def connect(self):\n        return 1\n",
                     "net/clone.py": "def clone():\n    return 2\n",
                     "ui/cell.py": "def cell():\n    return 3\n"})
    with open_map(tmp_path) as km:
        def top(query: str) -> list[tuple[str, str]]:
            return [(h.name, h.match) for h in km.find(query).hits]

        assert top("clinet")[0] == ("Client", "fuzzy")  # transposed letters
        assert top("Clent")[0] == ("Client", "fuzzy")  # a letter missing
        assert top("conect")[0] == ("Client.connect", "fuzzy")
        assert "Client" not in {name for name, _m in top("cell")}  # two letters off a short query: no


EXPRESS_RESPONSE = """var res = Object.create(http.ServerResponse.prototype);
res.status = function status(code) {
  this.statusCode = code;
  return this;
};
res.sendStatus = function sendStatus(statusCode) {
  var status = statuses.message[statusCode] || String(statusCode);
  this.status(statusCode);
  return this.send(status);
};
"""
EXPRESS_APP = """var res = require('./response');
function onerror(err, req, response) {
  err.status = 403;
  var code = err.status;
  response.status(500).send(code);
}
function report(status) {
  return status + 1;
}
"""


def test_impact_of_a_js_method_leaves_out_member_writes_and_local_variables(tmp_path: Path):
    write(tmp_path, {"lib/response.js": EXPRESS_RESPONSE, "lib/application.js": EXPRESS_APP})
    with open_map(tmp_path) as km:
        assert {(s.qualname, s.kind) for s in km.symbols("lib/response.js")} >= {("res.status", "method")}
        hits = [(h.location, h.kind, h.evidence) for h in km.impact("res.status")]
        # this.status(...) in the same file calls it, response.status(500) in a file that requires it too;
        # err.status read: whose? (name-only, last); err.status = 403 (a member written), `var status` and
        # the parameter `status` are not it
        assert hits == [("lib/application.js:5", "call", "import"),
                        ("lib/response.js:8", "call", "same-file"),
                        ("lib/application.js:4", "attr", "name-only")]


def test_impact_lists_real_references_before_name_only_ones(tmp_path: Path):
    write(tmp_path, {"a/core.py": "def run():\n    return 1\n", "b/core.py": "def run():\n    return 2\n",
                     "c.py": "from a.core import run\n\nrun()\n", "d.py": "import x\n\nx.run()\n",
                     "aa.py": "def go(job):\n    return job.run()\n"})
    with open_map(tmp_path) as km:
        hits = [(h.location, h.evidence) for h in km.impact("run")]
        assert hits == [("c.py:3", "import"), ("aa.py:2", "name-only"), ("d.py:3", "name-only")]


def test_impact_of_an_unknown_name_is_an_error(tmp_path: Path):
    write(tmp_path, {"a.py": "def run():\n    return print(1)\n"})
    with open_map(tmp_path) as km:
        with pytest.raises(WorkstationError, match="^no symbol NoSuchThing in the knowledge map$"):
            km.impact("NoSuchThing")
        assert km.impact("run") == []  # defined, never used: no references, no error
        assert [h.evidence for h in km.impact("print")] == ["name-only"]  # used, defined elsewhere


def test_impact_of_a_python_method_leaves_out_member_writes_and_local_variables(tmp_path: Path):
    write(tmp_path, {"web/response.py": "class Response:\n    def status(self, code):\n        self.code = code\n"
                                        "        return self\n\n    def send_status(self, code):\n"
                                        "        status = str(code)\n        self.status(code)\n"
                                        "        return status\n",
                     "web/errors.py": "def fail(err):\n    err.status = 403\n    return err.status\n"})
    with open_map(tmp_path) as km:
        hits = [(h.location, h.kind, h.evidence) for h in km.impact("Response.status")]
        assert hits == [("web/response.py:8", "call", "same-file"), ("web/errors.py:3", "attr", "name-only")]
