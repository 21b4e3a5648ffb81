"""What a team server's URL is to each client of it: `runwatch runs … --server` (cli/remote)
and the sender (`runwatch sync`, runwatch.init(server=…): sdk/sender, sdk/sendhttp) take
its scheme in any case, as URLs do (`HTTP://` is http, `HTTPS://` is https), and verify the
certificate of every https server, whichever case the scheme is written in. One function
says so for all of them (sendhttp.url_scheme).

A real TLS server with a self-signed certificate (made by the openssl command) stands for
a server whose certificate is not trusted: a client that verifies refuses it; the same
server read with its certificate trusted answers, so the refusal is the verification's."""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner, Result

from runwatch.cli.main import app
from runwatch.sdk.sendhttp import Client, Unreachable, url_scheme
from runwatch.server.runner import Runner, free_port
from tests.support import sdk_run

BOOT = "bootstrap-token-server-url"
NOT_VERIFIED = "CERTIFICATE_VERIFY_FAILED"


class _Answer(BaseHTTPRequestHandler):
    """Any request: 200 with a runwatch-looking JSON body (a client that did not verify
    the certificate would take it)."""

    def _answer(self) -> None:
        body = json.dumps({"ok": True, "runs": [], "results": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A loopback HTTPS server whose certificate nobody trusts: (port, its certificate)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=120)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], cert
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "120", "RUNWATCH_SERVER": "",
                                                     "RUNWATCH_TOKEN": ""})


@pytest.mark.parametrize(("url", "scheme"), [
    ("http://h:1", "http"), ("https://h", "https"), ("HTTPS://h", "https"),
    ("HtTp://h/x", "http"), ("ftp://h", None), ("https:/h", None), ("h:8765", None),
    ("", None)])
def test_url_scheme_reads_the_scheme_in_any_case(url: str, scheme: str | None) -> None:
    assert url_scheme(url) == scheme


@pytest.mark.parametrize("written", ["https", "HTTPS", "Https"])
def test_every_client_verifies_an_https_server_whatever_the_scheme_s_case(
        tls_server: tuple[int, Path], written: str, runs_dir: Path) -> None:
    port, cert = tls_server
    url = f"{written}://127.0.0.1:{port}"
    trusted = httpx.get(f"https://127.0.0.1:{port}/api/runs",
                        verify=ssl.create_default_context(cafile=str(cert)), timeout=30)
    assert trusted.status_code == 200, "the server answers whoever trusts its certificate"

    res = cli("runs", "list", "--server", url, "--token", "rw_x")
    assert res.exit_code == 2, res.output
    assert NOT_VERIFIED in res.stderr and "cannot reach the runwatch server" in res.stderr, \
        res.stderr

    client = Client(url, "rw_x", timeout=30)
    try:
        with pytest.raises(Unreachable, match=NOT_VERIFIED):
            client.post(b"{}")
    finally:
        client.close()

    sdk_run(runs_dir, "to-send", steps=2)
    res = cli("sync", str(runs_dir), "--server", url, "--token", "rw_x", "--retry-for", "0")
    assert res.exit_code == 1, res.output
    assert NOT_VERIFIED in res.stderr and "were not sent" in res.stderr, res.stderr


def test_the_cli_reads_a_server_whose_scheme_is_upper_case(engine: Engine, runs_dir: Path
                                                           ) -> None:
    sdk_run(runs_dir, "upper-case-scheme", steps=3, metrics=lambda i: {"loss": 1.0 / (i + 1)})
    with Runner(engine, runs_dir=runs_dir, port=free_port(), token=BOOT, interval=0.05,
                prewarm=False, warm=False) as srv:
        upper = srv.url.replace("http://", "HTTP://")
        names = [cli("runs", "list", "--server", url, "--token", BOOT, "--jq", ".[].name",
                     "-r") for url in (srv.url, upper)]
    assert [r.exit_code for r in names] == [0, 0], [r.output for r in names]
    assert names[0].stdout == names[1].stdout
    assert "upper-case-scheme" in names[1].stdout
    res = cli("runs", "list", "--server", "ftp://127.0.0.1:1")
    assert res.exit_code == 2 and "is not an http:// or https:// URL" in res.stderr, res.output
