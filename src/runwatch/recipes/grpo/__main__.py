"""`python -m runwatch.recipes.grpo [--config FILE] key=value …`: the GRPO recipe's `main`."""

import sys

from runwatch.recipes.grpo.loop import main

if __name__ == "__main__":
    sys.exit(main())
