"""Ctrl-C while finish() waits for the writer (a slow disk, NFS) still writes the run's
end and what was queued before it, then stops as asked.

Found in a trial (session 36): finish() had marked the run finished before it waited, so
the exit hook, finding it finished, waited for nothing; the daemon writer died with the
process, and the run stayed RUNNING (process gone) without its last log line."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from runwatch.rundir import format as fmt
from tests.support.scripts import CHILD_TIMEOUT_S, records

SCRIPT = textwrap.dedent("""
    import os, signal, sys, time, runwatch
    class Slow:  # a value the writer takes long to convert: a slow disk's stand-in
        def tolist(self):
            # converted in the writer's last batch, while finish() waits for it: Ctrl-C
            # comes now, as a user's would, and the conversion goes on
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(2)
            return 1
    # the writer wakes only when finish() asks it: the slow value is converted in its wait
    run = runwatch.init(project="p", name="slow-end", dir=sys.argv[1], flush_interval=600)
    for step in range(20):
        run.log({"loss": 1.0}, step=step)
    run.log_text("slow", data={"v": Slow()})
    run.finish()
""")



def test_ctrl_c_while_finish_waits_still_writes_the_runs_end(runs_dir: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(runs_dir)],
                          capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    err = proc.stderr
    assert "KeyboardInterrupt" in err, "it stops as asked"
    phases = [e["phase"] for e in records(runs_dir, "slow-end", fmt.EVENTS)]
    assert phases == ["RUNNING", "SUCCEEDED"], (phases, err[-2000:])
    assert [r["message"] for r in records(runs_dir, "slow-end", fmt.LOGS)] == ["slow"]
