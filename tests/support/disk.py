"""A real full disk for the tests: a 256 KiB tmpfs mounted for the test (mounting needs
root, as CI has; skipped where the test may not mount), filled with a plain file until the
kernel answers ENOSPC."""

from __future__ import annotations

import errno
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

DISK_BYTES = 256 * 1024
BLOCK = 4096  # tmpfs gives a file whole pages: a file's last page has room to append


@contextmanager
def small_disk(folder: Path, size_kib: int = DISK_BYTES // 1024) -> Iterator[Path]:
    """`folder` (made here) on a fresh filesystem of its own, of `size_kib` KiB (256)."""
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs",
                           str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def fill(folder: Path) -> Path:
    """Fill the disk `folder` is on until writes fail with ENOSPC; the filler file, to free
    it again."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as f:
        for _ in range(DISK_BYTES // BLOCK + 1):
            try:
                f.write(b"\0" * BLOCK)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                return filler
    pytest.fail(f"a {DISK_BYTES // 1024} KiB tmpfs took {DISK_BYTES + BLOCK} bytes without ENOSPC")
