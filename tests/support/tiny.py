"""The tiny model every recipe test trains, and the settings of the one SFT checkpoint that
GRPO, DPO and the health checks start from (trained once per session, in tests/conftest.py).

Settings are the recipes' own command-line `key=value` words, so a test reads like the
command a user would type.
"""

from __future__ import annotations

# Small enough that a training step takes milliseconds on one core, big enough to learn a
# task: GRPO needs a start that is right part of the time.
TINY_MODEL = ["n_layer=2", "n_head=2", "d_model=64", "max_seq_length=48"]
# Sorting 4 digits: the tiny model learns it to roughly half right in 80 steps.
SORT_TASK = ["task=sort", "digits=4"]
SFT_CHECKPOINT = [*TINY_MODEL, *SORT_TASK, "name=sft", "max_steps=80", "batch_size=32",
                  "learning_rate=3e-3", "warmup_steps=10", "n_train=2000", "n_val=64",
                  "val_interval=40", "checkpoint_interval=1000", "export_samples=false",
                  "cache_dir=None", "wandb_project=None"]
