"""Opening a run's files safely: regular files inside their run folder only, reads capped.

Whoever can write the runs folder decides what its entries are, so a reader of a run
file must not follow a symbolic link out of the folder (`config.yaml` linked to
`/proc/self/environ`), wait on a FIFO, or read a device or a huge file whole. Every
reader of run files opens them here:

- the run folder and the file are opened without following a symbolic link (the
  folder by `O_NOFOLLOW | O_DIRECTORY`, the file relative to it, also `O_NOFOLLOW`),
  so the file is one inside the run folder, whatever the path says;
- the file is opened non-blocking (a FIFO cannot stall the open) and accepted only if
  `fstat` says it is a regular file;
- whole-file reads stop at a cap per kind of file (`CAPS`, `SAMPLES_CAP`).

A refusal raises `UnsafeFile`, whose message says what was refused and why; the
indexer adds what it did instead and reports it as a problem of the run.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from runwatch.rundir import format as fmt

MiB = 1024 * 1024
# The most of each whole-file read: run files the SDK writes are far smaller.
CAPS = {fmt.MANIFEST: 1 * MiB, fmt.CONFIG: 4 * MiB, fmt.ENGINE_CONFIG: 4 * MiB}
SAMPLES_CAP = 64 * MiB

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class UnsafeFile(OSError):
    """A run file that runwatch refuses to read (a link, not a regular file, too big)."""


def open_run_file(path: Path) -> BinaryIO:
    """Open `path`, a file of a run folder, for reading in binary.

    Raises FileNotFoundError when it does not exist and UnsafeFile when the run folder
    or the file is a symbolic link or the file is not a regular file.
    """
    try:
        folder = os.open(path.parent, _DIR_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafeFile(f"{path.parent} is a symbolic link or not a folder; runwatch "
                             "reads only run folders that are real folders in the runs "
                             "folder") from None
        raise
    try:
        fd = os.open(path.name, _FILE_FLAGS, dir_fd=folder)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFile(f"{path} is a symbolic link; runwatch reads only regular files "
                             "inside the run folder") from None
        raise
    finally:
        os.close(folder)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise UnsafeFile(f"{path} is not a regular file (a FIFO, device, socket or folder); "
                         "runwatch reads only regular files")
    return os.fdopen(fd, "rb")


def read_capped(path: Path, cap: int | None = None) -> bytes:
    """The whole of a run file of at most `cap` bytes (by default its kind's cap)."""
    limit = CAPS[path.name] if cap is None else cap
    with open_run_file(path) as f:
        size = os.fstat(f.fileno()).st_size
        data = f.read(limit + 1) if size <= limit else b""
    if size > limit or len(data) > limit:
        raise UnsafeFile(f"{path} is {max(size, len(data))} bytes, over the {limit}-byte "
                         "limit for this kind of run file")
    return data
