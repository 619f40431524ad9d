"""The tracer aims NVTX injection at the libcupti it loaded (a second copy receives no markers)."""
from profkit.capture.cupti_tracer import loaded_libcupti, point_nvtx_at

VENV = "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13"


def test_loaded_libcupti_reads_maps(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(
        f"7f00-7f10 r-xp 00000000 08:01 1 {VENV}\n"
        f"7f10-7f20 r--p 00010000 08:01 1 {VENV}\n"
        "7f20-7f30 r-xp 00000000 08:01 2 /usr/lib/libc.so.6\n"
        "7f30-7f40 rw-p 00000000 00:00 0 \n")
    assert loaded_libcupti(str(maps)) == [VENV]
    assert loaded_libcupti(str(tmp_path / "absent")) == []


def test_point_nvtx_at_sets_unset_and_replaces_another_copy():
    env = {}
    assert point_nvtx_at([VENV], env)["nvtx_injection"] == VENV
    env = {"NVTX_INJECTION64_PATH": "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"}
    facts = point_nvtx_at([VENV], env)
    assert env["NVTX_INJECTION64_PATH"] == VENV
    assert facts["nvtx_injection_before"].startswith("/usr/local/cuda")


def test_point_nvtx_at_leaves_it_when_ambiguous_or_unknown():
    env = {"NVTX_INJECTION64_PATH": "/a/libcupti.so"}
    point_nvtx_at([], env)
    assert env["NVTX_INJECTION64_PATH"] == "/a/libcupti.so"
    point_nvtx_at(["/x/libcupti.so", "/y/libcupti.so"], env)
    assert env["NVTX_INJECTION64_PATH"] == "/a/libcupti.so"
