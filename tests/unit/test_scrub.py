"""workstation.scrub: what is a secret, and the masks every boundary uses."""

from __future__ import annotations

import json
import logging

import pytest

from workstation import scrub

GITHUB = "ghp_" + "A1b2C3d4E5" * 3 + "abcdef"
AWS = "AKIAIOSFODNN7EXAMPLE"
ANTHROPIC = "sk-ant-api03-" + "Q" * 40
SLACK = "xoxb-123456789012-1234567890123-abcdefghijklmnop"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize("secret", [GITHUB, AWS, ANTHROPIC, SLACK, JWT])
def test_well_known_key_formats_are_masked_in_place(secret):
    text = f'token = "{secret}"  # set by ops'
    assert scrub.mask(text) == 'token = "***"  # set by ops'


def test_a_private_key_block_is_masked_whole_and_the_text_around_it_stays():
    assert scrub.mask(f"before\n{PEM}\nafter") == "before\n***\nafter"


def test_a_password_in_a_url_is_masked_and_the_user_kept():
    assert scrub.mask("git clone https://bob:s3cretpassw0rd@example.com/r.git") == \
        "git clone https://bob:***@example.com/r.git"


def test_code_that_only_names_a_secret_is_left_as_written():
    code = ('api_key = os.environ["OPENAI_API_KEY"]\npassword = "hunter22"\n'
            'digest = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"\n')
    assert scrub.mask(code) == code


def test_secret_named_environment_variables_are_masked_and_others_not(monkeypatch):
    monkeypatch.setenv("ACME_DEPLOY_TOKEN", "deploy-tok-1234567")
    monkeypatch.setenv("DB_PASSWORD_PROD", "correct-horse-battery")
    monkeypatch.setenv("SERVICE_CREDENTIALS", "cred-abcdefgh")
    monkeypatch.setenv("EDITOR_THEME", "solarized-dark-9")
    text = "deploy-tok-1234567 correct-horse-battery cred-abcdefgh solarized-dark-9"
    assert scrub.mask(text) == "*** *** *** solarized-dark-9"
    names = scrub.secret_env_names()
    assert {"ACME_DEPLOY_TOKEN", "DB_PASSWORD_PROD", "SERVICE_CREDENTIALS"} <= set(names)
    assert "EDITOR_THEME" not in names and "SSH_AUTH_SOCK" not in scrub.secret_env_names(["SSH_AUTH_SOCK"])


def test_a_variable_set_after_an_earlier_call_is_masked_at_once(monkeypatch):
    assert scrub.mask("late-value-123456") == "late-value-123456"
    monkeypatch.setenv("LATE_API_KEY", "late-value-123456")
    assert scrub.mask("late-value-123456") == "***"
    monkeypatch.delenv("LATE_API_KEY")
    assert scrub.mask("late-value-123456") == "late-value-123456"


def test_registered_values_are_masked_longest_first():
    scrub.register("registered-secret-abc")
    scrub.register("registered-secret-abc-and-more")
    scrub.register("short")  # too short to be told from ordinary words: ignored
    assert scrub.mask("x registered-secret-abc-and-more y registered-secret-abc short") == "x *** y *** short"


def test_redact_also_masks_credentials_in_prose_and_echoed_key_heads(monkeypatch):
    monkeypatch.setenv("SOME_SERVICE_API_KEY", "plainvalue-1234567")
    text = ("key sk-proj-AbCdEf1234567890 and Authorization: Bearer abc.def-ghi123 "
            "env plainvalue-1234567; api_key=hunter2hunter2; echoed plainval***4567")
    out = scrub.redact(text)
    for secret in ("AbCdEf1234567890", "abc.def-ghi123", "plainvalue-1234567", "hunter2hunter2", "plainval"):
        assert secret not in out
    assert "Authorization: Bearer ***" in out
    assert scrub.redact("token counts may be approximate") == "token counts may be approximate"


def test_mask_data_walks_json_values_and_redact_fields_hides_secret_named_fields(monkeypatch):
    monkeypatch.setenv("X_TOKEN", "value-of-x-token")
    value = {"args": ["value-of-x-token", {"note": f"gh {GITHUB}"}], "n": 3, "ok": True}
    assert scrub.mask_data(value) == {"args": ["***", {"note": "gh ***"}], "n": 3, "ok": True}
    assert json.dumps(value).count("value-of-x-token") == 1  # the caller's value is untouched
    fields = {"api_key": "k", "headers": {"Authorization": "Bearer x", "accept": "json"}, "tokens": 3}
    assert scrub.redact_fields(fields) == {"api_key": "[redacted]", "tokens": 3,
                                           "headers": {"Authorization": "[redacted]", "accept": "json"}}


def test_the_logging_filter_redacts_messages_and_tracebacks(monkeypatch, caplog):
    monkeypatch.setenv("LOGGED_API_KEY", "in-the-log-123456")
    logger = logging.getLogger("scrub-test")
    logger.addFilter(scrub.RedactingFilter())
    with caplog.at_level(logging.INFO, logger="scrub-test"):
        logger.info("calling with %s", "in-the-log-123456")
        try:
            raise ValueError("failed with in-the-log-123456")
        except ValueError:
            logger.exception("boom")
    assert "in-the-log-123456" not in caplog.text and caplog.text.count("***") >= 2


def test_the_fast_prefilter_misses_no_key_the_detectors_find():
    """may_hold_key (RE2, a loosened superset) must say yes wherever the detectors find something: checked
    on every sample here, on each detector's own examples from detect-secrets' tests' shapes, and on the
    repository's text (where it must mostly say no, or it saves nothing)."""
    from pathlib import Path

    samples = [GITHUB, AWS, ANTHROPIC, SLACK, JWT, PEM, "https://bob:s3cretpassw0rd@example.com/r.git",
               "glpat-" + "x" * 20, "sk_live_" + "4" * 24, "SG." + "a" * 22 + "." + "b" * 43,
               "npm_" + "A" * 36, "pypi-AgEIcHlwaS5vcmc" + "x" * 70, "AIza" + "B" * 35,
               "xoxp-1234-5678-abcd", "sk-proj-" + "Z" * 30, "hf_" + "q" * 34]
    for sample in samples:
        for text in (sample, f"x = '{sample}'\n", f"é{sample}é"):
            if scrub._spans(text):
                assert scrub.may_hold_key(text), text
    said_yes = 0
    files = sorted(Path(scrub.__file__).parent.rglob("*.py"))
    for path in files:
        text = path.read_text()
        found = bool(scrub._spans(text))
        said = scrub.may_hold_key(text)
        assert said or not found, path
        said_yes += said
    assert said_yes < len(files) // 4


def test_encoded_copies_of_a_known_value_are_masked_at_any_offset(monkeypatch):
    import base64
    from urllib.parse import quote

    secret = "enc-secret/+value-0123456789"
    monkeypatch.setenv("WS_ENCODED_TOKEN", secret)
    raw = secret.encode()
    encoded = [raw.hex(), raw.hex().upper(), quote(secret, safe="")]
    for prefix in (b"", b"a", b"ab", b"abc"):  # inside a longer base64 text, at every alignment
        whole = base64.b64encode(prefix + raw + b"!tail")
        encoded += [whole.decode(), base64.urlsafe_b64encode(prefix + raw + b"!tail").decode()]
    for text in encoded:
        masked = scrub.mask(f"out: {text} end")
        assert scrub.MASK in masked and len(masked) <= len("out: *** end") + 12, (text, masked)  # edges + tail
    monkeypatch.delenv("WS_ENCODED_TOKEN")
    assert scrub.mask(f"out: {raw.hex()} end") == f"out: {raw.hex()} end"  # only known values' encodings


def test_commands_get_the_environment_without_secret_named_variables():
    env = {"PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "TERM": "xterm", "PWD": "/w",
           "OPENAI_API_KEY": "k", "AWS_ACCESS_KEY_ID": "k", "AWS_SESSION_TOKEN": "k", "GH_TOKEN": "k",
           "SSH_AUTH_SOCK": "/s", "MY_PASSWD": "k", "BROWSER_COOKIE_JAR": "k", "GOOGLE_APPLICATION_CREDENTIALS": "/c",
           "MODEL_VAR": "k", "PASSED_SECRET": "k", "KEYBOARD_LAYOUT": "us", "EDITOR": "vi"}
    got = scrub.command_env(env, passed=["PASSED_SECRET"], withheld=["MODEL_VAR"])
    assert sorted(got) == ["EDITOR", "HOME", "KEYBOARD_LAYOUT", "LANG", "PASSED_SECRET", "PATH", "PWD", "TERM"]


def test_the_prefilter_cache_is_rebuilt_when_it_is_stale_or_damaged(monkeypatch, tmp_path):
    """The user cache holds may_hold_key's pattern keyed by the detectors' source: a file under another key
    (detect-secrets upgraded), or one RE2 cannot read, is never used; the pattern is built again."""
    from workstation.paths import user_cache_dir

    monkeypatch.setenv("WORKSTATION_HOME", str(tmp_path))
    cache = user_cache_dir() / scrub.PREFILTER_FILE
    cache.parent.mkdir(parents=True)
    key = scrub._detectors_key()
    assert key is not None
    for saved in ({"key": "another detect-secrets", "source": "(?!x)x"}, {"key": key, "source": "(unclosed"}):
        cache.write_text(json.dumps(saved))
        monkeypatch.setattr(scrub, "_prefilter_pattern", None)
        assert scrub.may_hold_key(GITHUB)
        assert scrub.mask(f"token {GITHUB} here") == "token *** here"
        assert json.loads(cache.read_text()) == {"key": key, "source": scrub.prefilter_source()}
