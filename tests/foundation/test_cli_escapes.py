"""Run data cannot drive the terminal: the CLI shows control characters and Rich markup
from run folders as text, in tables, plain lines and JSON alike.

Each command and output form runs once (a real subprocess costs about a second), against
one folder of hostile runs built once for the module."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import manifest, run_cli, write_manifest

OSC_LINK = "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\"
FIELDS = {
    "base_model": f"model {OSC_LINK}",
    "dataset": "data \x1b[2J\x1b[31mred\r\x07",
    "trainer": "trainer \x9b31m \u202egnp.exe",
    "project": "[link=http://evil.example]proj[/link]",
}


# A run whose own words (name, a phase's reason, a log line) hold escape and OSC
# sequences, DEL, C1 controls, a bidirectional override and Rich markup
HOSTILE = f"run {OSC_LINK} \x1b[2J\x7f\x9b31m\u202e [link=http://evil.example]x[/link]"
WIDE = {"COLUMNS": "1000"}  # no wrapping, so each shown value stays on one line


def _shown(out: str) -> None:
    # stdout is not a terminal here, so Rich adds no escape sequence of its own: any
    # control character in the output would have come from the run's data
    bad = [c for c in out if (ord(c) < 0x20 and c not in "\n") or 0x7f <= ord(c) <= 0x9f
           or c == "\u202e"]
    assert not bad, (bad, out)
    assert "\\x1b]8;;http://evil.example" in out and "\\x9b31m" in out and "\\u202e" in out


def test_tables_escape_run_data(hostile_runs: Path) -> None:
    out = run_cli("runs", "list", "-o", "wide", "--dir", str(hostile_runs), env=WIDE).stdout
    _shown(out)
    assert "[link=http://evil.example]proj[/link]" in out, "markup is shown, not applied"


@pytest.mark.parametrize("args", [["-o", "json"], ["--jq", '.[] | select(.run_id == "id-fields")']],
                         ids=["json", "jq"])
def test_json_output_escapes_what_json_leaves_raw(hostile_runs: Path, args: list[str]) -> None:
    out = run_cli("runs", "list", *args, "--dir", str(hostile_runs)).stdout
    assert "\x9b" not in out and "\u202e" not in out and "\x1b" not in out
    assert FIELDS["trainer"] in json.dumps(json.loads(out.splitlines()[0]), ensure_ascii=False)


def _shown_literally(out: str, link: str = "\\x1b]8;;http://evil.example",
                     markup: str = "[link=http://evil.example]x[/link]") -> None:
    """No control character reaches stdout, and each line that shows the hostile text
    (found by its escaped OSC 8 `link`) shows its Rich `markup` as written."""
    bad = [c for c in out if (ord(c) < 0x20 and c not in "\n") or 0x7f <= ord(c) <= 0x9f
           or c == "\u202e"]
    assert not bad, (bad, out)
    shown = [ln for ln in out.splitlines() if link in ln]
    assert shown and all(markup in ln for ln in shown), f"markup is shown, not applied: {out}"


@pytest.fixture(scope="module")
def hostile_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of two runs: `fields`, whose manifest fields hold FIELDS, and `hostile`
    (id `id-hostile`), whose name, failure reason and a log line hold HOSTILE."""
    runs = tmp_path_factory.mktemp("hostile") / "runs"
    write_manifest(runs / "fields", **FIELDS)
    run = runs / "hostile"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps(manifest("hostile") | {"name": HOSTILE}),
                                       encoding="utf-8")
    events = [{"ts": 1.0, "seq": 0, "phase": "RUNNING"},
              {"ts": 2.0, "seq": 1, "phase": "FAILED", "reason": HOSTILE}]
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events),
                                      encoding="utf-8")
    log = {"ts": 1.5, "seq": 0, "level": "error", "message": HOSTILE, "data": {"x": HOSTILE}}
    (run / "logs.jsonl").write_text(json.dumps(log) + "\n", encoding="utf-8")
    return runs


# One of each way the commands print: `get` plain lines, `wait` phase lines, `logs -o wide`
# a table with the log's data
@pytest.mark.parametrize("args", [["get"], ["wait"], ["logs", "-o", "wide"]], ids=" ".join)
def test_a_runs_own_words_are_shown_literally(hostile_runs: Path, args: list[str]) -> None:
    out = run_cli("runs", args[0], "id-hostile", *args[1:], "--dir", str(hostile_runs),
                  env=WIDE).stdout
    _shown_literally(out)


@pytest.mark.parametrize("command", ["health", "rollouts"])
def test_a_folder_run_is_named_by_its_folder_not_its_manifest(hostile_runs: Path,
                                                              command: str) -> None:
    # `health` and `rollouts` print the run's name alone: a run of a folder is named by its
    # folder (letters, digits, '.', '_', '-'), so the manifest's hostile name never shows
    out = run_cli("runs", command, "id-hostile", "--dir", str(hostile_runs), env=WIDE).stdout
    assert "hostile" in out and "evil.example" not in out, out


def test_a_runs_own_words_in_json_lines_are_escaped(hostile_runs: Path) -> None:
    # `wait -o json` writes each event and then the run's detail as JSON lines itself; the
    # other commands' JSON goes through the one printer `runs list -o json` checks above
    out = run_cli("runs", "wait", "id-hostile", "-o", "json", "--dir", str(hostile_runs)).stdout
    assert not [c for c in out if c in "\x1b\x7f\x9b\u202e"], out
    parsed = [json.loads(x) for x in out.splitlines()]
    assert HOSTILE in _strings(parsed[:-1]) and HOSTILE in _strings(parsed[-1]), out


def _strings(value: object) -> list[str]:
    """Every string inside a parsed JSON value."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def test_import_shows_a_source_path_literally(tmp_path: Path, runs_dir: Path) -> None:
    # a file name holds no slash: an OSC 8 link without a URL, markup without a closing tag
    source = tmp_path / "m \x1b]8;;evil\x1b\\click\x1b]8;;\x1b\\ \x7f [reverse]x.jsonl"
    source.write_text('{"step": 0, "loss": 1.0}\n{"step": 1, "loss": 0.5}\n', encoding="utf-8")
    out = run_cli("import", str(source), "--name", "imported", "--dir", str(runs_dir),
                  env=WIDE).stdout
    _shown_literally(out, "\\x1b]8;;evil", "[reverse]x")
    assert "\\x7f" in out, out
