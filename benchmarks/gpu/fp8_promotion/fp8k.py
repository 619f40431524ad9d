"""fp8 GEMM experiment kernels for issue 21 item 3 (accurate accumulation vs torch._scaled_mm):
where to promote the fp8 MMA's partial sum into the fp32 accumulator, and how to keep the
tensor cores busy around it. y = (A @ B^T) * sa * sb, A (M, K) e4m3, B (N, K) e4m3, bf16 out.
MODE 9 of fp8_tma_pchunk with SCALE_EARLY and P = 16 (every <= 2048) is registered in the lab as
variants triton_promote / triton_promote_tensor (kernels/fp8_gemm.py, issue 21 item 4); the rest
stays here. The measured rows and what they showed are in
benchmarks/results/gemm.md ("Against the targets", fp8), raw rows in
benchmarks/results/fp8_promotion_h100.json. Run with bench_fp8.py beside this file.

Kernels: fp8_tma (one program per tile, host TMA descriptors), fp8_tma_persistent (one
program per SM, tile loop flattened), fp8_tma_pchunk (persistent, one loop over (tile,
promotion chunk) work items with the k loop of the chunk inside, fused by Triton's
FuseNestedLoops), fp8_tma_splitn (pchunk with two half-width MMA chains), fp8_ptr (pointer loads).

MODE 0  fast accumulation: one MMA chain over the whole K (no promotion)
MODE 1  tl.dot(..., max_num_imprecise_acc=BK): Triton's own promotion every BK (the lab's v1)
MODE 2  flat k loop, part = dot(a, b, part), `if k % P == P-1: acc += part; part = 0`
        (Triton hoists the reset into a select on the in-flight accumulator: ptxas C7515)
MODE 3  two partial accumulators on alternate k tiles (Triton makes both MMAs synchronous)
MODE 4  promotion chunks as an outer loop around a k loop of min(P, left) tiles (not fused:
        the load pipeline drains at every chunk, ~1 us each)
MODE 5  reset written on the dot's input, tl.where(k % P == 0, 0, part) (synchronous MMA)
MODE 6/7  MODE 2 with the reset as part * 0 / part - part inside the if (still C7515/C7514)
MODE 8  pchunk with a constant inner trip count P (the nest is fused; TMA reads zeros past K)
MODE 9  MODE 8 with the chunk shortened to cdiv(k_tiles, cdiv(k_tiles, P)) (fewer wasted
        k steps): promotion at most every P * BK elements. The best accurate kernel measured.
"""
import triton
import triton.language as tl

BIG = 1 << 30  # max_num_imprecise_acc > BK: no Triton-side promotion, and blocks the acc+dot fold


@triton.jit
def _coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    num_in_group = GROUP_M * num_pid_n
    group_id = tile_id // num_in_group
    first_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + ((tile_id % num_in_group) % group_size_m)
    pid_n = (tile_id % num_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def _ktile(a_desc, b_desc, om, on, k_tiles, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
           MODE: tl.constexpr, P: tl.constexpr):
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    if MODE == 0:
        for ki in range(k_tiles):
            a = a_desc.load([om, ki * BK])
            b = b_desc.load([on, ki * BK])
            acc = tl.dot(a, b.T, acc)
    elif MODE == 1:
        for ki in range(k_tiles):
            a = a_desc.load([om, ki * BK])
            b = b_desc.load([on, ki * BK])
            acc = tl.dot(a, b.T, acc, max_num_imprecise_acc=BK)
    elif MODE == 2:
        part = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([om, ki * BK])
            b = b_desc.load([on, ki * BK])
            part = tl.dot(a, b.T, part)
            if (ki % P) == P - 1:
                acc += part
                part = tl.zeros((BM, BN), dtype=tl.float32)
        acc += part
    elif MODE == 4:
        # promotion chunks of P tiles as an outer loop, flattened with the inner k loop
        n_chunks = tl.cdiv(k_tiles, P)
        for c in tl.range(0, n_chunks, flatten=True):
            part = tl.zeros((BM, BN), dtype=tl.float32)
            for kk in range(0, tl.minimum(P, k_tiles - c * P)):
                ki = c * P + kk
                a = a_desc.load([om, ki * BK])
                b = b_desc.load([on, ki * BK])
                part = tl.dot(a, b.T, part)
            acc += part
    elif MODE == 6 or MODE == 7:
        # flat k loop; promotion in an if every P tiles. The reset is part * 0 (6) or
        # part - part (7) computed inside the if (after the wait), so no select on the
        # in-flight accumulator and no constant the canonicalizer can hoist out of the if.
        part = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([om, ki * BK])
            b = b_desc.load([on, ki * BK])
            part = tl.dot(a, b.T, part)
            if (ki % P) == P - 1:
                acc += part
                if MODE == 6:
                    part = part * 0.0
                else:
                    part = part - part
        acc += part
    elif MODE == 5:
        # reset expressed on the dot's input (select before the dot)
        part = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([om, ki * BK])
            b = b_desc.load([on, ki * BK])
            part = tl.dot(a, b.T, tl.where((ki % P) == 0, 0.0, part))
            if (ki % P) == P - 1:
                acc += part
        if (k_tiles % P) != 0:
            acc += part
    else:
        # MODE 3: two partial accumulators, two tiles per iteration (k_tiles even here)
        pa = tl.zeros((BM, BN), dtype=tl.float32)
        pb = tl.zeros((BM, BN), dtype=tl.float32)
        for kj in range(k_tiles // 2):
            ki = 2 * kj
            a0 = a_desc.load([om, ki * BK])
            b0 = b_desc.load([on, ki * BK])
            pa = tl.dot(a0, b0.T, pa)
            if (kj % P) == 0:
                acc += pb
                pb = tl.zeros((BM, BN), dtype=tl.float32)
            a1 = a_desc.load([om, ki * BK + BK])
            b1 = b_desc.load([on, ki * BK + BK])
            pb = tl.dot(a1, b1.T, pb)
            if (kj % P) == P - 1:
                acc += pa
                pa = tl.zeros((BM, BN), dtype=tl.float32)
        acc += pa + pb
    return acc


@triton.jit
def _epi(acc, SA, SB, om, on, BM: tl.constexpr, BN: tl.constexpr, ROW: tl.constexpr, M, N):
    if ROW:
        rm = om + tl.arange(0, BM)
        rn = on + tl.arange(0, BN)
        sa = tl.load(SA + rm, mask=rm < M, other=0.0)
        sb = tl.load(SB + rn, mask=rn < N, other=0.0)
        acc = acc * sa[:, None] * sb[None, :]
    else:
        acc = acc * (tl.load(SA) * tl.load(SB))
    return acc.to(tl.bfloat16)


@triton.jit
def fp8_tma(a_desc, b_desc, c_desc, SA, SB, M, N, K,
            ROW: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
            GROUP_M: tl.constexpr, MODE: tl.constexpr, P: tl.constexpr):
    """One program per output tile (grouped order)."""
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    pid_m, pid_n = _coords(pid, num_pid_m, num_pid_n, GROUP_M)
    om = pid_m * BM
    on = pid_n * BN
    acc = _ktile(a_desc, b_desc, om, on, tl.cdiv(K, BK), BM, BN, BK, MODE, P)
    c_desc.store([om, on], _epi(acc, SA, SB, om, on, BM, BN, ROW, M, N))


@triton.jit
def fp8_tma_persistent(a_desc, b_desc, c_desc, SA, SB, M, N, K,
                       ROW: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                       GROUP_M: tl.constexpr, MODE: tl.constexpr, P: tl.constexpr,
                       NUM_SMS: tl.constexpr, FLATTEN: tl.constexpr, WS: tl.constexpr):
    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    num_tiles = num_pid_m * num_pid_n
    for tile_id in tl.range(start, num_tiles, NUM_SMS, flatten=FLATTEN, warp_specialize=WS):
        pid_m, pid_n = _coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        om = pid_m * BM
        on = pid_n * BN
        acc = _ktile(a_desc, b_desc, om, on, k_tiles, BM, BN, BK, MODE, P)
        c_desc.store([om, on], _epi(acc, SA, SB, om, on, BM, BN, ROW, M, N))


@triton.jit
def _ptile(A, B, rm, rn, K, stride_am, stride_bn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
           MODE: tl.constexpr, P: tl.constexpr):
    """k loop over pointer loads (lab v1's addressing; M, N, K multiples of the tile here)."""
    rk = tl.arange(0, BK)
    a_ptr = A + rm[:, None].to(tl.int64) * stride_am + rk[None, :]
    b_ptr = B + rk[:, None] + rn[None, :].to(tl.int64) * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    k_tiles = tl.cdiv(K, BK)
    if MODE == 0:
        for ki in range(k_tiles):
            acc = tl.dot(tl.load(a_ptr), tl.load(b_ptr), acc)
            a_ptr += BK
            b_ptr += BK
    elif MODE == 1:
        for ki in range(k_tiles):
            acc = tl.dot(tl.load(a_ptr), tl.load(b_ptr), acc, max_num_imprecise_acc=BK)
            a_ptr += BK
            b_ptr += BK
    else:
        part = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):
            part = tl.dot(tl.load(a_ptr), tl.load(b_ptr), part)
            a_ptr += BK
            b_ptr += BK
            if (ki % P) == P - 1:
                acc += part
                part = tl.zeros((BM, BN), dtype=tl.float32)
        acc += part
    return acc


@triton.jit
def fp8_ptr(A, B, C, SA, SB, M, N, K, stride_am, stride_bn, stride_cm,
            ROW: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
            GROUP_M: tl.constexpr, MODE: tl.constexpr, P: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    pid_m, pid_n = _coords(pid, num_pid_m, num_pid_n, GROUP_M)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    acc = _ptile(A, B, rm, rn, K, stride_am, stride_bn, BM, BN, BK, MODE, P)
    out = _epi(acc, SA, SB, pid_m * BM, pid_n * BN, BM, BN, ROW, M, N)
    tl.store(C + rm[:, None].to(tl.int64) * stride_cm + rn[None, :], out)


@triton.jit
def fp8_tma_pchunk(a_desc, b_desc, c_desc, SA, SB, M, N, K,
                   ROW: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   GROUP_M: tl.constexpr, MODE: tl.constexpr, P: tl.constexpr,
                   NUM_SMS: tl.constexpr, FLATTEN: tl.constexpr, WS: tl.constexpr,
                   EPI_SUB: tl.constexpr = False, SCALE_EARLY: tl.constexpr = False,
                   RESET: tl.constexpr = 0):
    """Persistent; one outer loop over (tile, promotion chunk) work items, an inner k loop of
    P tiles chaining the MMA into `part`; acc += part after each chunk, the store after the
    last chunk of a tile. MODE 0: P = whole K (fast accumulation)."""
    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    num_tiles = num_pid_m * num_pid_n
    if MODE == 0:
        chunk = k_tiles
    else:
        chunk = P
    n_chunks = tl.cdiv(k_tiles, chunk)
    if MODE == 9:
        # same number of promotions, chunk shortened so n_chunks * chunk - k_tiles < n_chunks
        # (the k-steps past K read zeros through TMA: wasted MMA work)
        chunk = tl.cdiv(k_tiles, n_chunks)
    my_tiles = tl.cdiv(num_tiles - start, NUM_SMS)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for w in tl.range(0, my_tiles * n_chunks, flatten=FLATTEN, warp_specialize=WS):
        t = w // n_chunks
        c = w - t * n_chunks
        tile_id = start + t * NUM_SMS
        pid_m, pid_n = _coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        om = pid_m * BM
        on = pid_n * BN
        part = tl.zeros((BM, BN), dtype=tl.float32)
        if MODE == 8:
            n_inner = P  # constant trip count (TMA reads zeros past K), so the nest can be fused
        elif MODE == 9:
            n_inner = chunk  # loop-invariant, so the nest can still be fused
        else:
            n_inner = tl.minimum(chunk, k_tiles - c * chunk)
        for kk in range(0, n_inner):
            ki = c * chunk + kk
            a = a_desc.load([om, ki * BK])
            b = b_desc.load([on, ki * BK])
            part = tl.dot(a, b.T, part)
        if ROW and SCALE_EARLY:
            # issue the per-row / per-column scale loads before the final MMA wait
            last = c == n_chunks - 1
            rm = om + tl.arange(0, BM)
            rn = on + tl.arange(0, BN)
            sa = tl.load(SA + rm, mask=(rm < M) & last, other=0.0)
            sb = tl.load(SB + rn, mask=(rn < N) & last, other=0.0)
        if RESET == 1:
            # the tile's first promotion overwrites acc: acc * 0 + part (one FFMA per element);
            # only NaN/Inf in a previous tile's acc could leak (0 * Inf)
            acc = acc * (c != 0).to(tl.float32) + part
        else:
            acc += part
        if ROW and SCALE_EARLY:
            if c == n_chunks - 1:
                c_desc.store([om, on], (acc * sa[:, None] * sb[None, :]).to(tl.bfloat16))
        elif c == n_chunks - 1:
            if EPI_SUB:
                y = _epi(acc, SA, SB, om, on, BM, BN, ROW, M, N)
                y0, y1 = tl.split(tl.permute(tl.reshape(y, (BM, 2, BN // 2)), (0, 2, 1)))
                c_desc.store([om, on], y0)
                c_desc.store([om, on + BN // 2], y1)
            else:
                c_desc.store([om, on], _epi(acc, SA, SB, om, on, BM, BN, ROW, M, N))
        if RESET == 1:
            pass
        elif RESET == 2:
            acc = tl.where(c == n_chunks - 1, 0.0, acc)
        elif MODE == 8 or MODE == 9:
            # an if that yields acc breaks TritonGPUFuseNestedLoops (3.6): reset by a multiply
            acc = acc * (c != n_chunks - 1).to(tl.float32)
        else:
            if c == n_chunks - 1:
                acc = tl.zeros((BM, BN), dtype=tl.float32)


@triton.jit
def fp8_tma_splitn(a_desc, b_desc, c_desc, SA, SB, M, N, K,
                   ROW: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   GROUP_M: tl.constexpr, MODE: tl.constexpr, P: tl.constexpr,
                   NUM_SMS: tl.constexpr, FLATTEN: tl.constexpr, WS: tl.constexpr):
    """pchunk MODE 9 with the N tile as two half-width MMA chains (b_desc and c_desc blocks are
    BN // 2 wide): the left half's promotion can overlap the right half's MMA."""
    HN: tl.constexpr = BN // 2
    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    num_tiles = num_pid_m * num_pid_n
    n_chunks = tl.cdiv(k_tiles, P)
    chunk = tl.cdiv(k_tiles, n_chunks)
    my_tiles = tl.cdiv(num_tiles - start, NUM_SMS)
    acc_l = tl.zeros((BM, HN), dtype=tl.float32)
    acc_r = tl.zeros((BM, HN), dtype=tl.float32)
    for w in tl.range(0, my_tiles * n_chunks, flatten=FLATTEN, warp_specialize=WS):
        t = w // n_chunks
        c = w - t * n_chunks
        tile_id = start + t * NUM_SMS
        pid_m, pid_n = _coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        om = pid_m * BM
        on = pid_n * BN
        part_l = tl.zeros((BM, HN), dtype=tl.float32)
        part_r = tl.zeros((BM, HN), dtype=tl.float32)
        for kk in range(0, chunk):
            ki = c * chunk + kk
            a = a_desc.load([om, ki * BK])
            bl = b_desc.load([on, ki * BK])
            br = b_desc.load([on + HN, ki * BK])
            part_l = tl.dot(a, bl.T, part_l)
            part_r = tl.dot(a, br.T, part_r)
        acc_l += part_l
        acc_r += part_r
        if c == n_chunks - 1:
            if ROW:
                rm = om + tl.arange(0, BM)
                rn = on + tl.arange(0, HN)
                sa = tl.load(SA + rm, mask=rm < M, other=0.0)
                sbl = tl.load(SB + rn, mask=rn < N, other=0.0)
                sbr = tl.load(SB + rn + HN, mask=rn + HN < N, other=0.0)
                c_desc.store([om, on], (acc_l * sa[:, None] * sbl[None, :]).to(tl.bfloat16))
                c_desc.store([om, on + HN], (acc_r * sa[:, None] * sbr[None, :]).to(tl.bfloat16))
            else:
                s = tl.load(SA) * tl.load(SB)
                c_desc.store([om, on], (acc_l * s).to(tl.bfloat16))
                c_desc.store([om, on + HN], (acc_r * s).to(tl.bfloat16))
        keep = (c != n_chunks - 1).to(tl.float32)
        acc_l = acc_l * keep
        acc_r = acc_r * keep
