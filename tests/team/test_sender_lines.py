"""The sender sends each record's line as `rundir.reader.read_new` read it (`keep_lines`),
not read from the file a second time nor encoded again: a bad line among them is skipped
alone and the others are stored, NaN included, on a real server over HTTP."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from runwatch.rundir import format as fmt
from runwatch.rundir.reader import read_new
from runwatch.sdk.sendhttp import Client
from runwatch.sdk.upload import sync_run
from runwatch.server.runner import Runner, free_port
from runwatch.server.settings import new_token
from tests.support import write_run
from tests.team.serving import stored

LINES = [b'{"seq":0,"step":0,"loss":NaN}', b"not json", b' {"seq": 1, "step": 1, "loss": 0.5} ',
         b'{"seq":2,"step":2,"loss":0.25}']


def test_read_new_hands_back_each_records_line_as_the_file_holds_it(tmp_path: Path) -> None:
    run = write_run(tmp_path, "r", [line.decode() for line in LINES], end='\n{"seq":3')
    res = read_new(run / fmt.METRICS, keep_lines=True)
    assert res.lines == [LINES[0], LINES[2], LINES[3]]  # the bad line and the torn one: not
    assert [r["seq"] for r in res.records] == [0, 1, 2]
    assert [b.line_no for b in res.bad] == [2]
    assert read_new(run / fmt.METRICS).lines == []  # only when asked for


def test_the_lines_around_a_bad_one_are_sent_as_written(tmp_path: Path, engine: Engine) -> None:
    run = write_run(tmp_path, "r", [line.decode() for line in LINES], run_id="lines-1")
    with Runner(engine, port=free_port(), token=new_token(), warm=False) as srv:
        client = Client(srv.url, srv.token)
        try:
            report = sync_run(run, client, retry_for=0)
        finally:
            client.close()
    assert report.records == {fmt.METRICS: 3}
    assert "line 2: not JSON" in report.problems[0]
    got = stored(engine, "lines-1")
    assert got is not None and got["points"]["loss"] == [(0, 0, None), (1, 1, 0.5), (2, 2, 0.25)]
