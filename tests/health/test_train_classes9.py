"""Session 16 (E16), on the train split: a trigger series and a near miss for each change
to the supervised and DPO rules.

- A DPO margin past 10 is over-optimised (dpo_llama31_8b_dpop_lr3e5_margin_blowup: six
  records whose margin goes 0.79 -> 17.1 while the loss falls to 0.006; the rule asked 20).
- A loss that ends a fifth above where it started has risen, however slowly
  (sft_qwen25_05b_lora_owt_loss_climbs: a per-step loss 2.89 -> 4.40 over 1500 steps, too
  slow for the window rules): `loss.above_start`.
- A rise the loss undoes within its own swings is no turn upward (`loss.rising` reads
  `undone` as `loss.climbing` does; sft_lf_chattest_30ep_zero_loss_windows, a memorised
  set's loss at 0.001-0.17).
- A jump of a loss at the logger's rounding is no spike (the same run: 0.0 -> 0.0013 at
  a start of 5.2).
- A validation loss at 3e-7 that moves by its rounding has not turned up
  (dpo_llama31_8b_physics_html_margin15, `val.loss_above_best`).
- A loss that fell steeply over its first logs and paused has learned: no plateau
  (sft_qwen_lora_overfitting: 3.93, 1.23, 1.06, then 1.0-1.1 over three validations).
"""

from __future__ import annotations

import math
import random

from .helpers import evaluate
from .helpers import of_rule as _of

# dpo.over_optimisation

DPOP_MARGIN = ([5, 6, 7, 8, 9, 10], [0.79, 2.42, 4.92, 9.46, 13.04, 17.05])


def test_a_dpo_margin_past_10_is_over_optimised() -> None:
    # On the engine before (above 20), no finding.
    (f,) = _of(evaluate("dpo", {}, {"rewards/margins": DPOP_MARGIN}), "dpo.over_optimisation")
    assert f.first_step == 9 and "reached 17.1" in f.message


def test_a_margin_of_a_few_units_is_a_near_miss() -> None:
    # the highest margin of a healthy run of the labelled corpus: 4.4
    margin = [min(4.4, 0.1 * i) + 0.3 * math.sin(1.7 * i) for i in range(100)]
    assert _of(evaluate("dpo", {}, {"rewards/margins": margin}), "dpo.over_optimisation") == []


# loss.above_start

def _climbing(end: float, n: int = 1500, seed: int = 5) -> list[float]:
    """A per-step loss at 2.9 that climbs to `end` over its last 80%, with a batch noise
    of ±0.3."""
    rng = random.Random(seed)
    flat = n // 5
    return [2.9 + (end - 2.9) * max(0, i - flat) / (n - flat) + rng.gauss(0, 0.3)
            for i in range(n)]


def test_a_loss_that_climbs_from_its_start_is_found() -> None:
    # On the engine before, no loss_rising rule fires: the climb is 0.1% a step, far too
    # slow for loss.rising's 16 points and loss.climbing's 32.
    found = evaluate("sft", {}, {"loss": _climbing(4.4)})
    assert not _of(found, "loss.rising") and not _of(found, "loss.climbing")
    (f,) = _of(found, "loss.above_start")
    assert f.severity == "warning" and f.message.startswith("loss rose ")


def test_a_loss_7_percent_above_its_start_is_a_near_miss() -> None:
    # A rise of 10-14% in this noise (16-point medians off by 3% each) reaches 20% on a
    # chance pair of medians in some runs; one of 7% never does.
    assert _of(evaluate("sft", {}, {"loss": _climbing(3.1)}), "loss.above_start") == []


def test_a_noisy_dpo_loss_whose_first_median_sits_low_is_a_near_miss() -> None:
    # A single pair's DPO loss at ln 2 swinging by ±0.25: its first 16 points sit 0.1
    # low by chance, the rest at ln 2 (15% above that median, within its noise).
    rng = random.Random(2)
    head = [0.59 + 0.25 * math.sin(2.3 * i) for i in range(16)]
    rest = [0.69 + rng.uniform(-0.25, 0.25) for _ in range(186)]
    assert _of(evaluate("dpo", {}, {"loss": head + rest}), "loss.above_start") == []
    # the same loss climbing to 0.9 (30% above ln 2) is found
    climb = [0.69 + 0.21 * i / 185 + rng.uniform(-0.25, 0.25) for i in range(186)]
    assert _of(evaluate("dpo", {}, {"loss": head + climb}), "loss.above_start")


# loss.rising undone

# sft_lf_chattest_30ep_zero_loss_windows, steps 3858-3918: a memorised set's loss at a
# median of 0.02 (its run started at 5.21), skewed by single hard batches.
MEMORISED = [0.1119, 0.0012, 0.0943, 0.1361, 0.1722, 0.0029, 0.0518, 0.0697, 0.0205,
             0.0154, 0.0126, 0.0343, 0.0232, 0.0613, 0.0172, 0.022, 0.0296, 0.0091, 0.0156,
             0.0285, 0.0081, 0.002, 0.0043, 0.0696, 0.0064, 0.0023, 0.0042, 0.0852, 0.0039,
             0.0033, 0.0068, 0.0116, 0.0047, 0.0533, 0.002, 0.0026, 0.0334, 0.0038, 0.0066,
             0.0583, 0.0654, 0.0494, 0.041, 0.0188, 0.0098, 0.018, 0.0404, 0.0209, 0.0547,
             0.015, 0.0083, 0.0955, 0.0192, 0.0228, 0.0195, 0.0258, 0.0159, 0.0073, 0.0044,
             0.0027, 0.0819]


def _fell_to(tail: list[float]) -> list[float]:
    """A loss falling 5.2 -> 0.05 over 40 logs, then `tail`."""
    return [5.2 * 0.89 ** i for i in range(40)] + tail


def test_a_rise_the_loss_undoes_in_its_own_swings_is_no_turn_upward() -> None:
    # On the engine before, loss.rising warned at the 45th point of the window.
    assert _of(evaluate("sft", {}, {"loss": _fell_to(MEMORISED)}), "loss.rising") == []


def test_a_loss_that_turns_up_and_stays_up_is_still_found() -> None:
    # Near miss: after its fall, a loss at 0.03 climbs to 0.07 over 16 logs and holds,
    # wobbling by a tenth (sft_lora_specialized_20epochs, loss_rising).
    turn = [0.03 * (1 + 0.1 * math.sin(1.7 * i)) for i in range(20)]
    up = [(0.03 + 0.0025 * i) * (1 + 0.1 * math.sin(1.3 * i)) for i in range(17)]
    assert _of(evaluate("sft", {}, {"loss": _fell_to(turn + up)}), "loss.rising")


# loss.spike at the logger's rounding

def _zero_window(blips: dict[int, float]) -> list[float]:
    """A loss falling from 5.2 to the 4-decimal rounding, then 0.0 with `blips`."""
    fall = [5.2 * 0.7 ** i for i in range(30)]
    return fall + [round(v, 4) for v in (blips.get(i, 0.0) for i in range(40))]


def test_a_jump_at_the_loggers_rounding_is_no_spike() -> None:
    # 0.0 -> 0.0013 and 0.0003 -> 0.0018: on the engine before, a repeated spike (warning).
    loss = _zero_window({10: 0.0001, 12: 0.0013, 13: 0.0003, 14: 0.0018})
    assert _of(evaluate("sft", {}, {"loss": loss}), "loss.spike") == []


def test_a_jump_of_a_percent_of_the_start_is_still_a_spike() -> None:
    # Near miss: 0.0 -> 0.08, 1.5% of where the loss started.
    loss = _zero_window({12: 0.08})
    assert _of(evaluate("sft", {}, {"loss": loss}), "loss.spike")


# val.loss_above_best below the logger's resolution

def test_a_validation_loss_moving_by_its_rounding_has_not_turned_up() -> None:
    # dpo_llama31_8b_physics_html_margin15's validation loss, every 5 steps: at 3e-7 it
    # moves 14% from one validation to the next. On the engine before, a finding at the last.
    val = [0.6914, 0.03457, 1.646e-4, 4.494e-6, 7.76e-7, 3.971e-7, 3.442e-7, 3.347e-7,
           3.405e-7, 3.032e-7, 3.446e-7]
    steps = [5 * i for i in range(11)]
    assert _of(evaluate("dpo", {}, {"val/loss": (steps, val)}), "val.loss_above_best") == []


def test_a_validation_loss_near_0_that_rises_by_more_than_its_rounding_is_found() -> None:
    # Near miss: the same fall to 0.0008, then 0.0013 and 0.0016 (a rise the 4 decimals show).
    val = [0.6914, 0.03457, 0.0031, 0.0008, 0.0013, 0.0016]
    steps = [5 * i for i in range(6)]
    assert _of(evaluate("dpo", {}, {"val/loss": (steps, val)}), "val.loss_above_best")


# sft.plateau after a steep first fall

def _paused(opening: list[float]) -> dict[str, tuple[list[int], list[float]]]:
    """Training logs every 10 steps: `opening`, then 1.02-1.08; a validation every 50
    steps, 1.0614 -> 1.0548 (sft_qwen_lora_overfitting's first three)."""
    pause = [1.05 + 0.03 * math.sin(1.9 * i) for i in range(20 - len(opening))]
    loss = opening + pause
    return {"loss": ([10 * (i + 1) for i in range(20)], loss),
            "val/loss": ([50, 100, 150], [1.0614, 1.0575, 1.0548])}


def test_a_loss_that_fell_steeply_over_its_first_logs_and_paused_is_no_plateau() -> None:
    # On the engine before (the median of its first five logs, 1.09, as the start), a
    # warning at the third validation.
    found = evaluate("sft", {}, _paused([3.93, 1.23, 1.06]))
    assert _of(found, "sft.plateau") == []


def test_a_first_log_a_little_above_the_next_is_no_fall_and_the_plateau_is_found() -> None:
    # Near miss: the same pause after a first log 6% above the next (noise, not a fall;
    # session 17 made a first log 25% or more above the median of the first 3 the start).
    found = evaluate("sft", {}, _paused([1.12, 1.06]))
    assert _of(found, "sft.plateau")


def test_a_first_log_far_above_the_next_is_a_fall_and_no_plateau() -> None:
    # Session 17 (other_gpt2_wikitext2_fullft_flat_after_warmup, healthy: 1.96, 1.23,
    # 1.31 every 100 steps, then 1.2-1.5 while the validation loss falls slowly). On the
    # engine before (one high first log was no fall), a warning at the third validation.
    found = evaluate("sft", {}, _paused([3.93, 1.06]))
    assert _of(found, "sft.plateau") == []
