"""fp8 (e4m3) GEMM with promotion, warp-specialized, in Gluon (variants "gluon_ws" / "gluon_ws_tensor").

Rounds 3-10 of issue 21 left the Triton kernel (v3, ``fp8_gemm.fp8_gemm_promote``) 1-7 % behind
torch._scaled_mm in two cells, each time for the same reason: one instruction stream, so the MMA
waits for every promotion add, and Triton 3.6 cannot warp-specialize a Hopper kernel. Gluon,
Triton's explicit-layout dialect (``triton.experimental.gluon``, 3.6 and later), can:

    loader     1 warp, 24 registers: TMA loads of A (128 x 128) and B (128 x 128) into a ring of
               STAGES shared-memory stages, each announced on its `ready` mbarrier
    consumers  2 warpgroups, each 64 rows of the 128 x 128 output tile: wgmma (m64n128k32, e4m3,
               one group in flight) chains into a partial sum `part`; every CHUNK k tiles the
               partial is added into the fp32 accumulator (the promotion, as cuBLAS without fast
               accumulation); a stage is handed back on its `empty` mbarrier (count 2) once both
               warpgroups' MMAs over it are done. With STAGGER the second warpgroup's chunks end
               half a chunk after the first's, so one drains its MMAs while the other's run.
    epilogue   per warpgroup: scales (per-row vectors or per-tensor scalars), bf16, TMA store

Persistent over output tiles in grouped order (GROUP_M), one program per SM. Each MMA chain stays
inside its chunk's loop: with the chain carried through a branch, ptxas serialized the wgmma
pipeline (C7511, first build of round 15). Needs a Hopper GPU (sm_90) and Gluon; the operands
as fp8_gemm's TMA kernels take them (contiguous, K a multiple of 16, N of 8).
Measured: benchmarks/results/gemm.md, "Round 15".
"""
from __future__ import annotations

import triton

try:  # Gluon: Triton >= 3.5 (the lab's GPU runs 3.6; the interpreter does not run Gluon)
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                                 warpgroup_mma_wait)
    # the TMA copies' names: Triton 3.6 (the lab's GPU) / 3.9 (CI, compile-checked only)
    _tma_load = tma.async_load if hasattr(tma, "async_load") else tma.async_copy_global_to_shared
    _tma_store = tma.async_store if hasattr(tma, "async_store") else tma.async_copy_shared_to_global
except ImportError:  # pragma: no cover - older Triton: the variant is unavailable
    gluon = None

BLOCK = 128  # tile M, N and K; each consumer warpgroup takes BLOCK // 2 rows
DEFAULT = dict(stages=5, chunk=16, stagger=True, group_m=8)  # round 15's pick on both GPUs


def chunk_bounds(k_tiles: int, chunk: int, off: int) -> list[tuple[int, int]]:
    """[k0, k1) of each promotion chunk of one tile as the consumer with offset `off` walks it
    (the kernel's arithmetic, in Python for the tests): the first chunk is chunk - off k tiles
    long, the others chunk, the last clipped at k_tiles."""
    first = chunk - off
    n = 1 + -(-max(k_tiles - first, 0) // chunk)
    return [(0 if c == 0 else first + (c - 1) * chunk, min(first + c * chunk, k_tiles)) for c in range(n)]


if gluon is not None:
    @gluon.jit
    def _coords(tile, num_pid_m, num_pid_n, GROUP_M: gl.constexpr):
        in_group = GROUP_M * num_pid_n
        first_m = (tile // in_group) * GROUP_M
        size_m = gl.minimum(num_pid_m - first_m, GROUP_M)
        pid_m = first_m + (tile % in_group) % size_m
        pid_n = (tile % in_group) // size_m
        return pid_m, pid_n


    @gluon.jit
    def _loader(a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, GROUP_M: gl.constexpr, NPROG: gl.constexpr):
        BM: gl.constexpr = a_desc.block_type.shape[0]
        BK: gl.constexpr = a_desc.block_type.shape[1]
        BN: gl.constexpr = b_desc.block_type.shape[0]
        S: gl.constexpr = a_bufs.type.shape[0]
        num_pid_m = gl.cdiv(M, BM)
        num_pid_n = gl.cdiv(N, BN)
        k_tiles = gl.cdiv(K, BK)
        it = 0
        for tile in range(gl.program_id(0), num_pid_m * num_pid_n, NPROG):
            pid_m, pid_n = _coords(tile, num_pid_m, num_pid_n, GROUP_M)
            for kt in range(k_tiles):
                s = it % S
                ph = (it // S) & 1
                mbarrier.wait(empty.index(s), ph ^ 1)
                mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
                _tma_load(a_desc, [pid_m * BM, kt * BK], ready.index(s), a_bufs.index(s))
                _tma_load(b_desc, [pid_n * BN, kt * BK], ready.index(s), b_bufs.index(s))
                it += 1


    @gluon.jit
    def _consumer(a_bufs, b_bufs, ready, empty, c_desc, c_smem, SA, SB, M, N, K, WG: gl.constexpr,
                  ROW_SCALES: gl.constexpr, CHUNK: gl.constexpr, STAGGER: gl.constexpr, GROUP_M: gl.constexpr,
                  NPROG: gl.constexpr):
        """One warpgroup: rows [WG * 64, WG * 64 + 64) of every 128-row tile; the MMA chains into
        `part` for up to CHUNK k tiles, then acc += part in fp32 (promotion). With STAGGER the
        second warpgroup promotes half a chunk later, so one's drain overlaps the other's MMAs."""
        S: gl.constexpr = a_bufs.type.shape[0]
        BM: gl.constexpr = a_bufs.type.shape[1]
        BK: gl.constexpr = a_bufs.type.shape[2]
        BN: gl.constexpr = b_bufs.type.shape[1]
        WM: gl.constexpr = c_desc.block_type.shape[0]
        mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 32])
        OFF: gl.constexpr = (WG * (CHUNK // 2)) if STAGGER else 0
        num_pid_m = gl.cdiv(M, BM)
        num_pid_n = gl.cdiv(N, BN)
        k_tiles = gl.cdiv(K, BK)
        FIRST: gl.constexpr = CHUNK - OFF  # the first chunk of a tile ends OFF k tiles early
        acc = gl.zeros((WM, BN), gl.float32, mma)
        part = gl.zeros((WM, BN), gl.float32, mma)
        it = 0
        for tile in range(gl.program_id(0), num_pid_m * num_pid_n, NPROG):
            pid_m, pid_n = _coords(tile, num_pid_m, num_pid_n, GROUP_M)
            n_chunks = 1 + gl.cdiv(gl.maximum(k_tiles - FIRST, 0), CHUNK)
            for c in range(n_chunks):
                k0 = gl.where(c == 0, 0, FIRST + (c - 1) * CHUNK)
                k1 = gl.minimum(FIRST + c * CHUNK, k_tiles)
                # the chunk's first MMA starts the partial sum afresh
                s = it % S
                mbarrier.wait(ready.index(s), (it // S) & 1)
                part = warpgroup_mma(a_bufs.index(s).slice(WG * WM, WM, dim=0), b_bufs.index(s).permute((1, 0)), part,
                                     use_acc=False, is_async=True)
                part = warpgroup_mma_wait(1, deps=(part, ))  # nothing else in flight: the partial as a tensor
                it += 1
                for kk in range(k0 + 1, k1):
                    s = it % S
                    mbarrier.wait(ready.index(s), (it // S) & 1)
                    part = warpgroup_mma(a_bufs.index(s).slice(WG * WM, WM, dim=0), b_bufs.index(s).permute((1, 0)),
                                         part, is_async=True)
                    part = warpgroup_mma_wait(1, deps=(part, ))
                    mbarrier.arrive(empty.index((it + S - 1) % S))  # the previous k tile's MMA is done
                    it += 1
                part = warpgroup_mma_wait(0, deps=(part, ))
                mbarrier.arrive(empty.index((it + S - 1) % S))
                acc = acc + part  # promotion into fp32
            om = pid_m * BM + WG * WM
            on = pid_n * BN
            if ROW_SCALES:
                rm = om + gl.arange(0, WM, layout=gl.SliceLayout(1, mma))
                rn = on + gl.arange(0, BN, layout=gl.SliceLayout(0, mma))
                sa = gl.load(SA + rm, mask=rm < M, other=0.0)
                sb = gl.load(SB + rn, mask=rn < N, other=0.0)
                y = acc * gl.expand_dims(sa, 1) * gl.expand_dims(sb, 0)
            else:
                y = acc * (gl.load(SA) * gl.load(SB))
            tma.store_wait(0)  # the previous tile's store has left c_smem
            c_smem.store(y.to(c_desc.dtype))
            fence_async_shared()
            _tma_store(c_desc, [om, on], c_smem)
            acc = gl.zeros((WM, BN), gl.float32, mma)
        tma.store_wait(0)


    @gluon.jit
    def _consumer0(a_bufs, b_bufs, ready, empty, c_desc, c_smem, SA, SB, M, N, K, ROW_SCALES: gl.constexpr,
                   CHUNK: gl.constexpr, STAGGER: gl.constexpr, GROUP_M: gl.constexpr, NPROG: gl.constexpr):
        _consumer(a_bufs, b_bufs, ready, empty, c_desc, c_smem, SA, SB, M, N, K, 0, ROW_SCALES, CHUNK, STAGGER, GROUP_M,
                  NPROG)


    @gluon.jit
    def _consumer1(a_bufs, b_bufs, ready, empty, c_desc, c_smem, SA, SB, M, N, K, ROW_SCALES: gl.constexpr,
                   CHUNK: gl.constexpr, STAGGER: gl.constexpr, GROUP_M: gl.constexpr, NPROG: gl.constexpr):
        _consumer(a_bufs, b_bufs, ready, empty, c_desc, c_smem, SA, SB, M, N, K, 1, ROW_SCALES, CHUNK, STAGGER, GROUP_M,
                  NPROG)


    @gluon.jit
    def _fp8_gemm_ws(a_desc, b_desc, c_desc, SA, SB, M, N, K, ROW_SCALES: gl.constexpr, STAGES: gl.constexpr,
                           CHUNK: gl.constexpr, STAGGER: gl.constexpr, GROUP_M: gl.constexpr, NPROG: gl.constexpr,
                           CONSUMER_REGS: gl.constexpr):
        a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)
        b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
        c0 = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
        c1 = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(STAGES):
            mbarrier.init(ready.index(i), count=1)
            mbarrier.init(empty.index(i), count=2)
        gl.warp_specialize([
            (_consumer0, (a_bufs, b_bufs, ready, empty, c_desc, c0, SA, SB, M, N, K, ROW_SCALES, CHUNK, STAGGER, GROUP_M,
                          NPROG)),
            (_consumer1, (a_bufs, b_bufs, ready, empty, c_desc, c1, SA, SB, M, N, K, ROW_SCALES, CHUNK, STAGGER, GROUP_M,
                          NPROG)),
            (_loader, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, GROUP_M, NPROG)),
        ], [4, 1], [CONSUMER_REGS, 24])
        for i in gl.static_range(STAGES):
            mbarrier.invalidate(ready.index(i))
            mbarrier.invalidate(empty.index(i))


def available() -> str | None:
    """None if the warp-specialized kernel can run here, else why not."""
    import torch

    if gluon is None:
        return f"Gluon needs Triton >= 3.5 (this is {triton.__version__})"
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        return "needs a Hopper GPU (sm_90): wgmma and setmaxnreg"
    return None


def fp8_gemm_ws(a, b, sa, sb, out=None, programs: int | None = None, stages: int = DEFAULT["stages"],
                chunk: int = DEFAULT["chunk"], stagger: bool = DEFAULT["stagger"], group_m: int = DEFAULT["group_m"]):
    """a (M, K) fp8 e4m3, b (N, K) fp8 e4m3, sa/sb fp32 scalars (per-tensor) or (M,)/(N,)
    (per-row); bf16 out. Promotion every `chunk` k tiles of 128 (16: every 2048, as v3)."""
    import torch

    why = available()
    if why:
        raise NotImplementedError(f"gluon_ws: {why}")
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    M, K = a.shape
    N = b.shape[0]
    if not (a.is_contiguous() and b.is_contiguous() and K % 16 == 0 and N % 8 == 0):
        raise NotImplementedError("gluon_ws: contiguous operands, K a multiple of 16 and N of 8 (TMA)")
    if out is None:
        out = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    sa, sb = sa.reshape(-1).float(), sb.reshape(-1).float()
    la = gl.NVMMASharedLayout.get_default_for([BLOCK, BLOCK], gl.float8e4nv)
    lc = gl.NVMMASharedLayout.get_default_for([BLOCK // 2, BLOCK], gl.bfloat16)
    tiles = triton.cdiv(M, BLOCK) * triton.cdiv(N, BLOCK)
    nprog = min(programs or torch.cuda.get_device_properties(a.device).multi_processor_count, tiles)
    _fp8_gemm_ws[(nprog,)](
        TensorDescriptor.from_tensor(a, [BLOCK, BLOCK], la), TensorDescriptor.from_tensor(b, [BLOCK, BLOCK], la),
        TensorDescriptor.from_tensor(out, [BLOCK // 2, BLOCK], lc), sa, sb, M, N, K, ROW_SCALES=sa.numel() != 1,
        STAGES=stages, CHUNK=chunk, STAGGER=stagger, GROUP_M=group_m, NPROG=nprog, CONSUMER_REGS=232, num_warps=4)
    return out
