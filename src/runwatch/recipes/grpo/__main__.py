"""`python -m runwatch.recipes.grpo [--config FILE] key=value …`: run the GRPO recipe."""

from __future__ import annotations

import sys

from runwatch.recipes.config import ConfigError, parse_argv
from runwatch.recipes.grpo.config import GRPOConfig
from runwatch.recipes.grpo.loop import run_grpo
from runwatch.recipes.grpo.pathologies import PATHOLOGIES, expand


def build_config(argv: list[str]) -> GRPOConfig:
    """Defaults (or a YAML file), then a pathology preset, then explicit key=value settings."""
    args = list(argv)
    head = args[:2] if args and args[0] == "--config" else args[:1] \
        if args and args[0].startswith("--config=") else []
    return parse_argv(GRPOConfig, head + expand(args[len(head):]))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in args):
        print(__doc__)
        print(GRPOConfig.help_text())
        print("\npathology presets (pathology=NAME):")
        for name, p in PATHOLOGIES.items():
            print(f"  {name}: {' '.join(f'{k}={v}' for k, v in p.settings.items())}")
            print(f"      {p.moves}")
        return 0
    try:
        cfg = build_config(args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return run_grpo(cfg)


if __name__ == "__main__":
    sys.exit(main())
