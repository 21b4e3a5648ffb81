"""Unit checks of the shared recipe parts: tokenizer, chat template, tasks, model, helpers."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

from runwatch.recipes.adapter import LoRALinear, add_lora, merged_state_dict
from runwatch.recipes.batches import BatchOrder, fit_pairs, fit_sft
from runwatch.recipes.chat import RowRefusal, render_conversation, render_prompt, validate_messages
from runwatch.recipes.inference import generate, sequence_logprobs, token_logprobs
from runwatch.recipes.model import Block, ModelConfig, TinyGPT
from runwatch.recipes.optim import UpdateMeter, clip_gradients, linear_lr
from runwatch.recipes.tasks import dpo_rows, make_task, sft_rows
from runwatch.recipes.tokenizer import ByteTokenizer

TOK = ByteTokenizer()


def small_model(seed: int = 0) -> TinyGPT:
    torch.manual_seed(seed)
    return TinyGPT(ModelConfig(vocab_size=TOK.vocab_size, n_layer=2, n_head=2, d_model=32,
                               max_seq_len=32))


def test_byte_tokenizer_round_trips_any_text() -> None:
    text = "héllo, wörld — 12+34 ✓"
    assert TOK.decode(TOK.encode(text)) == text
    assert TOK.decode([*TOK.encode("ab"), TOK.end_id]) == "ab"


def test_loss_mask_covers_assistant_tokens_and_their_end_only() -> None:
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
            {"role": "assistant", "content": "ans"}, {"role": "user", "content": "again"},
            {"role": "assistant", "content": "b"}]
    ids, mask = render_conversation(TOK, msgs)
    trained = [i for i, m in zip(ids, mask, strict=True) if m]
    assert trained == [*TOK.encode("ans"), TOK.end_id, *TOK.encode("b"), TOK.end_id]
    prompt = render_prompt(TOK, msgs[:2])
    assert prompt[-1] == TOK.role_ids("assistant")[0]
    assert ids[: len(prompt)] == prompt


@pytest.mark.parametrize("messages, words", [
    ([{"role": "user", "content": "q"}], "no assistant message"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
      {"role": "user", "content": "more"}], "ends with a user message"),
    ([{"role": "user"}], "malformed"),
    ([{"role": "robot", "content": "x"}], "malformed"),
    ("not a list", "malformed"),
])
def test_refusals_name_the_row_and_the_fix(messages: object, words: str) -> None:
    with pytest.raises(RowRefusal) as err:
        validate_messages(7, messages)
    assert str(err.value).startswith("row 7 ")
    assert words in str(err.value)
    assert ";" in str(err.value)  # the fix follows the problem


@pytest.mark.parametrize("name", ["addition", "reverse", "sort"])
def test_tasks_are_deterministic_disjoint_and_right(name: str) -> None:
    task = make_task(name, 3)
    train, val = sft_rows(task, 200, 50, seed=5)
    assert (train, val) == sft_rows(task, 200, 50, seed=5)
    assert sft_rows(task, 200, 50, seed=6)[0] != train
    q_train = {r["messages"][1]["content"] for r in train}
    q_val = {r["messages"][1]["content"] for r in val}
    assert not q_train & q_val
    for row in train[:20]:
        q, a = row["messages"][1]["content"], row["messages"][2]["content"]
        assert a == task.answer(q)
    pairs, _ = dpo_rows(task, 100, 10, seed=1)
    assert all(p["chosen"] != p["rejected"] for p in pairs)
    assert all(len(p["chosen"]) == len(p["rejected"]) for p in pairs)


def test_addition_answers() -> None:
    task = make_task("addition", 2)
    assert task.answer("07+45") == "052"
    assert task.answer("99+99") == "198"
    assert task.wrong_answer("47+38", random.Random(0)) == "075"  # the forgotten carry


def test_model_is_causal_and_left_padding_changes_nothing() -> None:
    model = small_model().eval()
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    changed = ids.clone()
    changed[0, 4] = 11
    with torch.no_grad():
        a, b = model(ids), model(changed)
        assert torch.allclose(a[:, :4], b[:, :4], atol=1e-6)
        padded = torch.tensor([[TOK.pad_id, TOK.pad_id, 5, 6, 7, 8, 9]])
        mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1]])
        c = model(padded, mask)
        assert torch.allclose(a, c[:, 2:], atol=1e-5)


def test_attention_matches_pytorch_multihead_attention() -> None:
    model = small_model()
    block = model.blocks[0]
    assert isinstance(block, Block)
    attn = block.attn
    mha = torch.nn.MultiheadAttention(32, 2, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(attn.qkv.weight)
        mha.in_proj_bias.copy_(attn.qkv.bias)
        mha.out_proj.weight.copy_(attn.proj.weight)
        mha.out_proj.bias.copy_(attn.proj.bias)
    x = torch.randn(3, 6, 32)
    causal = torch.ones(6, 6, dtype=torch.bool).triu(1)
    ref, _ = mha(x, x, x, attn_mask=causal, need_weights=False)
    assert torch.allclose(attn(x, None), ref, atol=1e-5)


def test_generate_and_logprobs_agree() -> None:
    model = small_model()
    prompts = [[1, 2, 3], [4, 5]]
    gens = generate(model, prompts, 4, 0.0, end_id=TOK.end_id, pad_id=TOK.pad_id)
    for p, g in zip(prompts, gens, strict=True):
        assert len(g.tokens) == len(g.logprobs) and 0 < len(g.tokens) <= 4
        ids = torch.tensor([p + g.tokens])
        lp = token_logprobs(model, ids)[0, len(p) - 1 :]
        assert torch.allclose(lp, torch.tensor(g.logprobs), atol=1e-4)
        mask = torch.tensor([[0] * len(p) + [1] * len(g.tokens)])
        assert sequence_logprobs(model, ids, mask).item() == pytest.approx(sum(g.logprobs),
                                                                            abs=1e-4)
    sampled = generate(model, prompts, 4, 1.0, TOK.end_id, TOK.pad_id,
                       generator=torch.Generator().manual_seed(0))
    assert all(all(lp <= 0 for lp in g.logprobs) for g in sampled)


def test_lora_starts_as_the_base_and_merges_exactly() -> None:
    model = small_model()
    ids = torch.tensor([[1, 2, 3, 4]])
    before = model(ids).detach()
    wrapped = add_lora(model, rank=4, alpha=8.0)
    assert wrapped and all(isinstance(model.get_submodule(n), LoRALinear) for n in wrapped)
    assert torch.allclose(model(ids), before)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_()
    merged = small_model(seed=1)
    merged.load_state_dict(merged_state_dict(model))
    assert torch.allclose(merged(ids), model(ids), atol=1e-4)


def test_clip_factor_schedule_and_update_ratio() -> None:
    w = torch.nn.Parameter(torch.ones(4))
    w.grad = torch.full((4,), 3.0)  # norm 6
    norm, factor = clip_gradients([w], 1.5)
    assert norm == pytest.approx(6.0) and factor == pytest.approx(0.25)
    assert float(w.grad.norm()) == pytest.approx(1.5)
    w.grad = torch.full((4,), 0.1)
    assert clip_gradients([w], 1.5)[1] == 1.0
    lrs = [linear_lr(s, 10, 1.0, 2) for s in range(1, 11)]
    assert lrs[:2] == [0.5, 1.0] and lrs[-1] > 0 and lrs == sorted(lrs[:2]) + sorted(lrs[2:],
                                                                                   reverse=True)
    meter = UpdateMeter([w])
    meter.before_step()
    with torch.no_grad():
        w.add_(torch.tensor([0.2, 0.0, 0.0, 0.0]))
    out = meter.after_step()
    assert out["update_ratio"] == pytest.approx(0.2 / 2.0)
    assert out["adapter_norm"] == pytest.approx(float(w.detach().norm()))


def test_data_fit_counts_cut_and_dropped_rows() -> None:
    rows = [[[1] * 10, [0] * 5 + [1] * 5],   # fits exactly: reaches the limit, loses nothing
            [[1] * 12, [0] * 8 + [1] * 4],   # cut inside the target
            [[1] * 14, [0] * 12 + [1] * 2],  # cut before any target: dropped
            [[1] * 4, [0, 0, 1, 1]]]
    kept, fit = fit_sft(rows, 10)
    assert (fit.rows_at_max_length, fit.rows_lost_target_end, fit.rows_dropped_empty) == (3, 2, 1)
    assert len(kept) == 3 and all(len(e.ids) <= 10 for e in kept)
    pairs, pfit = fit_pairs([[[1] * 8, [2] * 3, [3] * 2], [[1] * 12, [2], [3]]], 10)
    assert len(pairs) == 1 and pfit.rows_dropped_empty == 1 and pfit.rows_lost_target_end == 2


def test_batch_order_is_a_function_of_seed_and_step() -> None:
    a, b = BatchOrder(10, 4, seed=3), BatchOrder(10, 4, seed=3)
    steps = [a.indices(s) for s in range(1, 6)]
    assert steps == [b.indices(s) for s in range(1, 6)]
    first_epoch = [i for s in steps for i in s][:10]
    assert sorted(first_epoch) == list(range(10))
    assert BatchOrder(10, 4, seed=3).indices(4) == steps[3]


def test_cross_entropy_helper_matches_torch() -> None:
    from runwatch.recipes.sft import sft_loss

    model = small_model()
    ids = torch.tensor([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]])
    mask = torch.tensor([[0, 0, 1, 1, 1], [0, 1, 1, 0, 0]], dtype=torch.float32)
    total, n = sft_loss(model, ids, mask)
    logits = model(ids)
    ce = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1),
                         reduction="none").view(2, 4)
    assert total.item() == pytest.approx((ce * mask[:, 1:]).sum().item(), rel=1e-5)
    assert n.item() == 5  # position 0 is never a target
