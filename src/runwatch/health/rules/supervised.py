"""SFT and DPO rules: is the loss falling (and not spiking or turning back up), is DPO
separating chosen from rejected without over-optimising."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from runwatch.health.rules.base import Param, Rule

OVER_OPTIMISED = ("The preference is over-optimised: keep an earlier checkpoint, raise beta, "
                  "and lower learning_rate or num_epochs; read samples for degenerate text.")


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


def _loss_above_zero(v: Sequence[list[float]], p: Mapping[str, Param]) -> list[float]:
    """The loss where it is above 0; NaN (no verdict) where it is not: an exact 0 is
    loss.zero's, and a loss below 0 is no cross-entropy."""
    return [loss if loss > 0 else math.nan for loss in v[0]]


# What a verdict on a finished run's whole loss log says (loss.flat_finished_run,
# loss.fell_little): its start, lowest and last points, read the kindest way to the run.
WHOLE_LOG_MESSAGE = ("Over {log} of {points:.0f} points, {metric} {change} ({start:.4g} "
                     "→ lowest {lowest:.4g}, last {last:.4g}).")


RULES: tuple[Rule, ...] = (
    Rule(
        id="sft.loss_not_falling",
        title="SFT loss is not falling",
        methods=("sft",),
        variants=(("loss",),),
        detector="no_progress",
        params={"direction": "down", "min_change": 0.05, "warmup": 30, "bucket": 5,
                "warmup_steps": 200, "min_points": 10, "noise_z": 1.0, "warn_after": 30},
        signal="loss_flat",
        severity="info",
        condition="After {warmup} logged points (or, in a run logged sparsely, after "
        "{warmup_steps} steps and {min_points} points: info until it holds over "
        "{warn_after} points, since a loss flat over its first few hundred steps may yet "
        "fall, as after a long learning-rate warm-up), the median `loss` of the latest "
        "{bucket} points is less than {min_change} (relative) below where it started: the "
        "higher of its first value and the median of its first {bucket} points; short of "
        "it by {noise_z} standard error of the two medians' difference in the loss's own "
        "point-to-point noise. A noisy loss is compared by medians of as many points as "
        "show a fall of {min_change} in that noise (16 at most, else it is not judged "
        "flat), its first against its latest, once it has twice that many: a single "
        "batch's loss that swings by a third between steps cannot show a fall of 5% in a "
        "median of 5 points, and a start of 5 such points may sit a tenth off its level.",
        message="{metric} {change} over {span:.0f} steps ({start:.4g} to {now:.4g}).",
        advice="Raise learning_rate, and check the loss mask (trained_tokens) and the data.",
    ),
    Rule(
        id="sft.plateau",
        title="Neither training nor validation loss has moved",
        methods=("sft",),
        variants=(("loss", "val/loss"),),
        detector="flat_since",
        params={"min_change": 0.04, "min_points": 3, "noise_z": 1.0},
        signal="loss_flat",
        severity="warning",
        condition="From the {min_points}rd validation on, `val/loss` has fallen less than "
        "{min_change} (relative) since the first validation, and the training `loss` logged "
        "since that step has fallen less than it too: a run that learns moves at least one "
        "of them by more, however slowly (a slow run's training loss falls, a fine-tuned "
        "model's validation loss falls in its first epoch), and one that learned before its "
        "first validation and converged later has fallen since. A flat training loss alone "
        "waits for sft.loss_not_falling's warm-up; with a flat validation loss beside it the "
        "verdict needs no warm-up. A noisy training loss is compared by medians of as many "
        "points as show a fall of {min_change} in its own point-to-point noise ({noise_z} "
        "standard error; 16 points at most, else it is not judged flat): a run of hard "
        "batches moves a 5-point median by more than that. Nor while either has risen by "
        "{min_change} since: a loss that jumped up and stayed has moved (loss.stepped_up "
        "and the overfitting rules judge a rise), and calling it a plateau says the model "
        "is not learning when it has lost ground. Nor while the training loss stands "
        "{min_change} (relative) below where the run started, the median of its first 3 "
        "logs, or its first log where that stands a quarter or more above the median: a "
        "loss that fell 3.93, 1.23, 1.06 over its first logs and paused has learned, and "
        "so has one that logged 1.96 then 1.2-1.5 (a first log a few percent above the "
        "next is noise, no fall).",
        message="{metric} {val_change} and the training loss {train_change} since step "
        "{since:.0f} ({points:.0f} validations): the model is not learning.",
        advice="Raise learning_rate (a LoRA at a low rank or a small lr barely moves the "
        "model), check that the adapter's parameters are trainable and get gradients, and "
        "check the loss mask (trained_tokens) and the data.",
    ),
    Rule(
        id="loss.stuck",
        title="Loss does not move at all",
        methods=("sft", "dpo"),
        variants=(("loss",),),
        detector="no_progress",
        params={"direction": "down", "min_change": 0.005, "max_spread": 0.005, "warmup": 30,
                "bucket": 2, "warmup_steps": 50, "min_points": 8},
        signal="loss_flat",
        severity="warning",
        condition="After {min_points} logged points over {warmup_steps} steps (or {warmup} "
        "points), every `loss` so far lies within {max_spread} (relative) of where it "
        "started and the latest has not fallen {min_change}: no minibatch noise and no "
        "learning, as a frozen model or one at chance (ln of its vocabulary: 10.8 for "
        "GPT-2's) gives. A DPO loss starts at ln 2 on every batch while the policy is the "
        "reference (every margin is 0), and stays there with no batch noise while the policy "
        "does not move.",
        message="{metric} {change} over {span:.0f} steps ({start:.4g} to {now:.4g}), never "
        "moving more than {max_spread:.1%} from where it started.",
        advice="Nothing is learned: check that learning_rate is not 0, that the parameters "
        "(or the adapter) are trainable and receive gradients, and that the labels are not "
        "all masked.",
    ),
    Rule(
        id="loss.flat_finished_run",
        title="The finished run's loss never fell",
        methods=("sft", "dpo"),
        variants=(("loss",),),
        detector="whole_window",
        params={"min_change": 0.05, "end_change": 0.04, "min_points": 4, "min_level": 0.1,
                "warn_after": 8},
        signal="loss_flat",
        severity="info",
        condition="Judged once, when the run has succeeded (its end status, which the "
        "SDK's finish and an import write), on its whole log of {min_points} logged `loss` "
        "points or more, where sft.loss_not_falling or dpo.loss_not_falling never judged it "
        "(too few points or steps for its warm-up): the loss never stood {min_change} "
        "(relative) below where it started, or ended less than {end_change} below it, and "
        "it did not end {min_change} above it. Where it started is the higher of its first "
        "value and the median of its first points (a third of them, 1 to 5), where it "
        "ended the median of as many latest points, and \"never below\" reads its lowest "
        "point: each reading is the kindest to the run, so a short run whose loss falls "
        "5-20% in noise is not flagged because its last point bounced back up; a loss whose "
        "latest median ends within {end_change} of its start has not fallen however low "
        "its noise dipped once (no short healthy run of the labelled corpus that this rule "
        "judges ends less than 4% below its start by these medians). While a run is "
        "running, a flat start means nothing; once it has ended, the log is all there is. "
        "Not judged on a loss that starts at or below {min_level} (already near 0: little "
        "left to lose), nor on a run that failed or was cancelled (that end is the news). "
        "On a log that starts more than 3 logging strides after step 0 or, by its `epoch`, "
        "at a fraction of an epoch past 0.05 and past 3 of its epoch strides (a window cut "
        "from a longer run, a resumed one, or a window whose lines were numbered from where "
        "it was cut), the finding is info: the window is flat, but its start is not the "
        "run's, which may have learned before it. On fewer than {warn_after} points the "
        "finding is info, a warning from {warn_after} on: on the labelled corpus's train "
        "split, a finished log of 8 points or more whose loss fell less than 5% is "
        "labelled not falling 31 times in 36, while on 4 to 7 points the labels split "
        "(4 healthy, 4 not falling): a handful of points cannot tell a loss that does "
        "not fall from one that has not fallen yet.",
        message=WHOLE_LOG_MESSAGE,
        advice="The run trained without learning: raise learning_rate (a LoRA at a low rank "
        "or a small lr barely moves the model), check that the parameters (or the adapter) "
        "are trainable and that the labels are not all masked (trained_tokens), and train "
        "for more steps. On a log that starts mid-run (an info), read the run's whole log "
        "before changing anything.",
    ),
    Rule(
        id="loss.fell_little",
        title="The finished run's loss fell little",
        methods=("sft", "dpo"),
        variants=(("loss",),),
        detector="whole_window",
        params={"min_change": 0.15, "end_change": 0.15, "min_points": 4, "min_level": 0.1,
                "after_signal": "loss_flat"},
        severity="info",
        condition="Judged once, when the run has succeeded, on its whole log of "
        "{min_points} logged `loss` points or more, and only where no finding about a "
        "`loss` that does not fall is open at the end (loss.flat_finished_run, "
        "sft.loss_not_falling, dpo.loss_not_falling, sft.plateau, loss.stuck and "
        "loss.repeats: the rules of the {after_signal} signal on `loss`, which say it "
        "first): the loss ended less than {end_change} (relative) below where it started, "
        "by loss.flat_finished_run's readings, and not {min_change} above it. Always an "
        "info, never a warning: "
        "on the labelled corpus's train split, the finished SFT, DPO and pretraining logs "
        "whose loss ended 4-15% below its start by these readings are labelled healthy 18 "
        "times and not falling 15 times, while from 15% on 176 are healthy and 3 not "
        "falling. Readers "
        "split on how little a fall is too little (a 6% fall over six epochs, or over 60 "
        "steps of a short fine-tune), so the engine states the fall and leaves the verdict "
        "to the user. Not judged on a loss that starts at or below {min_level}.",
        message=WHOLE_LOG_MESSAGE,
        advice="Worth a look, not a verdict: compare the fall with what a run of this "
        "length should reach (a fine-tune over several epochs usually ends well below its "
        "start); if it should have fallen further, raise learning_rate or the LoRA rank, "
        "check that the parameters (or the adapter) are trainable and that the labels are "
        "not all masked, and read the validation loss beside it.",
    ),
    Rule(
        id="loss.zero",
        title="Loss is exactly zero",
        methods=("sft",),
        variants=(("loss",),),
        detector="threshold",
        params={"below": 1e-12, "k": 3, "n": 3},
        severity="warning",
        condition="`loss` is exactly 0 on {k} logged steps in a row: a token cross-entropy "
        "on real data reaches 0 only when the steps train on nothing (every label masked, or "
        "non-finite steps filtered out of the logged mean) or the model has memorised a "
        "tiny data set past the logger's rounding (the HF Trainer logs 4 decimals).",
        message="{metric} was exactly 0 on {count} logged steps from step {first_step}.",
        advice="Check the loss mask (labels all -100 after truncation or a template "
        "mismatch) and the data collator, and read the trainer's log for skipped NaN steps; "
        "if the loss fell there smoothly, the data set is memorised: train fewer epochs or "
        "on more data.",
    ),
    Rule(
        id="loss.near_zero",
        title="Loss has fallen to near zero",
        methods=("sft",),
        variants=(("loss",),),
        derive=_loss_above_zero,
        detector="threshold",
        params={"below": 0.0015, "k": 8, "n": 10},
        severity="info",
        condition="`loss` is above 0 but below {below} (a logged 0.0014 or less) on {k} of "
        "the last {n} logged steps: a token cross-entropy on real text stays well above "
        "that (a model sure of each next token in 99.9 cases of 1,000), so a loss there "
        "has memorised a small data set or trains on targets that give nothing to learn "
        "(a label copied into the prompt, a mask that keeps only template tokens); exact "
        "zeros are loss.zero's. An info, not a warning: a run of ten epochs on a small set "
        "memorises it on purpose (readers of the labelled corpus call such a run healthy), "
        "and the log alone does not tell that from a target with nothing to learn.",
        message="{metric} was below {below} on {in_window} of the last {n} logged steps "
        "(last {last:.2g}): the model predicts its targets almost perfectly.",
        advice="Read a few training examples as the model sees them (prompt, labels, mask): "
        "check that the answer is not in the prompt and that the labels are not only "
        "template or padding tokens; if the data set is small, train fewer epochs and "
        "keep the checkpoint with the lowest validation loss.",
    ),
    Rule(
        id="val.loss_frozen",
        title="Validation loss does not change at all",
        methods=("sft", "dpo"),
        variants=(("val/loss",),),
        detector="pinned",
        params={"k": 3, "n": 3},
        signal="loss_flat",
        severity="info",
        condition="`val/loss` is exactly the lowest value it has taken, and took it before, "
        "on {k} logged points in a row (the same value to the last digit logged, {k} times "
        "after its first): weights that change, however little, move a held-out loss "
        "in some digit, so separate validations that repeat themselves are run on weights "
        "that do not change (a learning rate of 0, an adapter the optimizer does not hold, "
        "a frozen copy evaluated). An info, not a warning: a console that carries the last "
        "validation into every training line (LitGPT's) repeats it just the same, and the "
        "log does not say which it is.",
        message="{metric} repeated exactly {last:.6g}, its lowest, at {in_window} logged "
        "points in a row after first taking it: if these are separate validations, the "
        "weights they are computed on do not change.",
        advice="Check that the optimizer holds the trained parameters (or the adapter), "
        "that the learning rate is not 0, and that evaluation runs on the model being "
        "trained, not a copy loaded before training.",
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
        id="sft.overfitting",
        title="Validation loss rises while training loss falls",
        methods=("sft",),
        variants=(("loss", "val/loss"),),
        detector="divergence",
        params={"a_dir": "down", "b_dir": "up", "window": 6, "a_effect": 0.02,
                "b_effect": 0.02, "a_bucket": 2, "relative": 1, "noise_z": 1.5},
        signal="val_up",
        severity="warning",
        condition="Over the last {window} validations `val/loss` rises by {b_effect} (relative) "
        "and by {noise_z} standard errors of such a rise in its own validation-to-validation "
        "noise, while `loss` falls by {a_effect}: a validation loss converged near 0.03 "
        "wanders by a tenth of itself, and a trend over six such points rises that far by "
        "chance (a healthy run's 0.0292 to 0.0337 on a set whose neighbouring validations "
        "differ by 0.002-0.004).",
        message="{metric} {b_change} while training loss {a_change}.",
        advice="The model is overfitting: train fewer epochs (num_epochs), lower learning_rate "
        "or add data; keep the checkpoint with the lowest val/loss.",
    ),
    Rule(
        id="val.gap_rising",
        title="Validation loss rises far above the training loss",
        methods=("sft",),
        variants=(("loss", "val/loss"),),
        detector="gap_rising",
        params={"ratio": 3.0, "min_rel": 0.01, "hold": 3},
        signal="val_up",
        severity="warning",
        condition="`val/loss` rises above the validation before it by {min_rel} (relative) "
        "while it stands at {ratio} times the training `loss` or more (the higher of the "
        "median of the training points logged since the validation before and the latest "
        "one, so neither one easy batch nor a diverging run's climbing loss makes the "
        "gap): the model fits its training text several times better than "
        "held-out text and moves further from the held-out text, which two validations "
        "show in a log that validates rarely, where sft.overfitting's six-validation trend "
        "is not reached. On the labelled corpus's train split no healthy supervised run's "
        "validation loss rises by 1% while above 1.3 times its training loss.",
        message="{metric} rose from {from:.4g} to {to:.4g}, {times:.1f}× the training loss "
        "({train:.4g}).",
        advice="The model is memorising its training data: keep the checkpoint with the "
        "lowest val/loss, train fewer epochs or steps, lower learning_rate, or add data.",
    ),
    Rule(
        id="val.loss_above_best",
        title="Validation loss turned up from its best",
        methods=("sft", "dpo"),
        variants=(("val/loss",),),
        detector="above_best",
        params={"min_rel": 0.01, "k": 2, "single": 0.05, "min_points": 3},
        signal="val_up",
        severity="info",
        condition="After {min_points} validations, `val/loss` lies above its best so far by "
        "{min_rel} (relative) on {k} validations in a row, or by {single} on one: the first "
        "sign of overfitting, validations before a trend over several shows it (info: a "
        "noisy validation set can wander this far). A rise under 1e-4 is no rise: trainers "
        "log a loss to 4 decimals, and a held-out loss below that (3e-7, every pair "
        "separated) moves by its floating-point rounding, a tenth of itself a validation.",
        message="{metric} rose from its best {best:.4g} to {to:.4g} (up {rise:.1%}).",
        advice="Keep the checkpoint with the lowest val/loss (load_best_model_at_end); if it "
        "keeps rising, train fewer epochs or lower learning_rate.",
    ),
    Rule(
        id="dpo.loss_not_falling",
        title="DPO loss is not falling",
        methods=("dpo",),
        variants=(("loss",),),
        detector="no_progress",
        params={"direction": "down", "min_change": 0.05, "warmup": 30, "bucket": 5,
                "warmup_steps": 200, "min_points": 10},
        severity="warning",
        signal="loss_flat",
        learning="mean_margin",
        learning_level=0.0,
        condition="After {warmup} logged points (or, in a run logged sparsely, after "
        "{warmup_steps} steps and {min_points} points), the median `loss` of the latest "
        "{bucket} points is less than {min_change} (relative) below where it started: the "
        "higher of its first value and the median of its first {bucket} points.",
        message="{metric} {change} over {span:.0f} steps ({start:.4g} to {now:.4g}).",
        advice="Raise learning_rate or beta, and check that chosen and rejected are not "
        "swapped in the dataset.",
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
        "chat template matches the model; then raise learning_rate or beta.",
    ),
    Rule(
        id="loss.spike",
        title="Loss spiked",
        methods=("sft", "dpo"),
        variants=(("loss",),),
        detector="jump",
        params={"z": 6.0, "min_rel": 0.05, "window": 20, "min_history": 10, "hold": 10,
                "repeat": 2},
        severity="info",
        condition="`loss` rises above the point before it by more than {z} robust standard "
        "deviations of its last {window} step-to-step changes, and by at least {min_rel} of "
        "its level and 1% of its first value; a warning when {repeat} such jumps come "
        "within {hold} points. A loss fallen to the logger's rounding (0.0000-0.0004, a "
        "memorised set) has no noise left to judge a jump by, and a rise of 0.001 there "
        "is invisible beside a start of 5 and costs the run nothing.",
        message="{metric} jumped from {from:.4g} to {to:.4g} (up {rise:.0%}); its "
        "step-to-step change varies by {noise:.2g}{repeats}.",
        advice="Read the batches at those steps for bad rows; if spikes repeat, lower "
        "learning_rate or max_grad_norm, and check the learning-rate schedule's warm-up.",
    ),
    Rule(
        id="loss.above_max",
        title="Loss jumped past twice its highest value",
        methods=("sft", "dpo"),
        variants=(("loss",),),
        detector="above_max",
        params={"factor": 2.0, "min_history": 2, "hold": 5, "repeat": 2},
        severity="info",
        condition="After {min_history} logged points, `loss` rises above {factor}× the "
        "highest value it logged before: a spike no noise estimate is needed to see, so it "
        "is found in a run of a few points or logged sparsely, where loss.spike has no "
        "history yet. A training loss falls from its first points: no healthy run of the "
        "labelled corpus comes back above 1.13× its highest earlier value. A warning when "
        "{repeat} such jumps come within {hold} points.",
        message="{metric} jumped to {to:.4g}, {ratio:.1f}× the highest value it had logged "
        "before ({top:.4g}){repeats}.",
        advice="Read the batches at those steps for bad rows; lower learning_rate or "
        "max_grad_norm (a batch of one pair or one example swings the most), and check the "
        "learning-rate schedule's warm-up.",
    ),
    Rule(
        id="loss.diverged",
        title="Training and validation loss both jumped",
        methods=("sft",),
        variants=(("loss", "val/loss"),),
        detector="diverged",
        params={"factor": 2.0, "min_history": 2, "hold": 3},
        severity="warning",
        condition="`val/loss` rises above {factor}× its lowest earlier validation while the "
        "training `loss`'s latest point stands above {factor}× the highest it logged before "
        "(from {min_history} training points on). A bad batch raises the training loss "
        "alone, and an overfitting model raises its validation loss while its training loss "
        "falls: both past twice where they stood is the weights themselves gone wrong, and "
        "two points of each show it in a log of a few points, where loss.doubled's warm-up "
        "and loss.rising's window are not reached (a LoRA at lr 2e-4 logging 2.15, 2.61, "
        "4.10, 10.97 with its validation loss 1.86 then 10.82). No run of the labelled "
        "corpus has a validation loss at twice its lowest beside such a jump of its "
        "training loss but one that diverged.",
        message="{metric} rose to {to:.4g}, {ratio:.1f}× its lowest ({best:.4g}), as the "
        "training loss jumped to {train_to:.4g}, {train_ratio:.1f}× the highest it had "
        "logged before ({top:.4g}): the run diverged.",
        advice="Lower learning_rate (or lengthen its warm-up) and max_grad_norm, and resume "
        "from the checkpoint with the lowest val/loss; in bf16 or fp16, check the loss "
        "scale and the optimizer's eps.",
    ),
    Rule(
        id="grpo.loss_spike",
        title="Policy loss spiked",
        methods=("grpo",),
        variants=(("loss",),),
        detector="jump",
        params={"z": 20.0, "min_rel": 1.0, "window": 20, "min_history": 10, "hold": 10,
                "both": 1},
        severity="info",
        condition="The policy `loss` of an RL run moves away from the point before it (up "
        "or down: its sign means nothing) by more than {z} robust standard deviations of "
        "its last {window} step-to-step changes and by at least its own level ({min_rel} "
        "of it): a GRPO or PPO loss sits near 0 with noise of its own, so only a jump far "
        "outside it is a spike (a batch of extreme advantages or ratios, a KL estimate "
        "blowing up). The noise is taken as no less than the logger's last digit (1e-4): "
        "a loss logged as 0.0 while the policy sits on its reference (β times a KL of 0) "
        "has no noise to measure, and its first moves off 0 (0.0001-0.0014) are no spike.",
        message="{metric} jumped from {from:.4g} to {to:.4g}; its step-to-step change "
        "varies by {noise:.2g}{repeats}.",
        advice="Read the batch at that step (rewards, advantages, the importance ratio and "
        "the KL estimate); if spikes repeat, lower learning_rate or the clip range, or use "
        "a bounded KL estimator (k3 rather than k1/k2).",
    ),
    Rule(
        id="grpo.loss_above_max",
        title="Policy loss jumped far past its largest value",
        methods=("grpo",),
        variants=(("loss",),),
        detector="above_max",
        params={"factor": 8.0, "min_history": 1, "floor": 0.01, "magnitude": 1,
                "hold": 5, "repeat": 2},
        severity="info",
        condition="The policy `loss` of an RL run is, whatever its sign, more than "
        "{factor}× the largest size it logged before, from its second point on and once "
        "that size is at least {floor}: a jump no noise estimate is needed to see, so it is "
        "found in a log of a few points, where grpo.loss_spike's ten points of history "
        "is not there (a PPO loss 1.5-3.2 that logs 2443 under fp16 overflows, then 2.3). "
        "Below {floor} the loss is β times a KL near 0, which grows by orders of magnitude "
        "as the policy leaves its reference; above it no healthy RL run of the labelled "
        "corpus's train split logs a loss 4× the largest before (three runs labelled no "
        "progress log jumps of 9-16× beside their flat reward, and are told so). A warning "
        "when {repeat} such jumps come within {hold} points.",
        message="{metric} jumped to {to:.4g} in size, {ratio:.0f}× the largest it had logged "
        "before ({top:.4g}){repeats}.",
        advice="Read the batch at that step (rewards, advantages, the importance ratio, the "
        "loss scale under fp16); lower learning_rate or the clip range, and prefer bf16 or "
        "a bounded KL estimator.",
    ),
    Rule(
        id="loss.excursion",
        title="Loss went up for a while and came back",
        methods=("sft", "dpo"),
        variants=(("loss",),),
        detector="excursion",
        params={"min_rel": 0.5, "z": 3.0, "window": 20, "stay": 5, "back": 0.2, "hold": 5},
        severity="info",
        condition="The median of the last 3 `loss` values rose above its level before (the "
        "median of the {window} points before) by {min_rel} of it and by {z} robust standard "
        "deviations of those points, stayed there {stay} logged points or more, and came "
        "back to within {back} of that level: a spike that lasted (a bad stretch of data, "
        "or a learning rate too high for a while), found when it ends; while it lasts it "
        "reads as a rising loss (loss.rising).",
        message="{metric} rose from its level of {level:.4g} to {peak:.4g} for {points:.0f} "
        "logged points from step {since:.0f}, and came back.",
        advice="Read the batches of that stretch for bad rows (a shard of another language "
        "or format); if it recurs, lower learning_rate or max_grad_norm.",
    ),
    Rule(
        id="loss.stepped_up",
        title="Loss jumped and stayed up",
        methods=("sft",),
        variants=(("loss",),),
        detector="shift",
        params={"z": 6.0, "min_rel": 0.2, "window": 10, "stay": 3},
        signal="loss_up",
        severity="warning",
        condition="The last {stay} logged `loss` values all lie above the level just before "
        "them (the median of the last 3 of the {window} points before) by {min_rel} of it "
        "and by {z} robust standard deviations of those {window} points' step-to-step "
        "changes: a spike comes back, this did not.",
        message="{metric} jumped from {from:.4g} to {to:.4g} (up {rise:.0%}) and stayed up "
        "for {stay} logged points.",
        advice="Training lost ground it had: check a resume (the checkpoint, optimizer state "
        "and step counter it restarted from), a change of data mix, or a learning rate raised "
        "mid-run; keep the checkpoint from before the jump.",
    ),
    Rule(
        id="loss.rising",
        title="Loss is turning back up",
        methods=("sft",),
        variants=(("loss",),),
        detector="trend",
        params={"direction": "up", "window": 16, "min_effect": 0.5, "relative": 1,
                "noise_z": 3.0, "undone": 3},
        signal="loss_up",
        severity="warning",
        condition="The Theil–Sen trend of `loss` over the last {window} logged points rises "
        "by at least {min_effect} of its level, and by {noise_z} standard errors of such a "
        "rise in the loss's own point-to-point noise (a single batch's loss that swings by "
        "half its level rises that far over 16 points by chance). Not while the loss has "
        "fallen by as much as that rise within a quarter of the window (on medians of 3 "
        "points) over the last {undone} windows, as for loss.climbing: a rise a loss makes "
        "and undoes in its own swings (a memorised set's loss at 0.001-0.17, skewed by "
        "single hard batches) is not a turn upward.",
        message="{metric} {change} over the last {window} logged points (now {last:.4g}).",
        advice="Training has gone past its best point: lower learning_rate or train fewer "
        "epochs (num_epochs), and keep the checkpoint from where the loss was lowest.",
    ),
    Rule(
        id="loss.climbing",
        title="Loss climbs steadily",
        methods=("sft", "dpo"),
        variants=(("loss",),),
        detector="trend",
        params={"direction": "up", "window": 32, "min_effect": 0.3, "relative": 1,
                "noise_z": 3.0, "undone": 3},
        signal="loss_up",
        severity="warning",
        condition="The Theil–Sen trend of `loss` over the last {window} logged points rises "
        "by at least {min_effect} of its level, and by {noise_z} standard errors of such a "
        "rise in the loss's own point-to-point noise: a rise too slow for loss.rising's 16 "
        "points. A training loss that is minimised does not climb by a third over 32 "
        "logs; a DPO or ORPO loss that does is losing its preference or the chosen "
        "replies' likelihood. Not while the loss has fallen by as much as that rise "
        "within a quarter of the window (on medians of 3 points) over the last {undone} "
        "windows: a loss that creeps up through each epoch and steps back down at the "
        "next one's start (a many-epoch fine-tune's sawtooth) is in a cycle, and one whose "
        "spikes come straight back moves that far in its noise; neither is climbing.",
        message="{metric} {change} over the last {window} logged points (now {last:.4g}).",
        advice="Training is losing ground: lower learning_rate (or beta for a preference "
        "loss), check the data order and the learning-rate schedule, and keep the "
        "checkpoint from where the loss was lowest.",
    ),
    Rule(
        id="loss.above_start",
        title="Loss stands above where it started",
        methods=("sft", "dpo"),
        variants=(("loss",),),
        detector="no_progress",
        params={"direction": "up", "moved": 1, "min_change": 0.2, "bucket": 16,
                "warmup": 32, "noise_z": 3.0},
        signal="loss_up",
        severity="warning",
        condition="From {warmup} logged points on, the median `loss` of the latest "
        "{bucket} points stands {min_change} (relative) or more above the median of its "
        "first {bucket}, and by {noise_z} standard errors of the two medians' difference "
        "in the loss's own point-to-point noise: a loss that is minimised does not end up "
        "a fifth above where it started, however slowly it got there (no healthy run of "
        "the labelled corpus stands more than 4.5% above its start by such medians). A "
        "climb of a few percent a hundred steps is too slow for loss.rising's 16 points "
        "and loss.climbing's 32, and a loss that climbs from its first step has no low to "
        "turn up from. The noise keeps a single pair's DPO loss, whose 16-point medians "
        "swing by a tenth, from counting a swing as a rise.",
        message="{metric} {change} over {span:.0f} steps (median {start:.4g} to "
        "{now:.4g}).",
        advice="Training is losing ground from its first steps: lower learning_rate, check "
        "the optimizer's settings (betas, eps, weight decay) and the learning-rate "
        "schedule, and check that the data order does not put the hardest rows last.",
    ),
    Rule(
        id="loss.doubled",
        title="Loss stands at twice where it started",
        methods=("sft",),
        variants=(("loss",),),
        detector="no_progress",
        params={"direction": "up", "moved": 1, "min_change": 1.0, "bucket": 3,
                "warmup": 6},
        signal="loss_up",
        severity="warning",
        condition="From {warmup} logged points on, the median `loss` of the latest "
        "{bucket} points stands at twice (1 + {min_change}) the median of its first "
        "{bucket} or more. A token cross-entropy that is minimised does not double: a "
        "loss that stays there over a median of {bucket} points is no single bad batch "
        "(loss.spike and loss.above_max see those) but a run that has lost what it "
        "learned, found in a log of a few points, where loss.above_start's 32 and "
        "loss.rising's 16 are not reached (no healthy supervised run of the labelled corpus "
        "stands above 1.55 times its start by such medians). Not on DPO: a preference "
        "loss of a few pairs a batch, -log σ(margin), is unbounded for a negative margin "
        "and swings to several times its start and back.",
        message="{metric} {change} over {span:.0f} steps (median {start:.4g} to "
        "{now:.4g}).",
        advice="The run diverged: lower learning_rate (or lengthen its warm-up), lower "
        "max_grad_norm, and resume from the checkpoint before the rise.",
    ),
    Rule(
        id="loss.repeats",
        title="Loss repeats earlier values exactly",
        methods=("sft", "dpo"),
        variants=(("loss",),),
        detector="repeats",
        params={"length": 4, "chance": 1e-3},
        signal="loss_flat",
        severity="warning",
        condition="The latest {length} `loss` values equal, value for value and in order, "
        "{length} values logged from an earlier step, values that differ from one another "
        "and spread over enough of the logger's grid (its smallest change) that a match of "
        "any stretch logged before is less likely than {chance} by chance. The same batches "
        "through the same weights give the same loss to the last digit; weights that "
        "change, however little, do not (a second epoch that repeats the first's losses: "
        "the optimizer does not step). A flat loss at a coarse rounding (bf16: 46.5, "
        "45.75, 46.0) is left alone, and so is a stretch logged again at the same steps (a "
        "resumed run).",
        message="{metric} at steps {from:.0f}-{to:.0f} repeats, value for value, what it "
        "logged from step {was:.0f}: the weights did not change in between.",
        advice="The weights are not being updated: check that optimizer.step() runs (and "
        "not before the gradients are computed), that the optimizer holds the parameters "
        "(or the adapter) being trained, that the learning rate is not 0, and that the "
        "loss is not computed under torch.no_grad().",
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
        "17.1).",
        message="the DPO margin reached {max:.3g}, above {above}: the policy pushes rejected "
        "replies far below the reference instead of learning the preference.",
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
