"""Is the supervised loss falling: a loss flat over the run or its window, one that fell too
little, one at or near 0, one that repeats what it logged (weights that do not change)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from runwatch.health.jumps import RESOLUTION
from runwatch.health.rules.base import Param, Rule


def _loss_above_zero(v: Sequence[list[float]], p: Mapping[str, Param]) -> list[float]:
    """The loss where it is above 0; NaN (no verdict) where it is not: an exact 0 is
    loss.zero's, and a loss below 0 is no cross-entropy."""
    return [loss if loss > 0 else math.nan for loss in v[0]]


def _loss_not_negative(v: Sequence[list[float]], p: Mapping[str, Param]) -> list[float]:
    """The loss where it is 0 or above, or 0 within a logger's rounding (-0.0001 of the HF
    Trainer's 4 decimals); NaN (no verdict) further below, which no cross-entropy reaches
    (a custom loss that goes negative is not "exactly 0")."""
    return [loss if loss >= -RESOLUTION else math.nan for loss in v[0]]


# What a loss-flat rule's condition says of a log that starts mid-run (`window_info`).
MID_RUN_INFO = ("On a log that starts mid-run (its first step more than 3 logging strides "
                "after step 0, or its `epoch` past the start of the run), the finding is "
                "info: a loss flat over a window cut from a longer run may have fallen "
                "before it.")


# What a not-falling rule's condition says of a loss that fell once, or that rose
# (`fell_once`, `rise_limit`): those are other rules' to report.
RISE_BOUND = ("It holds only while the loss stands less than {rise_limit} (relative) above "
              "where it started: one that rose further is rising, loss.above_start's, "
              "whose advice is the other way.")
NOT_FALLING_BOUNDS = (
    "It holds no more once a judgement has found the loss {fell_once}× {min_change} below "
    "where it started (a loss that fell and then jumped back has fallen: the jump is "
    "loss.stepped_up's and loss.upturn's; judged on the noise-wide medians above, so a "
    "flat loss does not reach it by chance). " + RISE_BOUND + " ")


# What a verdict on a finished run's whole loss log says (loss.flat_finished_run,
# loss.fell_little): its start, lowest and last points, read the kindest way to the run.
WHOLE_LOG_MESSAGE = ("Over {log} of {points:.0f} points, {metric} {change} ({start:.4g} "
                     "→ lowest {lowest:.4g}, last {last:.4g}).{falling}")


RULES: tuple[Rule, ...] = (
    Rule(
        id="sft.loss_not_falling",
        title="SFT loss is not falling",
        methods=("sft",),
        variants=(("loss",),),
        detector="no_progress",
        params={"direction": "down", "min_change": 0.05, "warmup": 30, "bucket": 5,
                "warmup_steps": 200, "min_points": 10, "noise_z": 1.0, "warn_after": 30,
                "window_info": 1, "zero_unmeasured": 1, "fell_once": 3, "rise_limit": 0.2},
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
        "median of 5 points, and a start of 5 such points may sit a tenth off its level. "
        + NOT_FALLING_BOUNDS + MID_RUN_INFO,
        message="{metric} {change} over {span:.0f} steps ({start:.4g} to {now:.4g}).",
        advice="A loss that stays where it started: raise `learning_rate`; one that drifts up "
        "from its start: lower it. Check the loss mask (`trained_tokens`) and the data.",
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
        "next is noise, no fall). " + MID_RUN_INFO,
        message="{metric} {val_change} and the training loss {train_change} since step "
        "{since:.0f} ({points:.0f} validations): {verdict}",
        advice="Raise `learning_rate` (a LoRA at a low rank or a small learning rate barely "
        "moves the model), check that the adapter's parameters are trainable and get "
        "gradients, and check the loss mask (`trained_tokens`) and the data.",
    ),
    Rule(
        id="loss.stuck",
        title="Loss does not move at all",
        methods=("sft", "dpo"),
        variants=(("loss",),),
        detector="no_progress",
        params={"direction": "down", "min_change": 0.005, "max_spread": 0.005, "warmup": 30,
                "bucket": 2, "warmup_steps": 50, "min_points": 8, "window_info": 1,
                "zero_unmeasured": 1},
        signal="loss_flat",
        severity="warning",
        condition="After {min_points} logged points over {warmup_steps} steps (or {warmup} "
        "points), every `loss` so far lies within {max_spread} (relative) of where it "
        "started and the latest has not fallen {min_change}: no minibatch noise and no "
        "learning, as a frozen model or one at chance (ln of its vocabulary: 10.8 for "
        "GPT-2's) gives. A DPO loss starts at ln 2 on every batch while the policy is the "
        "reference (every margin is 0), and stays there with no batch noise while the policy "
        "does not move. " + MID_RUN_INFO + " A loss logged to two decimals and averaged "
        "over hundreds of steps (7.42-7.44 over 2,000 steps of a long pretraining run) "
        "moves this little on a plateau.",
        message="{metric} {change} over {span:.0f} steps ({start:.4g} to {now:.4g}), never "
        "moving more than {max_spread:.1%} from where it started.",
        advice="Nothing is learned: check that `learning_rate` is not 0, that the parameters "
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
        "not fall from one that has not fallen yet. Nor is it a warning where the loss "
        "fell at each of its latest 5 points or more, by 0.5% of its start in all: it is "
        "still falling (a 14-step warm-up window whose loss falls at every step, 1.5% in "
        "all); a flat or noisy loss does not fall at six points in a row.",
        message=WHOLE_LOG_MESSAGE,
        advice="The run trained without learning: raise `learning_rate` (a LoRA at a low "
        "rank or a small learning rate barely moves the model), check that the parameters "
        "(or the adapter) are trainable and that the labels are not all masked "
        "(`trained_tokens`), and train "
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
        "start); if it should have fallen further, raise `learning_rate` or the LoRA rank, "
        "check that the parameters (or the adapter) are trainable and that the labels are "
        "not all masked, and read the validation loss beside it.",
    ),
    Rule(
        id="loss.zero",
        title="Loss is exactly zero",
        methods=("sft",),
        variants=(("loss",),),
        derive=_loss_not_negative,
        detector="threshold",
        params={"below": 1e-12, "k": 3, "n": 3},
        severity="warning",
        condition="`loss` is exactly 0 on {k} logged steps in a row: a token cross-entropy "
        "on real data reaches 0 only when the steps train on nothing (every label masked, or "
        "non-finite steps filtered out of the logged mean) or the model has memorised a "
        "tiny data set past the logger's rounding (the HF Trainer logs 4 decimals, and "
        "-0.0001 for a loss rounded from just below 0). A loss further below 0 is no "
        "cross-entropy and counts for nothing here.",
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
)
