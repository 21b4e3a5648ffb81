"""How a W&B script that ends without `finish()` ends its run under
`import runwatch.compat.wandb as wandb`: whatever call ends it (`sys.exit`, the builtin
`exit` and `quit`, an `exit` imported from sys before `init`), the run ends as the
status the process exits with; a `raise SystemExit(...)`, whose status no hook sees, is
said so. Real scripts in subprocesses, the runs read back through the index."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.compat.test_wandb import read, run_script


def script(tmp_path: Path, body: str, head: str = "") -> Path:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(head) + "import sys\nimport runwatch.compat.wandb as wandb\n"
                    + textwrap.dedent(body))
    return path


def ended(tmp_path: Path, name: str) -> tuple[str, str | None]:
    got = read(tmp_path, "get", name)["run"]
    return got["status"], got["reason_code"]


@pytest.mark.parametrize(("head", "call"), [
    ("", "exit(3)"),                                # the builtin (site's) exit
    ("", "quit(3)"),
    ("from sys import exit\n", "exit(3)"),          # bound before init, as W&B would miss it
    ("from sys import exit as leave\n", "leave(3)"),
    ("import sys as system\nbye = system.exit\n", "bye(3)"),
])
def test_every_exit_call_that_ends_the_script_fails_its_run(
        tmp_path: Path, head: str, call: str) -> None:
    path = script(tmp_path, f"""
        def main():
            wandb.init(name="exit")
            wandb.log({{"a": 1}}, commit=False)
            {call}
        main()
    """, head)
    proc = run_script(path, tmp_path)
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert ended(tmp_path, "exit") == ("FAILED", "failed")
    assert read(tmp_path, "metrics", "exit")["steps"][0]["measured"] == {"a": 1.0}


@pytest.mark.parametrize("call", ["exit()", "exit(0)", "quit(None)", "sys.exit()"])
def test_an_exit_with_a_good_status_succeeds(tmp_path: Path, call: str) -> None:
    proc = script(tmp_path, f"""
        wandb.init(name="fine")
        wandb.log({{"a": 1}})
        {call}
    """)
    assert run_script(proc, tmp_path).returncode == 0
    assert ended(tmp_path, "fine") == ("SUCCEEDED", None)


def test_a_status_given_as_text_fails_the_run(tmp_path: Path) -> None:
    path = script(tmp_path, """
        wandb.init(name="text")
        exit("the data set is empty")
    """)
    proc = run_script(path, tmp_path)
    assert proc.returncode == 1 and "the data set is empty" in proc.stderr
    assert ended(tmp_path, "text") == ("FAILED", "failed")


def test_an_exit_the_script_catches_and_goes_on_from_does_not_fail_the_run(
        tmp_path: Path) -> None:
    path = script(tmp_path, """
        wandb.init(name="caught")
        try:
            sys.exit(3)   # argparse's way of saying a bad argument; the script recovers
        except SystemExit:
            pass
        wandb.log({"a": 1})
    """)
    assert run_script(path, tmp_path).returncode == 0
    assert ended(tmp_path, "caught") == ("SUCCEEDED", None)


def test_a_raised_system_exit_whose_status_is_unseen_is_said_so(tmp_path: Path) -> None:
    path = script(tmp_path, """
        wandb.init(name="raised")
        wandb.log({"a": 1})
        raise SystemExit(3)
    """)
    proc = run_script(path, tmp_path)
    assert proc.returncode == 3
    # CPython keeps that status from Python code until the atexit hooks have run: the run
    # ends as W&B ends it, and both the script's output and the run's log say why, and
    # what to write instead.
    assert ended(tmp_path, "raised") == ("SUCCEEDED", None)
    said = "ended by a SystemExit raised without sys.exit()"
    assert proc.stderr.count(said) == 1, proc.stderr[-3000:]
    logs = read(tmp_path, "logs", "raised")
    assert [line["level"] for line in logs if said in line["message"]] == ["WARNING"]
    assert "sys.exit(status)" in proc.stderr


@pytest.mark.parametrize("launch", ["runpy", "pdb"])
def test_a_script_run_by_runpy_or_pdb_that_ends_well_is_not_warned_of(
        tmp_path: Path, launch: str) -> None:
    """runpy and pdb run a script in a __main__ of their own, which keeps its __file__
    at a normal end: the shim read that as a raised SystemExit and warned of it (found in
    review)."""
    path = script(tmp_path, """
        wandb.init(name="launched")
        wandb.log({"a": 1})
    """)
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    env.pop("RUNWATCH_DIR", None)
    argv = ([sys.executable, "-c", f"import runpy; runpy.run_path({str(path)!r}, "
             "run_name='__main__')"] if launch == "runpy"
            else [sys.executable, "-m", "pdb", str(path)])
    proc = subprocess.run(argv, cwd=tmp_path, env=env, input="c\nq\n", capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "SystemExit raised without sys.exit()" not in proc.stdout + proc.stderr
    assert ended(tmp_path, "launched") == ("SUCCEEDED", None)


def test_the_noted_sys_exit_still_pickles_as_sys_exit(tmp_path: Path) -> None:
    """The shim's sys.exit is a wrapper; named as the function it wraps, it pickles as
    `sys.exit` (a closure of its own name could not be pickled; found in review)."""
    path = script(tmp_path, """
        import pickle
        wandb.init(name="pickled")
        print(pickle.loads(pickle.dumps(sys.exit)) is sys.exit)
        wandb.finish()
    """)
    proc = run_script(path, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "True"
