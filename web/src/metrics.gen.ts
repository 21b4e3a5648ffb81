// Generated from src/runwatch/metrics by `python -m runwatch.metrics.typescript`.
// Do not edit: change the vocabulary and run it again. The metric vocabulary the web
// app reads (docs/metrics.md): roles, the names that play each role, and the rules that
// map other frameworks' names to canonical ones.

export type Role =
  | "train_loss"
  | "eval_loss"
  | "reward"
  | "val_reward"
  | "accuracy"
  | "val_accuracy"
  | "preference_accuracy"
  | "val_preference_accuracy"
  | "margin"
  | "val_margin"
  | "learning_rate"
  | "grad_norm"
  | "grad_clip_factor"
  | "update_ratio"
  | "adapter_norm"
  | "examples"
  | "tokens"
  | "grad_accum"
  | "step_time"
  | "ratio_mean"
  | "clipped_ratio_mean"
  | "clip_high"
  | "clip_low"
  | "kl_policy"
  | "kl_policy_k3"
  | "kl_ref";

/** The names that play each role, best first: the canonical name, then its listed aliases. */
export const ROLE_NAMES: Readonly<Record<Role, readonly string[]>> = {
  train_loss: ["loss", "gpt_loss", "train_mean_nll", "dpo_loss", "train_loss"],
  eval_loss: ["val/loss", "eval_loss", "val_loss"],
  reward: ["reward_mean", "reward", "objective/scores", "env/reward_mean", "critic/rewards/mean", "env/all/reward/total", "rollout/ep_rew_mean", "mean_reward"],
  val_reward: ["val/reward_mean", "eval_reward", "test/env/all/reward/total", "eval_objective/scores"],
  accuracy: ["accuracy", "critic/score/mean", "env/all/correct"],
  val_accuracy: ["val/accuracy", "eval_accuracy", "test/env/all/correct"],
  preference_accuracy: ["preference_accuracy", "rewards/accuracies"],
  val_preference_accuracy: ["val/preference_accuracy", "eval_rewards/accuracies"],
  margin: ["mean_margin", "rewards/margins"],
  val_margin: ["val/mean_margin", "eval_rewards/margins"],
  learning_rate: ["learning_rate", "actor/lr", "actor_lr", "optim/lr", "lr"],
  grad_norm: ["grad_norm", "actor/grad_norm", "actor_grad_norm", "gradient_norm"],
  grad_clip_factor: ["grad_clip_factor"],
  update_ratio: ["update_ratio"],
  adapter_norm: ["adapter_norm"],
  examples: ["samples", "examples", "num_examples"],
  tokens: ["trained_tokens", "tokens", "num_tokens"],
  grad_accum: ["gradient_accumulation_steps", "grad_accum", "grad_accum_steps", "gradient_accumulation"],
  step_time: ["timing/step_total_s", "timing_s/step", "time/total"],
  ratio_mean: ["fb/loss/ratio/mean", "val/ratio"],
  clipped_ratio_mean: ["fb/loss/clip/clipped_ratio/mean", "clip_ratio/region_mean"],
  clip_high: ["fb/loss/clip/high_fraction", "clip_ratio/high_mean", "policy/clipfrac_avg", "ppo/policy/clipfrac", "actor/pg_clipfrac", "ppo_clip_ratio"],
  clip_low: ["fb/loss/clip/low_fraction", "clip_ratio/low_mean", "actor/pg_clipfrac_lower"],
  kl_policy: ["fb/loss/kl_policy/mean", "policy/approxkl_avg", "ppo/policy/approxkl", "actor/ppo_kl", "ppo_kl", "optim/kl_sample_train_v1"],
  kl_policy_k3: ["fb/loss/kl_policy/k3/mean", "optim/kl_sample_train_v2"],
  kl_ref: ["fb/loss/kl_ref/mean", "kl", "objective/kl", "actor/kl_loss", "critic/kl", "actor/reward_kl_penalty"],
};

/** Exact aliases: logged name -> [canonical name, transform its values need or null]. */
export const ALIASES: ReadonlyMap<string, readonly [string, string | null]> = new Map([
  ["reward", ["reward_mean", null]],
  ["reward_std", ["reward_std", null]],
  ["clip_ratio/region_mean", ["fb/loss/clip/clipped_ratio/mean", null]],
  ["rewards/chosen", ["mean_chosen_delta", null]],
  ["rewards/rejected", ["mean_rejected_delta", null]],
  ["eval_rewards/chosen", ["val/mean_chosen_delta", null]],
  ["eval_rewards/rejected", ["val/mean_rejected_delta", null]],
  ["frac_reward_zero_std", ["zero_variance_skip_ratio", null]],
  ["clip_ratio/high_mean", ["fb/loss/clip/high_fraction", null]],
  ["clip_ratio/low_mean", ["fb/loss/clip/low_fraction", null]],
  ["completions/mean_length", ["mean_sampled_response_length", null]],
  ["completion_length", ["mean_sampled_response_length", null]],
  ["completions/clipped_ratio", ["truncated_ratio", null]],
  ["kl", ["fb/loss/kl_ref/mean", null]],
  ["rewards/accuracies", ["preference_accuracy", null]],
  ["rewards/margins", ["mean_margin", null]],
  ["eval_rewards/accuracies", ["val/preference_accuracy", null]],
  ["eval_rewards/margins", ["val/mean_margin", null]],
  ["eval_loss", ["val/loss", null]],
  ["eval_reward", ["val/reward_mean", null]],
  ["eval_accuracy", ["val/accuracy", null]],
  ["eval_completions/mean_length", ["val/mean_response_length", null]],
  ["objective/kl", ["fb/loss/kl_ref/mean", null]],
  ["objective/scores", ["reward_mean", null]],
  ["policy/entropy_avg", ["entropy", null]],
  ["policy/approxkl_avg", ["fb/loss/kl_policy/mean", null]],
  ["policy/clipfrac_avg", ["fb/loss/clip/high_fraction", null]],
  ["val/ratio", ["fb/loss/ratio/mean", null]],
  ["env/reward_mean", ["reward_mean", null]],
  ["env/reward_std", ["reward_std", null]],
  ["ppo/policy/entropy", ["entropy", null]],
  ["ppo/policy/clipfrac", ["fb/loss/clip/high_fraction", null]],
  ["ppo/policy/approxkl", ["fb/loss/kl_policy/mean", null]],
  ["actor/pg_clipfrac", ["fb/loss/clip/high_fraction", null]],
  ["actor/pg_clipfrac_lower", ["fb/loss/clip/low_fraction", null]],
  ["actor/ppo_kl", ["fb/loss/kl_policy/mean", null]],
  ["actor/kl_loss", ["fb/loss/kl_ref/mean", null]],
  ["actor/grad_norm", ["grad_norm", null]],
  ["actor/lr", ["learning_rate", null]],
  ["actor/entropy", ["entropy", null]],
  ["actor/entropy_loss", ["entropy", null]],
  ["critic/kl", ["fb/loss/kl_ref/mean", null]],
  ["actor/reward_kl_penalty", ["fb/loss/kl_ref/mean", null]],
  ["critic/score/mean", ["accuracy", null]],
  ["critic/rewards/mean", ["reward_mean", null]],
  ["critic/rewards/max", ["reward_max", null]],
  ["critic/rewards/min", ["reward_min", null]],
  ["critic/advantages/std", ["completion_advantage_std", null]],
  ["response_length/mean", ["mean_sampled_response_length", null]],
  ["response_length/clip_ratio", ["truncated_ratio", null]],
  ["timing_s/step", ["timing/step_total_s", null]],
  ["ppo_clip_ratio", ["fb/loss/clip/high_fraction", null]],
  ["ppo_kl", ["fb/loss/kl_policy/mean", null]],
  ["response_length", ["mean_sampled_response_length", null]],
  ["actor_lr", ["learning_rate", null]],
  ["policy_entropy", ["entropy", null]],
  ["actor_grad_norm", ["grad_norm", null]],
  ["response_clip_ratio", ["truncated_ratio", null]],
  ["gpt_loss", ["loss", null]],
  ["chosen_reward", ["mean_chosen_delta", null]],
  ["reject_reward", ["mean_rejected_delta", null]],
  ["env/all/by_group/frac_mixed", ["zero_variance_skip_ratio", "1 - x"]],
  ["env/all/reward/total", ["reward_mean", null]],
  ["test/env/all/reward/total", ["val/reward_mean", null]],
  ["env/all/ac_tokens_per_turn", ["mean_sampled_response_length", null]],
  ["test/env/all/ac_tokens_per_turn", ["val/mean_response_length", null]],
  ["env/all/turns_per_episode", ["num_turns_mean", null]],
  ["optim/kl_sample_train_v1", ["fb/loss/kl_policy/mean", null]],
  ["optim/kl_sample_train_v2", ["fb/loss/kl_policy/k3/mean", null]],
  ["optim/lr", ["learning_rate", null]],
  ["optim/entropy", ["entropy", null]],
  ["time/total", ["timing/step_total_s", null]],
  ["env/all/correct", ["accuracy", null]],
  ["test/env/all/correct", ["val/accuracy", null]],
  ["train_mean_nll", ["loss", null]],
  ["dpo_loss", ["loss", null]],
  ["teacher_kl", ["reward_mean", "-x"]],
  ["rollout/ep_rew_mean", ["reward_mean", null]],
  ["mean_reward", ["reward_mean", null]],
  ["train_reward_std", ["reward_std", null]],
  ["policy/entropy", ["entropy", null]],
  ["gradient_norm", ["grad_norm", null]],
  ["eval_perplexity", ["val/loss", "ln x"]],
  ["val_perplexity", ["val/loss", "ln x"]],
  ["reverse_kl", ["reward_mean", "-x"]],
  ["flat_reward_group_ratio", ["zero_variance_skip_ratio", null]],
  ["zvf", ["zero_variance_skip_ratio", null]],
  ["eval_completions/clipped_ratio", ["val/truncated_ratio", null]],
  ["eval_objective/scores", ["val/reward_mean", null]],
]);

/** A name that starts with a prefix is looked up with it replaced: [prefix, replacement]. */
export const PREFIXES: readonly (readonly [string, string])[] = [
  ["train/", ""],
  ["eval/", "eval_"],
  ["policy_state/", "policy/"],
];

/** Name patterns, tried when no exact alias matches: [pattern, canonical name]. */
export const PATTERNS: readonly (readonly [RegExp, string])[] = [
  [new RegExp("^val-core/.+/(?:reward|acc)/mean@\\d+$"), "val/accuracy"],
  [new RegExp("^val/test_score/[^/]+$"), "val/accuracy"],
  [new RegExp("^eval_[^/]+_pass1$"), "val/accuracy"],
];
