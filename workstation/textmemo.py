"""The last few results of a costly pure function of a long text.

A 10 MB tool argument reaches the token counter and the secret masker a dozen times in one step
(the record, the context, the events, the terminal): hashing it costs ~20 ms, counting it ~0.7 s
and masking it ~1.2 s. Short texts are not worth a hash and are computed every time.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Callable, Hashable, TypeVar

T = TypeVar("T")


class TextMemo:
    def __init__(self, min_chars: int = 64 * 1024, size: int = 8) -> None:
        self.min_chars = min_chars
        self.size = size
        self._results: OrderedDict[tuple, object] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str, compute: Callable[[str], T], extra: Hashable = None) -> T:
        """compute(text), from memory when this text (and `extra`, what else the result depends on)
        was seen recently."""
        if len(text) < self.min_chars:
            return compute(text)
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        key = (len(text), digest, extra)
        with self._lock:
            if key in self._results:
                self._results.move_to_end(key)
                return self._results[key]  # type: ignore[return-value]
        result = compute(text)
        with self._lock:
            self._results[key] = result
            while len(self._results) > self.size:
                self._results.popitem(last=False)
        return result
