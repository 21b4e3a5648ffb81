"""An uncaught exception in a thread other than the main one: a run that thread started
ends at once as the main thread's exception would end it (the catalogue's reason, the
traceback in logs.jsonl), whether or not the process lives on; every other live run logs
it as an error line with its traceback, and ends with its reason should the process
leave it unfinished. Real scripts in subprocesses, as pytest replaces
threading.excepthook in its own process."""

from __future__ import annotations

from pathlib import Path

from runwatch.jobs.failures import CATALOGUE
from runwatch.rundir import format as fmt
from tests.support.scripts import records, run_script


def test_a_run_whose_thread_dies_of_device_oom_ends_failed_with_its_code(
        runs_dir: Path) -> None:
    proc = run_script("""
        import sys, threading, runwatch

        class OOM(RuntimeError):
            pass

        def train():
            run = runwatch.init(name="r", dir=sys.argv[1])
            for step in range(5):
                run.log({"loss": 1.0}, step=step)
            raise OOM("CUDA out of memory. Tried to allocate 2.00 GiB")

        t = threading.Thread(target=train, name="trainer")
        t.start()
        t.join()
        print("main thread ends normally")
    """, runs_dir)
    assert "CUDA out of memory" in proc.stderr  # the thread's traceback, as without runwatch
    end = records(runs_dir, "r", fmt.EVENTS)[-1]
    assert (end["phase"], end["code"]) == ("FAILED", "device_oom")
    assert end["reason"] == CATALOGUE["device_oom"].sentence
    [error] = records(runs_dir, "r", fmt.LOGS)
    assert error["level"] == "error"
    assert error["data"]["exception"] == "__main__.OOM"
    assert ", in train\n" in error["data"]["traceback"]


def test_the_run_ends_when_its_thread_dies_while_the_process_lives_on(runs_dir: Path) -> None:
    # Before, it stayed RUNNING for as long as the process (an app, a server) lived.
    proc = run_script("""
        import json, sys, threading, runwatch
        from pathlib import Path

        def train():
            run = runwatch.init(name="r", dir=sys.argv[1])
            run.log({"loss": 1.0}, step=0)
            raise MemoryError()

        t = threading.Thread(target=train)
        t.start()
        t.join()
        events = Path(sys.argv[1], "r", "events.jsonl").read_text().splitlines()
        print(json.loads(events[-1])["code"])
    """, runs_dir)
    assert proc.stdout.strip() == "host_oom"
    [error] = records(runs_dir, "r", fmt.LOGS)
    assert error["data"]["exception"] == "MemoryError"


def test_a_helper_thread_that_dies_is_logged_and_the_run_goes_on(runs_dir: Path) -> None:
    proc = run_script("""
        import sys, threading, runwatch
        run = runwatch.init(name="r", dir=sys.argv[1])

        def prefetch():
            raise ValueError("bad shard 7")

        t = threading.Thread(target=prefetch, name="prefetch")
        t.start()
        t.join()
        run.log({"loss": 1.0}, step=0)
        quiet = threading.Thread(target=sys.exit)  # a thread's sys.exit() is no error
        quiet.start()
        quiet.join()
        run.finish()
    """, runs_dir)
    assert "bad shard 7" in proc.stderr
    assert [e["phase"] for e in records(runs_dir, "r", fmt.EVENTS)] == ["RUNNING", "SUCCEEDED"]
    [error] = records(runs_dir, "r", fmt.LOGS)
    assert error["level"] == "error"
    assert "'prefetch'" in error["message"] and "bad shard 7" in error["message"]
    assert error["data"]["exception"] == "ValueError"
    assert ", in prefetch\n" in error["data"]["traceback"]


def test_a_run_left_unfinished_after_a_thread_died_ends_with_that_reason(
        runs_dir: Path) -> None:
    # The main thread waits for a training thread that ran out of memory, then returns
    # without finish(): the run ran out of memory, it did not merely stop early.
    run_script("""
        import sys, threading, runwatch
        run = runwatch.init(name="r", dir=sys.argv[1])

        def train():
            run.log({"loss": 1.0}, step=0)
            raise MemoryError("out of memory")

        t = threading.Thread(target=train)
        t.start()
        t.join()
    """, runs_dir)
    end = records(runs_dir, "r", fmt.EVENTS)[-1]
    assert (end["phase"], end["code"]) == ("FAILED", "host_oom")
    assert all(line["data"]["exception"] == "MemoryError"
               for line in records(runs_dir, "r", fmt.LOGS))
