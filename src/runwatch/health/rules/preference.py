"""DPO and its family: is the policy separating chosen from rejected (loss, margin,
preference accuracy), and has it over-optimised the preference (margin exploding, loss
pinned at 0)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from runwatch.health.rules.base import Param, Rule
from runwatch.health.rules.loss_progress import MID_RUN_INFO, RISE_BOUND

OVER_OPTIMISED = ("The preference is over-optimised: keep an earlier checkpoint, raise "
                  "`beta`, and lower `learning_rate` or train for fewer steps (epochs); read "
                  "samples "
                  "for degenerate text.")
# TRL's default β, and most trainers': a margin logged in runwatch's unit by a run whose
# settings give no beta is read as if trained with it
DEFAULT_BETA = 0.1


def _loss_when_all_preferred(v: Sequence[list[float]], p: Mapping[str, Param]) -> list[float]:
    """The loss on steps where every pair prefers the chosen reply; +inf elsewhere."""
    return [loss if acc >= float(p["accuracy_at"]) else float("inf")
            for loss, acc in zip(v[0], v[1], strict=True)]

def _preference_loss_saturated(v: Sequence[list[float]],
                               p: Mapping[str, Param]) -> list[float]:
    """The loss where every pair prefers the chosen reply, or, in a run that logs no
    preference accuracy, the loss itself where it is a preference loss (not below 0);
    +inf elsewhere."""
    if len(v) == 2:
        return _loss_when_all_preferred(v, p)
    return [loss if loss >= 0 else float("inf") for loss in v[0]]


def _loss_collapsed(v: Sequence[list[float]], p: Mapping[str, Param]) -> list[float]:
    """The loss where every pair prefers the chosen reply, or, in a run that logs no
    preference accuracy, the loss itself where it is above 0 (a loss logged as exactly 0
    is a step skipped or not computed from finite values far more often than a sigmoid
    rounded to 0); +inf elsewhere."""
    if len(v) == 2:
        return _loss_when_all_preferred(v, p)
    return [loss if loss > 0 else math.inf for loss in v[0]]


def _loss_unless_all_preferred(v: Sequence[list[float]],
                               p: Mapping[str, Param]) -> list[float]:
    """The loss on steps where some pair does not prefer the chosen reply; +inf where
    every pair does."""
    return [loss if acc < float(p["accuracy_at"]) else math.inf
            for loss, acc in zip(v[0], v[1], strict=True)]


def _accuracy_without_margin(v: Sequence[list[float]],
                             p: Mapping[str, Param]) -> list[float]:
    """The preference accuracy where the mean margin beside it is not above 0 (or as
    logged, in a run that logs no margin); +inf elsewhere."""
    if len(v) == 1:
        return v[0]
    return [acc if margin <= 0 else math.inf for acc, margin in zip(v[0], v[1], strict=True)]


def _margin(v: Sequence[list[float]], p: Mapping[str, Param]) -> list[float]:
    """The margin as logged, or the chosen reward less the rejected one (OpenRLHF logs
    those two, both β-scaled, and no margin)."""
    if len(v) == 1:
        return v[0]
    return [c - r for c, r in zip(v[0], v[1], strict=True)]


RULES: tuple[Rule, ...] = (
    Rule(
        id="dpo.loss_not_falling",
        title="DPO loss is not falling",
        methods=("dpo",),
        variants=(("loss",),),
        detector="no_progress",
        params={"direction": "down", "min_change": 0.05, "warmup": 30, "bucket": 5,
                "warmup_steps": 200, "min_points": 10, "window_info": 1,
                "zero_unmeasured": 1, "rise_limit": 0.2},
        severity="warning",
        signal="loss_flat",
        learning="mean_margin",
        learning_level=0.0,
        condition="After {warmup} logged points (or, in a run logged sparsely, after "
        "{warmup_steps} steps and {min_points} points), the median `loss` of the latest "
        "{bucket} points is less than {min_change} (relative) below where it started: the "
        "higher of its first value and the median of its first {bucket} points. "
        + RISE_BOUND + " " + MID_RUN_INFO,
        message="{metric} {change} over {span:.0f} steps ({start:.4g} to {now:.4g}).",
        advice="A loss that stays where it started: raise `learning_rate` or `beta`; one that "
        "drifts up from its start: lower `learning_rate`. Check that chosen and rejected are "
        "not swapped in the dataset.",
    ),
    Rule(
        id="dpo.loss_zero",
        title="DPO loss is exactly zero while pairs go unpreferred",
        methods=("dpo",),
        variants=(("loss", "preference_accuracy"),),
        detector="threshold",
        derive=_loss_unless_all_preferred,
        params={"below": 1e-12, "accuracy_at": 0.999, "k": 3, "n": 3},
        severity="warning",
        condition="`loss` is exactly 0 on {k} logged steps in a row while "
        "`preference_accuracy` is below 1 there: a sigmoid preference loss is the mean of "
        "-log σ(margin) over the pairs, which rounds to 0 only when every pair is preferred "
        "by a wide margin; a pair not preferred adds ln 2 over the batch's pairs or more, "
        "so a zero beside it was not computed from finite log-probabilities (NaN steps "
        "logged as 0, or nothing trained on).",
        message="{metric} was exactly 0 on {count} logged steps from step {first_step} "
        "while not every pair was preferred.",
        advice="Read the log-probabilities and rewards logged beside the loss for NaN, and "
        "check the precision (bf16 rather than fp16), the learning rate and the data for "
        "empty chosen or rejected replies.",
    ),
    Rule(
        id="dpo.preference_accuracy_low",
        title="DPO prefers chosen no better than chance",
        methods=("dpo",),
        variants=(("val/preference_accuracy", "val/mean_margin"),
                  ("val/preference_accuracy",)),
        exclusive=True,
        derive=_accuracy_without_margin,
        detector="threshold",
        params={"below": 0.55, "k": 3, "n": 3, "min_points": 2},
        severity="warning",
        condition="`val/preference_accuracy` is below {below} on {k} consecutive validations "
        "after the first {min_points}, where `val/mean_margin`, if logged, is not above 0 "
        "there. The accuracy counts the pairs whose chosen reply scores strictly above the "
        "rejected one, so pairs scored alike count against it; beside a margin above 0 the "
        "policy prefers the chosen reply on average, and a share under a half says the "
        "pairs' margins are skewed (many near 0, a few wide), not that it cannot tell them "
        "apart (ORPO at a small beta: accuracy 0.11 beside a margin above 0 at every "
        "evaluation, while its NLL falls).",
        message="{metric} stayed below {below} (last {last:.3g}).",
        advice="The policy is not separating chosen from rejected: raise `learning_rate`, "
        "check the pair labels, and check that `beta` is not too large.",
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
        advice="Chosen and rejected are not separating: raise `learning_rate` and check the "
        "dataset's chosen/rejected columns.",
    ),
    Rule(
        id="dpo.train_margin_not_positive",
        title="DPO does not prefer the chosen reply on its training batches",
        methods=("dpo",),
        variants=(("mean_margin",), ("mean_chosen_delta", "mean_rejected_delta")),
        exclusive=True,
        derive=_margin,
        detector="threshold",
        params={"below": 1e-9, "k": 8, "n": 10},
        signal="loss_flat",
        severity="warning",
        condition="`mean_margin` (the β-scaled margin of the training batches; in a run that "
        "logs no margin, the chosen reward less the rejected one) is at or below 0 on {k} of "
        "the last {n} logged steps: the policy does not prefer the chosen reply even on the "
        "pairs it trains on, so the preference loss has not left ln 2, where every pair "
        "starts (an ORPO or SimPO loss adds terms that can fall meanwhile). A learning run's "
        "margin is 0 at its first step and above 0 from its first tens of steps; batch "
        "noise puts it under 0 on up to half of its logs.",
        message="{metric} was at or below 0 on {in_window} of the last {n} logged steps "
        "(last {last:.3g}): the policy does not prefer the chosen replies it trains on.",
        advice="Check that chosen and rejected are not swapped in the dataset and that the "
        "chat template matches the model; then raise `learning_rate` or `beta`.",
    ),
    Rule(
        id="dpo.over_optimisation",
        title="DPO margin exploded",
        methods=("dpo",),
        variants=(("mean_margin",), ("mean_chosen_delta", "mean_rejected_delta"),
                  ("val/mean_margin",)),
        exclusive=True,
        derive=_margin,
        detector="threshold",
        params={"above": 10.0, "k": 1, "n": 1},
        native_scale=("beta", DEFAULT_BETA),
        severity="warning",
        condition="`mean_margin` (TRL's β-scaled rewards/margins; in a run that logs no "
        "margin, the β-scaled chosen reward less the rejected one, as OpenRLHF logs them; "
        "in a run that logs neither, the held-out `val/mean_margin`, where pairs it never "
        "trained on separated that far are the rejected replies pushed down: the healthy "
        "runs' held-out margins stand at 1.8 at most) is above {above} on any step. A "
        "pair's preference loss is -log σ(margin), 4.5e-5 at a margin of {above}, and its "
        "gradient weighs the pair by σ(-margin), as little: "
        "pairs separated that far have nothing left to teach, and a margin that keeps "
        "widening is the rejected replies pushed down. Healthy runs end at a few units "
        "(the labelled corpus's at 4.4 at most); over-optimised ones reach 9 to 17 within "
        "their first tens of logs (a DPOP run's six records: 0.79, 2.4, 4.9, 9.5, 13.0, "
        "17.1). A margin logged in runwatch's own unit (`mean_margin`, `val/mean_margin` "
        "and the deltas under their own names, as the recipes log them: log-probability "
        "differences in nats, not scaled by β) is held to {above} divided by the run's "
        "`beta` setting (by 0.1, TRL's default, where the run does not give it): the "
        "default DPO recipe (β 0.3) ends its 150 steps at a margin of about 10 nats, 3 "
        "β-scaled.",
        message="the DPO margin reached {max:.3g}, above {above:.3g}: the policy pushes "
        "rejected replies far below the reference instead of learning the preference.",
        advice=OVER_OPTIMISED,
    ),
    Rule(
        id="dpo.loss_collapsed",
        title="DPO loss collapsed to zero",
        methods=("dpo",),
        variants=(("loss", "preference_accuracy"), ("loss",)),
        exclusive=True,
        detector="threshold",
        derive=_loss_collapsed,
        params={"below": 0.01, "accuracy_at": 0.999, "k": 2, "n": 2},
        signal="preference_saturated",
        severity="warning",
        condition="`loss` is below {below} while `preference_accuracy` is 1 (in a run that "
        "logs no preference accuracy, the loss alone), on {k} logged steps in a row: every "
        "pair separated by a margin the sigmoid cannot tell from infinite, so nothing is "
        "left to learn but pushing rejected replies further down. The loss alone says as "
        "much: it is the mean of -log σ(margin) over the batch's pairs, and a pair not "
        "preferred adds ln 2 over the pairs to it, more than {below} in a batch of up to "
        "69 pairs, so a loss below it has every pair preferred, most by a margin past 4.6 "
        "(-log σ(4.6) = 0.01): a run of 6 logs whose loss goes 0.693, 0.027, 0.0001 needs "
        "no longer history. Alone, a loss at or below 0 does not count: below 0 it is no "
        "preference loss, and one logged as exactly 0 is far more often a step skipped or "
        "not computed from finite values (dpo.loss_zero) than a sigmoid rounded to 0.",
        message="loss stayed at {last:.3g} with every pair preferred: the preference is "
        "saturated.",
        advice=OVER_OPTIMISED,
    ),
    Rule(
        id="dpo.preference_saturated",
        title="Every pair preferred by a wide margin, log after log",
        methods=("dpo",),
        variants=(("loss", "preference_accuracy"), ("loss",)),
        exclusive=True,
        detector="threshold",
        derive=_preference_loss_saturated,
        params={"below": 0.1, "accuracy_at": 0.999, "k": 10, "n": 10},
        signal="preference_saturated",
        severity="warning",
        condition="`loss` is below {below} while `preference_accuracy` is 1 (in a run that "
        "logs no preference accuracy, the loss alone, as a model card's table gives it) on "
        "{k} logged steps in a row: every batch's pairs are separated well past the "
        "sigmoid's knee (a mean loss of 0.1 is a margin of 2.3 on every pair), and it has "
        "stayed so, so what is left to learn is pushing rejected replies further down, "
        "which the margin rising and the rejected log-probability falling show. A healthy "
        "run of the labelled corpus has it on 1 log in a row at most; dpo.loss_collapsed "
        "judges the loss near 0 sooner. A loss below 0 is no preference loss.",
        message="loss stayed below {below} on {in_window} logged steps in a row (last "
        "{last:.3g}): every pair is separated past the sigmoid's knee, and the policy "
        "pushes rejected replies down.",
        advice=OVER_OPTIMISED,
    ),
)
