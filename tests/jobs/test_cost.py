"""Cost over all attempts (device time while a run holds its devices), spend at a device
profile's rate, and the profile table with its config overrides."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from runwatch.analysis.timing import phase_millis
from runwatch.jobs.cost import (
    CPU,
    GIB,
    PROFILES_ENV,
    PROFILES_FILE,
    DeviceProfile,
    ProfileError,
    attempt_times,
    load_profiles,
    profiles_path,
    read_profiles,
    run_cost,
    split_attempts,
)
from runwatch.rundir import format as fmt
from tests.support import sdk_run

RATE = DeviceProfile("h100x4", devices=4, device_memory_bytes=80 * GIB,
                     host_memory_bytes=512 * GIB, hourly_rate=3.6)


def _events(*pairs: tuple[float, str]) -> list[dict[str, Any]]:
    return [{"ts": ts, "phase": phase} for ts, phase in pairs]


ONE = _events((0, "QUEUED"), (10, "PREPARING"), (20, "PREPARING"), (30, "RUNNING"),
              (130, "SUCCEEDED"))
RETRIED = _events((0, "QUEUED"), (10, "PREPARING"), (20, "RUNNING"), (50, "FAILED"),
                  (100, "QUEUED"), (110, "PREPARING"), (115, "RUNNING"), (215, "SUCCEEDED"))


def test_an_ended_run_costs_its_preparing_and_running_time_times_its_devices() -> None:
    cost = run_cost(ONE, devices=2, profile=RATE, until=999)
    assert cost.device_seconds == 240.0  # (20 s preparing + 100 s running) × 2
    assert cost.queue_wait_s == 10.0
    assert cost.estimate is False
    assert cost.spend == pytest.approx(240 / 3600 * 3.6)
    assert cost.phase_millis == phase_millis(ONE) == {"QUEUED": 10_000, "PREPARING": 20_000,
                                                      "RUNNING": 100_000}


def test_a_retried_run_costs_every_attempt() -> None:
    cost = run_cost(RETRIED, devices=1, profile=RATE)
    assert [a.number for a in cost.attempts] == [1, 2]
    assert [a.held_s for a in cost.attempts] == [40.0, 105.0]
    assert cost.device_seconds == 145.0
    assert cost.queue_wait_s == 20.0
    assert cost.phase_millis["RUNNING"] == 130_000
    assert not cost.estimate


def test_a_live_run_is_an_estimate_that_grows_until_it_ends() -> None:
    live = RETRIED[:-1]
    early, later = run_cost(live, 2, RATE, until=135), run_cost(live, 2, RATE, until=165)
    assert early.estimate and later.estimate
    assert early.device_seconds == (40 + 5 + 20) * 2
    assert later.device_seconds - early.device_seconds == 60
    assert [a.ended for a in early.attempts] == [True, False]


def test_stopping_holds_the_devices_and_queue_wait_costs_nothing() -> None:
    cancelled = _events((0, "QUEUED"), (5, "PREPARING"), (10, "RUNNING"),
                        (40, "CANCEL_REQUESTED"), (55, "CANCELLED"))
    assert run_cost(cancelled, 1, RATE).device_seconds == 50.0
    never_started = _events((0, "QUEUED"), (300, "CANCELLED"))
    cost = run_cost(never_started, 8, RATE)
    assert (cost.device_seconds, cost.spend, cost.queue_wait_s, cost.estimate) == \
        (0.0, 0.0, 300.0, False)


def test_a_run_with_no_events_costs_nothing_yet() -> None:
    cost = run_cost([], 1, CPU)
    assert (cost.attempts, cost.device_seconds, cost.estimate) == ((), 0.0, True)


@pytest.mark.parametrize("devices", [0, -1, True, 1.5])
def test_a_run_uses_at_least_one_device(devices: Any) -> None:
    with pytest.raises(ProfileError, match="at least one device"):
        run_cost(ONE, devices, RATE)


def test_attempts_are_cut_after_each_terminal_event() -> None:
    assert [[e["phase"] for e in a] for a in split_attempts(RETRIED)] == [
        ["QUEUED", "PREPARING", "RUNNING", "FAILED"],
        ["QUEUED", "PREPARING", "RUNNING", "SUCCEEDED"]]
    assert split_attempts([]) == []


def test_a_worker_s_end_after_the_one_its_process_recorded_ends_the_same_attempt() -> None:
    # the process recorded SUCCEEDED, then exited with an error: its worker's FAILED, which
    # names the attempt, supersedes it (jobs/failures.exited_after_success)
    failed = {"ts": 135, "phase": "FAILED", "attempt": 1, "code": "failed",
              "reason": "its process exited with code 3 after its run recorded SUCCEEDED"}
    events = [{**e, "attempt": 1} if e["phase"] != "SUCCEEDED" else e for e in ONE] + [failed]
    assert [[e["phase"] for e in a] for a in split_attempts(events)] == [
        ["QUEUED", "PREPARING", "PREPARING", "RUNNING", "SUCCEEDED", "FAILED"]]
    (attempt,) = attempt_times(events, until=999)
    assert (attempt.number, attempt.ended, attempt.code, attempt.ended_at) == (
        1, True, "failed", 135)


def test_as_dict_is_json_with_the_spec_s_phase_millis() -> None:
    data = orjson.loads(orjson.dumps(run_cost(RETRIED, 2, RATE).as_dict()))
    assert data["timing"]["phaseMillis"] == {"QUEUED": 20_000, "PREPARING": 15_000,
                                             "RUNNING": 130_000}
    assert data["device_seconds"] == 290.0 and data["device_profile"] == "h100x4"
    assert [a["device_seconds"] for a in data["attempts"]] == [80.0, 210.0]


def test_a_run_the_sdk_wrote_has_a_final_cost(tmp_path: Path) -> None:
    sdk_run(tmp_path, "r1", steps=5)
    lines = (tmp_path / "r1" / fmt.EVENTS).read_text(encoding="utf-8").splitlines()
    events = [orjson.loads(line) for line in lines]
    cost = run_cost(events, 1, CPU)
    assert not cost.estimate and [a.ended for a in cost.attempts] == [True]
    assert cost.device_seconds == sum(phase_millis(events).values()) / 1000


# -- profiles ---------------------------------------------------------------------------

def test_the_default_profile_is_this_machine_s_cpu() -> None:
    profiles = load_profiles()
    cpu = profiles.get()
    assert cpu is CPU and cpu.name == "cpu" and cpu.devices == 1
    assert cpu.device_memory_bytes == 0 and cpu.hourly_rate > 0
    assert cpu.host_memory_bytes == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def test_a_config_file_adds_profiles_and_overrides_fields() -> None:
    config = yaml.safe_load("""
default: a100x8
profiles:
  cpu: {hourly_rate: 0.2}
  a100x8: {devices: 8, device_memory_gib: 80, host_memory_gib: 1024, hourly_rate: 2.5}
""")
    profiles = load_profiles(config)
    assert profiles.get() == DeviceProfile("a100x8", 8, 80 * GIB, 1024 * GIB, 2.5)
    assert profiles.get("cpu") == DeviceProfile("cpu", 1, 0, CPU.host_memory_bytes, 0.2)
    assert run_cost(ONE, 8, profiles.get()).spend == pytest.approx(120 * 8 / 3600 * 2.5)


@pytest.mark.parametrize(("config", "words"), [
    ({"profiles": {"gpu": {"hourly_rate": "cheap"}}}, "'gpu': hourly_rate must be a number"),
    ({"profiles": {"gpu": {"hourly_rate": -1}}}, "at least 0, not -1"),
    ({"profiles": {"gpu": {"hourly_rate": float("nan")}}}, "must be a number"),
    ({"profiles": {"gpu": {"hourly_rate": 1, "devices": 0}}}, "devices must be a whole"),
    ({"profiles": {"gpu": {"hourly_rate": 1, "devices": 1.5}}}, "devices must be a whole"),
    ({"profiles": {"gpu": {"hourly_rate": 1, "devices": True}}}, "devices must be a whole"),
    ({"profiles": {"gpu": {"devices": 2}}}, "'gpu' needs an hourly_rate"),
    ({"profiles": {"gpu": {"hourly_cost": 2}}}, "no setting 'hourly_cost'; its settings are"),
    ({"profiles": {"gpu": 3}}, "'gpu' must be a mapping"),
    ({"profiles": {"../gpu": {"hourly_rate": 1}}}, "device profile name '../gpu'"),
    ({"profiles": ["gpu"]}, "profiles must be a mapping"),
    ({"default": "tpu"}, "no device profile 'tpu'; choose one of cpu"),
    ({"defualt": "cpu"}, "no setting 'defualt'"),
])
def test_a_bad_config_is_refused_in_one_sentence(config: dict[str, Any], words: str) -> None:
    with pytest.raises(ProfileError, match=words.replace(".", r"\.")) as raised:
        load_profiles(config)
    assert "\n" not in str(raised.value)


def test_asking_for_an_unknown_profile_names_the_known_ones() -> None:
    profiles = load_profiles({"profiles": {"a100": {"hourly_rate": 1.0}}})
    with pytest.raises(ProfileError, match="no device profile 'b200'; choose one of a100, cpu"):
        profiles.get("b200")


def test_attempts_are_numbered_and_cut_by_the_attempt_their_events_name() -> None:
    # a requeue of a lost worker's job starts attempt 2 with no terminal event before it
    events = [{"ts": 0, "phase": "QUEUED", "attempt": 1}, {"ts": 5, "phase": "PREPARING"},
              {"ts": 10, "phase": "RUNNING"}, {"ts": 40, "phase": "QUEUED", "attempt": 2},
              {"ts": 45, "phase": "PREPARING", "attempt": 2}, {"ts": 50, "phase": "RUNNING"},
              {"ts": 70, "phase": "FAILED", "reason": "the training job failed", "code": "failed"}]
    cost = run_cost(events, 1, RATE)
    # attempt 1 ended where attempt 2 started: its RUNNING time stops there, not now
    assert [(a.number, a.held_s, a.ended) for a in cost.attempts] == [(1, 35.0, True),
                                                                      (2, 25.0, True)]
    assert not cost.estimate
    last = cost.as_dict()["attempts"][-1]
    assert (last["phase"], last["reason_code"], last["queued_at"], last["started_at"],
            last["ended_at"]) == ("FAILED", "failed", 40, 45, 70)
    # started_at was the queue time: a job that waited behind others read as started then
    assert [(a["queued_at"], a["started_at"]) for a in cost.as_dict()["attempts"]] == [
        (0, 5), (40, 45)]
    waiting = run_cost([{"ts": 0, "phase": "QUEUED", "attempt": 1}], 1, RATE)
    assert waiting.as_dict()["attempts"][0]["started_at"] is None


# -- the profiles file -----------------------------------------------------------------

def test_the_profiles_file_is_the_environment_s_else_the_runs_folder_s(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PROFILES_ENV, raising=False)
    assert profiles_path(tmp_path) is None and read_profiles(tmp_path).get() is CPU
    folder = tmp_path / PROFILES_FILE
    folder.parent.mkdir()
    folder.write_text("profiles:\n  cpu: {hourly_rate: 0.5}\n")
    assert read_profiles(tmp_path).get().hourly_rate == 0.5
    named = tmp_path / "elsewhere.yaml"
    named.write_text("default: a100\nprofiles:\n  a100: {devices: 8, hourly_rate: 2}\n")
    monkeypatch.setenv(PROFILES_ENV, str(named))
    assert profiles_path(tmp_path) == named
    assert read_profiles(tmp_path).get().name == "a100"
    # an edit is read at once
    named.write_text("default: h100\nprofiles:\n  h100: {devices: 4, hourly_rate: 3.5}\n")
    assert read_profiles(tmp_path).get().hourly_rate == 3.5


@pytest.mark.parametrize(("text", "words"), [
    (None, "cannot be read (No such file or directory); create it"),
    ("profiles: [unclosed", "cannot be read as YAML at line 1"),
    ("- a\n- b\n", "must hold a mapping with default and profiles, not list"),
    ("profiles:\n  gpu: {devices: 2}\n", ": device profile 'gpu' needs an hourly_rate"),
])
def test_a_bad_profiles_file_is_named_in_one_sentence(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str | None, words: str) -> None:
    path = tmp_path / "profiles.yaml"
    if text is not None:
        path.write_text(text)
    monkeypatch.setenv(PROFILES_ENV, str(path))
    with pytest.raises(ProfileError) as raised:
        read_profiles(None)
    assert str(path) in str(raised.value) and words in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_job_may_ask_for_at_most_its_profile_s_devices() -> None:
    profiles = load_profiles({"profiles": {"a100x8": {"devices": 8, "hourly_rate": 2.5}}})
    assert profiles.for_job("a100x8", 8).name == "a100x8"
    assert profiles.for_job(None, 1) is CPU
    with pytest.raises(ProfileError, match="profile cpu has 1 device, so a job on it can ask "
                                           "for at most that many, not 2"):
        profiles.for_job(None, 2)
    with pytest.raises(ProfileError, match="no device profile 'b200'"):
        profiles.for_job("b200", 1)


def test_each_attempt_is_priced_at_the_rate_its_worker_recorded() -> None:
    """A profile's rate raised after a run does not re-price its attempts: each keeps the
    rate on its PREPARING event; one without (a run from before rates were recorded, or
    started by hand) is priced at the profile's."""
    events = [dict(ev) for ev in RETRIED]
    events[1]["hourly_rate"] = 1.0  # attempt 1's PREPARING
    cost = run_cost(events, devices=2, profile=RATE)  # the profile's rate is 3.6 now
    assert [a.hourly_rate for a in cost.attempts] == [1.0, None]
    assert cost.spend == pytest.approx((40 * 2 * 1.0 + 105 * 2 * 3.6) / 3600)
    assert not cost.priced and cost.hourly_rate == 3.6  # the latest attempt's
    events[5]["hourly_rate"] = 0  # attempt 2's PREPARING: a free machine
    cost = run_cost(events, devices=2, profile=RATE)
    assert cost.spend == pytest.approx(40 * 2 * 1.0 / 3600) and cost.priced
    assert [(a["hourly_rate"], a["spend"]) for a in cost.as_dict()["attempts"]] == \
        [(1.0, pytest.approx(80 / 3600)), (0, 0)]
    for bad in ("2.5", -1, float("nan"), True):
        events[5]["hourly_rate"] = bad  # not a rate: the profile's prices it
        assert run_cost(events, devices=2, profile=RATE).attempts[1].hourly_rate is None


def test_the_run_s_rate_is_its_latest_attempt_that_held_devices() -> None:
    """A retry still queued has run at no rate: the run's rate stays the one its spend was
    made at (it read the profile's new rate, "spend 2 at 3 per device-hour")."""
    events = [dict(ev) for ev in RETRIED[:4]] + [{"ts": 100, "phase": "QUEUED"}]
    events[1]["hourly_rate"] = 1.0
    cost = run_cost(events, devices=1, profile=RATE, until=500)
    assert [a.held_s for a in cost.attempts] == [40.0, 0.0]
    assert cost.hourly_rate == 1.0 and cost.spend == pytest.approx(40 / 3600)


def test_with_the_profile_unknown_only_a_recorded_rate_prices_an_attempt() -> None:
    """The profiles file cannot be read: an attempt that recorded its rate keeps it, one
    that did not has no rate or spend (it read the placeholder profile's 0.0)."""
    events = [dict(ev) for ev in RETRIED]
    events[1]["hourly_rate"] = 1.0
    unknown = DeviceProfile("gone", 1, 0, 0, 0.0)
    attempts = run_cost(events, 1, unknown, profile_known=False).as_dict()["attempts"]
    assert [(a["hourly_rate"], a["spend"]) for a in attempts] == [
        (1.0, pytest.approx(40 / 3600)), (None, None)]
