"""A divergence finding says which steps its judged series' change was measured over: its
steps run from its first judgement, and the change is its window's.

Found in a spec audit: a reward-hacking finding on steps 0–110 read "val/accuracy fell
0.118 while accuracy rose 0.136", while val/accuracy fell 0.244 over those steps; the 0.118
was its fall from step 60 to 110, as the `val.falling` finding beside it said.
"""

from __future__ import annotations

import re

from tests.health.cases import every, ramp
from tests.health.helpers import evaluate, of_rule


def test_a_reward_hacking_message_names_the_steps_of_the_fall_it_states() -> None:
    val_steps, val = every(20, ramp(0.6, -0.02, 10))
    found = of_rule(evaluate("grpo", {}, {"accuracy": ramp(0.3, 0.004, 200),
                                          "val/accuracy": (val_steps, val)}),
                    "grpo.reward_hacking")
    assert found, "the trigger series of tests/health/cases.py, one point longer"
    message = found[-1].message
    words = re.fullmatch(r"val/accuracy fell ([\d.]+) from step (\d+) to (\d+) while "
                         r"accuracy rose [\d.]+\.", message)
    assert words is not None, message
    fell, start, end = float(words[1]), int(words[2]), int(words[3])
    assert end == val_steps[-1] and start in val_steps[:-1]
    # the fall it states is the one between those steps, not the whole log's
    between = val[val_steps.index(start)] - val[-1]
    assert fell == round(between, 3) < round(val[0] - val[-1], 3), (fell, between)
