"""Fail the way a bug does: an exception whose message and module name the run's reason
must not show (its logs do)."""

from __future__ import annotations

import runwatch

MESSAGE = "runwatch_e2e_secret: shape mismatch in mylib.layers.attention"


def main() -> None:
    with runwatch.init(project="e2e") as run:
        run.log({"loss": 1.0}, step=0)
        raise ValueError(MESSAGE)


if __name__ == "__main__":
    main()
