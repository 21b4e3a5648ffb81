"""Allocate host memory until the host stops it: a MemoryError when the process's address
space is limited (`ulimit -v`), or the kernel's OOM killer inside a memory-limited cgroup.

Run by a worker (it attaches to the job's run through RUNWATCH_RUN_DIR). One metric is
logged first, so the run was seen training when its memory ran out.
"""

from __future__ import annotations

import runwatch

CHUNK = 16 * 1024 * 1024
PAGE = 4096


def main() -> None:
    with runwatch.init(project="e2e") as run:
        run.log({"loss": 1.0}, step=0)
        held: list[bytearray] = []
        while True:
            block = bytearray(CHUNK)
            block[::PAGE] = b"\x01" * (CHUNK // PAGE)  # touch every page: memory in use
            held.append(block)


if __name__ == "__main__":
    main()
