"""The sender's HTTP side: one server's `POST /api/ingest` and `GET /api/ingest?run=`
(`Client`), what their answers mean (`check_answer`, `check_refusal`) and the errors the
sender sorts them into:
`Unreachable` (try again later), `Refused` (trying again cannot help); and `url_scheme` and
`bearer_token`, what every client of a team server (the sender, the CLI's `--server`) takes
a URL and a token to be.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENV_TOKEN = "RUNWATCH_TOKEN"
TIMEOUT_S = 30.0
_GZIP_LEVEL = 1  # the sender runs beside training: cheap compression, still ~10x on JSONL


class SendError(Exception):
    """The server did not store a request; the message says what to do."""


class Unreachable(SendError):
    """No answer, or one that says to try again later (5xx, 429): nothing was lost.
    `status` is the answer's, where there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Refused(SendError):
    """An answer that trying again cannot change (a wrong token, a refused manifest)."""


class RunRefused(Refused):
    """A refusal of one run (its manifest, or a token without write on its project), not of
    every request: a sender of several runs goes on with the others."""


class InFolder(RunRefused):
    """The server records the run from a runs folder it indexes (the run's own folder, seen
    by the server): it holds the run already, and nothing needs sending."""


class NoRun(Refused):
    """The folder holds no manifest.json: it is no run (or, under the SDK, it was removed
    and the writer has not made it again yet)."""


@dataclass
class Held:
    """What a server holds of a run (`GET /api/ingest?run=`): per record file the highest
    seq stored (None: none), the whole files stored, the manifest (None: the run is not
    held at all), and the sha256 each whole file was stored with (a file stored before
    the server kept them has none; None: a server that does not say)."""

    last_seq: dict[str, int | None] = field(default_factory=dict)
    whole_files: frozenset[str] = frozenset()
    manifest: dict[str, Any] | None = None
    whole_sha256: dict[str, str] | None = None


@dataclass
class UploadReport:
    """What one upload pass sent: records stored per file, records skipped and why."""

    records: dict[str, int] = field(default_factory=dict)
    files: int = 0  # whole files stored (a changed one again)
    skipped: int = 0
    problems: list[str] = field(default_factory=list)
    requests: int = 0
    body_bytes: int = 0


class Client:
    """HTTP to one server: bearer token, gzip bodies (plain for a server that takes none)."""

    def __init__(self, server: str, token: str | None = None, timeout: float = TIMEOUT_S):
        import httpx  # here: a run that sends nothing never imports it

        self.server = server
        self.gzip = True
        headers = {"Content-Type": "application/json", "User-Agent": "runwatch-sender"}
        token = bearer_token(token, "the token (--token, or RUNWATCH_TOKEN)")
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._httpx = httpx
        # no TLS context for plain http: making one (system CAs and certifi) cost 0.2-0.4 s
        self._http = httpx.Client(base_url=server, headers=headers, timeout=timeout,
                                  verify=url_scheme(server) == "https")

    def post(self, body: bytes) -> tuple[int, Any]:
        """POST a JSON body to /api/ingest: (status, parsed answer). Raises Unreachable
        when no answer came."""
        while True:
            zipped = self.gzip
            data = gzip.compress(body, _GZIP_LEVEL, mtime=0) if zipped else body
            headers = {"Content-Encoding": "gzip"} if zipped else {}
            resp = self._send(data, headers)
            try:
                answer = resp.json()
            except ValueError:
                answer = None
            said = error_text(answer)
            if zipped and (resp.status_code == 415 or (
                    resp.status_code == 400 and "not JSON" in said)):
                self.gzip = False  # a server from before gzip bodies: send them plain
                continue
            return resp.status_code, answer

    def held(self, run_dir: Path, run_id: str) -> Held | None:
        """What the server holds of run `run_id` (of folder `run_dir`); None from a server
        that cannot say (one from before `GET /api/ingest`, which answers 405). Raises
        Unreachable, Refused (a refused token) or InFolder (the server records the run from
        its own runs folder)."""
        try:
            try:
                resp = self._http.get("/api/ingest", params={"run": run_id})
            except closed_under(self._httpx):  # a read: asked again at once
                resp = self._http.get("/api/ingest", params={"run": run_id})
        except self._httpx.HTTPError as exc:
            raise Unreachable(f"cannot reach {self.server} ({type(exc).__name__}: "
                              f"{exc or 'no answer'})") from None
        try:
            answer = resp.json()
        except ValueError:
            answer = None
        if resp.status_code == 405:
            return None
        if resp.status_code == 404 and isinstance(answer, dict) and "error" in answer:
            return Held()  # a run the server does not hold (or the token may not see)
        check_answer(self, resp.status_code, answer)
        if resp.status_code != 200 or not isinstance(answer, dict) \
                or not isinstance(answer.get("last_seq"), dict):
            raise Refused(f"{self.server} answered GET /api/ingest with {resp.status_code} "
                          "and no runwatch JSON; is it a runwatch server?")
        if answer.get("folder"):
            check_refusal(self, run_dir, {"status": 409, "code": "folder_run",
                                          "error": "the server records it from a runs folder"})
        manifest = answer.get("manifest")
        hashes = answer.get("whole_file_hashes")
        return Held({name: seq for name, seq in answer["last_seq"].items()
                     if isinstance(seq, int) or seq is None},
                    frozenset(str(name) for name in answer.get("whole_files") or ()),
                    manifest if isinstance(manifest, dict) else None,
                    {str(name): held["sha256"] for name, held in hashes.items()
                     if isinstance(held, dict) and isinstance(held.get("sha256"), str)}
                    if isinstance(hashes, dict) else None)

    def _send(self, data: bytes, headers: dict[str, str]) -> Any:
        """One POST, sent again at once, on a new connection, when the connection it went
        out on was closed under it: a kept-alive connection the server (or a proxy) closed
        as the request was sent is not an outage, and the server stores a request it
        already took only once (its records are idempotent on run, file and seq)."""
        try:
            try:
                return self._http.post("/api/ingest", content=data, headers=headers)
            except closed_under(self._httpx):
                return self._http.post("/api/ingest", content=data, headers=headers)
        except self._httpx.HTTPError as exc:
            raise Unreachable(f"cannot reach {self.server} ({type(exc).__name__}: "
                              f"{exc or 'no answer'})") from None

    def close(self) -> None:
        self._http.close()


def bearer_token(token: str | None, given: str) -> str | None:
    """The token a client of a team server sends (None for none), as every client (the
    SDK's sender, `runwatch sync`, the CLI's `--server`) takes it. ValueError, naming where
    it came from (`given`), for a value no server hands out: one with a line break, a space
    or a character beyond ASCII (`TOKEN=$(runwatch tokens create …)` of an older runwatch
    caught its notes too), which no HTTP header can carry."""
    if not token:
        return None
    bad = next((c for c in token if not (c.isascii() and c.isprintable()) or c.isspace()),
               None)
    if bad is None:
        return token
    what = {"\n": "a line break", "\r": "a line break", " ": "a space",
            "\t": "a tab"}.get(bad, f"the character {bad!r}")
    raise ValueError(f"{given} is not one token: it holds {what}; set it to the token alone, "
                     "the rw_… line `runwatch tokens create` printed (ASCII letters, digits "
                     "and punctuation, no spaces)")


def url_scheme(url: str) -> str | None:
    """"http" or "https" for a URL of a team server, its scheme written in any case (a
    scheme is case-insensitive: HTTPS://host is https, and verified); None for any other
    URL. Every client of a server decides with this alone whether it may use a URL and
    whether it verifies the server's certificate."""
    scheme, sep, _ = url.partition("://")
    scheme = scheme.lower()
    return scheme if sep and scheme in ("http", "https") else None


def closed_under(httpx: Any) -> tuple[type[Exception], ...]:
    """httpx's errors for a request whose kept-alive connection was closed as it went out
    (the peer closed an idle connection at about the moment the pool reused it): a read may
    be asked again at once on a new connection, a write only where it is idempotent."""
    return (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)


def error_text(answer: Any) -> str:
    if isinstance(answer, dict):
        return str(answer.get("error") or answer.get("detail") or "")
    return ""


def check_answer(client: Client, status: int, answer: Any) -> None:
    """Raise for an answer that is about the whole request, not its batches."""
    said = error_text(answer)
    if status in (401, 403):
        # a token the server does not know (401) is refused for every run; one without
        # write on this run's project (403) for this run, not for a run of another project
        kind = Refused if status == 401 else RunRefused
        raise kind(f"{client.server} refused the request ({status}: {said or 'no reason'}); "
                   f"check the token (--token, or {ENV_TOKEN}): it needs write on the run's "
                   "project")
    if status == 429 or status >= 500:
        raise Unreachable(f"{client.server} answered {status} ({said or 'no reason'})",
                          status)
    if status != 200 and not (isinstance(answer, dict) and isinstance(answer.get("results"),
                                                                       list)):
        if status == 404:
            raise Refused(f"{client.server} has no /api/ingest: is it a runwatch server? "
                          "pass the base URL `runwatch server` printed")
        raise Refused(f"{client.server} refused the request ({status}: {said or 'no reason'})")


def check_refusal(client: Client, run_dir: Path, result: dict[str, Any]) -> None:
    """Raise Refused for a batch's refusal that is about the run, not the batch: a
    token without write on it (another project's, or read only), or its manifest."""
    status, error = result.get("status"), result.get("error")
    if status in (401, 403):
        raise RunRefused(f"{client.server} refused {run_dir.name} ({status}: {error}); check "
                         f"the token (--token, or {ENV_TOKEN}): it needs write on the run's "
                         "project")
    if status == 409:  # the run conflicts with one the server holds: its name, its folder
        kind = InFolder if result.get("code") == "folder_run" else RunRefused
        raise kind(f"{client.server} refused {run_dir.name} ({status}: {error})")
    if status in (400, 413) and "manifest" in str(error):
        raise RunRefused(f"{client.server} refused the manifest of {run_dir}: {error}")
