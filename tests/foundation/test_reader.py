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


def test_a_read_holds_the_records_at_its_end_it_is_asked_to_hold(tmp_path: Path) -> None:
    """`hold` (the indexer's, for the events that end a run): the records at the end of the
    read it holds are left unread, with the bad lines after them; the read ends where the
    first of them starts (a lone carriage return ends a line too), and goes on from there."""
    p = tmp_path / "events.jsonl"
    p.write_bytes(b'{"seq":0,"e":0}\n\nbad\n{"seq":1,"e":1}\r{"seq":2,"e":1}\nworse\n'
                  b'{"seq":3,"e":1}\n')
    ends = lambda rec: rec["e"] == 1  # noqa: E731
    res = read_new(p, hold=ends)
    assert [r["seq"] for r in res.records] == [0] and res.held
    assert [b.line_no for b in res.bad] == [3]
    assert (res.offset, res.line_no) == (len(b'{"seq":0,"e":0}\n\nbad\n'), 3)
    rest = read_new(p, res.offset, res.line_no)
    assert [(r["seq"], r["_line"]) for r in rest.records] == [(1, 4), (2, 5), (3, 7)]
    assert [b.line_no for b in rest.bad] == [6] and not rest.held
    # every record of the read held: nothing read (nor the bad line between), and it says so
    again = read_new(p, res.offset, res.line_no, hold=ends)
    assert (again.records, again.bad, again.offset, again.held) == ([], [], res.offset, True)
    # a record not held after them: nothing is held
    with open(p, "ab") as f:
        f.write(b'{"seq":4,"e":0}\n')
    assert not read_new(p, res.offset, res.line_no, hold=ends).held
