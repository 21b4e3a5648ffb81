"""Small, real post-training recipes (SFT, DPO) that run on a laptop CPU.

The pieces (model, tokenizer, chat template, tasks, data preparation, optimizer
metrics, checkpoints) are separate modules so other recipes can reuse them.
"""
