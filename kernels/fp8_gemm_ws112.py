"""fp8 (e4m3) GEMM with promotion, warp-specialized, 128 x 112 tiles (variants "gluon_ws112*").

Round 15 left one per-tensor cell short: qwen7b-down-m1024 (M 1024, N 3584, K 18944) at
0.95-0.97x of torch._scaled_mm on both GPUs. Our 224 tiles of 128 x 128 take two tile-times on
132 SMs (the second wave 70 % full); cuBLAS's 256 tiles of 128 x 112 take 1.94 waves of a tile
12.5 % smaller, 1.75 of our tile-times. A Gluon tensor's shape must be a power of two, so a
112-wide accumulator cannot be written; three can: each consumer warpgroup chains
m64n64k32, m64n32k32 and m64n16k32 wgmma into three partial sums (64 + 32 + 16 = 112 columns),
promoted into three fp32 accumulators every CHUNK k tiles, as fp8_gemm_ws.

A_REGS (the default): the warpgroup's A slice is read into registers once per k tile (ldmatrix)
and fed to all three chains; from shared memory (A_REGS False) each chain rereads it, about 170
bytes a clock an SM at the fp8 peak against the 128 the SM has (measured 4-9 % slower). ptxas
serializes every wgmma whose register operand is in flight across a loop's back edge or a branch
(C7512), so each promotion chunk is unrolled into straight-line runs of 16, 8, 4, 2, 1 k tiles,
drained at each run's end. The rest is fp8_gemm_ws: a TMA loader warp (24 registers), two
consumer warpgroups (232), a STAGES-deep mbarrier ring, the staggered promotion, persistent
grouped tile order, per-row or per-tensor (stride 0) scales, bf16 out through three TMA stores.

Measured (round 16, graph replay, qwen7b-down-m1024 per-tensor): H100 126-128 us against
gluon_ws's 123 and _scaled_mm's 113-118, H200 134 against 122 and 113; rejected (0.92x of
gluon_ws under ncu on both GPUs): the tiles balance the SMs, but the narrow chains keep the
tensor pipe ~68 % busy against 87-90 %. Kept as the ledger's attempt. Needs a Hopper GPU (sm_90)
and Gluon. benchmarks/results/gemm.md, "Round 16".
"""
from __future__ import annotations

import triton

from ._gemm_common import tile_coords
from .fp8_gemm_ws import BLOCK, _chunk, _n_chunks, available, gl, gluon, host_args  # noqa: F401

BN = 112  # the tile's columns: three chains of NS
NS = (64, 32, 16)
RUN = 16  # k tiles of the longest straight-line run of register-A MMAs (a chunk is unrolled as runs
# of 16, 8, 4, 2, 1, its length's binary digits: so at most 31 k tiles with A in registers)
DEFAULT = dict(stages=6, chunk=16, stagger=True, group_m=8, a_regs=True)

if gluon is not None:
    from .fp8_gemm_ws import _barrier, _tma_load, _tma_store, fence_async_shared, mbarrier, tma, warpgroup_mma, \
        warpgroup_mma_wait  # noqa: F401  (_barrier: the same names as the 128 x 128 kernel)

    @gluon.jit
    def _loader(a_desc, b0_desc, b1_desc, b2_desc, a_bufs, b0_bufs, b1_bufs, b2_bufs, ready, empty, M, N, K,
                GROUP_M: gl.constexpr, NPROG: gl.constexpr):
        """One warp: A (128 x 128) and B's three row blocks (64, 32, 16 x 128) of every k tile of
        every tile this program owns, into the ring."""
        BM: gl.constexpr = a_desc.block_type.shape[0]
        BK: gl.constexpr = a_desc.block_type.shape[1]
        N0: gl.constexpr = b0_desc.block_type.shape[0]
        N1: gl.constexpr = b1_desc.block_type.shape[0]
        WN: gl.constexpr = N0 + N1 + b2_desc.block_type.shape[0]
        S: gl.constexpr = a_bufs.type.shape[0]
        NBYTES: gl.constexpr = (a_desc.block_type.nbytes + b0_desc.block_type.nbytes + b1_desc.block_type.nbytes +
                                b2_desc.block_type.nbytes)
        num_pid_m = gl.cdiv(M, BM)
        num_pid_n = gl.cdiv(N, WN)
        k_tiles = gl.cdiv(K, BK)
        it = 0
        for tile in range(gl.program_id(0), num_pid_m * num_pid_n, NPROG):
            pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
            for kt in range(k_tiles):
                s = it % S
                mbarrier.wait(empty.index(s), ((it // S) & 1) ^ 1)
                mbarrier.expect(ready.index(s), NBYTES)
                _tma_load(a_desc, [pid_m * BM, kt * BK], ready.index(s), a_bufs.index(s))
                _tma_load(b0_desc, [pid_n * WN, kt * BK], ready.index(s), b0_bufs.index(s))
                _tma_load(b1_desc, [pid_n * WN + N0, kt * BK], ready.index(s), b1_bufs.index(s))
                _tma_load(b2_desc, [pid_n * WN + N0 + N1, kt * BK], ready.index(s), b2_bufs.index(s))
                it += 1

    @gluon.jit
    def _store(acc, c_desc, c_smem, SA, SB, M, N, om, on, S_STRIDE, mma: gl.constexpr):
        """acc * sa[rows] * sb[cols] in bf16 through c_smem and a TMA store (S_STRIDE 0: per-tensor
        scales read as vectors of one address, as fp8_gemm_ws._store_tile)."""
        rm = om + gl.arange(0, c_desc.block_type.shape[0], layout=gl.SliceLayout(1, mma))
        rn = on + gl.arange(0, c_desc.block_type.shape[1], layout=gl.SliceLayout(0, mma))
        sa = gl.load(SA + rm * S_STRIDE, mask=rm < M, other=0.0)
        sb = gl.load(SB + rn * S_STRIDE, mask=rn < N, other=0.0)
        c_smem.store((acc * gl.expand_dims(sa, 1) * gl.expand_dims(sb, 0)).to(c_desc.dtype))
        fence_async_shared()
        _tma_store(c_desc, [om, on], c_smem)

    RS_RUN: gl.constexpr = gl.constexpr(RUN)

    @gluon.jit
    def _ktile_rs(a_bufs, b0_bufs, b1_bufs, b2_bufs, ready, empty, it, fresh, p0, p1, p2, WG: gl.constexpr,
                  AFTER: gl.constexpr, DRAIN: gl.constexpr, d0: gl.constexpr, d1: gl.constexpr, d2: gl.constexpr):
        """One k tile with A in registers: the warpgroup's A slice read once (ldmatrix) and fed to
        the three chains (three groups), the previous k tile's left in flight unless DRAIN.
        AFTER: the previous k tile's MMAs were in flight (its stage is handed back here); DRAIN:
        wait for all and hand this stage back. With MMAs that read registers in flight across a
        loop's back edge or a branch, ptxas serialized every MMA (C7512), so the caller unrolls
        runs of k tiles and drains each at its end."""
        S: gl.constexpr = a_bufs.type.shape[0]
        WM: gl.constexpr = a_bufs.type.shape[1] // 2
        st = it % S
        mbarrier.wait(ready.index(st), (it // S) & 1)
        a = a_bufs.index(st).slice(WG * WM, WM, dim=0).load(d0)
        p0 = warpgroup_mma(a, b0_bufs.index(st).permute((1, 0)), p0, use_acc=fresh, is_async=True)
        p1 = warpgroup_mma(gl.convert_layout(a, d1), b1_bufs.index(st).permute((1, 0)), p1, use_acc=fresh,
                           is_async=True)  # the same registers: one layout per chain's parent, no data moves
        p2 = warpgroup_mma(gl.convert_layout(a, d2), b2_bufs.index(st).permute((1, 0)), p2, use_acc=fresh,
                           is_async=True)
        p0, p1, p2 = warpgroup_mma_wait(0 if DRAIN else 3, deps=(p0, p1, p2))
        if AFTER:
            mbarrier.arrive(empty.index((it + S - 1) % S))
        if DRAIN:
            mbarrier.arrive(empty.index(st))
        return p0, p1, p2

    @gluon.jit
    def _consumer(a_bufs, b0_bufs, b1_bufs, b2_bufs, ready, empty, c0_desc, c1_desc, c2_desc, c0_smem, c1_smem,
                  c2_smem, SA, SB, M, N, K, S_STRIDE, WG: gl.constexpr, CHUNK: gl.constexpr,
                  STAGGER: gl.constexpr, GROUP_M: gl.constexpr, NPROG: gl.constexpr, A_REGS: gl.constexpr):
        """One warpgroup: rows [WG * 64, WG * 64 + 64) of every 128 x 112 tile, as three chains
        (columns 0-63, 64-95, 96-111) whose wgmma are issued back to back per k tile, so the
        three run while the next k tile's A is read (A_REGS) and its barrier awaited."""
        BM: gl.constexpr = a_bufs.type.shape[1]
        BK: gl.constexpr = a_bufs.type.shape[2]
        N0: gl.constexpr = b0_bufs.type.shape[1]
        N1: gl.constexpr = b1_bufs.type.shape[1]
        N2: gl.constexpr = b2_bufs.type.shape[1]
        WN: gl.constexpr = N0 + N1 + N2
        WM: gl.constexpr = c0_desc.block_type.shape[0]
        S: gl.constexpr = a_bufs.type.shape[0]
        m0: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, N0, 32])
        m1: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, N1, 32])
        m2: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, N2, 32])
        d0: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=m0, k_width=4)  # 4 e4m3 a register
        d1: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=m1, k_width=4)
        d2: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=m2, k_width=4)
        OFF: gl.constexpr = (WG * (CHUNK // 2)) if STAGGER else 0
        num_pid_m = gl.cdiv(M, BM)
        num_pid_n = gl.cdiv(N, WN)
        k_tiles = gl.cdiv(K, BK)
        chunk = k_tiles * 0 + CHUNK  # values, not constexprs: see fp8_gemm_ws._consumer
        first = k_tiles * 0 + (CHUNK - OFF)
        acc0 = gl.zeros((WM, N0), gl.float32, m0)
        acc1 = gl.zeros((WM, N1), gl.float32, m1)
        acc2 = gl.zeros((WM, N2), gl.float32, m2)
        p0 = gl.zeros((WM, N0), gl.float32, m0)
        p1 = gl.zeros((WM, N1), gl.float32, m1)
        p2 = gl.zeros((WM, N2), gl.float32, m2)
        it = 0
        for tile in range(gl.program_id(0), num_pid_m * num_pid_n, NPROG):
            for c in range(_n_chunks(k_tiles, chunk, first)):
                c0, c1 = _chunk(c, k_tiles, chunk, first)
                if A_REGS:
                    # the chunk as straight-line runs of 16, 8, 4, 2, 1 k tiles (its length's binary
                    # digits), each drained at its end: no MMA in flight across a branch or back edge
                    it0 = it
                    for r in gl.static_range(5):
                        if ((c1 - c0) & (RS_RUN >> r)) != 0:
                            for j in gl.static_range(RS_RUN >> r):
                                p0, p1, p2 = _ktile_rs(a_bufs, b0_bufs, b1_bufs, b2_bufs, ready, empty, it + j,
                                                       it + j > it0, p0, p1, p2, WG, j > 0, j == (RS_RUN >> r) - 1,
                                                       d0, d1, d2)
                            it += RS_RUN >> r
                else:
                    for kk in range(c0, c1):  # each wgmma reads A from shared memory
                        st = it % S
                        mbarrier.wait(ready.index(st), (it // S) & 1)
                        a_s = a_bufs.index(st).slice(WG * WM, WM, dim=0)
                        fresh = kk > c0  # False: the chunk's first MMA starts the partial sums afresh
                        p0 = warpgroup_mma(a_s, b0_bufs.index(st).permute((1, 0)), p0, use_acc=fresh, is_async=True)
                        p1 = warpgroup_mma(a_s, b1_bufs.index(st).permute((1, 0)), p1, use_acc=fresh, is_async=True)
                        p2 = warpgroup_mma(a_s, b2_bufs.index(st).permute((1, 0)), p2, use_acc=fresh, is_async=True)
                        p0, p1, p2 = warpgroup_mma_wait(3, deps=(p0, p1, p2))  # this k tile's three in flight
                        mbarrier.arrive(empty.index((it + S - 1) % S), pred=kk > c0)  # the previous one's are done
                        it += 1
                p0, p1, p2 = warpgroup_mma_wait(0, deps=(p0, p1, p2))
                if not A_REGS:
                    mbarrier.arrive(empty.index((it + S - 1) % S))
                acc0 = acc0 + p0  # promotion into fp32
                acc1 = acc1 + p1
                acc2 = acc2 + p2
            pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
            om = pid_m * BM + WG * WM
            on = pid_n * WN
            tma.store_wait(0)  # the previous tile's stores have left c*_smem
            _store(acc0, c0_desc, c0_smem, SA, SB, M, N, om, on, S_STRIDE, m0)
            _store(acc1, c1_desc, c1_smem, SA, SB, M, N, om, on + N0, S_STRIDE, m1)
            _store(acc2, c2_desc, c2_smem, SA, SB, M, N, om, on + N0 + N1, S_STRIDE, m2)
            acc0 = gl.zeros((WM, N0), gl.float32, m0)
            acc1 = gl.zeros((WM, N1), gl.float32, m1)
            acc2 = gl.zeros((WM, N2), gl.float32, m2)
        tma.store_wait(0)

    # one function per consumer warpgroup and A source: a partition's arguments arrive as IR values
    # (even ints and bools), so WG and A_REGS, which choose code, are fixed here as literals
    @gluon.jit
    def _c0_smem(a_bufs, b0_bufs, b1_bufs, b2_bufs, ready, empty, c0_desc, c1_desc, c2_desc, c0_smem, c1_smem,
                 c2_smem, SA, SB, M, N, K, S_STRIDE, CHUNK, STAGGER, GROUP_M, NPROG):
        _consumer(a_bufs, b0_bufs, b1_bufs, b2_bufs, ready, empty, c0_desc, c1_desc, c2_desc, c0_smem, c1_smem,
                  c2_smem, SA, SB, M, N, K, S_STRIDE, 0, CHUNK, STAGGER, GROUP_M, NPROG, False)

    @gluon.jit
    def _c1_smem(a_bufs, b0_bufs, b1_bufs, b2_bufs, ready, empty, c0_desc, c1_desc, c2_desc, c0_smem, c1_smem,
                 c2_smem, SA, SB, M, N, K, S_STRIDE, CHUNK, STAGGER, GROUP_M, NPROG):
        _consumer(a_bufs, b0_bufs, b1_bufs, b2_bufs, ready, empty, c0_desc, c1_desc, c2_desc, c0_smem, c1_smem,
                  c2_smem, SA, SB, M, N, K, S_STRIDE, 1, CHUNK, STAGGER, GROUP_M, NPROG, False)

    @gluon.jit
    def _c0_regs(a_bufs, b0_bufs, b1_bufs, b2_bufs, ready, empty, c0_desc, c1_desc, c2_desc, c0_smem, c1_smem,
                 c2_smem, SA, SB, M, N, K, S_STRIDE, CHUNK, STAGGER, GROUP_M, NPROG):
        _consumer(a_bufs, b0_bufs, b1_bufs, b2_bufs, ready, empty, c0_desc, c1_desc, c2_desc, c0_smem, c1_smem,
                  c2_smem, SA, SB, M, N, K, S_STRIDE, 0, CHUNK, STAGGER, GROUP_M, NPROG, True)

    @gluon.jit
    def _c1_regs(a_bufs, b0_bufs, b1_bufs, b2_bufs, ready, empty, c0_desc, c1_desc, c2_desc, c0_smem, c1_smem,
                 c2_smem, SA, SB, M, N, K, S_STRIDE, CHUNK, STAGGER, GROUP_M, NPROG):
        _consumer(a_bufs, b0_bufs, b1_bufs, b2_bufs, ready, empty, c0_desc, c1_desc, c2_desc, c0_smem, c1_smem,
                  c2_smem, SA, SB, M, N, K, S_STRIDE, 1, CHUNK, STAGGER, GROUP_M, NPROG, True)

    @gluon.jit(do_not_specialize=["S_STRIDE"])
    def _fp8_gemm_ws112(a_desc, b0_desc, b1_desc, b2_desc, c0_desc, c1_desc, c2_desc, SA, SB, M, N, K, S_STRIDE,
                        STAGES: gl.constexpr, CHUNK: gl.constexpr, STAGGER: gl.constexpr, GROUP_M: gl.constexpr,
                        NPROG: gl.constexpr, A_REGS: gl.constexpr, CONSUMER_REGS: gl.constexpr):
        a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)
        b0_bufs = gl.allocate_shared_memory(b0_desc.dtype, [STAGES] + b0_desc.block_type.shape, b0_desc.layout)
        b1_bufs = gl.allocate_shared_memory(b1_desc.dtype, [STAGES] + b1_desc.block_type.shape, b1_desc.layout)
        b2_bufs = gl.allocate_shared_memory(b2_desc.dtype, [STAGES] + b2_desc.block_type.shape, b2_desc.layout)
        c00 = gl.allocate_shared_memory(c0_desc.dtype, c0_desc.block_type.shape, c0_desc.layout)  # warpgroup 0
        c01 = gl.allocate_shared_memory(c1_desc.dtype, c1_desc.block_type.shape, c1_desc.layout)
        c02 = gl.allocate_shared_memory(c2_desc.dtype, c2_desc.block_type.shape, c2_desc.layout)
        c10 = gl.allocate_shared_memory(c0_desc.dtype, c0_desc.block_type.shape, c0_desc.layout)  # warpgroup 1
        c11 = gl.allocate_shared_memory(c1_desc.dtype, c1_desc.block_type.shape, c1_desc.layout)
        c12 = gl.allocate_shared_memory(c2_desc.dtype, c2_desc.block_type.shape, c2_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(STAGES):
            mbarrier.init(ready.index(i), count=1)
            mbarrier.init(empty.index(i), count=2)  # both consumers' MMAs over the stage
        bufs = (a_bufs, b0_bufs, b1_bufs, b2_bufs, ready, empty, c0_desc, c1_desc, c2_desc)
        common = (SA, SB, M, N, K, S_STRIDE, CHUNK, STAGGER, GROUP_M, NPROG)
        args0 = bufs + (c00, c01, c02) + common
        args1 = bufs + (c10, c11, c12) + common
        largs = (a_desc, b0_desc, b1_desc, b2_desc, a_bufs, b0_bufs, b1_bufs, b2_bufs, ready, empty, M, N, K, GROUP_M,
                 NPROG)
        if A_REGS:
            gl.warp_specialize([(_c0_regs, args0), (_c1_regs, args1), (_loader, largs)], [4, 1], [CONSUMER_REGS, 24])
        else:
            gl.warp_specialize([(_c0_smem, args0), (_c1_smem, args1), (_loader, largs)], [4, 1], [CONSUMER_REGS, 24])
        for i in gl.static_range(STAGES):
            mbarrier.invalidate(ready.index(i))
            mbarrier.invalidate(empty.index(i))


def layouts():
    """The shared-memory layouts of A, B's three row blocks and C's three column blocks."""
    la = gl.NVMMASharedLayout.get_default_for([BLOCK, BLOCK], gl.float8e4nv)
    lb = [gl.NVMMASharedLayout.get_default_for([n, BLOCK], gl.float8e4nv) for n in NS]
    lc = [gl.NVMMASharedLayout.get_default_for([BLOCK // 2, n], gl.bfloat16) for n in NS]
    return la, lb, lc


def fp8_gemm_ws112(a, b, sa, sb, out=None, programs: int | None = None, stages: int = DEFAULT["stages"],
                   chunk: int = DEFAULT["chunk"], stagger: bool = DEFAULT["stagger"],
                   group_m: int = DEFAULT["group_m"], a_regs: bool = DEFAULT["a_regs"]):
    """a (M, K) fp8 e4m3, b (N, K) fp8 e4m3, sa/sb fp32 scalars (per-tensor) or (M,)/(N,)
    (per-row); bf16 out. Promotion every `chunk` k tiles of 128. a_regs: A read into registers
    once per k tile for the three chains (else each wgmma reads it from shared memory)."""
    import torch

    if a_regs and not 1 <= chunk < 2 * RUN:
        raise ValueError(f"gluon_ws112: with A in registers the promotion chunk is 1-{2 * RUN - 1} k tiles "
                         f"(got {chunk})")
    M, N, K, out, sa, sb = host_args("gluon_ws112", a, b, sa, sb, out)
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    la, lb, lc = layouts()
    tiles = triton.cdiv(M, BLOCK) * triton.cdiv(N, BN)
    nprog = min(programs or torch.cuda.get_device_properties(a.device).multi_processor_count, tiles)
    descs = ([TensorDescriptor.from_tensor(a, [BLOCK, BLOCK], la)]
             + [TensorDescriptor.from_tensor(b, [n, BLOCK], ly) for n, ly in zip(NS, lb)]
             + [TensorDescriptor.from_tensor(out, [BLOCK // 2, n], ly) for n, ly in zip(NS, lc)])
    _fp8_gemm_ws112[(nprog,)](*descs, sa, sb, M, N, K, int(sa.numel() != 1), STAGES=stages, CHUNK=chunk,
                              STAGGER=stagger, GROUP_M=group_m, NPROG=nprog, A_REGS=bool(a_regs), CONSUMER_REGS=232,
                              num_warps=4)
    return out
