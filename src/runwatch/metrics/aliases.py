"""Alias tables: other frameworks' metric names mapped to runwatch's canonical ones.

A run keeps the names it logged; the health rules read the canonical name (`canonical`),
and the displays find the key that plays a role (`runwatch.metrics.find_key`). Some
aliases need a transform: tinker-cookbook logs the fraction of groups with mixed
rewards, the complement of `zero_variance_skip_ratio`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from runwatch.metrics.catalogue import BY_NAME

Transform = Callable[[list[float]], list[float]]


def complement(values: list[float]) -> list[float]:
    return [1.0 - v for v in values]


def negate(values: list[float]) -> list[float]:
    return [-v for v in values]


@dataclass(frozen=True)
class Alias:
    canonical: str
    framework: str
    transform: str | None = None  # a name in TRANSFORMS, kept as text for the docs


def log(values: list[float]) -> list[float]:
    """The natural log (a perplexity's log is the loss in nats); NaN where none exists."""
    return [math.log(v) if v > 0 else math.nan for v in values]


def magnitude(values: list[float]) -> list[float]:
    """The size of each value, whatever its sign."""
    return [abs(v) for v in values]


TRANSFORMS: dict[str, Transform] = {"1 - x": complement, "-x": negate, "ln x": log,
                                    "|x|": magnitude}

# Exact names. Where two frameworks use one name with one meaning, one entry serves both.
EXACT: dict[str, Alias] = {
    # --- TRL (GRPOTrainer, DPOTrainer, SFTTrainer; eval entries carry eval_) ---
    "reward": Alias("reward_mean", "TRL, OpenRLHF"),
    "reward_std": Alias("reward_std", "TRL GRPO, RLOO"),
    "clip_ratio/region_mean": Alias("fb/loss/clip/clipped_ratio/mean", "TRL GRPO"),
    # TRL DPOTrainer and online DPO log the implicit rewards β·(log π − log π_ref), β-scaled
    # as rewards/margins is.
    "rewards/chosen": Alias("mean_chosen_delta", "TRL DPO, online DPO"),
    "rewards/rejected": Alias("mean_rejected_delta", "TRL DPO, online DPO"),
    "eval_rewards/chosen": Alias("val/mean_chosen_delta", "TRL DPO"),
    "eval_rewards/rejected": Alias("val/mean_rejected_delta", "TRL DPO"),
    "frac_reward_zero_std": Alias("zero_variance_skip_ratio", "TRL"),
    "clip_ratio/high_mean": Alias("fb/loss/clip/high_fraction", "TRL"),
    "clip_ratio/low_mean": Alias("fb/loss/clip/low_fraction", "TRL"),
    "completions/mean_length": Alias("mean_sampled_response_length", "TRL"),
    "completion_length": Alias("mean_sampled_response_length", "TRL (older)"),
    "completions/clipped_ratio": Alias("truncated_ratio", "TRL"),
    "kl": Alias("fb/loss/kl_ref/mean", "TRL, OpenRLHF"),
    "rewards/accuracies": Alias("preference_accuracy", "TRL DPO"),
    "rewards/margins": Alias("mean_margin", "TRL DPO"),
    "eval_rewards/accuracies": Alias("val/preference_accuracy", "TRL DPO"),
    "eval_rewards/margins": Alias("val/mean_margin", "TRL DPO"),
    "eval_loss": Alias("val/loss", "TRL"),
    "eval_reward": Alias("val/reward_mean", "TRL"),
    "eval_accuracy": Alias("val/accuracy", "TRL"),
    "eval_completions/mean_length": Alias("val/mean_response_length", "TRL"),
    # TRL PPOTrainer / RLOOTrainer / online DPO (0.12 and later): objective/kl is the
    # KL to the reference, policy/entropy_avg the token entropy (objective/entropy is a
    # per-sequence sum and is left out), val/ratio the mean importance ratio.
    "objective/kl": Alias("fb/loss/kl_ref/mean", "TRL PPO, RLOO, online DPO"),
    "objective/scores": Alias("reward_mean", "TRL PPO, RLOO, online DPO"),
    "policy/entropy_avg": Alias("entropy", "TRL PPO, RLOO"),
    "policy/approxkl_avg": Alias("fb/loss/kl_policy/mean", "TRL PPO, RLOO"),
    "policy/clipfrac_avg": Alias("fb/loss/clip/high_fraction", "TRL PPO, RLOO"),
    "val/ratio": Alias("fb/loss/ratio/mean", "TRL PPO, RLOO"),
    # TRL PPOTrainer before 0.12 (PPOTrainer.step's stats)
    "env/reward_mean": Alias("reward_mean", "TRL PPO (before 0.12)"),
    "env/reward_std": Alias("reward_std", "TRL PPO (before 0.12)"),
    "ppo/policy/entropy": Alias("entropy", "TRL PPO (before 0.12)"),
    "ppo/policy/clipfrac": Alias("fb/loss/clip/high_fraction", "TRL PPO (before 0.12)"),
    "ppo/policy/approxkl": Alias("fb/loss/kl_policy/mean", "TRL PPO (before 0.12)"),
    # --- verl ---
    "actor/pg_clipfrac": Alias("fb/loss/clip/high_fraction", "verl"),
    "actor/pg_clipfrac_lower": Alias("fb/loss/clip/low_fraction", "verl"),
    "actor/ppo_kl": Alias("fb/loss/kl_policy/mean", "verl"),
    "actor/kl_loss": Alias("fb/loss/kl_ref/mean", "verl"),
    "actor/grad_norm": Alias("grad_norm", "verl"),
    "actor/lr": Alias("learning_rate", "verl"),
    "actor/entropy": Alias("entropy", "verl"),
    "actor/entropy_loss": Alias("entropy", "verl (before 0.4: the entropy, logged as a loss)"),
    "critic/kl": Alias("fb/loss/kl_ref/mean", "verl (KL in the reward, before 0.3)"),
    "actor/reward_kl_penalty": Alias("fb/loss/kl_ref/mean", "verl (KL in the reward)"),
    "critic/score/mean": Alias("accuracy", "verl"),
    "critic/rewards/mean": Alias("reward_mean", "verl"),
    "critic/rewards/max": Alias("reward_max", "verl"),
    "critic/rewards/min": Alias("reward_min", "verl"),
    "critic/advantages/std": Alias("completion_advantage_std", "verl"),
    "response_length/mean": Alias("mean_sampled_response_length", "verl"),
    "response_length/clip_ratio": Alias("truncated_ratio", "verl"),
    "timing_s/step": Alias("timing/step_total_s", "verl"),
    # --- OpenRLHF ---
    "ppo_clip_ratio": Alias("fb/loss/clip/high_fraction", "OpenRLHF"),
    "ppo_kl": Alias("fb/loss/kl_policy/mean", "OpenRLHF"),
    "response_length": Alias("mean_sampled_response_length", "OpenRLHF"),
    "actor_lr": Alias("learning_rate", "OpenRLHF"),
    "policy_entropy": Alias("entropy", "OpenRLHF"),
    "actor_grad_norm": Alias("grad_norm", "OpenRLHF"),
    "response_clip_ratio": Alias("truncated_ratio", "OpenRLHF"),
    "gpt_loss": Alias("loss", "OpenRLHF SFT"),
    "chosen_reward": Alias("mean_chosen_delta", "OpenRLHF DPO"),
    "reject_reward": Alias("mean_rejected_delta", "OpenRLHF DPO"),
    # --- tinker-cookbook (rl/train.py metrics.jsonl) ---
    "env/all/by_group/frac_mixed": Alias("zero_variance_skip_ratio", "tinker-cookbook", "1 - x"),
    "env/all/reward/total": Alias("reward_mean", "tinker-cookbook"),
    "test/env/all/reward/total": Alias("val/reward_mean", "tinker-cookbook"),
    "env/all/ac_tokens_per_turn": Alias("mean_sampled_response_length", "tinker-cookbook"),
    "test/env/all/ac_tokens_per_turn": Alias("val/mean_response_length", "tinker-cookbook"),
    "env/all/turns_per_episode": Alias("num_turns_mean", "tinker-cookbook"),
    "optim/kl_sample_train_v1": Alias("fb/loss/kl_policy/mean", "tinker-cookbook"),
    "optim/kl_sample_train_v2": Alias("fb/loss/kl_policy/k3/mean", "tinker-cookbook"),
    "optim/lr": Alias("learning_rate", "tinker-cookbook"),
    "optim/entropy": Alias("entropy", "tinker-cookbook"),
    "time/total": Alias("timing/step_total_s", "tinker-cookbook"),
    # the math and other verifiable environments' per-episode correctness, a task score
    "env/all/correct": Alias("accuracy", "tinker-cookbook"),
    "test/env/all/correct": Alias("val/accuracy", "tinker-cookbook"),
    "train_mean_nll": Alias("loss", "tinker-cookbook (supervised)"),
    "dpo_loss": Alias("loss", "tinker-cookbook (DPO)"),
    # On-policy distillation: the per-token advantage is minus the reverse KL to the
    # teacher (log p_student - log p_teacher), so minus that KL is the reward the run
    # maximises, and a KL that does not fall is a reward that does not rise.
    "teacher_kl": Alias("reward_mean", "tinker-cookbook (on-policy distillation)", "-x"),
    # --- Stable-Baselines3 (PPO's progress.csv; train/entropy_loss is minus the entropy
    # and shares its name, once the train/ prefix is read off, with OpenRLHF's entropy_loss
    # that is the entropy itself: neither is aliased here; the rules read its magnitude,
    # ALONE_TRANSFORMED below) ---
    "rollout/ep_rew_mean": Alias("reward_mean", "Stable-Baselines3"),
    # --- hand-written GRPO loops ---
    "mean_reward": Alias("reward_mean", "hand-written GRPO loops"),
    "train_reward_std": Alias("reward_std", "hand-written GRPO loops"),
    "policy/entropy": Alias("entropy", "hand-written RL loops"),
    # The gradient norm spelled out (CS336's GRPO loop logs `gradient_norm`, exactly 0 at a
    # step whose every group scored alike): the same norm `grad_norm` names.
    "gradient_norm": Alias("grad_norm", "hand-written loops"),
    # The perplexity on held-out text is exp(loss): its log is the validation loss.
    "eval_perplexity": Alias("val/loss", "hand-written loops, HF examples", "ln x"),
    "val_perplexity": Alias("val/loss", "hand-written loops", "ln x"),
    "reverse_kl": Alias("reward_mean", "hand-written on-policy distillation loops", "-x"),
    # DeepRetrieval-GRPO's share of groups whose samples all scored the same. Added after
    # that run (tests/data/real/grpo_deepretrieval) left the held-back split; see
    # docs/health.md, "Score on real logs".
    "flat_reward_group_ratio": Alias("zero_variance_skip_ratio", "hand-written GRPO loops"),
    # The same share as GRPO studies abbreviate it, the zero-variance fraction (`zvf`:
    # groups whose samples all scored alike, all right or all wrong). Added after round 12's
    # three runs that log it (tinker-rl-lab) left the held-back split.
    "zvf": Alias("zero_variance_skip_ratio", "hand-written GRPO loops"),
}


def eval_twins(table: dict[str, Alias]) -> dict[str, Alias]:
    """The eval set's form of each TRL name in `table` that the vocabulary has a `val/`
    form for: TRL's trainers, built on the Hugging Face Trainer, log an evaluation's
    metrics under their training names prefixed `eval_` (`completions/clipped_ratio` is
    `truncated_ratio`, so `eval_completions/clipped_ratio` is `val/truncated_ratio`).
    Not the PPOTrainer's before 0.12, which was no Trainer; names the table lists already
    keep their entry."""
    return {f"eval_{key}": Alias(f"val/{alias.canonical}", f"{alias.framework} (eval set)",
                                 alias.transform)
            for key, alias in table.items()
            if alias.framework.startswith("TRL") and "before 0.12" not in alias.framework
            and f"val/{alias.canonical}" in BY_NAME and f"eval_{key}" not in table}


# The eval twins are aliases the health rules read too: a TRL run that logs one feeds a
# `val/` metric it did not feed before (docs/metrics.md lists them with the others).
EXACT.update(eval_twins(EXACT))

# Names that hand-written loops and older tools log for a metric that a display (tile,
# result, table column, chart line) shows. The health rules do not read them (their
# meaning varies between tools: the HF Trainer's `train_loss` is the run's mean loss),
# except `train_loss` and `val_loss` (READ_WHEN_ALONE below), in a run that logs its role
# under no other name.
SHOWN: dict[str, Alias] = {
    "train_loss": Alias("loss", "HF Trainer (run mean), hand-written loops"),
    "val_loss": Alias("val/loss", "hand-written loops"),
    "lr": Alias("learning_rate", "hand-written loops"),
    "examples": Alias("samples", "hand-written loops"),
    "num_examples": Alias("samples", "hand-written loops"),
    "tokens": Alias("trained_tokens", "hand-written loops"),
    "num_tokens": Alias("trained_tokens", "hand-written loops"),
    "grad_accum": Alias("gradient_accumulation_steps", "config files"),
    "grad_accum_steps": Alias("gradient_accumulation_steps", "config files"),
    "gradient_accumulation": Alias("gradient_accumulation_steps", "config files"),
}

# Name patterns (verl names validation metrics after the data source).
PATTERNS: tuple[tuple[re.Pattern[str], Alias], ...] = (
    # the core validation metric: acc (or reward) averaged over the N samples per prompt;
    # the data source may hold a slash (`val-core/openai/gsm8k/reward/mean@1`)
    (re.compile(r"^val-core/.+/(?:reward|acc)/mean@\d+$"), Alias("val/accuracy", "verl")),
    (re.compile(r"^val/test_score/[^/]+$"), Alias("val/accuracy", "verl (older)")),
    (re.compile(r"^eval_[^/]+_pass1$"), Alias("val/accuracy", "OpenRLHF")),
)


# Prefixes the Hugging Face Trainer adds when it logs to TensorBoard: the rest of the
# name is then looked up as if logged to trainer_state.json. (prefix, replacement, source)
PREFIXES: tuple[tuple[str, str, str], ...] = (
    ("train/", "", "Hugging Face Trainer (TensorBoard)"),
    ("eval/", "eval_", "Hugging Face Trainer (TensorBoard)"),
    # The service's policy_state fields (session.retrieve()) logged under their own name.
    ("policy_state/", "policy/", "the service's policy_state (session.retrieve())"),
)


@lru_cache(maxsize=4096)
def resolve(key: str) -> tuple[str, Alias | None]:
    """The name `key` is looked up as (after a prefix rule) and the alias it is, if any.

    Cached: a run asks about the same few dozen names on every step."""
    for prefix, replacement, _source in PREFIXES:
        if key.startswith(prefix):
            key = replacement + key[len(prefix):]
            break
    alias = EXACT.get(key)
    if alias is None:
        alias = next((a for pattern, a in PATTERNS if pattern.match(key)), None)
    return key, alias


# Shown names the health rules read too, but only where the run feeds the canonical
# metric under no other name first (the engine's first-come claim): a hand-written
# distillation or translation loop logs only `train_loss` and `val_loss` per epoch,
# while the HF Trainer's end-of-run `train_loss` comes after `loss` has claimed the role.
# Other names read the same way (the displays do not list them yet: an alias there
# changes the web app's generated vocabulary): NeMo's Megatron trainers log the training
# loss as `reduced_train_loss` beside `val_loss`; PyTorch Lightning's CSVLogger writes a
# loss logged on step and on epoch as `train_loss_step` and `train_loss_epoch` (the step
# series is read); hand-written RL loops name their mean reward `reward/mean`,
# `rewards/mean` or `avg_reward`, a GRPO loop its KL to the reference `kl_avg` or
# `mean_kl`, and a DPO loop its mean β-scaled margin `margin`. The HF Trainer's notebook
# progress table (NotebookProgressCallback), which authors paste into READMEs and notes,
# heads its columns `Training Loss` and `Validation Loss`.
READ_WHEN_ALONE: dict[str, str] = {
    "train_loss": "loss", "val_loss": "val/loss", "reduced_train_loss": "loss",
    "train_loss_step": "loss", "reward/mean": "reward_mean", "rewards/mean": "reward_mean",
    "avg_reward": "reward_mean",
    # hand-written GRPO loops' KL to the reference (GRPO has no other KL to log)
    "kl_avg": "fb/loss/kl_ref/mean", "mean_kl": "fb/loss/kl_ref/mean",
    "margin": "mean_margin", "Training Loss": "loss", "Validation Loss": "val/loss",
    # a hand-written loop's learning rate (rl.no_progress reads its warm-up)
    "lr": "learning_rate",
    # LLaMA-Adapter's log.txt (the MAE-style engine its fine-tuning scripts share): the
    # causal-LM loss, averaged over an epoch, on the training and the validation set
    "train_closs": "loss", "val_closs": "val/loss",
}


# A reward function's own mean that scores correctness, as TRL logs each function of a
# GRPO run (`rewards/accuracy_reward/mean`, older `rewards/correctness_reward_func`): the
# task score the summed reward should move with; on the eval set
# (`eval_rewards/accuracy_reward/mean`) the held-out accuracy. Read by the health rules
# only (the displays show the summed reward).
TASK_SCORE = re.compile(r"^rewards/[^/]*(?:accuracy|correct)[^/]*(?:/mean)?$")


# Names the health rules read, like READ_WHEN_ALONE, only where the run logs the role
# under no other name. The HF Trainer names each set's metrics `eval_<set>_loss` when
# `eval_dataset` is a dict of sets (the first set logged judges the run); reward-model
# studies and RL loops name the true objective a proxy reward stands in for `gold_*`
# (`gold_acc`, `gold_reward`, `gold/score`): the task score the trained reward should
# move with; `true_*` (`true_acc`, `true_reward`) names the same objective. Such studies
# name the reward the policy is trained on, which stands in for it, `proxy`
# (`proxy_reward`, `proxy/score`): the trained reward.
ALONE_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^eval_[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*?_loss$"), "val/loss"),
    (re.compile(r"^(?!.*(?:std|stdev|var)(?:$|[_/]))"
                r"(?:[^/]+/)*(?:gold|true)[_/](?:acc|accuracy|score|reward|correct)[^/]*$"),
     "accuracy"),
    (re.compile(r"^(?:[^/]+/)*proxy(?:[_/](?:reward|score|rm))?(?:[_/]mean)?$"),
     "reward_mean"),
)


# Raw names read with a transform where no other name feeds the role. Stable-Baselines3
# writes `train/entropy_loss`, minus a discrete policy's entropy (negative), and OpenRLHF's
# W&B history the same name for the entropy itself (positive): the magnitude is the
# entropy in both (a Gaussian policy's entropy that crosses 0 is read only until it does).
ALONE_TRANSFORMED: dict[str, tuple[str, str]] = {"train/entropy_loss": ("entropy", "|x|")}


# Words that make a `…loss` another loss than the policy's own (the training loss a
# hand-written loop logs, or its held-out loss): a value or critic head's, a KL, entropy,
# auxiliary or regularising term, a teacher's or distillation term, a router's balance,
# an SFT term beside an RL objective, a reference model's.
NOT_THE_MODELS_LOSS = frozenset({"value", "vf", "critic", "kl", "entropy", "ent", "aux", "reg",
                                 "z", "teacher", "distill", "balance", "router", "moe", "sft",
                                 "ref"})
# A cross-entropy named as such (`cross-entropy-loss`, `ce_loss`, `xent_loss`, `nll_loss`) is
# the model's own token loss, though "entropy" alone makes a loss an entropy bonus's term.
CROSS_ENTROPY = frozenset({"ce", "xent", "crossentropy", "nll"})
# Words that make a cross-entropy something else than the model's loss: a reward's, a
# perplexity (its exponential), a ratio of two, a distillation's or an auxiliary head's
# term (knowledge distillation, multi-token prediction). Such a name is left unread.
NOT_CROSS_ENTROPY_LOSS = frozenset({"reward", "rewards", "rew", "return", "returns", "ppl",
                                    "perplexity", "ratio", "kd", "mtp"})


def _loss_words(words: set[str]) -> set[str]:
    """A name's words with those that say it is a cross-entropy (CROSS_ENTROPY beside
    "loss", or "cross" with "entropy", which is a loss by itself) read as "loss", so that
    neither the entropy role nor NOT_THE_MODELS_LOSS takes them for an entropy's."""
    if {"cross", "entropy"} <= words:
        return (words - {"cross", "entropy"}) | {"loss"}
    if "loss" not in words:
        return words
    return words - CROSS_ENTROPY


# A name no table knows is read by the role its words name, last of all (after every
# name above), and only for the few roles a hand-written loop logs under names of its
# own: its loss, its mean reward and the reward's spread, its entropy, its KL to the
# reference, and the share of groups whose samples all scored the same, all measured on
# the training data. Words that make a name something else (a coefficient, a bound, a
# count, a held-out set, a part of the objective that is not the policy's) keep it
# unread. (role, words one of which the name holds, words none of which it holds)
ROLE_WORDS: tuple[tuple[str, frozenset[str], frozenset[str]], ...] = (
    ("reward_std", frozenset({"reward", "rewards", "rew", "return", "returns"}),
     frozenset({"adv", "advantage"})),
    ("entropy", frozenset({"entropy"}), frozenset({"loss"})),
    ("fb/loss/kl_ref/mean", frozenset({"kl", "kldiv"}), frozenset({
        "policy", "old", "sample", "approx", "ppo", "teacher", "student", "target", "ctl",
        "clip", "early", "stop"})),
    ("reward_mean", frozenset({"reward", "rewards", "rew", "return", "returns"}), frozenset({
        "var", "model", "used", "baseline", "pos", "neg", "adv", "advantage", "kl",
        "length", "len", "format"})),
    ("loss", frozenset({"loss"}), NOT_THE_MODELS_LOSS),
)
# Words that never name a role's level: a coefficient, a scale, a count, a time, a bound
# or a best-of-N (verl's auxiliary best@N / maj@N validation), a per-epoch aggregate.
NOT_A_LEVEL = frozenset({"coef", "coeff", "coefficient", "beta", "weight", "lr", "scale",
                         "bonus", "penalty", "count", "num", "n", "time", "sec", "s", "ms",
                         "threshold", "thresh", "grad", "norm", "per", "tokens", "epoch",
                         "min", "max", "best", "worst", "maj", "aux"})
SPREAD = frozenset({"std", "stdev", "sd"})
HELD_OUT = frozenset({"eval", "val", "valid", "validation", "test", "heldout", "dev"})
# A held-out score of the task itself under a name of its own (`validation_accuracy`,
# `val/success_rate`, `eval/pass_at_1`, `test/env/all/pass_rate`, `eval/win_rate`): the
# share of held-out problems solved, which the trained reward should move with and which
# no reward model, format check or length bonus pays for. Read as `val/accuracy` where
# the run logs it under no other name. Only shares: a pass@k over k samples (k > 1) is
# a best-of-k bound, a per-token accuracy is teacher-forced, and BLEU, chrF or ROUGE run
# 0-100 in most tools, a scale the rules' absolute effects do not fit.
QUALITY_SHARE = frozenset({"acc", "accuracy", "correct", "correctness", "pass", "passrate",
                           "pass1", "success", "solved", "win", "winrate", "em", "exact",
                           "f1"})
NOT_QUALITY = frozenset({"loss", "reward", "rewards", "rew", "kl", "entropy", "length",
                         "len", "format", "token", "std", "stdev", "sd", "var"})
BEST_OF_K = re.compile(r"(?:@|_at_|pass)(?:[2-9]|\d\d+)(?![0-9])")
# A statistic over the N samples drawn for each held-out prompt (`…/reward/mean@1`,
# `…/acc/maj@8`): verl's validation names it so, and no training metric carries `@N`.
PER_PROMPT_SAMPLES = re.compile(r"@\d+$")
# A share of groups (or samples) whose rewards all came out the same: the complement of
# what a group-based method learns from, whatever the loop calls it.
ZERO_SPREAD = re.compile(r"zero_?std|zero_?var|zero_?adv|degenerate|advantage_collapse|"
                         r"collapsed_group")
SHARE = frozenset({"frac", "fraction", "ratio", "rate", "share"})
# A share of completions cut at the length limit (`truncated_completions_ratio`,
# `truncation_rate`); "clipped" alone is left out: PPO's clip fraction is about ratios.
TRUNCATED = re.compile(r"truncat")
# Counts of a step's groups: those a group-based loop filtered out (the groups whose
# samples all scored the same, which such a loop drops: DAPO's dynamic sampling, the
# cookbook's constant-reward filter; a loop's `groups_filtered`) and those it trained on
# (`groups_kept`). Read as the async loop's counts of the same, whose share the
# zero-variance rules judge; a share of what a loop filtered (`fraction_filtered`) is
# that share itself. Groups dropped for their age or length are not these.
GROUPS = frozenset({"group", "groups"})
DROPPED = frozenset({"filtered", "dropped", "skipped", "removed", "discarded"})
KEPT = frozenset({"kept", "accepted", "trained", "used"})
NOT_ZERO_SPREAD = frozenset({"stale", "staleness", "old", "length", "long", "overlong",
                             "truncated", "error", "failed"})


def _quality_share(name: str, words: set[str]) -> bool:
    """Whether a name's words name a share of the task solved (QUALITY_SHARE)."""
    return bool(words & QUALITY_SHARE and not words & (NOT_QUALITY | NOT_A_LEVEL)
                and not BEST_OF_K.search(name))


@lru_cache(maxsize=4096)
def role_by_words(key: str) -> str | None:
    """The role an unknown name's words name (ROLE_WORDS), or None."""
    name = key.lower()
    words = set(re.split(r"[^a-z0-9]+", name)) - {""}
    if "dev" in words and words & SPREAD:
        words.discard("dev")  # a standard deviation (`reward_std_dev`), not a dev set
    loss_words = _loss_words(words)
    if loss_words != words and words & NOT_CROSS_ENTROPY_LOSS:
        return None  # a cross-entropy, but not the model's loss (NOT_CROSS_ENTROPY_LOSS)
    words = loss_words
    if words & HELD_OUT or PER_PROMPT_SAMPLES.search(name):
        # A held-out metric under a name of its own is left unread: its scale is unknown
        # (an environment's episode return), and the validation rules judge absolute falls
        # - except a held-out share of the task solved (QUALITY_SHARE) and a held-out loss
        # (`dev_avg_loss`, `valid_loss`, `test/loss`): the model's loss on data it is not
        # trained on, whose rules judge it against its own best.
        if _quality_share(name, words):
            return "val/accuracy"
        if "loss" in words and not words & (NOT_THE_MODELS_LOSS | NOT_A_LEVEL | SPREAD):
            return "val/loss"
        return None
    if _quality_share(name, words):
        # the same share measured on the training rollouts (`answer_f1`, `success_rate`,
        # `mean_correct`): the task score the trained reward should move with
        return "accuracy"
    if ZERO_SPREAD.search(name.rpartition("/")[2]) and words & SHARE:
        return "zero_variance_skip_ratio"
    if words & SHARE and words & DROPPED and not words & (KEPT | NOT_ZERO_SPREAD):
        # the share of a step's groups a loop filtered out, for no other reason named
        # (`train/fraction_filtered`): the groups whose samples all scored alike
        return "zero_variance_skip_ratio"
    if TRUNCATED.search(name.rpartition("/")[2]) and words & SHARE:
        return "truncated_ratio"
    if words & GROUPS and not words & (SHARE | NOT_ZERO_SPREAD):
        if words & DROPPED and not words & KEPT:
            return "async/dropped_zero_variance_groups"
        if words & KEPT and not words & DROPPED:
            return "async/accepted_groups"
    if words & NOT_A_LEVEL:
        return None
    for role, wanted, unwanted in ROLE_WORDS:
        if not words & wanted or words & unwanted:
            continue
        if (role == "reward_std") != bool(words & SPREAD):
            continue  # a spread is read only as the reward's
        return role
    return None


def alone_rank(key: str) -> int:
    """Where `key` goes in a batch: 0 for a name of the tables, 1 for one that feeds a role
    only where no other name does, 2 for an unknown name read by its words (last)."""
    if key in READ_WHEN_ALONE or key in ALONE_TRANSFORMED:
        return 1
    name, alias = resolve(key)
    if alias is not None:
        return 0
    if any(p.match(name) for p, _ in ALONE_PATTERNS):
        return 1
    if TASK_SCORE.match(name) or name in BY_NAME:
        return 0
    return 2 if role_by_words(name) else 0



def health_name(key: str) -> tuple[str, Transform | None]:
    """The canonical name the health rules read `key` as: `canonical`; for the names
    in READ_WHEN_ALONE their role's name (the engine lets the first key that
    feeds a canonical metric keep it); a correctness reward function's mean as
    `accuracy`."""
    alone = READ_WHEN_ALONE.get(key)
    if alone is not None:
        return alone, None
    if key in ALONE_TRANSFORMED:
        role, how = ALONE_TRANSFORMED[key]
        return role, TRANSFORMS[how]
    name, alias = resolve(key)
    if alias is None and TASK_SCORE.match(name):
        return "accuracy", None
    if alias is None and name.startswith("eval_") and TASK_SCORE.match(name[5:]):
        # the same function's mean on the eval set (TRL's GRPOTrainer prefixes eval_)
        return "val/accuracy", None
    if alias is None:
        for pattern, role in ALONE_PATTERNS:
            if pattern.match(name):
                return role, None
        by_words = None if name in BY_NAME else role_by_words(name)
        if by_words is not None:
            return by_words, None
    return canonical(key)


def canonical(key: str) -> tuple[str, Transform | None]:
    """The canonical name for `key` and the transform its values need (None: as is)."""
    name, alias = resolve(key)
    if alias is None:
        return name, None
    return alias.canonical, TRANSFORMS[alias.transform] if alias.transform else None
