"""Run out of device memory as a training step on a GPU does: the framework raises its
own out-of-memory exception (constructed here; this machine's PyTorch is a CPU build)."""

from __future__ import annotations

import torch

import runwatch

MESSAGE = ("CUDA out of memory. Tried to allocate 20.00 GiB (GPU 0; 15.75 GiB total "
           "capacity; 9.30 GiB already allocated; in runwatch_e2e_secret.step)")


def forward_step() -> None:
    raise torch.cuda.OutOfMemoryError(MESSAGE)


def main() -> None:
    with runwatch.init(project="e2e") as run:
        run.log({"loss": 1.0}, step=0)
        forward_step()


if __name__ == "__main__":
    main()
