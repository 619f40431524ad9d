"""The CUDA C++ fp8 GEMM (kernels/cuda/fp8_gemm.cu, launcher kernels/fp8_gemm_cuda.py; round 17:
measured on the GPU, benchmarks/results/r17/, every launch checked against float64 there first).
wgmma, TMA and clusters have no CPU stand-in, so here, without a GPU: the source built for an
H100 (sm_90a) with nvcc, its machine code read back (each instance issues only its own tile's
wgmma shape, multicasts A and B only along the cluster's N and M, no spills), and what the host
refuses."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from profkit.kernels import _cuda_build
from profkit.kernels import fp8_gemm_cuda as C

NVCC = shutil.which("nvcc") or next((p for p in _cuda_build.FALLBACK_NVCC if Path(p).exists()), None)


def _cuobjdump():
    """cuobjdump: the CUDA toolkit's, else the one Triton ships."""
    import triton

    found = shutil.which("cuobjdump")
    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    return found or (str(bundled) if bundled.exists() else None)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(ptxas -v output, {instance (BN, CM, CN): its SASS}) of fp8_gemm.cu for sm_90a."""
    if NVCC is None or _cuobjdump() is None:
        pytest.skip("nvcc and cuobjdump are needed to build and read the sm_90a code")
    out = tmp_path_factory.mktemp("fp8cu") / "fp8_gemm.o"
    arch = _cuda_build.arch_for("fp8_gemm", "sm_90")
    p = subprocess.run([NVCC, *_cuda_build.BASE_FLAGS, *_cuda_build.arch_flags(arch), "-Xptxas", "-v", "-c", "-o",
                        str(out), str(_cuda_build.source("fp8_gemm"))], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    sass = subprocess.run([_cuobjdump(), "-sass", str(out)], capture_output=True, text=True, check=True).stdout
    funcs = {}
    for part in sass.split("Function : ")[1:]:
        m = re.match(r"_ZN7profkit3fp811fp8_gemm_wsILi(\d+)ELi(\d+)ELi(\d+)E", part)
        if m:
            funcs[(int(m[1]), int(m[2]), int(m[3]))] = part
    return p.stderr, funcs


def test_sm90_sources_get_the_arch_specific_target():
    assert _cuda_build.arch_for("fp8_gemm", "sm_90") == "sm_90a"
    assert _cuda_build.arch_for("fp8_gemm", "sm_90a") == "sm_90a"
    assert _cuda_build.arch_for("softmax", "sm_90") == "sm_90"  # clusters and bulk copies need no `a`


def test_every_instance_is_built_without_spills(built):
    log, funcs = built
    shapes = [(bn, cm, cn) for bn in (112, 128) for cm in (1, 2) for cn in (1, 2)]
    assert sorted(funcs) == shapes
    # per entry function (the GEMM's eight instances and the placement probe): its ptxas lines
    entries = dict(re.findall(r"Compiling entry function '(\w+)'.*?\n(.*?)(?=Compiling entry|\Z)", log, re.S))
    gemm = {k: v for k, v in entries.items() if "fp8_gemm_ws" in k}
    assert len(gemm) == 8 and any("where_probe" in k for k in entries)
    assert all("0 bytes spill stores" in v for v in entries.values()) and "C751" not in log  # C751x: serialized wgmma
    assert [re.search(r"Used (\d+) registers", v)[1] for v in gemm.values()] == ["168"] * 8  # 384 threads, 1 CTA/SM


@pytest.mark.parametrize("bn,cm,cn", [(bn, cm, cn) for bn in (112, 128) for cm in (1, 2) for cn in (1, 2)])
def test_one_wgmma_shape_per_tile_and_multicast_only_in_clusters(built, bn, cm, cn):
    """The point of round 17: the 112-wide tile as one m64n112k32 instruction a k step (round
    16's Gluon tile needed three narrower chains), four a k tile of 128. Of the two loads a k
    tile, B's is multicast where the cluster spans M (round 17) and A's where it spans N (round
    18); without a cluster both are plain loads."""
    sass = built[1][(bn, cm, cn)]
    shapes = re.findall(r"QGMMA\.(64x\d+x32)\.F32\.E4M3\.E4M3", sass)
    assert set(shapes) == {f"64x{bn}x32"} and len(shapes) % 4 == 0
    multicast = sass.count("UTMALDG.2D.MULTICAST")
    assert multicast == (cm > 1) + (cn > 1) and sass.count("UTMALDG.2D ") == 2 - multicast
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in sass  # one k tile's MMAs in flight while the next is issued


@pytest.mark.parametrize("bn,cm,cn", [(bn, cm, cn) for bn in (112, 128) for cm in (1, 2) for cn in (1, 2)])
def test_wgmma_descriptors_come_from_uniform_registers(built, bn, cm, cn):
    """Round 20: with the warpgroup index taken from threadIdx directly, the compiler kept the
    stages' descriptors in vector registers and moved each into a uniform one (R2UR) before its
    wgmma; broadcast from lane 0, they are computed on the uniform datapath (1.01-1.02x, pairs
    r20-h100m / -h200b). A k tile's four wgmma, from the fence on, need no R2UR."""
    lines = built[1][(bn, cm, cn)].splitlines()
    start = next(i for i, ln in enumerate(lines) if "WARPGROUP.ARRIVE" in ln)
    gmma = [i for i, ln in enumerate(lines) if "QGMMA" in ln and i > start][:4]
    assert len(gmma) == 4 and not [ln for ln in lines[start:gmma[-1]] if "R2UR" in ln]


@pytest.mark.parametrize("bn,cm,cn", [(bn, cm, cn) for bn in (112, 128) for cm in (1, 2) for cn in (1, 2)])
def test_tma_epilogue_stores_two_halves_after_a_proxy_fence(built, bn, cm, cn):
    """Round 21: the epilogue's stores from registers wrote half of each 32-byte sector and took
    4-6 K cycles a tile; epi 1 writes each half of the columns into shared memory, fences it for
    the async proxy, syncs the warpgroup's four warps and has one thread store it by TMA. The
    fence must come before the store, and the register path stays beside it (epi 0)."""
    sass = built[1][(bn, cm, cn)]
    lines = sass.splitlines()
    stores = [i for i, ln in enumerate(lines) if "UTMASTG.2D" in ln]
    named = [i for i, ln in enumerate(lines) if "BAR.SYNC" in ln and ", 0x80" in ln]  # 128 threads: a warpgroup
    assert len(stores) == 2 and named and named[0] < stores[0]
    for lo, hi in zip([named[0]] + stores, stores):  # each half: written, fenced, synced, stored
        window = lines[lo:hi]
        fence = max(i for i, ln in enumerate(window) if "FENCE.VIEW.ASYNC.S" in ln)
        assert any("BAR.SYNC" in ln for ln in window[fence:])
    assert re.search(r"STG\.E desc", sass)  # the register epilogue (epi 0) beside it


def test_refuses_configs_it_cannot_run():
    with pytest.raises(ValueError, match="bn 96"):
        C.check_config(96, 6, 16, 8)
    with pytest.raises(ValueError, match="stages 8 not in 2..7"):
        C.check_config(112, 8, 16, 8)
    with pytest.raises(ValueError, match="stages 8 not in 2..7"):
        C.check_config(128, 8, 16, 8)  # 32 KB stages: eight do not fit 227 KB
    with pytest.raises(ValueError, match="cluster 4"):
        C.check_config(112, 6, 16, 8, cluster=4)
    with pytest.raises(ValueError, match="cluster_n 3"):
        C.check_config(112, 6, 16, 8, cluster_n=3)
    C.check_config(112, 7, 16, 8, cluster=2)  # the default
    C.check_config(112, 7, 16, 2, cluster=1, epilogue="tma")  # cuda_ws112_tma: its 14 KB beside 7 stages
    with pytest.raises(ValueError, match="7 stages and the tma epilogue need 246912 bytes"):
        C.check_config(128, 7, 16, 8, epilogue="tma")
    with pytest.raises(ValueError, match="epilogue 'smem' is not one of registers, tma"):
        C.check_config(112, 7, 16, 8, epilogue="smem")
    a = torch.zeros(4, 32).to(torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="l2_promotion 64 is not 0, 128 or 256"):
        C.fp8_gemm_cuda(a, a, torch.ones(1), torch.ones(1), l2_promotion=64)
    with pytest.raises(ValueError, match="diagnostic 3 is not 0, 1 or 2"):
        C.fp8_gemm_cuda(a, a, torch.ones(1), torch.ones(1), diagnostic=3)
    with pytest.raises(ValueError, match="kflip and a diagnostic both choose the k tiles loaded"):
        C.fp8_gemm_cuda(a, a, torch.ones(1), torch.ones(1), diagnostic=1, kflip=True)


def test_needs_a_hopper_gpu_in_one_line():
    if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9:
        pytest.skip("a Hopper GPU is here")
    a = torch.zeros(4, 32).to(torch.float8_e4m3fn)
    with pytest.raises(NotImplementedError, match=r"cuda_ws112: needs a Hopper GPU"):
        C.fp8_gemm_cuda(a, a, torch.ones(1), torch.ones(1))


def test_shared_memory_plan_matches_the_source():
    """MAX_STAGES here is what fits the 227 KB a block may have in the source's layout (1 KB of
    alignment, then the stages, then two barriers a stage)."""
    src = _cuda_build.source("fp8_gemm").read_text()
    assert "1024 + stages * (A_BYTES + BN * BK) + 2 * stages * 8" in src and "MAX_SMEM = 227 * 1024" in src
    assert "(ring + 127) / 128 * 128 + 2 * 64 * (BN / 2) * 2" in src  # the epilogue's staging, 128-byte aligned
    assert C.smem_bytes(112, 7, "tma") == 230528 and C.smem_bytes(112, 7) == 216176
    for bn, most in C.MAX_STAGES.items():
        size = lambda s: 1024 + s * (128 * 128 + bn * 128) + 16 * s  # noqa: E731
        assert size(most) <= 227 * 1024 < size(most + 1)


def test_launcher_passes_what_the_c_function_declares():
    """The ctypes signature (kernels/fp8_gemm_cuda.py) against the exported function's parameter
    list: a parameter added on one side only would shift every later argument (as kflip once was)."""
    src = _cuda_build.source("fp8_gemm").read_text()
    decl = re.search(r"PROFKIT_EXPORT int profkit_fp8_gemm_ws\((.*?)\)\s*\{", src, re.S)[1]
    kinds = ["p" if "*" in arg else "i" for arg in decl.split(",")]
    assert (C._SIGNATURE[0], C._SIGNATURE[1]) == ("profkit_fp8_gemm_ws", kinds)
    launcher = Path(C.__file__).read_text()
    call = re.search(r"_cuda_build\.check\(\s*lib,\s*f\((.*?)\),\s*f\"cuda_ws", launcher, re.S)[1]
    assert len([a for a in call.split(",") if a.strip()]) == len(kinds)


def _placements():
    """{launch: SM of each CTA} measured on an H100 by tests/data/sm-placement-h100/sm_placement.cu
    (its placement.txt): a title line, then the CTAs' SMs."""
    path = Path(__file__).resolve().parents[2] / "tests/data/sm-placement-h100/placement.txt"
    lines = path.read_text().splitlines()
    return {t.split(" (")[0]: [int(x) for x in n.split()] for t, n in zip(lines, lines[1:])
            if "(grid" in t and n[:1].isdigit()}


def _order(gpc, per, where, cl):
    import ctypes

    if NVCC is None:
        pytest.skip("nvcc is needed to build the library")
    lib = _cuda_build.load("fp8_gemm")
    f = lib.profkit_fp8_order_clusters
    ints = lambda xs: (ctypes.c_int * len(xs))(*xs)  # noqa: E731
    perm = (ctypes.c_uint16 * (len(where) // cl))()
    assert f(ints(gpc), len(gpc), per, ints(where), len(where), cl, perm) == 0
    return list(perm)


@pytest.mark.parametrize("launch,cl", [("clusters of 2", 2), ("cluster attribute 1", 1), ("plain", 1)])
def test_steered_order_numbers_the_clusters_gpc_by_gpc(launch, cl):
    """Round 19: the clusters take their places in the tile order by the GPC they landed on. On the
    H100's measured placements: the numbering is a permutation (every tile computed once, wherever
    the clusters land), and each GPC the 16-probe found gets one run of consecutive numbers. With
    a cluster attribute, launch order alone puts neighbouring clusters in different GPCs (the
    round 18 finding this undoes)."""
    p = _placements()
    gpc16, where = p["clusters of 16"], p[launch]
    gpc_of = {sm: i // 16 for i, sm in enumerate(gpc16)}
    perm = _order(gpc16, 16, where, cl)
    assert sorted(perm) == list(range(len(where) // cl))
    by_number = [where[c * cl] for c in sorted(range(len(perm)), key=perm.__getitem__)]
    groups = [gpc_of.get(sm, -1) for sm in by_number]
    runs = [g for i, g in enumerate(groups) if i == 0 or g != groups[i - 1]]
    assert sorted(g for g in runs if g >= 0) == list(range(7)) and runs[-1] == -1  # one run each; unseen SMs last
    if launch != "plain":
        launch_order = [gpc_of.get(sm, -1) for sm in where[::cl]]
        assert sum(a == b >= 0 for a, b in zip(launch_order, launch_order[1:])) < len(launch_order) // 4
