"""TRL's eval-set metrics read as the `val/` metrics they are (`aliases.eval_twins`).

TRL's trainers log an evaluation under the training names prefixed `eval_`: a GRPO run's
`eval_completions/clipped_ratio` kept its raw name and no meaning though its training form
is `truncated_ratio` and the vocabulary has `val/truncated_ratio`. Every TRL alias with a
`val/` form now has its eval twin. This changes what the health rules read (a `val/`
metric a run did not feed before), apart from the display-only fix in
test_describe_shown_names.py.
"""

from __future__ import annotations

from runwatch.metrics import BY_NAME, describe
from runwatch.metrics.aliases import EXACT, canonical, eval_twins, health_name


def test_trls_held_out_clipped_ratio_is_the_held_out_truncation() -> None:
    for key in ("eval_completions/clipped_ratio", "eval/completions/clipped_ratio"):
        assert describe(key).canonical == "val/truncated_ratio"
        assert health_name(key) == ("val/truncated_ratio", None)


def test_every_trl_alias_with_a_val_form_has_its_held_out_twin() -> None:
    for key, alias in EXACT.items():
        val = f"val/{alias.canonical}"
        if alias.framework.startswith("TRL") and "before 0.12" not in alias.framework \
                and not key.startswith("eval_") and val in BY_NAME:
            assert canonical(f"eval_{key}") == (val, None), key


def test_a_name_with_no_val_form_or_of_another_trainer_keeps_its_own() -> None:
    # near misses: the vocabulary has no val/ KL, entropy or reward spread, and verl does
    # not name its validation eval_
    for key in ("eval_kl", "eval_entropy", "eval_reward_std", "eval_frac_reward_zero_std",
                "eval_response_length/clip_ratio", "eval_env/reward_mean"):
        assert describe(key).canonical == key
        assert canonical(key) == (key, None)


def test_a_listed_held_out_name_keeps_its_entry() -> None:
    # eval_reward would be reward's twin; the table lists it itself
    table = {k: a for k, a in EXACT.items() if k != "eval_reward"}
    assert eval_twins(table)["eval_reward"].canonical == "val/reward_mean"
    assert "eval_reward" not in eval_twins(EXACT)
    assert EXACT["eval_reward"].framework == "TRL"
