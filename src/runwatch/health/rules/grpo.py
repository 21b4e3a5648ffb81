"""GRPO rules: the forward-backward (fb/) metrics, the cookbook's sampling metrics,
groups that score alike, completion lengths, dynamic sampling, rewards and validation
(reward hacking, length runaway); entropy and the KL to the reference are in
exploration.py."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from operator import sub

from runwatch.health.rules.base import Param, Rule

GRPO = ("grpo",)
SUSTAINED = {"k": 8, "n": 10}
# What a multi-turn run logs in place of per-completion stats (the spec's multi-turn
# metrics): its truncated_ratio counts episodes cut short by the turn limit, the context, a
# parse failure or the environment, which multiturn.unfinished_episodes judges with its
# own advice; the completion budget rules do not apply to it
MULTI_TURN = ("terminated_ratio", "num_turns_mean")


def _zero_variance_share(v: Sequence[list[float]], p: Mapping[str, Param]) -> list[float]:
    """The share as logged, or, from a loop's counts of the groups it dropped for having
    no spread and of those it trained on, the dropped ones' share (NaN with no group)."""
    if len(v) == 1:
        return v[0]
    return [d / (d + k) if d + k > 0 else math.nan for d, k in zip(v[0], v[1], strict=True)]


def _gradient_unless_groups_differ(v: Sequence[list[float]],
                                   p: Mapping[str, Param]) -> list[float]:
    """The gradient norm, left out (NaN) at a step where the share of groups with no
    reward spread is below `differ_below`: most groups there differed, so a zero is not
    theirs."""
    if len(v) == 1:
        return v[0]
    least = float(p.get("differ_below", 0.5))
    return [g if s is not None and s >= least else math.nan
            for g, s in zip(v[0], v[1], strict=True)]


def _difference(v: Sequence[list[float]], p: Mapping[str, Param]) -> list[float]:
    """The first series less the second, step by step (accuracy less reward, a step's
    highest reward less its lowest)."""
    return list(map(sub, v[0], v[1]))


RULES: tuple[Rule, ...] = (
    Rule(
        id="grpo.ratio_drift",
        title="Importance ratio drifted away from 1",
        methods=GRPO,
        variants=(("fb/loss/ratio/mean",),),
        detector="threshold",
        params={"above": 1.1, "below": 0.9, **SUSTAINED},
        severity="warning",
        condition="`fb/loss/ratio/mean` is outside [{below}, {above}] on {k} of the last {n} "
        "steps.",
        message="{metric} stayed outside [{below}, {above}] (last {last:.3g}, range "
        "{min:.3g}–{max:.3g}).",
        advice="Rule out the system before the reward: check that the new weights reach the "
        "generators before sampling, and lower `max_steps_off_policy` to keep rollouts fresh.",
    ),
    Rule(
        id="grpo.ratio_extreme",
        title="Importance ratio far from 1 on a step",
        methods=GRPO,
        variants=(("fb/loss/ratio/mean",),),
        detector="threshold",
        params={"above": 1.4, "below": 0.7, "k": 1, "n": 1},
        severity="warning",
        condition="`fb/loss/ratio/mean` is outside [{below}, {above}] on any step.",
        message="{metric} reached {max:.3g} (lowest {min:.3g}) on a single step.",
        advice="One step moved the policy far from the generator's: lower `learning_rate` or "
        "`num_minibatches` (fewer updates per sampled batch), and check "
        "`max_steps_off_policy`.",
    ),
    Rule(
        id="grpo.ratio_growth",
        title="Importance ratio keeps growing",
        methods=GRPO,
        variants=(("fb/loss/ratio/mean",),),
        detector="trend",
        params={"direction": "up", "window": 64, "min_effect": 0.05, "relative": 0,
                "window_in": "steps", "min_window": 8, "recent_z": 4.0},
        severity="warning",
        condition="The Theil–Sen trend of `fb/loss/ratio/mean` over the last {window} steps "
        "(at least {min_window} logged points) rises by at least {min_effect}, and the "
        "latest half of the window still rises (by half that rate, and by {recent_z} "
        "widths of the ratio's point-to-point noise), as for grpo.kl_ref_growing: a ratio "
        "that stepped up once and stays (a learning rate raised mid-run) keeps no growth "
        "going; grpo.ratio_drift judges where it stands.",
        message="{metric} {change} {span} (now {last:.3g}).",
        advice="The policy moves faster than the generator's log-probabilities stay fresh: "
        "lower `learning_rate`.",
    ),
    Rule(
        id="grpo.kl_policy_spike",
        title="Trainer–generator KL spiked",
        methods=GRPO,
        variants=(("fb/loss/kl_policy/mean",),),
        detector="spike",
        params={"factor": 10.0, "window": 200, "min_history": 10, "floor": 0.01, "hold": 5},
        severity="warning",
        condition="`fb/loss/kl_policy/mean` exceeds {factor}× its rolling median (and {floor}).",
        message="{metric} spiked to {max:.3g} against a median of {median:.3g}.",
        advice="Updates are over-aggressive: lower `learning_rate`, and check "
        "`fb/loss/ratio/mean` for drift at the same steps.",
    ),
    Rule(
        id="grpo.clip_high",
        title="Upper clip suppresses many updates",
        methods=GRPO,
        variants=(("fb/loss/clip/high_fraction",),),
        detector="threshold",
        params={"above": 0.10, **SUSTAINED},
        severity="warning",
        condition="`fb/loss/clip/high_fraction` is above {above} on {k} of the last {n} steps "
        "(under 0.01–0.02 is healthy).",
        message="{metric} stayed above {above} (last {last:.3g}, max {max:.3g}).",
        advice="Updates are aggressively suppressed: lower `learning_rate`, or raise "
        "`clip_high_threshold` to widen the clip band.",
    ),
    Rule(
        id="grpo.clip_low",
        title="Lower clip suppresses many updates",
        methods=GRPO,
        variants=(("fb/loss/clip/low_fraction",),),
        detector="threshold",
        params={"above": 0.10, **SUSTAINED},
        severity="warning",
        condition="`fb/loss/clip/low_fraction` is above {above} on {k} of the last {n} steps.",
        message="{metric} stayed above {above} (last {last:.3g}, max {max:.3g}).",
        advice="Updates are aggressively suppressed: lower `learning_rate`, or widen the clip "
        "band through `clip_low_threshold`.",
    ),
    Rule(
        id="grpo.clip_rising_plateau",
        title="Clipping rises while accuracy plateaus",
        methods=GRPO,
        variants=(("accuracy", "fb/loss/clip/high_fraction"),),
        detector="divergence",
        params={"a_dir": "flat", "b_dir": "up", "window": 64, "a_effect": 0.02,
                "b_effect": 0.01, "a_bucket": 8},
        severity="info",
        condition="`fb/loss/clip/high_fraction` rises by {b_effect} over {window} steps while "
        "`accuracy` moves less than {a_effect}.",
        message="{metric} {b_change} while {reference} {a_change}.",
        advice="The model cannot push already-likely tokens further: raise "
        "`clip_high_threshold` or move to harder training data.",
    ),
    Rule(
        id="grpo.active_fraction_drop",
        title="Active token fraction dropped sharply",
        methods=GRPO,
        variants=(("fb/loss/aggregate/active_fraction",),),
        detector="spike",
        params={"factor": 0, "drop": 0.5, "window": 200, "min_history": 10, "hold": 5},
        severity="info",
        condition="`fb/loss/aggregate/active_fraction` falls below {drop}× its rolling median.",
        message="{metric} fell to {min:.3g} against a median of {median:.3g}.",
        advice="Completions are short next to their prompts, or many carry zero loss weight: "
        "check prompt lengths against `max_model_length` and the loss weights.",
    ),
    Rule(
        id="grpo.zero_variance",
        title="Most groups have no reward variance",
        methods=GRPO,
        variants=(("zero_variance_skip_ratio",),
                  ("async/dropped_zero_variance_groups", "async/accepted_groups")),
        exclusive=True,
        derive=_zero_variance_share,
        detector="threshold",
        params={"above": 0.5, **SUSTAINED},
        severity="warning",
        learning="reward_mean",
        condition="`zero_variance_skip_ratio` is above {above} on {k} of the last {n} steps "
        "(under 0.3 is healthy). A loop that logs no share but counts the groups it "
        "dropped for having no spread and those it trained on (`groups_filtered` and "
        "`groups_kept`) is judged by the dropped ones' share of the two, and a share of "
        "the groups a loop filtered, for no other reason named (`fraction_filtered`), is "
        "read as the share itself.",
        message="the share of groups with no reward variance ({metric}) stayed above "
        "{above} (last {last:.3g}).",
        advice="The task is too easy or too hard for the model now: read "
        "`identical_nonzero_reward_skip_ratio` to tell which, then change the data's "
        "difficulty, `group_size` or `temperature`.",
    ),
    Rule(
        id="grpo.saturated_groups",
        title="The model has saturated part of the data",
        methods=GRPO,
        variants=(("identical_nonzero_reward_skip_ratio",),),
        detector="threshold",
        params={"above": 0.3, **SUSTAINED},
        severity="info",
        condition="`identical_nonzero_reward_skip_ratio` is above {above} on {k} of the last "
        "{n} steps.",
        message="{metric} stayed above {above}: every completion succeeds in many groups.",
        advice="This slice of the data is solved: add harder prompts to the training dataset.",
    ),
    Rule(
        id="grpo.truncation",
        title="Many completions hit the length budget",
        methods=GRPO,
        variants=(("truncated_ratio",),),
        not_with=MULTI_TURN,
        detector="threshold",
        params={"above": 0.3, **SUSTAINED},
        signal="truncation",
        severity="warning",
        condition="`truncated_ratio` is above {above} on {k} of the last {n} steps.",
        message="{metric} stayed above {above} (last {last:.3g}, max {max:.3g}).",
        advice="The budget is too tight or the output runs away: raise `max_sample_tokens`, "
        "or set `overlong_penalty_factor` if `val/mean_response_length` keeps climbing.",
    ),
    Rule(
        id="grpo.truncation_rising",
        title="More and more completions hit the length budget",
        methods=GRPO,
        variants=(("truncated_ratio",),),
        not_with=MULTI_TURN,
        detector="trend",
        params={"direction": "up", "window": 32, "min_effect": 0.05, "relative": 0,
                "window_in": "steps", "min_window": 8, "recent_z": 2.0},
        signal="truncation",
        severity="info",
        condition="The Theil–Sen trend of `truncated_ratio` over the last {window} steps (at "
        "least {min_window} logged points) rises by {min_effect} and the latest half of "
        "them still rises: responses grow into the budget before most are cut "
        "(grpo.truncation).",
        message="{metric} {change} {span} and is still "
        "rising (now {last:.3g}).",
        advice="Responses are outgrowing `max_sample_tokens`: raise it, or set "
        "`overlong_penalty_factor` if the extra length buys no reward.",
    ),
    Rule(
        id="grpo.length_at_budget",
        title="Completions run into max_sample_tokens",
        methods=GRPO,
        variants=(("mean_sampled_response_length",),),
        detector="threshold",
        budget="max_sample_tokens",
        params={"fraction": 0.9, "side": "above", **SUSTAINED},
        severity="warning",
        condition="`mean_sampled_response_length` is above {fraction}× max_sample_tokens on "
        "{k} of the last {n} steps.",
        message="{metric} stayed near the budget of {budget:.0f} tokens (last {last:.4g}).",
        advice="The model keeps running into the limit: raise `max_sample_tokens`.",
    ),
    Rule(
        id="grpo.length_at_ceiling",
        title="Completions end at one length: the token limit",
        methods=GRPO,
        variants=(("mean_sampled_response_length",),),
        detector="pinned",
        params={"side": "top", "k": 3, "n": 5, "unless_setting": "max_sample_tokens"},
        signal="truncation",
        severity="warning",
        condition="`mean_sampled_response_length` is exactly the highest value it has taken, "
        "and took it before, on {k} of the last {n} logged steps: a mean of several "
        "completions' lengths returns to exactly its highest value only when every one of "
        "them stopped at the same length, the token limit, so the run's limit is read from "
        "its own log where its settings do not give it ({unless_setting}: then "
        "grpo.length_at_budget judges; a task whose answers all have one length, 4 tokens "
        "under a limit of 6 in the demo's GRPO, is not cut). A new high "
        "is no hit, nor is a mean at its highest on fewer steps (a mean of free lengths "
        "repeats exactly by chance at most once in ten steps of the healthy runs). {k} of "
        "{n}, so a notebook stopped after a few steps is judged (a mean of exactly 200, the "
        "limit, at 4 of its 5 steps).",
        message="{metric} was exactly {max:.4g}, its highest, on {in_window} of the last {n} "
        "logged steps: every completion of those steps stopped at that length, the token "
        "limit.",
        advice="Completions are cut mid-answer: raise `max_sample_tokens`, or reward shorter "
        "answers, and read the cut rollouts.",
    ),
    Rule(
        id="grpo.budget_squeezed",
        title="Long prompts squeeze the completion budget",
        methods=GRPO,
        variants=(("mean_response_budget",),),
        detector="threshold",
        budget="max_sample_tokens",
        params={"fraction": 0.75, "side": "below", **SUSTAINED},
        severity="info",
        condition="`mean_response_budget` is below {fraction}× max_sample_tokens on {k} of the "
        "last {n} steps.",
        message="{metric} stayed well below max_sample_tokens={budget:.0f} (last {last:.4g}).",
        advice="Long prompts leave less room in `max_model_length`: raise it or shorten the "
        "prompts.",
    ),
    Rule(
        id="grpo.post_budget_clip",
        title="Completions are cut before training",
        methods=GRPO,
        variants=(("post_budget_clip_ratio",),),
        detector="threshold",
        params={"above": 0.05, "k": 5, "n": 10},
        severity="warning",
        condition="`post_budget_clip_ratio` is above {above} on {k} of the last {n} steps "
        "(it should stay near zero).",
        message="{metric} stayed above {above} (last {last:.3g}).",
        advice="Completions are cut to the budget before training: raise `max_model_length` "
        "or shorten the prompts.",
    ),
    Rule(
        id="grpo.overlong_penalty",
        title="The overlong penalty dominates reward",
        methods=GRPO,
        variants=(("mean_overlong_penalty",),),
        detector="threshold",
        params={"below": -0.2, **SUSTAINED},
        severity="warning",
        condition="`mean_overlong_penalty` is below {below} on {k} of the last {n} steps.",
        message="{metric} stayed below {below} (last {last:.3g}).",
        advice="Lower `overlong_penalty_factor` or raise `max_sample_tokens`.",
    ),
    Rule(
        id="grpo.reward_below_accuracy",
        title="Reward sits below accuracy",
        methods=GRPO,
        variants=(("accuracy", "reward_mean"),),
        detector="threshold",
        derive=_difference,
        params={"above": 0.1, **SUSTAINED},
        severity="info",
        condition="`accuracy` − `reward_mean` is above {above} on {k} of the last {n} steps.",
        message="{metrics[1]} sat {last:.3g} below {metrics[0]}: the overlong penalty lowers "
        "reward.",
        advice="The overlong penalty is lowering reward: lower `overlong_penalty_factor` or "
        "raise `max_sample_tokens`.",
    ),
    Rule(
        id="grpo.advantage_collapse",
        title="Advantages are near zero",
        methods=GRPO,
        variants=(("completion_advantage_std",),),
        detector="threshold",
        params={"below": 0.01, "min_points": 5, **SUSTAINED},
        severity="info",
        condition="`completion_advantage_std` is below {below} on {k} of the last {n} steps.",
        message="{metric} stayed below {below} (last {last:.3g}): updates are small.",
        advice="Rewards barely differ within groups: use a finer-grained reward, or raise "
        "`group_size` or `temperature`.",
    ),
    Rule(
        id="grpo.logprob_falling",
        title="Sampled log-probability keeps falling",
        methods=GRPO,
        variants=(("mean_logprob",),),
        detector="trend",
        params={"direction": "down", "window": 64, "min_effect": 0.25, "relative": 1,
                "window_in": "steps", "min_window": 8},
        severity="warning",
        condition="The trend of `mean_logprob` over the last {window} steps (at least "
        "{min_window} logged points) falls by at least {min_effect} of its level.",
        message="{metric} {change} {span} (now {last:.3g}).",
        advice="Check `temperature` and exploration, and read the rollouts for mode collapse "
        "onto rare tokens.",
    ),
    Rule(
        id="grpo.sampling_attempts_cap",
        title="Dynamic sampling hits its attempt cap",
        methods=GRPO,
        variants=(("dynamic_sampling/attempts",),),
        detector="threshold",
        budget="max_sampling_attempts",
        params={"fraction": 0.999, "side": "above", **SUSTAINED},
        severity="warning",
        condition="`dynamic_sampling/attempts` reaches max_sampling_attempts on {k} of the last "
        "{n} steps.",
        message="{metric} reached the cap of {budget:.0f} attempts on most recent steps.",
        advice="Most groups score identically: look at task difficulty and `temperature` "
        "before raising `max_sampling_attempts`.",
    ),
    Rule(
        id="grpo.sampling_short_batch",
        title="Dynamic sampling trains on short batches",
        methods=GRPO,
        variants=(("dynamic_sampling/kept_groups",),),
        detector="threshold",
        budget="batch_size",
        params={"fraction": 1.0, "side": "below", "k": 5, "n": 10},
        severity="info",
        condition="`dynamic_sampling/kept_groups` is below batch_size on {k} of the last {n} "
        "steps.",
        message="{metric} stayed below batch_size={budget:.0f} (last {last:.3g}).",
        advice="Steps ran out of attempts and trained on smaller batches: make the data's "
        "difficulty fit the model, or raise `max_sampling_attempts`.",
    ),
    Rule(
        id="grpo.reward_hacking",
        title="Training improves while validation falls",
        methods=GRPO,
        variants=(("accuracy", "val/accuracy"), ("reward_mean", "val/reward_mean"),
                  ("reward_mean", "val/accuracy")),
        detector="divergence",
        params={"a_dir": "up", "b_dir": "down", "window": 6, "a_effect": 0.05,
                "b_effect": 0.05, "a_bucket": 5, "noise_z": 3.0},
        severity="critical",
        condition="Over the last {window} validations the training series (the training "
        "accuracy, or the trained reward) rises by {a_effect} while the validation series "
        "(its held-out accuracy or reward; a held-out share of the task solved under a name "
        "of its own, `validation_accuracy`, `val/success_rate`, `eval/pass_at_1`, counts as "
        "the held-out accuracy) falls by {b_effect} and by {noise_z} standard errors of "
        "such a fall in its own point-to-point noise: the reward is won by what the "
        "held-out task does not reward.",
        message="{metric} {b_change} while {reference} {a_change}.",
        advice="Likely reward hacking: read the rollouts for exploits, fix the reward function, "
        "and restore the checkpoint from before validation fell.",
    ),
    Rule(
        id="grpo.proxy_hacking",
        title="Reward rises while the task score stays flat",
        methods=GRPO,
        variants=(("reward_mean", "accuracy"),),
        detector="divergence",
        params={"a_dir": "up", "b_dir": "not_up", "window": 16, "a_effect": 0.1,
                "b_effect": 0.02, "a_bucket": 2, "noise_z": 1.0},
        severity="info",
        condition="Over the last {window} logged steps `reward_mean` rises by {a_effect} while "
        "the task score the run logs beside it (`accuracy`: verl's score, tinker's "
        "correct, a correctness reward function's mean, a share of the task solved under a "
        "name of its own such as `answer_f1`) moves less than {b_effect}, or falls short of "
        "a rise of {b_effect} by {noise_z} standard error over a whole window: the "
        "reward is won by what it also pays for (format, length, compiling), not by "
        "solving the task. Info, since a format reward is often learned first.",
        message="{reference} {a_change} over the last {window} steps while {metric} "
        "{b_change}.",
        advice="Read the rollouts for what the reward pays without solving the task; weight "
        "the correctness part of the reward up or drop the proxy part.",
    ),
    Rule(
        id="grpo.task_score_falling",
        title="Reward rises while the task score falls",
        methods=GRPO,
        variants=(("reward_mean", "accuracy"),),
        detector="divergence",
        params={"a_dir": "up", "b_dir": "down", "window": 6, "a_effect": 0.05,
                "b_effect": 0.05, "a_bucket": 1, "noise_z": 3.0, "a_noise_z": 3.0},
        severity="warning",
        condition="Over the last {window} logged points of the task score (`accuracy`: a "
        "share of the task solved, a correctness reward function's mean, a `gold_*` or "
        "`true_*` score) it falls by {b_effect} and by {noise_z} standard errors of such "
        "a fall in its own point-to-point noise, while `reward_mean` (the reward trained "
        "on, a `proxy` one) rises by {a_effect} over the same steps and by {a_noise_z} "
        "standard errors of its own noise, with and without its latest point (a reward "
        "that leaps once has not trended): the reward is won by what the task does not "
        "reward.",
        message="{metric} {b_change} while {reference} {a_change}.",
        advice="Likely reward hacking: read the rollouts for what the reward pays that the "
        "task does not, fix or reweight the reward, and keep the checkpoint from before "
        "the task score fell.",
    ),
    Rule(
        id="grpo.length_runaway",
        title="Validation responses keep getting longer",
        methods=GRPO,
        variants=(("val/mean_response_length",),),
        detector="trend",
        params={"direction": "up", "window": 6, "min_effect": 0.2, "relative": 1},
        severity="warning",
        condition="The trend of `val/mean_response_length` over the last {window} validations "
        "rises by at least {min_effect} of its level.",
        message="{metric} {change} {span} "
        "(now {last:.4g}).",
        advice="Length runaway: set or raise `overlong_penalty_factor`, or lower "
        "`max_sample_tokens`, and read the longest rollouts.",
    ),
    Rule(
        id="rl.no_progress",
        title="Reward is not improving",
        methods=GRPO,
        # A run that logs no reward is judged on its task score (verl's critic/score/mean,
        # tinker-cookbook's env/all/correct): the rewards it is trained on.
        variants=(("reward_mean",), ("accuracy",)),
        exclusive=True,
        detector="no_improvement",
        params={"direction": "up", "z": 1.0, "min_points": 10, "head": 25,
                "warn_after": 30, "early_points": 4, "mean_z": 3.0},
        severity="info",
        condition="After {min_points} logged points, the median of the latest half of "
        "`reward_mean` (or, in a run that logs no reward, `accuracy`; at most {head} points) "
        "has not risen above the median of the first half by more than {z} standard error "
        "of its noise; a warning once that holds over {warn_after} points, counted only "
        "where the Theil–Sen trend through the points the two medians take has not risen "
        "by more than {z} standard error either (two medians of a reward that is a mix of "
        "a few outcomes blur a steady rise), leaving out the points logged while the "
        "learning rate still rises (its warm-up, when the policy barely moves), and never "
        "in a log that starts more than 3 logging strides after step 0 (a window of a "
        "longer run or a resumed one, which cannot tell a reward that plateaued after "
        "learning from one that never rose), or whose first `epoch` is a fraction past "
        "0.05 and past 3 of its epoch strides (such a window, its steps numbered from "
        "where it was cut). The run has risen, too, where the mean of the latest half "
        "stands {mean_z} standard errors above the first half's (a Welch test, each half's "
        "error from its own spread): a reward that is mostly 0 with a growing share of "
        "successes rises in its mean while both medians stay 0 (on the labelled corpus's "
        "train split, three healthy GRPO runs of 132-250 points whose reward quadruples "
        "kept their finding open until points 129-169; with the means, until 69-109). "
        "From {early_points} points until "
        "{min_points}, too few to measure the noise, it holds while the latest half's "
        "median has not risen at all.",
        message="{metric} {change} over {points:.0f} logged points{steps}: {judged}.",
        advice="The policy is not learning from this reward: check that rewards vary within "
        "groups (`zero_variance_skip_ratio`), raise `learning_rate`, and read the rollouts "
        "for a reward the model cannot earn.",
    ),
    Rule(
        id="grpo.truncation_extreme",
        title="Most completions hit the length budget",
        methods=GRPO,
        variants=(("truncated_ratio",),),
        not_with=MULTI_TURN,
        detector="threshold",
        params={"above": 0.8, "k": 1, "n": 10},
        signal="truncation",
        severity="warning",
        condition="`truncated_ratio` is above {above} on any logged step (the finding holds "
        "while one of the last {n} is): judged on one point, for runs that log too few for "
        "grpo.truncation.",
        message="{metric} reached {max:.3g}: most completions were cut at the limit.",
        advice="The budget is too tight or the output runs away: raise `max_sample_tokens`, "
        "or set `overlong_penalty_factor`.",
    ),
    Rule(
        id="grpo.no_signal",
        title="No group has reward variance",
        methods=GRPO,
        variants=(("zero_variance_skip_ratio",),),
        detector="threshold",
        params={"above": 0.95, "k": 4, "n": 10, "k_binary": 8},
        severity="warning",
        learning="reward_mean",
        condition="`zero_variance_skip_ratio` is above {above} on {k} of the last {n} logged "
        "steps: on those steps no group had a spread, so they learned nothing, however the "
        "steps between went (judged on few points too, for runs that log too few for "
        "grpo.zero_variance). A run whose share has been only exactly 0 or 1 trains one "
        "group a step, so a step at 1 is one group in {n}, not a step of many groups "
        "without a spread: there it takes {k_binary} of the last {n}, most of its groups. "
        "One group of 4 samples is all alike on 4 steps in 10 for a model that gets 80% "
        "of them right (0.8^4 + 0.2^4 = 0.41), and learns from the rest.",
        message="{metric} was above {above} on {in_window} of the last {n} logged steps "
        "(last {last:.3g}): on those steps every group scored all its samples the same, so "
        "they learned nothing.",
        advice="The task is far too easy or too hard for the model: read "
        "`identical_nonzero_reward_skip_ratio` to tell which, then change the data's "
        "difficulty, `group_size` or `temperature`.",
    ),
    Rule(
        id="grpo.reward_std_zero",
        title="Rewards within groups no longer differ",
        methods=GRPO,
        variants=(("reward_std",),),
        detector="threshold",
        params={"below": 0.001, **SUSTAINED},
        severity="warning",
        signal="reward_spread",
        learning="reward_mean",
        condition="`reward_std` is below {below} on {k} of the last {n} steps: the samples of "
        "a prompt all score the same (rewards are of order 1, a verifier's 0/1 or ±1 or a "
        "reward model's few units, so a thousandth is no spread at all). Most steps, not "
        "fewer: a step's spread is 0 only when every group of the step has none, and a run "
        "of one prompt a step (a common notebook setting) has one group a step, so the "
        "share of such steps is the share of groups, each step one draw: {k} of {n}, "
        "since a run whose groups are alike on 46% of its steps has 6 of some 10 by "
        "chance (grpo.no_signal's reading of a one-group run). Info while the reward "
        "rises beyond its noise (the groups that have a spread are enough to learn from).",
        message="{metric} fell to {min:.2g} ({in_window} of the last {n} steps below {below}): "
        "every sample of a group scores the same, so the groups carry no learning signal.",
        advice="The reward is saturated or cannot tell samples apart: read the rollouts, "
        "make the task harder or the reward finer, or raise `temperature` or `group_size`.",
    ),
    Rule(
        id="grpo.reward_std_zero_often",
        title="Rewards within groups are alike on half the steps",
        methods=GRPO,
        variants=(("reward_std",),),
        detector="threshold",
        params={"below": 0.001, "k": 5, "n": 10},
        severity="info",
        signal="reward_spread",
        condition="`reward_std` is below {below} on {k} of the last {n} steps: half the "
        "steps' groups carried no learning signal. The spec reads a share of groups alike "
        "under 30% as healthy and one consistently above 50% as a task too easy or too "
        "hard; with one prompt a step a share near 50% reaches {k} of {n} by chance now and "
        "then, so this is an info, and grpo.reward_std_zero warns at 8 of 10. On the "
        "labelled corpus's train split it is the only finding of the class on two runs "
        "labelled with groups alike on 33% and 58% of their steps, and an info on four "
        "healthy runs of one prompt a step whose groups are alike on about a third of them.",
        message="{metric} was below {below} on {in_window} of the last {n} steps (lowest "
        "{min:.2g}): on those steps every sample of a group scored the same.",
        advice="Half the compute teaches nothing: read `identical_nonzero_reward_skip_ratio` "
        "or the rollouts to tell a task too easy from one too hard, and raise `group_size` "
        "or `temperature`, or change the data's difficulty.",
    ),
    Rule(
        id="grpo.reward_pinned",
        title="The reward sits exactly at its floor",
        methods=GRPO,
        variants=(("reward_mean",),),
        detector="pinned",
        params={"k": 3, "n": 5},
        severity="warning",
        condition="`reward_mean` is exactly the lowest value it has taken, and took it before, "
        "on {k} of the last {n} logged steps: a batch's mean reward returns to exactly its "
        "floor only when every sample scores the floor (all wrong, or a penalty every "
        "completion earns), so no group differs within itself. Read from the reward alone, "
        "for runs that log no group statistics; a new low, or a value repeated above the "
        "floor (a rising reward repeats its best), is no hit.",
        message="{metric} was exactly {last:.4g}, the lowest it has been, on {in_window} of "
        "the last {n} logged steps: every sample scored the floor there, so those groups "
        "carry no learning signal.",
        advice="The task is far too hard for the model, or the reward cannot tell samples "
        "apart: read the rollouts and their rewards, then change the data's difficulty, the "
        "reward (partial credit), `group_size` or `temperature`.",
    ),
    Rule(
        id="grpo.no_gradient",
        title="The gradient norm is exactly 0",
        methods=GRPO,
        variants=(("grad_norm", "zero_variance_skip_ratio"), ("grad_norm",)),
        exclusive=True,
        derive=_gradient_unless_groups_differ,
        detector="threshold",
        params={"below": 1e-12, "k": 3, "n": 10, "differ_below": 0.5},
        severity="warning",
        condition="`grad_norm` is 0 on {k} of the last {n} steps: every advantage of the batch "
        "was 0 (each group scored all its samples the same), so those steps learned nothing. "
        "Not at a step where the run's `zero_variance_skip_ratio` is below {differ_below}: "
        "most groups there had a spread (the share may be a mean over the steps since the "
        "last log, the norm the last step's), so their advantages were not 0, and a "
        "gradient of exactly 0 beside them is frozen weights or a logger that does not see "
        "the gradient.",
        message="{metric} was exactly 0 on {in_window} of the last {n} steps: nothing is learned "
        "on those steps.",
        advice="The reward gives no group a spread (a cap every sample reaches, a task solved "
        "or never solved): read the rewards per group, remove the cap or change the data's "
        "difficulty, `group_size` or `temperature`.",
    ),
    Rule(
        id="grpo.reward_range_zero",
        title="Every completion of the step scored the same",
        methods=GRPO,
        variants=(("reward_max", "reward_min"),),
        derive=_difference,
        detector="threshold",
        params={"below": 1e-12, "k": 3, "n": 10},
        severity="warning",
        condition="The step's highest reward (`reward_max`) equals its lowest (`reward_min`) "
        "on {k} of the last {n} logged steps: every completion of the batch scored the same, "
        "so no group differs within itself, every advantage is 0 and those steps learned "
        "nothing (grpo.no_gradient's reading, for a run whose gradient also carries a KL "
        "or entropy term and is never exactly 0).",
        message="{metrics[0]} equalled {metrics[1]} on {in_window} of the last {n} logged steps: "
        "every completion of those steps scored the same, so they learned nothing.",
        advice="The task is far too hard (or too easy) for the model, or the reward cannot "
        "tell completions apart: read the rollouts and their rewards, then change the "
        "data's difficulty, the reward (partial credit), `group_size` or `temperature`.",
    ),
    Rule(
        id="grpo.perplexity_hacking",
        title="Validation perplexity climbs while validation reward rises",
        methods=GRPO,
        variants=(("val/reward_mean", "val/loss"),),
        detector="divergence",
        params={"a_dir": "up", "b_dir": "up", "window": 6, "a_effect": 0.0,
                "b_effect": 0.7, "a_bucket": 1},
        severity="warning",
        condition="Over the last {window} validations `val/loss` (the log of the validation "
        "perplexity) rises by {b_effect} nats (the perplexity doubles) while "
        "`val/reward_mean` does not fall: the reward is won with text the model finds ever "
        "less likely, which is what reward hacking looks like when the reward model itself "
        "judges validation.",
        message="{metric} {b_change} while {reference} {a_change}.",
        advice="Likely reward hacking: read validation rollouts for degenerate text, add a KL "
        "penalty or raise `beta`, and keep the checkpoint from before the climb.",
    ),
)
