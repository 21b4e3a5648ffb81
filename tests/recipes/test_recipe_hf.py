"""Training a real Hugging Face causal LM loaded from a local directory the test writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runwatch.recipes import dpo, sft

from .conftest import common, final_event, metrics

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture
def tiny_hf(tmp_path: Path) -> Path:
    """A 2-layer Llama and a byte-level BPE tokenizer trained here, saved with save_pretrained."""
    tok_model = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token=None))
    tok_model.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok_model.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<eos>", "<pad>"],
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet())
    corpus = [f"<|user|>\n{a}+{b}\n<|assistant|>\n{a + b:03d}" for a in range(30)
              for b in range(30)]
    tok_model.train_from_iterator(corpus, trainer)
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=tok_model, eos_token="<eos>",
                                               pad_token="<pad>")
    cfg = transformers.LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64,
                                   eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    model = transformers.LlamaForCausalLM(cfg)
    out = tmp_path / "tiny-llama"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def test_sft_with_lora_then_dpo_on_a_local_hf_model(tmp_path: Path, tiny_hf: Path) -> None:
    assert sft.main([*common(tmp_path, "hf-sft"), f"base_model={tiny_hf}", "lora_rank=4",
                     "lora_targets=q_proj,v_proj", "max_steps=2", "val_interval=2",
                     "max_new_tokens=4"]) == 0
    run = tmp_path / "runs" / "hf-sft"
    assert final_event(run)["phase"] == "SUCCEEDED"
    rows = metrics(run)
    assert rows[0]["memory/adapter_bytes"] > 0 and rows[-1]["update_ratio"] > 0
    assert 0 <= rows[-1]["val/accuracy"] <= 1
    engine = json.loads((run / "engine_config.json").read_text())["resolved"]
    assert engine["model"] == {"kind": "hf", "base_model": str(tiny_hf)}
    assert all(n.endswith(("q_proj", "v_proj")) for n in engine["lora_layers"])
    assert engine["tokenizer"].startswith("hf:")

    # The inference checkpoint holds the merged weights and the directory they came from.
    assert dpo.main([*common(tmp_path, "hf-dpo"), f"init_from={run}", "max_steps=1",
                     "val_interval=1"]) == 0
    assert final_event(tmp_path / "runs" / "hf-dpo")["phase"] == "SUCCEEDED"


def test_a_missing_model_directory_fails_the_run_clearly(tmp_path: Path) -> None:
    assert sft.main([*common(tmp_path, "nohf"), f"base_model={tmp_path / 'absent'}"]) == 1
    end = final_event(tmp_path / "runs" / "nohf")
    assert end["phase"] == "FAILED" and "is not a directory" in end["reason"]
