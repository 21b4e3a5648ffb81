"""Run data cannot drive the terminal: the CLI shows control characters and Rich markup
from run folders as text, in tables, plain lines and JSON alike."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import run_cli, write_manifest

OSC_LINK = "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\"
FIELDS = {
    "base_model": f"model {OSC_LINK}",
    "dataset": "data \x1b[2J\x1b[31mred\r\x07",
    "trainer": "trainer \x9b31m \u202egnp.exe",
    "project": "[link=http://evil.example]proj[/link]",
}


def _shown(out: str) -> None:
    # stdout is not a terminal here, so Rich adds no escape sequence of its own: any
    # control character in the output would have come from the run's data
    bad = [c for c in out if (ord(c) < 0x20 and c not in "\n") or 0x7f <= ord(c) <= 0x9f
           or c == "\u202e"]
    assert not bad, (bad, out)
    assert "\\x1b]8;;http://evil.example" in out and "\\x9b31m" in out and "\\u202e" in out


def test_tables_and_lines_escape_run_data(runs_dir: Path) -> None:
    write_manifest(runs_dir / "hostile", **FIELDS)
    out = run_cli("runs", "list", "-o", "wide", "--dir", str(runs_dir),
                  env={"COLUMNS": "400"}).stdout
    _shown(out)
    assert "[link=http://evil.example]proj[/link]" in out, "markup is shown, not applied"
    _shown(run_cli("runs", "get", "hostile", "--dir", str(runs_dir)).stdout)


def test_json_output_escapes_what_json_leaves_raw(runs_dir: Path) -> None:
    write_manifest(runs_dir / "hostile", **FIELDS)
    for args in (["-o", "json"], ["--jq", ".[0].trainer"]):
        out = run_cli("runs", "list", *args, "--dir", str(runs_dir)).stdout
        assert "\x9b" not in out and "\u202e" not in out and "\x1b" not in out
        assert FIELDS["trainer"] in json.dumps(json.loads(out.splitlines()[0]), ensure_ascii=False)
