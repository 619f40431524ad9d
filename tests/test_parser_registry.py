"""Parsers describe themselves; everything else derives from the registry.

A throwaway parser in a temporary package (registered through the `profkit.parsers` entry
point group, the way a user's own package would add one) is picked up by detection, ingest,
run naming, the main job's choice of files, the store's and timeline's timeline sources and
the fuzzer, without touching another file.
"""
import textwrap

import pytest
from profdata import KNOWN_NSYS

from profkit import parsers
from profkit.analyses import timeline
from profkit.store.ingest import ingest, run_name_for
from profkit.store.profiles import report_files
from profkit.store.store import Store

TOY = '''
"""A toy timeline format: the first line is TOYTRACE, then one kernel per line: name start end."""
from pathlib import Path

from profkit.core.errors import BadInput
from profkit.core.rows import Parsed, kernel_row

FORMAT = "toy-trace"
SUFFIXES = (".toy",)
ROLE = "timeline"
SOURCE = "toy"
PREFERENCE = 5  # preferred over an nsys export of the same run
SNIFF_ORDER = 1
DESCRIPTION = "toy trace (.toy)"


def sniff(path: Path, head: bytes) -> bool:
    return head.startswith(b"TOYTRACE")


def parse(path: Path) -> Parsed:
    lines = path.read_text().splitlines()[1:]
    if not lines:
        raise BadInput(path, "no kernels")
    kernels, ranges = [], [("d", "step", "push_pop", 0, 10_000, 1, 1, 0, "step")]
    for i, line in enumerate(lines):
        name, start, end = line.split()
        kernels.append(kernel_row(seq=i, kernel_name=name, short_name=name, nvtx_range="step", nvtx_path="step",
                                  start_ns=int(start), end_ns=int(end), duration_ns=int(end) - int(start),
                                  api_start_ns=int(start) - 5, pid=1, tid=1, correlation_id=i))
    return Parsed(str(path), FORMAT, SOURCE, kernels, ranges, [], {"gpu_name": "Toy GPU"})
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "toy_parser").mkdir(parents=True)
    (site / "toy_parser" / "__init__.py").write_text("")
    (site / "toy_parser" / "toy.py").write_text(textwrap.dedent(TOY))
    info = site / "toy_parser-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-parser\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[profkit.parsers]\ntoy = toy_parser.toy\n")
    monkeypatch.syspath_prepend(str(site))
    parsers.reload()
    yield tmp_path
    monkeypatch.undo()
    parsers.reload()


def _toy_file(folder, name="run7.toy"):
    f = folder / name
    f.write_text("TOYTRACE\nk_a 100 400\nk_b 500 900\n")
    return f


def test_a_new_parser_is_picked_up_everywhere(toy):
    f = _toy_file(toy)
    assert "toy-trace" in parsers.formats()
    assert parsers.detect(f).FORMAT == "toy-trace"
    assert parsers.preference("timeline")[0] == "toy-trace"
    assert parsers.timeline_sources()[0] == "toy"
    assert run_name_for(toy / "myrun.toy") == "myrun" and run_name_for(toy / "myrun.rank2.toy") == "myrun"
    assert "toy trace (.toy)" in str(pytest.raises(Exception, parsers.detect, _bad(toy)).value)

    # the main job takes one timeline per run: the toy beats the nsys export beside it
    run_dir = toy / "profiles" / "r"
    run_dir.mkdir(parents=True)
    _toy_file(run_dir, "r.toy")
    (run_dir / "r.nsys.sqlite").write_bytes(KNOWN_NSYS.read_bytes())
    assert [p.name for p in report_files(run_dir)] == ["r.toy"]

    db = str(toy / "t.db")
    (loaded,) = ingest(db, [f])
    assert (loaded.format, loaded.run, loaded.kernels) == ("toy-trace", "run7", 2)
    with Store(db) as s:
        assert s.timeline_source("run7") == "toy"
        (row,) = timeline.ranges(s, "run7")
        assert (row["path"], row["kernels"], row["busy_ns"]) == ("step", 2, 700)

    import fuzzing.cases as fz

    try:
        fz._discover_formats(roots=[toy])
        assert fz.FORMATS["toy-trace"][0] == ".toy" and "toy-trace" in fz.WEIGHTS
        assert fz.mutations_of("toy-trace")  # byte mutations at least
    finally:
        fz.FORMATS.pop("toy-trace", None)
        fz.WEIGHTS.pop("toy-trace", None)


def _bad(folder):
    f = folder / "x.unknown"
    f.write_bytes(b"not a report")
    return f


def test_a_parser_that_does_not_declare_itself_is_refused(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "half").mkdir(parents=True)
    (site / "half" / "__init__.py").write_text("FORMAT = 'half'\ndef parse(path):\n    pass\n")
    info = site / "half-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: half\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[profkit.parsers]\nhalf = half\n")
    monkeypatch.syspath_prepend(str(site))
    try:
        with pytest.raises(TypeError, match="does not declare SUFFIXES, ROLE, SOURCE"):
            parsers.reload()
    finally:
        monkeypatch.undo()
        parsers.reload()
