"""Whole or refused: a report cut short never loads as fewer kernels without a word (issue 17,
item 1). Each format's own framing tells a whole file from a cut one: .ncu-rep's length-prefixed
blocks, the xz stream check and index, the SQLite header's page count, the CUPTI trace's end
record. Where a format cannot tell (a .ncu-rep cut exactly between two launches, a version 1
CUPTI trace cut at a line end), the load says so on its own line.

All on real reports: H100 and H200 captures under tests/data/ and profiles/.
"""
import io
import json
import lzma
import shutil
import struct

import pytest
from click.testing import CliRunner
from dbcheck import dump
from profdata import DATA, KNOWN_CUPTI, KNOWN_NSYS, ROOT
from profkit.parsers import _ncu_framing

from profkit.cli import cli

WS = DATA / "field-h100" / "ws_nonvtx.ncu-rep.xz"  # our H100 capture: 40 launches, 53 MB raw, ncu 2025.3


def run(*args):
    r = CliRunner().invoke(cli, [str(a) for a in args])
    assert "Traceback" not in r.output, r.output
    return r


@pytest.fixture(scope="module")
def ws_raw():
    return lzma.decompress(WS.read_bytes())


@pytest.mark.parametrize("cut", [0.95, 0.97, 0.98, 0.99, -1])
def test_cut_ncu_rep_is_refused(cut, ws_raw, tmp_path, db):
    """The issue's cuts: 95 % to one byte short loaded 8 / 49 / 77 / 105 / 132 kernels with exit 0."""
    n = len(ws_raw) - 1 if cut == -1 else int(len(ws_raw) * cut)
    bad = tmp_path / "cut.ncu-rep"
    bad.write_bytes(ws_raw[:n])
    assert run("ingest", "--db", db, KNOWN_CUPTI, "--run", "before").exit_code == 0
    before = dump(db)
    r = run("ingest", "--db", db, bad)
    assert r.exit_code == 2 and r.output.startswith(f"profkit: {bad}: truncated: ") and r.output.count("\n") == 1, r.output
    assert dump(db) == before


def test_cut_report_recompressed_as_xz_is_refused(ws_raw, tmp_path, db):
    """A cut report inside a valid xz stream: the xz check passes, the report's framing does not."""
    bad = tmp_path / "cut.ncu-rep.xz"
    bad.write_bytes(lzma.compress(ws_raw[:-1], preset=0))
    r = run("ingest", "--db", db, bad)
    assert r.exit_code == 2 and "truncated" in r.output and "(inside the .xz)" in r.output, r.output


@pytest.mark.parametrize("keep", [0.5, 0.9, 0.999])
def test_cut_xz_stream_is_refused(keep, tmp_path, db):
    data = WS.read_bytes()
    bad = tmp_path / "cut.ncu-rep.xz"
    bad.write_bytes(data[:int(len(data) * keep)])
    r = run("ingest", "--db", db, bad)
    assert r.exit_code == 2 and "broken xz stream" in r.output, r.output


def _blocks(data: bytes) -> list[tuple[int, str]]:
    """(end offset, what) of each block of a whole report: 'launch', 'module', 'fact N', 'header'."""
    off = 4 + 4 + struct.unpack_from("<I", data, 4)[0]  # after the version frame
    out = []
    while off < len(data):
        n = struct.unpack_from("<I", data, off)[0]
        h = _ncu_framing.header_fields(data[off + 4:off + 4 + n])
        end = off + 4 + n
        if h.get(5):
            end += 4 + struct.unpack_from("<I", data, end)[0]
        what = {(0, 1): "launch", (1, 0): "module"}.get((h.get(1, 0), h.get(2, 0))) if h.get(5) else None
        out.append((end, what or (f"fact {h['fact']}" if "fact" in h else "header")))
        off = end
    return out


@pytest.fixture
def occ(data_set):
    """An H200 capture of the lab's occupancy kernel (tests/data/lean-parity): 3 launches, 86 KB raw."""
    return data_set("lean-parity") / "occupancy-lean.ncu-rep.xz"


def test_every_cut_of_a_real_report_is_seen_except_between_launches(occ):
    """Every one of the 86,239 prefixes of a real report (3 launches): the framing refuses it,
    unless it ends exactly after a whole launch, or after the session facts that follow the first
    launch (what no framing can see: no launch count, no end marker), or before any launch
    (then the parser refuses it: no profiled kernel)."""
    data = lzma.decompress(occ.read_bytes())
    f = io.BytesIO(data)
    assert _ncu_framing.check_stream(f, len(data)) is None
    unseen = []
    for n in range(len(data)):
        f.seek(0)
        if _ncu_framing.check_stream(f, n) is None:
            unseen.append(n)
    blocks = _blocks(data)
    first_launch = next(end for end, what in blocks if what == "launch")
    # after a whole launch but the first; after the host fact, and the install folder ncu 2022.3+
    # writes after it (neither holds launch data)
    between = [end for end, what in blocks[:-1] if what == "launch" and end > first_launch] + \
              [end for end, what in blocks if what in ("fact 4", "fact 11")]
    before_any = [n for n in unseen if n < first_launch]
    assert sorted(set(unseen) - set(before_any)) == sorted(between) and len(between) == 3, (unseen, blocks)
    assert len(unseen) <= 5  # of 86,239 cut positions


def test_cut_between_launches_loads_with_a_caveat(tmp_path, db, occ):
    """What framing cannot see is said: the load prints a note (and names what it is)."""
    data = lzma.decompress(occ.read_bytes())
    cut = [end for end, what in _blocks(data) if what == "launch"][1]  # after the 2nd of 3 launches
    part = tmp_path / "part.ncu-rep"
    part.write_bytes(data[:cut])
    r = run("ingest", "--db", db, part)
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert "2 kernels" in lines[0] and lines[1] == f"  note: {_ncu_framing.CAVEAT}"


def test_whole_reports_of_every_ncu_version_pass_the_framing_check(tmp_path, data_set):
    """ncu 2025.3 (our H100 and H200 captures, the packed sets' too) here; 2020.3 to 2025.x from
    the public reports beside the project (../shared/field-reports, ../field-extra) when they are
    on this machine."""
    seen = 0
    packed = [*data_set("hotspots").glob("*.ncu-rep.xz"), *data_set("lean-parity").glob("*.ncu-rep.xz")]
    ours = [*(ROOT / "profiles").glob("*/*.ncu-rep.xz"), *DATA.glob("*/*.ncu-rep.xz"), *packed]
    for xz in sorted(ours):
        raw = tmp_path / "r.ncu-rep"
        raw.write_bytes(lzma.decompress(xz.read_bytes()))
        assert _ncu_framing.check(raw) is None, xz
        seen += 1
    for field in (ROOT.parent / "shared" / "field-reports", ROOT.parent / "field-extra"):  # ncu 2020.3 to 2025.x
        for rep in sorted(field.glob("*/*.ncu-rep")):
            assert _ncu_framing.check(rep) is None, rep
            seen += 1
    assert seen >= 25


# --- decompression bombs -------------------------------------------------------------------------

def _bomb(path, mb: int):
    c = lzma.LZMACompressor(preset=0)
    with open(path, "wb") as f:
        for _ in range(mb):
            f.write(c.compress(bytes(1 << 20)))
        f.write(c.flush())


def test_decompression_bomb_is_refused_before_writing(tmp_path, db, monkeypatch):
    """A 16 KB .xz that unpacks to 128 MB (ratio ~7000, like the issue's 1.5 MB -> 10.7 GB): refused
    from its xz index, before one byte is unpacked."""
    bomb = tmp_path / "bomb.ncu-rep.xz"
    _bomb(bomb, 128)
    assert bomb.stat().st_size < 64 << 10
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr("tempfile.tempdir", None)
    r = run("ingest", "--db", db, bomb)
    assert r.exit_code == 2 and "unpacks to 134.2 MB (its xz index says so)" in r.output, r.output
    assert "xz -dk" in r.output and r.output.count("\n") == 1
    assert [p for p in scratch.rglob("*") if p.is_file()] == []


def test_unpacking_stops_at_the_free_disk_space(tmp_path, db, monkeypatch):
    """A small TMPDIR: the report's own size is over the room left there; one line names it."""
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr("profkit.core.unpack.shutil.disk_usage", lambda p: usage(60 << 20, 30 << 20, 30 << 20))
    r = run("ingest", "--db", db, WS)
    assert r.exit_code == 2 and "unpacks to 53.2 MB" in r.output and "free" in r.output, r.output


def test_xz_index_size_matches_real_files_and_concatenated_streams(tmp_path):
    from profkit.core.unpack import xz_size

    assert xz_size(WS) == 53225856
    two = tmp_path / "two.xz"
    two.write_bytes(lzma.compress(b"a" * 1000) + b"\0" * 8 + lzma.compress(b"b" * 500))  # padding between
    assert xz_size(two) == 1500
    from profkit.core.unpack import unxz

    assert unxz(two, tmp_path / "out") == 1500 and (tmp_path / "out").read_bytes() == b"a" * 1000 + b"b" * 500
    junk = tmp_path / "junk.xz"
    junk.write_bytes(two.read_bytes() + b"junk")  # (lzma.open would ignore it)
    with pytest.raises(Exception, match="broken xz stream"):
        unxz(junk, tmp_path / "out2")


# --- CUPTI trace (profkit's own format) -----------------------------------------------------------

def _v2(tmp_path):
    """The real trace as the tracer writes it now (version 2: with its end record)."""
    from profkit.capture.cupti_tracer import write_trace

    recs = [json.loads(x) for x in KNOWN_CUPTI.read_text().splitlines()]
    out = tmp_path / "v2.cupti.jsonl"
    write_trace(str(out), recs[0], recs[1:])
    return out


def test_cupti_trace_v2_whole_loads_cut_at_any_line_is_refused(tmp_path, db):
    v2 = _v2(tmp_path)
    lines = v2.read_text().splitlines(keepends=True)
    assert json.loads(lines[-1]) == {"type": "end", "records": len(lines) - 2, "kernels": 166}
    r = run("ingest", "--db", db, v2)
    assert r.exit_code == 0 and "166 kernels" in r.output and "note" not in r.output, r.output
    for keep in (1, 2, len(lines) // 3, len(lines) - 2, len(lines) - 1):
        cut = tmp_path / f"cut{keep}.cupti.jsonl"
        cut.write_text("".join(lines[:keep]))
        r = run("ingest", "--db", db, cut)
        assert r.exit_code == 2 and "truncated" in r.output, (keep, r.output)
    mid = tmp_path / "mid.cupti.jsonl"
    mid.write_text("".join(lines)[:-5])  # inside the end record
    assert "truncated" in run("ingest", "--db", db, mid).output
    dropped = tmp_path / "dropped.cupti.jsonl"
    dropped.write_text("".join(lines[:100] + lines[101:]))  # a record lost in the middle
    r = run("ingest", "--db", db, dropped)
    assert r.exit_code == 2 and "records lost or added" in r.output, r.output


def test_cupti_trace_v1_loads_with_a_caveat(tmp_path, db):
    """Traces written before the end record (tests/data, users' disks) still load, and say what
    cannot be checked; cut inside a line they are refused."""
    r = run("ingest", "--db", db, KNOWN_CUPTI)
    assert r.exit_code == 0 and "note: a version 1 trace" in r.output, r.output
    text = KNOWN_CUPTI.read_text()
    cut = tmp_path / "cut.cupti.jsonl"
    cut.write_text(text[: len(text) // 2])
    r = run("ingest", "--db", db, cut)
    assert r.exit_code == 2 and "truncated" in r.output, r.output


# --- nsys SQLite export ----------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["page", "mid-page", "header"])
def test_cut_sqlite_export_is_refused(where, tmp_path, db):
    data = KNOWN_NSYS.read_bytes()
    n = {"page": len(data) // 2 // 4096 * 4096, "mid-page": len(data) // 2 + 123, "header": 60}[where]
    bad = tmp_path / "cut.nsys.sqlite"
    bad.write_bytes(data[:n])
    r = run("ingest", "--db", db, bad)
    assert r.exit_code == 2 and "truncated" in r.output and r.output.count("\n") == 1, r.output


def test_every_page_boundary_cut_of_an_export_is_seen(tmp_path):
    from profkit.core.dbfile import check_whole

    data = KNOWN_NSYS.read_bytes()
    p = tmp_path / "x.sqlite"
    for n in range(4096, len(data), 4096):
        p.write_bytes(data[:n])
        assert check_whole(p), n
    shutil.copy(KNOWN_NSYS, p)
    assert check_whole(p) is None


# --- ncu CSV pages ---------------------------------------------------------------------------------

def test_csv_cut_inside_a_row_is_refused_at_a_row_end_loads_with_a_caveat(tmp_path, db):
    """A CSV page has no row count or end marker: a cut exactly after a row cannot be seen and
    the load says so; a cut inside the last row (its last value cut short, the row still the
    right width) is refused: ncu ends every row with a line end."""
    from profdata import KNOWN_CSV_LEAN

    text = KNOWN_CSV_LEAN.read_bytes()
    lines = text.splitlines(keepends=True)
    at_row = tmp_path / "rows.raw.csv"
    at_row.write_bytes(b"".join(lines[:12]))  # names, units and 10 launches
    r = run("ingest", "--db", db, at_row)
    assert r.exit_code == 0 and "10 kernels" in r.output and "note: a CSV page records no row count" in r.output
    inside = tmp_path / "inside.raw.csv"
    inside.write_bytes(b"".join(lines[:12])[:-3])  # the last value loses its last digits and quote
    r = run("ingest", "--db", db, inside)
    assert r.exit_code == 2 and "truncated" in r.output, r.output
    # only the final line end missing (an editor or a copy dropped it; a public details page
    # has none): the last value closes its quote and every column is there, so the row is whole
    no_end = tmp_path / "noend.raw.csv"
    no_end.write_bytes(b"".join(lines[:12]).rstrip(b"\r\n"))
    r = run("ingest", "--db", db, no_end)
    assert r.exit_code == 0 and "10 kernels" in r.output, r.output
    # ...but a cut right after a closing quote before the last column leaves the row short
    last = lines[11]
    short = tmp_path / "short.raw.csv"
    short.write_bytes(b"".join(lines[:11]) + last[:last.rindex(b'","') + 1])
    r = run("ingest", "--db", db, short)
    assert r.exit_code == 2 and "truncated" in r.output, r.output


def test_details_page_cut_inside_the_last_launch_is_refused(tmp_path, db):
    """The details page prints each launch's section rows: every launch of a real export has as
    many metric rows (40 launches x 34 rows here), so a last launch with fewer was cut."""
    text = (DATA / "field-h100" / "ws_nonvtx.details.csv").read_bytes()
    lines = text.splitlines(keepends=True)
    inside = tmp_path / "inside.details.csv"
    inside.write_bytes(b"".join(lines[:-10]))  # the last launch loses 10 of its rows, at row ends
    r = run("ingest", "--db", db, inside)
    assert r.exit_code == 2 and "truncated: the last launch (ID 39) has 24 metric rows, every other at least 34" in r.output, \
        r.output
    between = tmp_path / "between.details.csv"
    between.write_bytes(b"".join(lines[:-34]))  # exactly one whole launch less: cannot be seen
    r = run("ingest", "--db", db, between)
    assert r.exit_code == 0 and "39 kernels" in r.output and "note: a CSV page records no row count" in r.output, r.output


def test_kineto_trace_cut_or_bomb_is_refused(tmp_path, db):
    """A torch.profiler trace is one JSON document: any cut is refused (at an event's end too);
    a .json.gz that unpacks past 1000x its size stops with one line."""
    import gzip

    raw = gzip.decompress((DATA / "field-h100" / "ws2.kineto.json.gz").read_bytes())
    end = raw.rindex(b"}", 0, len(raw) // 2) + 1  # right after a whole event
    for name, data in (("cut.json", raw[:end]), ("cut.json.gz", gzip.compress(raw[:end])),
                       ("cut2.json.gz", (DATA / "field-h100" / "ws2.kineto.json.gz").read_bytes()[:-9])):
        p = tmp_path / name
        p.write_bytes(data)
        r = run("ingest", "--db", db, p)
        assert r.exit_code == 2 and "truncated" in r.output, (name, r.output)
    bomb = tmp_path / "bomb.pt.trace.json.gz"
    bomb.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * (100 << 20) + b"]}"))
    r = run("ingest", "--db", db, bomb)
    assert r.exit_code == 2 and "unpacks to more than" in r.output and "1000x its compressed size" in r.output, r.output


def test_details_page_missing_a_metric_row_in_the_middle_is_refused(tmp_path, db):
    """A launch in the middle that lacks a metric row every other launch has (a row lost, not a
    cut at the end) is refused too, naming the launch and the metric."""
    text = (DATA / "field-h100" / "ws_nonvtx.details.csv").read_bytes()
    lines = text.splitlines(keepends=True)
    i = next(n for n, line in enumerate(lines) if line.startswith(b'"20",'))  # launch ID 20 of 40
    lost = tmp_path / "lost.details.csv"
    lost.write_bytes(b"".join(lines[:i + 3] + lines[i + 4:]))
    r = run("ingest", "--db", db, lost)
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert "launch ID 20 lacks the metric row" in r.output and "every other launch has" in r.output, r.output
