"""Loading a Hugging Face causal LM and its tokenizer from a local directory.

`transformers` is an optional extra (`pip install runwatch[hf]`). Nothing is fetched
from a hub: `base_model` must be a directory that `save_pretrained` wrote.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from runwatch.recipes.chat import SetupError


def _transformers() -> Any:
    try:
        import transformers
    except ImportError as exc:
        raise SetupError(
            "base_model needs the optional 'transformers' package: pip install 'runwatch[hf]'"
        ) from exc
    return transformers


class HFCausalLM(nn.Module):
    """Gives a transformers model the recipe signature `(ids_BT, mask_BT) -> logits_BTV`."""

    def __init__(self, lm: nn.Module) -> None:
        super().__init__()
        self.lm = lm
        self.max_seq_len = int(getattr(lm.config, "max_position_embeddings", 2048))

    def forward(
        self, ids_BT: torch.Tensor, attention_mask_BT: torch.Tensor | None = None
    ) -> torch.Tensor:
        if attention_mask_BT is None:
            return self.lm(input_ids=ids_BT, use_cache=False).logits
        # Left-padded prompts: positions must count real tokens only, as in generate().
        pos_BT = (attention_mask_BT.long().cumsum(dim=1) - 1).clamp(min=0)
        out = self.lm(input_ids=ids_BT, attention_mask=attention_mask_BT,
                      position_ids=pos_BT, use_cache=False)
        return out.logits


class HFChatTokenizer:
    """A transformers tokenizer under the recipes' chat template.

    Turns are opened by plain-text role markers and closed by the tokenizer's EOS
    token, so any causal LM tokenizer works, with or without its own chat template.
    """

    def __init__(self, tok: Any, source: str) -> None:
        if tok.eos_token_id is None:
            raise SetupError(
                f"the tokenizer in {source} has no EOS token; set eos_token in its "
                "tokenizer_config.json so replies have an end"
            )
        self.tok = tok
        self.name = f"hf:{Path(source).resolve()}:{type(tok).__name__}:{len(tok)}"
        self.vocab_size = len(tok)
        self.end_id = int(tok.eos_token_id)
        self.pad_id = int(tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)

    def encode(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False))

    def decode(self, ids: list[int]) -> str:
        return str(self.tok.decode(ids, skip_special_tokens=True))

    def role_ids(self, role: str) -> list[int]:
        return self.encode(f"<|{role}|>\n")

    def end_ids(self) -> list[int]:
        return [self.end_id]


def _model_dir(base_model: str | Path) -> Path:
    path = Path(base_model).expanduser()
    if not path.is_dir():
        raise SetupError(
            f"base_model {path} is not a directory; give the folder save_pretrained wrote "
            "(models are never downloaded)"
        )
    return path


def hf_skeleton(base_model: str | Path) -> HFCausalLM:
    """The model `load_hf` loads, built from its config.json on the meta device: its
    layers and shapes without weights or memory, to check settings against."""
    path = _model_dir(base_model)
    tf = _transformers()
    config = tf.AutoConfig.from_pretrained(str(path), local_files_only=True)
    with torch.device("meta"):
        return HFCausalLM(tf.AutoModelForCausalLM.from_config(config))


def load_hf(base_model: str | Path) -> tuple[HFCausalLM, HFChatTokenizer]:
    """Model and tokenizer from a local `save_pretrained` directory, in float32 on CPU."""
    path = _model_dir(base_model)
    tf = _transformers()
    tok = tf.AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    lm = tf.AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True)
    lm = lm.float()
    return HFCausalLM(lm), HFChatTokenizer(tok, str(path))
