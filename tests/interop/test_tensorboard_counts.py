"""What `runwatch runs tensorboard` says it wrote, counted in words that fit the count:
one point of one scalar is not "1 points of 1 scalars"."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import MakeRun, cli_here

pytest.importorskip("tensorboardX")


def test_a_count_of_one_is_said_in_the_singular(runs_dir: Path, make_run: MakeRun) -> None:
    make_run("one", steps=1, metrics=lambda i: {"loss": 1.0})
    out = cli_here("runs", "tensorboard", "one", "--dir", str(runs_dir), "--no-start").stdout
    assert out.startswith("wrote 1 point of 1 scalar and 0 steps of rollouts of one to "), out
    make_run("two", steps=2, metrics=lambda i: {"loss": 1.0, "lr": 0.1})
    out = cli_here("runs", "tensorboard", "two", "--dir", str(runs_dir), "--no-start").stdout
    assert out.startswith("wrote 4 points of 2 scalars and 0 steps of rollouts of two to "), out
