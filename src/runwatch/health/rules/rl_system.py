"""Rules for the machinery around RL: multi-turn episodes, async collection and the
policy versions the trainer and the generators hold."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import sub

from runwatch.health.rules.base import Param, Rule

RL = ("grpo",)
SUSTAINED = {"k": 8, "n": 10}


def _truncated_when_unfinished(v: Sequence[list[float]], p: Mapping[str, Param]) -> list[float]:
    """The truncated ratio, counted only while few episodes end on task logic."""
    limit = float(p["terminated_below"])
    return [tr if te < limit else 0.0 for te, tr in zip(v[0], v[1], strict=True)]


def _wait_with_empty_queue(v: Sequence[list[float]], p: Mapping[str, Param]) -> list[float]:
    return [w if q == 0 else 0.0 for w, q in zip(v[0], v[1], strict=True)]


def _difference(v: Sequence[list[float]], p: Mapping[str, Param]) -> list[float]:
    return list(map(sub, v[0], v[1]))


RULES: tuple[Rule, ...] = (
    Rule(
        id="multiturn.unfinished_episodes",
        title="Episodes run out of turns or context",
        methods=RL,
        variants=(("terminated_ratio", "truncated_ratio"),),
        detector="threshold",
        derive=_truncated_when_unfinished,
        params={"terminated_below": 0.5, "above": 0.3, **SUSTAINED},
        severity="warning",
        condition="`terminated_ratio` is below {terminated_below} while `truncated_ratio` is "
        "above {above}, on {k} of the last {n} steps.",
        message="Few episodes finish: {metrics[1]} {last:.3g} with {metrics[0]} under "
        "{terminated_below}.",
        advice="Episodes run out of turns or context before finishing: raise `max_turns` or "
        "`max_model_length`, or simplify the task.",
    ),
    Rule(
        id="multiturn.parse_failures_rising",
        title="Parse failures are rising",
        methods=RL,
        variants=(("parse_failure_ratio",),),
        detector="trend",
        params={"direction": "up", "window": 64, "min_effect": 0.05, "relative": 0,
                "window_in": "steps", "min_window": 8},
        severity="warning",
        condition="The trend of `parse_failure_ratio` over the last {window} steps (at least "
        "{min_window} logged points) rises by at "
        "least {min_effect}.",
        message="{metric} {change} {span} (now {last:.3g}).",
        advice="The model emits malformed tool calls: check the system prompt and the tool "
        "schemas.",
    ),
    Rule(
        id="multiturn.context_overflow",
        title="Episodes overflow the context",
        methods=RL,
        variants=(("context_overflow_ratio",),),
        detector="threshold",
        params={"above": 0.1, **SUSTAINED},
        severity="warning",
        condition="`context_overflow_ratio` is above {above} on {k} of the last {n} steps.",
        message="{metric} stayed above {above} (last {last:.3g}).",
        advice="Episodes outgrow the context: raise `max_model_length` or lower `max_turns`.",
    ),
    Rule(
        id="async.dropped_stale",
        title="Async collection drops stale groups",
        methods=RL,
        variants=(("async/dropped_stale_groups",),),
        detector="threshold",
        params={"above": 0, **SUSTAINED},
        severity="warning",
        condition="`async/dropped_stale_groups` is above {above} on {k} of the last {n} steps.",
        message="{metric} stayed non-zero (last {last:.3g}, max {max:.3g}).",
        advice="Rollouts are slower than the optimizer: raise `max_steps_off_policy`, add "
        "generator replicas, or lower `groups_in_flight`.",
    ),
    Rule(
        id="async.short_steps",
        title="Async steps train on fewer groups than batch_size",
        methods=RL,
        variants=(("async/accepted_groups",),),
        detector="threshold",
        budget="batch_size",
        params={"fraction": 1.0, "side": "below", "k": 5, "n": 10},
        severity="info",
        condition="`async/accepted_groups` is below batch_size on {k} of the last {n} steps.",
        message="{metric} stayed below batch_size={budget:.0f} (last {last:.3g}).",
        advice="Steps run short of groups: add generator replicas or raise "
        "`groups_in_flight`.",
    ),
    Rule(
        id="async.staleness_over_budget",
        title="Trained groups are older than allowed",
        methods=RL,
        variants=(("async/staleness_max",),),
        detector="threshold",
        budget="max_steps_off_policy",
        params={"fraction": 1.0, "side": "above", "k": 1, "n": 1},
        severity="critical",
        condition="`async/staleness_max` exceeds max_steps_off_policy, which it never should.",
        message="{metric} reached {max:.3g}, above max_steps_off_policy={budget:.0f}.",
        advice="The staleness budget is not enforced: check the async collector's version "
        "bookkeeping and `max_steps_off_policy` in the run's config.",
    ),
    Rule(
        id="async.zero_variance_drops",
        title="Async drops every group for zero variance",
        methods=RL,
        variants=(("async/dropped_zero_variance_groups",),),
        detector="threshold",
        budget="batch_size*max_sampling_attempts",
        params={"fraction": 0.999, "side": "above", **SUSTAINED},
        severity="warning",
        condition="`async/dropped_zero_variance_groups` reaches batch_size × "
        "max_sampling_attempts on {k} of the last {n} steps.",
        message="{metric} reached {last:.3g} groups per step, the whole sampling budget.",
        advice="This points to the reward, not to async: check the reward function and the "
        "task's difficulty.",
    ),
    Rule(
        id="async.training_waits",
        title="Training waits on collection",
        methods=RL,
        variants=(("async/train_wait_s", "async/queue_depth"),),
        detector="threshold",
        derive=_wait_with_empty_queue,
        params={"above": 1.0, **SUSTAINED},
        severity="info",
        condition="`async/train_wait_s` is above {above} s with `async/queue_depth` at 0 on "
        "{k} of the last {n} steps.",
        message="Steps waited {last:.3g} s for groups with an empty queue.",
        advice="Collection cannot keep up: add generator replicas or raise "
        "`groups_in_flight`.",
    ),
    Rule(
        id="async.collection_outruns",
        title="Collection outruns training",
        methods=RL,
        variants=(("async/queue_depth",),),
        detector="threshold",
        budget="groups_in_flight",
        params={"fraction": 0.999, "side": "above", **SUSTAINED},
        severity="info",
        condition="`async/queue_depth` sits at groups_in_flight on {k} of the last {n} steps.",
        message="{metric} stayed at groups_in_flight={budget:.0f}.",
        advice="Groups wait for the trainer and grow stale: lower `groups_in_flight`.",
    ),
    Rule(
        id="policy.weights_not_applied",
        title="Generators lag the promised weights",
        methods=RL,
        variants=(("policy/target_weights_version", "policy/applied_weights_version"),),
        detector="threshold",
        derive=_difference,
        params={"above": 1, **SUSTAINED},
        severity="warning",
        condition="`target_weights_version` − `applied_weights_version` is above {above} on "
        "{k} of the last {n} steps.",
        message="Generators serve a version {last:.0f} behind the last weights_sync.",
        advice="Weight syncs are not landing: check the generators' health and the "
        "weights_sync calls.",
    ),
    Rule(
        id="policy.trainer_ahead",
        title="Generators serve old weights",
        methods=RL,
        variants=(("policy/trainer_step", "policy/applied_weights_version"),),
        detector="threshold",
        derive=_difference,
        params={"above": 2, **SUSTAINED},
        severity="warning",
        condition="`trainer_step` − `applied_weights_version` is above {above} on {k} of the "
        "last {n} steps.",
        message="Generators serve weights {last:.0f} versions behind the trainer.",
        advice="Sync weights more often: lower `weights_sync_interval` or "
        "`max_steps_off_policy`.",
    ),
)
