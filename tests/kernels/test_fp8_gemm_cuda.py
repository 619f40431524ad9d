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
    assert log.count("0 bytes spill stores") == 8 and "C751" not in log  # C751x: a serialized wgmma pipeline
    assert re.findall(r"Used (\d+) registers", log) == ["168"] * 8  # 384 threads, one CTA an SM


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
    for bn, most in C.MAX_STAGES.items():
        size = lambda s: 1024 + s * (128 * 128 + bn * 128) + 16 * s  # noqa: E731
        assert size(most) <= 227 * 1024 < size(most + 1)
