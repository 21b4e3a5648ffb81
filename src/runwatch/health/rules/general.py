"""Rules for every method: the optimizer's fields, non-finite values, a run that
stopped reporting, and a validation plateau."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from runwatch.health.rules.base import ALL_METHODS, Param, Rule


def _gradient_beside_a_loss(v: Sequence[list[float]], p: Mapping[str, Param]) -> list[float]:
    """The gradient norm, or +inf where the loss logged beside it is exactly 0."""
    if len(v) == 1:
        return v[0]
    return [g if loss != 0 else math.inf for g, loss in zip(v[0], v[1], strict=True)]


RULES: tuple[Rule, ...] = (
    Rule(
        id="optim.clipping_every_step",
        title="Gradients are clipped on almost every step",
        methods=ALL_METHODS,
        variants=(("grad_clip_factor",),),
        detector="threshold",
        params={"below": 0.999, "k": 9, "n": 10},
        severity="info",
        condition="`grad_clip_factor` is below 1 on {k} of the last {n} steps.",
        message="{metric} stayed below 1 (last {last:.3g}): grad_norm says little about "
        "update size.",
        advice="Read `update_ratio`: if each update is large, lower `learning_rate`, "
        "otherwise raise `max_grad_norm`.",
    ),
    Rule(
        id="optim.grad_norm_spike",
        title="Gradient norm spiked",
        methods=ALL_METHODS,
        variants=(("grad_norm",),),
        detector="spike",
        params={"factor": 10.0, "window": 200, "min_history": 10, "floor": 0.0, "hold": 5},
        severity="info",
        condition="`grad_norm` exceeds {factor}× the run's rolling median over the last "
        "{window} steps; spikes within {hold} points are one finding. Info however often "
        "they repeat: the norm is logged before clipping, which bounds the update it "
        "makes, and a spike that costs the run shows in what the run is judged by, the "
        "loss jumping (loss.spike, a warning when repeated) or a value going non-finite "
        "(metric.non_finite); a run of one prompt or a few pairs a step has such spikes "
        "often while its loss falls as it should (a DPO LoRA in fp32 on MPS: 160,621 "
        "against a median of 9 on 9 of 50 steps, every loss ordinary).",
        message="{metric} spiked to {max:.3g}, {against}{repeats}.",
        advice="Read the batch at that step for bad rows; if spikes repeat, lower "
        "`learning_rate` or `max_grad_norm`.",
    ),
    Rule(
        id="optim.zero_gradient",
        title="Gradient norm is exactly zero",
        methods=("sft", "dpo"),
        variants=(("grad_norm", "loss"), ("grad_norm",)),
        exclusive=True,
        detector="threshold",
        derive=_gradient_beside_a_loss,
        params={"below": 1e-12, "k": 3, "n": 3},
        severity="info",
        condition="`grad_norm` is exactly 0 on {k} logged steps in a row, where the `loss` "
        "beside it (if logged) is not exactly 0: the weights do not move (frozen "
        "parameters, a loss cut off from the graph), or the logger does not see the "
        "gradient (some DeepSpeed versions log 0). A loss of exactly 0 has no gradient to "
        "give: that is loss.zero's finding (no supervised token, or steps skipped), not a "
        "frozen model beside a loss that does not fall.",
        message="{metric} was exactly 0 on {count} logged steps from step {first_step}.",
        advice="Check that the parameters (or the adapter) require gradients and that the "
        "loss depends on them; under DeepSpeed, check whether `grad_norm` is logged at all.",
    ),
    Rule(
        id="optim.update_ratio_high",
        title="Updates are large relative to the weights",
        methods=ALL_METHODS,
        variants=(("update_ratio",),),
        detector="threshold",
        params={"above": 0.1, "k": 8, "n": 10, "min_points": 10},
        severity="warning",
        condition="`update_ratio` is above {above} on {k} of the last {n} steps, after the "
        "first {min_points}.",
        message="{metric} stayed above {above} (last {last:.3g}, max {max:.3g}).",
        advice="Each update changes the adapter by a large fraction: lower `learning_rate`.",
    ),
    Rule(
        id="metric.non_finite",
        title="A metric is NaN or infinite",
        methods=ALL_METHODS,
        variants=(("*",),),
        detector="nonfinite",
        severity="critical",
        condition="Any metric's value is NaN, +Infinity or -Infinity; one finding per "
        "incident (consecutive logged steps with such a value) lists every metric in it.",
        message="{names} {verb} {value} {where}.",
        advice="Training diverged or divided by zero: lower `learning_rate`, set "
        "`max_grad_norm`, "
        "check the reward and loss for log(0), and resume from the last good checkpoint.",
    ),
    Rule(
        id="run.stalled",
        title="The run stopped reporting",
        methods=ALL_METHODS,
        variants=(("*",),),
        detector="stall",
        params={"factor": 10.0, "min_seconds": 600.0},
        severity="warning",
        condition="A running run logs nothing for {factor}× its usual time per step, and at "
        "least {min_seconds} s.",
        message="No new metrics for {silent_s:.0f} s after step {last_step} "
        "(limit {limit_s:.0f} s).",
        advice="Read the run's logs (runwatch runs logs) for a hung collective, a dead "
        "generator or a full disk; for long evaluations raise min_seconds of run.stalled.",
    ),
    Rule(
        id="val.falling",
        title="Validation is getting worse",
        methods=ALL_METHODS,
        variants=(("val/accuracy",), ("val/reward_mean",), ("val/preference_accuracy",)),
        detector="trend",
        params={"direction": "down", "window": 6, "min_effect": 0.1, "relative": 0,
                "noise_z": 3.0},
        exclusive=True,
        severity="warning",
        condition="The trend of the validation metric over the last {window} validations "
        "falls by at least {min_effect}, and by {noise_z} standard errors of such a fall "
        "in the metric's own point-to-point noise: a score averaged over a few held-out "
        "samples (a win rate of 5 games) moves by a fifth from one validation to the next "
        "without getting worse.",
        message="{metric} {change} {span} "
        "(now {last:.3g}).",
        advice="Training is making the model worse on held-out data: lower `learning_rate`, "
        "read the rollouts for reward hacking, and keep the checkpoint from before the fall.",
    ),
    Rule(
        id="val.collapsed",
        title="Validation score collapsed",
        methods=ALL_METHODS,
        variants=(("val/accuracy",), ("val/preference_accuracy",)),
        detector="above_best",
        params={"direction": "down", "min_rel": 0.5, "min_drop": 0.2, "k": 2, "single": 0,
                "min_points": 2, "back_k": 2},
        exclusive=True,
        severity="warning",
        condition="A held-out accuracy lies below its best so far by {min_rel} of that best "
        "and by {min_drop} (a fraction of the pairs or prompts) on {k} validations in a row: "
        "a model that has lost half of what it could do on data it never trained on. "
        "val.falling reads a trend over several validations, and a score that falls to 0 "
        "at once and stays there has no slope (the Theil–Sen slope of 0.83, 0, 0, 0, 0, 0 "
        "is 0): a GRPO recipe run at 100 times its learning rate did that in its first 4 "
        "steps and was told only that its validation had plateaued. The finding holds "
        "until the score is back within a quarter of its best on {back_k} validations in a "
        "row: a score measured on a few samples that touches its best once between falls "
        "is one episode.",
        message="{metric} fell from its best {best:.3g} to {to:.3g} (down {fall:.0%}; now "
        "{last:.3g}).",
        advice="Training broke the model on held-out data: lower `learning_rate` (a rate far "
        "too high does this in a few steps), keep the checkpoint from before the fall, and "
        "read the samples for degenerate text.",
    ),
    Rule(
        id="val.plateau",
        title="Validation has plateaued",
        methods=ALL_METHODS,
        variants=(("val/accuracy",), ("val/reward_mean",), ("val/preference_accuracy",),
                  ("val/loss",)),
        detector="trend",
        params={"direction": "flat", "window": 8, "min_effect": 0.02, "relative": 1,
                "min_buckets": 8},
        exclusive=True,
        severity="info",
        condition="The trend of the validation metric over the last {window} validations moves "
        "less than {min_effect} of its level.",
        message="{metric} {change} {span}{between} (now {last:.3g}).",
        advice="Plateaus are normal; if it holds, stop at the best checkpoint or lower "
        "`learning_rate` for the remaining steps (`max_steps`).",
    ),
)
