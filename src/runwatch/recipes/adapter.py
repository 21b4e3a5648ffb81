"""LoRA-style adapters: trainable low-rank updates on a frozen model's linear projections.

A projection is an `nn.Linear` (weight out × in) or a Hugging Face `Conv1D`, GPT-2's
linear layer (weight in × out). With an adapter, only the A and B matrices train, so
`adapter_norm` and `update_ratio` describe the adapter itself. Without one (full
fine-tuning) the same metrics describe all trainable weights.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import torch
from torch import nn

from runwatch.recipes.config import ConfigError


@dataclass(frozen=True)
class Projection:
    """The shape of a layer LoRA can adapt; `transposed` when its weight is in × out."""

    in_features: int
    out_features: int
    transposed: bool


def projection(module: nn.Module) -> Projection | None:
    """The shape of `module` when it is a linear projection LoRA can adapt, else None."""
    if isinstance(module, nn.Linear):
        return Projection(module.in_features, module.out_features, False)
    # transformers is optional and slow to import; a model that holds a Conv1D has
    # imported it already.
    conv1d = getattr(sys.modules.get("transformers.pytorch_utils"), "Conv1D", None)
    if conv1d is not None and isinstance(module, conv1d):
        n_in, n_out = module.weight.shape
        return Projection(int(n_in), int(n_out), True)
    return None


class LoRALinear(nn.Module):
    """y = base(x) + (alpha / rank) * x A^T B^T, with B zero at first so y starts as base(x).

    `base` is a linear projection (see `projection`): the update acts on its output, so
    it is the same for an nn.Linear and a Conv1D; only the merged weight's layout differs.
    """

    def __init__(self, base: nn.Module, rank: int, alpha: float) -> None:
        super().__init__()
        shape = projection(base)
        if shape is None:
            raise TypeError(f"LoRA adapts linear projections, not {type(base).__name__}")
        self.base = base
        self.rank = rank
        self.scale = alpha / rank
        self.transposed = shape.transposed
        self.lora_A = nn.Parameter(torch.empty(rank, shape.in_features))
        self.lora_B = nn.Parameter(torch.zeros(shape.out_features, rank))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        for p in base.parameters():
            p.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + (x @ self.lora_A.T @ self.lora_B.T) * self.scale

    def merged_weight(self) -> torch.Tensor:
        """The base weight with the update folded in, in the base layer's own layout."""
        delta_OI = self.scale * (self.lora_B @ self.lora_A)
        return self.base.get_parameter("weight") + (delta_OI.T if self.transposed else delta_OI)


def lora_layers(model: nn.Module, targets: tuple[str, ...] = ()) -> list[str]:
    """The names of the projections of `model` an adapter with `targets` wraps: those whose
    name ends with a target, or, for an empty `targets`, every one but the output head.

    ConfigError (naming lora_targets and the model's projections) when none is, since an
    adapter on nothing trains nothing.
    """
    names = [name for name, module in model.named_modules()
             if projection(module) is not None and not name.endswith("lm_head")]
    chosen = [n for n in names if not targets or any(n.endswith(t) for t in targets)]
    if not chosen:
        suffixes = sorted({n.rpartition(".")[2] for n in names})
        have = (f"its projections are named {', '.join(suffixes)}" if suffixes
                else "it has no linear projection besides its output head")
        raise ConfigError(
            f"lora_targets={','.join(targets)!r} matches no layer of the model: {have}; give "
            "one or more of these suffixes, or leave lora_targets empty to adapt them all",
            "lora_targets")
    return chosen


def add_lora(
    model: nn.Module, rank: int, alpha: float, targets: tuple[str, ...] = ()
) -> list[str]:
    """Freeze `model` and wrap the projections `lora_layers` chooses; return their names."""
    chosen = lora_layers(model, targets)
    for p in model.parameters():
        p.requires_grad_(False)
    for name in chosen:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, LoRALinear(model.get_submodule(name), rank, alpha))
    return chosen


def is_adapter_param(name: str) -> bool:
    return ".lora_A" in name or ".lora_B" in name or name.startswith("lora_")


def adapter_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v for k, v in model.state_dict().items() if is_adapter_param(k)}


def merged_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The model's weights with every adapter folded in, under the base model's names."""
    out: dict[str, torch.Tensor] = {}
    adapters = {n: m for n, m in model.named_modules() if isinstance(m, LoRALinear)}
    for key, value in model.state_dict().items():
        owner = next((p for p in adapters if key.startswith(p + ".")), None)
        if owner is None:
            out[key] = value.detach().clone()
        elif key.startswith(f"{owner}.base."):  # the base layer's bias, under its own name
            out[f"{owner}.{key.removeprefix(f'{owner}.base.')}"] = value.detach().clone()
    for name, module in adapters.items():
        out[f"{name}.weight"] = module.merged_weight().detach().clone()
    return out
