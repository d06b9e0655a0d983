"""Fast, offline token counting for budgets (cl100k_base).

litellm ships the cl100k_base BPE ranks inside its package; loading that file
with tiktoken directly gives the same counts as `litellm.token_counter` for
plain text without importing litellm (seconds) and without tiktoken ever
trying to download (or cache) anything.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import threading
from functools import lru_cache

from .errors import WorkstationError
from .textmemo import TextMemo

# tiktoken's published hash of cl100k_base.tiktoken; litellm stores it under the sha1 of its URL.
_CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
_CL100K_FILE = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_CL100K_SPECIAL = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}

_lock = threading.Lock()


def _bundled_ranks_path() -> str:
    spec = importlib.util.find_spec("litellm")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise WorkstationError("token counting needs litellm's bundled tokenizer, but litellm is not installed")
    base = list(spec.submodule_search_locations)[0]
    return os.path.join(base, "litellm_core_utils", "tokenizers", _CL100K_FILE)


@lru_cache(maxsize=1)
def encoding():
    """The cl100k_base encoding, built once from litellm's bundled ranks."""
    import tiktoken  # lazy: tiktoken, +25 ms; the encoding builds on the first count

    path = _bundled_ranks_path()
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as err:
        raise WorkstationError(f"cannot read the bundled tokenizer {path}: {err.strerror}") from None
    if hashlib.sha256(data).hexdigest() != _CL100K_SHA256:
        raise WorkstationError(f"bundled tokenizer {path} does not match cl100k_base")
    ranks = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    built = tiktoken.Encoding(name="cl100k_base", pat_str=_CL100K_PATTERN,
                              mergeable_ranks=ranks, special_tokens=_CL100K_SPECIAL)
    # the encoder (tiktoken's Rust core) holds its own copy of the ranks; the Python one, kept only to pickle
    # an Encoding (never done here), is 15 MB of the process for nothing
    built._mergeable_ranks = {}
    return built


def count(text: str) -> int:
    """Number of cl100k_base tokens in `text` (special-token text counts as plain text)."""
    if not text:
        return 0
    return _counts.get(text, _count)


def _count(text: str) -> int:
    with _lock:  # the first call builds the encoding once, even from several threads
        enc = encoding()
    return len(enc.encode_ordinary(text))


_counts = TextMemo()
