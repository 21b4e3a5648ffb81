"""The submodules `wandb.<name>` that runwatch's W&B module (runwatch.compat.wandb) answers
for when a script has put it in `sys.modules["wandb"]`: each says what to use instead."""
