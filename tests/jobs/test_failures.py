"""The failure catalogue, `exception_verdict` and `classify`: each way an attempt can end,
including real child processes, gets its reason (a recorded code first, the old wording
of runs from before codes next), and no reason but a refusal carries what the job
printed."""

from __future__ import annotations

import errno
import itertools
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from runwatch.jobs.failures import (
    CATALOGUE,
    MAX_REFUSAL_CHARS,
    Activity,
    AttemptEnd,
    RefusedInput,
    Verdict,
    classify,
    ending_signal,
    exception_verdict,
    refusal_of,
    traceback_exception,
)
from runwatch.recipes.chat import RowRefusal, SetupError, validate_messages
from runwatch.recipes.config import ConfigError
from runwatch.recipes.wandb_bridge import WandbSetupError
from runwatch.rundir import format as fmt

TORCH_OOM = ("Traceback (most recent call last):\n  File \"/srv/secretproj/train.py\", line 9, "
             "in <module>\n    loss.backward()\ntorch.OutOfMemoryError: CUDA out of memory. "
             "Tried to allocate 20.00 GiB (GPU 0; 79.15 GiB total capacity)\n")
REFUSAL = "row 3 ends with a user message; end the conversation with the assistant's reply"

# (what the worker observed, the phase it ends in, the catalogue reason)
CASES: list[tuple[str, AttemptEnd, str, str | None]] = [
    ("finished", AttemptEnd(exit_code=0, sdk_phase="SUCCEEDED"), "SUCCEEDED", None),
    ("finished, then killed in teardown", AttemptEnd(signal=9, sdk_phase="SUCCEEDED"),
     "SUCCEEDED", None),
    ("a command that records nothing exits 0", AttemptEnd(exit_code=0), "SUCCEEDED", None),
    ("exits 0 after a memory warning", AttemptEnd(exit_code=0, stderr_tail=TORCH_OOM),
     "SUCCEEDED", None),
    ("cancelled before any process of it ran", AttemptEnd(cancel_requested=True),
     "CANCELLED", "cancelled_before_start"),
    ("cancelled by runwatch", AttemptEnd(signal=15, cancel_requested=True), "CANCELLED",
     "cancelled"),
    ("cancelled, SDK recorded it", AttemptEnd(exit_code=1, sdk_phase="CANCELLED",
                                              sdk_code="cancelled", cancel_requested=True),
     "CANCELLED", "cancelled"),
    ("cancelled while failing", AttemptEnd(exit_code=1, sdk_phase="FAILED",
                                           cancel_requested=True), "CANCELLED", "cancelled"),
    ("its worker was told to stop", AttemptEnd(signal=15, worker_stopped=True), "CANCELLED",
     "worker_stopped"),
    ("its worker was told to stop, SDK recorded it", AttemptEnd(
        exit_code=1, sdk_phase="CANCELLED", sdk_code="worker_stopped", worker_stopped=True),
     "CANCELLED", "worker_stopped"),
    ("its worker stopped it, then a reaper concluded it", AttemptEnd(
        worker_lost=True, worker_stopped=True), "CANCELLED", "worker_stopped"),
    ("SDK recorded its worker's stop, reaped", AttemptEnd(
        exit_code=1, sdk_phase="CANCELLED", sdk_code="worker_stopped"), "CANCELLED",
     "worker_stopped"),
    ("its worker was told to stop, a cancel was asked too", AttemptEnd(
        signal=15, worker_stopped=True, cancel_requested=True), "CANCELLED", "cancelled"),
    ("finished before its stopping worker's stop took effect", AttemptEnd(
        exit_code=0, sdk_phase="SUCCEEDED", worker_stopped=True), "SUCCEEDED", None),
    ("could not start", AttemptEnd(start_failed=True), "FAILED", "could_not_start"),
    ("devices never answered", AttemptEnd(devices_timed_out=True), "FAILED",
     "devices_unreachable"),
    ("hung while preparing", AttemptEnd(signal=9, startup_timed_out=True), "FAILED",
     "startup_timeout"),
    ("worker lost", AttemptEnd(worker_lost=True), "FAILED", "stopped_early"),
    ("refused input", AttemptEnd(exit_code=1, sdk_phase="FAILED", sdk_reason=REFUSAL,
                                 sdk_code="refused"), "FAILED", "refused"),
    ("SDK's device OOM code", AttemptEnd(exit_code=1, sdk_phase="FAILED", sdk_code="device_oom",
                                         sdk_reason=CATALOGUE["device_oom"].sentence),
     "FAILED", "device_oom"),
    ("SDK's host OOM code", AttemptEnd(exit_code=1, sdk_phase="FAILED", sdk_code="host_oom",
                                       sdk_reason=CATALOGUE["host_oom"].sentence),
     "FAILED", "host_oom"),
    ("the code beats stderr's wording", AttemptEnd(exit_code=1, sdk_phase="FAILED",
                                                    sdk_code="failed", stderr_tail=TORCH_OOM),
     "FAILED", "failed"),
    ("SDK's code for exit without finish()", AttemptEnd(
        exit_code=0, sdk_phase="FAILED", sdk_code="stopped_early",
        sdk_reason=CATALOGUE["stopped_early"].sentence), "FAILED", "stopped_early"),
    # the SDK tells a cancel (job control's note) from a stop from outside itself: what it
    # records stands, and a cancel recorded (or a program's own finish("CANCELLED")) is
    # not queued again
    ("a cancel the SDK recorded", AttemptEnd(
        signal=2, sdk_phase="CANCELLED", sdk_code="cancelled",
        sdk_reason=CATALOGUE["cancelled"].sentence), "CANCELLED", "cancelled"),
    ("SIGTERM from outside, SDK recorded it", AttemptEnd(
        exit_code=130, sdk_phase="FAILED", sdk_code="stopped",
        sdk_reason=CATALOGUE["stopped"].sentence), "FAILED", "stopped"),
    ("a code that does not fit its phase", AttemptEnd(exit_code=1, sdk_phase="FAILED",
                                                       sdk_code="cancelled",
                                                       stderr_tail=TORCH_OOM),
     "FAILED", "device_oom"),
    ("an unknown code", AttemptEnd(exit_code=1, sdk_phase="FAILED", sdk_code="martian",
                                   sdk_reason="bad shard"), "FAILED", "failed"),
    ("a refusal code with no text", AttemptEnd(exit_code=1, sdk_phase="FAILED",
                                               sdk_code="refused", sdk_reason=" "),
     "FAILED", "failed"),
    ("OOM killer", AttemptEnd(signal=9, oom_killed=True), "FAILED", "host_oom"),
    ("OOM killer, evaluating", AttemptEnd(signal=9, oom_killed=True,
                                          activity=Activity.EVALUATION), "FAILED",
     "eval_host_oom"),
    ("SIGKILL from outside", AttemptEnd(signal=9), "FAILED", "stopped"),
    ("SIGTERM from outside", AttemptEnd(signal=15), "FAILED", "stopped"),
    ("a shell reports SIGKILL", AttemptEnd(exit_code=137), "FAILED", "stopped"),
    ("segfault", AttemptEnd(signal=11), "FAILED", "failed"),
    ("Ctrl-C from outside", AttemptEnd(exit_code=1, sdk_phase="CANCELLED",
                                       sdk_reason="the training job was stopped"),
     "FAILED", "stopped"),
    ("torch OOM by name", AttemptEnd(exit_code=1, exception_type="torch.OutOfMemoryError"),
     "FAILED", "device_oom"),
    ("torch OOM traceback", AttemptEnd(exit_code=1, stderr_tail=TORCH_OOM), "FAILED",
     "device_oom"),
    ("rollout engine OOM", AttemptEnd(exit_code=1, stderr_tail=TORCH_OOM,
                                      activity=Activity.ROLLOUT_ENGINE), "FAILED",
     "rollout_engine_oom"),
    ("weight handoff OOM", AttemptEnd(exit_code=1, stderr_tail=TORCH_OOM,
                                      activity=Activity.WEIGHT_HANDOFF), "FAILED",
     "weight_handoff_oom"),
    ("evaluation OOM", AttemptEnd(exit_code=1, stderr_tail=TORCH_OOM,
                                  activity=Activity.EVALUATION), "FAILED", "eval_device_oom"),
    ("evaluation engine OOM", AttemptEnd(exit_code=1, stderr_tail=TORCH_OOM,
                                         activity=Activity.EVALUATION_ENGINE), "FAILED",
     "eval_engine_oom"),
    ("CUDA runtime OOM", AttemptEnd(exit_code=1, stderr_tail="RuntimeError: CUDA error: out "
                                    "of memory\nCUDA kernel errors might be reported"),
     "FAILED", "device_oom"),
    ("XLA OOM", AttemptEnd(exit_code=1, stderr_tail="jaxlib.xla_extension.XlaRuntimeError: "
                           "RESOURCE_EXHAUSTED: Out of memory allocating 123 bytes"),
     "FAILED", "device_oom"),
    ("an old run's SDK recorded a device OOM", AttemptEnd(
        exit_code=1, sdk_phase="FAILED",
        sdk_reason="the training loop raised OutOfMemoryError: CUDA out of memory"),
     "FAILED", "device_oom"),
    ("MemoryError", AttemptEnd(exit_code=1, exception_type="MemoryError"), "FAILED",
     "host_oom"),
    ("CPU allocator", AttemptEnd(exit_code=1, stderr_tail="RuntimeError: [enforce fail at "
                                 "alloc_cpu.cpp:83] DefaultCPUAllocator: can't allocate "
                                 "memory: you tried to allocate 8 bytes"),
     "FAILED", "host_oom"),
    ("a full disk, no SDK", AttemptEnd(exit_code=1, stderr_tail="Traceback (most recent "
                                       "call last):\nOSError: [Errno 28] No space left on "
                                       "device"), "FAILED", "disk_full"),
    ("a full disk under torch.save", AttemptEnd(
        exit_code=1, stderr_tail="RuntimeError: [enforce fail at inline_container.cc:672] . "
        "unexpected pos 640 vs 534"), "FAILED", "disk_full"),
    ("the SDK's disk_full code", AttemptEnd(exit_code=1, sdk_phase="FAILED",
                                            sdk_code="disk_full",
                                            sdk_reason=CATALOGUE["disk_full"].sentence),
     "FAILED", "disk_full"),
    ("exited without finish()", AttemptEnd(
        exit_code=0, sdk_phase="FAILED", sdk_reason="the training job stopped before it "
        "finished (the process exited without calling finish())"), "FAILED", "stopped_early"),
    ("SDK's own default reason", AttemptEnd(
        exit_code=1, sdk_phase="FAILED",
        sdk_reason="the training job failed; the run ID is what support needs"),
     "FAILED", "failed"),
    ("an exception an old run's SDK recorded", AttemptEnd(
        exit_code=1, sdk_phase="FAILED",
        sdk_reason="the training loop raised KeyError: 'answer'"), "FAILED", "failed"),
    ("a loop's own fail() text", AttemptEnd(exit_code=1, sdk_phase="FAILED",
                                            sdk_reason="bad shard in /data/x"),
     "FAILED", "failed"),
    ("a traceback, no SDK", AttemptEnd(exit_code=1, stderr_tail="Traceback (most recent call "
                                       "last):\nValueError: nope\n"), "FAILED", "failed"),
    ("exit 3, nothing said", AttemptEnd(exit_code=3), "FAILED", "stopped_early"),
    ("nothing observed at all", AttemptEnd(), "FAILED", "stopped_early"),
]


@pytest.mark.parametrize(("end", "phase", "reason"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_classify(end: AttemptEnd, phase: str, reason: str | None) -> None:
    verdict = classify(end)
    assert (verdict.phase, verdict.reason and verdict.reason.id) == (phase, reason)
    assert verdict.code == reason
    if reason is None:
        assert verdict.text is None
    elif reason == "refused":
        assert verdict.text == end.sdk_reason
    else:
        assert verdict.text == CATALOGUE[reason].sentence


def test_every_reason_is_reachable_and_phases_are_terminal() -> None:
    assert {c[3] for c in CASES} - {None} == set(CATALOGUE)
    assert {c[2] for c in CASES} == fmt.TERMINAL_PHASES


def test_the_catalogue_s_entries_read_as_one_sentence_and_say_what_to_do() -> None:
    assert [r.id for r in CATALOGUE.values() if r.refusal] == ["refused"]
    for reason in CATALOGUE.values():
        assert reason.sentence[0].islower() and not reason.sentence.endswith(".")
        assert "\n" not in reason.sentence + reason.what_to_do
        assert reason.what_to_do[0].isupper() and reason.what_to_do.endswith(".")
    failing = [r for r in CATALOGUE.values() if r.phase == "FAILED"]
    assert len({r.sentence for r in failing}) == len(failing)
    assert {r.id: r.phase for r in CATALOGUE.values() if r.phase != "FAILED"} == {
        "cancelled": "CANCELLED", "cancelled_before_start": "CANCELLED",
        "worker_stopped": "CANCELLED"}


# The reasons a run started by hand can end with: those the SDK records for an exception
# that ended its loop (exception_verdict), and `stopped` for a SIGTERM from outside.
BY_HAND_ENDS = ("cancelled", "refused", "device_oom", "host_oom", "disk_full", "failed",
                "stopped")
# Advice only a job can follow: runwatch cannot retry or submit again a run that has no
# job.json, and such a run has no device profile to choose.
JOB_ONLY = ("retry", "submit the run again", "device profile", "whoever runs your workers")


def test_a_run_started_by_hand_gets_advice_it_can_follow() -> None:
    """Trial 35, D3: a cancelled run started by hand was told to retry the run."""
    assert {exception_verdict(e).code for e in (
        KeyboardInterrupt(), RuntimeError("x"), MemoryError(), OSError(errno.ENOSPC, "full"),
        RefusedInput("row 3 ends with a user message"))} <= set(BY_HAND_ENDS)
    for reason in CATALOGUE.values():
        assert reason.advice(job=True) == reason.what_to_do
        by_hand = reason.advice(job=False)
        assert by_hand[0].isupper() and by_hand.endswith(".") and "\n" not in by_hand
        if reason.id in BY_HAND_ENDS:
            assert not any(w in by_hand.lower() for w in JOB_ONLY), (reason.id, by_hand)


SECRETS = ["SECRET-7f3a", "/home/alice/proj/train_secret.py", "mycorp.internal.trainer",
           "NCCL WARN SECRET-nccl"]


def _leaky_ends() -> list[AttemptEnd]:
    """Every combination of the flags, with secrets wherever a process writes text."""
    texts = [f"{kind}: {s}" for kind, s in zip(
        ["torch.OutOfMemoryError", "MemoryError", "KeyError", "RuntimeError"], SECRETS,
        strict=True)]
    sdk = [(None, None, None),
           ("FAILED", f"the training loop raised ValueError: {SECRETS[0]}", None),
           ("FAILED", f"the training job ran out of device memory; {SECRETS[1]}", None),
           ("FAILED", SECRETS[2], None), ("CANCELLED", SECRETS[3], None),
           ("FAILED", SECRETS[0], "failed"), ("FAILED", SECRETS[1], "device_oom"),
           ("CANCELLED", SECRETS[3], "cancelled"), ("FAILED", SECRETS[2], "stopped_early")]
    ends = []
    for (phase, reason, sdk_code), tail, code, sig, flags in itertools.product(
            sdk, [*texts, "Traceback (most recent call last):\n" + texts[2]],
            [None, 0, 1, 137], [None, 9, 11], itertools.product([False, True], repeat=3)):
        oom, timed_out, lost = flags
        ends.append(AttemptEnd(exit_code=code, signal=sig, oom_killed=oom,
                               exception_type=f"{SECRETS[2]}.Boom", sdk_phase=phase,
                               sdk_reason=reason, sdk_code=sdk_code, stderr_tail=tail,
                               startup_timed_out=timed_out, worker_lost=lost))
    return ends


def test_no_reason_but_a_refusal_carries_what_the_process_wrote() -> None:
    sentences = {r.sentence for r in CATALOGUE.values() if not r.refusal}
    assert not any(s in sentence for s in SECRETS for sentence in sentences)
    ends = _leaky_ends()
    for end in ends:
        verdict = classify(end)
        assert verdict.text is None or verdict.text in sentences, end
        assert not any(s in (verdict.text or "") for s in SECRETS)
    reached = {v.reason.id for v in map(classify, ends) if v.reason}
    assert {"device_oom", "host_oom", "stopped", "failed", "stopped_early",
            "startup_timeout"} <= reached


def test_a_refusal_is_kept_on_one_line_and_capped() -> None:
    long = "row 9\n  is   long " + "x" * 900
    verdict = classify(AttemptEnd(exit_code=1, sdk_phase="FAILED", sdk_code="refused",
                                  sdk_reason=long))
    assert verdict.text is not None and verdict.text.startswith("row 9 is long x")
    assert len(verdict.text) == MAX_REFUSAL_CHARS and verdict.text.endswith("…")
    assert exception_verdict(RefusedInput(long)).text == verdict.text


def _row_refusal() -> RowRefusal:
    try:
        validate_messages(3, [{"role": "assistant", "content": "hi"},
                              {"role": "user", "content": "and?"}])
    except RowRefusal as exc:
        return exc
    raise AssertionError("the recipe accepted a conversation that ends with a user message")


@pytest.mark.parametrize("exc", [
    _row_refusal(), SetupError("init_from names no checkpoint: give a path"),
    ConfigError("max_steps must be at least 1"), WandbSetupError("set WANDB_API_KEY"),
], ids=type)
def test_what_the_recipes_raise_for_their_input_is_a_refusal(exc: Exception) -> None:
    assert isinstance(exc, RefusedInput) and refusal_of(exc) == str(exc)
    verdict = exception_verdict(exc)
    assert (verdict.phase, verdict.code, verdict.text) == ("FAILED", "refused", str(exc))
    recorded = AttemptEnd(exit_code=1, sdk_phase="FAILED", sdk_reason=verdict.text,
                          sdk_code=verdict.code)
    assert classify(recorded) == verdict


def test_the_recipes_row_refusal_names_the_row() -> None:
    assert refusal_of(_row_refusal()) == ("row 3 ends with a user message; end the conversation "
                                          "with the assistant's reply or drop the last user turn")


@pytest.mark.parametrize("exc", [ValueError("SECRET-1"), KeyError("SECRET-2"),
                                 RuntimeError("CUDA out of memory SECRET-3"), MemoryError()],
                         ids=type)
def test_any_other_exception_is_no_refusal(exc: Exception) -> None:
    assert refusal_of(exc) is None


class OutOfMemoryError(RuntimeError):
    """Named as PyTorch names its device out-of-memory error."""


class ShardOOM(OutOfMemoryError):
    """A framework's own subclass of it."""


def _raised_from(cause: BaseException, exc: Exception) -> Exception:
    try:
        raise exc from cause
    except Exception as raised:
        return raised


def _raised_while_handling(first: BaseException, exc: Exception) -> Exception:
    try:
        try:
            raise first
        except BaseException:
            raise exc  # noqa: B904 - its implicit context is the point
    except Exception as raised:
        return raised


@pytest.mark.parametrize(("exc", "reason"), [
    (OutOfMemoryError("Tried to allocate 2 GiB SECRET"), "device_oom"),
    (ShardOOM("SECRET"), "device_oom"),
    (RuntimeError("CUDA out of memory. Tried to allocate 2 GiB SECRET"), "device_oom"),
    (RuntimeError("CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate SECRET"),
     "device_oom"),
    (MemoryError(), "host_oom"),
    (RuntimeError("DefaultCPUAllocator: can't allocate memory: SECRET"), "host_oom"),
    (_raised_from(MemoryError(), ValueError("SECRET")), "host_oom"),
    (_raised_while_handling(OutOfMemoryError("SECRET"), KeyError("SECRET")), "device_oom"),
    (OSError(errno.ENOSPC, "No space left on device", "/ckpt/SECRET"), "disk_full"),
    (OSError(errno.EDQUOT, "Disk quota exceeded", "/ckpt/SECRET"), "disk_full"),
    (RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 640 vs 534"),
     "disk_full"),
    (_raised_from(OSError(errno.ENOSPC, "SECRET"), RuntimeError("saving failed SECRET")),
     "disk_full"),
    (OSError(errno.EACCES, "Permission denied SECRET"), "failed"),
    (KeyError("SECRET"), "failed"), (ValueError("out of bananas SECRET"), "failed"),
    (KeyboardInterrupt(), "cancelled"),
], ids=["torch-name", "subclass", "cuda-wording", "cublas", "host", "cpu-allocator",
        "wrapped-host", "while-handling-device", "enospc", "edquot", "torch-writer",
        "wrapped-enospc", "eacces", "key", "value", "ctrl-c"])
def test_an_exception_gets_its_catalogue_sentence_never_its_text(exc: BaseException,
                                                                reason: str) -> None:
    verdict = exception_verdict(exc)
    assert verdict.code == reason and verdict.text == CATALOGUE[reason].sentence
    assert verdict.phase == CATALOGUE[reason].phase and "SECRET" not in (verdict.text or "")


def test_pytorch_s_own_device_oom_is_device_oom() -> None:
    import torch

    for kind in (torch.cuda.OutOfMemoryError, torch.OutOfMemoryError):
        verdict = exception_verdict(kind("CUDA out of memory. Tried to allocate 2 GiB SECRET"))
        assert verdict.code == "device_oom" and "SECRET" not in (verdict.text or "")


def test_an_exception_whose_str_fails_still_gets_a_verdict() -> None:
    class Broken(RefusedInput):
        def __str__(self) -> str:
            raise RuntimeError("no text")

    assert exception_verdict(Broken()).code == "failed"


def test_sys_exit_0_succeeds_and_any_other_exit_fails() -> None:
    assert exception_verdict(SystemExit(0)) == exception_verdict(SystemExit()) == \
        Verdict("SUCCEEDED")
    assert exception_verdict(SystemExit(3)).code == exception_verdict(SystemExit("no")).code \
        == "failed"


def test_failures_imports_no_recipe_and_no_framework() -> None:
    code = ("import sys, runwatch.sdk, runwatch.jobs.failures\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'"
            " or m.startswith('runwatch.recipes')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=CHILD_TIMEOUT_S)
    assert out.stdout.strip() == "[]"


def test_traceback_exception_reads_the_last_traceback() -> None:
    chained = ("Traceback (most recent call last):\n  File \"a.py\"\nKeyError: 'x'\n\nDuring "
               "handling of the above exception, another exception occurred:\n\nTraceback "
               "(most recent call last):\n  File \"a.py\", line 3\n    boom()\n"
               "torch.OutOfMemoryError: CUDA out of memory\nwarning: later noise\n")
    assert traceback_exception(chained) == "torch.OutOfMemoryError"
    assert traceback_exception("Traceback (most recent call last):\nMemoryError\n") == \
        "MemoryError"
    assert traceback_exception("no traceback here\nKeyError: x") is None
    assert traceback_exception("Traceback (most recent call last):\n  File \"a.py\"\n") is None


# -- real processes ---------------------------------------------------------------------

CHILD_TIMEOUT_S = 120


def _ended(code: str, tmp_path: Path, kill: bool = False) -> AttemptEnd:
    """Run `code` in a child Python, and what a worker would observe of its end."""
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if kill:
        proc.send_signal(signal.SIGKILL)
    _, stderr = proc.communicate(timeout=CHILD_TIMEOUT_S)
    events = sorted(tmp_path.glob(f"runs/*/{fmt.EVENTS}"))
    last = orjson.loads(events[0].read_text().splitlines()[-1]) if events else {}
    phase = last.get("phase")
    return AttemptEnd.from_returncode(
        proc.returncode, stderr_tail=stderr[-4000:],
        sdk_phase=phase if phase in fmt.TERMINAL_PHASES else None,
        sdk_reason=last.get("reason"), sdk_code=last.get("code"))


ALLOCATE_UNTIL_REFUSED = """
import resource
resource.setrlimit(resource.RLIMIT_AS, (768 << 20, 768 << 20))
held = []
for _ in range(64):  # 2 GiB, far past the limit
    held.append(bytearray(32 << 20))
raise SystemExit("the address-space limit was not enforced")
"""
# /dev/full refuses every write with ENOSPC, as a full disk does.
WRITE_TO_A_FULL_DISK = """
with open("/dev/full", "wb") as checkpoint:
    checkpoint.write(b"weights SECRET" * 1024)
"""
SDK_CHILD = """
import runwatch
run = runwatch.init(name="child", dir="runs", flush_interval=0.05)
run.log({{"loss": 1.0}}, step=1)
{end}
"""


@pytest.mark.parametrize(("code", "kill", "reason"), [
    ("import time\ntime.sleep(60)", True, "stopped"),
    ("raise KeyError('SECRET-42 in /home/alice/mod.py')", False, "failed"),
    (ALLOCATE_UNTIL_REFUSED, False, "host_oom"),
    ("import torch\nraise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate "
     "20.00 GiB SECRET')", False, "device_oom"),
    ("import sys\nsys.exit(3)", False, "stopped_early"),
    (SDK_CHILD.format(end="raise KeyError('SECRET-42')"), False, "failed"),
    (SDK_CHILD.format(end="pass  # exits without finish()"), False, "stopped_early"),
    (SDK_CHILD.format(end="class OutOfMemoryError(RuntimeError): pass\n"
                          "with run: raise OutOfMemoryError('SECRET')"), False, "device_oom"),
    (SDK_CHILD.format(end="with run: raise MemoryError('SECRET')"), False, "host_oom"),
    (WRITE_TO_A_FULL_DISK, False, "disk_full"),
    ("import torch\ntorch.save({'w': torch.zeros(256, 256)}, '/dev/full')", False,
     "disk_full"),
    (SDK_CHILD.format(end="with run:\n" + textwrap.indent(WRITE_TO_A_FULL_DISK, "    ")),
     False, "disk_full"),
], ids=["sigkill", "exception", "memory-rlimit", "torch-oom", "exit-3", "sdk-exception",
        "sdk-no-finish", "sdk-device-oom", "sdk-host-oom", "full-disk", "torch-save-full-disk",
        "sdk-full-disk"])
def test_a_real_child_s_end_gets_its_reason(code: str, kill: bool, reason: str,
                                            tmp_path: Path) -> None:
    verdict = classify(_ended(code, tmp_path, kill))
    assert verdict.phase == "FAILED" and verdict.reason == CATALOGUE[reason]
    assert "SECRET" not in (verdict.text or "")


def test_a_real_child_s_refusal_keeps_its_own_words(tmp_path: Path) -> None:
    end = _ended(SDK_CHILD.format(end="from runwatch.sdk import RefusedInput\n"
                                      "with run: raise RefusedInput('row 3 is empty')"), tmp_path)
    assert (end.sdk_phase, end.sdk_code, end.sdk_reason) == ("FAILED", "refused", "row 3 is empty")
    assert classify(end).text == "row 3 is empty"


def test_a_real_child_that_finishes_succeeds(tmp_path: Path) -> None:
    end = _ended(SDK_CHILD.format(end="run.finish()"), tmp_path)
    assert (end.exit_code, end.sdk_phase) == (0, "SUCCEEDED")
    assert classify(end).phase == "SUCCEEDED"


@pytest.mark.parametrize(("script", "sig"), [
    ("kill -9 $$", signal.SIGKILL),
    ("sh -c 'kill -15 $$'; exit $?", signal.SIGTERM),  # a shell reports its child's as 143
    ("exit 139", None),  # a status over 128 the program chose itself, not a stop signal
    ("exit 3", None),
], ids=["killed", "shell-reports-sigterm", "exit-139", "exit-3"])
def test_the_signal_that_ended_a_real_process(script: str, sig: int | None) -> None:
    """One reading of a returncode, shared by classify and the workers' executors."""
    rc = subprocess.run(["sh", "-c", script], check=False).returncode
    assert ending_signal(rc) == sig
    assert (classify(AttemptEnd.from_returncode(rc)).reason
            == CATALOGUE["stopped" if sig else "stopped_early"])
