"""What a run costs: device time over all its attempts, and spend at a device profile's rate.

A run holds its devices from the moment its process starts (PREPARING: as its worker
starts it, or, for a job a Ray cluster keeps queued until devices are free, once the
cluster starts it) until the process exits (through RUNNING, and CANCEL_REQUESTED while it
stops), so an attempt's device seconds are that time × the devices the run asked for;
QUEUED time, waiting for a worker or for the cluster, is shown apart, as queue wait, and
costs nothing. A retried run's cost is the sum over its attempts (an
attempt ends at a terminal event; the events after it are the next attempt's). Until the
last attempt ends the figures are an estimate, with its open phase lasting until `until`.
A last attempt whose process died without recording its end (`LostEnd`: a run started by
hand that was killed) ended at its last record: its figures are final, not an estimate.
A run started by hand that was killed and later resumed (`Resumed`) held no devices from
the dead process's last record until the resumed process started: a run killed in the
evening and resumed the next morning is not billed the night.
Phase times come from `runwatch.analysis.timing.phase_millis`.

Spend is device hours × the hourly rate per device: the rate the worker recorded on an
attempt's PREPARING event (`hourly_rate`), so a later change of the profile's rate does not
re-price it, else the profile's rate now. Profiles are a small table:
the built-in `cpu` profile (this machine, one device) and those of a config mapping
(`load_profiles`; its shape is in docs/jobs.md), read from a YAML file (`read_profiles`):
the file `RUNWATCH_PROFILES` names, else `<runs dir>/.runwatch/profiles.yaml` when it
exists.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from runwatch.analysis.timing import dead_spans, phase_millis
from runwatch.rundir.format import (
    ACTIVE_PHASES,
    PHASES,
    STATE_DIR,
    TERMINAL_PHASES,
    RunDirError,
    event_rate,
    validate_name,
)

GIB = 1024**3
# The phases in which a run holds its devices: the active ones, in lifecycle order.
HOLDING_PHASES = tuple(p for p in PHASES if p in ACTIVE_PHASES)


class ProfileError(ValueError):
    """A device profile or its config is unusable; the message says which and why."""


@dataclass(frozen=True)
class DeviceProfile:
    """A kind of worker machine a run can ask for, and what an hour of one device costs."""

    name: str
    devices: int
    device_memory_bytes: int  # per device; 0 for CPUs (they use host memory) or not stated
    host_memory_bytes: int  # 0 when not stated
    hourly_rate: float  # per device-hour, in the deployment's currency


def _host_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


# A laptop or workstation CPU counts as one device. The rate is a placeholder close to a
# small cloud CPU machine's price per hour: set your own in the config.
CPU = DeviceProfile("cpu", devices=1, device_memory_bytes=0,
                    host_memory_bytes=_host_memory_bytes(), hourly_rate=0.05)

_FIELDS = {"devices": "devices", "device_memory_gib": "device_memory_bytes",
           "host_memory_gib": "host_memory_bytes", "hourly_rate": "hourly_rate"}


@dataclass(frozen=True)
class Profiles:
    """The device profiles a deployment offers, and the one a run gets when it names none."""

    by_name: Mapping[str, DeviceProfile]
    default: str

    def get(self, name: str | None = None) -> DeviceProfile:
        """The profile called `name` (the default for None), else ProfileError naming them."""
        wanted = self.default if name is None else name
        found = self.by_name.get(wanted)
        if found is None:
            raise ProfileError(f"there is no device profile {wanted!r}; choose one of "
                               f"{', '.join(sorted(self.by_name))}")
        return found

    def for_job(self, name: str | None, devices: int) -> DeviceProfile:
        """The profile a job asking for `devices` devices of profile `name` (the default
        for None) runs on; ProfileError when there is no such profile, or when its
        workers have fewer devices, so the job could never start."""
        profile = self.get(name)
        if devices > profile.devices:
            raise ProfileError(f"a worker of profile {profile.name} has {profile.devices} "
                               f"device{'s' if profile.devices > 1 else ''}, so a job on it "
                               f"can ask for at most that many, not {devices}")
        return profile


def offered_devices(profile: DeviceProfile, devices: int | None) -> int:
    """The devices a worker of `profile` on this machine offers: `devices`, else the
    profile's count. On a profile of accelerators, ProfileError when that is more than a
    worker of the profile has: its jobs would be handed device ids the machine lacks. On
    `cpu` a device is a share of the CPUs, so `--devices N` runs N one-device jobs at once.
    (A Ray worker's count is the cluster's, so it is not bounded here.)"""
    if devices is None:
        return profile.devices
    if devices > profile.devices and profile.name != CPU.name:
        raise ProfileError(
            f"a worker of profile {profile.name} has {profile.devices} "
            f"device{'s' if profile.devices > 1 else ''}, so it can offer at most that many, "
            f"not {devices}: offer fewer (--devices), or give the profile devices: {devices} "
            f"in the device profiles file ({PROFILES_FILE} in the runs folder, or the file "
            f"{PROFILES_ENV} names)")
    return devices


def _number(name: str, key: str, value: Any, integer: bool, least: float) -> float:
    ok = isinstance(value, int if integer else int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value < least:
        kind = "a whole number" if integer else "a number"
        raise ProfileError(f"device profile {name!r}: {key} must be {kind} of at least "
                           f"{least:g}, not {value!r}")
    return float(value)


def _profile(name: str, fields: Any, base: DeviceProfile | None) -> DeviceProfile:
    if not isinstance(fields, Mapping):
        raise ProfileError(f"device profile {name!r} must be a mapping of "
                           f"{', '.join(_FIELDS)}, not {type(fields).__name__}")
    unknown = sorted(str(k) for k in fields if k not in _FIELDS)
    if unknown:
        raise ProfileError(f"device profile {name!r} has no setting {unknown[0]!r}; its "
                           f"settings are {', '.join(_FIELDS)}")
    if base is None and "hourly_rate" not in fields:
        raise ProfileError(f"device profile {name!r} needs an hourly_rate (per device-hour)")
    profile = base or DeviceProfile(name, 1, 0, 0, 0.0)
    devices = _number(name, "devices", fields.get("devices", profile.devices), True, 1)
    device_mem = _number(name, "device_memory_gib", fields.get(
        "device_memory_gib", profile.device_memory_bytes / GIB), False, 0)
    host_mem = _number(name, "host_memory_gib", fields.get(
        "host_memory_gib", profile.host_memory_bytes / GIB), False, 0)
    rate = _number(name, "hourly_rate", fields.get("hourly_rate", profile.hourly_rate), False, 0)
    return replace(profile, devices=int(devices), device_memory_bytes=round(device_mem * GIB),
                   host_memory_bytes=round(host_mem * GIB), hourly_rate=rate)


def load_profiles(config: Mapping[str, Any] | None = None) -> Profiles:
    """The built-in profiles with those of `config` (see the module docstring) over them."""
    config = config or {}
    unknown = sorted(str(k) for k in config if k not in ("default", "profiles"))
    if unknown:
        raise ProfileError(f"the device profile config has no setting {unknown[0]!r}; its "
                           "settings are default and profiles")
    given = config.get("profiles") or {}
    if not isinstance(given, Mapping):
        raise ProfileError("the device profile config's profiles must be a mapping of name "
                           "to settings")
    by_name: dict[str, DeviceProfile] = {CPU.name: CPU}
    for name, fields in given.items():
        try:
            validate_name(name, "device profile name")
        except RunDirError as exc:
            raise ProfileError(str(exc)) from None
        by_name[name] = _profile(name, fields, by_name.get(name))
    profiles = Profiles(by_name, str(config.get("default") or CPU.name))
    profiles.get()  # the default must exist
    return profiles


PROFILES_ENV = "RUNWATCH_PROFILES"
# where a runs folder keeps its profiles when the environment names no file
PROFILES_FILE = Path(STATE_DIR) / "profiles.yaml"
MAX_PROFILES_BYTES = 1024 * 1024
_read_cache: dict[tuple[str, int, int], Profiles | ProfileError] = {}


def profiles_path(runs_dir: Path | None) -> Path | None:
    """The device profiles file in use: `$RUNWATCH_PROFILES`, else the runs folder's
    `.runwatch/profiles.yaml` when it exists, else None (the built-in profiles)."""
    named = os.environ.get(PROFILES_ENV)
    if named:
        return Path(named).expanduser()
    if runs_dir is not None and (runs_dir / PROFILES_FILE).is_file():
        return runs_dir / PROFILES_FILE
    return None


def read_profiles(runs_dir: Path | None = None) -> Profiles:
    """The profiles of the file `profiles_path` finds (the built-in ones when there is
    none), or ProfileError naming the file and what is wrong with it. A file is read
    again only when it changes."""
    path = profiles_path(runs_dir)
    if path is None:
        return load_profiles()
    try:
        st = path.stat()
    except OSError as exc:
        raise ProfileError(f"the device profiles file {path} cannot be read "
                           f"({exc.strerror}); create it, or point {PROFILES_ENV} at "
                           "one that exists") from None
    key = (str(path), st.st_mtime_ns, st.st_size)
    found = _read_cache.get(key)
    if found is None:
        found = _parse_profiles(path)
        _read_cache.clear()  # one file is in use at a time; keep only its newest reading
        _read_cache[key] = found
    if isinstance(found, ProfileError):
        raise found
    return found


def _parse_profiles(path: Path) -> Profiles | ProfileError:
    try:
        if path.stat().st_size > MAX_PROFILES_BYTES:
            return ProfileError(f"the device profiles file {path} is larger than 1 MiB; "
                                "it should hold a few profiles")
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" at line {where.line + 1}" if where is not None else ""
        return ProfileError(f"the device profiles file {path} cannot be read as YAML{line}; "
                            "fix it (see docs/jobs.md for its shape)")
    if data is not None and not isinstance(data, Mapping):
        return ProfileError(f"the device profiles file {path} must hold a mapping with "
                            f"default and profiles, not {type(data).__name__}")
    try:
        return load_profiles(data)
    except ProfileError as exc:
        return ProfileError(f"{path}: {exc}")


@dataclass(frozen=True)
class AttemptTime:
    """One attempt of a run: the time it spent in each phase, and how it ended."""

    number: int  # 1 for the first attempt
    phase_millis: Mapping[str, int]
    ended: bool  # by a terminal event, or by the start of the next attempt
    phase: str = "QUEUED"  # its last phase
    reason: str | None = None  # of its terminal event
    code: str | None = None  # the failure catalogue id of its terminal event
    started_at: float | None = None  # its first event of a phase that holds devices
    ended_at: float | None = None  # its terminal event, or the next attempt's start
    queued_at: float | None = None  # its first event
    # the rate per device-hour its worker recorded when it started it (PREPARING's
    # `hourly_rate`): its spend keeps it when the profile's rate changes later
    hourly_rate: float | None = None

    @property
    def held_s(self) -> float:
        """Seconds the attempt held its devices."""
        return sum(self.phase_millis.get(p, 0) for p in HOLDING_PHASES) / 1000

    @classmethod
    def of(cls, number: int, events: Sequence[dict[str, Any]], until: float | None,
           superseded_at: float | None = None, resumed: Sequence[Resumed] = ()) -> AttemptTime:
        """The attempt made of `events` (in order); an open phase lasts until `until`,
        or until `superseded_at` when a next attempt started without a terminal event
        (a requeued job whose worker was lost), where this attempt ends. The spans of
        `resumed` are in no phase: no process of the run lived then."""
        last = events[-1]
        terminal = last["phase"] in TERMINAL_PHASES
        end = last["ts"] if terminal else superseded_at
        started = next((ev["ts"] for ev in events if ev["phase"] in HOLDING_PHASES), None)
        rate = next((r for ev in events if (r := event_rate(ev)) is not None), None)
        idle = [(r.last_record, r.at) for r in resumed]
        return cls(number, phase_millis(events, until if end is None else end, idle),
                   end is not None,
                   last["phase"], last.get("reason") if terminal else None,
                   last.get("code") if terminal else None, started, end, events[0]["ts"],
                   rate)


@dataclass(frozen=True)
class LostEnd:
    """The end of a run's last attempt whose process died without recording one: when it
    last recorded anything, and the failure catalogue's verdict on it (its sentence and
    id: runwatch.analysis.detail.unrecorded_end)."""

    at: float
    reason: str
    code: str


@dataclass(frozen=True)
class Resumed:
    """A span in which no process of a run started by hand lived: from a killed process's
    last record (`last_record`) until the run was resumed (`at`), as the resume recorded it
    in the manifest's `dead_spans` (docs/run-format.md). Made by `resumed_gaps`."""

    last_record: float
    at: float


def resumed_gaps(spans: Any, job: bool) -> tuple[Resumed, ...]:
    """The spans of a manifest's `dead_spans` ([from, to] pairs) in which the run held no
    devices; none for a `job`, whose worker records its attempts' phases (docs/jobs.md),
    and none of a pair that is not two times a date can show, in order."""
    return () if job else tuple(Resumed(since, to) for since, to in dead_spans(spans))


@dataclass(frozen=True)
class Cost:
    """A run's cost over all its attempts."""

    profile: DeviceProfile
    devices: int
    attempts: tuple[AttemptTime, ...]
    estimate: bool  # the run has not ended: the figures grow until it does
    # False when the profile's rate is unknown (its profiles file cannot be read, or lacks
    # it): an attempt that recorded no rate then has no rate or spend in `as_dict`
    profile_known: bool = True

    @property
    def phase_millis(self) -> dict[str, int]:
        """Milliseconds in each phase, summed over the attempts."""
        total: dict[str, int] = {}
        for attempt in self.attempts:
            for phase, ms in attempt.phase_millis.items():
                total[phase] = total.get(phase, 0) + ms
        return total

    @property
    def queue_wait_s(self) -> float:
        return self.phase_millis.get("QUEUED", 0) / 1000

    @property
    def device_seconds(self) -> float:
        return sum(a.held_s for a in self.attempts) * self.devices

    def rate_of(self, attempt: AttemptTime) -> float:
        """The rate an attempt is priced at: the one recorded when it started, else (an
        attempt from before rates were recorded, or a run started by hand) the profile's."""
        return self.profile.hourly_rate if attempt.hourly_rate is None else attempt.hourly_rate

    @property
    def hourly_rate(self) -> float:
        """The rate of the latest attempt that held devices (a retry still queued has run
        at none); the profile's while none has."""
        held = [a for a in self.attempts if a.held_s > 0]
        return self.rate_of(held[-1]) if held else self.profile.hourly_rate

    @property
    def priced(self) -> bool:
        """Whether every attempt that held devices recorded its rate (then the spend does
        not depend on the profiles as they are now)."""
        return all(a.hourly_rate is not None for a in self.attempts if a.held_s > 0)

    def spend_of(self, attempt: AttemptTime) -> float:
        """An attempt's device hours × the rate it is priced at."""
        return attempt.held_s * self.devices / 3600 * self.rate_of(attempt)

    @property
    def spend(self) -> float:
        """Device hours × the hourly rate, each attempt at its own."""
        return sum(self.spend_of(a) for a in self.attempts)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data, for the API and `-o json`: the figures, and each attempt."""
        return {
            "device_profile": self.profile.name,
            "devices": self.devices,
            "hourly_rate": self.hourly_rate,
            "device_seconds": self.device_seconds,
            "device_seconds_estimate": self.estimate,
            "spend": self.spend,
            "queue_wait_s": self.queue_wait_s,
            "timing": {"phaseMillis": self.phase_millis},
            "attempts": [{"attempt": a.number, "phase": a.phase, "ended": a.ended,
                          "phaseMillis": dict(a.phase_millis),
                          "device_seconds": a.held_s * self.devices,
                          **({"hourly_rate": self.rate_of(a), "spend": self.spend_of(a)}
                             if self.profile_known or a.hourly_rate is not None
                             else {"hourly_rate": None, "spend": None}),
                          "reason": a.reason, "reason_code": a.code,
                          "queued_at": a.queued_at, "started_at": a.started_at,
                          "ended_at": a.ended_at}
                         for a in self.attempts],
        }


def split_attempts(events: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """A run's lifecycle events, cut into attempts: a new one starts after each terminal
    event, and at an event that names a higher `attempt` than the events before it (a
    job requeued without a terminal event). A terminal event naming the attempt that just
    ended is that attempt's end too, not a new attempt: the worker's FAILED after the
    SUCCEEDED its process recorded, when the process then exited with an error."""
    out: list[list[dict[str, Any]]] = [[]]
    number = 0
    for event in events:
        attempt = event.get("attempt")
        newer = isinstance(attempt, int) and attempt > number
        supersedes = (event.get("phase") in TERMINAL_PHASES and attempt == number
                      and not newer)
        if out[-1] and not supersedes and (out[-1][-1]["phase"] in TERMINAL_PHASES or newer):
            out.append([])
        number = max(number, attempt) if isinstance(attempt, int) else number
        out[-1].append(event)
    return out if out[-1] else []


def run_cost(events: Sequence[dict[str, Any]], devices: int, profile: DeviceProfile,
             until: float | None = None, profile_known: bool = True,
             lost: LostEnd | None = None, resumed: Sequence[Resumed] = ()) -> Cost:
    """The cost of a run from its events (in order), for `devices` of `profile` (whose rate
    is unknown unless `profile_known`); an attempt still open lasts until `until` (now by
    default), or, when its process died without recording its end (`lost`), it ended then;
    the spans of `resumed` (a run killed and resumed later) hold no devices. Attempts are
    numbered by the `attempt` their events name, else in order."""
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise ProfileError(f"a run uses at least one device, not {devices!r}")
    attempts = attempt_times(events, until, lost, resumed)
    return Cost(profile, devices, attempts, estimate=not attempts or not attempts[-1].ended,
                profile_known=profile_known)


def attempt_times(events: Sequence[dict[str, Any]], until: float | None = None,
                  lost: LostEnd | None = None, resumed: Sequence[Resumed] = ()
                  ) -> tuple[AttemptTime, ...]:
    """A run's attempts from its events (in order), numbered by the `attempt` their events
    name; an attempt still open lasts until `until` (now by default), but the last one
    ended at `lost.at`, with its verdict, when its process died without recording its
    end. The spans of `resumed` are in no attempt's phases.

    Events after a SUCCEEDED that name no later attempt, and do not start QUEUED, are the
    same attempt resumed, not a new one: a run resumed to go on after it succeeded
    (`init(resume=True)`: the Hugging Face callback resumes a run for each evaluate()
    after train()). The resumed attempt's phases add up its sessions, and it ends as its
    last does. A run resumed by hand after it failed or was cancelled is tried again: its
    next attempt, as a retry's (which job control queues, naming it) is."""
    attempts: list[AttemptTime] = []
    parts = split_attempts(events)
    for i, evs in enumerate(parts):
        named = next((e["attempt"] for e in evs if isinstance(e.get("attempt"), int)), None)
        goes_on = (bool(attempts) and attempts[-1].phase == "SUCCEEDED"
                   and evs[0]["phase"] != "QUEUED")  # resumed after it succeeded
        number = (named if named is not None else attempts[-1].number if goes_on
                  else attempts[-1].number + 1 if attempts else 1)
        after = parts[i + 1][0]["ts"] if i + 1 < len(parts) else None
        if after is None and lost is not None and evs[-1]["phase"] not in TERMINAL_PHASES:
            attempt = AttemptTime.of(number, evs, until, max(lost.at, evs[-1]["ts"]), resumed)
            attempts.append(replace(attempt, reason=lost.reason, code=lost.code))
        else:
            attempts.append(AttemptTime.of(number, evs, until, after, resumed))
        if len(attempts) > 1 and attempts[-2].number == attempts[-1].number:
            attempts[-2:] = [_sessions(attempts[-2], attempts[-1])]
    return tuple(attempts)


def _sessions(first: AttemptTime, then: AttemptTime) -> AttemptTime:
    """One attempt of two sessions (its run resumed after `first` ended): the time in each
    phase of both, and the end of `then`."""
    millis = dict(first.phase_millis)
    for phase, ms in then.phase_millis.items():
        millis[phase] = millis.get(phase, 0) + ms
    return replace(then, phase_millis=millis,
                   started_at=first.started_at if first.started_at is not None
                   else then.started_at,
                   queued_at=first.queued_at,
                   hourly_rate=first.hourly_rate if first.hourly_rate is not None
                   else then.hourly_rate)
