"""LoRA-style adapters: trainable low-rank updates on a frozen model's linear projections.

With an adapter, only the A and B matrices train, so `adapter_norm` and
`update_ratio` describe the adapter itself. Without one (full fine-tuning) the same
metrics describe all trainable weights.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class LoRALinear(nn.Module):
    """y = base(x) + (alpha / rank) * x A^T B^T, with B zero at first so y starts as base(x)."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float) -> None:
        super().__init__()
        self.base = base
        self.rank = rank
        self.scale = alpha / rank
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        for p in base.parameters():
            p.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + (x @ self.lora_A.T @ self.lora_B.T) * self.scale

    def merged_weight(self) -> torch.Tensor:
        return self.base.weight + self.scale * (self.lora_B @ self.lora_A)


def add_lora(
    model: nn.Module, rank: int, alpha: float, targets: tuple[str, ...] = ()
) -> list[str]:
    """Freeze `model` and wrap its nn.Linear layers whose name ends with a target.

    An empty `targets` wraps every linear layer except the output head. Returns the
    wrapped names; raises if none matched, since an adapter on nothing trains nothing.
    """
    for p in model.parameters():
        p.requires_grad_(False)
    wrapped: list[str] = []
    for name, module in list(model.named_modules()):
        if not isinstance(module, nn.Linear) or name.endswith("lm_head"):
            continue
        if targets and not any(name.endswith(t) for t in targets):
            continue
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, LoRALinear(module, rank, alpha))
        wrapped.append(name)
    if not wrapped:
        raise ValueError(
            f"lora_targets {targets!r} matched no linear layer; name projection suffixes "
            "such as qkv, proj, q_proj or v_proj"
        )
    return wrapped


def is_adapter_param(name: str) -> bool:
    return ".lora_A" in name or ".lora_B" in name or name.startswith("lora_")


def adapter_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v for k, v in model.state_dict().items() if is_adapter_param(k)}


def merged_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The model's weights with every adapter folded in, under the base model's names."""
    out: dict[str, torch.Tensor] = {}
    lora_prefixes = {n for n, m in model.named_modules() if isinstance(m, LoRALinear)}
    for name, module in model.named_modules():
        if isinstance(module, LoRALinear):
            out[f"{name}.weight"] = module.merged_weight().detach().clone()
            if module.base.bias is not None:
                out[f"{name}.bias"] = module.base.bias.detach().clone()
    for key, value in model.state_dict().items():
        owner = next((p for p in lora_prefixes if key.startswith(p + ".")), None)
        if owner is None:
            out[key] = value.detach().clone()
    return out
