"""numpy for a command that runs once and exits, without OpenBLAS's thread pool.

numpy's OpenBLAS starts a thread per core when numpy is imported, and gives each its
buffers: about 0.07 CPU s of `runwatch runs compare` on the project's two shared cores
(`python -c "import numpy"`: 0.24 CPU s, 0.17 with OPENBLAS_NUM_THREADS=1), for a pool a
command that never multiplies matrices does not use.
"""

from __future__ import annotations

import os
import sys

THREADS_VAR = "OPENBLAS_NUM_THREADS"


def import_numpy() -> None:
    """Import numpy (where this process has not yet) with OpenBLAS on the calling thread
    alone. The variable is set only while numpy loads: the processes a command starts later
    (a training job's) get the environment it was given. A value the user set is kept."""
    if "numpy" in sys.modules or THREADS_VAR in os.environ:
        return
    os.environ[THREADS_VAR] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        os.environ.pop(THREADS_VAR, None)
