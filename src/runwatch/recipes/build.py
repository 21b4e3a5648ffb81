"""Building a recipe's model and tokenizer from its config.

Three starts: the tiny model from scratch, a local Hugging Face model (`base_model`),
or an inference checkpoint of an earlier run (`init_from`), optionally with a LoRA
adapter on top.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from runwatch.recipes import checkpoint
from runwatch.recipes.adapter import add_lora
from runwatch.recipes.config import TrainConfig
from runwatch.recipes.model import ModelConfig, TinyGPT
from runwatch.recipes.tokenizer import ByteTokenizer, ChatTokenizer


@dataclass
class Policy:
    model: nn.Module
    tok: ChatTokenizer
    source: dict[str, Any]
    """How to rebuild the base: {"kind": "tiny", "model_config": ...} or {"kind": "hf", ...}."""
    max_seq_len: int
    lora_layers: list[str]
    reference: nn.Module | None = None
    """A frozen copy of the starting model (DPO); None when the recipe needs none."""


def _from_source(source: dict[str, Any]) -> tuple[nn.Module, ChatTokenizer, int]:
    if source.get("kind") == "hf":
        from runwatch.recipes.hf import load_hf

        hf_model, hf_tok = load_hf(source["base_model"])
        return hf_model, hf_tok, hf_model.max_seq_len
    mcfg = ModelConfig.from_dict(source["model_config"])
    return TinyGPT(mcfg), ByteTokenizer(), mcfg.max_seq_len


def build_base(cfg: TrainConfig) -> tuple[nn.Module, ChatTokenizer, dict[str, Any], int]:
    """The model before any adapter, its tokenizer, its source and its longest sequence."""
    torch.manual_seed(cfg.seed)
    if cfg.init_from:
        path = checkpoint.resolve_inference(cfg.init_from)
        ckpt = checkpoint.load(path)
        source = dict(ckpt["source"])
        model, tok, max_len = _from_source(source)
        model.load_state_dict(ckpt["model"])
        return model, tok, source, max_len
    if cfg.base_model:
        source = {"kind": "hf", "base_model": cfg.base_model}
        model, tok, max_len = _from_source(source)
        return model, tok, source, max_len
    tok = ByteTokenizer()
    mcfg = ModelConfig(vocab_size=tok.vocab_size, n_layer=cfg.n_layer, n_head=cfg.n_head,
                       d_model=cfg.d_model, max_seq_len=cfg.max_seq_length)
    return TinyGPT(mcfg), tok, {"kind": "tiny", "model_config": mcfg.to_dict()}, mcfg.max_seq_len


def build_policy(cfg: TrainConfig, with_reference: bool = False) -> Policy:
    model, tok, source, max_len = build_base(cfg)
    reference = None
    if with_reference:
        reference = copy.deepcopy(model).eval()
        for p in reference.parameters():
            p.requires_grad_(False)
    lora_layers: list[str] = []
    if cfg.lora_rank > 0:
        targets = tuple(t.strip() for t in cfg.lora_targets.split(",") if t.strip())
        lora_layers = add_lora(model, cfg.lora_rank, cfg.lora_alpha, targets)
    model.train()
    return Policy(model, tok, source, max_len, lora_layers, reference)


def base_model_label(cfg: TrainConfig) -> str:
    if cfg.init_from:
        return f"init_from:{cfg.init_from}"
    if cfg.base_model:
        return str(cfg.base_model)
    return f"tiny-gpt-{cfg.n_layer}x{cfg.d_model}"


def dataset_label(cfg: TrainConfig) -> str:
    return str(cfg.data_path) if cfg.data_path else f"{cfg.task}-{cfg.digits}"

