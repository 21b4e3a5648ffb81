"""GRPO rules on how far the policy has moved and how much it still explores: its entropy
(collapse, a fall, a floor, a crash) and its KL divergence to the reference model (spikes,
drift, creep, growth without bound). The update's own metrics, groups, lengths and rewards
are in grpo.py."""

from __future__ import annotations

from runwatch.health.rules.base import Rule
from runwatch.health.rules.grpo import GRPO, SUSTAINED

# An entropy logged as exactly 0 is no measurement: a loop that averages the entropy
# over the sequences it trains on logs 0 at a step that kept none (every group scored
# alike), and a policy's mean token entropy is never exactly 0 in floating point.
UNMEASURED = (" An entropy of exactly 0 is read as no measurement (a loop that averages it "
              "over the sequences it trains on logs 0 at a step that kept none).")
ENTROPY_ADVICE = ("Exploration is dying: raise `temperature`, lower `learning_rate`, or add "
                  "an entropy bonus; watch `zero_variance_skip_ratio`, which follows.")


RULES: tuple[Rule, ...] = (
    Rule(
        id="grpo.kl_ref_spike",
        title="KL to the reference spiked",
        methods=GRPO,
        variants=(("fb/loss/kl_ref/mean",),),
        detector="spike",
        params={"factor": 10.0, "window": 200, "min_history": 10, "floor": 0.05,
                "min_median": 0.05, "hold": 5, "repeat": 2, "noise_k": 6.0},
        severity="info",
        condition="`fb/loss/kl_ref/mean` exceeds {factor}× its rolling median, the median "
        "taken as at least {min_median} nats: a KL starts at 0, and its first rise away from "
        "the reference is growth (grpo.kl_ref_growing judges it), not a spike. It must also "
        "stand {noise_k} robust standard deviations of the window above the median: a KL "
        "estimated as the mean log-ratio of one group's samples goes negative on many "
        "steps, and reaches {factor}× its median by noise alone (a healthy run of the labelled "
        "corpus wanders from -0.46 to 0.56 around a median of 0.07). A warning "
        "when {repeat} such spikes come within {hold} points (a KL estimated on one group of "
        "samples spikes on one step and is back at the next).",
        message="{metric} spiked to {max:.3g} against a median of {median:.3g}{repeats}.",
        advice="The step was too large: lower `learning_rate` (or raise `beta` to hold the "
        "policy nearer the reference).",
    ),
    Rule(
        id="grpo.entropy_collapse",
        title="Policy entropy is collapsing",
        methods=GRPO,
        variants=(("entropy",),),
        detector="trend",
        params={"direction": "down", "window": 32, "min_effect": 0.5, "relative": 1,
                "window_in": "steps", "min_window": 8, "of_start": 0.5,
                "zero_unmeasured": 1},
        signal="entropy",
        severity="warning",
        condition="The Theil–Sen trend of `entropy` over the last {window} steps (at least "
        "{min_window} logged points) falls by at least {min_effect} of its level, and the "
        "entropy now (the median of its latest 3 points) stands at {of_start} of where it "
        "started or below (the higher of its first value and the median of its first 3): "
        "the policy is becoming deterministic, and groups soon stop differing in reward. "
        "A fall from a level the entropy rose to after its start, back towards where it "
        "started, is a policy sharpening once it has found what pays, not a collapse "
        "(the corpus's definition: a small fraction of its start). It warns while the "
        "reward climbs too: a policy that learns sharpens, but on the labelled corpus's "
        "train split a reward that climbs as the entropy halves is as often a proxy "
        "being gamed (four runs of one project labelled entropy_collapse, three of them "
        "reward hacking, whose only warning this is)." + UNMEASURED,
        message="{metric} {change} {span} (now {last:.3g}; "
        "it started at {start:.3g}).",
        advice=ENTROPY_ADVICE,
    ),
    Rule(
        id="grpo.entropy_falling",
        title="Policy entropy is falling fast",
        methods=GRPO,
        variants=(("entropy",),),
        detector="trend",
        params={"direction": "down", "window": 32, "min_effect": 0.25, "relative": 1,
                "window_in": "steps", "min_window": 8, "recent_z": 2.0, "of_start": 0.75,
                "zero_unmeasured": 1},
        signal="entropy",
        severity="info",
        condition="The Theil–Sen trend of `entropy` over the last {window} steps (at least "
        "{min_window} logged points) falls by {min_effect} of its level and the latest half "
        "of them still falls (by {recent_z} widths of its point-to-point noise), and the "
        "entropy now stands at {of_start} of where it started or below (as "
        "grpo.entropy_collapse reads both): the early form of grpo.entropy_collapse, worth "
        "knowing before it halves. Info, since a policy that learns also sharpens."
        + UNMEASURED,
        message="{metric} {change} {span} and is still "
        "falling (now {last:.3g}; it started at {start:.3g}).",
        advice="Watch the reward: if it stops rising as entropy falls, raise `temperature`, "
        "lower `learning_rate`, or add an entropy bonus.",
    ),
    Rule(
        id="grpo.entropy_low",
        title="Policy entropy fell to a fraction of its start",
        methods=GRPO,
        variants=(("entropy",),),
        detector="no_progress",
        params={"direction": "down", "min_change": 0.75, "warmup": 4, "bucket": 2,
                "moved": 1, "zero_unmeasured": 1},
        signal="entropy",
        severity="warning",
        condition="The median `entropy` of the latest {bucket} points is {min_change} "
        "(relative) or more below where it started (the higher of its first value and the "
        "median of its first {bucket} points), judged from {warmup} points on: a collapse "
        "too slow for grpo.entropy_collapse's window, or in a run too short for it."
        + UNMEASURED,
        message="{metric} {change} over {span:.0f} steps ({start:.3g} to {now:.3g}).",
        advice=ENTROPY_ADVICE,
    ),
    Rule(
        id="grpo.entropy_crash",
        title="Policy entropy fell to a tenth of its first value",
        methods=GRPO,
        variants=(("entropy",),),
        detector="no_progress",
        params={"direction": "down", "min_change": 0.9, "warmup": 3, "bucket": 1,
                "moved": 1, "zero_unmeasured": 1},
        signal="entropy",
        severity="warning",
        condition="`entropy` is a tenth of its first logged value or less ({min_change} "
        "(relative) below it), judged from {warmup} logged points on: a collapse in a run "
        "too short for grpo.entropy_low, which needs 4 points (a console log of 3 "
        "steps). No healthy run of the corpus has an entropy under 46% of its first."
        + UNMEASURED,
        message="{metric} {change} over {span:.0f} steps ({start:.3g} to {now:.3g}).",
        advice=ENTROPY_ADVICE,
    ),
    Rule(
        id="grpo.entropy_near_zero",
        title="Policy entropy is near zero",
        methods=GRPO,
        variants=(("entropy",),),
        detector="threshold",
        params={"below": 0.01, **SUSTAINED, "zero_unmeasured": 1},
        signal="entropy",
        severity="warning",
        condition="`entropy` is below {below} nats a token on {k} of the last {n} logged "
        "steps, wherever it started: a policy that puts 99.9% of its mass on one token at "
        "nearly every position samples one completion per prompt, so its groups score "
        "alike. Judged on the level alone, for a window of a run whose start is not in the "
        "log (no healthy run of the corpus's train split logs an entropy under 0.2)."
        + UNMEASURED,
        message="{metric} stayed below {below} (last {last:.3g}): the policy has become "
        "deterministic.",
        advice=ENTROPY_ADVICE,
    ),
    Rule(
        id="grpo.kl_ref_drift",
        title="KL to the reference keeps growing over a long span",
        methods=GRPO,
        variants=(("fb/loss/kl_ref/mean",),),
        detector="trend",
        params={"direction": "up", "window": 512, "min_effect": 0.1, "relative": 0,
                "window_in": "steps", "min_window": 8, "recent_z": 4.0},
        signal="kl_ref",
        severity="warning",
        condition="As grpo.kl_ref_growing, over the last {window} steps (at least "
        "{min_window} logged points): a KL that climbs {min_effect} nats over {window} "
        "steps and is still climbing in the latest half of them grows too slowly for a "
        "64-step window but is not held by its penalty either.",
        message="{metric} {change} {span} (now {last:.3g}).",
        advice="The policy drifts away from the reference without bound: raise `beta` or "
        "lower `learning_rate`, and read rollouts for reward hacking.",
    ),
    Rule(
        id="grpo.kl_ref_creep",
        title="KL to the reference keeps creeping up",
        methods=GRPO,
        variants=(("fb/loss/kl_ref/mean",),),
        detector="trend",
        params={"direction": "up", "window": 256, "min_effect": 0.5, "relative": 1,
                "window_in": "steps", "min_window": 16, "min_buckets": 8, "recent_z": 2.0},
        signal="kl_ref",
        severity="info",
        condition="Over a full window of the last {window} steps (at least {min_window} "
        "logged points) the Theil–Sen trend of `fb/loss/kl_ref/mean` rises by {min_effect} "
        "of its level or more, and over the latest half of them it still rises (by "
        "{recent_z} widths of its point-to-point noise): a KL too small for "
        "grpo.kl_ref_growing's 0.1 nats that has not levelled off after hundreds of steps. "
        "A KL held by its penalty rises in the first tens of steps and then settles; info, "
        "since a small KL that creeps may still be harmless.",
        message="{metric} {change} {span} and is still "
        "rising (now {last:.3g}).",
        advice="Watch the KL and the held-out score: if the KL keeps climbing, raise `beta` "
        "or lower `learning_rate`, and read rollouts for reward hacking.",
    ),
    Rule(
        id="grpo.kl_ref_high",
        title="KL to the reference is far above a penalised policy's",
        methods=GRPO,
        variants=(("fb/loss/kl_ref/mean",),),
        detector="threshold",
        params={"above": 1.0, "k": 5, "n": 8},
        signal="kl_ref",
        severity="info",
        condition="`fb/loss/kl_ref/mean` is above {above} nat on {k} of the last {n} logged "
        "steps: a policy held by its KL penalty stays at hundredths to tenths of a nat; one "
        "this far has left the reference, however it got there (a climb by spikes that no "
        "trend follows, or a jump in the first steps).",
        message="{metric} was above {above} on {in_window} of the last {n} logged steps "
        "(last {last:.3g}).",
        advice="The policy drifts away from the reference without bound: raise `beta` or "
        "lower `learning_rate`, check the KL estimator (k3 is bounded below where k1 is "
        "not), and read rollouts for reward hacking.",
    ),
    Rule(
        id="grpo.kl_ref_growing",
        title="KL to the reference keeps growing",
        methods=GRPO,
        variants=(("fb/loss/kl_ref/mean",),),
        detector="trend",
        params={"direction": "up", "window": 64, "min_effect": 0.1, "relative": 0,
                "window_in": "steps", "min_window": 8, "recent_z": 4.0},
        signal="kl_ref",
        severity="warning",
        condition="The Theil–Sen trend of `fb/loss/kl_ref/mean` over the last {window} steps "
        "(at least {min_window} logged points) rises by at least {min_effect} nats, and over "
        "the latest half of them it still rises, at half that rate or more and by {recent_z} "
        "widths of its point-to-point noise: a KL that rises once and settles, as a KL "
        "penalty holds it, is not growth; one that keeps climbing is not held by beta.",
        message="{metric} {change} {span} (now {last:.3g}).",
        advice="The policy drifts away from the reference without bound: raise `beta` or "
        "lower `learning_rate`, and read rollouts for reward hacking.",
    ),
)
