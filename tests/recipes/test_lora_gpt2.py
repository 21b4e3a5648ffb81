"""LoRA on a GPT-2-style Hugging Face model, whose projections are transformers' Conv1D
(weight in × out), not nn.Linear: adapted by default and by GPT-2's own names, merged in
the Conv1D layout, saved, resumed and loaded again; targets that match no layer are
refused before anything is made, naming the layers the model has.

Found in a trial (trial37, defect 2): `base_model=<tiny GPT-2> lora_rank=4`, with or
without `lora_targets=c_attn`, stopped with a traceback "lora_targets () matched no
linear layer"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from runwatch.recipes import checkpoint, dpo, sft
from runwatch.recipes.adapter import LoRALinear, add_lora, merged_state_dict
from runwatch.recipes.build import build_policy
from runwatch.recipes.config import SFTConfig
from runwatch.recipes.hf import load_hf

from .conftest import common, final_event, logs, metrics

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture
def tiny_gpt2(tmp_path: Path) -> Path:
    """A 2-layer GPT-2 and a byte-level BPE tokenizer trained here, saved with save_pretrained."""
    bpe = tokenizers.ByteLevelBPETokenizer()
    bpe.train_from_iterator([f"{a:02d}+{b:02d}={a + b:03d} user assistant system"
                             for a in range(100) for b in range(0, 100, 7)],
                            vocab_size=300, special_tokens=["<|endoftext|>"])
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>",
                                               pad_token="<|endoftext|>")
    cfg = transformers.GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=32, n_layer=2,
                                  n_head=2, eos_token_id=tok.eos_token_id,
                                  bos_token_id=tok.eos_token_id)
    out = tmp_path / "tiny-gpt2"
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def test_conv1d_layers_are_adapted_and_merge_in_their_own_layout(tiny_gpt2: Path) -> None:
    model, _ = load_hf(tiny_gpt2)
    ids = torch.tensor([[5, 6, 7, 8]])
    before = model(ids).detach()
    wrapped = add_lora(model, rank=4, alpha=8.0)
    suffixes = {n.rpartition(".")[2] for n in wrapped}
    assert suffixes == {"c_attn", "c_proj", "c_fc"}, wrapped  # all but the output head
    assert all(isinstance(model.get_submodule(n), LoRALinear) for n in wrapped)
    assert torch.allclose(model(ids), before), "an adapter starts as the base model"
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_()
    adapted = model(ids).detach()
    assert not torch.allclose(adapted, before)

    fresh, _ = load_hf(tiny_gpt2)
    fresh.load_state_dict(merged_state_dict(model))  # strict: the base model's own names
    assert torch.allclose(fresh(ids), adapted, atol=1e-5)
    assert add_lora(load_hf(tiny_gpt2)[0], 4, 8.0, ("c_attn",)) == [
        "lm.transformer.h.0.attn.c_attn", "lm.transformer.h.1.attn.c_attn"]


def test_sft_with_lora_saves_resumes_and_starts_dpo(tmp_path: Path, tiny_gpt2: Path) -> None:
    args = [*common(tmp_path, "gpt2-lora"), f"base_model={tiny_gpt2}", "lora_rank=4",
            "checkpoint_interval=2", "val_interval=100", "max_new_tokens=4",
            "export_samples=false", "learning_rate=0.05", "warmup_steps=0"]
    assert sft.main([*args, "max_steps=2"]) == 0
    run = tmp_path / "runs" / "gpt2-lora"
    engine = json.loads((run / "engine_config.json").read_text())["resolved"]
    assert {n.rpartition(".")[2] for n in engine["lora_layers"]} == {"c_attn", "c_proj", "c_fc"}
    assert engine["trainable_parameters"] < engine["parameters"]
    assert metrics(run)[0]["memory/adapter_bytes"] > 0

    # The inference checkpoint is the adapted model merged: a plain GPT-2 that loads it
    # answers as the adapter does.
    training, inference = checkpoint.latest(run, "training"), checkpoint.latest(run, "inference")
    assert training is not None and inference is not None
    cfg = SFTConfig().with_overrides([f"base_model={tiny_gpt2}", "lora_rank=4"])
    adapted = build_policy(cfg).model.eval()
    missing, unexpected = adapted.load_state_dict(checkpoint.load(training)["model"],
                                                  strict=False)
    assert not unexpected and not any("lora_" in k for k in missing)
    merged, _ = load_hf(tiny_gpt2)
    merged.load_state_dict(checkpoint.load(inference)["model"])
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    base, _ = load_hf(tiny_gpt2)
    assert (merged(ids) - base(ids)).abs().max() > 1e-2, "the adapter trained"
    assert torch.allclose(merged(ids), adapted(ids), atol=1e-5)

    assert sft.main([*args, "max_steps=3", "resume=true"]) == 0
    assert [r["step"] for r in metrics(run)] == [1, 2, 3]
    assert any("resumed from step 2" in r["message"] for r in logs(run))
    assert final_event(run)["phase"] == "SUCCEEDED"

    assert dpo.main([*common(tmp_path, "gpt2-dpo"), f"init_from={run}", "lora_rank=4",
                     "lora_targets=c_attn", "max_steps=1", "val_interval=1"]) == 0
    assert final_event(tmp_path / "runs" / "gpt2-dpo")["phase"] == "SUCCEEDED"


def test_targets_that_match_no_layer_are_refused_naming_the_model_s_layers(
        tmp_path: Path, tiny_gpt2: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "runwatch", "recipes", "sft", f"base_model={tiny_gpt2}",
         "lora_rank=4", "lora_targets=q_proj,v_proj", f"runs_dir={tmp_path / 'runs'}",
         "max_steps=1"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr == (
        "error: lora_targets='q_proj,v_proj' matches no layer of the model: its projections "
        "are named c_attn, c_fc, c_proj; give one or more of these suffixes, or leave "
        "lora_targets empty to adapt them all\n")
    assert not (tmp_path / "runs").exists(), "nothing made"
