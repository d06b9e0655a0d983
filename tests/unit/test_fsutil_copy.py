"""fsutil.copy_range: a byte range copied between open files, by the kernel or, where it has no
copy_file_range (macOS), by pread and pwrite; a source that ends early is an error, not a short copy."""

from __future__ import annotations

import errno
import os

import pytest

from workstation.fsutil import copy_range


@pytest.mark.parametrize("kernel", [True, False], ids=["copy_file_range", "pread-pwrite"])
def test_a_range_lands_where_it_is_asked_to(tmp_path, monkeypatch, kernel):
    if not kernel:
        monkeypatch.delattr(os, "copy_file_range", raising=False)
    data = os.urandom(3 << 20)
    (tmp_path / "src").write_bytes(data)
    (tmp_path / "dst").write_bytes(b"keep")
    with open(tmp_path / "src", "rb") as src, open(tmp_path / "dst", "r+b") as dst:
        copy_range(src.fileno(), dst.fileno(), len(data) - 1000, 1000, 4)
        with pytest.raises(OSError) as err:
            copy_range(src.fileno(), dst.fileno(), 10, len(data) - 5, 4 + len(data))
    assert err.value.errno == errno.EIO
    assert (tmp_path / "dst").read_bytes()[:4 + len(data) - 1000] == b"keep" + data[1000:]
