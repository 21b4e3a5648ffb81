"""Session 18, on the train split: a trigger series and a near miss for each change.

- A training loss and a validation loss that both jump past twice where they stood are a
  run that diverged, seen in a log of four points (`loss.diverged`,
  sft_llama32_3b_mlx_lora_lr2e4_loss_blowup: before, only loss.above_max's info).
- Completions at the length limit on 3 of the last 5 steps, not 5 of 10, so a notebook
  stopped after 5 steps is judged (`grpo.length_at_ceiling`,
  grpo_llama31_8b_nis2_unsloth_t4_completions_at_cap).
- A policy loss more than 50 times (8 times since session 24) the largest size it logged
  before is a jump, from its second point (`grpo.loss_above_max`,
  grpo_gptneo125m_analogy_loss_swings).
"""

from __future__ import annotations

from typing import Any

from runwatch.health.engine import Engine

from .helpers import corpus_records as _records
from .helpers import evaluate, rule_ids, to_batch


def _series(records: list[dict[str, Any]], *names: str
            ) -> dict[str, tuple[list[int], list[float]]]:
    """The named metrics' (steps, values), each over the lines that log it."""
    return {name: ([int(r["step"]) for r in records if name in r],
                   [float(r[name]) for r in records if name in r]) for name in names}


BLOWUP = "sft_llama32_3b_mlx_lora_lr2e4_loss_blowup"


def _blowup() -> dict[str, tuple[list[int], list[float]]]:
    return _series(_records(BLOWUP), "loss", "eval_loss")


def test_a_run_whose_training_and_validation_loss_both_jump_diverged() -> None:
    found = evaluate("sft", {}, _blowup())
    diverged = [f for f in found if f.rule_id == "loss.diverged"]
    assert [f.severity for f in diverged] == ["warning"]
    assert "5.8× its lowest (1.858)" in diverged[0].message
    assert "2.7× the highest it had logged before (4.104)" in diverged[0].message


def test_the_same_run_read_one_line_at_a_time_diverged_at_its_last_validation() -> None:
    # Live, the validation at step 1 comes before any training loss: it is where the
    # model started, and the rule starts with it.
    engine = Engine("sft", {})
    opened: list[int] = []
    for row in _records(BLOWUP):
        one = {k: ([int(row["step"])], [float(v)]) for k, v in row.items() if k != "step"}
        opened += [f.first_step for f in engine.feed(to_batch(one))
                   if f.rule_id == "loss.diverged" and f.status == "open"]
    assert opened == [20]


def test_a_training_loss_spike_beside_a_steady_validation_loss_is_no_divergence() -> None:
    # Near miss: one bad batch, 2.7 times the highest before, while the validation loss
    # stands 10% above its lowest.
    rows = {**_blowup(), "eval_loss": ([1, 20], [1.858, 2.05])}
    assert "loss.diverged" not in rule_ids(evaluate("sft", {}, rows))


def test_an_overfitting_validation_loss_beside_a_falling_training_loss_is_no_divergence(
) -> None:
    # Near miss: the validation loss doubles its lowest while the training loss falls.
    found = evaluate("sft", {}, {"loss": ([5, 10, 15, 20], [2.1, 1.2, 0.6, 0.3]),
                                 "eval_loss": ([1, 10, 20], [1.9, 1.5, 3.2])})
    assert "loss.diverged" not in rule_ids(found)


def test_a_policy_loss_that_jumps_hundreds_of_times_its_size_from_its_second_point() -> None:
    # A hand-written GRPO loop's loss 0.2952 at its first log, -86.74 at its second (and
    # more jumps, which the largest size before, now 86.74, does not see): on the engine
    # before, grpo.loss_spike's ten-point history was never there.
    loss = _series(_records("grpo_gptneo125m_analogy_loss_swings"), "loss")
    found = [f for f in evaluate("grpo", {}, loss) if f.rule_id == "grpo.loss_above_max"]
    assert [f.first_step for f in found] == [60]
    assert "294× the largest it had logged before (0.2952)" in found[0].message


def test_a_policy_loss_growing_from_below_the_floor_is_no_jump() -> None:
    # Near miss: 0.004 at its largest (β times a small KL), then 0.3 -- 75 times it.
    found = evaluate("grpo", {}, {"loss": [0.001, 0.004, 0.002, 0.3, 0.28]})
    assert "grpo.loss_above_max" not in rule_ids(found)


def test_completions_at_the_limit_on_four_of_five_steps_are_cut() -> None:
    # An Unsloth notebook stopped after 5 steps: completion_length 200.0 (the limit) at
    # steps 1, 2, 4 and 5, 34.0 at step 3. On the engine before, 5 of 10 were needed.
    lengths = _series(_records("grpo_llama31_8b_nis2_unsloth_t4_completions_at_cap"),
                      "completion_length")
    found = evaluate("grpo", {}, lengths)
    assert "grpo.length_at_ceiling" in rule_ids(found)


def test_a_length_at_its_highest_on_two_of_five_steps_is_no_limit() -> None:
    # Near miss: the same five steps with the highest length on two of them only.
    found = evaluate("grpo", {}, {"completion_length": ([1, 2, 3, 4, 5],
                                                        [200.0, 181.5, 34.0, 200.0, 176.25])})
    assert "grpo.length_at_ceiling" not in rule_ids(found)
