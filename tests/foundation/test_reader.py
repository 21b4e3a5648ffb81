"""The incremental reader waits for torn lines and skips (and reports) malformed ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from runwatch.rundir.reader import read_new


def test_torn_last_line_is_waited_for(tmp_path: Path) -> None:
    p = tmp_path / "metrics.jsonl"
    p.write_bytes(b'{"seq":0,"step":0,"a":1}\n{"seq":1,"st')
    first = read_new(p)
    assert [r["seq"] for r in first.records] == [0]
    assert first.bad == [] and first.torn
    again = read_new(p, first.offset, first.line_no)
    assert again.records == [] and again.offset == first.offset
    with open(p, "ab") as f:
        f.write(b'ep":1,"a":NaN}\n')
    done = read_new(p, first.offset, first.line_no)
    assert [r["seq"] for r in done.records] == [1] and done.records[0]["a"] != done.records[0]["a"]
    assert done.bad == [] and not done.torn and done.line_no == 2


def test_malformed_lines_are_skipped_counted_and_nothing_after_is_lost(tmp_path: Path) -> None:
    p = tmp_path / "logs.jsonl"
    p.write_bytes(b'{"seq":0}\nnot json\n[1,2]\n{"no_seq":1}\n\n{"seq":"3"}\n{"seq":4}\n')
    res = read_new(p)
    assert [r["seq"] for r in res.records] == [0, 4]
    assert [(b.line_no, b.error.split(" (")[0]) for b in res.bad] == [
        (2, "not JSON"), (3, "not a JSON object"), (4, "no integer 'seq' field"),
        (6, "no integer 'seq' field")]
    assert res.records[1]["_line"] == 7


def test_reads_in_slices_and_resumes_from_offset(tmp_path: Path) -> None:
    p = tmp_path / "m.jsonl"
    p.write_bytes(b"".join(b'{"seq":%d}\n' % i for i in range(1000)))
    seen, offset, line_no = [], 0, 0
    for _ in range(1001):  # every slice reads a line at least, then one empty read
        res = read_new(p, offset, line_no, limit=100)
        seen += [r["seq"] for r in res.records]
        if res.offset == offset:
            break
        offset, line_no = res.offset, res.line_no
    else:
        pytest.fail(f"still reading after 1001 slices, at offset {offset}")
    assert seen == list(range(1000)) and line_no == 1000


def test_missing_and_shrunk_files(tmp_path: Path) -> None:
    p = tmp_path / "gone.jsonl"
    assert read_new(p).records == []
    p.write_bytes(b'{"seq":0}\n')
    res = read_new(p, 100, 5)
    assert res.records == [] and "shrank" in res.bad[0].error
