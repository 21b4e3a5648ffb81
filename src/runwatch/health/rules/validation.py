"""The held-out loss beside the training loss: overfitting (a validation loss that rises
while the training loss falls, or far above it), a validation that does not change, and
both losses jumping together (the weights diverged)."""

from __future__ import annotations

from runwatch.health.rules.base import Rule

RULES: tuple[Rule, ...] = (
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
        advice="The model is overfitting: lower `num_epochs` or `learning_rate`, or add data; "
        "keep the checkpoint with the lowest `val/loss`.",
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
        "lowest `val/loss`, train fewer epochs or steps, lower `learning_rate`, or add data.",
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
        advice="Keep the checkpoint with the lowest `val/loss` (the Hugging Face Trainer's "
        "load_best_model_at_end does); if it keeps rising, train fewer epochs or lower "
        "`learning_rate`.",
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
        advice="Lower `learning_rate` (or lengthen its warm-up) and `max_grad_norm`, and "
        "resume from the checkpoint with the lowest `val/loss`; in bf16 or fp16, check the loss "
        "scale and the optimizer's eps.",
    ),
)
