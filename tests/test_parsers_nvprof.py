"""nvprof's SQLite report (.nvvp). No public .nvvp small enough and licensed to commit was at
hand, so the file is built in NVIDIA's documented nvprof layout (CUPTI activity tables, names in
StringTable, a marker's thread in its objectId) from the records of a real CUPTI trace
(tests/data/rmsnorm-cupti, an H200 run): the same records read through both parsers must give
the same kernels, launch calls and NVTX paths."""
import pytest
from click.testing import CliRunner
from nvprof_layout import build_nvvp
from profdata import DATA
from profkit.parsers import cupti_trace, nvprof

from profkit import parsers
from profkit.cli import cli

TRACE = DATA / "rmsnorm-cupti" / "rmsnorm-cupti.cupti.jsonl"


def test_an_nvvp_reads_as_the_same_timeline_as_its_cupti_records(tmp_path):
    p = build_nvvp(tmp_path / "rmsnorm.nvvp")
    assert parsers.detect(p) is nvprof
    got, want = nvprof.parse(p), cupti_trace.parse(TRACE)
    assert got.format == "nvprof" and len(got.kernels) == len(want.kernels) == 49

    def key(k):  # all but the launch call's name (nvprof keeps its callback id)
        return k[:20] + k[21:]

    assert [key(k) for k in got.kernels] == [key(k) for k in want.kernels]
    assert sorted(map(str, got.ranges)) == sorted(map(str, want.ranges)) and len(got.ranges) == 6
    assert {k[4] for k in got.kernels} >= {"rmsnorm/eager/llama8b-t4096", "rmsnorm/triton/llama8b-t4096"}
    assert got.facts["memcpy"] == {"count": 1, "bytes": 4096, "duration_ns": 20}


def test_an_nvvp_loads_and_bad_ones_are_refused_in_one_line(tmp_path):
    db = tmp_path / "n.db"
    r = CliRunner().invoke(cli, ["ingest", "--db", str(db), str(build_nvvp(tmp_path / "ok.nvvp"))])
    assert r.exit_code == 0 and "nvprof -> run ok: 49 kernels, 6 NVTX ranges" in r.output, r.output
    empty = build_nvvp(tmp_path / "empty.nvvp", edit=["DELETE FROM CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL"])
    backwards = build_nvvp(tmp_path / "backwards.nvvp",
                           edit=['UPDATE CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL SET "end" = start - 1 WHERE _id_ = 3'])
    dup = build_nvvp(tmp_path / "dup.nvvp", edit=["INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (cbid, start, \"end\","
                                                  " processId, threadId, correlationId) SELECT cbid, start + 1,"
                                                  " \"end\" + 1, processId, threadId, correlationId FROM"
                                                  " CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId = (SELECT"
                                                  " correlationId FROM CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL LIMIT 1)"])
    cut = tmp_path / "cut.nvvp"
    cut.write_bytes((tmp_path / "ok.nvvp").read_bytes()[:-1000])
    for f, words in ((empty, "without kernel records"), (backwards, "ends before it starts"),
                     (dup, "a second launch call with correlation id"), (cut, "truncated")):
        r = CliRunner().invoke(cli, ["ingest", "--db", str(tmp_path / "x.db"), str(f)])
        assert r.exit_code == 2 and r.output.count("\n") == 1 and words in r.output, (f.name, r.output)


@pytest.mark.parametrize("suffix", [".nvvp", ".prof"])
def test_nvprof_names_are_its_suffixes(tmp_path, suffix):
    assert parsers.detect(build_nvvp(tmp_path / f"x{suffix}")) is nvprof
