"""workstation.tokens counts like litellm, offline, without importing litellm."""

from __future__ import annotations

import subprocess
import sys

import pytest

SAMPLES = [
    "",
    "hello world",
    "def parse(path: str) -> dict[str, int]:\n    return {k: len(v) for k, v in load(path).items()}\n",
    "Ünïcödé — 日本語のテキスト, emoji 🎉🚀 and tabs\tand\r\nCRLF",
    "    indented\n\n\n        deeper   spaces   \n",
    "<|endoftext|> is plain text here",
    "x" * 5000,
    "1234567890 3.14159 0xdeadbeef",
]


def test_counts_agree_with_litellm():
    import litellm

    from workstation import tokens

    for text in SAMPLES:
        expected = litellm.token_counter(text=text) if text else 0
        assert tokens.count(text) == expected, text[:40]


def test_never_downloads(monkeypatch):
    import tiktoken.load

    from workstation import tokens

    def no_network(*args, **kwargs):
        raise AssertionError("tiktoken tried to fetch or cache a file")

    text = "offline, please: no downloads"
    expected = tokens.count(text)
    monkeypatch.setattr(tiktoken.load, "read_file", no_network)
    monkeypatch.setattr(tiktoken.load, "read_file_cached", no_network)
    tokens.encoding.cache_clear()  # rebuild the encoding with the network gone
    assert tokens.count(text) == expected > 0


def test_does_not_import_litellm():
    code = "import sys; from workstation import tokens; tokens.count('x'); print('litellm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.parametrize("text", ["a b c", "short"])
def test_count_is_positive_for_text(text):
    from workstation import tokens

    assert tokens.count(text) > 0
