"""GRPOConfig: the flat, documented settings of the GRPO recipe, built on TrainConfig.

The shared base brings the run record, model start (fresh, init_from an SFT run, a
local Hugging Face model, LoRA), YAML round-trip and key=value overrides, which here
apply a `pathology=NAME` preset's settings first; every field's help text feeds
`--help`, docs/recipes.md and the test that fails on an undocumented setting.
"""

from __future__ import annotations

from dataclasses import dataclass

from runwatch.recipes.config import ConfigError, TrainConfig
from runwatch.recipes.config import setting as _f
from runwatch.recipes.grpo.pathologies import PATHOLOGIES, expand

ENVS = ("single_turn", "guess_number")
REWARDS = ("exact", "digit_overlap", "format")
AGGREGATIONS = ("token_mean", "sequence_mean")
SCHEDULES = ("constant", "linear")


@dataclass
class GRPOConfig(TrainConfig):
    """Settings of one GRPO run; `runwatch recipes grpo key=value …` overrides any field."""

    # -- fields of the shared base whose GRPO meaning or default differs ----------------
    batch_size: int = _f(64, "Groups trained per step (each of group_size completions).")
    max_steps: int = _f(60, "Training steps (one batch of groups each).")
    learning_rate: float = _f(1e-4, "Peak learning rate (AdamW).")
    warmup_steps: int = _f(5, "Linear warmup steps.")
    val_interval: int = _f(15, "Steps between greedy validations (and before the first and "
                               "at the end).")
    export_samples: bool = _f(True, "Write each step's completions or episodes to "
                                    "step_NNNN_*.json and validation's to val_NNNN_*.json.")
    checkpoint_interval: int = _f(1000, "Save checkpoints every this many steps (and at the "
                                        "end).")
    wandb_project: str | None = _f("post-training-cookbook", "W&B project; None turns W&B off "
                                   "(or set WANDB_MODE=offline to keep W&B logs on disk).")
    # -- GRPO ------------------------------------------------------------------------------
    from_scratch: bool = _f(False, "Train a freshly initialised model: without init_from or "
                                   "base_model GRPO refuses to start unless this is true, as "
                                   "a random model earns no reward to learn from.")
    pathology: str | None = _f(None, "A preset that breaks the run on purpose: the name of "
                                     "one of the pathology presets below.",
                               choices=tuple(PATHOLOGIES))
    max_model_length: int = _f(48, "Longest sequence (prompt + completion, all turns) sampled "
                                   "or trained; at most the model's own length.", above=0)
    # -- task and reward ---------------------------------------------------------------
    env: str = _f("single_turn", "single_turn (one answer per prompt) or guess_number "
                                 "(multi-turn, higher/lower feedback).", choices=ENVS)
    reward: str = _f("exact", "exact (exact match), digit_overlap (a flawed scorer a long "
                              "answer can exploit) or format (any non-empty answer that ends "
                              "passes).", choices=REWARDS)
    max_turns: int = _f(6, "Multi-turn: turns before an episode is truncated.", above=0)
    guess_max: int = _f(16, "Multi-turn: the secret number lies in 1..guess_max.", above=0)
    # -- sampling --------------------------------------------------------------------------
    group_size: int = _f(8, "Completions sampled per prompt (one group).", at_least=2)
    temperature: float = _f(0.5, "Sampling temperature of the generator.", above=0)
    max_sample_tokens: int = _f(8, "Most tokens a completion (or a turn) may have.", above=0)
    overlong_penalty_factor: float = _f(0.0, "Largest penalty for a completion that runs into "
                                             "the budget; 0 turns the penalty off.",
                                        at_least=0)
    overlong_buffer_tokens: int = _f(2, "The penalty ramps from 0 to the factor over the last "
                                        "this-many tokens of the budget.", at_least=0)
    max_sampling_attempts: int = _f(1, "Above 1 turns on dynamic sampling: redraw until "
                                       "batch_size groups have varied rewards.", above=0)
    # -- loss and optimizer --------------------------------------------------------------
    lr_schedule: str = _f("linear", "constant or linear (decay to 0 at the last step).",
                          choices=SCHEDULES)
    num_minibatches: int = _f(1, "Optimizer updates per sampled batch; above 1 the later "
                                 "updates are off-policy and the ratio leaves 1.", above=0)
    clip_low_threshold: float = _f(0.8, "Lower bound of the importance ratio clip.", above=0,
                                   at_most=1)
    clip_high_threshold: float = _f(1.28, "Upper bound of the importance ratio clip.",
                                    at_least=1)
    beta: float = _f(0.0, "Weight of the KL term to the reference (initial) policy.",
                     at_least=0)
    loss_aggregation: str = _f("token_mean", "token_mean or sequence_mean.",
                               choices=AGGREGATIONS)
    # -- async collection ---------------------------------------------------------------
    max_steps_off_policy: int | None = _f(None, "Set to collect rollouts in the background; "
                                                "groups older than this many optimizer steps "
                                                "are dropped.", at_least=0)
    groups_in_flight: int = _f(8, "Async: most groups collected ahead of the trainer.",
                               above=0)
    weights_sync_interval: int = _f(1, "Optimizer steps between weight publishes to the "
                                       "generator.", above=0)

    def validate(self) -> None:
        """Raise ConfigError when a value cannot work: one outside its declared bounds
        (naming the setting), or settings that do not fit together."""
        super().validate()
        checks = [
            (not self.resume, "resume is not supported by GRPO yet; start a new run with "
                              "init_from=<the run's directory>"),
            (self.data_path is None, "GRPO samples task questions; data_path is not "
                                     "supported, set task and digits instead"),
            # Otherwise every group would be too stale until the next publish, which
            # needs a training step, which needs groups: the run would hang.
            (self.max_steps_off_policy is None
             or self.weights_sync_interval <= self.max_steps_off_policy + 1,
             "weights_sync_interval must be at most max_steps_off_policy + 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(f"invalid GRPO config: {message}")

    def uses_task_rows(self) -> bool:
        return self.env == "single_turn"

    def check_start(self) -> None:
        """Refuse to train a random model unless asked to: every completion of a group earns
        the same reward, so the run would end SUCCEEDED having learned nothing."""
        if self.init_from is None and self.base_model is None and not self.from_scratch:
            raise ConfigError(
                "GRPO needs a model that is sometimes right, and init_from is not set: a "
                "fresh model earns the same reward on every completion and learns nothing. "
                "Train the SFT recipe first (runwatch recipes sft) and pass "
                "init_from=runs/<sft-run>, or set from_scratch=true to train it anyway",
                "init_from")

    def with_overrides(self, overrides: list[str]) -> GRPOConfig:
        """The base's overrides, after the settings of a `pathology=NAME` preset."""
        return super().with_overrides(expand(overrides))

    @classmethod
    def help_sections(cls) -> list[tuple[str, list[tuple[str, str]]]]:
        presets = [(f"pathology={name}: " + " ".join(f"{k}={v}" for k, v in p.settings.items()),
                    p.moves) for name, p in PATHOLOGIES.items()]
        title = "Pathology presets (pathology=NAME; explicit settings win)"
        return [*super().help_sections(), (title, presets)]

    @property
    def is_async(self) -> bool:
        return self.max_steps_off_policy is not None
