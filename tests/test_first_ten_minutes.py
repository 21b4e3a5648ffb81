"""The first ten minutes (issue 17): every command `make demo` prints, and every `runwatch`
line of README's command lists, runs as printed in a fresh clone's environment and exits
0; the set-up prints no warning from the project's own files.

A "clone" is an empty folder whose `.venv` is the environment these tests run in (what
`make` sets up). The demo's commands come from its own code (`demo_steps`,
`next_commands`, `shown`), printed by the clone's interpreter with runwatch off PATH, as
after `make demo`. They run on a small fixture made with the SDK instead of the demo's
six minutes of training: the `submit` lines into an empty runs folder (as the demo ran
them), the others on runs of the demo's names that ended SUCCEEDED. README's lines run as
README says to run them, after `source .venv/bin/activate`, each on a fresh copy of the
same fixture: a placeholder takes its value from VALUES, an [optional] part is left out,
`a | b` is two commands, a recipe gets SHRINK's settings after its own (so it trains for
a step, not minutes), `health-eval` scores one held-out run of its corpus (tests/health
score them all), and a command that serves (ui, server, worker) must start, then stop on
Ctrl-C with exit 0. Each command is a test of its own, so that xdist spreads them.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import httpx
import pytest
from filelock import FileLock

import runwatch
from runwatch.cli.context import open_context
from runwatch.health.scoring import read_labels
from runwatch.jobs.control import cancel
from runwatch.rundir import format as fmt
from runwatch.server.runner import free_port
from runwatch.server.settings import DEFAULT_PORT
from tests.support import TINY_MODEL
from tests.support.jobs import submit_command
from tests.support.parallel import session_folder
from tests.support.wait import DEADLINE_S, wait_for

REPO = Path(__file__).resolve().parents[1]
STAMP = "20260101-120000"
SFT, GRPO, DPO = (f"demo-{m}-{STAMP}" for m in ("sft", "grpo", "dpo"))
# A placeholder of README's command lines -> the fixture's value for it.
VALUES = {"RUN": GRPO, "BASELINE": "sft-baseline", "DIR": "runs", "PATH": "trainer_state.json",
          "URL": "sqlite:///{clone}/runs/.runwatch/index.db", "<sft-run>": "sft", "K": "loss",
          "N": "1", "A:B": "0:2", "EXPR": ".status", "P": "cpu", "WORKER": "none"}
# The run a verb needs: cancel a job that waits, retry one that ended, compare a
# supervised run (with a baseline of the same plan).
RUN_OF_VERB = {"cancel": "queued-job", "retry": "ended-job", "compare": "sft-compared"}
# Settings after a recipe's own that make it train for a step on the tiny model.
SHRINK = {
    "sft": [*TINY_MODEL, "max_steps=2", "val_interval=2", "batch_size=8", "n_train=64",
            "n_val=8", "cache_dir=None"],
    "dpo": ["max_steps=1", "val_interval=1", "batch_size=4", "n_train=16", "n_val=4",
            "task=sort", "digits=4", "cache_dir=None"],
    "grpo": ["max_steps=1", "val_interval=1", "batch_size=2", "group_size=2", "n_train=16",
             "n_val=4", "max_sample_tokens=4", "task=sort", "digits=4"],
}
SERVES = {"ui": "runwatch is serving", "server": "runwatch is serving", "worker": "runs jobs"}


def _venv() -> Path:
    if sys.prefix == sys.base_prefix:
        pytest.skip("runs in the virtual environment `make` sets up")
    return Path(sys.prefix)


def _env(clone: Path, activated: bool) -> dict[str, str]:
    """The shell of a user after set-up: runwatch on PATH only once .venv is activated."""
    bin_dir = str(clone / ".venv" / "bin")
    path = [p for p in os.environ["PATH"].split(os.pathsep)
            if not (Path(p) / "runwatch").exists()]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "RUNWATCH_DIR")}
    env.update(PATH=os.pathsep.join([bin_dir, *path] if activated else path),
               HOME=str(clone / "home"), OMP_NUM_THREADS="1", WANDB_MODE="offline")
    if activated:
        env["VIRTUAL_ENV"] = str(clone / ".venv")
    return env


@pytest.fixture(scope="session")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("clone")
    (folder / ".venv").symlink_to(_venv(), target_is_directory=True)
    (folder / "home").mkdir()
    return folder


def _grpo_run(runs: Path, name: str) -> None:
    config = {"group_size": 4, "learning_rate": 1e-4, "batch_size": 2}
    with runwatch.init(project="recipes", name=name, dir=runs, method="grpo", config=config,
                       base_model="tiny-gpt", dataset="addition") as run:
        run.log_engine_config({"learning_rate": 1e-4}, {"optimizer": {"type": "AdamW"}})
        run.log_text("2 train and 2 validation prompts")
        for step in range(3):
            run.log({"loss": 1.0 / (step + 1), "reward_mean": 0.2 * step,
                     "val/accuracy": 0.1 * step}, step=step)
            run.log_samples(step, [{"prompt": "1+1", "completion": str(i), "reward": i % 2}
                                   for i in range(4)])


def _sft_run(runs: Path, name: str) -> None:
    config = {"batch_size": 8, "max_seq_length": 48, "learning_rate": 3e-3}
    with runwatch.init(project="recipes", name=name, dir=runs, method="sft", config=config,
                       base_model="tiny-gpt", dataset="addition") as run:
        for step in range(1, 31):
            run.log({"loss": 2.0 / step, "grad_norm": 1.0, "trained_tokens": 100.0,
                     "samples": 8.0}, step=step)


def _ended(runs: Path, name: str, method: str) -> None:
    with runwatch.init(project="recipes", name=name, dir=runs, method=method,
                       config={"max_steps": 2}) as run:
        run.log({"loss": 1.0}, step=1)


@pytest.fixture(scope="session")
def after_demo(clone: Path, sft_checkpoint: Path) -> Path:
    """A runs folder as the demo leaves it, plus what README's commands need: a real SFT
    checkpoint (`sft`), two supervised runs to compare, a job that waits and one that ended, and
    a TRL trainer_state.json to import. Saved beside the clone, restored before each
    command at the same path (the index keeps absolute paths)."""
    runs = clone / "runs"
    shutil.copytree(sft_checkpoint, runs / "sft")
    _ended(runs, SFT, "sft")
    _grpo_run(runs, GRPO)
    _sft_run(runs, "sft-compared")
    _sft_run(runs, "sft-baseline")
    _ended(runs, DPO, "dpo")
    ctx = open_context(runs, None)
    submit_command(ctx.engine, runs, "queued-job")
    ended = submit_command(ctx.engine, runs, "ended-job")
    # a training checkpoint its script keeps (the record names no file): retry --resume
    (ended.dir / fmt.CHECKPOINTS).write_text(json.dumps(
        {"seq": 0, "ts": 1.0, "step": 3, "kind": "training", "id": "ck-3"}) + "\n")
    cancel(ctx.engine, ended.run_pk, runs)
    ctx.engine.dispose()
    (clone / "trainer_state.json").write_text(json.dumps({"global_step": 2, "log_history": [
        {"step": 1, "loss": 2.0, "learning_rate": 1e-4, "epoch": 0.5},
        {"step": 2, "loss": 1.5, "learning_rate": 1e-4, "epoch": 1.0}]}))
    saved = clone.parent / f"{clone.name}-runs"
    shutil.copytree(runs, saved)
    return saved


def _restore(clone: Path, saved: Path | None) -> None:
    shutil.rmtree(clone / "runs", ignore_errors=True)
    if saved is None:
        (clone / "runs").mkdir()
    else:
        shutil.copytree(saved, clone / "runs")


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def _serve_then_stop(argv: list[str], clone: Path, env: dict[str, str], ready: str) -> str:
    """Start a command that serves, wait for its `ready` line, Ctrl-C it; '' when it
    exited 0, else what it printed."""
    proc = subprocess.Popen(argv, cwd=clone, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen: list[str] = []
    up = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for text in proc.stdout:
            seen.append(text)
            if ready in text:
                up.set()
        up.set()  # it ended

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        up.wait(DEADLINE_S)
        url = re.search(r"http://\S+", "".join(seen))
        if url is not None:  # a user opens the page before pressing Ctrl-C
            wait_for(lambda: _answers(url.group()), what="the page to answer")
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    reader.join(timeout=10)
    started = any(ready in s for s in seen)
    return "" if code == 0 and started else f"exit {code}, started={started}: {''.join(seen)}"


def _serving_lock(command: str, factory: pytest.TempPathFactory) -> AbstractContextManager[object]:
    """Held by a command that serves on runwatch's default port while it runs, so that two
    xdist workers never both find the port free and start on it at once."""
    if shlex.split(command)[1] not in ("ui", "server"):
        return nullcontext()
    return FileLock(session_folder(factory) / "default-port.lock")


def _run(command: str, clone: Path, env: dict[str, str]) -> str:
    """Run `command` (shell words) in the clone; '' when it exited 0, else why not."""
    argv = shlex.split(command)
    verb = argv[1]
    if verb in SERVES:
        if verb in ("ui", "server") and "--port" not in argv and not _port_free(DEFAULT_PORT):
            argv += ["--port", str(free_port())]  # another program holds the default
        return _serve_then_stop(argv, clone, env, SERVES[verb])
    proc = subprocess.run(argv, cwd=clone, env=env, capture_output=True, text=True,
                          timeout=600)
    return "" if proc.returncode == 0 else (
        f"exit {proc.returncode}: {proc.stdout[-1500:]}{proc.stderr[-1500:]}")


# -- the demo's commands --------------------------------------------------------------


def _demo_printed(clone: Path, port: int) -> dict[str, list[str]]:
    """What the demo prints (its `$` lines and its next: lines), printed by the clone's
    interpreter in the clone, runwatch off PATH."""
    code = ("import json, sys; from pathlib import Path; from runwatch.cli import demo\n"
            "runs, stamp, port = Path('runs'), sys.argv[1], int(sys.argv[2])\n"
            "print(json.dumps({'steps': [[s.kind, demo.shown(s.args)] for s in "
            "demo.demo_steps(runs, stamp)], 'next': [demo.shown(a) for a in "
            "demo.next_commands(runs, stamp, port)]}))")
    proc = subprocess.run([".venv/bin/python", "-c", code, STAMP, str(port)], cwd=clone,
                          env=_env(clone, activated=False), capture_output=True, text=True,
                          check=True)
    printed = json.loads(proc.stdout)
    return {"submit": [c for k, c in printed["steps"] if k == "submit"],
            "wait": [c for k, c in printed["steps"] if k == "wait"], "next": printed["next"]}


@pytest.fixture  # printed anew for each test: its `ui` line names a port free just now
def demo_printed(clone: Path) -> dict[str, list[str]]:
    env = _env(clone, activated=False)
    assert shutil.which("runwatch", path=env["PATH"]) is None  # as after `make demo`
    printed = _demo_printed(clone, free_port())
    assert len(printed["submit"]) == 3 and len(printed["wait"]) == 3
    assert all(c.startswith(".venv/bin/runwatch ") for cs in printed.values() for c in cs)
    return printed


@pytest.mark.parametrize("kind", ["submit", "wait", "next"])
def test_every_command_the_demo_prints_runs_as_printed(
        kind: str, clone: Path, after_demo: Path, demo_printed: dict[str, list[str]]) -> None:
    # The demo's submits go one after another into the runs folder it starts with; its
    # waits and next: lines each run on the runs it leaves (the fixture), restored before each.
    env = _env(clone, activated=False)
    failed = {}
    if kind == "submit":
        _restore(clone, None)
    for command in demo_printed[kind]:
        if kind != "submit":
            _restore(clone, after_demo)
        failed[command] = _run(command, clone, env)
    assert {c: why for c, why in failed.items() if why} == {}


def test_once_venv_is_active_the_printed_commands_start_with_plain_runwatch(
        clone: Path) -> None:
    code = "from runwatch.cli import demo; print(demo.shown(['runs', 'list']))"
    for activated, expected in ((True, "runwatch runs list"),
                                (False, ".venv/bin/runwatch runs list")):
        proc = subprocess.run([".venv/bin/python", "-c", code], cwd=clone, check=True,
                              env=_env(clone, activated), capture_output=True, text=True)
        assert proc.stdout.strip() == expected


# -- README's command lists -----------------------------------------------------------


def _without_optional(line: str) -> str:
    while True:
        shorter = re.sub(r"\s*\[[^\[\]]*\]", "", line)
        if shorter == line:
            return line
        line = shorter


def _alternatives(line: str) -> list[str]:
    """`runwatch runs a RUN | b RUN` -> `runwatch runs a RUN`, `runwatch runs b RUN`."""
    first, *others = [part.strip() for part in line.split(" | ")]
    words = first.split()
    literal = [w for w in words if re.fullmatch(r"[a-z][a-z0-9-]*", w)]
    out = [first]
    for other in others:
        own = 0
        for w in other.split():
            if not re.fullmatch(r"[a-z][a-z0-9-]*", w):
                break
            own += 1
        out.append(" ".join([*literal[: len(literal) - own], other]))
    return out


def readme_commands(text: str) -> list[str]:
    """Each `runwatch` line of README's shell blocks, as commands to run (see above)."""
    out = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for raw in block.splitlines():
            line = re.sub(r"\s+#.*$", "", raw).strip()
            if line.startswith("runwatch "):
                out += _alternatives(_without_optional(line))
    return out


def _a_held_out_run() -> str:
    """The held-out run whose log is smallest (its replay is the line's whole cost)."""
    real = REPO / "tests" / "data" / "real"
    labels = read_labels(real)
    held_out = [name for name, run in labels["runs"].items() if run["split"] == "holdout"]
    assert held_out, "the corpus has no held-out run for README's health-eval line"
    return min(held_out, key=lambda name: (real / name / labels["runs"][name]["file"])
               .stat().st_size)


def _filled(command: str, clone: Path) -> str:
    words = shlex.split(command)
    verb = next((w for w in words if w in RUN_OF_VERB), None)
    values = {**VALUES, "URL": VALUES["URL"].format(clone=clone),
              "RUN": RUN_OF_VERB.get(verb or "", VALUES["RUN"])}
    out = []
    for word in words:
        word = re.sub(r"<[a-z-]+>", lambda m: values[m.group()], word)
        if re.fullmatch(r"[A-Z][A-Z_:]*", word):
            assert word in values, f"README uses placeholder {word}: give it a value in VALUES"
            word = values[word]
        out.append(word)
    if words[1] == "recipes":
        out += SHRINK[words[2]]
    if words[1] == "health-eval" and "--split" not in words:
        out += ["--split", "holdout", "--run", _a_held_out_run()]
    return shlex.join(out)


def test_readme_lists_commands_and_says_how_to_reach_runwatch() -> None:
    text = (REPO / "README.md").read_text()
    commands = readme_commands(text)
    assert len(commands) >= 20
    assert "runwatch runs engine-config RUN" in commands  # `a | b` is two commands
    assert "source .venv/bin/activate" in text and ".venv/bin/runwatch" in text


README_COMMANDS = readme_commands((REPO / "README.md").read_text())


@pytest.mark.parametrize("command", README_COMMANDS)
def test_every_readme_command_runs_as_written_once_venv_is_active(
        command: str, clone: Path, after_demo: Path,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    # One test per command, so that xdist spreads them over its workers (one after
    # another they took 3.5 minutes); each worker has its own clone, restored before each.
    _restore(clone, after_demo)
    filled = _filled(command, clone)
    with _serving_lock(filled, tmp_path_factory):
        assert _run(filled, clone, _env(clone, activated=True)) == ""


# -- the set-up's own output ----------------------------------------------------------


def test_the_setup_prints_no_warning_from_the_projects_own_files(tmp_path: Path) -> None:
    """`make`'s install of the project, as the Makefile runs it (an editable install with
    build isolation), says nothing of its own: a Python warning (SetuptoolsDeprecationWarning
    and the like) would name pyproject.toml or the build of it. pip's own notes about the
    machine's package sources are the machine's, not the project's."""
    venv = _venv()
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--dry-run",
         "-e", str(REPO)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    output = proc.stdout + proc.stderr
    ours = [line for line in output.splitlines()
            if re.search(r"\w+Warning\b|pyproject\.toml|deprecat", line)]
    assert ours == [], "\n".join(ours)


def test_the_web_build_prints_no_warning(tmp_path: Path) -> None:
    """`make`'s build of the web app (vite, as `npm run build` runs it, into a folder of
    the test's own) warns of nothing, e.g. no chunk over vite's size limit."""
    vite = REPO / "web" / "node_modules" / ".bin" / "vite"
    if not vite.exists():
        pytest.skip("the web app's dependencies are not installed (make web installs them)")
    proc = subprocess.run([str(vite), "build", "--outDir", str(tmp_path / "static"),
                           "--emptyOutDir"], cwd=REPO / "web", capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    output = proc.stdout + proc.stderr
    warned = [line for line in output.splitlines() if "(!)" in line or "warn" in line.lower()]
    assert warned == [], "\n".join(warned)
