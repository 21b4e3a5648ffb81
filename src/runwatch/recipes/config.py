"""The base of recipe configs: a flat, documented dataclass with YAML and key=value overrides.

Each field carries its help text in `metadata["help"]` and the values it may take in
`metadata["bounds"]` (`setting(..., above=0)`); that one table feeds `--help`,
docs/recipes.md, `validate` and a test that fails when a field is undocumented. A
setting has one name; `ALIASES` lists the other names it is still accepted under.
`refuse_settings` is where a recipe's command line refuses its settings, torch-free, so
`runwatch recipes NAME` refuses them before the recipe's modules load torch.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import types
import typing
from pathlib import Path
from typing import Any, ClassVar, TypeVar, Union

import yaml

from runwatch.jobs.failures import RefusedInput
from runwatch.recipes.tasks import TASKS, make_task

C = TypeVar("C", bound="RecipeConfig")

_NONE_WORDS = {"none", "null", "~", ""}
_TRUE_WORDS = {"true", "1", "yes", "on"}
_FALSE_WORDS = {"false", "0", "no", "off"}
# The exit status of a recipe command whose settings are refused before it starts.
REFUSED_EXIT = 2


Number = int | float


@dataclasses.dataclass(frozen=True)
class Bounds:
    """The values one setting may take, declared with it: a number from `at_least` (or
    above `above`) up to `at_most`, or one of `choices`. Every float must be finite too;
    None (an unset optional setting) is always allowed."""

    at_least: Number | None = None
    above: Number | None = None
    at_most: Number | None = None
    choices: tuple[str, ...] = ()

    def describe(self) -> str:
        """The allowed values in words, as --help and docs/recipes.md show them."""
        if self.choices:
            return "one of " + ", ".join(self.choices)
        if self.at_least is not None and self.at_most is not None:
            return f"from {self.at_least} to {self.at_most}"
        words = []
        if self.above is not None:
            words.append("positive" if self.above == 0 else f"more than {self.above}")
        if self.at_least is not None:
            words.append("0 or more" if self.at_least == 0 else f"at least {self.at_least}")
        if self.at_most is not None:
            words.append(f"at most {self.at_most}")
        return " and ".join(words)

    def refusal(self, name: str, value: Any) -> str | None:
        """Why `value` is refused for setting `name`, or None when it is allowed."""
        if value is None or isinstance(value, bool):
            return None
        if isinstance(value, str):
            if not self.choices or value in self.choices:
                return None
            return f"{name} must be {self.describe()}, got {value!r}"
        if isinstance(value, float) and not math.isfinite(value):
            allowed = f" and {self.describe()}" if self.describe() else ""
            return f"{name} must be finite{allowed}, got {value}"
        if ((self.above is not None and value <= self.above)
                or (self.at_least is not None and value < self.at_least)
                or (self.at_most is not None and value > self.at_most)):
            return f"{name} must be {self.describe()}, got {value}"
        return None


def setting(default: Any, help: str, *, at_least: Number | None = None,
            above: Number | None = None, at_most: Number | None = None,
            choices: tuple[str, ...] = ()) -> Any:
    """A config field with a default, the help text that documents it and the values it
    may take (`Bounds`); a subclass that changes only its default or help keeps them."""
    metadata: dict[str, Any] = {"help": help}
    bounds = Bounds(at_least, above, at_most, tuple(choices))
    if bounds != Bounds():
        metadata["bounds"] = bounds
    return dataclasses.field(default=default, metadata=metadata)


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

    @classmethod
    def bounds(cls, name: str) -> Bounds:
        """The values setting `name` may take: as declared with it, or, where a subclass
        redeclares it without bounds (a new default or help), as the class it overrides
        declared them."""
        for klass in cls.__mro__:
            if dataclasses.is_dataclass(klass):
                found = next((f for f in dataclasses.fields(klass) if f.name == name), None)
                if found is not None and "bounds" in found.metadata:
                    bounds: Bounds = found.metadata["bounds"]
                    return bounds
        return Bounds()

    def validate(self) -> None:
        """Raise ConfigError, naming the setting, for a value outside its declared
        `bounds`; a subclass adds the checks that involve several settings."""
        for f in dataclasses.fields(self):
            said = self.bounds(f.name).refusal(f.name, getattr(self, f.name))
            if said is not None:
                raise ConfigError(said, f.name)

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
            allowed = cls.bounds(f.name).describe()
            fields.append((f"{f.name} ({_type_name(hints[f.name])}, default {f.default!r}{also})",
                           f.metadata.get("help", "") + (f" Allowed: {allowed}." if allowed
                                                         else "")))
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
    seed: int = setting(0, "Seed for data generation, shuffling and initialisation.",
                        at_least=0, at_most=2**32 - 1)
    task: str = setting("addition", "Synthetic task: addition, reverse or sort.",
                        choices=tuple(TASKS))
    digits: int = setting(2, "Task size: operand digits (addition) or string length.",
                          at_least=1)
    n_train: int = setting(8000, "Training rows generated from the task.", above=0)
    n_val: int = setting(200, "Validation rows generated from the task (disjoint); 0 "
                              "turns validation off.", at_least=0)
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
    n_layer: int = setting(4, "Tiny model: transformer blocks.", above=0)
    n_head: int = setting(4, "Tiny model: attention heads.", above=0)
    d_model: int = setting(128, "Tiny model: width.", above=0)
    lora_rank: int = setting(0, "LoRA adapter rank; 0 trains all weights (full fine-tuning).",
                             at_least=0)
    lora_alpha: float = setting(16.0, "LoRA scale numerator (update scaled by alpha/rank).",
                                above=0)
    lora_targets: str = setting(
        "", "Comma-separated suffixes of linear layers to adapt; empty adapts all but the head.")
    batch_size: int = setting(64, "Sequences per optimizer step.", above=0)
    max_steps: int = setting(400, "Optimizer steps to train.", above=0)
    learning_rate: float = setting(3e-3, "Peak learning rate (AdamW), decayed linearly to 0.",
                                   above=0)
    warmup_steps: int = setting(20, "Steps of linear warmup before the decay.", at_least=0)
    weight_decay: float = setting(0.0, "AdamW weight decay.", at_least=0)
    max_grad_norm: float = setting(1.0, "Clip the gradient norm to this; 0 disables clipping.",
                                   at_least=0)
    max_seq_length: int = setting(48, "Longest sequence trained; longer rows are cut.",
                                  above=0)
    val_interval: int = setting(50, "Validate every this many steps (and at the end).",
                                above=0)
    checkpoint_interval: int = setting(
        150, "Save a training checkpoint every this many steps (and at the end).", above=0)
    export_samples: bool = setting(True, "Write validation completions to val_NNNN_*.json.")
    torch_threads: int = setting(1, "CPU threads for PyTorch.", above=0)
    wandb_project: str | None = setting(
        None, "Also log to this W&B project; None turns W&B off.")
    wandb_entity: str | None = setting(None, "W&B entity (team or user).")
    wandb_group: str | None = setting(
        None, "W&B group (and runwatch group), e.g. the arms of a sweep.")
    wandb_run_name: str | None = setting(None, "W&B run name; default the runwatch run name.")

    def validate(self) -> None:
        super().validate()
        if self.d_model % self.n_head:
            raise ConfigError(f"d_model {self.d_model} must be divisible by n_head {self.n_head}")
        if self.resume and not self.name:
            raise ConfigError("resume=true needs name=<the run to continue>")
        if self.uses_task_rows():
            have = make_task(self.task, self.digits).distinct_questions()
            if have < self.n_train + self.n_val:
                raise ConfigError(
                    f"task {self.task} with digits={self.digits} has {have} distinct "
                    f"questions, fewer than n_train + n_val = {self.n_train + self.n_val}; "
                    "lower n_train or n_val, or raise digits")

    def uses_task_rows(self) -> bool:
        """Whether the run's rows are generated from `task` (not read from data_path)."""
        return self.data_path is None


@dataclasses.dataclass
class SFTConfig(TrainConfig):
    """Supervised fine-tuning. Defaults learn 2-digit addition to >95% on a CPU."""

    max_new_tokens: int = setting(8, "Longest greedy completion at validation.", above=0)
    val_batch_size: int = setting(256, "Rows per forward pass during validation.", above=0)


@dataclasses.dataclass
class DPOConfig(TrainConfig):
    """Direct preference optimisation, normally started from an SFT run (init_from)."""

    beta: float = setting(
        0.3, "DPO temperature: scales the margin inside the loss; a larger beta stops "
        "pushing sooner once a pair is separated.", above=0)
    rpo_alpha: float = setting(
        1.0, "Weight of the chosen replies' per-token NLL added to the DPO loss (RPO); "
        "0 is plain DPO, which can lower the chosen reply too.", at_least=0)
    n_train: int = setting(2000, "Training pairs generated from the task.")
    batch_size: int = setting(32, "Preference pairs per optimizer step.")
    max_steps: int = setting(150, "Optimizer steps to train.")
    learning_rate: float = setting(5e-4, "Peak learning rate (AdamW), decayed linearly to 0.")
    warmup_steps: int = setting(5, "Steps of linear warmup before the decay.")
    val_interval: int = setting(20, "Validate every this many steps (and before and at the end).")
    checkpoint_interval: int = setting(
        50, "Save a training checkpoint every this many steps (and at the end).")


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
