"""A small causal transformer (GPT-style, pre-norm) sized for CPU training.

Every recipe model takes `(ids_BT, attention_mask_BT)` and returns `logits_BTV`, so
the tiny model and a Hugging Face model wrapped by `hf.py` are interchangeable.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class ModelConfig:
    """Shape of the tiny transformer; saved beside its weights to rebuild it."""

    vocab_size: int = 262
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 128
    max_seq_len: int = 64

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        return cls(**{k: int(v) for k, v in data.items()})


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x_BTD: torch.Tensor, mask_B1TT: torch.Tensor | None) -> torch.Tensor:
        B, T, D = x_BTD.shape
        q, k, v = self.qkv(x_BTD).split(D, dim=2)
        q_BHTd, k_BHTd, v_BHTd = (
            t.view(B, T, self.n_head, D // self.n_head).transpose(1, 2) for t in (q, k, v)
        )
        if mask_B1TT is None:
            y = F.scaled_dot_product_attention(q_BHTd, k_BHTd, v_BHTd, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q_BHTd, k_BHTd, v_BHTd, attn_mask=mask_B1TT)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, D))


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, 4 * cfg.d_model)
        self.out = nn.Linear(4 * cfg.d_model, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(F.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, mask_B1TT: torch.Tensor | None) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), mask_B1TT)
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    """Token + learned position embeddings, `n_layer` blocks, tied output head."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.max_seq_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.apply(self._init_weights)
        # GPT-2's scaled init of residual projections keeps early activations small.
        for name, p in self.named_parameters():
            if name.endswith("proj.weight") or name.endswith("out.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(
        self, ids_BT: torch.Tensor, attention_mask_BT: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Logits for every position.

        Without a mask, rows are right-padded and causality alone keeps padding out.
        With a mask (left-padded prompts during generation), positions count only real
        tokens and padded keys are hidden.
        """
        B, T = ids_BT.shape
        if self.cfg.max_seq_len < T:
            raise ValueError(
                f"sequence of {T} tokens is longer than the model's max_seq_len "
                f"{self.cfg.max_seq_len}; lower max_seq_length or build a longer model"
            )
        mask_B1TT = None
        if attention_mask_BT is None:
            pos_BT = torch.arange(T, device=ids_BT.device).expand(B, T)
        else:
            valid_BT = attention_mask_BT.bool()
            pos_BT = (valid_BT.long().cumsum(dim=1) - 1).clamp(min=0)
            causal_TT = torch.ones(T, T, dtype=torch.bool, device=ids_BT.device).tril()
            # A padded query would see no key at all (NaN softmax); let it see itself.
            eye_TT = torch.eye(T, dtype=torch.bool, device=ids_BT.device)
            mask_B1TT = (causal_TT & (valid_BT[:, None, :] | eye_TT))[:, None]
        x = self.tok_emb(ids_BT) + self.pos_emb(pos_BT)
        for block in self.blocks:
            x = block(x, mask_B1TT)
        return F.linear(self.ln_f(x), self.tok_emb.weight)


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
