"""The `runs` commands against a team server (`--server URL`, or RUNWATCH_SERVER): the same
data a local index gives them, read from the server's HTTP API with a bearer token, so each
command renders it one way whichever it came from (docs/team.md, "The CLI against a team
server").

Every failure exits 2 with what to do: a server that does not answer (its URL, what to
check), a token refused (401/403: where the token came from, `runwatch tokens create`),
a run the token's project does not hold (404, with the server's candidates). A command
that waits on the server (`runs wait`) gives it `Patience` instead: its reads ride out an
outage (a restart) for a bound it sets, and only then fail (`Unanswered`).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from runwatch.cli.output import console, fail, text

if TYPE_CHECKING:
    from runwatch.store.queries import StepRow

ENV_SERVER = "RUNWATCH_SERVER"
ENV_TOKEN = "RUNWATCH_TOKEN"
TIMEOUT_S = 30.0
# The API's largest pages: runs, log entries, and points of one series read whole.
RUNS_PAGE = 500
# the most rollouts GET /api/runs/RUN/samples answers at once (routes_records.MAX_SAMPLES)
SAMPLES_PAGE = 500
LOGS_PAGE = 2000
# the most steps GET /api/runs/RUN/reward-terms answers at once (its MAX_HISTORY_PAGE)
TERMS_PAGE = 1000
SERIES_POINTS = 20_000
# Points asked for in one series request, over all its keys (their counts as the server
# gave them), so that an answer stays a few megabytes.
POINTS_PER_REQUEST = 200_000
MAX_KEYS = 400
# What the API's "run not found" ends with (server/runs.resolve_run), and where its
# "a name runs of several projects bear" says how an HTTP client names one.
API_LIST_HINT = "; list runs with GET /api/runs"
API_PROJECT_HINT = "; over HTTP, ?project="
# Answers that say the server (or a proxy before it) cannot answer now: a patient read
# asks again (a server restarting behind a proxy is 502 or 503 for a moment).
TRY_AGAIN = (429, 502, 503, 504)
# What to check when the server does not answer.
UNREACHABLE_HINTS = ["check the URL (--server, or RUNWATCH_SERVER) and that `runwatch server` "
                     "runs there and this machine reaches it (host, port, firewall, proxy)"]


def remote_for(server: str | None, token: str | None, directory: Path | None,
               db: str | None, dir_argument: bool = False) -> Remote | None:
    """The server a read command reads: --server, else RUNWATCH_SERVER unless --dir (the
    argument DIR of a command that takes the folder so: `dir_argument`) or --db names a
    local index; None reads the local index."""
    if server is not None and (directory is not None or db is not None):
        local = "DIR" if dir_argument else "--dir"
        raise fail(f"--server reads a team server and {local}/--db a local index: give one "
                   "of them")
    if server is not None:
        url = server.strip()
    elif directory is None and db is None:
        url = os.environ.get(ENV_SERVER, "").strip()
    else:
        url = ""  # --dir or --db names a local index
    if not url:
        if server is not None:
            raise fail("--server is empty", ["pass the base URL `runwatch server` printed, "
                                             "e.g. --server http://127.0.0.1:8765"])
        if token is not None:
            raise fail("--token is the token for a team server, and this command reads a "
                       "local index", ["pass --server URL (or set RUNWATCH_SERVER) too"])
        return None
    # here, with a server to read: importing runwatch.sdk would slow every local read
    from runwatch.sdk.sendhttp import bearer_token, url_scheme

    if url_scheme(url) is None:
        given = "--server" if server is not None else ENV_SERVER
        raise fail(f"{given} {url!r} is not an http:// or https:// URL",
                   ["pass the base URL `runwatch server` printed, e.g. "
                    "http://runwatch.lan:8765"])
    if token == "":
        raise fail("--token is empty", ["pass the token `runwatch tokens create` printed, or "
                                        "leave --token out to use RUNWATCH_TOKEN"])
    secret, source = ((token, "the token given with --token") if token is not None
                      else (os.environ.get(ENV_TOKEN), f"the token in {ENV_TOKEN}"))
    try:
        return Remote(url.rstrip("/"), bearer_token(secret, source), source)
    except ValueError as exc:
        raise fail(str(exc)) from None


class Unanswered(Exception):
    """The server did not answer a read (no connection, or TRY_AGAIN) for as long as the
    command's `Patience` waits; `why` is the last failure, `for_s` how long it lasted."""

    def __init__(self, why: str, for_s: float) -> None:
        super().__init__(why)
        self.why = why
        self.for_s = for_s


class Patience:
    """How a command that waits on the server (`runs wait`) rides out an outage: a read
    the server does not answer is asked again, with backoff, until it answers, or until
    `retry_for` seconds have passed since the server last answered, or the time.monotonic()
    deadline `until`; then `Unanswered`. It says on stderr once that the server does not
    answer and it keeps trying, and once that it answers again."""

    def __init__(self, url: str, retry_for: float, until: float | None = None) -> None:
        self.url = url
        self.retry_for = retry_for
        self.until = until
        self.since: float | None = None  # when the first read of this outage failed
        self.failures = 0

    def missed(self, why: str) -> None:
        """A read was not answered (`why`): wait before it is asked again, or raise
        Unanswered once the bound has passed."""
        from runwatch.sdk.upload import backoff  # the SDK's and sync's backoff

        now = time.monotonic()
        if self.since is None:
            self.since = now
        end = self.since + self.retry_for
        if self.until is not None:
            end = min(end, self.until)
        if now >= end:
            raise Unanswered(why, now - self.since)
        if self.failures == 0:
            console(stderr=True).print(text(
                f"the runwatch server at {self.url} does not answer ({why}); trying again "
                f"for up to {self.retry_for:g}s (--retry-for)"))
        self.failures += 1
        time.sleep(min(backoff(self.failures), end - now))

    def answered(self) -> None:
        """A read was answered: an outage, if there was one, is over."""
        if self.failures and self.since is not None:
            console(stderr=True).print(text(
                f"the runwatch server at {self.url} answers again after "
                f"{time.monotonic() - self.since:.0f}s; still waiting"))
        self.since = None
        self.failures = 0


class Remote:
    """One team server's API, read with one token; each method answers as the local index
    would, or exits saying why it cannot (with `patience`, a read the server does not
    answer is asked again for a while first)."""

    def __init__(self, url: str, token: str | None, token_from: str) -> None:
        """`token_from` says where the token came from, in the errors."""
        import httpx  # here: a command that reads a local index never imports it

        from runwatch.sdk.sendhttp import url_scheme

        self.url = url
        self.token_from = token_from
        headers = {"User-Agent": "runwatch-cli"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.has_token = token is not None
        self._httpx = httpx
        # httpx builds a TLS context for every client (the system's and certifi's CAs:
        # 0.2-0.4 s a command under load); an http:// server needs none, and a client
        # follows no redirect to an https:// one
        self._http = httpx.Client(base_url=url, headers=headers, timeout=TIMEOUT_S,
                                  verify=url_scheme(url) == "https")
        # set by a command that waits on the server: its reads ride out an outage
        self.patience: Patience | None = None

    # --- HTTP, and what each failure means to the person at the terminal

    def request(self, method: str, path: str, params: Any = None,
                accept: tuple[int, ...] = (), body: dict[str, Any] | None = None
                ) -> dict[str, Any]:
        """The answer to METHOD path (a dict), or exit 2 saying what went wrong; the
        answer of a status in `accept` comes back too (its `ok` false). With `patience`,
        a read the server does not answer is asked again (Unanswered once it gives up)."""
        patience = self.patience if method == "GET" else None  # a write is never sent twice
        while True:
            try:
                resp = self._send(method, path, params, body)
            except self._httpx.HTTPError as exc:
                why = f"{type(exc).__name__}: {exc}"
                if patience is None:
                    raise fail(f"cannot reach the runwatch server at {self.url} ({why})",
                               UNREACHABLE_HINTS) from None
                patience.missed(why)
                continue
            if patience is None:
                break
            if resp.status_code in TRY_AGAIN:
                patience.missed(f"it answered {resp.status_code}")
                continue
            patience.answered()
            break
        try:
            answer = resp.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise fail(f"{self.url} answered {method} {path} with {resp.status_code} and no "
                       "runwatch JSON", ["is it a runwatch server? pass the base URL "
                                         "`runwatch server` printed"])
        if resp.is_success or resp.status_code in accept:
            return answer
        raise self._refusal(resp.status_code, str(answer.get("error") or "no reason given"),
                            answer)

    def _send(self, method: str, path: str, params: Any,
              given: dict[str, Any] | None = None) -> Any:
        """One request (a read once more, on a new connection, when the kept-alive one it
        went out on was closed under it); raises httpx.HTTPError when it got no answer."""
        # here: importing runwatch.sdk (the SDK's imports) would slow every read command
        # of a local index, which never calls this
        from runwatch.sdk.sendhttp import closed_under

        # a write carries a JSON body, even an empty one: the API takes no other
        body: dict[str, Any] | None = (given or {}) if method == "POST" else None
        path, _, query = path.partition("?")  # a run path's ?project= (`_run_path`)
        if query:
            params = self._httpx.QueryParams(query).merge(params or {})
        try:
            return self._http.request(method, path, params=params, json=body)
        except closed_under(self._httpx):
            if method != "GET":  # a write may have been done: never twice
                raise
            # a kept-alive connection closed under the request: a read is asked again,
            # once, on a new connection
            return self._http.request(method, path, params=params, json=body)

    def _refusal(self, status: int, said: str, answer: dict[str, Any]) -> Exception:
        token = (self.token_from if self.has_token
                 else f"no token (neither --token nor {ENV_TOKEN} is set)")
        if status == 401:
            return fail(f"{self.url} refused {token}: {said}",
                        ["an admin of the project makes one on the server's machine with "
                         "`runwatch tokens create --project P --right read --name WHO --db DB`"
                         " (DB being the server's index); then set RUNWATCH_TOKEN"])
        if status == 403:  # the server says which right on which project is needed
            return fail(f"{self.url} refused {token}: {said}")
        candidates = answer.get("candidates") or []  # a run that is not found, or ambiguous
        hints = ["candidates:"] + [f"  {c}" for c in candidates] if candidates else []
        if status == 409 and answer.get("projects"):  # a name runs of several projects bear
            return fail(f"{said.split(API_PROJECT_HINT)[0]} (on {self.url})", hints)
        if status == 404:
            if self.has_token:
                hints.append(f"{self.url} shows a token only its project's runs: is "
                             f"{self.token_from} a token of the run's project?")
            # the server's way to list them is an API route; here it is a command
            said = said.removesuffix(API_LIST_HINT)
            return fail(f"{said} (on {self.url})", hints)
        return fail(f"{self.url} answered {status}: {said}", hints)

    def _run_path(self, ref: str, tail: str = "") -> str:
        """The API path of run `ref`; `PROJECT/RUN` (a name is a run's own within its
        project) names the project with ?project=, since a path segment holds no `/`."""
        from runwatch.store.plain import split_ref  # no SQLAlchemy: a short command's start

        project, run = split_ref(ref)
        query = "" if project is None else f"?project={quote(project, safe='')}"
        return f"/api/runs/{quote(run, safe='')}{tail}{query}"

    # --- what the commands read

    def runs(self, search: str | None, project: str | None, status: str | None,
             limit: int) -> list[dict[str, Any]]:
        """The list fields of at most `limit` runs, newest first (GET /api/runs, paged)."""
        found: list[dict[str, Any]] = []
        cursor: str | None = None
        while len(found) < limit:
            params = {"q": search or "", "limit": min(RUNS_PAGE, limit - len(found))}
            params |= {k: v for k, v in (("project", project), ("status", status),
                                         ("cursor", cursor)) if v is not None}
            page = self.request("GET", "/api/runs", params)
            found += page["runs"]
            cursor = page.get("next_cursor")
            if not cursor:
                break
        return found[:limit]

    def detail(self, ref: str) -> dict[str, Any]:
        """The run detail, as `runs get -o json` shows it from a local index."""
        answer = self.request("GET", self._run_path(ref))
        detail = {k: v for k, v in answer.items() if k not in ("ok", "cursor")}
        # the API sends a non-finite value as null, as one not known: the results and the
        # tiles each name theirs (`non_finite`), which read NaN here, as from a local index
        for part in ("results", "scalars"):
            values = detail.get(part)
            if isinstance(values, dict):
                for name in values.get("non_finite") or ():
                    if name in values and values[name] is None:
                        values[name] = math.nan
        return detail

    def summary(self, run_id: str) -> dict[str, Any]:
        """The run's list fields (found by its id among GET /api/runs?q=<id>)."""
        page = self.request("GET", "/api/runs", {"q": run_id, "limit": RUNS_PAGE})
        for found in page["runs"]:
            if found["run_id"] == run_id:
                return dict(found)
        raise fail(f"run {run_id} is no longer on {self.url}")

    def reward_terms(self, run_id: str, first: int, last: int
                     ) -> dict[int, dict[str, dict[str, float]]]:
        """Each step of [first, last] whose rollouts report a reward term: per split, the
        mean of each term (store.reward_terms.step_terms), read a page at a time."""
        out: dict[int, dict[str, dict[str, float]]] = {}
        lo: int | None = first
        while lo is not None:
            answer = self.request("GET", self._run_path(run_id, "/reward-terms"),
                                  {"lo": lo, "hi": last, "limit": TERMS_PAGE})
            out.update((int(e["step"]), e["reward_terms"]) for e in answer["steps"])
            lo = answer["next_lo"]
        return out

    def events(self, run_id: str) -> list[dict[str, Any]]:
        """The run's lifecycle events oldest first, `ts` in Unix seconds as the index
        holds it (the API sends ISO 8601)."""
        from datetime import datetime

        answer = self.request("GET", self._run_path(run_id, "/events"))
        return [{**e, "ts": datetime.fromisoformat(e["ts"].replace("Z", "+00:00")).timestamp()
                 if e.get("ts") else e.get("ts")} for e in answer["events"]]

    def history(self, run_id: str, keys: list[str] | None, lo: int | None, hi: int | None
                ) -> list[StepRow]:
        """Every step of the run in [lo, hi] with its values (NaN where the server sent
        none: it sends NaN and infinities as null), as store.queries.history gives them."""
        from runwatch.store.queries import StepRow

        known = {k["key"]: k for k in
                 self.request("GET", self._run_path(run_id, "/metrics/keys"))["keys"]}
        if keys:
            missing = [k for k in keys if k not in known]
            if missing:
                raise fail(f"run has no metric {missing[0]!r}; it has: "
                           + ", ".join(sorted(known)[:30]))
        chosen = keys or sorted(known)
        by_step: dict[int, tuple[float, dict[str, float]]] = {}
        nan = float("nan")
        for name, step, ts, value in self._points(run_id, chosen, known, lo, hi):
            entry = by_step.setdefault(step, (ts, {}))
            if ts < entry[0]:
                entry = by_step[step] = (ts, entry[1])
            entry[1][name] = nan if value is None else value
        return [StepRow(step, by_step[step][0], by_step[step][1]) for step in sorted(by_step)]

    def _points(self, run_id: str, keys: list[str], known: dict[str, dict[str, Any]],
                lo: int | None, hi: int | None) -> Iterator[tuple[str, int, float, Any]]:
        """(key, step, ts, value) of every point of `keys` in [lo, hi]: each series read
        whole, a window halved while the server sends it downsampled."""
        pending = [(group, lo, hi) for group in _groups(keys, known)]
        while pending:
            group, a, b = pending.pop()
            params: dict[str, Any] = {"key": group, "points": SERIES_POINTS, "x": "time",
                                      "bands": "false"}
            params |= {k: v for k, v in (("lo", a), ("hi", b)) if v is not None}
            answer = self.request("GET", self._run_path(run_id, "/series"), params)
            partial = []
            for item in answer["series"]:
                if item["full"]:
                    yield from ((item["key"], int(step), ts, value) for step, ts, value
                                in zip(item["step"], item["time"], item["value"], strict=True))
                else:
                    partial.append(item["key"])
            if partial:
                edges = answer["edges"]
                first = int(edges["lo"]) if a is None else a
                last = int(edges["hi"]) if b is None else b
                mid = (first + last) // 2
                if mid >= last:  # cannot happen: one step holds one point per key
                    raise fail(f"{self.url} sent a series of run {run_id} downsampled over "
                               f"one step ({last})")
                pending += [(partial, first, mid), (partial, mid + 1, last)]

    def logs(self, ref: str, level: str | None, tail: int) -> list[dict[str, Any]]:
        """The last `tail` log entries from `level` up, oldest first."""
        newest_first: list[dict[str, Any]] = []
        cursor: str | None = None
        while len(newest_first) < tail:
            params = {"level": level or "", "limit": min(LOGS_PAGE, tail - len(newest_first))}
            if cursor:
                params["cursor"] = cursor
            page = self.request("GET", self._run_path(ref, "/logs"), params)
            newest_first += page["logs"]
            cursor = page.get("next_cursor")
            if not cursor:
                break
        return newest_first[:tail][::-1]

    def findings(self, run_id: str) -> list[dict[str, Any]]:
        """The run's findings, open and resolved (in the one finding shape)."""
        answer = self.request("GET", self._run_path(run_id, "/health"), {"resolved": "true"})
        found: list[dict[str, Any]] = answer["findings"]
        return found

    def rollouts(self, run_id: str, step: int | None, split: str | None, best: int | None,
                 worst: int | None, limit: int) -> dict[str, Any]:
        """One step's rollouts as store.rollouts gives them; where the run kept none at
        `step`: {"error": why, "available": the steps it kept}."""
        # the server answers at most SAMPLES_PAGE a request: more are read page by page
        # (the same order, by offset), as the local index would give them at once
        wanted = best if best is not None else worst if worst is not None else limit
        order = "best" if best is not None else "worst" if worst is not None else "limit"
        path = self._run_path(run_id, "/samples")
        found: dict[str, Any] = {}
        samples: list[dict[str, Any]] = []
        while len(samples) < wanted:
            page = min(SAMPLES_PAGE, wanted - len(samples))
            params = {k: v for k, v in (("step", step), ("split", split), (order, page),
                                        ("offset", len(samples) or None)) if v is not None}
            answer = self.request("GET", path, params, accept=(404,))
            if not answer.get("ok"):
                kept = self.request("GET", path, {"limit": 1})["available"]
                return {"error": str(answer.get("error", "")).split(";")[0], "available": kept}
            found = {k: v for k, v in answer.items() if k != "ok"}
            samples += found["samples"]
            # the same step from here on, even if a newer one was kept meanwhile
            step, split = found["step"], found["split"]
            if len(found["samples"]) < page or step is None:
                break
        return {**found, "samples": samples}

    def compare(self, run: str, baseline: str, window: int, margin: float,
                spike_factor: float, across_plans: bool) -> dict[str, Any]:
        """The comparison report (GET /api/compare); where the server would not compare
        them (plans that differ: 409, runs it cannot compare: 400): {"error": why,
        "differences": how the plans differ, if they do}."""
        params = {"run": run, "baseline": baseline, "window": window, "margin": margin,
                  "spike_factor": spike_factor, "across_plans": str(across_plans).lower()}
        answer = self.request("GET", "/api/compare", params, accept=(400, 409))
        if not answer.get("ok"):
            return {"error": answer.get("error", ""), "differences": answer.get("differences")}
        return {k: v for k, v in answer.items() if k != "ok"}

    def workers(self) -> dict[str, Any]:
        """Every worker and the queue's depth (GET /api/workers)."""
        return {k: v for k, v in self.request("GET", "/api/workers").items() if k != "ok"}

    def drain(self, worker: str) -> dict[str, Any]:
        """Drain a worker (POST /api/workers/ID/drain, which needs the server's token):
        its entry."""
        answer = self.request("POST", f"/api/workers/{quote(worker, safe='')}/drain")
        return dict(answer["worker"])

    def act(self, ref: str, verb: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """Cancel or retry a run (POST /api/runs/RUN/cancel|retry, with `body`): its new
        phase and list fields; a move its state does not allow exits 2 with the server's
        sentence."""
        answer = self.request("POST", self._run_path(ref, f"/{verb}"), body=body)
        return {"status": answer["status"], "next": answer.get("next"), "run": answer["run"]}


def _groups(keys: list[str], known: dict[str, dict[str, Any]]) -> list[list[str]]:
    """`keys` in groups of at most MAX_KEYS whose points add up to about
    POINTS_PER_REQUEST (a key with more is a group of its own)."""
    groups: list[list[str]] = []
    size = 0
    for key in keys:
        count = int(known[key].get("count") or 0)
        if not groups or len(groups[-1]) >= MAX_KEYS or size + count > POINTS_PER_REQUEST:
            groups.append([])
            size = 0
        groups[-1].append(key)
        size += count
    return groups
