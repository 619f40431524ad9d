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
    epilogue   per warpgroup: scales (per-row vectors; per-tensor the same loads with stride 0),
               bf16, TMA store

Persistent over output tiles in grouped order (GROUP_M), one program per SM; with streamk=True
(variants "gluon_ws_sk*", the rejected attempt) the partial last wave's tiles are split by k over
all programs, partial sums handed to each tile's finisher through a workspace and flags. Measured
(round 15, both GPUs, graph replay): per-row 1.01-1.10x of _scaled_mm at every M >= 1024 shape
(8192^3 within 1 % either way across runs);
per-tensor behind v3 in 9 of 10 cells; stream-K 0.82x (2.2x the DRAM reads). Each MMA chain stays
inside its chunk's loop: with the chain carried through a branch, ptxas serialized the wgmma
pipeline (C7511, first build of round 15). Needs a Hopper GPU (sm_90) and Gluon; the operands
as fp8_gemm's TMA kernels take them (contiguous, K a multiple of 16, N of 8).
Measured: benchmarks/results/gemm.md, "Round 15".
"""
from __future__ import annotations

import triton

from ._gemm_common import tile_coords

try:  # Gluon: Triton >= 3.5 (the lab's GPU runs 3.6; the interpreter does not run Gluon)
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                                 warpgroup_mma_wait)
    # names that moved: Triton 3.6 (the lab's GPU) / 3.9 (CI, compile-checked only)
    _tma_load = tma.async_load if hasattr(tma, "async_load") else tma.async_copy_global_to_shared
    _tma_store = tma.async_store if hasattr(tma, "async_store") else tma.async_copy_shared_to_global
    _barrier = gl.thread_barrier if hasattr(gl, "thread_barrier") else gl.barrier
except ImportError:  # pragma: no cover - older Triton: the variant is unavailable
    gluon = None

BLOCK = 128  # tile M, N and K; each consumer warpgroup takes BLOCK // 2 rows
DEFAULT = dict(stages=5, chunk=16, stagger=True, group_m=8)  # round 15's pick on both GPUs


if gluon is not None:
    # The work split's arithmetic is plain integer Python (//, min, max, a bool times an int), so
    # the tests run these very functions on ints through .fn (as fp8_gemm's promote_chunks).
    @gluon.jit
    def _work(pid, tiles, SK_TILES, k_tiles, NPROG: gl.constexpr):
        """This program's work: its whole tiles (data-parallel, NPROG apart, among the first
        n_dp), then its stream-K range [s, e) of the last SK_TILES tiles' k iterations
        (tile-major), which touches those tiles from u0 on. -> (n_dp, items, s, e, u0)."""
        n_dp = tiles - SK_TILES
        t2 = SK_TILES * k_tiles
        s = pid * t2 // NPROG
        e = (pid + 1) * t2 // NPROG
        u0 = s // k_tiles
        n_sk = ((e - 1) // k_tiles - u0 + 1) * (e > s)
        return n_dp, (n_dp - pid + NPROG - 1) // NPROG + n_sk, s, e, u0  # pid < n_dp: see stream_k_tiles

    @gluon.jit
    def _item(j, pid, n_dp, s, e, u0, k_tiles, NPROG: gl.constexpr):
        """Work item j of this program: (tile, k0, k1), its k tiles [k0, k1)."""
        n_whole = (n_dp - pid + NPROG - 1) // NPROG
        sk = j >= n_whole
        u = u0 + j - n_whole
        tile = sk * (n_dp + u) + (1 - sk) * (pid + j * NPROG)
        k0 = sk * max(s - u * k_tiles, 0)
        k1 = sk * min(e - u * k_tiles, k_tiles) + (1 - sk) * k_tiles
        return tile, k0, k1

    @gluon.jit
    def _n_chunks(nk, CHUNK, FIRST):
        """Promotion chunks over nk k tiles: the first FIRST long (CHUNK - the warpgroup's offset),
        the others CHUNK, the last clipped."""
        return 1 + ((nk - FIRST) * (nk > FIRST) + CHUNK - 1) // CHUNK

    @gluon.jit
    def _chunk(c, nk, CHUNK, FIRST):
        """[c0, c1) of chunk c (FIRST <= CHUNK, so chunk 0 starts at 0)."""
        return (FIRST + (c - 1) * CHUNK) * (c > 0), min(FIRST + c * CHUNK, nk)

    @gluon.jit
    def _finisher_end(tile, k1, n_dp, k_tiles, pid, NPROG: gl.constexpr, t2):
        """One past the last program whose partial the item ending at k1 of `tile` must add: for a
        stream-K head short of K, the program holding the tile's last iteration (stream-K numbering
        u = tile - n_dp) + 1; else pid + 1 (nothing to add)."""
        short = k1 < k_tiles
        return short * (((tile - n_dp + 1) * k_tiles * NPROG - 1) // max(t2, 1) + 1) + (1 - short) * (pid + 1)

    @gluon.jit
    def _load_range(a_desc, b_desc, a_bufs, b_bufs, ready, empty, it, pid_m, pid_n, k0, k1):
        BM: gl.constexpr = a_desc.block_type.shape[0]
        BK: gl.constexpr = a_desc.block_type.shape[1]
        BN: gl.constexpr = b_desc.block_type.shape[0]
        S: gl.constexpr = a_bufs.type.shape[0]
        for kt in range(k0, k1):
            s = it % S
            mbarrier.wait(empty.index(s), ((it // S) & 1) ^ 1)
            mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            _tma_load(a_desc, [pid_m * BM, kt * BK], ready.index(s), a_bufs.index(s))
            _tma_load(b_desc, [pid_n * BN, kt * BK], ready.index(s), b_bufs.index(s))
            it += 1
        return it

    @gluon.jit
    def _loader(a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, SK_TILES, GROUP_M: gl.constexpr,
                NPROG: gl.constexpr):
        """One warp: the k tiles of every work item in the consumers' order, into the ring."""
        num_pid_m = gl.cdiv(M, a_desc.block_type.shape[0])
        num_pid_n = gl.cdiv(N, b_desc.block_type.shape[0])
        k_tiles = gl.cdiv(K, a_desc.block_type.shape[1])
        pid = gl.program_id(0)
        n_dp, n_mine, s, e, u0 = _work(pid, num_pid_m * num_pid_n, SK_TILES, k_tiles, NPROG)
        it = 0
        for j in range(n_mine):
            tile, k0, k1 = _item(j, pid, n_dp, s, e, u0, k_tiles, NPROG)
            pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
            it = _load_range(a_desc, b_desc, a_bufs, b_bufs, ready, empty, it, pid_m, pid_n, k0, k1)

    @gluon.jit
    def _store_tile(acc, c_desc, c_smem, SA, SB, M, N, om, on, S_STRIDE, mma: gl.constexpr):
        """acc * sa[rows] * sb[cols] (S_STRIDE 1: per-row scales; 0: per-tensor, the scalars read as
        vectors of one address: scalar loads crash Triton 3.6's lowering in this kernel, an
        AxisInfo assertion) in bf16 through c_smem and a TMA store."""
        rm = om + gl.arange(0, c_desc.block_type.shape[0], layout=gl.SliceLayout(1, mma))
        rn = on + gl.arange(0, c_desc.block_type.shape[1], layout=gl.SliceLayout(0, mma))
        sa = gl.load(SA + rm * S_STRIDE, mask=rm < M, other=0.0)
        sb = gl.load(SB + rn * S_STRIDE, mask=rn < N, other=0.0)
        y = acc * gl.expand_dims(sa, 1) * gl.expand_dims(sb, 0)
        tma.store_wait(0)  # the previous tile's store has left c_smem
        c_smem.store(y.to(c_desc.dtype))
        fence_async_shared()
        _tma_store(c_desc, [om, on], c_smem)

    @gluon.jit
    def _consumer(a_bufs, b_bufs, ready, empty, c_desc, c_smem, SA, SB, WS, FLAGS, M, N, K, SK_TILES, S_STRIDE,
                  WG: gl.constexpr, CHUNK: gl.constexpr, STAGGER: gl.constexpr,
                  GROUP_M: gl.constexpr, NPROG: gl.constexpr):
        """One warpgroup: rows [WG * 64, WG * 64 + 64) of every 128-row tile. Whole tiles first
        (data-parallel, NPROG apart), then its contiguous range of the last SK_TILES tiles' k
        iterations (stream-K): a range's first piece, unless it starts a tile, is a partial sum
        handed to the tile's finisher through WS and FLAGS; its last piece, if it starts a tile
        and ends short of K, is the finisher's, which adds the later programs' partials in order
        (deterministic) before the epilogue. With STAGGER the second warpgroup's chunks end half
        a chunk after the first's, so one drains its MMAs while the other's run."""
        BM: gl.constexpr = a_bufs.type.shape[1]
        BK: gl.constexpr = a_bufs.type.shape[2]
        BN: gl.constexpr = b_bufs.type.shape[1]
        WM: gl.constexpr = c_desc.block_type.shape[0]
        mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 32])
        OFF: gl.constexpr = (WG * (CHUNK // 2)) if STAGGER else 0
        num_pid_m = gl.cdiv(M, BM)
        num_pid_n = gl.cdiv(N, BN)
        k_tiles = gl.cdiv(K, BK)
        S: gl.constexpr = a_bufs.type.shape[0]
        FIRST: gl.constexpr = CHUNK - OFF  # the first promotion chunk of a work item is shorter by OFF
        pid = gl.program_id(0)
        n_dp, n_mine, s, e, u0 = _work(pid, num_pid_m * num_pid_n, SK_TILES, k_tiles, NPROG)
        t2 = SK_TILES * k_tiles
        # stream-K hand-over: a slot of WS (BM x BN fp32) and a flag per (program, warpgroup)
        wrow = gl.arange(0, WM, layout=gl.SliceLayout(1, mma)) + WG * WM
        wcol = gl.arange(0, BN, layout=gl.SliceLayout(0, mma))
        woff = gl.expand_dims(wrow, 1) * BN + gl.expand_dims(wcol, 0)
        zero = gl.arange(0, 128, layout=gl.BlockedLayout([1], [32], [4], [0])) * 0  # a lane per thread
        acc = gl.zeros((WM, BN), gl.float32, mma)
        part = gl.zeros((WM, BN), gl.float32, mma)
        it = 0
        for j in range(n_mine):
            tile, k0, k1 = _item(j, pid, n_dp, s, e, u0, k_tiles, NPROG)
            # the item's k tiles: the MMA chains into `part` (one group in flight) for a chunk, then
            # acc += part in fp32 (the promotion); chunks as _chunk. Each
            # chain stays inside its chunk's loop: carried through a branch, ptxas serialized the
            # wgmma pipeline (C7511, round 15's first build)
            nk = k1 - k0
            chunk = nk * 0 + CHUNK  # as values: constexpr arguments to these helpers hit Triton 3.6's
            first = nk * 0 + FIRST  # region-isolation bug ("arith.extsi ... defined outside the region")
            for c in range(_n_chunks(nk, chunk, first)):
                c0, c1 = _chunk(c, nk, chunk, first)
                st = it % S  # the chunk's first MMA starts the partial sum afresh
                mbarrier.wait(ready.index(st), (it // S) & 1)
                part = warpgroup_mma(a_bufs.index(st).slice(WG * WM, WM, dim=0), b_bufs.index(st).permute((1, 0)),
                                     part, use_acc=False, is_async=True)
                part = warpgroup_mma_wait(1, deps=(part, ))  # nothing else in flight: the partial as a tensor
                it += 1
                for kk in range(c0 + 1, c1):
                    st = it % S
                    mbarrier.wait(ready.index(st), (it // S) & 1)
                    part = warpgroup_mma(a_bufs.index(st).slice(WG * WM, WM, dim=0),
                                         b_bufs.index(st).permute((1, 0)), part, is_async=True)
                    part = warpgroup_mma_wait(1, deps=(part, ))
                    mbarrier.arrive(empty.index((it + S - 1) % S))  # the previous k tile's MMA is done
                    it += 1
                part = warpgroup_mma_wait(0, deps=(part, ))
                mbarrier.arrive(empty.index((it + S - 1) % S))
                acc = acc + part  # promotion into fp32
            if k0 > 0:  # a stream-K range's first piece, not the tile's head: a partial for the finisher
                gl.store(WS + pid * (BM * BN) + woff, acc)
                gl.atomic_add(FLAGS + (pid * 2 + WG) + zero, zero + 1, sem="release", scope="gpu")  # each thread's stores
            else:
                # a head short of K: the later programs holding the rest; their partials in order
                for q in range(pid + 1, _finisher_end(tile, k1, n_dp, k_tiles, pid, NPROG, t2)):
                    seen = gl.atomic_add(FLAGS + (q * 2 + WG) + zero, zero, sem="acquire", scope="gpu")
                    while gl.min(seen, axis=0) < 128:
                        seen = gl.atomic_add(FLAGS + (q * 2 + WG) + zero, zero, sem="acquire", scope="gpu")
                    acc = acc + gl.load(WS + q * (BM * BN) + woff)
                    _barrier()  # every thread has seen the flag before it is reset
                    gl.atomic_xchg(FLAGS + (q * 2 + WG), 0)  # for the next launch (and graph replays)
                pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
                _store_tile(acc, c_desc, c_smem, SA, SB, M, N, pid_m * BM + WG * WM, pid_n * BN, S_STRIDE, mma)
            acc = gl.zeros((WM, BN), gl.float32, mma)
        tma.store_wait(0)

    # one function per consumer warpgroup: a partition's arguments are flattened into IR values,
    # so its constexpr WG cannot be passed there (a Python int has no IR value)
    @gluon.jit
    def _consumer0(a_bufs, b_bufs, ready, empty, c_desc, c_smem, SA, SB, WS, FLAGS, M, N, K, SK_TILES, S_STRIDE,
                   CHUNK: gl.constexpr, STAGGER: gl.constexpr, GROUP_M: gl.constexpr,
                   NPROG: gl.constexpr):
        _consumer(a_bufs, b_bufs, ready, empty, c_desc, c_smem, SA, SB, WS, FLAGS, M, N, K, SK_TILES, S_STRIDE, 0,
                  CHUNK, STAGGER, GROUP_M, NPROG)

    @gluon.jit
    def _consumer1(a_bufs, b_bufs, ready, empty, c_desc, c_smem, SA, SB, WS, FLAGS, M, N, K, SK_TILES, S_STRIDE,
                   CHUNK: gl.constexpr, STAGGER: gl.constexpr, GROUP_M: gl.constexpr,
                   NPROG: gl.constexpr):
        _consumer(a_bufs, b_bufs, ready, empty, c_desc, c_smem, SA, SB, WS, FLAGS, M, N, K, SK_TILES, S_STRIDE, 1,
                  CHUNK, STAGGER, GROUP_M, NPROG)

    @gluon.jit(do_not_specialize=["S_STRIDE"])  # 0 as a constant: 332 bytes of spills (Triton 3.6)
    def _fp8_gemm_ws(a_desc, b_desc, c_desc, SA, SB, WS, FLAGS, M, N, K, SK_TILES, S_STRIDE,
                     STAGES: gl.constexpr, CHUNK: gl.constexpr, STAGGER: gl.constexpr, GROUP_M: gl.constexpr,
                     NPROG: gl.constexpr, CONSUMER_REGS: gl.constexpr):
        a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)
        b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
        c0 = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
        c1 = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(STAGES):
            mbarrier.init(ready.index(i), count=1)
            mbarrier.init(empty.index(i), count=2)  # both consumers' MMAs over the stage
        common = (SA, SB, WS, FLAGS, M, N, K, SK_TILES, S_STRIDE, CHUNK, STAGGER, GROUP_M, NPROG)
        gl.warp_specialize([
            (_consumer0, (a_bufs, b_bufs, ready, empty, c_desc, c0) + common),
            (_consumer1, (a_bufs, b_bufs, ready, empty, c_desc, c1) + common),
            (_loader, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, SK_TILES, GROUP_M, NPROG)),
        ], [4, 1], [CONSUMER_REGS, 24])
        for i in gl.static_range(STAGES):
            mbarrier.invalidate(ready.index(i))
            mbarrier.invalidate(empty.index(i))


def available() -> str | None:
    """None if the warp-specialized kernel can run here, else why not."""
    if gluon is None:
        return f"Gluon needs Triton >= 3.5 (this is {triton.__version__})"
    return hopper_missing("wgmma and setmaxnreg")


def hopper_missing(needs: str) -> str | None:
    """None on a Hopper GPU (sm_90), else why not, naming what the kernel `needs` of it."""
    import torch

    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        return f"needs a Hopper GPU (sm_90): {needs}"
    return None


def host_args(variant: str, a, b, sa, sb, out, need=None):
    """The warp-specialized fp8 kernels' launch checks and operands (Gluon's, and the CUDA C++ one
    with need=its own check): (M, N, K, out, sa, sb), out allocated (bf16) if None, the scales as
    flat fp32 vectors (one element: per-tensor); NotImplementedError naming the variant where the
    GPU or the operands do not suit (TMA: contiguous, K a multiple of 16, N of 8)."""
    import torch

    why = (need or available)()
    if why:
        raise NotImplementedError(f"{variant}: {why}")
    M, K = a.shape
    N = b.shape[0]
    if not (a.is_contiguous() and b.is_contiguous() and K % 16 == 0 and N % 8 == 0):
        raise NotImplementedError(f"{variant}: contiguous operands, K a multiple of 16 and N of 8 (TMA)")
    if out is None:
        out = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    return M, N, K, out, sa.reshape(-1).float(), sb.reshape(-1).float()


_SCRATCH: dict = {}  # (device, programs) -> (stream-K partials, flags): flags start at 0, finishers reset them


def stream_k_tiles(tiles: int, programs: int, k_tiles: int, streamk: bool = True) -> int:
    """How many of the last tiles go to stream-K: the partial last wave (tiles % programs), so every
    program gets as many k iterations as the others, give or take one. None if streamk is False,
    the tiles fill whole waves or are fewer than the programs, or the split would give a program
    fewer than 4 k tiles (its hand-over would cost more than it saves). The kernel's _work and
    _finisher_end assume what this ensures: every stream-K range non-empty, and at least as many
    data-parallel tiles as programs."""
    sk = tiles % programs if tiles > programs and streamk else 0
    return sk if sk * k_tiles >= 4 * programs else 0


def fp8_gemm_ws(a, b, sa, sb, out=None, programs: int | None = None, stages: int = DEFAULT["stages"],
                chunk: int = DEFAULT["chunk"], stagger: bool = DEFAULT["stagger"], group_m: int = DEFAULT["group_m"],
                streamk: bool = False):
    """a (M, K) fp8 e4m3, b (N, K) fp8 e4m3, sa/sb fp32 scalars (per-tensor) or (M,)/(N,)
    (per-row); bf16 out. Promotion every `chunk` k tiles of 128 (16: every 2048, as v3). streamk:
    the partial last wave's tiles split over all programs by k (variants gluon_ws_sk*; measured
    slower, 0.79-0.98x: benchmarks/results/gemm.md, "Round 15")."""
    import torch

    M, N, K, out, sa, sb = host_args("gluon_ws", a, b, sa, sb, out)
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    la = gl.NVMMASharedLayout.get_default_for([BLOCK, BLOCK], gl.float8e4nv)
    lc = gl.NVMMASharedLayout.get_default_for([BLOCK // 2, BLOCK], gl.bfloat16)
    tiles = triton.cdiv(M, BLOCK) * triton.cdiv(N, BLOCK)
    progs = programs or torch.cuda.get_device_properties(a.device).multi_processor_count
    sk = stream_k_tiles(tiles, progs, triton.cdiv(K, BLOCK), streamk)
    nprog = progs if sk else min(progs, tiles)
    key = (a.device, progs)
    if key not in _SCRATCH:
        _SCRATCH[key] = (torch.empty(progs * BLOCK * BLOCK, device=a.device, dtype=torch.float32),
                         torch.zeros(2 * progs, device=a.device, dtype=torch.int32))
    ws, flags = _SCRATCH[key]
    _fp8_gemm_ws[(nprog,)](
        TensorDescriptor.from_tensor(a, [BLOCK, BLOCK], la), TensorDescriptor.from_tensor(b, [BLOCK, BLOCK], la),
        TensorDescriptor.from_tensor(out, [BLOCK // 2, BLOCK], lc), sa, sb, ws, flags, M, N, K, sk,
        int(sa.numel() != 1), STAGES=stages, CHUNK=chunk, STAGGER=stagger, GROUP_M=group_m, NPROG=nprog,
        CONSUMER_REGS=232, num_warps=4)
    return out
