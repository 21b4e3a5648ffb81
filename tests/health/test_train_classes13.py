"""Session 17 (E20), on the train split after round 17 was spent: a trigger series and a
near miss for each change it made for round 17's misses and false alarms.

- A many-epoch loss's step down at an epoch boundary that falls in a gap of the log still
  undoes the climb after it (`loss.climbing`, sft_llama13b_palm_new_fullft_6epochs_ckpt4000_windows:
  four windows of a 4000-step run; the trend starts afresh after the gap, and now keeps
  the values its sawtooth check looks back on).
- A first log far above the next is a fall (`sft.plateau`; test_train_classes9.py).
- A held-out loss under a name of its own (`dev_avg_loss`) is read as the validation loss
  (sft_minillm_gpt2_large_dolly_dev_loss_rising_issue).
- LLaMA-Adapter's `train_closs` and `val_closs` are its training and validation loss
  (sft_llama_adapter_v1_alpaca_20ep_not_converging_issue).
- E21: a finished run's noisy loss that ends within 4% of where it started never fell,
  however low one dip went (`loss.flat_finished_run`,
  sft_mlx_mistral7b_classics_lora_flat_issue).
"""

from __future__ import annotations

import json
from pathlib import Path

from .helpers import evaluate, rule_ids

REAL = Path(__file__).resolve().parents[1] / "data" / "real"


def _palm_windows() -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """The run's third window (steps 2285-2415, loss about 0.4 late in epoch 3) and its
    fourth (steps 3870-4000: 0.14 after epoch 6's step down, climbing to 0.2-0.3)."""
    path = REAL / "sft_llama13b_palm_new_fullft_6epochs_ckpt4000_windows" / "trainer_state.json"
    rows = [(r["step"], r["loss"]) for r in json.loads(path.read_text())["log_history"]
            if "loss" in r]
    return ([p for p in rows if 2285 <= p[0] <= 2415], [p for p in rows if p[0] >= 3870])


def _loss(points: list[tuple[int, float]]) -> dict[str, tuple[list[int], list[float]]]:
    return {"loss": ([p[0] for p in points], [p[1] for p in points])}


def test_an_epochs_climb_after_a_step_down_in_a_gap_is_no_climb() -> None:
    # On the engine before (the trend started afresh after the gap with nothing to look
    # back on), loss.climbing warned at step 3901 on this healthy run.
    before, after = _palm_windows()
    assert "loss.climbing" not in rule_ids(evaluate("sft", {}, _loss(before + after)))


def test_the_same_climb_with_no_step_down_across_the_gap_is_found() -> None:
    # Near miss: the window before the gap at the later window's own level (its values
    # repeated at the earlier steps), so nothing fell before the climb.
    before, after = _palm_windows()
    level = [(s, after[i % len(after)][1]) for i, (s, _) in enumerate(before)]
    assert "loss.climbing" in rule_ids(evaluate("sft", {}, _loss(level + after)))


TRAIN = ([1428 * (i + 1) for i in range(4)], [1.8361, 1.5378, 0.6872, 0.4638])
DEV_STEPS = [0, 1428, 2856, 4284]
DEV = [2.5059, 2.1741, 2.2838, 2.5212]  # the dev loss turns up at its third evaluation


def test_a_dev_loss_under_a_name_of_its_own_is_the_validation_loss() -> None:
    # MiniLLM's `dev_avg_loss`; on the engine before, no name it logs was read as held out.
    found = evaluate("sft", {}, {"loss": TRAIN, "dev_avg_loss": (DEV_STEPS, DEV)})
    assert "val.loss_above_best" in rule_ids(found)


def test_a_held_out_value_loss_is_not_the_models_loss() -> None:
    # Near miss: the same numbers as a held-out value head's loss.
    found = evaluate("sft", {}, {"loss": TRAIN, "dev_value_loss": (DEV_STEPS, DEV)})
    assert "val.loss_above_best" not in rule_ids(found)


EPOCHS = list(range(6))


def test_llama_adapters_closs_that_never_falls_is_found() -> None:
    # Six epoch means 1.0714 -> 1.0563 (1.4%); on the engine before, no name was read.
    closs = [1.0714, 1.0714, 1.0658, 1.0630, 1.0590, 1.0563]
    found = evaluate("sft", {}, {"train_closs": (EPOCHS, closs)}, finished=True)
    assert "loss.flat_finished_run" in rule_ids(found)


def test_llama_adapters_closs_that_falls_is_not() -> None:
    # Near miss: a fall of a fifth over the same six epochs.
    closs = [1.0714, 1.02, 0.97, 0.93, 0.89, 0.86]
    found = evaluate("sft", {}, {"train_closs": (EPOCHS, closs)}, finished=True)
    assert "loss.flat_finished_run" not in rule_ids(found)


# loss.flat_finished_run: where a noisy loss ended, not only how low it dipped once

def _finished_flat(losses: list[float]) -> list[str]:
    steps = [10 * (i + 1) for i in range(len(losses))]
    return [f.message for f in evaluate("sft", {}, {"loss": (steps, losses)}, finished=True)
            if f.rule_id == "loss.flat_finished_run"]


def test_a_noisy_loss_that_ends_where_it_started_never_fell() -> None:
    # sft_mlx_mistral7b_classics_lora_flat_issue's 13 reports: one dip to 1.661 is 7.5%
    # below the start (1.795, the median of the first four), and the last four's median,
    # 1.7255, 3.9% below it. On the engine before (its lowest point read alone), nothing.
    (message,) = _finished_flat(CLASSICS)
    assert message == ("Over its whole log of 13 points, loss ended only 3.9% below where it "
                       "started (1.795 → lowest 1.661, last 1.752).")


def test_a_noisy_loss_that_ends_lower_has_fallen() -> None:
    # Near miss: the same dips, the last four logs about 7% below the start.
    assert _finished_flat([*CLASSICS[:-4], 1.68, 1.62, 1.66, 1.67]) == []


CLASSICS = [1.741, 1.788, 1.802, 1.808, 1.783, 1.747, 1.74, 1.759, 1.769, 1.763, 1.661, 1.699,
            1.752]
