"""The base of recipe configs: a flat, documented dataclass with YAML and key=value overrides.

Each field carries its help text in `metadata["help"]`; that one table feeds
`--help`, docs/recipes.md and a test that fails when a field is undocumented. A
setting has one name; `ALIASES` lists the other names it is still accepted under.
`refuse_settings` is where a recipe's command line refuses its settings, torch-free, so
`runwatch recipes NAME` refuses them before the recipe's modules load torch.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from pathlib import Path
from typing import Any, ClassVar, TypeVar, Union

import yaml

from runwatch.jobs.failures import RefusedInput

C = TypeVar("C", bound="RecipeConfig")

_NONE_WORDS = {"none", "null", "~", ""}
_TRUE_WORDS = {"true", "1", "yes", "on"}
_FALSE_WORDS = {"false", "0", "no", "off"}
# The exit status of a recipe command whose settings are refused before it starts.
REFUSED_EXIT = 2


def setting(default: Any, help: str) -> Any:
    """A config field with a default and the help text that documents it."""
    return dataclasses.field(default=default, metadata={"help": help})


class ConfigError(RefusedInput, ValueError):
    """A config value or key that the recipe cannot use; the message says which, and
    `setting` names it where one setting is at fault and the message alone cannot say."""

    def __init__(self, message: str, setting: str | None = None) -> None:
        super().__init__(message)
        self.setting = setting


@dataclasses.dataclass
class RecipeConfig:
    """Fields shared by every recipe; subclasses add their own."""

    # Another name a setting is accepted under -> its one name (see TrainConfig).
    ALIASES: ClassVar[dict[str, str]] = {}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    @classmethod
    def from_dict(cls: type[C], data: dict[str, Any]) -> C:
        # A GRPO config.yaml saved before the rename holds both names, and its alias
        # (validation_interval) is the value that run used, so an alias wins.
        data = {k: v for k, v in data.items() if k not in cls.ALIASES} | {
            cls.ALIASES[k]: v for k, v in data.items() if k in cls.ALIASES}
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ConfigError(
                f"unknown {cls.__name__} field(s) {', '.join(unknown)}; "
                f"run with --help to list the fields"
            )
        hints = typing.get_type_hints(cls)
        values = {k: _coerce(k, v, hints[k]) for k, v in data.items()}
        cfg = cls(**values)
        cfg.validate()
        return cfg

    @classmethod
    def from_yaml(cls: type[C], text_or_path: str | Path) -> C:
        """Read a config from YAML text or from a .yaml file path."""
        text = str(text_or_path)
        if isinstance(text_or_path, Path) or (
            "\n" not in text and text.endswith((".yaml", ".yml"))
        ):
            text = Path(text).read_text()
        data = yaml.safe_load(text) or {}
        if not isinstance(data, dict):
            raise ConfigError(f"a {cls.__name__} YAML document must be a mapping of fields")
        return cls.from_dict(data)

    def with_overrides(self: C, overrides: list[str]) -> C:
        """A copy with `key=value` overrides applied (values parsed by field type)."""
        data = self.to_dict()
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep:
                raise ConfigError(f"override {item!r} is not key=value, e.g. learning_rate=1e-3")
            key = key.strip()
            data[self.ALIASES.get(key, key)] = value
        return type(self).from_dict(data)

    def validate(self) -> None:
        """Raise ConfigError for values the recipe cannot run with."""

    def check_start(self) -> None:
        """Raise ConfigError for settings that are valid but would waste the run; the
        command line and a job's settings check call it before anything is made (a
        saved config.yaml, read back, is not refused by it)."""

    @classmethod
    def help_sections(cls) -> list[tuple[str, list[tuple[str, str]]]]:
        """What --help lists, as (title, [(entry, what it does)]): the fields come first."""
        hints = typing.get_type_hints(cls)
        fields = []
        for f in dataclasses.fields(cls):
            also = "".join(f"; alias {a}" for a, name in cls.ALIASES.items() if name == f.name)
            fields.append((f"{f.name} ({_type_name(hints[f.name])}, default {f.default!r}{also})",
                           f.metadata.get("help", "")))
        return [("Config fields (pass as key=value)", fields)]

    @classmethod
    def help_text(cls, before_entry: str = "") -> str:
        """`help_sections` as plain text: each entry (after `before_entry`), then what it
        does indented below."""
        return "\n\n".join(
            f"{title}:\n" + "\n".join(f"{before_entry}{entry}\n    {what}"
                                       for entry, what in entries)
            for title, entries in cls.help_sections())


def _type_name(tp: Any) -> str:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if _is_union(tp):
        return " | ".join(a.__name__ for a in args) + " | None"
    return getattr(tp, "__name__", str(tp))


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType)


def _coerce(key: str, value: Any, tp: Any) -> Any:
    """Parse `value` (from YAML or a command line) as the field's declared type."""
    optional = _is_union(tp) and type(None) in typing.get_args(tp)
    if optional:
        if value is None or (isinstance(value, str) and value.strip().lower() in _NONE_WORDS):
            return None
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
    try:
        if tp is bool:
            if isinstance(value, bool):
                return value
            word = str(value).strip().lower()
            if word in _TRUE_WORDS:
                return True
            if word in _FALSE_WORDS:
                return False
            raise ValueError(value)
        if tp is int:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            if isinstance(value, str) and "e" in value.lower():
                return int(float(value))  # 1e3 is a natural way to write a step count
            return int(value)
        if tp is float:
            return float(value)
        if tp is str:
            return str(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{key}={value!r} is not a valid {_type_name(tp)}") from exc
    raise ConfigError(f"{key} has an unsupported type {tp!r}")


@dataclasses.dataclass
class TrainConfig(RecipeConfig):
    """Fields every training recipe has: where it records, what it trains, how."""

    # One name for all three recipes: `val_interval` matches n_val, val_data_path,
    # val_batch_size and the val/ metrics; GRPO used to call it validation_interval.
    ALIASES: ClassVar[dict[str, str]] = {"validation_interval": "val_interval"}

    name: str | None = setting(
        None, "Run name (folder under runs_dir); default <method>-<task>-<time>.")
    project: str = setting("recipes", "runwatch project the run belongs to.")
    runs_dir: str = setting("runs", "Folder that holds run directories.")
    resume: bool = setting(
        False, "Continue the run `name` from its last training checkpoint "
        "(step count and LR schedule continue).")
    seed: int = setting(0, "Seed for data generation, shuffling and initialisation.")
    task: str = setting("addition", "Synthetic task: addition, reverse or sort.")
    digits: int = setting(2, "Task size: operand digits (addition) or string length.")
    n_train: int = setting(8000, "Training rows generated from the task.")
    n_val: int = setting(200, "Validation rows generated from the task (disjoint).")
    data_path: str | None = setting(
        None, "JSONL file of training rows to use instead of the task.")
    val_data_path: str | None = setting(
        None, "JSONL file of validation rows (with data_path; none means no validation).")
    cache_dir: str | None = setting(
        "~/.cache/runwatch/tokenized", "Where tokenized rows are cached; None disables it.")
    base_model: str | None = setting(
        None, "Local Hugging Face model directory to train (needs transformers); "
        "unset builds the tiny model.")
    init_from: str | None = setting(
        None, "Start from an inference checkpoint: a .pt file or a run directory.")
    n_layer: int = setting(4, "Tiny model: transformer blocks.")
    n_head: int = setting(4, "Tiny model: attention heads.")
    d_model: int = setting(128, "Tiny model: width.")
    lora_rank: int = setting(0, "LoRA adapter rank; 0 trains all weights (full fine-tuning).")
    lora_alpha: float = setting(16.0, "LoRA scale numerator (update scaled by alpha/rank).")
    lora_targets: str = setting(
        "", "Comma-separated suffixes of linear layers to adapt; empty adapts all but the head.")
    batch_size: int = setting(64, "Sequences per optimizer step.")
    max_steps: int = setting(400, "Optimizer steps to train.")
    learning_rate: float = setting(3e-3, "Peak learning rate (AdamW), decayed linearly to 0.")
    warmup_steps: int = setting(20, "Steps of linear warmup before the decay.")
    weight_decay: float = setting(0.0, "AdamW weight decay.")
    max_grad_norm: float = setting(1.0, "Clip the gradient norm to this; 0 disables clipping.")
    max_seq_length: int = setting(48, "Longest sequence trained; longer rows are cut.")
    val_interval: int = setting(50, "Validate every this many steps (and at the end).")
    checkpoint_interval: int = setting(
        150, "Save a training checkpoint every this many steps (and at the end).")
    export_samples: bool = setting(True, "Write validation completions to val_NNNN_*.json.")
    torch_threads: int = setting(1, "CPU threads for PyTorch.")
    wandb_project: str | None = setting(
        None, "Also log to this W&B project; None turns W&B off.")
    wandb_entity: str | None = setting(None, "W&B entity (team or user).")
    wandb_group: str | None = setting(
        None, "W&B group (and runwatch group), e.g. the arms of a sweep.")
    wandb_run_name: str | None = setting(None, "W&B run name; default the runwatch run name.")

    def validate(self) -> None:
        positive = ("batch_size", "max_steps", "max_seq_length", "val_interval",
                    "checkpoint_interval", "n_layer", "n_head", "d_model", "torch_threads")
        for key in positive:
            if getattr(self, key) <= 0:
                raise ConfigError(f"{key} must be positive, got {getattr(self, key)}")
        if self.lora_rank < 0:
            raise ConfigError(
                f"lora_rank must be 0 (full fine-tuning) or more, got {self.lora_rank}")
        if self.d_model % self.n_head:
            raise ConfigError(f"d_model {self.d_model} must be divisible by n_head {self.n_head}")
        if self.resume and not self.name:
            raise ConfigError("resume=true needs name=<the run to continue>")


@dataclasses.dataclass
class SFTConfig(TrainConfig):
    """Supervised fine-tuning. Defaults learn 2-digit addition to >95% on a CPU."""

    max_new_tokens: int = setting(8, "Longest greedy completion at validation.")
    val_batch_size: int = setting(256, "Rows per forward pass during validation.")


@dataclasses.dataclass
class DPOConfig(TrainConfig):
    """Direct preference optimisation, normally started from an SFT run (init_from)."""

    beta: float = setting(
        0.3, "DPO temperature: scales the margin inside the loss; a larger beta stops "
        "pushing sooner once a pair is separated.")
    rpo_alpha: float = setting(
        1.0, "Weight of the chosen replies' per-token NLL added to the DPO loss (RPO); "
        "0 is plain DPO, which can lower the chosen reply too.")
    n_train: int = setting(2000, "Training pairs generated from the task.")
    batch_size: int = setting(32, "Preference pairs per optimizer step.")
    max_steps: int = setting(150, "Optimizer steps to train.")
    learning_rate: float = setting(5e-4, "Peak learning rate (AdamW), decayed linearly to 0.")
    warmup_steps: int = setting(5, "Steps of linear warmup before the decay.")
    val_interval: int = setting(20, "Validate every this many steps (and before and at the end).")
    checkpoint_interval: int = setting(
        50, "Save a training checkpoint every this many steps (and at the end).")

    def validate(self) -> None:
        super().validate()
        if self.beta <= 0:
            raise ConfigError(f"beta must be positive, got {self.beta}")
        if self.rpo_alpha < 0:
            raise ConfigError(f"rpo_alpha must be 0 or more, got {self.rpo_alpha}")


def parse_argv(cls: type[C], argv: list[str]) -> C:
    """A config from `[--config FILE.yaml] key=value ...` (overrides win over the file)."""
    args = list(argv)
    base = cls()
    if args and args[0].startswith("--config"):
        _, sep, path = args.pop(0).partition("=")
        if not sep:
            if not args:
                raise ConfigError("--config needs a YAML file path")
            path = args.pop(0)
        try:
            base = cls.from_yaml(Path(path))
        except OSError as exc:
            raise ConfigError(f"cannot read --config {path}: {exc.strerror or exc}; pass "
                              "the path of a config YAML file (a run folder's config.yaml)"
                              ) from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"--config {path} is not YAML ({' '.join(str(exc).split())})"
                              ) from None
    return base.with_overrides(args)


def start_settings(cls: type[C], argv: list[str]) -> C:
    """The settings `[--config FILE.yaml] key=value ...` starts a recipe with; ConfigError
    for settings that do not parse or would waste the run (`check_start`). A job's
    settings are checked here too (runwatch.jobs.settings)."""
    cfg = parse_argv(cls, argv)
    cfg.check_start()
    return cfg


def refuse_settings(cls: type[C], argv: list[str]) -> C | ConfigError:
    """`start_settings`, or its refusal (ConfigError) already said on stderr as
    `error: ...`; its command then exits REFUSED_EXIT. `runwatch recipes NAME` and the
    recipe's own `main` both refuse here."""
    try:
        cfg = start_settings(cls, argv)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc
    return cfg
