"""SFT and DPO rules: is the loss falling, is DPO separating chosen from rejected."""

from __future__ import annotations

from runwatch.health.rules.base import Rule

RULES: tuple[Rule, ...] = (
    Rule(
        id="sft.loss_not_falling",
        title="SFT loss is not falling",
        methods=("sft",),
        variants=(("loss",),),
        detector="no_progress",
        params={"direction": "down", "min_change": 0.05, "warmup": 30, "bucket": 5},
        severity="warning",
        condition="After {warmup} logged points, the median `loss` of the latest {bucket} "
        "points is less than {min_change} (relative) below where it started: the higher of "
        "its first value and the median of its first {bucket} points.",
        message="{metric} {change} over {span:.0f} steps ({start:.4g} to {now:.4g}).",
        advice="Raise learning_rate, and check the loss mask (trained_tokens) and the data.",
    ),
    Rule(
        id="sft.overfitting",
        title="Validation loss rises while training loss falls",
        methods=("sft",),
        variants=(("loss", "val/loss"),),
        detector="divergence",
        params={"a_dir": "down", "b_dir": "up", "window": 6, "a_effect": 0.02,
                "b_effect": 0.02, "a_bucket": 5, "relative": 1},
        severity="warning",
        condition="Over the last {window} validations `val/loss` rises by {b_effect} (relative) "
        "while `loss` falls by {a_effect}.",
        message="{metric} {b_change} while training loss {a_change}.",
        advice="The model is overfitting: train fewer epochs (num_epochs), lower learning_rate "
        "or add data; keep the checkpoint with the lowest val/loss.",
    ),
    Rule(
        id="dpo.loss_not_falling",
        title="DPO loss is not falling",
        methods=("dpo",),
        variants=(("loss",),),
        detector="no_progress",
        params={"direction": "down", "min_change": 0.05, "warmup": 30, "bucket": 5},
        severity="warning",
        condition="After {warmup} logged points, the median `loss` of the latest {bucket} "
        "points is less than {min_change} (relative) below where it started: the higher of "
        "its first value and the median of its first {bucket} points.",
        message="{metric} {change} over {span:.0f} steps ({start:.4g} to {now:.4g}).",
        advice="Raise learning_rate or beta, and check that chosen and rejected are not "
        "swapped in the dataset.",
    ),
    Rule(
        id="dpo.preference_accuracy_low",
        title="DPO prefers chosen no better than chance",
        methods=("dpo",),
        variants=(("val/preference_accuracy",),),
        detector="threshold",
        params={"below": 0.55, "k": 3, "n": 3, "min_points": 2},
        severity="warning",
        condition="`val/preference_accuracy` is below {below} on {k} consecutive validations "
        "after the first {min_points}.",
        message="{metric} stayed below {below} (last {last:.3g}).",
        advice="The policy is not separating chosen from rejected: raise learning_rate, check "
        "the pair labels, and check that beta is not too large.",
    ),
    Rule(
        id="dpo.margin_not_positive",
        title="DPO margin does not turn positive",
        methods=("dpo",),
        variants=(("val/mean_margin",),),
        detector="threshold",
        params={"below": 1e-9, "k": 3, "n": 3, "min_points": 2},
        severity="warning",
        condition="`val/mean_margin` is at or below 0 on {k} consecutive validations after the "
        "first {min_points}.",
        message="{metric} stayed at or below zero (last {last:.3g}).",
        advice="Chosen and rejected are not separating: raise learning_rate and check the "
        "dataset's chosen/rejected columns.",
    ),
)
