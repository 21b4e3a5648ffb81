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
from runwatch.recipes.adapter import add_lora, lora_layers
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


def _skeleton(source: dict[str, Any]) -> nn.Module:
    """The model `_from_source` builds, on the meta device (layers without weights)."""
    if source.get("kind") == "hf":
        from runwatch.recipes.hf import hf_skeleton

        return hf_skeleton(source["base_model"])
    with torch.device("meta"):
        return TinyGPT(ModelConfig.from_dict(source["model_config"]))


def _from_source(source: dict[str, Any]) -> tuple[nn.Module, ChatTokenizer, int]:
    if source.get("kind") == "hf":
        from runwatch.recipes.hf import load_hf

        hf_model, hf_tok = load_hf(source["base_model"])
        return hf_model, hf_tok, hf_model.max_seq_len
    mcfg = ModelConfig.from_dict(source["model_config"])
    return TinyGPT(mcfg), ByteTokenizer(), mcfg.max_seq_len


def _lora_targets(cfg: TrainConfig) -> tuple[str, ...]:
    return tuple(t.strip() for t in cfg.lora_targets.split(",") if t.strip())


def check_adapter(cfg: TrainConfig) -> None:
    """Raise ConfigError (naming lora_targets and the model's projections) when the
    adapter `cfg` asks for would adapt no layer of its model, before anything is made:
    the model is built on the meta device, without its weights. A model that cannot be
    found or built is left to the run's own loading, which says why."""
    if cfg.lora_rank == 0:
        return
    try:
        if cfg.init_from:
            source = checkpoint.source(checkpoint.resolve_inference(cfg.init_from))
        elif cfg.base_model:
            source = {"kind": "hf", "base_model": cfg.base_model}
        else:
            source = {"kind": "tiny", "model_config": _tiny_config(cfg).to_dict()}
        skeleton = _skeleton(source)
    except Exception:  # the run's own loading reports what is wrong with the model
        return
    lora_layers(skeleton, _lora_targets(cfg))


def _tiny_config(cfg: TrainConfig) -> ModelConfig:
    return ModelConfig(vocab_size=ByteTokenizer().vocab_size, n_layer=cfg.n_layer,
                       n_head=cfg.n_head, d_model=cfg.d_model, max_seq_len=cfg.max_seq_length)


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
    mcfg = _tiny_config(cfg)
    return (TinyGPT(mcfg), ByteTokenizer(), {"kind": "tiny", "model_config": mcfg.to_dict()},
            mcfg.max_seq_len)


def build_policy(cfg: TrainConfig, with_reference: bool = False) -> Policy:
    model, tok, source, max_len = build_base(cfg)
    reference = None
    if with_reference:
        reference = copy.deepcopy(model).eval()
        for p in reference.parameters():
            p.requires_grad_(False)
    adapted: list[str] = []
    if cfg.lora_rank > 0:
        adapted = add_lora(model, cfg.lora_rank, cfg.lora_alpha, _lora_targets(cfg))
    model.train()
    return Policy(model, tok, source, max_len, adapted, reference)


def base_model_label(cfg: TrainConfig) -> str:
    if cfg.init_from:
        return f"init_from:{cfg.init_from}"
    if cfg.base_model:
        return str(cfg.base_model)
    return f"tiny-gpt-{cfg.n_layer}x{cfg.d_model}"


def dataset_label(cfg: TrainConfig) -> str:
    return str(cfg.data_path) if cfg.data_path else f"{cfg.task}-{cfg.digits}"

