"""The lifecycle state machine: the moves it allows, and the sentence for each it refuses."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from runwatch.jobs import lifecycle
from runwatch.jobs.lifecycle import TRANSITIONS, TransitionError
from runwatch.rundir.format import (
    ACTIVE_PHASES,
    CANCELLABLE_PHASES,
    PHASES,
    RETRYABLE_PHASES,
    TERMINAL_PHASES,
)

ALLOWED = [(a, b) for a, targets in TRANSITIONS.items() for b in targets]
REFUSED = [(a, b) for a, b in itertools.product(PHASES, PHASES) if b not in TRANSITIONS[a]]


def test_the_table_covers_every_phase_of_the_run_format() -> None:
    assert set(TRANSITIONS) == set(PHASES)
    assert {b for targets in TRANSITIONS.values() for b in targets} <= set(PHASES)
    assert set(lifecycle.WHY) == set(ALLOWED)


def test_the_table_agrees_with_the_format_s_phase_groups() -> None:
    assert {a for a, b in ALLOWED if b == "QUEUED"} == RETRYABLE_PHASES
    # An ended run goes nowhere but back to the queue, by retry, but for a job's worker
    # failing a SUCCEEDED run whose process then exited with an error (jobs/failures.py).
    assert {p: TRANSITIONS[p] for p in TERMINAL_PHASES} == {
        "SUCCEEDED": ("QUEUED", "FAILED"), "FAILED": ("QUEUED",), "CANCELLED": ("QUEUED",)}
    # A run whose process is at work can always end, either way.
    assert all({"SUCCEEDED", "FAILED"} <= set(TRANSITIONS[p]) for p in ACTIVE_PHASES)
    assert {p for p in PHASES if p != "CANCEL_REQUESTED" and p not in TERMINAL_PHASES} \
        == CANCELLABLE_PHASES


@pytest.mark.parametrize(("current", "target"), ALLOWED)
def test_allowed_moves_pass(current: str, target: str) -> None:
    assert lifecycle.refusal(current, target) is None
    assert lifecycle.check(current, target) == target


def test_a_run_goes_through_its_whole_life_and_back_by_retry() -> None:
    path = ["QUEUED", "PREPARING", "RUNNING", "CANCEL_REQUESTED", "CANCELLED", "QUEUED",
            "PREPARING", "RUNNING", "SUCCEEDED"]
    for current, target in itertools.pairwise(path):
        lifecycle.check(current, target)


@pytest.mark.parametrize(("current", "target"), REFUSED)
def test_each_refused_move_says_why_in_one_sentence_and_what_is_possible(
        current: str, target: str) -> None:
    why = lifecycle.refusal(current, target)
    assert why is not None
    assert "\n" not in why and not why.endswith(".") and why[0].islower()
    assert current in why
    assert any(word in why for word in (*TRANSITIONS[current], "retry", "cancel"))
    with pytest.raises(TransitionError) as raised:
        lifecycle.check(current, target)
    assert str(raised.value) == why


@pytest.mark.parametrize(("current", "target"), [("BOGUS", "QUEUED"), ("QUEUED", "DONE")])
def test_a_name_that_is_no_phase_is_refused_with_the_phases(current: str, target: str) -> None:
    why = lifecycle.refusal(current, target)
    assert why is not None and "is not a run phase" in why
    assert all(p in why for p in PHASES)


def test_specific_refusals_say_the_way_out() -> None:
    assert "retry it" in (lifecycle.refusal("SUCCEEDED", "RUNNING") or "")
    assert "CANCEL_REQUESTED" in (lifecycle.refusal("RUNNING", "CANCELLED") or "")
    assert "cannot be queued again" in (lifecycle.refusal("RUNNING", "QUEUED") or "")
    assert lifecycle.refusal("QUEUED", "RUNNING") == \
        "a QUEUED run can move to PREPARING, CANCELLED or FAILED, not to RUNNING"


@pytest.mark.parametrize(("current", "after"), [
    ("QUEUED", "CANCELLED"), ("PREPARING", "CANCEL_REQUESTED"), ("RUNNING", "CANCEL_REQUESTED"),
])
def test_cancel_ends_a_queued_run_at_once_and_asks_a_working_one_to_stop(
        current: str, after: str) -> None:
    assert lifecycle.cancel(current) == after


@pytest.mark.parametrize("current", sorted(RETRYABLE_PHASES))
def test_retry_queues_a_new_attempt_of_an_ended_run(current: str) -> None:
    assert lifecycle.retry(current) == "QUEUED"


@pytest.mark.parametrize(("action", "current", "words"), [
    (lifecycle.cancel, "CANCEL_REQUESTED", "already stopping"),
    (lifecycle.cancel, "SUCCEEDED", "nothing to cancel"),
    (lifecycle.cancel, "FAILED", "nothing to cancel"),
    (lifecycle.cancel, "CANCELLED", "nothing to cancel"),
    (lifecycle.cancel, "BOGUS", "is not a run phase"),
    (lifecycle.retry, "QUEUED", "cancel it or wait for it to end"),
    (lifecycle.retry, "RUNNING", "cancel it or wait"),
    (lifecycle.retry, "PREPARING", "cancel it or wait"),
    (lifecycle.retry, "CANCEL_REQUESTED", "wait for it to stop"),
    (lifecycle.retry, "BOGUS", "is not a run phase"),
])
def test_cancel_and_retry_refuse_a_run_in_the_wrong_phase(
        action: Callable[[str], str], current: str, words: str) -> None:
    with pytest.raises(TransitionError, match=words):
        action(current)
