"""A process forked from one that records a run (os.fork(), a multiprocessing or DataLoader
worker) records nothing into that run: its exit ends no run, what it calls on the run it
inherited records nothing (one warning says so), it exits cleanly however busy the
parent's writer was, SIGTERM does in it what it did before runwatch, and it keeps no copy
of the run folder's lock. Real scripts in subprocesses; the run folders read back."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from runwatch.rundir import format as fmt
from tests.support import first_line
from tests.support.scripts import CHILD_TIMEOUT_S, records, run_script


def test_a_forked_child_that_exits_leaves_the_run_to_its_parent(runs_dir: Path) -> None:
    # The records are still queued when the child is forked (a long flush interval): its
    # exit wrote them, and a FAILED stopped_early, into the parent's run.
    run_script("""
        import os, sys, runwatch
        run = runwatch.init(name="r", dir=sys.argv[1], flush_interval=60)
        for step in range(5):
            run.log({"loss": 1.0}, step=step)
        pid = os.fork()
        if pid == 0:
            sys.exit(0)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        for step in range(5, 10):
            run.log({"loss": 0.5}, step=step)
        run.finish()
    """, runs_dir)
    events = records(runs_dir, "r", fmt.EVENTS)
    assert [(e["seq"], e["phase"]) for e in events] == [(0, "RUNNING"), (1, "SUCCEEDED")]
    metrics = records(runs_dir, "r", fmt.METRICS)
    assert [m["seq"] for m in metrics] == list(range(10))
    assert [m["step"] for m in metrics] == list(range(10))
    assert records(runs_dir, "r", fmt.LOGS) == []


def test_what_a_forked_worker_logs_is_not_recorded_and_warned_about_once(
        runs_dir: Path) -> None:
    # Past the writer's backlog (10,000 records) the child wrote into the parent's files
    # itself, with the parent's seqs, so the parent's later metrics collided and were lost.
    proc = run_script("""
        import multiprocessing as mp, sys, runwatch
        run = runwatch.init(name="r", dir=sys.argv[1])

        def work():
            for i in range(12_000):
                run.log({"child/progress": float(i)})
            run.log_text("from the worker")
            run.log_checkpoint(1, "training", "ckpt")
            run.set_manifest_fields(wandb_url="x")
            run.finish()

        if __name__ == "__main__":
            for step in range(10):
                run.log({"loss": 1.0}, step=step)
            p = mp.get_context("fork").Process(target=work)
            p.start()
            p.join()
            assert p.exitcode == 0, p.exitcode
            for step in range(10, 20):
                run.log({"loss": 0.5}, step=step)
            run.finish()
    """, runs_dir)
    metrics = records(runs_dir, "r", fmt.METRICS)
    assert [(m["seq"], m["step"]) for m in metrics] == [(i, i) for i in range(20)]
    assert all("child/progress" not in m for m in metrics)
    assert records(runs_dir, "r", fmt.LOGS) == []
    assert records(runs_dir, "r", fmt.CHECKPOINTS) == []
    assert [e["phase"] for e in records(runs_dir, "r", fmt.EVENTS)] == ["RUNNING", "SUCCEEDED"]
    assert "wandb_url" not in json.loads((runs_dir / "r" / fmt.MANIFEST).read_text())
    assert proc.stderr.count("records nothing") == 1, proc.stderr[-3000:]
    assert "runwatch.init() here" in proc.stderr


def test_children_forked_while_the_writer_writes_exit(runs_dir: Path) -> None:
    # A child forked while the writer's thread held its lock waited at exit for a lock no
    # thread of the child would ever let go (most of them, with a short flush interval).
    proc = run_script("""
        import os, sys, time, runwatch
        run = runwatch.init(name="r", dir=sys.argv[1], flush_interval=0.01)
        hung = 0
        for k in range(20):
            for s in range(1500):
                run.log({f"m{i}": float(s) for i in range(50)})
            pid = os.fork()
            if pid == 0:
                sys.exit(0)
            deadline = time.monotonic() + 30  # a hang's bound, not a timing
            while not os.waitpid(pid, os.WNOHANG)[0]:
                if time.monotonic() > deadline:
                    hung += 1
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                    break
                time.sleep(0.01)
        run.finish()
        print("hung", hung)
    """, runs_dir)
    assert proc.stdout.split() == ["hung", "0"]
    events = records(runs_dir, "r", fmt.EVENTS)
    assert [e["phase"] for e in events] == ["RUNNING", "SUCCEEDED"]
    seqs = [m["seq"] for m in records(runs_dir, "r", fmt.METRICS)]
    assert seqs == list(range(20 * 1500))


def test_a_worker_kept_past_finish_does_not_keep_the_run_locked(runs_dir: Path) -> None:
    # A persistent DataLoader or Pool worker holds a copy of the lock's descriptor: closing
    # the parent's left the folder locked, so the resume that follows train() (HF Trainer's
    # evaluate()) was refused as recorded by this very process.
    proc = run_script("""
        import multiprocessing as mp, sys, runwatch
        run = runwatch.init(name="r", dir=sys.argv[1])
        run.log({"loss": 1.0}, step=0)
        pool = mp.get_context("fork").Pool(1)
        assert pool.apply(abs, (-1,)) == 1
        run.finish()
        again = runwatch.init(name="r", dir=sys.argv[1], resume=True)
        again.log({"eval_loss": 0.5}, step=0)
        again.finish()
        pool.close()
        pool.join()
        print("resumed")
    """, runs_dir)
    assert proc.stdout.strip() == "resumed"
    assert [e["phase"] for e in records(runs_dir, "r", fmt.EVENTS)] == [
        "RUNNING", "SUCCEEDED", "RUNNING", "SUCCEEDED"]


def test_a_child_that_outlives_its_killed_parent_holds_no_lock(runs_dir: Path) -> None:
    # The kernel lets a lock go when its process ends, so a crashed run can be resumed;
    # not while a child it forked still held a copy of the descriptor.
    code = textwrap.dedent("""
        import os, sys, time, runwatch
        run = runwatch.init(name="r", dir=sys.argv[1])
        run.log({"loss": 1.0}, step=0)
        if os.fork() == 0:
            sys.stdin.readline()  # a worker that lives on until told
            os._exit(0)
        print("ready", flush=True)
        time.sleep(120)
    """)
    parent = subprocess.Popen([sys.executable, "-c", code, str(runs_dir)], text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              start_new_session=True)
    try:
        assert first_line(parent, what="the parent to fork its worker") == "ready"
        parent.kill()
        parent.wait(timeout=CHILD_TIMEOUT_S)
        resumed = run_script("""
            import sys, runwatch
            run = runwatch.init(name="r", dir=sys.argv[1], resume=True)
            run.finish()
            print("resumed")
        """, runs_dir)
        assert resumed.stdout.strip() == "resumed"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(parent.pid, signal.SIGKILL)  # the worker too
        parent.wait(timeout=CHILD_TIMEOUT_S)


def test_sigterm_ends_a_forked_child_as_it_would_without_runwatch(runs_dir: Path) -> None:
    # Pool.terminate() stops its workers with SIGTERM: each printed the SDK's
    # StopRequested traceback, and could hang the pool; and the child's exit then wrote
    # the parent's run CANCELLED.
    proc = run_script("""
        import multiprocessing as mp, os, signal, sys, time, runwatch
        run = runwatch.init(name="r", dir=sys.argv[1])
        with mp.get_context("fork").Pool(2) as pool:
            assert pool.map(abs, range(-4, 4)) == [4, 3, 2, 1, 0, 1, 2, 3]
            pool.apply_async(time.sleep, (60,))  # a worker busy when it is told to stop
            time.sleep(0.5)
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        os.kill(pid, signal.SIGTERM)
        status = os.waitpid(pid, 0)[1]
        print("signalled", os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM)
        run.finish()
    """, runs_dir)
    assert proc.stdout.split() == ["signalled", "True"]
    assert "StopRequested" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert [e["phase"] for e in records(runs_dir, "r", fmt.EVENTS)] == ["RUNNING", "SUCCEEDED"]


def test_a_forked_child_gets_back_the_sigterm_handler_the_process_had(runs_dir: Path) -> None:
    proc = run_script("""
        import os, signal, sys, time, runwatch
        signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(7))  # a framework's own
        run = runwatch.init(name="r", dir=sys.argv[1])
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        os.kill(pid, signal.SIGTERM)
        print("exit", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        run.finish()
    """, runs_dir)
    assert proc.stdout.split() == ["exit", "7"]
    assert [e["phase"] for e in records(runs_dir, "r", fmt.EVENTS)] == ["RUNNING", "SUCCEEDED"]


def test_a_forked_child_records_a_run_of_its_own_with_init(runs_dir: Path) -> None:
    run_script("""
        import os, sys, runwatch
        from runwatch.rundir.format import RunDirError
        run = runwatch.init(name="parent", dir=sys.argv[1])
        pid = os.fork()
        if pid == 0:
            try:
                runwatch.init(name="parent", dir=sys.argv[1], resume=True)
                os._exit(3)  # the parent records it: refused
            except RunDirError:
                pass
            with runwatch.init(name="child", dir=sys.argv[1]) as own:
                own.log({"x": 1.0}, step=0)
            sys.exit(0)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        run.finish()
    """, runs_dir)
    assert [e["phase"] for e in records(runs_dir, "parent", fmt.EVENTS)] == [
        "RUNNING", "SUCCEEDED"]
    assert [e["phase"] for e in records(runs_dir, "child", fmt.EVENTS)] == [
        "RUNNING", "SUCCEEDED"]
    assert [m["x"] for m in records(runs_dir, "child", fmt.METRICS)] == [1.0]
