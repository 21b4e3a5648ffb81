"""The catalogue: every canonical metric runwatch knows, its meaning, unit, role and who writes it.

Meanings follow the product spec (monitor-training-runs, observe-a-run). `recipes`
names the bundled recipes that write a metric (tests/metrics checks it against real
runs); a metric no recipe writes is one the health rules or displays read from other
frameworks' runs through an alias (see `aliases`). `docs/metrics.md` and the web's
`metrics.gen.ts` are generated from this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Role(StrEnum):
    """A part a metric (or, for GRAD_ACCUM, a run setting) plays in what runwatch shows."""

    TRAIN_LOSS = "train_loss"
    EVAL_LOSS = "eval_loss"
    REWARD = "reward"
    VAL_REWARD = "val_reward"
    ACCURACY = "accuracy"
    VAL_ACCURACY = "val_accuracy"
    PREFERENCE_ACCURACY = "preference_accuracy"
    VAL_PREFERENCE_ACCURACY = "val_preference_accuracy"
    MARGIN = "margin"
    VAL_MARGIN = "val_margin"
    LEARNING_RATE = "learning_rate"
    GRAD_NORM = "grad_norm"
    GRAD_CLIP_FACTOR = "grad_clip_factor"
    UPDATE_RATIO = "update_ratio"
    ADAPTER_NORM = "adapter_norm"
    EXAMPLES = "examples"
    TOKENS = "tokens"
    GRAD_ACCUM = "grad_accum"
    STEP_TIME = "step_time"
    RATIO_MEAN = "ratio_mean"
    CLIPPED_RATIO_MEAN = "clipped_ratio_mean"
    CLIP_HIGH = "clip_high"
    CLIP_LOW = "clip_low"
    KL_POLICY = "kl_policy"
    KL_POLICY_K3 = "kl_policy_k3"
    KL_REF = "kl_ref"


SFT, DPO, GRPO = "sft", "dpo", "grpo"
ALL = (SFT, DPO, GRPO)


@dataclass(frozen=True)
class Metric:
    """One canonical metric (or, with `setting`, a run setting the displays read)."""

    name: str
    unit: str
    meaning: str
    recipes: tuple[str, ...] = ()
    role: Role | None = None
    setting: bool = False


def _group(title: str, *metrics: Metric) -> tuple[str, tuple[Metric, ...]]:
    return title, metrics


M = Metric
GROUPS: tuple[tuple[str, tuple[Metric, ...]], ...] = (
    _group(
        "Training",
        M("loss", "nats/token", "The training loss. SFT: mean cross-entropy per trained token, "
          "a real progress signal that should fall. DPO: the DPO loss plus rpo_alpha times "
          "`chosen_nll`. GRPO: a poor progress signal (flat, negative or non-monotonic while "
          "reward improves).", ALL, Role.TRAIN_LOSS),
        M("loss_sum", "nats", "The unnormalized total of the SFT loss; it scales with the "
          "batch's token count, so it is not comparable across steps.", (SFT,)),
        M("trained_tokens", "tokens", "The weight mass of the batch's loss mask, the "
          "denominator of `loss`.", (SFT,), Role.TOKENS),
        M("samples", "sequences", "Sequences trained this step; can differ from batch_size "
          "when a conversation splits into several sequences or a row cannot be rendered.",
          (SFT,), Role.EXAMPLES),
        M("pairs", "pairs", "Preference pairs trained this step.", (DPO,)),
        M("padding_fraction", "fraction", "The share of the step's batch that was padding.",
          (SFT, DPO)),
        M("learning_rate", "", "The scheduled learning rate of the step.", ALL,
          Role.LEARNING_RATE),
        M("accuracy", "fraction", "Mean of the dataset's metric (or reward) over the "
          "completions in the groups that trained; zero-variance groups are left out. "
          "Read `val/accuracy` for the unbiased number.", (GRPO,), Role.ACCURACY),
        M("reward_mean", "reward", "Mean of raw reward plus overlong penalty over the "
          "groups that trained.", (GRPO,), Role.REWARD),
        M("reward_std", "reward", "Spread of raw reward plus overlong penalty over the "
          "groups that trained.", (GRPO,)),
        M("reward_max", "reward", "Highest reward a completion of the step earned (logged "
          "by other frameworks).", ()),
        M("reward_min", "reward", "Lowest reward a completion of the step earned (logged "
          "by other frameworks).", ()),
        M("entropy", "nats/token", "Mean entropy of the policy's token distribution (logged "
          "by other frameworks).", ()),
        M("dpo_loss", "nats", "The DPO term of the loss, -log sigmoid(beta × margin).",
          (DPO,)),
        M("chosen_nll", "nats/token", "Mean per-token negative log-likelihood of the chosen "
          "replies (the RPO anchor).", (DPO,)),
        M("preference_accuracy", "fraction", "Fraction of the step's pairs where the "
          "policy's implicit reward prefers the chosen reply.", (DPO,),
          Role.PREFERENCE_ACCURACY),
        M("mean_chosen_delta", "nats", "Mean shift of the chosen replies' log-probability "
          "versus the reference.", (DPO,)),
        M("mean_rejected_delta", "nats", "Mean shift of the rejected replies' "
          "log-probability versus the reference.", (DPO,)),
        M("mean_margin", "nats", "Mean `chosen_delta - rejected_delta` over the step's pairs.",
          (DPO,), Role.MARGIN),
    ),
    _group(
        "Validation",
        M("val/loss", "nats/token", "The loss on the validation set.", (SFT, DPO),
          Role.EVAL_LOSS),
        M("val/accuracy", "fraction", "Accuracy on the validation set, sampled greedily "
          "(GRPO: always exact match, even when the training reward is a flawed scorer). "
          "The headline metric; it should rise, then plateau.", (SFT, GRPO),
          Role.VAL_ACCURACY),
        M("val/reward_mean", "reward", "Mean reward on the validation set (the headline "
          "metric of a multi-turn run).", (GRPO,), Role.VAL_REWARD),
        M("val/mean_response_length", "tokens", "Mean length of the validation "
          "completions; drifting upward is length runaway.", (SFT, GRPO)),
        M("val/preference_accuracy", "fraction", "Fraction of held-out pairs where the "
          "policy's implicit reward prefers the chosen response; the headline DPO signal.",
          (DPO,), Role.VAL_PREFERENCE_ACCURACY),
        M("val/mean_chosen_delta", "nats", "`mean_chosen_delta` on held-out pairs.", (DPO,)),
        M("val/mean_rejected_delta", "nats", "`mean_rejected_delta` on held-out pairs.",
          (DPO,)),
        M("val/mean_margin", "nats", "Mean `chosen_delta - rejected_delta` on held-out "
          "pairs; it should turn positive and grow.", (DPO,), Role.VAL_MARGIN),
        M("val/dpo_loss", "nats", "`dpo_loss` on held-out pairs.", (DPO,)),
        M("val/chosen_nll", "nats/token", "`chosen_nll` on held-out pairs.", (DPO,)),
        M("val/num_turns_mean", "turns", "`num_turns_mean` of the validation episodes.",
          (GRPO,)),
        M("val/terminated_ratio", "fraction", "`terminated_ratio` of the validation "
          "episodes.", (GRPO,)),
        M("val/truncated_ratio", "fraction", "`truncated_ratio` of the validation "
          "completions or episodes.", (GRPO,)),
        M("val/parse_failure_ratio", "fraction", "`parse_failure_ratio` of the validation "
          "episodes.", (GRPO,)),
        M("val/context_overflow_ratio", "fraction", "`context_overflow_ratio` of the "
          "validation episodes.", (GRPO,)),
    ),
    _group(
        "Optimizer",
        M("grad_norm", "norm", "The gradient norm before clipping.", ALL, Role.GRAD_NORM),
        M("grad_clip_factor", "factor", "The factor the gradient was scaled by in clipping: "
          "max_grad_norm divided by the gradient norm, or 1 when the norm does not exceed "
          "it.", ALL, Role.GRAD_CLIP_FACTOR),
        M("adapter_norm", "norm", "The norm of the trained weights after the step.", ALL,
          Role.ADAPTER_NORM),
        M("update_ratio", "ratio", "The norm of the step's update divided by the norm of "
          "the trained weights before the step.", ALL, Role.UPDATE_RATIO),
    ),
    _group(
        "GRPO update (fb/)",
        M("fb/loss/ratio/mean", "ratio", "Mean importance ratio over trained tokens: the "
          "trainer's probability of a token divided by the generator's. Near 1 is "
          "healthy.", (GRPO,), Role.RATIO_MEAN),
        M("fb/loss/kl_policy/mean", "nats", "Approximate KL between the trainer and "
          "generator policies; near 0 when on-policy.", (GRPO,), Role.KL_POLICY),
        M("fb/loss/kl_policy/k3/mean", "nats", "The same KL from the k3 estimator.",
          (GRPO,), Role.KL_POLICY_K3),
        M("fb/loss/clip/high_fraction", "fraction", "Fraction of trained tokens with a "
          "positive advantage and a ratio above clip_high_threshold, so their gradient was "
          "suppressed.", (GRPO,), Role.CLIP_HIGH),
        M("fb/loss/clip/low_fraction", "fraction", "The same measure for tokens with a "
          "negative advantage and a ratio below clip_low_threshold.", (GRPO,), Role.CLIP_LOW),
        M("fb/loss/clip/clipped_ratio/mean", "ratio", "Mean of the clamped ratio; context "
          "for the two clip fractions.", (GRPO,), Role.CLIPPED_RATIO_MEAN),
        M("fb/loss/kl_ref/mean", "nats", "KL to the reference policy; logged only when "
          "beta > 0.", (GRPO,), Role.KL_REF),
        M("fb/loss/aggregate/active_fraction", "fraction", "Fraction of the submitted "
          "tokens, prompts included, that contributed to the loss (padding does not "
          "count).", (GRPO,)),
    ),
    _group(
        "GRPO sampling",
        M("zero_variance_skip_ratio", "fraction", "Fraction of groups skipped because every "
          "completion scored the same.", (GRPO,)),
        M("identical_nonzero_reward_skip_ratio", "fraction", "The skipped groups where every "
          "completion succeeded, as a fraction of all groups.", (GRPO,)),
        M("truncated_ratio", "fraction", "Fraction of completions cut off at the length "
          "budget (multi-turn: episodes cut short by the turn limit, context overflow, a "
          "parse failure or the environment).", (GRPO,)),
        M("mean_sampled_response_length", "tokens", "Average number of tokens the model "
          "produced per completion.", (GRPO,)),
        M("mean_response_budget", "tokens", "Average token budget per completion: "
          "max_sample_tokens, or less when a long prompt leaves less room in "
          "max_model_length (single-turn only).", (GRPO,)),
        M("mean_trainable_response_length", "tokens", "Average completion length kept for "
          "training (single-turn only).", (GRPO,)),
        M("post_budget_clip_ratio", "fraction", "Fraction of completions cut to the budget "
          "before training (single-turn only); should stay near zero.", (GRPO,)),
        M("overlong_penalized_ratio", "fraction", "Fraction of completions the overlong "
          "penalty lowered.", (GRPO,)),
        M("mean_overlong_penalty", "reward", "Mean overlong penalty per completion (0 or "
          "negative).", (GRPO,)),
        M("completion_advantage_std", "advantage", "Spread of the advantages that trained; "
          "near zero means tight reward distributions and small updates.", (GRPO,)),
        M("mean_logprob", "nats/token", "Mean per-token log-probability the generator "
          "assigned to its own samples.", (GRPO,)),
    ),
    _group(
        "Multi-turn",
        M("num_turns_mean", "turns", "Mean turns per episode.", (GRPO,)),
        M("terminated_ratio", "fraction", "Fraction of episodes that ended on task logic.",
          (GRPO,)),
        M("parse_failure_ratio", "fraction", "Fraction of episodes with a reply the "
          "environment could not parse.", (GRPO,)),
        M("context_overflow_ratio", "fraction", "Fraction of episodes that ran out of "
          "context (max_model_length).", (GRPO,)),
    ),
    _group(
        "Dynamic sampling (max_sampling_attempts > 1)",
        M("dynamic_sampling/attempts", "batches", "Number of batches the step drew.", (GRPO,)),
        M("dynamic_sampling/total_groups_sampled", "groups", "Groups scored across all "
          "attempts, up to the one that filled the batch.", (GRPO,)),
        M("dynamic_sampling/kept_groups", "groups", "Groups with varied rewards that the "
          "step trained on.", (GRPO,)),
    ),
    _group(
        "Async collection (max_steps_off_policy set)",
        M("async/accepted_groups", "groups", "Groups trained on this step.", (GRPO,)),
        M("async/staleness_mean", "steps", "Mean age of the trained groups in optimizer "
          "steps.", (GRPO,)),
        M("async/staleness_max", "steps", "Largest age of the trained groups in optimizer "
          "steps; never above max_steps_off_policy.", (GRPO,)),
        M("async/dropped_stale_groups", "groups", "Groups discarded for exceeding the "
          "staleness budget.", (GRPO,)),
        M("async/dropped_zero_variance_groups", "groups", "Groups discarded for having no "
          "reward variance.", (GRPO,)),
        M("async/queue_depth", "groups", "Completed groups waiting when the step began.",
          (GRPO,)),
        M("async/train_wait_s", "s", "Seconds the step spent blocked waiting for groups.",
          (GRPO,)),
        M("async/mid_rollout_drift_ratio", "fraction", "Fraction of generated tokens "
          "produced by a policy other than the one the group was scheduled against.",
          (GRPO,)),
    ),
    _group(
        "Policy versions",
        M("policy/trainer_step", "version", "The version the last optimizer step produced.",
          (GRPO,)),
        M("policy/target_weights_version", "version", "The version the latest weights sync "
          "promised the generators.", (GRPO,)),
        M("policy/applied_weights_version", "version", "The version the generators are "
          "serving.", (GRPO,)),
    ),
    _group(
        "Timing",
        M("timing/step_total_s", "s", "Wall-clock time of the whole step; the basis of a "
          "run's cost estimate.", ALL, Role.STEP_TIME),
        M("timing/step_forward_backward_s", "s", "Time of the forward and backward pass.",
          (SFT, DPO)),
        M("timing/step_optim_s", "s", "Time of the optimizer step.", (SFT, DPO)),
        M("timing/val_s", "s", "Time of the step's validation.", (SFT, DPO)),
        M("timing/step_sample_s", "s", "Time spent sampling (or waiting for) the step's "
          "groups.", (GRPO,)),
        M("timing/step_train_s", "s", "Time of the step's updates.", (GRPO,)),
        M("timing/step_val_s", "s", "Time of the step's validation.", (GRPO,)),
    ),
    _group(
        "Memory (logged on a step that sets a new peak)",
        M("memory/weights_bytes", "bytes", "The model's weights (DPO: with the reference).",
          (SFT, DPO, GRPO)),
        M("memory/adapter_bytes", "bytes", "The adapter's weights.", (SFT, DPO, GRPO)),
        M("memory/gradients_bytes", "bytes", "The gradients.", (SFT, DPO, GRPO)),
        M("memory/optimizer_state_bytes", "bytes", "The optimizer's state.", (SFT, DPO, GRPO)),
        M("memory/activations_bytes", "bytes", "The activations saved for the backward "
          "pass, all alive at the end of the forward pass.", (SFT, DPO, GRPO)),
        M("memory/generation_bytes", "bytes", "What the generator holds besides the trainer's "
          "weights: its copy of the policy and the published snapshot.", (GRPO,)),
        M("memory/total_bytes", "bytes", "The sum of the parts above.", (SFT, DPO, GRPO)),
        M("memory/process_peak_rss_bytes", "bytes", "The process's peak resident memory "
          "(interpreter, libraries and dataset included).", (SFT, DPO, GRPO)),
    ),
    _group(
        "Data fit (logged once, on the first step)",
        M("data_fit/rows", "rows", "Rows the batches drew.", (SFT,)),
        M("data_fit/rows_at_max_length", "rows", "Rows that reached max_seq_length.", (SFT,)),
        M("data_fit/rows_lost_target_end", "rows", "Rows cut at max_seq_length that likely "
          "lost the end of their target.", (SFT,)),
        M("data_fit/rows_dropped_empty", "rows", "Rows dropped with nothing left to train "
          "on.", (SFT,)),
    ),
    _group(
        "Settings (read from the run's config.yaml, at any depth)",
        M("gradient_accumulation_steps", "steps", "Micro-batches accumulated per optimizer "
          "step.", (), Role.GRAD_ACCUM, setting=True),
    ),
)

METRICS: tuple[Metric, ...] = tuple(m for _, group in GROUPS for m in group)
BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}
BY_ROLE: dict[Role, Metric] = {m.role: m for m in METRICS if m.role is not None}
