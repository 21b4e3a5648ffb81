"""A training loss that jumps or turns back up: spikes (isolated, sparse, of an RL policy
loss), a step up that stays, a late rise, a steady climb, a loss above its start."""

from __future__ import annotations

from runwatch.health.rules.base import Rule

RULES: tuple[Rule, ...] = (
    Rule(
        id="loss.spike",
        title="Loss spiked",
        methods=("sft", "dpo"),
        variants=(("loss",),),
        detector="jump",
        params={"z": 6.0, "min_rel": 0.05, "window": 20, "min_history": 10, "hold": 10,
                "repeat": 2, "zero_unmeasured": 1},
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
        "`learning_rate` or `max_grad_norm`, and check the learning-rate schedule's warm-up.",
    ),
    Rule(
        id="loss.above_max",
        title="Loss jumped past twice its highest value",
        methods=("sft", "dpo"),
        variants=(("loss",),),
        detector="above_max",
        params={"factor": 2.0, "min_history": 2, "hold": 5, "repeat": 2, "zero_unmeasured": 1},
        severity="info",
        condition="After {min_history} logged points, `loss` rises above {factor}× the "
        "highest value it logged before: a spike no noise estimate is needed to see, so it "
        "is found in a run of a few points or logged sparsely, where loss.spike has no "
        "history yet. A training loss falls from its first points: no healthy run of the "
        "labelled corpus comes back above 1.13× its highest earlier value. A warning when "
        "{repeat} such jumps come within {hold} points.",
        message="{metric} jumped to {to:.4g}, {ratio:.1f}× the highest value it had logged "
        "before ({top:.4g}){repeats}.",
        advice="Read the batches at those steps for bad rows; lower `learning_rate` or "
        "`max_grad_norm` (a batch of one pair or one example swings the most), and check the "
        "learning-rate schedule's warm-up.",
    ),
    Rule(
        id="loss.spike_isolated",
        title="Loss spiked and came back",
        methods=("sft", "dpo"),
        variants=(("loss",),),
        detector="isolated",
        params={"factor": 3.0, "window": 5, "min_history": 3, "back": 1.5, "hold": 5,
                "zero_unmeasured": 1},
        severity="info",
        condition="`loss` stands {factor}× the median of the up to {window} points before it "
        "(at least {min_history} of them), the point before it was not as high, and the "
        "next point is back within {back}× that median: a spike as a reader sees one, "
        "several times its neighbours and then back, with no estimate of the noise, so a "
        "run of a few points or one logged every epoch is judged too (a diffusion LM's per-epoch "
        "loss at 3.4-5.0 that logs 17.8 once). "
        "Found at the point that comes back; the finding starts at the spike's step. Not a "
        "rise smaller than 1% of the first value (a memorised set's loss at 0.001 moves "
        "by multiples of itself at no cost). Always an info: single batches of a healthy "
        "small-batch fine-tune spike this far now and then (6 of the labelled corpus's 355 "
        "healthy train runs).",
        message="{metric} jumped to {to:.4g} at step {at:.0f}, {ratio:.1f}× the median of the "
        "points before it ({median:.4g}), and came back to {after:.4g} at the next point.",
        advice="Read the batch at that step for bad rows (an overlong or mislabelled example); "
        "if spikes recur, lower `learning_rate` or `max_grad_norm`.",
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
        "the KL estimate); if spikes repeat, lower `learning_rate` or the clip range, or use "
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
        "loss scale under fp16); lower `learning_rate` or the clip range, and prefer bf16 or "
        "a bounded KL estimator.",
    ),
    Rule(
        id="loss.excursion",
        title="Loss went up for a while and came back",
        methods=("sft", "dpo"),
        variants=(("loss",),),
        detector="excursion",
        params={"min_rel": 0.5, "z": 3.0, "window": 20, "stay": 5, "back": 0.2, "hold": 5,
                "zero_unmeasured": 1},
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
        "or format); if it recurs, lower `learning_rate` or `max_grad_norm`.",
    ),
    Rule(
        id="loss.stepped_up",
        title="Loss jumped and stayed up",
        methods=("sft",),
        variants=(("loss",),),
        detector="shift",
        params={"z": 6.0, "min_rel": 0.2, "window": 10, "stay": 3, "zero_unmeasured": 1},
        signal="loss_up",
        severity="warning",
        condition="The last {stay} logged `loss` values all lie above the level just before "
        "them (the median of the last 3 of the {window} points before) by {min_rel} of it "
        "and by {z} robust standard deviations of those {window} points' step-to-step "
        "changes: a spike comes back, this did not.",
        message="{metric} jumped from {from:.4g} to {to:.4g} (up {rise:.0%}) and stayed up "
        "for {stayed} logged points (latest {last:.4g}).",
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
                "noise_z": 3.0, "undone": 3, "zero_unmeasured": 1},
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
        message="{metric} {change} {span} (now {last:.4g}).",
        advice="Training has gone past its best point: lower `learning_rate` or "
        "`num_epochs`, and keep the checkpoint from where the loss was lowest.",
    ),
    Rule(
        id="loss.upturn",
        title="Loss has turned back up",
        methods=("sft", "dpo"),
        variants=(("loss",),),
        detector="upturn",
        params={"min_rel": 0.005, "min_points": 8, "z": 5.0, "window": 40, "zero_unmeasured": 1},
        severity="info",
        condition="The median of the latest 3 `loss` values stands {min_rel} (relative) or "
        "more above the lowest median of 3 it logged, at least {min_points} points have been "
        "logged from that low on (the low included), and the Theil-Sen trend through them "
        "(the latest {window} at most) rises by {z} standard errors of such a rise in the "
        "loss's own point-to-point noise (taken as no less than the smallest change it "
        "logged, the logger's last digit: a loss written to 2 decimals that sits still has "
        "no measured noise, and one step of its last digit is no trend): a loss that has "
        "settled wanders about its low with no trend, and one that turns back up rises steadily, "
        "however little (an LSTM's per-epoch "
        "loss 0.9% above its low over its last 16 epochs rises 6 standard errors). "
        "loss.rising and loss.climbing warn on a rise of a third or more; this one is an "
        "info, for the rise too small to cost the run much yet. Judged again and again as "
        "a run goes on, a trend that rises by 4 standard errors turns up by chance in a "
        "long plateau now and then (on 12 healthy runs of the labelled corpus's train "
        "split); at 5, on 3.",
        message="{metric} turned back up from its lowest, {low:.4g} at step {low_step:.0f}: "
        "its latest 3 points' median is {now:.4g} ({higher}), rising steadily over its "
        "latest {points:.0f} points.",
        advice="Training may have gone past its best point: watch the validation metrics, "
        "keep the checkpoint from the low, and lower `learning_rate` or train fewer epochs "
        "if the rise goes on.",
    ),
    Rule(
        id="loss.climbing",
        title="Loss climbs steadily",
        methods=("sft", "dpo"),
        variants=(("loss",),),
        detector="trend",
        params={"direction": "up", "window": 32, "min_effect": 0.3, "relative": 1,
                "noise_z": 3.0, "undone": 3, "zero_unmeasured": 1},
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
        message="{metric} {change} {span} (now {last:.4g}).",
        advice="Training is losing ground: lower `learning_rate` (or `beta` for a preference "
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
                "warmup": 32, "noise_z": 3.0, "zero_unmeasured": 1},
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
        advice="Training is losing ground from its first steps: lower `learning_rate`, check "
        "the optimizer's settings (betas, eps, weight decay) and the learning-rate "
        "schedule, and check that the data order does not put the hardest rows last.",
    ),
    Rule(
        id="loss.implausible",
        title="Loss far above a uniform guess",
        methods=("sft",),
        variants=(("loss",), ("val/loss",)),
        detector="threshold",
        budget="ln(vocab_size)",
        params={"fraction": 2.0, "k": 1, "n": 1},
        signal="loss_up",
        severity="warning",
        condition="`loss` (or `val/loss`) is above {fraction} times the natural log of the "
        "model's `vocab_size` (a setting the run's config gives, as a Hugging Face model's "
        "config does), on any logged step. A token cross-entropy of ln(vocab_size) is a "
        "uniform guess over the vocabulary; a fine-tune starts well below it, and a model "
        "at twice it has weights gone wrong (a learning rate far too high, an overflow). "
        "The rules that compare a loss with where it started read a run whose loss blew "
        "up before its first log as starting there: an SFT run at learning rate 100 logged "
        "47,768, 514,506 and 146,162 nats against a uniform guess's 3.85, and no other "
        "rule found it.",
        message="{metric} reached {max:.4g}, above {above:.3g}: {fraction:g} times the "
        "{budget:.3g} nats of a uniform guess over the model's vocabulary.",
        advice="The model's weights have blown up: lower `learning_rate` (or lengthen its "
        "warm-up), check that `max_grad_norm` clips, and restart from the base model or the "
        "last checkpoint before the loss rose.",
    ),
    Rule(
        id="loss.doubled",
        title="Loss stands at twice where it started",
        methods=("sft",),
        variants=(("loss",),),
        detector="no_progress",
        params={"direction": "up", "moved": 1, "min_change": 1.0, "bucket": 3,
                "warmup": 6, "latest": 5, "zero_unmeasured": 1},
        signal="loss_up",
        severity="warning",
        condition="From {warmup} logged points on, the median `loss` of the latest "
        "{latest} points ({bucket} until {latest} follow the first {bucket}) stands at "
        "twice (1 + {min_change}) the median of its first {bucket} or more. A token "
        "cross-entropy that is minimised does not double: a loss that stays there over "
        "such a median is no bad batch or two (loss.spike and loss.above_max see those; "
        "two in a row would carry a median of 3) but a run that has lost what it "
        "learned, found in a log of a few points, where loss.above_start's 32 and "
        "loss.rising's 16 are not reached (no healthy supervised run of the labelled corpus "
        "stands above 1.55 times its start by such medians). Not on DPO: a preference "
        "loss of a few pairs a batch, -log σ(margin), is unbounded for a negative margin "
        "and swings to several times its start and back.",
        message="{metric} {change} over {span:.0f} steps (median {start:.4g} to "
        "{now:.4g}).",
        advice="The run diverged: lower `learning_rate` (or lengthen its warm-up), lower "
        "`max_grad_norm`, and resume from the checkpoint before the rise.",
    ),
)
