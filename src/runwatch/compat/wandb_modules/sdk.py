"""`wandb.sdk`, W&B's internals, which transformers' WandbCallback imports: not provided,
so importing it raises ModuleNotFoundError (an ImportError) that names the Trainer callback
to use instead."""

from runwatch.compat.wandb_absent import SDK_INSTEAD

raise ModuleNotFoundError(SDK_INSTEAD, name=__name__)
