"""RunwatchCallback in a notebook's kernel when Ctrl-C ("interrupt the kernel") stops
`trainer.train()`: the Trainer calls no callback when train() raises, and the kernel shows
the KeyboardInterrupt and goes on. The run ends CANCELLED, as the SDK's `with` block ends
on Ctrl-C, whether train() is run again (it ended FAILED, code `failed`) or the kernel
restarts; a Ctrl-C of another cell is not taken for training's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.notebook import events, run_cells

pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # the Trainer needs it

REPO = Path(__file__).resolve().parents[2]

# Ctrl-C at the end of step 2 of the first train(): SIGINT, as the kernel's interrupt
# sends it, raises KeyboardInterrupt in the training loop.
SETUP = f"""import os, signal, sys
sys.path.insert(0, {str(REPO)!r})
from transformers import Trainer, TrainerCallback, TrainingArguments
from runwatch.compat.hf import RunwatchCallback
from tests.compat.test_hf import tiny_model, tiny_rows

class CtrlC(TrainerCallback):
    sent = False
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 2 and not CtrlC.sent:
            CtrlC.sent = True
            os.kill(os.getpid(), signal.SIGINT)

args = TrainingArguments(output_dir='out', max_steps=4, logging_steps=1,
                         per_device_train_batch_size=4, save_steps=100, report_to='none',
                         use_cpu=True, disable_tqdm=True)
trainer = Trainer(model=tiny_model(), args=args, train_dataset=tiny_rows(),
                  callbacks=[RunwatchCallback(name='nb'), CtrlC()])"""


def ends(run_dir: Path) -> list[tuple[object, object]]:
    return [(e["phase"], e.get("code")) for e in events(run_dir)]


def test_a_train_that_ctrl_c_stopped_ends_cancelled_when_train_runs_again(
        tmp_path: Path) -> None:
    out = run_cells(tmp_path, [SETUP, "trainer.train()", "trainer.train()"], timeout=240)
    assert "cell error: KeyboardInterrupt" in out
    assert ends(tmp_path / "runs" / "nb") == [
        ("RUNNING", None), ("CANCEL_REQUESTED", None), ("CANCELLED", "cancelled")]
    assert ends(tmp_path / "runs" / "nb-2")[-1] == ("SUCCEEDED", None)


def test_a_train_that_ctrl_c_stopped_ends_cancelled_at_the_kernels_restart(
        tmp_path: Path) -> None:
    out = run_cells(tmp_path, [SETUP, "trainer.train()"], timeout=240)
    assert "cell error: KeyboardInterrupt" in out
    assert ends(tmp_path / "runs" / "nb")[-1] == ("CANCELLED", "cancelled")


def test_a_ctrl_c_of_another_cell_is_not_taken_for_trainings(tmp_path: Path) -> None:
    # train() stops by an error the cell catches; Ctrl-C then stops a cell that waits
    caught = ("class Broke(TrainerCallback):\n"
              "    def on_step_end(self, args, state, control, **kwargs):\n"
              "        raise ValueError('broke')\n"
              "trainer.add_callback(Broke())\n"
              "try:\n    trainer.train()\nexcept ValueError:\n    pass\n"
              "trainer.remove_callback(Broke)\nCtrlC.sent = True")
    out = run_cells(tmp_path, [SETUP, caught, "os.kill(os.getpid(), signal.SIGINT)",
                               "trainer.train()"])
    assert "cell error: KeyboardInterrupt" in out
    assert ends(tmp_path / "runs" / "nb")[-1] == ("FAILED", "failed")
    assert ends(tmp_path / "runs" / "nb-2")[-1] == ("SUCCEEDED", None)
